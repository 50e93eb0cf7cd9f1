"""The chain of a recovering job (``tao_brev.verbs.recover``): its policy, attempts and costs.

The first job's sidecar holds ``recovery``: ``policy`` (``--recover N``, ``--fallback-instance``,
``--budget-s``), ``chain`` (one entry per attempt: job id, attempt number, the job it resumes,
the cause that ended it) and, while a resubmit is on its way, ``intent`` (written before the
launch). Each attempt's sidecar names the first job (``recovery_root``) and its ``attempt``.
Read by every poll answer (:func:`annotate`); written only under :func:`lock_path`'s lock.

Every record that resumes or retries a member of the chain (its ``retry_of``, which submit sets
from ``--resume-from`` too) belongs to the chain, whoever launched it: the recovery, an earlier
recovering run that was killed, or the user by hand. :func:`sync` adopts such records (under the
lock), and submit opens a record that names a member only under the same lock
(:func:`joining`), refused while another attempt of the chain is live: two live attempts of one
chain never exist.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Optional

from .. import cost, nextstep
from ..context import Context
from ..errors import TaoBrevError
from ..fsio import locked
from ..model import JobSidecar
from ..model.answer_types import PollAnswer, PollAnswerAttemptsItem, PollAnswerAttemptsItemCause, PollAnswerChainCost
from ..model.answer_types import RecordDocument
from ..model.sidecar_parts import ChainEntry, Intent, RecoveryPolicy
from ..record_quarantine import is_quarantined
from ..records import current_state, is_terminal
from ..transport import check_instance
from ..vocabulary import LaunchState
from . import reconcile
from .instance_jobs import created_by_bundle

Cause = PollAnswerAttemptsItemCause   # why an attempt was recovered: kind, reason (recover.cause_of)


# ---------------------------------------------------------------- the policy
def policy(attempts: Optional[int], fallback: Optional[str], budget_s: Optional[float]) -> Optional[RecoveryPolicy]:
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


_MAX_LINKS = 1000   # retry_of links followed to a chain's first job (ids are minted later: no circle)


def root_of(ctx: Context, job_id: str) -> str:
    """The first job of the chain ``job_id`` belongs to: its sidecar's ``recovery_root``, else the
    root of the job its record's ``retry_of`` names (a resume or retry launched by hand, or a
    record a killed run opened before it was chained), else itself."""
    seen = job_id
    for _ in range(_MAX_LINKS):
        root = ctx.sidecars.load(seen).recovery_root
        if root:
            return root
        parent = _record(ctx, seen).get("retry_of")
        if not parent or parent == seen:
            return seen
        seen = parent
    return seen


def _record(ctx: Context, job_id: str) -> RecordDocument:
    try:
        return ctx.records.load(job_id)
    except TaoBrevError:
        return {}


def remembered_policy(ctx: Context, job_id: str) -> Optional[RecoveryPolicy]:
    """The policy the chain of ``job_id`` runs under: the chain's, else its submit's ``--recover``."""
    side = ctx.sidecars.load(root_of(ctx, job_id))
    # the model keeps submit's --recover (a :func:`policy`) as a bare dict
    return (side.recovery or {}).get("policy") or side.recovery_policy


def chain(ctx: Context, root: str) -> list[ChainEntry]:
    """The attempts of ``root``'s chain, first job first (``[{"job_id", "attempt", ...}]``)."""
    return list((ctx.sidecars.load(root).recovery or {}).get("chain") or [{"job_id": root, "attempt": 1}])


def lock_path(ctx: Context, root: str) -> Path:
    """The file whose lock (``fsio.locked``) every decision and launch of the chain holds."""
    return ctx.sidecars.path(root).with_suffix(".recovery")


