"""Reconciling a launch whose outcome is unknown (PENDING without a backend ref).

Used by submit after an ambiguous launch and by poll_status for a record left
PENDING (the agent was killed between ``open`` and the launch). The instance
is asked, under the job's launch lock (:func:`remote.reconcile_launch`), for
the container named after the job id - an idempotent read, retried with backoff:

* it exists -> adopt it: mark RUNNING with backend ref ``<instance>/<id>``;
* it does not -> mark ERROR with ``ERR_INFRA`` "never launched"; the instance
  keeps a tombstone so a launch still on its way (a killed agent's brev retry,
  a timed-out exec whose script still runs) refuses instead of starting a
  second copy; a new submit with ``--retry-of <id>`` is safe;
* the instance no longer exists (``brev ls``) -> ERROR "never launched" too;
* no answer, docker down, or the lock busy -> leave the record PENDING; the
  next poll tries again.

A launch still in progress (the sidecar names a live submit process on this
machine) is left alone.
"""

from __future__ import annotations

import os

from .. import redact, remote
from ..cli import Context, say
from ..docker_state import docker_error_code
from ..errors import TaoBrevError, TransportError
from ..records import now_iso

NEVER_LAUNCHED_FIX = "Nothing runs under this id: submit again with --retry-of {job_id}."
UNSETTLED_FIX = ("Run poll_status.py {job_id} later: it asks the instance again and adopts or closes this "
                 "launch. Do not resubmit yet.")
EXIT_EXISTS, EXIT_DOCKER_FAILED, EXIT_NONE, EXIT_BUSY = 0, 2, 5, 7


def launch_in_progress(sidecar: dict) -> bool:
    """True while the submit process that is launching this job is alive."""
    launch = sidecar.get("launch") or {}
    pid = launch.get("pid")
    if launch.get("state") != "launching" or not isinstance(pid, int) or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pending_launch(ctx: Context, record: dict, instance: str | None, source: str) -> dict:
    """Settle a launch of unknown outcome. Returns ``{"answer": {...}, "exit_code": n}``."""
    job_id = record["id"]
    if instance is None:
        return _never_launched(ctx, job_id, source, "the job was never sent to an instance (no instance recorded)")
    try:
        result = ctx.brev.exec(instance, remote.reconcile_launch(job_id), idempotent=True)
    except TransportError as exc:
        if _instance_gone(ctx, instance):
            return _never_launched(ctx, job_id, source, f"instance {instance} does not exist (not in brev ls)",
                                   code="UNKNOWN_INSTANCE")
        say(f"reconcile {job_id}: instance {instance} did not answer; the record stays PENDING")
        return _unsettled(job_id, exc)
    if result.exit_code == EXIT_EXISTS:
        backend_ref = f"{instance}/{job_id}"
        current = ctx.records.load(job_id)
        if not current.get("backend_ref") and not current.get("terminal_state"):   # not settled by another poller
            ctx.records.mark(job_id, "RUNNING", message="launch confirmed by reconciliation: container exists",
                             source=source, backend_ref=backend_ref)
        ctx.sidecars.update(job_id, launch={"state": "launched", "finished_at": now_iso(), "reconciled": True})
        return {"answer": {"ok": True, "state": "RUNNING", "backend_ref": backend_ref, "reconciled": "adopted",
                           "adopted": True}, "exit_code": 0}
    if result.exit_code == EXIT_NONE:
        return _never_launched(ctx, job_id, source, f"no container named {job_id} on {instance}")
    output = (result.stdout + result.stderr).strip()
    if result.exit_code == EXIT_BUSY:
        exc = TaoBrevError("LAUNCH_IN_PROGRESS", f"a launch of {job_id} still holds its lock on {instance}")
    elif result.exit_code == EXIT_DOCKER_FAILED:
        code = docker_error_code(output, default="REMOTE_COMMAND_FAILED")
        exc = TaoBrevError(code, f"cannot tell whether {job_id} was launched on {instance}: {redact.tail(output, 400)}")
    else:
        exc = TaoBrevError("REMOTE_COMMAND_FAILED", f"reconciling {job_id} on {instance} exited "
                           f"{result.exit_code}: {redact.tail(output, 400)}")
    say(f"reconcile {job_id}: {exc.message}; the record stays PENDING")
    return _unsettled(job_id, exc)


def _instance_gone(ctx: Context, instance: str) -> bool:
    """True only when ``brev ls`` answers and does not list ``instance``."""
    try:
        return ctx.brev.instance(instance) is None
    except TaoBrevError:
        return False


def _unsettled(job_id: str, exc: TaoBrevError) -> dict:
    fix = exc.fix if exc.code not in ("TRANSPORT_FAILED", "TRANSPORT_TIMEOUT") else UNSETTLED_FIX.format(job_id=job_id)
    return {"answer": {"ok": False, "state": "PENDING", "backend_ref": None, "reconciled": "unanswered",
                       "error": {**exc.to_json(), "fix": fix}}, "exit_code": exc.exit_code}


def _never_launched(ctx: Context, job_id: str, source: str, why: str, code: str = "NEVER_LAUNCHED") -> dict:
    ctx.records.mark(job_id, "ERROR", message=f"never launched: {why}", source=source, err_class="ERR_INFRA")
    ctx.sidecars.update(job_id, launch={"state": "never_launched", "finished_at": now_iso()})
    fix = NEVER_LAUNCHED_FIX.format(job_id=job_id)
    if code == "UNKNOWN_INSTANCE":
        fix = "Check the instance name with `brev ls`. " + fix
    error = TaoBrevError(code, f"job {job_id} was never launched: {why}", fix).to_json()
    return {"answer": {"ok": False, "state": "ERROR", "backend_ref": None, "reconciled": "never_launched",
                       "error": error}, "exit_code": 1}
