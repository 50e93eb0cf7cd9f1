"""Reconciling a launch whose outcome is unknown (PENDING without a backend ref).

Used by submit after an ambiguous launch and by poll_status for a record left
PENDING (the agent was killed between ``open`` and the launch). The instance
is asked, under the job's launch lock (:func:`remote.reconcile_launch`), for
the container named after the job id - an idempotent read, retried with backoff:

* it exists and ran (or runs) -> adopt it: mark RUNNING with backend ref ``<instance>/<id>``;
* it exists but docker could not start it (``created`` with ``State.Error``,
  moby ``daemon/start.go``) -> a failed launch: ERROR, ``ERR_INFRA``, the
  docker error as evidence and its code (e.g. ``NVIDIA_RUNTIME_MISSING``);
* it does not -> mark ERROR with ``ERR_INFRA`` "never launched"; the instance
  keeps a tombstone so a launch still on its way (a killed agent's brev retry,
  a timed-out exec whose script still runs) refuses instead of starting a
  second copy; a new submit with ``--retry-of <id>`` is safe;
* the instance does not exist (``brev ls``) -> ERROR "never launched" too
  (``UNKNOWN_INSTANCE``); when brev itself says it could not look the
  instance up, ``brev ls`` is asked at once, before any retry;
* no answer, docker down, or the lock busy -> leave the record PENDING; the
  next poll tries again.

A launch still in progress (the sidecar names a live submit process on this
machine) is left alone.

A job whose launch failed or never happened (sidecar ``launch.state`` in
:data:`NEVER_RAN`) gets ONE answer from then on, from its record and sidecar
with no round trip (:func:`launch_failure_answer`): every poll, with or
without ``--wait``, and ``--all`` until ``teardown.py JOB_ID`` closes it.
"""

from __future__ import annotations

import json
import os
from typing import Optional, TypedDict

from .. import remote
from ..secrets import redact
from ..context import Context, say, warn
from ..docker_state import DockerState, Observed, docker_error_code, from_inspect
from ..errors import TaoBrevError, TransportError
from ..fsio import pid_alive
from ..model import JobSidecar
from ..model.answer_types import ErrorObject, Hint
from ..model.answer_types import RecordDocument
from ..records import now_iso
from ..vocabulary import ErrClass, JobState, LaunchState

NEVER_LAUNCHED_FIX = ("Nothing runs under this id: submit again with --retry-of {job_id}; "
                      "teardown.py {job_id} closes this record.")
UNKNOWN_INSTANCE_FIX = ("No instance named {instance} exists (brev ls). Check the name with `brev ls`, then submit "
                        "again with the right --instance; teardown.py {job_id} closes this record.")
FAILED_START_FIX = "{fix} Then submit again with --retry-of {job_id}; teardown.py {job_id} removes the container."
# Sidecar launch states of a job that never ran: refused by the instance (submit saw docker run
# fail), never launched (reconciled: no container, or no instance), failed start (a created
# container docker could not start). Such a job wrote nothing.
NEVER_RAN = tuple(s for s in LaunchState if s.never_ran())
BREV_LOOKUP_FAILED = "could not look up instance"   # brev exec.go, after an ssh failure
UNSETTLED_FIX = ("Run poll_status.py {job_id} later: it asks the instance again and adopts or closes this "
                 "launch. Do not resubmit yet.")
EXIT_EXISTS, EXIT_DOCKER_FAILED, EXIT_NONE, EXIT_BUSY = 0, 2, 5, 7


class LaunchAnswer(TypedDict, total=False):
    """What a settled launch decides of an answer (poll_status's and submit's merge it into theirs)."""
    ok: bool
    state: str
    terminal_state: Optional[str]
    backend_ref: Optional[str]
    reconciled: str
    message: str
    hint: Hint
    error: ErrorObject
    closed_at: str


class AdoptedLaunch(LaunchAnswer, total=False):
    """The launch found its container (state RUNNING): only submit's answer carries ``adopted``."""
    adopted: bool


class Settled(TypedDict):
    """A launch of unknown outcome, settled (:func:`pending_launch`): the answer's part and the exit code."""
    answer: LaunchAnswer
    exit_code: int


def launch_in_progress(sidecar: JobSidecar) -> bool:
    """True while the submit process that is launching this job is alive."""
    launch = sidecar.launch or {}
    pid = launch.get("pid")
    if launch.get("state") != LaunchState.LAUNCHING or not isinstance(pid, int) or pid == os.getpid():
        return False
    return pid_alive(pid)


