"""``poll_status.py JOB_ID --wait --teardown``: the wait (``status.poll``), then the teardown
with its defaults, as one answer."""

from __future__ import annotations

from ... import progress as progress_mod
from ...context import Context, say
from ...errors import TaoBrevError
from ...model.answer_types import (PollAnswer, PollAnswerObserved, PollAnswerStallTeardown,
                                   PollAnswerStallTeardownResults, Results, TeardownAnswer)
from ...records import is_terminal
from .. import results as results_mod
from .. import status
from ..job_facts import results_instance_dir
from .job import teardown


def wait_and_teardown(ctx: Context, job_id: str, log_lines: int = 0, interval: float = 30.0,
                      timeout: float | None = None, price_per_hour: float | None = None,
                      metrics: int | None = None, stall_after: float | None = None) -> tuple[PollAnswer, int]:
    """``poll_status.py JOB_ID --wait --teardown``: carry the job to its end in one call.

    Wait until terminal (``status.poll``: the results are uploaded and verified
    there), then :func:`teardown` with its defaults: the container is removed and
    an instance this bundle owns is deleted unless something on it would be lost.
    A job still running at ``timeout`` (``waited_out``, or ``WAIT_TIMEOUT``) or whose instance is gone or stopped
    (``INSTANCE_LOST``: starting it again would bill) is not torn down
    (``teardown_skipped`` says why). A stalled job (``JOB_STALLED``) is torn down
    only when the caller gave ``stall_after`` explicitly (a stall is a heuristic;
    the explicit threshold is the request to act); the answer then carries
    ``stalled_s`` (seconds without a sign of life, also in ``cost.stalled_s``)
    and answers ``ok: true``, exit 0, the job CANCELED (``stall_teardown``: what was saved).
    Safe to kill and rerun at any point: verified results are not sent again, a deleted
    instance is not asked again.

    The answer is the poll's, with ``teardown`` (its answer) and the final ``cost``; what it
    says of the job now is after the teardown (:func:`_after_teardown`: state, results, progress,
    ``observed``).
    A teardown failure wins the exit code and ``error`` (the instance may still
    bill: rerun the same command); the job's own failure stays in ``state``.
    """
    out, code = status.poll(ctx, job_id, log_lines=log_lines, wait=True, interval=interval, timeout=timeout,
                            price_per_hour=price_per_hour, metrics=metrics, stall_after=stall_after)
    error = (out.get("error") or {}).get("code")
    stalled = error == "JOB_STALLED"
    if stalled and stall_after is None:
        out["teardown_skipped"] = (f"job {job_id} looks stalled (a heuristic), so nothing was removed: check "
                                   f"poll_status.py {job_id} --logs 50, then teardown.py {job_id}; or rerun "
                                   f"poll_status.py {job_id} --wait --teardown --stall-after SECONDS --timeout S "
                                   "to tear a stalled job down automatically")
        return out, code
    if not stalled and not is_terminal(out.get("state")) and error != "CONTAINER_GONE":
        why = error or f"--timeout reached after {out.get('waited_s', 0):.0f} s"
        gone = (out.get("observed") or {}).get("gone") == "instance"   # nothing left to cancel there
        out["teardown_skipped"] = (f"job {job_id} is {out.get('state')} ({why}): nothing was removed or deleted; "
                                   f"run teardown.py {job_id} to " + ("close its record (its instance is gone)"
                                                                      if gone else "cancel it"))
        return out, code
    if stalled:
        out["stalled_s"] = out["stall"]["idle_s"] or 0   # never None: a stalled stall has its idle seconds
        ctx.sidecars.update(job_id, cost={"stalled_s": out["stalled_s"]})   # the cost facts carry it from now on
        say(f"job {job_id} stalled for {out['stalled_s']} s (--stall-after {stall_after:g}): tearing it down")
    down: TeardownAnswer
    try:
        down, down_code = teardown(ctx, job_id, price_per_hour=price_per_hour)
    except TaoBrevError as exc:
        down, down_code = {"ok": False, "job_id": job_id, "error": exc.to_json()}, exc.exit_code
    return _with_teardown(ctx, job_id, out, code, down, down_code, stalled, stall_after)


