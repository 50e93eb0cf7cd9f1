"""teardown's container round trip in process: the last state read and the container removed in
one ``brev exec``, the record closed with the state the backend reports (or CANCELED), once."""

from __future__ import annotations

import pytest

from tao_brev import remote
from tao_brev.errors import EXIT_UNREACHABLE, TaoBrevError
from tao_brev.vocabulary import JobState
from tao_brev.verbs import status, teardown
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, expect_catalog, launched, poll_sections, state
from tests.unit.leaks import assert_never_sent, printed, with_secrets

RESET = "ssh: connect to host box port 22: Connection reset by peer\n"


def removed(docker_state, logs: str = ""):
    return sections({"state": docker_state, "logs": logs, "rm": "", "own": ""})


def expect_teardown(fake_brev, job_id, docker_state, logs: str = ""):
    fake_brev.expect_ls(entry())   # the instance gate
    rm = fake_brev.expect_exec("box", remote.remove_container(job_id), answer=removed(docker_state, logs))
    fake_brev.expect_ls(entry())   # the instance type, for the cost facts
    expect_catalog(fake_brev)
    return rm


def test_a_job_that_had_already_failed_keeps_its_error_not_canceled(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    expect_teardown(fake_brev, job_id, state("exited", 1), logs="Traceback (most recent call last):\nKeyError: 'x'")
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 0 and answer["container_removed"] is True, answer
    assert answer["state"] == JobState.ERROR and ctx.records.load(job_id)["terminal_state"] == JobState.ERROR


def test_a_container_already_gone_closes_the_record_as_canceled(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    expect_teardown(fake_brev, job_id, (1, f"Error: No such object: {job_id}"))
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 0 and answer["state"] == JobState.CANCELED, answer
    assert ctx.records.load(job_id)["terminal_state"] == JobState.CANCELED


def test_a_teardown_of_a_finished_record_does_not_change_it(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(poll_sections(job_id, state("exited", 0))))
    assert status.poll(ctx, job_id)[0]["state"] == JobState.COMPLETE
    fake_brev.verify()
    expect_teardown(fake_brev, job_id, state("exited", 0))
    answer, code = teardown.teardown(ctx, job_id)
    record = ctx.records.load(job_id)
    assert code == 0 and answer["state"] == JobState.COMPLETE and record["terminal_state"] == JobState.COMPLETE
    assert [t["state"] for t in record["transitions"]].count(JobState.COMPLETE) == 1


def test_an_unanswered_removal_leaves_the_cancel_intent_and_the_next_poll_closes_it_canceled(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    # docker rm -f may run twice harmlessly: the round trip is tried again (transport.READ_RETRIES)
    fake_brev.expect_exec("box", remote.remove_container(job_id), raw=True, stderr=RESET, exit=255, times=3)
    fake_brev.expect_ls(entry())   # still listed: the instance is there, it did not answer
    with pytest.raises(TaoBrevError) as raised:
        teardown.teardown(ctx, job_id)
    assert raised.value.exit_code == EXIT_UNREACHABLE, raised.value.to_json()   # cli.run answers it: exit 3
    assert ctx.records.load(job_id).get("terminal_state") is None   # nothing is known: not closed
    assert ctx.sidecars.load(job_id).cancel                 # the intent, written before the round trip
    fake_brev.verify()
    # docker rm -f's SIGKILL reads as exit 137 (OOM-like); the intent makes it CANCELED
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(poll_sections(job_id, state("exited", 137))))
    out, _ = status.poll(ctx, job_id)
    assert out["state"] == JobState.CANCELED and ctx.records.load(job_id)["terminal_state"] == JobState.CANCELED, out


def test_the_saved_logs_and_answer_carry_no_secret_value(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    values = with_secrets(ctx, ["HF_TOKEN", "AWS_SECRET_ACCESS_KEY"])
    expect_teardown(fake_brev, job_id, state("exited", 1),
                    logs=f"token={values['HF_TOKEN']}\naws={values['AWS_SECRET_ACCESS_KEY']}")
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 0 and answer["container_removed"] is True, answer
    stored = (ctx.state_root / "jobs" / f"{job_id}.json").read_text() + str(ctx.sidecars.load(job_id))
    assert_never_sent(fake_brev, printed(answer), stored, values=values.values())