def pending_launch(ctx: Context, record: RecordDocument, instance: str | None, source: str,
                   cause: TaoBrevError | None = None) -> Settled:
    """Settle a launch of unknown outcome. Returns ``{"answer": {...}, "exit_code": n}``.

    ``cause``: the transport failure that made the launch ambiguous, if any. When
    brev said it could not look the instance up (there or on the first ask here),
    ``brev ls`` decides at once: an instance it does not list never ran anything
    (``UNKNOWN_INSTANCE``, no retries spent on it)."""
    job_id = record["id"]
    if instance is None:
        return _never_launched(ctx, job_id, source, "the job was never sent to an instance (no instance recorded)")
    if _brev_lookup_failed(cause) and _instance_gone(ctx, instance):
        return _no_instance(ctx, job_id, instance, source)
    try:
        try:
            result = ctx.brev.exec(instance, remote.reconcile_launch(job_id))
        except TransportError as first:
            if _brev_lookup_failed(first) and _instance_gone(ctx, instance):
                return _no_instance(ctx, job_id, instance, source)
            result = ctx.brev.exec(instance, remote.reconcile_launch(job_id), idempotent=True)
    except TransportError as exc:
        if _instance_gone(ctx, instance):
            return _no_instance(ctx, job_id, instance, source)
        warn(f"reconcile {job_id}: instance {instance} did not answer; the record stays PENDING")
        return _unsettled(job_id, exc)
    if result.exit_code == EXIT_EXISTS:
        failed = failed_start(result.stdout)
        if failed is not None:
            return start_failed(ctx, job_id, instance, source, failed)
        backend_ref = f"{instance}/{job_id}"
        current = ctx.records.load(job_id)
        if not current.get("backend_ref") and not current.get("terminal_state"):   # not settled by another poller
            ctx.records.mark(job_id, JobState.RUNNING, message="launch confirmed by reconciliation: container exists",
                             source=source, backend_ref=backend_ref)
        ctx.sidecars.update(job_id, launch={"state": LaunchState.LAUNCHED, "finished_at": now_iso(), "reconciled": True})
        adopted: AdoptedLaunch = {"ok": True, "state": JobState.RUNNING, "backend_ref": backend_ref,
                                  "reconciled": "adopted", "adopted": True}
        return {"answer": adopted, "exit_code": 0}
    if result.exit_code == EXIT_NONE:
        return _never_launched(ctx, job_id, source, f"no container named {job_id} on {instance}")
    output = (result.stdout + result.stderr).strip()
    if result.exit_code == EXIT_BUSY:
        problem = TaoBrevError("LAUNCH_IN_PROGRESS", f"a launch of {job_id} still holds its lock on {instance}")
    elif result.exit_code == EXIT_DOCKER_FAILED:
        code = docker_error_code(output, default="REMOTE_COMMAND_FAILED")
        problem = TaoBrevError(code, f"cannot tell whether {job_id} was launched on {instance}: "
                               f"{redact.tail(output, 400)}")
    else:
        problem = TaoBrevError("REMOTE_COMMAND_FAILED", f"reconciling {job_id} on {instance} exited "
                               f"{result.exit_code}: {redact.tail(output, 400)}")
    say(f"reconcile {job_id}: {problem.message}; the record stays PENDING")
    return _unsettled(job_id, problem)


def _brev_lookup_failed(exc: TaoBrevError | None) -> bool:
    """brev's own words after an ssh failure: it could not find the instance. Only a reason to
    ask ``brev ls`` at once (the fact); a logged-out brev says the same."""
    return exc is not None and BREV_LOOKUP_FAILED in exc.message


