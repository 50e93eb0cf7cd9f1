"""The instance's end in a teardown: ``brev delete`` unless something on it would be lost
(live jobs, results not safe), the delete remembered on every job (or kept pending when brev
refuses), results that exist only there copied home first."""

from __future__ import annotations

from collections.abc import Sequence

from ... import cost, remote
from ...context import Context, say
from ...errors import TaoBrevError
from ...records import now_iso
from .. import keep, stop
from .. import results as results_mod
from ...model.answer_types import OrphanDeletePending, TeardownAnswer
from ..instance_jobs import job_ids_on, jobs_on, live_jobs, unverified_results

DELETE_REFUSED_FIX = ("Run teardown.py {job_id} --delete-instance again once the jobs ended: it uploads unverified "
                      "results again from the instance and verifies them; or pass --force to delete anyway and "
                      "lose what is listed.")


def delete_and_record(ctx: Context, instance: str) -> None:
    """``brev delete`` and remember it: every job on the instance gets ``instance_deleted_at``
    (so a rerun deletes nothing twice) and the instance memory ``deleted_at``."""
    jobs = job_ids_on(ctx, instance)
    try:
        ctx.brev.delete(instance)
    except TaoBrevError as exc:
        raise delete_pending(ctx, instance, exc) from None
    deleted_at = cost.now_precise()
    ctx.sidecars.note_instance(instance, deleted_at=deleted_at, delete_pending=None)
    for job_id in jobs:
        ctx.sidecars.update(job_id, instance_deleted_at=deleted_at, delete_pending=None)
    say(f"teardown: instance {instance} deleted")


def delete_pending(ctx: Context, instance: str, exc: TaoBrevError) -> TaoBrevError:
    """``brev delete`` failed (the transport already logged in again once when brev
    reported an auth failure): remember the pending delete - the instance memory and
    every job on it carry ``delete_pending`` until a later delete succeeds, and
    ``teardown.py --orphans`` lists it - and return INSTANCE_DELETE_PENDING saying
    that the instance still bills, with the exact manual command."""
    pending: OrphanDeletePending = {"since": (ctx.sidecars.instance(instance).delete_pending or {}).get("since") or now_iso(),
                                    "last_attempt_at": now_iso(), "error": exc.code, "message": exc.message,
                                    "manual_command": f"brev delete {instance}"}
    ctx.sidecars.note_instance(instance, delete_pending=pending)
    for job_id in job_ids_on(ctx, instance):
        ctx.sidecars.update(job_id, delete_pending=pending)
    say(f"teardown: brev delete {instance} failed ({exc.code}); cleanup pending, the instance still bills")
    return TaoBrevError("INSTANCE_DELETE_PENDING",
                        f"instance {instance} was NOT deleted and still bills: brev delete failed ({exc.code}: "
                        f"{exc.message}). Cleanup is pending (kept in the sidecar; teardown.py --orphans lists it).",
                        f"Run `brev delete {instance}` yourself (in a terminal where brev is logged in), or rerun "
                        "this teardown once brev answers; then teardown.py --orphans no longer lists it.",
                        manual_command=f"brev delete {instance}")


def forget_pending_delete(ctx: Context, instance: str) -> None:
    """The instance is gone (deleted by hand, or by someone else): nothing is pending any more."""
    if ctx.sidecars.instance(instance).delete_pending:
        ctx.sidecars.note_instance(instance, delete_pending=None)
        for job_id in job_ids_on(ctx, instance):
            ctx.sidecars.update(job_id, delete_pending=None)


