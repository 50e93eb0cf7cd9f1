"""The jobs on one instance as it is now, and what they say about deleting it: who owns it
(:func:`owns`, :func:`created_by_bundle`), which jobs are live, whose results are not safe yet. Read by the poll,
teardown, orphans, cost and recovery verbs; it writes nothing. The records are this state dir's only:
what another state dir (another user or agent) runs on the same instance, only the instance itself
can say (:func:`unknown_containers`, from the teardown's own round trip)."""

from __future__ import annotations

from typing import TypedDict

from .. import cost, prices, remote
from ..context import Context
from ..errors import TaoBrevError
from ..model import JobSidecar
from ..model.answer_types import PollAnswerBundleStartedInstance
from ..records import current_state, is_terminal
from . import keep
from . import results as results_mod


def jobs_on(ctx: Context, instance: str) -> list[JobSidecar]:
    """The sidecars of the jobs on ``instance`` as it is now: jobs on an earlier
    instance of that name, which a teardown deleted, are left out (a name can be reused)."""
    return [side for side in ctx.sidecars.all()
            if side.instance == instance and side.job_id and not side.instance_deleted_at]


def job_ids_on(ctx: Context, instance: str) -> list[str]:
    """The job ids of :func:`jobs_on`."""
    return [side.job_id for side in jobs_on(ctx, instance) if side.job_id]


def owns(ctx: Context, instance: str) -> bool:
    """The instance is this bundle's to delete: a job on it was submitted with ``--ephemeral``.
    A reused instance (no such job) is deleted only when asked by name."""
    return any(side.ephemeral for side in jobs_on(ctx, instance))


def created_by_bundle(ctx: Context, side: JobSidecar) -> bool:
    """``owned`` in every answer (cost facts, orphans): this bundle created the job's instance (the job,
    or another job on that instance, was submitted with ``--ephemeral``), so it may delete it. A delete
    never changes it: after one, the jobs that were on the instance when it was deleted decide."""
    if side.ephemeral:
        return True
    if not side.instance:
        return False
    if not side.instance_deleted_at:
        return owns(ctx, side.instance)
    return any(other.ephemeral for other in ctx.sidecars.all()
               if other.instance == side.instance and other.instance_deleted_at == side.instance_deleted_at)


def live_jobs(ctx: Context, instance: str, except_job: str | None = None) -> list[str]:
    """``job X on I is RUNNING`` for each other job on ``instance`` that is not terminal
    (a job whose record cannot be read counts as live)."""
    live = []
    for side in jobs_on(ctx, instance):
        job_id = side.job_id
        if job_id is None or job_id == except_job:   # jobs_on lists only sidecars with a job id
            continue
        try:
            record = ctx.records.load(job_id)
        except TaoBrevError as exc:
            if not (side.teardown or {}).get("record_closed"):   # a damaged record, not torn down
                live.append(f"job {job_id} on {instance}: record unreadable ({exc.code})")
            continue
        if not is_terminal(record.get("terminal_state")):
            live.append(f"job {job_id} on {instance} is {current_state(record)}")
    return live


def unverified_results(ctx: Context, instance: str) -> list[str]:
    """The jobs on ``instance`` whose S3-routed results are not verified (the instance disk holds
    the only complete copy)."""
    out = []
    for side in jobs_on(ctx, instance):
        results = side.results or {}
        if results.get("kind") == "s3" and not results.get("verified"):
            out.append(f"job {side.job_id}: results not verified in {results.get('destination')}: "
                       + results_mod.describe_loss(results))
    return out


def unsaved_results(ctx: Context, instance: str) -> list[str]:
    """The jobs on ``instance`` whose results exist only there (``keep.pending``), as blockers
    for a delete that does not copy them back first (``teardown.py --orphans --delete``)."""
    return [f"job {side.job_id}: results only on {instance} ({(side.results or {})['instance_dir']}): "
            f"teardown.py {side.job_id} --delete-instance copies them back, verifies, then deletes"
            for side in keep.pending(ctx, jobs_on(ctx, instance))]


def instance_blockers(ctx: Context, instance: str, except_job: str | None) -> list[str]:
    """Why ``instance`` must not be deleted: live jobs and unverified results on it."""
    return live_jobs(ctx, instance, except_job) + unverified_results(ctx, instance)


def unknown_containers(ctx: Context, instance: str, job_id: str, listing: remote.Section | None) -> list[str]:
    """Why a stop or delete of ``instance`` would kill a job this state dir does not know is live: each
    live job container in ``listing`` (``remote.list_job_containers``, run after ``job_id``'s removal)
    that is not ``job_id`` and no live job of this state dir accounts for (those are ``live_jobs``').
    A listing missing or failed counts as one blocker: the instance could not say what runs on it."""
    if listing is None:
        return [f"{instance} did not say which job containers run on it (incomplete answer)"]
    if listing.exit_code != 0:
        return [f"could not list the job containers on {instance}: docker ps exited {listing.exit_code}"]
    local = {side.job_id for side in jobs_on(ctx, instance)}
    live_here = {job for job in local if any(f"job {job} on" in line for line in live_jobs(ctx, instance, job_id))}
    return [f"container {name} is live on {instance}, launched "
            + (f"as job {name} of this state dir, whose record says it ended" if name in local
               else f"from another state dir than {ctx.state_root} (another user's or agent's job)")
            for name in remote.live_job_containers(listing.output) if name != job_id and name not in live_here]


class BundleStarted(TypedDict, total=False):
    """:func:`bundle_started`: merged over a poll or teardown answer (empty: nothing to say)."""
    bundle_started_instance: PollAnswerBundleStartedInstance


def bundle_started(ctx: Context, job_id: str, sidecar: JobSidecar) -> BundleStarted:
    """``bundle_started_instance`` of an ended job's answer: the bundle itself started the instance
    (``cost.started_by_bundle``) and it is the user's (an owned one is deleted by the teardown), so
    the teardown ``next`` stops it again (``--stop-instance``) when its type can stop (``stoppable``:
    brev search's, cached; null: unknown, the stop finds out); else what keeps billing."""
    if created_by_bundle(ctx, sidecar) or sidecar.instance_deleted_at or sidecar.instance_stopped_at \
            or not cost.started_by_bundle(ctx, job_id):
        return {}
    kind = cost.known_instance_type(ctx, job_id)
    return {"bundle_started_instance": {"instance": sidecar.instance, "instance_type": kind,
                                        "stoppable": prices.stoppable(ctx, kind, lookup=False)}}
