"""teardown.py --orphans: instances that bill for nothing, deleted only when asked.

An *orphan* is an instance of ``brev ls --json`` with no job of this bundle
that is not terminal, and either

* RUNNING (or UNHEALTHY: running, billed) with no live ``tao-job`` container -
  one ``brev exec`` per such instance (``docker ps -a --filter label=tao-job``),
  instances concurrently; an instance that cannot answer is kept; or
* owned by this bundle (a job on it was submitted with ``--ephemeral``) and
  STOPPED or FAILURE: its disk still bills, and its owner meant it to go.

Every instance is either listed in ``orphans`` or in ``kept`` with the reason; a
kept STOPPED or FAILURE instance also carries ``"bills": "disk"`` (no GPU billed,
its disk is), so an answer never reads as if a kept instance cost nothing.
An orphan says whether it is ``ours`` (a job of this bundle ran on it),
``owned`` (ephemeral), since when it idles and what that costs (``idle_s``,
``estimated_idle_cost_usd`` from ``references/prices.yaml`` or
``--price-per-hour``), and what blocks its deletion.

Deletion (``--delete``) takes only names from this run's list, and:

* by default only the owned orphans; ``--instance NAME`` (repeatable) deletes
  exactly the named ones, which may be reused instances of ours (a reused
  instance is deleted only when asked by name);
* never an instance this bundle never ran a job on (``ours: false``): it may
  be someone's dev box. Decision: there is no flag for it - its owner deletes
  it (``brev delete NAME``); naming one is refused (NOT_AN_ORPHAN);
* results that exist only on the instance (no bucket, no TAO_RESULTS_ROOT)
  are first copied back and verified (``keep.save_from``: one ``brev exec``
  and a ``brev copy`` per job); one not verified, or a STOPPED orphan holding
  some (copying would start it), refuses its delete (RESULTS_ONLY_ON_INSTANCE);
* never an instance with results not verified in S3 (no ``--force`` here):
  the destinations are LISTed again and the records re-read right before each
  ``brev delete`` (INSTANCE_DELETE_REFUSED names the blockers).

``deleted`` names exactly what was deleted; the jobs on a deleted instance
remember it (``teardown.delete_and_record``).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from .. import cost, instance_names, prices, remote
from ..secrets import redact
from ..context import Context, say
from ..errors import TaoBrevError, TransportError
from ..model import JobSidecar
from ..model.answer_types import Orphan, OrphanDeletePending, TeardownAnswer, TeardownAnswerKeptItem
from ..nextstep import command
from ..transport import INSTANCE_RE, BrevInstance, check_instance
from ..vocabulary import InstanceStatus
from . import keep
from . import results as results_mod
from . import teardown as teardown_mod

RUNNING_STATUSES = (InstanceStatus.RUNNING, InstanceStatus.UNHEALTHY)   # the instance runs and bills its GPU
IDLE_OWNED_STATUSES = (InstanceStatus.STOPPED, InstanceStatus.FAILURE)   # no GPU billed, the disk is; orphan if owned
LIVE_CONTAINER_STATES = remote.LIVE_CONTAINER_STATES
MAX_WORKERS = 8
# --orphans has no --force (by design): the only way past a blocker is to clear it
ORPHAN_REFUSED_FIX = ("Clear the blockers first: run teardown.py JOB_ID for each job named in them (it uploads and "
                      "verifies the results), then run teardown.py --orphans --delete again (with the same "
                      "--instance names); --orphans never deletes past a blocker.")


def orphans(ctx: Context, delete: bool = False, names: list[str] | None = None,
            price_per_hour: float | None = None) -> tuple[TeardownAnswer, int]:
    """List the orphans (see the module doc); with ``delete``, delete the owned ones or the named ones."""
    names = [check_instance(n) for n in names or []]
    if names and not delete:
        raise TaoBrevError("BAD_ARGUMENT", "--instance names what --orphans --delete deletes; add --delete")
    cost.check_price(price_per_hour)
    found, kept = survey(ctx, price_per_hour)
    answer: TeardownAnswer = {"orphans": found, "kept": kept, "deleted": []}
    deleted: list[str] = answer["deleted"]
    if not delete:
        return {"ok": True, **answer}, 0

    listed = {o["instance"]: o for o in found}
    refused = [not_listed(name, kept, found) for name in names if name not in listed]
    if near_names(names, found, kept):
        answer["did_you_mean"] = near_names(names, found, kept)
    targets = [listed[n] for n in names if n in listed] if names else [o for o in found if o["owned"]]
    failure: TaoBrevError | None = None
    for orphan in targets:
        why = _refusal(ctx, orphan) or _save_results(ctx, orphan)
        if why:
            refused.append(why)
            continue
        try:
            for job_id in orphan["jobs"]:
                cost.remember_instance_type(ctx, job_id, orphan["instance_type"])
            teardown_mod.delete_and_record(ctx, orphan["instance"])
        except TaoBrevError as exc:
            orphan["error"] = exc.to_json()
            failure = failure or exc
            continue
        orphan["deleted"] = True
        deleted.append(orphan["instance"])
    if refused:
        code = refused[0][0]
        fix = refusal_fix(code, names)
        err = TaoBrevError(code, "not deleted: " + "; ".join(message for _c, message in refused), fix)
        return {"ok": False, **answer, "error": err.to_json()}, err.exit_code
    if failure:
        return {"ok": False, **answer, "error": failure.to_json()}, failure.exit_code
    return {"ok": True, **answer}, 0


# the rule, as the code applies it (survey, _refusal): who created the instance, and what runs on it
RULE = ("--orphans deletes unasked only instances made for this bundle's jobs (an --ephemeral job ran on them), "
        "and when named, an idle RUNNING instance it ran a job on; one it never ran a job on, or a STOPPED one "
        "that was not made for it, belongs to whoever created it")


def not_listed(name: str, kept: list[TeardownAnswerKeptItem], found: Sequence[Orphan] = ()) -> tuple[str, str]:
    """NOT_AN_ORPHAN for a named instance that this run did not list as an orphan, with the reason
    it was kept (or that brev ls does not list it, and the closest names it lists)."""
    reason = next((k["reason"] for k in kept if k["instance"] == name), None)
    listed = [o["instance"] for o in found] + [k["instance"] for k in kept]
    return "NOT_AN_ORPHAN", (f"{name}: not an orphan: {reason}" if reason
                             else f"{name}: {instance_names.unknown_message(name, listed)}")


def near_names(names: list[str], found: list[Orphan], kept: list[TeardownAnswerKeptItem]) -> dict[str, str]:
    """``{named: closest listed name}`` for each ``--instance`` name brev ls does not list (a typo)."""
    listed = [o["instance"] for o in found] + [k["instance"] for k in kept]
    near = {name: instance_names.closest(name, listed, n=1) for name in names if name not in listed}
    return {name: best[0] for name, best in near.items() if best}


def refusal_fix(code: str, names: list[str]) -> str | None:
    """The fix of a refused --orphans --delete / --stop: the exact listing command, and the rule."""
    if code == "INSTANCE_DELETE_REFUSED":
        return ORPHAN_REFUSED_FIX
    if code != "NOT_AN_ORPHAN":
        return None
    return (f"Run {command('teardown.py', '--orphans')} to see why each was kept. The rule: {RULE} - its creator "
            "stops it (brev stop NAME, if its type can stop) or deletes it (brev delete NAME).")


def survey(ctx: Context, price_per_hour: float | None = None) -> tuple[list[Orphan], list[TeardownAnswerKeptItem]]:
    """(orphans, kept): ``brev ls``, the local records, one exec per running candidate."""
    found: list[Orphan] = []
    kept: list[TeardownAnswerKeptItem] = []
    running: list[tuple[BrevInstance, list[JobSidecar]]] = []   # (brev ls's entry, the jobs on it)
    for entry in ctx.brev.ls():
        name = str(entry.get("name") or "")
        status = str(entry.get("status") or "").upper()
        if not INSTANCE_RE.match(name):
            kept.append({"instance": name, "reason": "a name brev commands cannot take safely; not examined"})
            continue
        jobs = teardown_mod.jobs_on(ctx, name)
        live = teardown_mod.live_jobs(ctx, name)
        if live:
            kept.append({"instance": name, "reason": "; ".join(live)})
        elif status in RUNNING_STATUSES:
            running.append((entry, jobs))
        elif status in IDLE_OWNED_STATUSES and teardown_mod.owns(ctx, name):
            found.append(_orphan(ctx, entry, jobs, f"owned (ephemeral) and all its jobs ended; {status}, "
                                                   "its disk still bills", price_per_hour))
        elif status in IDLE_OWNED_STATUSES:    # not ours to delete, yet not free: say so (the disk bills)
            kept.append({"instance": name, "bills": "disk",
                         "reason": f"{status}, not created by this bundle (owned: false; a job of it may have run "
                                   f"there): its disk still bills until its owner deletes it (brev delete {name})"})
        else:
            kept.append({"instance": name, "reason": f"{status or 'no status'}: not running, or in transition"})

    with ThreadPoolExecutor(max_workers=MAX_WORKERS) as pool:
        answers = list(pool.map(lambda item: _live_containers(ctx, item[0]["name"]), running))
    for (candidate, jobs), (live_containers, error) in zip(running, answers):
        if error:
            kept.append({"instance": candidate["name"], "reason": f"could not list its containers: {error}"})
        elif live_containers:
            kept.append({"instance": candidate["name"],
                         "reason": f"tao-job container running: {', '.join(live_containers)}"})
        else:
            why = "all its jobs ended" if jobs else "never used by this bundle"
            found.append(_orphan(ctx, candidate, jobs, f"{candidate.get('status')} with no tao-job container running; "
                                                   + why, price_per_hour))
    _note_pending_deletes(ctx, found, kept)
    return sorted(found, key=lambda o: o["instance"]), sorted(kept, key=lambda k: k["instance"])


def _note_pending_deletes(ctx: Context, found: list[Orphan], kept: list[TeardownAnswerKeptItem]) -> None:
    """A ``brev delete`` that failed (``delete_pending`` in the instance memory) stays
    visible until a delete succeeds: the orphan carries it, a kept instance names it;
    one that ``brev ls`` no longer lists was deleted since - nothing is pending any more."""
    listed = {o["instance"]: o for o in found}
    held = {k["instance"]: k for k in kept}
    for path in sorted(ctx.sidecars.instances_dir.glob("*.json")) if ctx.sidecars.instances_dir.is_dir() else []:
        name = path.stem
        pending = ctx.sidecars.instance(name).delete_pending if INSTANCE_RE.match(name) else None
        if not pending:
            continue
        if name in listed:
            listed[name]["delete_pending"] = OrphanDeletePending(**pending)   # as teardown.instance wrote it
            listed[name]["advice"] = (f"brev delete failed at {pending.get('last_attempt_at')} ({pending.get('error')}); "
                                      f"it still bills: run `brev delete {name}`, or " + listed[name]["advice"])
        elif name in held:
            held[name]["reason"] += (f"; a brev delete of it is pending since {pending.get('since')} "
                                     f"(run `brev delete {name}` once nothing on it is needed)")
        else:
            teardown_mod.forget_pending_delete(ctx, name)


def _live_containers(ctx: Context, instance: str) -> tuple[list[str], str | None]:
    """(names of the tao-job containers not exited, or the reason they could not be listed)."""
    token = remote.new_token()
    try:
        result = ctx.brev.exec(instance, remote.section(token, "ps", remote.list_job_containers()), idempotent=True)
    except TransportError as exc:
        return [], exc.message
    ps = remote.parse_sections(result.stdout, token).get("ps")
    if ps is None:
        return [], "incomplete answer"
    if ps.exit_code != 0:
        return [], redact.tail(ps.output, 300) if ps.output.strip() else f"docker ps exited {ps.exit_code}"
    return remote.live_job_containers(ps.output), None


def _orphan(ctx: Context, entry: BrevInstance, jobs: list[JobSidecar], reason: str,
            price_per_hour: float | None) -> Orphan:
    """One orphan: who it belongs to, since when it idles, what blocks its deletion."""
    name = entry["name"]
    ours, owned = bool(jobs), teardown_mod.owns(ctx, name)
    ids = [j.job_id for j in jobs if j.job_id]   # jobs_on lists only sidecars with a job id
    idle_since = max((t for t in (_ended(ctx, job_id) for job_id in ids) if t), default=None)
    idle_s = cost.seconds(idle_since, datetime.now(timezone.utc))
    price, source, note = prices.price(ctx, price_per_hour, entry.get("instance_type"))
    out: Orphan = {"instance": name, "id": entry.get("id"), "status": entry.get("status"),
                   "instance_type": entry.get("instance_type"), "ours": ours, "owned": owned,
                   "jobs": sorted(ids), "reason": reason,
                   "idle_since": idle_since.isoformat(timespec="seconds") if idle_since else None, "idle_s": idle_s,
                   "price_per_hour_usd": price, "price_source": source, "price_note": note,
                   "estimated_idle_cost_usd": (round(idle_s / 3600 * price, 4)
                                               if idle_s is not None and price is not None else None),
                   "blockers": teardown_mod.unverified_results(ctx, name), "deleted": False}
    out["advice"] = _advice(out)
    unsaved = [side.job_id for side in keep.pending(ctx, jobs) if side.job_id]
    if unsaved and not out["blockers"]:
        out["advice"] += (f"; results of {', '.join(unsaved)} exist only on it: "
                          f"{command('teardown.py', '--orphans', '--delete', '--instance', name)} first copies them back to "
                          "$TAO_STATE_DIR/brev/results/ and verifies them (sha256), and deletes nothing if that fails")
    if ours:
        say(f"orphans: {name} idles since {out['idle_since']} ({reason})")
    return out


def _ended(ctx: Context, job_id: str) -> datetime | None:
    """When the job ended (None while it runs, or when its record cannot be read)."""
    try:
        return cost.ended_at(ctx.records.load(job_id), ctx.sidecars.load(job_id))
    except TaoBrevError:
        return None


def _advice(orphan: Orphan) -> str:
    name = orphan["instance"]
    if not orphan["ours"]:
        return (f"never used by this bundle, so never deleted by it: ask its owner; they can stop or delete it "
                f"(brev delete {name})")
    if orphan["blockers"]:
        return ("results not verified in S3 or only on the instance: run teardown.py JOB_ID --delete-instance "
                "for each job listed in blockers (it uploads and verifies them, or copies them back and verifies "
                "them, then deletes), then list again")
    if orphan["owned"]:
        return "owned by this bundle: teardown.py --orphans --delete deletes it"
    return (f"a reused instance: deleted only when named - teardown.py --orphans --delete --instance {name} "
            f"(copy what you need from it first); or keep it and stop its billing: teardown.py --orphans --stop "
            f"--instance {name}")


def _refusal(ctx: Context, orphan: Orphan) -> tuple[str, str] | None:
    """(code, why) when ``orphan`` must not be deleted now; checked right before the delete."""
    name = orphan["instance"]
    if not orphan["ours"]:
        return "NOT_AN_ORPHAN", f"{name}: never used by this bundle (ours: false): {RULE}"
    problems = results_mod.recheck_instance(ctx, name)   # a LIST per verified job: nothing lost since?
    blockers = problems + teardown_mod.instance_blockers(ctx, name, None)
    if blockers:
        orphan["blockers"] = blockers
        orphan["advice"] = _advice(orphan)
        return "INSTANCE_DELETE_REFUSED", f"{name}: " + "; ".join(blockers)
    return None


def _save_results(ctx: Context, orphan: Orphan) -> tuple[str, str] | None:
    """Copy back the results that exist only on the orphan (``keep.save_from``), right before its
    delete; (RESULTS_ONLY_ON_INSTANCE, why) when any is not verified here - or when the orphan is
    not running (copying would start it: ``teardown.py JOB_ID --delete-instance`` does that on request)."""
    name = orphan["instance"]
    unsaved = keep.pending(ctx, teardown_mod.jobs_on(ctx, name))
    if not unsaved:
        return None
    if str(orphan.get("status") or "").upper() not in RUNNING_STATUSES:
        problems = teardown_mod.unsaved_results(ctx, name)
    else:
        orphan["results_saved"], problems = keep.save_from(ctx, name, unsaved)
    if problems:
        orphan["blockers"] = problems
        orphan["advice"] = _advice(orphan)
        return "RESULTS_ONLY_ON_INSTANCE", f"{name}: " + "; ".join(problems)
    return None
