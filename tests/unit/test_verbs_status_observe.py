"""One job's poll in process (``status.observe``): what the round trip's answer becomes, and the
cases that need no round trip or a second look (a terminal record, a lost instance)."""

from __future__ import annotations

import json

from tao_brev.vocabulary import JobState
from tao_brev.verbs import status
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, launched, poll_sections, state


def test_an_out_of_memory_kill_is_an_error_with_its_class_and_advice(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(
        poll_sections(job_id, state("exited", 137, OOMKilled=True))))
    out = status.observe(ctx, job_id)
    # the host's RAM ran out: the job's own settings (batch size, workers), not a flaky machine
    assert out["state"] == JobState.ERROR and out["hint"]["err_class"] == "ERR_PROGRAM", out
    assert "OOMKilled=true" in out["hint"]["evidence"] and "--retry-of" in out["hint"]["advice"]
    record = ctx.records.load(job_id)
    assert record["terminal_state"] == JobState.ERROR and '"ERR_PROGRAM"' in json.dumps(record)


def test_a_container_that_is_gone_is_not_called_complete(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(
        poll_sections(job_id, (1, f"Error: No such object: {job_id}"))))
    out = status.observe(ctx, job_id)
    assert out["state"] not in (JobState.COMPLETE, JobState.RUNNING), out
    assert ctx.records.load(job_id).get("terminal_state") != JobState.COMPLETE


def test_a_terminal_job_is_answered_from_its_record_without_a_second_write(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(poll_sections(job_id, state("exited", 0))))
    first = status.observe(ctx, job_id)
    transitions = len(ctx.records.load(job_id)["transitions"])
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(poll_sections(job_id, state("exited", 1))))
    second = status.observe(ctx, job_id)
    assert first["state"] == second["state"] == JobState.COMPLETE, second   # a terminal state never changes
    assert len(ctx.records.load(job_id)["transitions"]) == transitions


def test_an_instance_brev_no_longer_knows_is_a_lost_job_after_one_listing(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.ordered = True
    fake_brev.expect_ls(entry())   # the instance gate
    # brev's own error for a name it cannot resolve (tests/sim/brev_sim.py lookup, brev-cli's
    # "dev environment with id/name ... not found"): no frame, exit 1
    fake_brev.expect_exec("box", f"{job_id}:state", raw=True, stderr="dev environment with id/name box not found\n",
                          exit=1, times=1 + 2)   # an idempotent read is tried again (transport.READ_RETRIES)
    fake_brev.expect_ls()   # why: the listing no longer has it
    out = status.observe(ctx, job_id)
    # UNKNOWN, not ERROR: what ran is not known (its results may have reached S3); the record stays open
    assert out["state"] == JobState.UNKNOWN and out["hint"]["err_class"] == "ERR_INFRA", out
    assert out["hint"]["reason"] == "instance box deleted" and "no longer exists" in out["message"]
    assert ctx.records.load(job_id).get("terminal_state") is None


def test_a_poll_is_priced_from_the_type_submit_saw_with_no_brev_call(ctx, fake_brev):
    """submit's brev ls saw the instance type; with brev search's prices cached, the poll's cost
    names brev's price - no brev call beyond the poll's own listing and round trip."""
    from tao_brev import prices
    from tests.unit.jobs import expect_catalog

    job_id = launched(ctx, fake_brev, no_spec_check=True)
    expect_catalog(fake_brev)
    prices.catalog(ctx, lookup=True)
    fake_brev.verify()
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(poll_sections(job_id, state("exited", 0))))
    out = status.observe(ctx, job_id)
    fake_brev.verify()
    assert out["cost"]["instance_type"] == "g5.xlarge", out["cost"]
    assert out["cost"]["price_per_hour_usd"] == 1.006 and out["cost"]["price_source"] == "brev search", out["cost"]
    assert out["cost"]["estimated_cost_usd"] is not None
