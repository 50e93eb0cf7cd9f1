"""poll_status --wait --recover in process: what ends a chain without a resubmit."""

from __future__ import annotations

from tao_brev.verbs import recover
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, launched, poll_sections, state

TRACEBACK = ("Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/train.py\", line 12\n"
             "KeyError: 'dataset'")


def no_resubmit(argv):
    raise AssertionError(f"no resubmit was expected: {argv}")


def test_a_program_error_is_never_recovered(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(
        poll_sections(job_id, state("exited", 1), **{f"{job_id}:tail": TRACEBACK})))
    out, code = recover.recover(ctx, job_id, no_resubmit, recover.policy(2, None, None), interval=5.0)
    assert code == 1 and out["ok"] is False and out["state"] == "ERROR", out
    assert out["error"]["code"] == "JOB_FAILED" and out["hint"]["err_class"] == "ERR_PROGRAM"
    assert out["recovery"]["stopped"] == "ERR_PROGRAM" and out["recovery"]["attempts_used"] == 0
    assert out["recovery"]["first_job"] == job_id and out["recovery"]["max_attempts"] == 2
    assert [a["job_id"] for a in out["attempts"]] == [job_id]


def test_a_complete_job_ends_the_chain_with_its_cost(ctx, fake_brev, clock):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry(), times=2)
    states = iter([state(), state("exited", 0)])
    fake_brev.expect_exec("box", f"{job_id}:state", times=2,
                          answer=lambda call: sections(poll_sections(job_id, next(states)))(call))
    out, code = recover.recover(ctx, job_id, no_resubmit, recover.policy(1, None, None), interval=5.0)
    assert code == 0 and out["ok"] is True and out["state"] == "COMPLETE", out
    assert out["recovery"]["stopped"] is None and out["recovery"]["attempts_used"] == 0
    assert set(out["chain_cost"]) >= {"billed_s", "estimated_cost_usd"} and clock.slept == [5.0]
