"""poll_status --all in process: one round trip per instance for every unfinished job."""

from __future__ import annotations

from tao_brev.verbs import status
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, launched, state


def rows(*jobs: tuple) -> callable:
    """The ``jobs`` section of ``--all`` (``remote.read_all_jobs``): one row per container."""
    return lambda token: "\n".join(f"{token}:J\t{job_id}\t{docker_state}" for job_id, docker_state in jobs)


def test_all_polls_every_unfinished_job_with_one_round_trip_per_instance(ctx, fake_brev):
    first = launched(ctx, fake_brev)
    second = launched(ctx, fake_brev)
    other = launched(ctx, fake_brev, instance="gpu2")
    fake_brev.expect_ls(entry(), entry("gpu2"))
    fake_brev.expect_exec("box", "__tb_jobs 4", answer=sections(
        {"now": "1764590000", "jobs": rows((first, state()), (second, state("exited", 0)))}))
    fake_brev.expect_exec("gpu2", "__tb_jobs 4", answer=sections({"now": "1764590000", "jobs": rows()}))
    answer, code = status.poll_all(ctx)
    assert code == 0 and answer["ok"] is True, answer
    states = {job["job_id"]: job["state"] for job in answer["jobs"]}
    assert states == {first: "RUNNING", second: "COMPLETE", other: "UNKNOWN"}, answer   # no container on gpu2
    assert ctx.records.load(second)["terminal_state"] == "COMPLETE"
    assert len(fake_brev.exec_commands("box")) == 3   # two launches, one poll for both jobs


def test_all_with_no_records_answers_an_empty_list_without_calling_brev(ctx, fake_brev):
    answer, code = status.poll_all(ctx)
    assert code == 0 and answer["ok"] is True and answer["jobs"] == [] and fake_brev.calls == [], answer


def test_all_skips_terminal_jobs_and_answers_from_their_records(ctx, fake_brev):
    done = launched(ctx, fake_brev, no_spec_check=True)
    ctx.records.mark(done, "COMPLETE", message="seen complete", source="poller")
    live = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    sweep = fake_brev.expect_exec("box", "__tb_jobs 4", answer=sections(
        {"now": "1764590000", "jobs": rows((live, state()), (done, state("exited", 0)))}))
    answer, code = status.poll_all(ctx)
    states = {job["job_id"]: job["state"] for job in answer["jobs"]}
    assert code == 0 and states == {live: "RUNNING"}, answer   # --all: the unfinished jobs
    assert sweep.used == 1 and ctx.records.load(done)["transitions"][-1]["message"] == "seen complete"


def test_an_instance_that_does_not_answer_leaves_its_jobs_unknown_and_the_others_polled(ctx, fake_brev):
    here = launched(ctx, fake_brev, no_spec_check=True)
    there = launched(ctx, fake_brev, instance="gpu2", no_spec_check=True)
    fake_brev.expect_ls(entry(), entry("gpu2"))
    fake_brev.expect_exec("box", "__tb_jobs 4", answer=sections({"now": "1764590000", "jobs": rows((here, state()))}))
    fake_brev.expect_exec("gpu2", "__tb_jobs 4", raw=True, stderr="ssh: connect to host gpu2: Connection timed out\n",
                          exit=255, times=3)
    answer, code = status.poll_all(ctx)
    states = {job["job_id"]: job for job in answer["jobs"]}
    assert states[here]["state"] == "RUNNING", answer
    unreached = states[there]   # its own error, the others answered: one story per job
    assert unreached["ok"] is False and unreached["error"]["code"] == "TRANSPORT_FAILED", unreached
    assert answer["ok"] is (code == 0)
    assert ctx.records.load(there).get("terminal_state") is None
