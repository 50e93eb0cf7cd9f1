"""poll_status --logs / --metrics in process: the sections one poll asks for, and what is read
from their answers (the log tail bounded and redacted, TAO's status.json as progress and KPIs)."""

from __future__ import annotations

import json

from tao_brev import remote
from tao_brev.verbs import status
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, launched, poll_sections, state
from tests.unit.leaks import SECRETS, assert_never_sent, printed, with_secrets


def status_line(epoch: int, **kpi) -> str:
    """One status.json line as TAO's StatusLogger writes it at the end of an epoch (0-based)."""
    return json.dumps({"date": "12/1/2026", "time": f"10:{epoch:02d}:00", "status": "RUNNING", "verbosity": "INFO",
                       "message": "Train metrics generated.", "epoch": epoch, "max_epoch": 9,
                       "time_per_epoch": "0:01:00", "kpi": kpi})


def progress(*lines: str, mtime: int = 1764583800):
    """The ``<id>:progress`` section: ``__tb_progress``'s file header, then the file's lines."""
    return lambda token: "\n".join([f"{token}:F {mtime} {sum(map(len, lines))} train/status.json", *lines])


def test_logs_asks_for_the_tail_and_answers_it_bounded_and_redacted(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    value = with_secrets(ctx, ["HF_TOKEN"])["HF_TOKEN"]
    fake_brev.expect_ls(entry())
    logs = "\n".join([f"step {i}" for i in range(30)] + [f"using token {value}"])
    poll = fake_brev.expect_exec("box", f"{job_id}:logs", answer=sections(
        poll_sections(job_id, state(), **{f"{job_id}:logs": logs})))
    answer, code = status.poll(ctx, job_id, log_lines=5)
    assert code == 0 and answer["state"] == "RUNNING", answer
    command = poll.calls[0].command
    assert remote.logs_tail(job_id, 5) in command
    assert remote.logs_if_exited(job_id, status.CLASSIFY_TAIL_LINES) in command   # the hint's tail: 200 lines
    text = answer["logs"] if isinstance(answer["logs"], str) else json.dumps(answer["logs"])
    assert "step 29" in text and "step 3\n" not in text
    shown = printed(answer)
    assert "using token" in shown and "step 29" in shown
    assert_never_sent(fake_brev, shown, values=[value])   # what was sent, and what the script prints


def test_metrics_reads_the_status_file_and_answers_each_kpi_best_and_last(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    lines = [status_line(0, val_loss=0.9), status_line(1, val_loss=0.4), status_line(2, val_loss=0.6)]
    poll = fake_brev.expect_exec("box", f"{job_id}:progress", answer=sections(
        poll_sections(job_id, state(), **{f"{job_id}:progress": progress(*lines)})))
    answer, code = status.poll(ctx, job_id, metrics=2)
    assert code == 0 and answer["state"] == "RUNNING", answer
    assert f"{remote.METRICS_BYTES}" in poll.calls[0].command   # --metrics reads up to 4 MiB of the file
    metrics = answer["metrics"]
    assert metrics["available"] is True and metrics["epochs_read"] == 3
    # TAO's epoch is 0-based (tao_status): the answer counts completed epochs, 1-based
    assert [e["epoch"] for e in metrics["epochs"]] == [2, 3] and metrics["truncated"] is True
    assert metrics["best"]["val_loss"]["best"] == {"value": 0.4, "epoch": 2}
    assert metrics["best"]["val_loss"]["last"] == {"value": 0.6, "epoch": 3}
    assert answer["progress"]["epoch"] == 3, answer["progress"]


def test_a_poll_without_metrics_reads_the_small_progress_window_only(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    poll = fake_brev.expect_exec("box", f"{job_id}:progress", answer=sections(
        poll_sections(job_id, state(), **{f"{job_id}:progress": progress(status_line(0, val_loss=0.9))})))
    answer, code = status.poll(ctx, job_id)
    assert code == 0 and "metrics" not in answer, answer
    assert str(remote.METRICS_BYTES) not in poll.calls[0].command and str(remote.PROGRESS_BYTES) in poll.calls[0].command


def test_bad_watch_flags_are_bad_input_before_any_brev_call(ctx, fake_brev):
    import pytest

    from tao_brev.errors import TaoBrevError

    job_id = launched(ctx, fake_brev, no_spec_check=True)
    for kw in ({"metrics": 0}, {"stall_after": -5.0}):
        with pytest.raises(TaoBrevError) as raised:
            status.poll(ctx, job_id, **kw)
        assert raised.value.exit_code == 2, kw
    assert len(fake_brev.calls) == 2   # the launch's listing and round trip only
    assert_never_sent(fake_brev, values=[SECRETS["NGC_KEY"]])
