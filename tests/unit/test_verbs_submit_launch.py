"""submit's launch in process: brev found and the instance RUNNING before a record opens, the
credentials copied before the ONE launch round trip, a failed copy closing the record with the
command that retries it."""

from __future__ import annotations

import re

import pytest

from tao_brev.errors import TaoBrevError
from tao_brev.vocabulary import JobState
from tao_brev.verbs import submit
from tao_brev.verbs.submit import SubmitRequest
from tests.unit.jobs import SPEC, entry
from tests.unit.leaks import assert_never_sent, printed, with_secrets

CONTAINER = "c0ffee" * 10


def request(**kw) -> SubmitRequest:
    base = dict(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet", action="train",
                spec=str(SPEC), inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"], no_spec_check=True)
    return SubmitRequest(**{**base, **kw})


def test_without_brev_on_path_nothing_is_recorded(ctx, fake_brev, tmp_path):
    ctx.env["PATH"] = str(tmp_path / "empty")
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, request())
    assert raised.value.code == "BREV_NOT_FOUND" and ctx.records.list() == [] and fake_brev.calls == []


def test_an_instance_brev_does_not_list_is_refused_before_a_record_opens(ctx, fake_brev):
    fake_brev.expect_ls(entry("other"), times=2)
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, request())
    assert raised.value.code == "UNKNOWN_INSTANCE" and ctx.records.list() == []
    assert fake_brev.exec_commands() == []


def test_a_failed_credential_copy_closes_the_record_and_launches_nothing(ctx, fake_brev):
    values = with_secrets(ctx, ["HF_TOKEN"])
    fake_brev.expect_ls(entry())
    fake_brev.expect("copy", re.compile(".+"), re.compile("box:.+"), stderr="scp: write: No space left on device\n",
                     exit=1)
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, request(env_names=["HF_TOKEN"]))
    exc = raised.value
    job_id = exc.details["answer"]["job_id"]
    assert "nothing was launched" in exc.message and f"--retry-of {job_id}" in exc.fix
    assert exc.details["answer"]["state"] == JobState.ERROR and fake_brev.exec_commands() == []
    assert ctx.records.load(job_id)["terminal_state"] == JobState.ERROR
    assert_never_sent(fake_brev, printed({"ok": False, "error": exc.to_json(), **exc.details["answer"]}),
                      values=values.values())


def test_an_auth_failure_logs_in_with_the_token_once_and_the_token_goes_nowhere_else(ctx, fake_brev):
    token = "brev-refresh-" + "T0k3nV4lu3x9Zq8Lm4Vb8N"
    ctx.env["BREV_API_TOKEN"] = token
    with_secrets(ctx, ["NGC_KEY"])
    fake_brev.ordered = True
    fake_brev.expect("ls", "--json", stderr="Error: 401 Unauthorized\n", exit=1)
    login = fake_brev.expect("login", "--token", token)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", "docker run -d", stdout=CONTAINER + "\n")
    answer, code = submit.submit(ctx, request())
    assert code == 0 and answer["state"] == JobState.RUNNING, answer
    assert login.used == 1
    others = [c for c in fake_brev.calls if c.args[:1] != ["login"]]
    assert all(token not in " ".join(c.args) + (c.command or "") + " ".join(c.env.values()) for c in others)
    assert token not in printed(answer)
