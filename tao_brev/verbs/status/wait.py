"""``poll_status.py JOB_ID [--wait]``: one poll, or polls until the job settles, and the
error each way a wait can end (failed, canceled, lost, stalled, results unsafe). A wait that
reaches its --timeout on a job it reads is no failure (``waited_out``); only one whose last poll
could not read the job ends WAIT_TIMEOUT."""

from __future__ import annotations

from ... import cost, docker_state, resume_advice
from ... import progress as progress_mod
from ...context import Context, note_job, note_state, say
from ...errors import CODES, TaoBrevError
from ...model.answer_types import ErrorObject, PollAnswer, PollAnswerJobsItem, Progress, Results
from ...records import check_job_id, current_state, is_terminal
from ...vocabulary import ErrClass, JobState
from .. import results as results_mod
from ..recovery_chain import recovering_command
from .observe import observe


def poll(ctx: Context, job_id: str, log_lines: int = 0, wait: bool = False,
         interval: float = 30.0, timeout: float | None = None,
         price_per_hour: float | None = None, metrics: int | None = None,
         stall_after: float | None = None, start: bool = False) -> tuple[PollAnswer, int]:
    """status (``wait=False``) or wait-until-terminal. Exit 0, or 1 when the wait
    ended in ERROR/CANCELED/lost, or found the job stalled (JOB_STALLED: RUNNING with
    no status line and no log output for longer than the threshold). A wait that
    reaches ``timeout`` answers the job as it is, ok, with ``waited_out`` and
    ``waited_s`` (:func:`_waited_out`; WAIT_TIMEOUT, exit 1, when its last poll could
    not read the job).
    A wait goes on through a launch not settled yet (PENDING, ``reconciled:
    "unanswered"``: the instance did not answer, or a launch holds the lock);
    ``timeout`` bounds it. A read the transport gave up on after its own retries
    ends the wait (TRANSPORT_FAILED, exit 3; the same command again is safe)."""
    cost.check_price(price_per_hour)
    check_watch(metrics, stall_after)
    note_job(check_job_id(job_id))   # every answer of this run names the job, an interrupt's too
    try:
        note_state(current_state(ctx.records.load(job_id)))   # the recorded state until a poll reads one
    except TaoBrevError:
        pass   # the poll below answers it
    started = ctx.clock()
    polls = 0
    while True:
        polls += 1
        out = observe(ctx, job_id, log_lines, price_per_hour, metrics=metrics, stall_after=stall_after, start=start)
        note_state(out.get("state"))   # an interrupted wait reports it
        ended = _ended(ctx, job_id, out, polls, wait, started, timeout, interval)
        if ended is not None:
            return ended
        say(f"poll {job_id}: {out['state']} ({out.get('message', '')}){progress_note(out.get('progress'))}; "
            f"next poll in {interval:.0f} s")
        ctx.sleep(interval)


def _ended(ctx: Context, job_id: str, out: PollAnswerJobsItem, polls: int, wait: bool, started: float,
           timeout: float | None, interval: float) -> tuple[PollAnswer, int] | None:
    """The (answer, exit code) that ends the poll after this ``out``, or None: poll again."""
    # A launch whose outcome the instance did not tell yet (no answer, lock busy) is not an end:
    # --wait asks again, as it does for a RUNNING job whose instance did not answer.
    unsettled = out.get("state") == JobState.PENDING and out.get("reconciled") == "unanswered"
    if out.get("error") and out.get("state") != JobState.RUNNING and not (wait and unsettled):
        code = CODES.get(out["error"]["code"])
        return {"ok": False, **out, "polls": polls}, code.exit_code if code else 1
    state = out["state"]
    if not wait:
        return {"ok": True, **out, "polls": polls}, 0
    if is_terminal(state):
        return _terminal(ctx, job_id, out, polls)
    err = _wait_error(job_id, out)
    if err is not None:
        return {"ok": False, **out, "polls": polls, "error": _with_resume(ctx, job_id, err, out)}, 1
    if timeout is not None and ctx.clock() - started + interval > timeout:
        return _waited_out(ctx, job_id, out, polls, started)
    return None


def _waited_out(ctx: Context, job_id: str, out: PollAnswerJobsItem, polls: int,
                started: float) -> tuple[PollAnswer, int]:
    """The wait reached its --timeout on a job that is not terminal: the job as the last poll read it,
    ok (``waited_out``, ``waited_s``; ``next`` waits again), or WAIT_TIMEOUT (exit 1) when that poll
    could not read it (the instance did not answer: an ``error`` beside RUNNING, a launch unanswered)."""
    waited = round(ctx.clock() - started, 1)
    if out.get("error") or out.get("reconciled") == "unanswered":
        last = f" (last error: {out['error']['code']})" if out.get("error") else ""
        err = TaoBrevError("WAIT_TIMEOUT", f"job {job_id} still {out['state']} after {waited:.0f} s, and the last "
                                           f"poll could not read it{last}")
        return {"ok": False, **out, "polls": polls, "waited_s": waited,
                "error": _with_resume(ctx, job_id, err, out)}, 1
    say(f"wait on {job_id}: --timeout reached after {waited:.0f} s; the job is {out['state']}, not finished")
    return {"ok": True, **out, "polls": polls, "waited_out": True, "waited_s": waited}, 0


