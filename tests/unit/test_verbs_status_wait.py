"""poll_status in process: one job, --all, --wait (fake clock), over the fake brev."""

from __future__ import annotations

import re
import shlex

from tao_brev import nextstep, remote
from tao_brev.verbs import status
from tests.conftest import validate
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, launched, state
from tests.unit.test_verbs_status_probe import progress, status_line

UNANSWERED_READS = 8   # two polls of a launch nobody answered: each asks the instance, the transport retrying


def job_answer(job_id: str, docker_state: str, **more) -> dict:
    """The sections one poll's round trip answers for ``job_id``."""
    return {f"{job_id}:state": docker_state, f"{job_id}:tail": "", f"{job_id}:progress": "",
            f"{job_id}:lastlog": "", **more}


def test_one_poll_reads_the_state_in_one_round_trip(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    poll = fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(job_answer(job_id, state())))
    answer, code = status.poll(ctx, job_id)
    assert code == 0 and answer["ok"] is True and answer["state"] == "RUNNING", answer
    assert answer["polls"] == 1 and answer["job_id"] == job_id and answer["instance"] == "box"
    assert remote.inspect_state(job_id) in poll.calls[0].command


def test_a_poll_that_finds_the_container_exited_marks_the_job_complete_once(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(job_answer(job_id, state("exited", 0))))
    answer, code = status.poll(ctx, job_id)
    assert code == 0 and answer["state"] == "COMPLETE", answer
    record = ctx.records.load(job_id)
    assert record["transitions"][-1]["state"] == "COMPLETE" and record["transitions"][-1]["source"] == "poller"


def test_a_wait_polls_until_terminal_sleeping_the_interval(ctx, fake_brev, clock):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry(), times=3)
    answers = iter([state(), state(), state("exited", 1)])
    fake_brev.expect_exec("box", f"{job_id}:state", times=3,
                          answer=lambda call: sections(job_answer(job_id, next(answers)))(call))
    answer, code = status.poll(ctx, job_id, wait=True, interval=30.0)
    assert code == 1 and answer["ok"] is False and answer["state"] == "ERROR", answer
    assert answer["error"]["code"] == "JOB_FAILED" and answer["polls"] == 3
    assert clock.slept == [30.0, 30.0]


WAIT_ARGV = ["--wait", "--interval", "30", "--timeout", "45"]


def timeout_of(command: str) -> int:
    words = shlex.split(command)
    return int(words[words.index("--timeout") + 1])


def test_a_wait_that_runs_out_on_a_running_job_is_no_failure_and_waits_again(ctx, fake_brev, clock):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry(), times=2)
    fake_brev.expect_exec("box", f"{job_id}:state", times=2, answer=sections(job_answer(job_id, state())))
    answer, code = status.poll(ctx, job_id, wait=True, interval=30.0, timeout=45.0)
    assert code == 0 and answer["ok"] is True and "error" not in answer, answer
    assert answer["state"] == "RUNNING" and answer["waited_out"] is True and answer["waited_s"] == 30.0
    assert answer["polls"] == 2 and clock.slept == [30.0]
    nxt = nextstep.poll(answer, code, [job_id, *WAIT_ARGV])["next"]   # no ETA known: the same wait again
    validate("poll_status", answer)
    assert nxt == nextstep.command("poll_status.py", job_id, *WAIT_ARGV), nxt


def test_a_wait_that_runs_out_waits_again_long_enough_for_the_known_eta(ctx, fake_brev, clock):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry(), times=2)
    fake_brev.expect_exec("box", f"{job_id}:state", times=2, answer=sections(job_answer(
        job_id, state(), **{f"{job_id}:progress": progress(status_line(2, val_loss=0.5))})))
    answer, code = status.poll(ctx, job_id, wait=True, interval=30.0, timeout=45.0)
    eta = answer["progress"]["eta_s"]
    assert code == 0 and answer["waited_out"] is True and eta > 45, answer
    nxt = nextstep.poll(answer, code, [job_id, *WAIT_ARGV])["next"]
    assert shlex.split(nxt)[:3] == [str(nextstep.SCRIPTS_DIR / "poll_status.py"), job_id, "--wait"], nxt
    assert timeout_of(nxt) == nextstep.covering_timeout(45, eta, 30) and timeout_of(nxt) > eta


def test_a_wait_whose_last_poll_could_not_read_the_job_still_ends_wait_timeout(ctx, fake_brev, clock):
    from tests.unit.test_verbs_reconcile import RESET, unsettled_launch

    job_id = unsettled_launch(ctx, fake_brev)
    fake_brev.expect_ls(entry(), times=4)   # per poll: the instance gate, and "is it still listed?"
    fake_brev.expect_exec("box", "TAO_NEVER_LAUNCHED", raw=True, stderr=RESET, exit=1, times=UNANSWERED_READS)
    answer, code = status.poll(ctx, job_id, wait=True, interval=30.0, timeout=45.0)
    assert code == 1 and answer["ok"] is False and answer["error"]["code"] == "WAIT_TIMEOUT", answer
    assert "waited_out" not in answer and answer["waited_s"] == 30.0 and answer["state"] == "PENDING"
    assert "could not read" in answer["error"]["message"]
    done = nextstep.poll(answer, code, [job_id, *WAIT_ARGV])
    assert done["next"] == nextstep.command("poll_status.py", job_id, *WAIT_ARGV) and done["next"] in done["error"]["fix"]


def test_a_stopped_instance_is_never_started_by_a_poll(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry(status="STOPPED"))
    answer, code = status.poll(ctx, job_id)
    assert code == 1 and answer["error"]["code"] == "INSTANCE_STOPPED", answer
    assert answer["instance_status"] == "STOPPED" and len(fake_brev.exec_commands()) == 1   # the launch only


def test_a_poll_with_start_wakes_a_stopped_instance_and_says_it_bills_again(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.ordered = True
    fake_brev.expect_ls(entry(status="STOPPED"))
    wake = fake_brev.expect_exec("box", re.compile(r"^echo ok$"), banner="Instance box is starting.\n", stdout="ok\n")
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(job_answer(job_id, state("exited", 137))))
    answer, code = status.poll(ctx, job_id, start=True)
    assert wake.calls[0].timeout > 1200   # brev's own start wait is added to the exec budget
    assert ctx.brev.started == {"box"}    # cli.run then puts instance_started (it bills again) in the answer
    assert answer["state"] == "ERROR" and code == 0, answer