def failed_start(stdout: str) -> Optional[Observed]:
    """The JobState of a container docker created but could not start (``created`` + Error), else None."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            state: DockerState | None = json.loads(line)   # checked at once: docker's .State is an object
        except json.JSONDecodeError:
            continue
        if not isinstance(state, dict):
            return None
        observed = from_inspect(state)
        return observed if observed.state == JobState.ERROR and observed.docker_status == "created" else None
    return None


def start_failed(ctx: Context, job_id: str, instance: str, source: str, observed: Observed) -> Settled:
    """A created container docker could not start: a failed launch (ERROR, ERR_INFRA), its error as evidence."""
    backend_ref = f"{instance}/{job_id}"
    code = docker_error_code(observed.docker_error or "", default="SUBMIT_REFUSED")
    error = TaoBrevError(code, f"job {job_id} failed to launch on {instance}: docker created the container but "
                         f"could not start it (exit code {observed.exit_code}): "
                         f"{redact.tail(observed.docker_error or '', 400)}")
    error.fix = FAILED_START_FIX.format(fix=error.fix, job_id=job_id)
    current = ctx.records.load(job_id)
    if not current.get("terminal_state"):
        ctx.records.mark(job_id, JobState.ERROR, message=f"failed launch: {observed.message}", source=source,
                         backend_ref=backend_ref, err_class=ErrClass.INFRA)
    ctx.sidecars.update(job_id, launch={"state": LaunchState.START_FAILED, "finished_at": now_iso(), "reconciled": True,
                                        "error": error.to_json(), "hint": observed.hint})
    say(f"reconcile {job_id}: {error.message}")
    answer: LaunchAnswer = {"ok": False, "state": JobState.ERROR, "backend_ref": backend_ref,
                            "reconciled": LaunchState.NEVER_LAUNCHED, "message": observed.message}
    if observed.hint is not None:   # always: a failed start is an ERROR row, and every ERROR row has one
        answer["hint"] = observed.hint
    answer["error"] = error.to_json()
    return {"answer": answer, "exit_code": error.exit_code}


def _no_instance(ctx: Context, job_id: str, instance: str, source: str) -> Settled:
    return _never_launched(ctx, job_id, source, f"instance {instance} does not exist (not in brev ls)",
                           code="UNKNOWN_INSTANCE", instance=instance)


def _instance_gone(ctx: Context, instance: str) -> bool:
    """True only when ``brev ls`` answers and does not list ``instance``."""
    try:
        return ctx.brev.instance(instance) is None
    except TaoBrevError:
        return False


def _unsettled(job_id: str, exc: TaoBrevError) -> Settled:
    fix = exc.fix if exc.code not in ("TRANSPORT_FAILED", "TRANSPORT_TIMEOUT") else UNSETTLED_FIX.format(job_id=job_id)
    return {"answer": {"ok": False, "state": JobState.PENDING, "backend_ref": None, "reconciled": "unanswered",
                       "error": {**exc.to_json(), "fix": fix}}, "exit_code": exc.exit_code}


def _never_launched(ctx: Context, job_id: str, source: str, why: str, code: str = "NEVER_LAUNCHED",
                    instance: str | None = None) -> Settled:
    current = ctx.records.load(job_id)
    if not current.get("terminal_state"):
        ctx.records.mark(job_id, JobState.ERROR, message=f"never launched: {why}", source=source,
                         err_class=ErrClass.INFRA)
    fix = NEVER_LAUNCHED_FIX.format(job_id=job_id)
    if code == "UNKNOWN_INSTANCE":
        fix = UNKNOWN_INSTANCE_FIX.format(instance=instance, job_id=job_id)
    error = TaoBrevError(code, f"job {job_id} was never launched: {why}", fix).to_json()
    ctx.sidecars.update(job_id, launch={"state": LaunchState.NEVER_LAUNCHED, "finished_at": now_iso(), "error": error,
                                        **({"instance_missing": True} if code == "UNKNOWN_INSTANCE" else {})})
    return {"answer": launch_failure_answer(ctx, ctx.records.load(job_id), ctx.sidecars.load(job_id)),
            "exit_code": 1}


def launch_failed(sidecar: JobSidecar) -> bool:
    """The job never ran: its launch was refused, never happened, or docker could not start it."""
    return sidecar.never_ran


def container_may_exist(sidecar: JobSidecar) -> bool:
    """A refused launch or a failed start may have left a ``created`` container (moby keeps it):
    worth reading until a teardown removed it; never for an instance that did not exist."""
    launch = sidecar.launch or {}
    return (launch.get("state") in (LaunchState.REFUSED, LaunchState.START_FAILED) and not launch.get("instance_missing")
            and not sidecar.teardown and not sidecar.instance_deleted_at)


def never_ran_record(record: RecordDocument) -> bool:
    """A record this bundle closed ERROR because the job never ran (its terminal message says so);
    its sidecar's ``launch`` is the fact, this only picks the few records worth reading it for."""
    return record.get("terminal_state") == JobState.ERROR and any(
        str(t.get("message", "")).startswith(("never launched", "failed launch"))
        for t in record.get("transitions") or [])


def instance_missing(sidecar: JobSidecar) -> bool:
    """``brev ls`` did not list the job's instance when its launch was settled: it never existed."""
    return bool((sidecar.launch or {}).get("instance_missing"))


def launch_failure_answer(ctx: Context, record: RecordDocument, sidecar: JobSidecar) -> LaunchAnswer:
    """THE answer for a job whose launch failed or never happened, from its record and sidecar
    (no round trip): the same state, error code and fix on every poll, with or without --wait.
    ``ok`` false, exit 1 (the error's class). No logs advice: nothing ran."""
    job_id = record["id"]
    launch = sidecar.launch or {}
    why = _last_message(record) or "never launched"
    error: ErrorObject = launch.get("error") or TaoBrevError(
        launch.get("code") or "NEVER_LAUNCHED", f"job {job_id} never ran: {why}",
        NEVER_LAUNCHED_FIX.format(job_id=job_id)).to_json()
    hint: Hint = launch.get("hint") or Hint(err_class=ErrClass.INFRA, reason="never launched: nothing ran under this id",
                                            advice=error["fix"], evidence=[why])
    out: LaunchAnswer = {"ok": False, "state": JobState.ERROR, "terminal_state": record.get("terminal_state"),
                         "backend_ref": record.get("backend_ref"), "reconciled": LaunchState.NEVER_LAUNCHED,
                         "message": why, "hint": hint, "error": error}
    if sidecar.teardown:
        out["closed_at"] = sidecar.teardown.get("at", "")   # teardown writes it with the rest
    return out


def _last_message(record: RecordDocument) -> str:
    for transition in reversed(record.get("transitions") or []):
        if transition.get("state") == record.get("terminal_state") and transition.get("message"):
            return transition["message"]
    return ""
