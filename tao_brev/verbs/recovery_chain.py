"""The chain of a recovering job (``tao_brev.verbs.recover``): its policy, attempts and costs.

The first job's sidecar holds ``recovery``: ``policy`` (``--recover N``, ``--fallback-instance``,
``--budget-s``), ``chain`` (one entry per attempt: job id, attempt number, the job it resumes,
the cause that ended it) and, while a resubmit is on its way, ``intent`` (written before the
launch). Each attempt's sidecar names the first job (``recovery_root``) and its ``attempt``.
Read by every poll answer (:func:`annotate`); written only under :func:`lock_path`'s lock.
"""

from __future__ import annotations

from typing import Optional

from .. import cost
from ..context import Context
from ..errors import TaoBrevError
from ..model import JobSidecar
from ..records import current_state
from ..transport import check_instance
from . import reconcile
from .instance_jobs import owns

# ---------------------------------------------------------------- the policy
def policy(attempts: Optional[int], fallback: Optional[str], budget_s: Optional[float]) -> Optional[dict]:
    """``{"attempts", "fallback_instance", "budget_s"}`` of ``--recover N [--fallback-instance NAME]
    [--budget-s S]`` (None without ``--recover``). Raises BAD_ARGUMENT (N < 0, S <= 0, a fallback or a
    budget without --recover) and BAD_NAME (the fallback's name)."""
    if attempts is None:
        if fallback or budget_s is not None:
            raise TaoBrevError("BAD_ARGUMENT", "--fallback-instance and --budget-s belong to --recover N",
                               "Add --recover N (the number of automatic resubmits, e.g. 2).")
        return None
    if attempts < 0:
        raise TaoBrevError("BAD_ARGUMENT", f"--recover takes 0 or more attempts (got {attempts})")
    if budget_s is not None and not budget_s > 0:
        raise TaoBrevError("BAD_ARGUMENT", f"--budget-s must be > 0 seconds (got {budget_s})")
    if fallback:
        check_instance(fallback)
    return {"attempts": attempts, "fallback_instance": fallback or None, "budget_s": budget_s}


def root_of(ctx: Context, job_id: str) -> str:
    """The first job of the chain ``job_id`` belongs to (itself when it is no recovery attempt)."""
    return ctx.sidecars.load(job_id).recovery_root or job_id


def remembered_policy(ctx: Context, job_id: str) -> Optional[dict]:
    """The policy the chain of ``job_id`` runs under: the chain's, else its submit's ``--recover``."""
    side = ctx.sidecars.load(root_of(ctx, job_id))
    return (side.recovery or {}).get("policy") or side.recovery_policy


def chain(ctx: Context, root: str) -> list[dict]:
    """The attempts of ``root``'s chain, first job first (``[{"job_id", "attempt", ...}]``)."""
    return list((ctx.sidecars.load(root).recovery or {}).get("chain") or [{"job_id": root, "attempt": 1}])


def lock_path(ctx: Context, root: str):
    """The file whose lock (``fsio.locked``) every decision and launch of the chain holds."""
    return ctx.sidecars.path(root).with_suffix(".recovery")


# ---------------------------------------------------------------- what the answers show
def attempts_view(ctx: Context, root: str) -> list[dict]:
    """The chain as every answer shows it: per attempt its job id, instance, state, the cause that
    ended it (when it was recovered), the epochs reached (its last progress: completed epochs) and, for a resumed
    attempt, the checkpoint it started from."""
    out = []
    for entry in chain(ctx, root):
        job = entry["job_id"]
        try:
            record, side = ctx.records.load(job), ctx.sidecars.load(job)
        except TaoBrevError as exc:
            out.append({**entry, "error": exc.code})
            continue
        progress = side.final_progress or {}
        item = {"job_id": job, "attempt": entry["attempt"], "instance": side.instance,
                "state": record.get("terminal_state") or current_state(record), "cause": entry.get("cause"),
                "epoch": progress.get("epoch"), "num_epochs": progress.get("num_epochs")}
        start = (side.resume_from or {}).get("checkpoint") or {}
        if start.get("path"):
            item["resumed_from"] = {"job_id": side.resume_from.get("job_id"), "checkpoint": start["path"]}
        out.append(item)
    return out


def annotate(ctx: Context, job_id: str, out: dict) -> dict:
    """``out`` with ``attempts`` when ``job_id`` is part of a recovery chain (status.observe's hook)."""
    try:
        root = root_of(ctx, job_id)
        if len(chain(ctx, root)) > 1 or (ctx.sidecars.load(root).recovery or {}).get("policy"):
            out["attempts"] = attempts_view(ctx, root)
    except TaoBrevError:
        pass
    return out


def chain_cost(ctx: Context, root: str) -> dict:
    """``{"billed_s", "estimated_cost_usd", "attempts"}`` summed over the chain (``cost.chain_total``)."""
    def owned(side: JobSidecar) -> bool:   # owned as a poll judges it (status.observe), so the facts agree
        return not side.instance_deleted_at and bool(side.instance) and owns(ctx, side.instance)
    return cost.chain_total(ctx, [entry["job_id"] for entry in chain(ctx, root)], owned)


def adopt(ctx: Context, root: str, entries: list[dict], intent: Optional[dict]) -> Optional[dict]:
    """A record that a killed resubmit opened for ``intent`` (its ``retry_of`` is the attempt it
    resumes, opened after the intent, not in the chain yet), appended to the chain; else None."""
    if not intent:
        return None
    known = {entry["job_id"] for entry in entries}
    for record in ctx.records.list():
        if (record.get("retry_of") == intent["resume_from"] and record.get("id") not in known
                and str(record.get("submitted_at") or "") >= intent["at"]):
            return append(ctx, root, entries, record["id"], intent)
    return None


def append(ctx: Context, root: str, entries: list[dict], job_id: str, intent: dict) -> dict:
    """Add ``job_id`` to the chain as ``intent``'s attempt and clear the intent (one sidecar write)."""
    entry = {"job_id": job_id, "attempt": intent["attempt"], "resume_from": intent["resume_from"]}
    ctx.sidecars.update(job_id, recovery_root=root, attempt=intent["attempt"], previous_attempt=intent["after"])
    ctx.sidecars.update(root, recovery={"chain": [*entries, entry], "intent": None})
    return entry


def resume_source(ctx: Context, entries: list[dict]) -> str:
    """The attempt whose checkpoint the next one uses: the last that ran (one never launched
    left no checkpoint: its own source)."""
    last = entries[-1]
    if reconcile.launch_failed(ctx.sidecars.load(last["job_id"])) and last.get("resume_from"):
        return last["resume_from"]
    return last["job_id"]
