"""A RUNNING train job's first polls, before an epoch ended: the progress says why there is no
ETA (``progress.eta_note``, with the seconds since docker's StartedAt on the instance's clock);
once an epoch ended the ETA stands alone; an action without epochs gets no such note."""

from __future__ import annotations

import json

from tao_brev.verbs import status
from tests.conftest import validate
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, launched, poll_sections, state
from tests.unit.test_verbs_status_probe import status_line

STARTED_AT = 1796119200   # tests.unit.jobs.state()'s StartedAt, 2026-12-01T10:00:00Z


def started_line() -> str:
    """TAO's first line of a run ("Starting <Name> <action>."): no epoch yet."""
    return json.dumps({"date": "12/1/2026", "time": "10:00:05", "status": "STARTED", "verbosity": "INFO",
                       "message": "Starting Visual ChangeNet train."})


def poll(ctx, fake_brev, job_id: str, lines: list[str], now: int, action: str = "train") -> dict:
    """One poll at instance time ``now`` whose ``<action>/status.json`` holds ``lines``."""
    def files(token: str) -> str:   # __tb_progress: the file's header, then its lines
        return "\n".join([f"{token}:F {now - 10} {sum(map(len, lines))} {action}/status.json", *lines])

    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:progress", answer=sections(poll_sections(
        job_id, state(), now=str(now), **{f"{job_id}:progress": files})))
    answer, code = status.poll(ctx, job_id)
    assert code == 0 and answer["state"] == "RUNNING", answer
    validate("poll_status", {"ok": True, "progress": answer["progress"], "next": None, "next_note": "progress"})
    return answer["progress"]


def test_before_the_first_epoch_the_progress_says_why_there_is_no_eta(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    out = poll(ctx, fake_brev, job_id, [started_line()], now=STARTED_AT + 95)
    assert out.get("eta_s") is None and "epoch" not in out, out
    assert out["eta_note"] == ("no epoch finished yet (the container has run 95 s); "
                               "an ETA comes after the first epoch"), out


def test_before_the_status_file_exists_the_note_is_there_too(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    out = poll(ctx, fake_brev, job_id, [], now=STARTED_AT + 12)
    assert "(the container has run 12 s)" in out["eta_note"], out


def test_after_the_first_epoch_there_is_an_eta_and_no_note(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    out = poll(ctx, fake_brev, job_id, [started_line(), status_line(0, val_loss=0.9)], now=STARTED_AT + 70)
    assert out["epoch"] == 1 and out["eta_s"] is not None and out["eta_s"] > 0, out
    assert "eta_note" not in out, out


def test_an_evaluate_has_no_epochs_and_no_eta_note(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True, action="evaluate")
    out = poll(ctx, fake_brev, job_id, [started_line()], now=STARTED_AT + 95, action="evaluate")
    assert out["available"] is True and "eta_note" not in out, out
