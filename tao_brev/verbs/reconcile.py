"""Reconciling a launch whose outcome is unknown (PENDING without a backend ref).

Used by submit after an ambiguous launch and by poll_status for a record left
PENDING (the agent was killed between ``open`` and the launch). The instance
is asked for the container named after the job id - an idempotent read,
retried with backoff:

* it exists -> adopt it: mark RUNNING with backend ref ``<instance>/<id>``;
* it does not -> mark ERROR with ``ERR_INFRA`` "never launched"; a new submit
  with ``--retry-of <id>`` is safe (nothing runs under this id);
* no answer -> leave the record PENDING; the next poll tries again.

A launch still in progress (the sidecar names a live submit process on this
machine) is left alone.
"""

from __future__ import annotations

import os

from .. import remote
from ..cli import Context, say
from ..errors import TaoBrevError, TransportError
from ..records import now_iso

NEVER_LAUNCHED_FIX = "Nothing runs under this id: submit again with --retry-of {job_id}."


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
        why = "the job was never sent to an instance (no instance recorded)"
        ctx.records.mark(job_id, "ERROR", message=f"never launched: {why}", source=source, err_class="ERR_INFRA")
        return {"answer": {"ok": False, "state": "ERROR", "reconciled": "never_launched",
                           "error": _never_launched(job_id, why)}, "exit_code": 1}
    try:
        result = ctx.brev.exec(instance, remote.inspect_state(job_id), idempotent=True)
    except TransportError as exc:
        say(f"reconcile {job_id}: instance {instance} did not answer; the record stays PENDING")
        return {"answer": {"ok": False, "state": "PENDING", "backend_ref": None, "reconciled": "unanswered",
                           "error": {**exc.to_json(),
                                     "fix": f"Run poll_status.py {job_id} later: it asks the instance again and "
                                            "adopts or closes this launch. Do not resubmit yet."}},
                "exit_code": exc.exit_code}
    backend_ref = f"{instance}/{job_id}"
    if result.ok:
        ctx.records.mark(job_id, "RUNNING", message="launch confirmed by reconciliation: container exists",
                         source=source, backend_ref=backend_ref)
        ctx.sidecars.update(job_id, launch={"state": "launched", "finished_at": now_iso(), "reconciled": True})
        return {"answer": {"ok": True, "state": "RUNNING", "backend_ref": backend_ref, "reconciled": "adopted",
                           "adopted": True}, "exit_code": 0}
    why = f"no container named {job_id} on {instance}"
    ctx.records.mark(job_id, "ERROR", message=f"never launched: {why}", source=source, err_class="ERR_INFRA")
    ctx.sidecars.update(job_id, launch={"state": "never_launched", "finished_at": now_iso()})
    return {"answer": {"ok": False, "state": "ERROR", "backend_ref": None, "reconciled": "never_launched",
                       "error": _never_launched(job_id, why)}, "exit_code": 1}


def _never_launched(job_id: str, why: str) -> dict:
    return TaoBrevError("NEVER_LAUNCHED", f"job {job_id} was never launched: {why}",
                        NEVER_LAUNCHED_FIX.format(job_id=job_id)).to_json()
