"""GPUS_BUSY tells how long the busy job has left, in process: a poll that computes a RUNNING
job's ETA keeps it in the job's sidecar (``last_eta``), and a later submit refused because that job
holds the GPUs answers ``busy_eta_s`` (the ETA less the time since it was seen, floored at 0; null
when no poll saw one), says it in words, and its ``next`` waits on the busy job long enough."""

from __future__ import annotations

import shlex
from datetime import datetime, timedelta, timezone

import pytest

from tao_brev import nextstep
from tao_brev.isotime import parse_ts
from tao_brev.verbs import status
from tao_brev.verbs.submit import outcome
from tests.unit.fake_brev import sections
from tests.unit.jobs import SPEC, entry, launched, poll_sections, refused_busy, state
from tests.unit.test_verbs_status_probe import progress, status_line

ARGV = ["--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
        "--action", "train", "--spec", str(SPEC)]


def seen_ago(seconds: int) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds)).isoformat(timespec="seconds")


def refused(ctx, fake_brev, busy: str) -> dict:
    """A second submit on box, refused: ``busy`` holds all its GPUs. The answer as the script prints it."""
    exc = refused_busy(ctx, fake_brev, f"{outcome.GPUS_BUSY} {busy}=all\n")
    answer = {"ok": False, **exc.details["answer"], "error": exc.to_json()}
    return nextstep.submit(answer, 1, ARGV)


def waits_on(answer: dict, job_id: str) -> int:
    """The --timeout of ``next``, which must be the complete wait on ``job_id``."""
    words = shlex.split(answer["next"])
    assert words[0] == str(nextstep.SCRIPTS_DIR / "poll_status.py") and words[1:3] == [job_id, "--wait"], words
    assert f"poll_status.py {job_id} --wait" in answer["error"]["fix"]
    return int(words[words.index("--timeout") + 1])


def test_a_poll_that_computes_an_eta_keeps_it_with_the_time_it_was_seen(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:progress", answer=sections(
        poll_sections(job_id, state(), **{f"{job_id}:progress": progress(status_line(2, val_loss=0.5))})))
    answer, code = status.poll(ctx, job_id)
    eta = answer["progress"]["eta_s"]
    assert code == 0 and isinstance(eta, int), answer["progress"]
    kept = ctx.sidecars.load(job_id).last_eta
    assert kept["eta_s"] == eta
    assert abs((datetime.now(timezone.utc) - parse_ts(kept["seen_at"])).total_seconds()) < 60


def test_a_known_eta_is_what_is_left_of_it_now_and_the_wait_covers_it(ctx, fake_brev):
    busy = launched(ctx, fake_brev, no_spec_check=True)
    ctx.sidecars.update(busy, last_eta={"eta_s": 900, "seen_at": seen_ago(180)})
    answer = refused(ctx, fake_brev, busy)
    assert answer["busy_job"] == busy and 715 <= answer["busy_eta_s"] <= 720, answer
    assert "about 12 min left as of a poll 3 min ago" in answer["error"]["message"]
    assert "about 12 min left as of a poll 3 min ago" in answer["error"]["fix"]
    assert waits_on(answer, busy) >= answer["busy_eta_s"] + nextstep.WAIT_INTERVAL_S
    assert f"--timeout {waits_on(answer, busy)}" in answer["error"]["fix"]   # the fix's wait is next's


def test_an_eta_older_than_the_time_it_gave_is_floored_at_zero(ctx, fake_brev):
    busy = launched(ctx, fake_brev, no_spec_check=True)
    ctx.sidecars.update(busy, last_eta={"eta_s": 600, "seen_at": seen_ago(40 * 60)})
    answer = refused(ctx, fake_brev, busy)
    assert answer["busy_eta_s"] == 0, answer
    assert "has passed" in answer["error"]["message"] and "40 min ago" in answer["error"]["message"]
    assert waits_on(answer, busy) == nextstep.WAIT_TIMEOUT_S


def test_no_eta_seen_is_null_and_the_message_names_no_figure(ctx, fake_brev):
    busy = launched(ctx, fake_brev, no_spec_check=True)
    answer = refused(ctx, fake_brev, busy)
    assert answer["busy_job"] == busy and answer["busy_eta_s"] is None, answer
    message = answer["error"]["message"]
    assert "time left unknown" in message and " left as of " not in message and " min" not in message
    assert "no poll saw its ETA" in answer["error"]["fix"]
    assert waits_on(answer, busy) == nextstep.WAIT_TIMEOUT_S


def test_a_holder_that_is_no_job_of_this_state_dir_has_no_eta(ctx, fake_brev):
    launched(ctx, fake_brev, no_spec_check=True)
    answer = refused(ctx, fake_brev, "someone-elses_container")
    assert answer["busy_job"] == "someone-elses_container" and answer["busy_eta_s"] is None, answer


@pytest.mark.parametrize("last_eta", [{"eta_s": float("inf"), "seen_at": "now"}, {"eta_s": float("nan"), "seen_at": "now"},
                                      {"eta_s": -500, "seen_at": "now"}, {"eta_s": 1e30, "seen_at": "now"},
                                      {"eta_s": 600, "seen_at": "future"}, {"eta_s": "600", "seen_at": "now"},
                                      "600"], ids=["inf", "nan", "negative", "huge", "seen-later", "text", "no-object"])
def test_a_damaged_saved_eta_is_no_eta_and_the_refusal_still_answers(ctx, fake_brev, last_eta):
    busy = launched(ctx, fake_brev, no_spec_check=True)
    if isinstance(last_eta, dict):
        when = {"now": seen_ago(0), "future": seen_ago(-3650 * 86400)}[last_eta["seen_at"]]
        last_eta = {**last_eta, "seen_at": when}
    ctx.sidecars.update(busy, last_eta=last_eta)
    answer = refused(ctx, fake_brev, busy)
    assert answer["busy_job"] == busy and answer["busy_eta_s"] is None, answer
    assert "time left unknown" in answer["error"]["message"]
    assert waits_on(answer, busy) == nextstep.WAIT_TIMEOUT_S


def test_one_holder_with_no_known_time_left_makes_the_wait_unknown(ctx, fake_brev):
    timed = launched(ctx, fake_brev, no_spec_check=True)
    ctx.sidecars.update(timed, last_eta={"eta_s": 30, "seen_at": seen_ago(0)})
    refusal = refused_busy(ctx, fake_brev, f"{outcome.GPUS_BUSY} someone_else=all\n{outcome.GPUS_BUSY} {timed}=0\n")
    fields = refusal.details["answer"]
    assert fields["busy_job"] == "someone_else" and fields["busy_eta_s"] is None, fields
    assert "how long it has left is unknown" in refusal.fix