def delete(ctx: Context, job_id: str, instance: str, answer: TeardownAnswer, asked: bool, force: bool,
           discard: bool = False, archived: dict[str, remote.Section] | None = None,
           unknown: Sequence[str] = ()) -> tuple[TeardownAnswer, int]:
    """``brev delete`` the instance unless something on it would be lost.

    Unverified (or since lost) S3 results and, when asked by name, live jobs refuse
    (INSTANCE_DELETE_REFUSED, exit 1) unless ``force``. An owned instance that another
    job still uses is kept without an error: the last job on it to end deletes it.
    Results that exist only on the instance are copied back and verified first
    (``keep.fetch``; ``results_saved_to``); any not verified refuses (RESULTS_ONLY_ON_INSTANCE,
    exit 1, ``still_billing``) unless ``discard``. ``unknown``: live job containers another state dir
    launched (``instance_jobs.unknown_containers``): they refuse (never kept silently), unless ``force``."""
    lost = results_mod.recheck_instance(ctx, instance)   # a LIST per verified job: nothing lost since?
    if "results" in answer:
        answer["results"] = results_mod.summary(ctx.sidecars.load(job_id).results or {})   # kept: results known
    lost += unverified_results(ctx, instance)
    live = live_jobs(ctx, instance, job_id)
    if live and not lost and not asked and not force:
        answer["instance_kept"] = "; ".join(live)
        answer["warnings"].append(f"instance {instance} kept, it still bills: {'; '.join(live)}. The last job on it "
                                  "to end deletes it (poll_status.py JOB_ID --wait --teardown --timeout S), or "
                                  "teardown.py --orphans --delete once all ended")
        return {"ok": True, **answer}, 0
    blockers = live + lost + list(unknown)
    if blockers and not force:
        extra: stop.UnknownRefusal = (stop.unknown_refusal(ctx, job_id, instance, list(unknown), "delete")
                                      if unknown else {})
        fix = DELETE_REFUSED_FIX.format(job_id=job_id)
        err = TaoBrevError("INSTANCE_DELETE_REFUSED", f"not deleting {instance}: " + "; ".join(blockers),
                           f"{extra['why']}. {fix}" if extra else fix)
        return {"ok": False, **answer, **extra, "blockers": blockers, "error": err.to_json()}, 1
    refused = _save_or_discard(ctx, job_id, instance, answer, asked, discard, archived)
    if refused is not None:
        return refused
    return _delete_now(ctx, job_id, instance, answer, forced=bool(blockers))


def _save_or_discard(ctx: Context, job_id: str, instance: str, answer: TeardownAnswer, asked: bool,
                     discard: bool, archived: dict[str, remote.Section] | None) -> tuple[TeardownAnswer, int] | None:
    """Results that exist only on ``instance``: discarded (``--discard-results``) or copied home and
    verified (``keep.fetch``); the refusal (RESULTS_ONLY_ON_INSTANCE) when one is not, else None."""
    unsaved = keep.pending(ctx, jobs_on(ctx, instance))
    if unsaved and discard:
        gone = keep.mark_discarded(ctx, unsaved)
        answer["results_discarded"] = gone
        answer["warnings"].append(f"--discard-results: the results of {', '.join(gone)} existed only on {instance} "
                                  "and are deleted with it")
    elif unsaved:
        saved, problems = keep.fetch(ctx, instance, unsaved, archived or {})
        answer["results_saved"] = saved
        mine = next((s for s in saved if s["job_id"] == job_id), None)
        if mine:
            answer["results_saved_to"] = mine["path"]
        if problems:
            err = keep.refusal(job_id, instance, problems, "--delete-instance" if asked else "")
            return {"ok": False, **answer, "blockers": problems, "still_billing": True, "error": err.to_json()}, 1
    return None


def _delete_now(ctx: Context, job_id: str, instance: str, answer: TeardownAnswer,
                forced: bool) -> tuple[TeardownAnswer, int]:
    """The delete itself, once nothing blocks it (or ``--force``): the answer says what was deleted."""
    results = ctx.sidecars.load(job_id).results or {}
    if results.get("kind") == "local":
        answer["warnings"].append(f"results of {job_id} live only on {instance} ({results.get('instance_dir')}); "
                                  "deleting the instance deletes them")
    cost.learn_instance_type(ctx, job_id)   # brev ls forgets a deleted instance's type
    try:
        delete_and_record(ctx, instance)
    except TaoBrevError as exc:   # the container is removed and the record closed: say so, then fail
        pending: TeardownAnswer = {"cleanup_pending": True, "still_billing": True, "manual_command": f"brev delete {instance}"} \
            if exc.code == "INSTANCE_DELETE_PENDING" else {}
        return {"ok": False, **answer, **pending, "error": exc.to_json()}, exc.exit_code
    answer.update({"instance_deleted": True, "deleted": [instance], "forced": forced})
    return {"ok": True, **answer}, 0
