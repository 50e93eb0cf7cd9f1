"""reconcile in process: a launch whose outcome is unknown (PENDING, no backend ref) is settled by
the next poll: the container adopted, or the job closed as never launched."""

from __future__ import annotations

from tao_brev import remote
from tao_brev.verbs import status, submit
from tao_brev.verbs.submit import SubmitRequest
from tests.unit.fake_brev import sections
from tests.unit.jobs import SPEC, entry, poll_sections, state

RESET = "ssh: connect to host box port 22: Connection reset by peer\n"


def unsettled_launch(ctx, fake_brev) -> str:
    """A submit whose launch and whose reconciliation both got no answer: PENDING, no backend ref."""
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", "docker run -d", raw=True, stderr=RESET, exit=1)
    fake_brev.expect_exec("box", "TAO_NEVER_LAUNCHED", raw=True, stderr=RESET, exit=1, times=4)   # once, then 3 reads
    fake_brev.expect_ls(entry())   # still listed: it may come back
    answer, code = submit.submit(ctx, SubmitRequest(
        instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet", action="train",
        spec=str(SPEC), inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"]))
    assert answer["state"] == "PENDING" and answer["reconciled"] == "unanswered" and code == 3, (code, answer)
    fake_brev.verify()
    record = ctx.records.load(answer["job_id"])
    assert record.get("backend_ref") is None and record["transitions"][-1]["state"] == "PENDING"
    return answer["job_id"]


def test_the_next_poll_adopts_a_container_that_exists(ctx, fake_brev):
    job_id = unsettled_launch(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    ask = fake_brev.expect_exec("box", "TAO_NEVER_LAUNCHED", stdout=state() + "\n")
    read = fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(poll_sections(job_id, state())))
    answer, code = status.poll(ctx, job_id)
    assert code == 0 and answer["state"] == "RUNNING" and answer["reconciled"] == "adopted", answer
    assert ask.calls[0].command == remote.reconcile_launch(job_id)
    assert ctx.records.load(job_id)["backend_ref"] == f"box/{job_id}"
    assert fake_brev.calls.index(ask.calls[0]) < fake_brev.calls.index(read.calls[0])   # settled, then read


def test_the_next_poll_closes_a_launch_that_never_happened(ctx, fake_brev):
    job_id = unsettled_launch(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", "TAO_NEVER_LAUNCHED", stdout="TAO_NEVER_LAUNCHED\n", exit=5)
    answer, code = status.poll(ctx, job_id)
    assert answer["state"] == "ERROR" and answer["reconciled"] == "never_launched", answer
    assert code == 1 and ctx.records.load(job_id)["terminal_state"] == "ERROR"
