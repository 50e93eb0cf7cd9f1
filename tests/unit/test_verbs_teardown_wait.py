"""poll_status --wait --teardown in process: the wait, then the teardown, in one answer."""

from __future__ import annotations

from tao_brev import remote
from tao_brev.verbs import teardown
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, expect_catalog, launched, state
from tests.unit.test_verbs_teardown_job import removed


def test_a_wait_then_teardown_carries_the_job_to_its_end(ctx, fake_brev, clock):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry(), times=4)   # two polls, the teardown's gate, the instance type
    states = iter([state(), state("exited", 0)])
    fake_brev.expect_exec("box", f"{job_id}:state", times=2, answer=lambda call: sections(
        {f"{job_id}:state": next(states), f"{job_id}:tail": "", f"{job_id}:progress": "",
         f"{job_id}:lastlog": ""})(call))
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=removed(state("exited", 0)))
    expect_catalog(fake_brev)
    answer, code = teardown.wait_and_teardown(ctx, job_id, interval=10.0)
    assert code == 0 and answer["ok"] is True and answer["state"] == "COMPLETE", answer
    assert answer["teardown"]["container_removed"] is True and answer["teardown"]["deleted"] == []
    assert clock.slept == [10.0]


def test_a_wait_then_teardown_that_runs_out_leaves_the_running_job_alone_and_is_no_failure(ctx, fake_brev, clock):
    from tao_brev import nextstep

    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry(), times=2)
    fake_brev.expect_exec("box", f"{job_id}:state", times=2, answer=sections(
        {f"{job_id}:state": state(), f"{job_id}:tail": "", f"{job_id}:progress": "", f"{job_id}:lastlog": ""}))
    answer, code = teardown.wait_and_teardown(ctx, job_id, interval=10.0, timeout=15.0)
    assert code == 0 and answer["ok"] is True and answer["waited_out"] is True and "error" not in answer, answer
    assert answer["state"] == "RUNNING" and "teardown" not in answer and "--timeout reached" in answer["teardown_skipped"]
    argv = [job_id, "--wait", "--teardown", "--interval", "10", "--timeout", "15"]
    assert nextstep.poll(answer, code, argv)["next"] == nextstep.command("poll_status.py", *argv)   # the same again