def timed_out(out: PollAnswer) -> bool:
    """The wait's answer ran out of --timeout before the job ended (read or not)."""
    return bool(out.get("waited_out")) or (out.get("error") or {}).get("code") == "WAIT_TIMEOUT"


def _terminal(ctx: Context, job_id: str, out: PollAnswerJobsItem, polls: int) -> tuple[PollAnswer, int]:
    """A wait that reached a terminal state: done (COMPLETE, its S3 results verified), else its error."""
    state = out["state"]
    if state == JobState.COMPLETE:
        unverified = _unverified_results(job_id, out.get("results"))
        if unverified is not None:   # the documented contract: the job ended, its S3 results did not
            known = CODES.get(unverified["code"])
            return {"ok": False, **out, "polls": polls, "error": unverified}, known.exit_code if known else 1
        return {"ok": True, **out, "polls": polls}, 0
    code = "JOB_FAILED" if state == JobState.ERROR else "JOB_CANCELED"
    err = TaoBrevError(code, f"job {job_id} ended {state}: {out.get('message', '')}",
                       failed_fix(job_id, out) if state == JobState.ERROR else None)
    return {"ok": False, **out, "polls": polls, "error": _with_resume(ctx, job_id, err, out)}, 1


def _wait_error(job_id: str, out: PollAnswerJobsItem) -> TaoBrevError | None:
    """Why a wait on a job that is not terminal ends now as a failure (lost, stalled), or None."""
    state = out["state"]
    if state == JobState.UNKNOWN:
        lost = (out.get("observed") or {}).get("gone") == "instance"   # a fact, never the message's words
        return TaoBrevError("INSTANCE_LOST" if lost else "CONTAINER_GONE",
                            f"job {job_id} is UNKNOWN: {out.get('message', '')}")
    if out.get("stalled"):
        stall = out["stall"]
        return TaoBrevError("JOB_STALLED", f"job {job_id} is RUNNING but wrote nothing for {stall['idle_s']} s "
                                           f"(threshold {stall['threshold_s']} s, {stall['threshold_source']})")
    return None


def _with_resume(ctx: Context, job_id: str, err: TaoBrevError, out: PollAnswerJobsItem) -> ErrorObject:
    """The error as JSON, its fix naming the exact resume command (``resume_advice.fill``; the
    recovering command when the chain remembers one)."""
    return resume_advice.fill_job(ctx, job_id, {"error": err.to_json()}, recovering_command(ctx, job_id),
                                  out.get("hint"))["error"]


def failed_fix(job_id: str, out: PollAnswerJobsItem) -> str:
    """JOB_FAILED's fix for this answer: the cause is in ``hint`` (and the log tail, when this
    answer carries it); only an answer without logs sends the reader to read them."""
    read = ("the log tail is in this answer (logs)" if out.get("logs")
            else f"read the log tail: poll_status.py {job_id} --logs 200")
    if (out.get("hint") or {}).get("err_class") == ErrClass.INFRA:   # not the program's fault: continue it
        return (f"Act on hint.advice (the cause, from docker's record and the logs; {read}), then resubmit: "
                f"{docker_state.RESUME}.")
    return (f"Act on hint.advice (the cause, from docker's record and the logs; {read}; classes: "
            f"references/failure-classes.md), then submit again with --retry-of {job_id} (a link: it starts "
            f"from scratch; after a fix that keeps the model, {docker_state.RESUME}).")


def check_watch(metrics: int | None, stall_after: float | None) -> None:
    """``--metrics N`` in 1..METRICS_MAX_EPOCHS, ``--stall-after S`` > 0 (BAD_ARGUMENT otherwise)."""
    if metrics is not None and not 1 <= metrics <= progress_mod.METRICS_MAX_EPOCHS:
        raise TaoBrevError("BAD_ARGUMENT", f"--metrics takes 1 to {progress_mod.METRICS_MAX_EPOCHS} epochs "
                                           f"(got {metrics})")
    if stall_after is not None and not stall_after > 0:
        raise TaoBrevError("BAD_ARGUMENT", f"--stall-after must be > 0 seconds (got {stall_after})")


def progress_note(progress: Progress | None) -> str:
    """`` - epoch 3/10 (30%), ETA 420 s`` (3 epochs completed of 10) for the stderr progress line
    ('' when unknown)."""
    if not progress or progress.get("epoch") is None:
        return ""
    eta = f", ETA {progress['eta_s']} s" if progress.get("eta_s") is not None else ""
    return f" - epoch {progress['epoch']}/{progress.get('num_epochs') or '?'} ({progress.get('percent', '?')}%){eta}"


def _unverified_results(job_id: str, results: Results | None) -> ErrorObject | None:
    """The error of S3-routed results that are not verified (RESULTS_UPLOAD_FAILED, S3_VERIFY_FAILED,
    or what stopped the attempt), else None."""
    if not results or results.get("kind") != "s3" or results.get("verified"):
        return None
    return results.get("error") or TaoBrevError(
        "RESULTS_UPLOAD_FAILED", f"the results of {job_id} are not uploaded to {results.get('destination')} yet: "
        + results_mod.describe_loss(results)).to_json()