# ---------------------------------------------------------------- what the answers show
def attempts_view(ctx: Context, root: str) -> list[PollAnswerAttemptsItem]:
    """The chain as every answer shows it: per attempt its job id, instance, state, the cause that
    ended it (when it was recovered), the epochs reached (its last progress: completed epochs) and, for a resumed
    attempt, the checkpoint it started from."""
    out: list[PollAnswerAttemptsItem] = []
    for entry in chain(ctx, root):
        job = entry["job_id"]
        try:
            record, side = ctx.records.load(job), ctx.sidecars.load(job)
        except TaoBrevError as exc:
            out.append({**entry, "error": exc.code})
            continue
        progress = side.final_progress or {}
        item: PollAnswerAttemptsItem = {
            "job_id": job, "attempt": entry["attempt"], "instance": side.instance,
            "state": record.get("terminal_state") or current_state(record),
            "cause": entry.get("cause"),
            "epoch": progress.get("epoch"), "num_epochs": progress.get("num_epochs")}
        resumed = side.resume_from or {}
        start = resumed.get("checkpoint") or {}
        if start.get("path"):
            item["resumed_from"] = {"job_id": resumed.get("job_id", ""), "checkpoint": start["path"]}
        out.append(item)
    return out


def annotate(ctx: Context, job_id: str, out: PollAnswer) -> PollAnswer:
    """``out`` with ``attempts`` when ``job_id`` is part of a recovery chain (status.observe's hook)."""
    try:
        root = root_of(ctx, job_id)
        if len(chain(ctx, root)) > 1 or (ctx.sidecars.load(root).recovery or {}).get("policy"):
            out["attempts"] = attempts_view(ctx, root)
    except TaoBrevError:
        pass
    return out


def chain_cost(ctx: Context, root: str) -> PollAnswerChainCost:
    """``{"billed_s", "estimated_cost_usd", "attempts"}`` summed over the chain (``cost.chain_total``)."""
    def owned(side: JobSidecar) -> bool:   # owned as every answer judges it, so the facts agree
        return created_by_bundle(ctx, side)
    return cost.chain_total(ctx, [entry["job_id"] for entry in chain(ctx, root)], owned)


def linked(ctx: Context, entries: list[ChainEntry]) -> list[RecordDocument]:
    """The records that resume or retry a member of ``entries`` (``retry_of``) and are not in it,
    oldest first: attempts launched outside the chain (by hand, or by a run killed before it
    chained them)."""
    known = {entry["job_id"] for entry in entries}
    found = [record for record in ctx.records.list() if not is_quarantined(record)
             and record.get("retry_of") in known and record.get("id") not in known]
    return sorted(found, key=lambda record: (str(record.get("submitted_at") or ""), record["id"]))


def sync(ctx: Context, root: str) -> list[ChainEntry]:
    """``root``'s chain with every :func:`linked` record adopted as its next attempt (in the order
    they were submitted, a record linked to an adopted one included); call under the chain's lock."""
    entries = chain(ctx, root)
    while True:
        found = linked(ctx, entries)
        if not found:
            return entries
        _chain_in(ctx, root, entries, found[0]["id"], found[0]["retry_of"])
        entries = chain(ctx, root)


def _chain_in(ctx: Context, root: str, entries: list[ChainEntry], job_id: str, parent: str) -> None:
    """``job_id`` (which resumes or retries ``parent``) as the chain's next attempt; the intent it
    fulfils (a resubmit of ``parent`` on its way) cleared."""
    intent = (ctx.sidecars.load(root).recovery or {}).get("intent") or {}
    mine = intent.get("resume_from") == parent   # the recovery's own resubmit (or a killed run's)
    append(ctx, root, entries, job_id, {"attempt": len(entries) + 1, "after": entries[-1]["job_id"],
                                        "resume_from": parent, **({} if mine else {"by_hand": True})},
           clear_intent=mine)


def used_attempts(ctx: Context, entries: list[ChainEntry]) -> int:
    """The recovery attempts of ``--recover N`` the chain used: its resubmits, not the attempts launched by
    hand, nor one whose run was killed before it launched (reconciled ``never_launched``: nothing ran; a
    launch that was refused or failed to start counts, so a launch that always fails cannot loop)."""
    return sum(1 for entry in entries[1:] if not entry.get("by_hand")
               and (ctx.sidecars.load(entry["job_id"]).launch or {}).get("state") != LaunchState.NEVER_LAUNCHED)


def adopt(ctx: Context, root: str, entries: list[ChainEntry], intent: Optional[Intent] = None) -> Optional[ChainEntry]:
    """The newest attempt :func:`sync` adopted (None when the chain was complete)."""
    before = {entry["job_id"] for entry in entries}
    after = sync(ctx, root)
    return after[-1] if after[-1]["job_id"] not in before else None


