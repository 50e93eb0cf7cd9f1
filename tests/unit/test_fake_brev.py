"""The fake itself: unexpected and missing calls fail, answers are framed as the transport reads them,
and the transport's own rules (argv secrets, brev's environment) still run in front of it."""

from __future__ import annotations

import re

import pytest

from tao_brev.errors import TaoBrevError, TransportError
from tests.unit.fake_brev import FakeBrev, UnexpectedBrevCall, sections


def test_an_unexpected_call_raises_and_fails_the_test(ctx):
    fake = FakeBrev()
    with pytest.MonkeyPatch.context() as patch:
        fake.install(patch)
        with pytest.raises(UnexpectedBrevCall):
            ctx.brev.ls()
    with pytest.raises(AssertionError, match="unexpected brev call:  ls --json"):
        fake.verify()


def test_a_missing_call_fails_the_test():
    fake = FakeBrev()
    fake.expect_ls()
    with pytest.raises(AssertionError, match=r"expected but not made \(1 left\): brev ls --json"):
        fake.verify()


def test_an_exec_answer_is_framed_and_unframed_by_the_transport(ctx, fake_brev):
    exp = fake_brev.expect_exec("box", re.compile(r"^uname -a$"), stdout="Linux box\n", stderr="warn\n", exit=3)
    result = ctx.brev.exec("box", "uname -a")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "Linux box\n", "warn\n")
    assert exp.calls[0].command == "uname -a" and exp.calls[0].instance == "box"


def test_a_raw_answer_without_a_frame_is_a_transport_failure(ctx, fake_brev):
    fake_brev.expect_exec("box", "true", raw=True, stderr="ssh: connect to host box: Connection refused\n", exit=1)
    with pytest.raises(TransportError) as raised:
        ctx.brev.exec("box", "true", timeout=5)
    assert raised.value.code == "TRANSPORT_FAILED"


def test_a_timeout_is_the_transport_timeout(ctx, fake_brev):
    fake_brev.expect_exec("box", "sleep", timeout=True)
    with pytest.raises(TransportError) as raised:
        ctx.brev.exec("box", "sleep 999", timeout=7)
    assert raised.value.code == "TRANSPORT_TIMEOUT" and "7 s" in raised.value.message


def test_sections_answer_only_what_the_command_asks_for(ctx, fake_brev):
    from tao_brev import remote

    token = remote.new_token()
    fake_brev.expect_exec("box", "echo a", answer=sections({"a": "one", "b": (2, "two"), "c": "unasked"}))
    script = "\n".join([remote.section(token, "a", "echo a"), remote.section(token, "b", "echo b")])
    parsed = remote.parse_sections(ctx.brev.exec("box", script).stdout, token)
    assert {k: (v.exit_code, v.output) for k, v in parsed.items()} == {"a": (0, "one"), "b": (2, "two")}


def test_the_transport_still_refuses_a_known_secret_on_brevs_command_line(ctx, fake_brev):
    ctx.env["NGC_KEY"] = "nvapi-Q2xhc3NpZmllZFNlY3JldFZhbHVl"
    from tao_brev.secrets import values as known_secrets

    known_secrets.observe_env(ctx.env)
    with pytest.raises(TaoBrevError) as raised:
        ctx.brev.copy("/tmp/nvapi-Q2xhc3NpZmllZFNlY3JldFZhbHVl", "box:x")
    assert raised.value.code == "SECRET_IN_COMMAND" and fake_brev.calls == []


def test_brev_gets_no_credential_in_its_environment(ctx, fake_brev):
    ctx.env.update(NGC_KEY="nvapi-Q2xhc3NpZmllZFNlY3JldFZhbHVl", AWS_SECRET_ACCESS_KEY="aws-secret-Zq7vT3mN9pL2xR8")
    exp = fake_brev.expect_ls()
    ctx.brev.ls()
    env = exp.calls[0].env
    assert "NGC_KEY" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["SSH_AUTH_SOCK"]   # set, so that brev's exec starts no ssh-agent


def test_an_ordered_script_refuses_a_call_out_of_turn(ctx, monkeypatch):
    fake = FakeBrev(ordered=True).install(monkeypatch)
    fake.expect("search", "gpu", "--json", stdout="[]")
    fake.expect_ls()
    with pytest.raises(UnexpectedBrevCall, match=r"expects brev search gpu --json next"):
        ctx.brev.ls()
    fake.unexpected.clear()
    assert ctx.brev.search("gpu") == [] and ctx.brev.ls() == []
    fake.verify()