def _with_teardown(ctx: Context, job_id: str, out: PollAnswer, code: int, down: TeardownAnswer, down_code: int,
                   stalled: bool, stall_after: float | None) -> tuple[PollAnswer, int]:
    """The wait's answer with the teardown's (``teardown``, the final ``cost``, the record's state)."""
    if "cost" in down:
        out["cost"] = down.pop("cost")
    out["teardown"] = down
    state = down.get("state")
    if state:   # one story: the answer's state is the record's after the teardown
        out["state"] = state
        if "terminal_state" in out and is_terminal(state):
            out["terminal_state"] = state
        _after_teardown(ctx, job_id, out, down, state)
    if down_code != 0:
        out.update({"ok": False, "error": down["error"]})
        code = down_code
    elif stalled and stall_after is not None:   # the stop that --stall-after asked for happened: done, not a failure
        out.pop("error", None)
        out.update({"ok": True, "stall_teardown": _stall_story(ctx, job_id, out, down, stall_after)})
        code = 0
    return out, code


def _after_teardown(ctx: Context, job_id: str, out: PollAnswer, down: TeardownAnswer, state: str) -> None:
    """What the answer shows as the job now is what the teardown left: the results as its upload and
    verification left them (the sidecar's), the progress of a job that ended, and, when the poll saw
    the job otherwise (a stalled RUNNING container, one already gone), the teardown's observation as
    ``observed``, the poll's kept as ``observed_before_teardown``."""
    sidecar = ctx.sidecars.load(job_id)
    if sidecar.results:
        out["results"] = results_mod.summary(sidecar.results)
    if is_terminal(state) and out.get("progress"):
        out["progress"] = progress_mod.after_end(out["progress"], state,
                                                 ctx.records.load(job_id).get("action") or "", job_id)
    before = out.get("observed")
    if before is None or before.get("state") == state:
        return
    removed = down.get("container_removed")
    now: PollAnswerObserved = {"state": state, "message": ("container removed by teardown" if removed
                                                           else "no container found at teardown")}
    if removed or before.get("gone") == "container":
        now["gone"] = "container"
    out.update({"observed": now, "observed_before_teardown": before, "message": now["message"]})


def _stall_story(ctx: Context, job_id: str, out: PollAnswer, down: TeardownAnswer,
                 stall_after: float) -> PollAnswerStallTeardown:
    """What the stall teardown did and what it kept: the job CANCELED after ``stalled_s`` without a
    sign of life, its last log lines saved here, its results where the teardown left them."""
    logs = ctx.sidecars.logs_path(job_id)
    results = out.get("results") or {}   # as the teardown's upload and verification left them
    on_instance = results_instance_dir(ctx.records.load(job_id), ctx.sidecars.load(job_id))
    return {"state": down.get("state"), "stalled_s": out.get("stalled_s"), "stall_after_s": stall_after,
            "logs_saved_to": str(logs) if logs.is_file() else None,
            "results": _results_part(results) if results else None,
            "results_saved_to": down.get("results_saved_to"),
            "results_dir_on_instance": None if down.get("instance_deleted") else on_instance,
            "results_destination": results.get("destination") if results.get("kind") == "s3" else None}


def _results_part(results: Results) -> PollAnswerStallTeardownResults:
    """``kind``, ``destination``, ``verified`` of ``results``, those it has."""
    part: PollAnswerStallTeardownResults = {}
    if "kind" in results:
        part["kind"] = results["kind"]
    if "destination" in results:
        part["destination"] = results["destination"]
    if "verified" in results:
        part["verified"] = results["verified"]
    return part