def live_attempts(ctx: Context, entries: list[ChainEntry]) -> list[str]:
    """The attempts of ``entries`` whose record has not ended."""
    records = [_record(ctx, entry["job_id"]) for entry in entries]
    return [record["id"] for record in records if record and not is_terminal(record.get("terminal_state"))]


@contextmanager
def joining(ctx: Context, parent: Optional[str]) -> Iterator[Callable[[str], None]]:
    """Around submit's record opening for a job that resumes or retries ``parent`` (None: a job of
    its own): under the chain's lock (the recovery launches under it too), the chain adopted
    (:func:`sync`), RESUME_NOT_POSSIBLE while an attempt of it is live (a second live attempt);
    the function yielded chains the opened record at once. Re-entrant: the recovery's own resubmit
    runs inside its lock."""
    if not parent:
        yield lambda job_id: None
        return
    root = root_of(ctx, parent)
    if not lock_path(ctx, root).parent.is_dir():   # no sidecar here at all (no job of this bundle's): no chain
        yield lambda job_id: None
        return
    with locked(lock_path(ctx, root)):
        entries = sync(ctx, root)
        live = live_attempts(ctx, entries)
        if live:
            wait = recovering_command(ctx, root) or nextstep.command("poll_status.py", live[-1], "--wait")
            raise TaoBrevError("RESUME_NOT_POSSIBLE", f"{parent} belongs to the chain of {root}, whose attempt "
                               f"{live[-1]} has not ended: a second live attempt of one job is never launched; "
                               "nothing was recorded or launched",
                               f"Follow the chain instead: {wait} (it continues from the last checkpoint "
                               f"when the attempt fails); to stop it: {nextstep.command('teardown.py', live[-1])}.")

        def join(job_id: str) -> None:
            current = chain(ctx, root)
            if job_id not in {entry["job_id"] for entry in current}:
                _chain_in(ctx, root, current, job_id, parent)
        yield join


def recovering_command(ctx: Context, job_id: str) -> Optional[str]:
    """The command that recovers ``job_id``'s chain when a recovery is remembered (``--recover N``,
    N > 0, at submit or by an earlier recovering poll): ``poll_status.py ROOT --wait --recover N``
    with the remembered fallback and budget, N raised to one more than the attempts used when they
    are; None without a remembered recovery."""
    try:
        root = root_of(ctx, job_id)
        pol = remembered_policy(ctx, root)
        if not pol or not pol.get("attempts"):
            return None
        used = used_attempts(ctx, chain(ctx, root))
    except TaoBrevError:
        return None
    words = [root, "--wait", "--recover", str(max(int(pol["attempts"]), used + 1))]
    fallback = pol.get("fallback_instance")
    if fallback:
        words += ["--fallback-instance", fallback]
    if pol.get("budget_s") is not None:
        words += ["--budget-s", f"{pol['budget_s']:g}"]
    return nextstep.command("poll_status.py", *words)


def append(ctx: Context, root: str, entries: list[ChainEntry], job_id: str, intent: Intent,
           clear_intent: bool = True) -> ChainEntry:
    """Add ``job_id`` to the chain as ``intent``'s attempt (once: an entry already there is
    replaced) and clear the intent (one sidecar write)."""
    entry: ChainEntry = {"job_id": job_id, "attempt": intent["attempt"], "resume_from": intent["resume_from"]}
    if intent.get("by_hand"):
        entry["by_hand"] = True
    kept = [item for item in entries if item["job_id"] != job_id]
    if len(kept) < len(entries):
        entry["attempt"] = next(item["attempt"] for item in entries if item["job_id"] == job_id)
    ctx.sidecars.update(job_id, recovery_root=root, attempt=entry["attempt"], previous_attempt=intent["after"])
    ctx.sidecars.update(root, recovery={"chain": [*kept, entry], **({"intent": None} if clear_intent else {})})
    return entry


def resume_source(ctx: Context, entries: list[ChainEntry]) -> str:
    """The attempt whose checkpoint the next one uses: the last that ran (one never launched
    left no checkpoint: its own source)."""
    last = entries[-1]
    source = last.get("resume_from")
    if reconcile.launch_failed(ctx.sidecars.load(last["job_id"])) and source:
        return source
    return last["job_id"]
