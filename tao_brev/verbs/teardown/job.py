"""``teardown.py JOB_ID``: the plan (what this teardown may reach, remove, archive and delete),
then the container removed, the record closed, the results made safe and the instance kept,
stopped or deleted (``container``, ``instance``, ``verbs/stop.py``)."""

from __future__ import annotations

from ... import cost, remote
from ...context import Context, note_job, note_state, say
from ...errors import TaoBrevError
from ...records import current_state, is_terminal, now_iso
from .. import instance_gate, keep, reconcile, stop
from .. import results as results_mod
from ..instance_jobs import (BundleStarted, bundle_started, created_by_bundle, job_ids_on, jobs_on, live_jobs, owns,
                             unknown_containers, unverified_results)
from ..job_facts import job_instance
from .container import OTHERS, close_record, note_times, remove_container
from .instance import delete
from ...model import JobSidecar
from ...model.answer_types import TeardownAnswer
from ...model.answer_types import RecordDocument


def teardown(ctx: Context, job_id: str, delete_instance: bool | None = None, force: bool = False,
             price_per_hour: float | None = None, discard_results: bool = False,
             stop_instance: bool = False, start: bool = False) -> tuple[TeardownAnswer, int]:
    """Tear one job down (see the module doc). ``delete_instance``: True = asked by name
    (``--delete-instance``), False = never (``--keep-instance``), None = when this bundle owns it.
    ``stop_instance``: ``brev stop`` it instead once the results are safe (``verbs/stop.py``).
    ``discard_results``: delete even though results exist only on the instance (``keep``).
    A teardown that deletes nothing never starts a STOPPED instance (INSTANCE_STOPPED, exit 1,
    nothing changed) unless ``start``; one that deletes it may (its results may need a copy)."""
    cost.check_price(price_per_hour)
    try:
        record = ctx.records.load(job_id)
    except TaoBrevError as exc:
        if exc.code == "CORRUPT_RECORD" and (ctx.records.quarantined(job_id) or
                                             ctx.records.closed_quarantine(job_id)):
            return teardown_damaged(ctx, job_id, exc)
        raise
    note_job(job_id)
    note_state(record.get("terminal_state") or current_state(record))
    cost.note_price(ctx, job_id, price_per_hour)   # a known price spares the brev ls for the type
    sidecar = ctx.sidecars.load(job_id)
    instance = job_instance(record, sidecar)
    answer: TeardownAnswer = {"job_id": job_id, "instance": instance, "backend_ref": record.get("backend_ref"),
                              "results_dir": record["results_dir"], "container_removed": False,
                              "instance_deleted": False, "deleted": [], "warnings": []}
    unreached = _nothing_to_reach(ctx, record, sidecar, instance, answer, price_per_hour)
    if unreached is not None:
        return unreached
    assert instance is not None   # _nothing_to_reach answered a job with no instance
    deletes = delete_instance is True or (delete_instance is None and owns(ctx, instance))
    if not sidecar.instance_deleted_at and instance_gate.stopped(ctx, instance, start or deletes):
        out: TeardownAnswer = {"ok": False, **answer, **instance_gate.stopped_fields(
            instance, "teardown.py", job_id, record.get("terminal_state"))}
        return out, 1
    earlier_cancel = sidecar.cancel
    if not is_terminal(record.get("terminal_state")) and not earlier_cancel:   # intent first, then act
        ctx.sidecars.update(job_id, cancel={"requested_at": now_iso(), "by": "teardown"})
    saves = to_save(ctx, instance, job_id, sidecar, delete_instance, force, discard_results)
    docker_state, gone, archived = remove_container(ctx, instance, job_id, sidecar, answer, record.get("image"),
                                                    saves, others=stop_instance or deletes)
    present = answer["container_removed"]
    record = close_record(ctx, record, docker_state, "canceled by teardown" if present
                          else "container not found at teardown", earlier_cancel)
    ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": present})
    note_times(ctx, job_id, docker_state)
    answer["state"] = record.get("terminal_state")
    say(f"teardown {job_id}: container {'removed' if present else 'absent'}; record {answer['state']}")
    finalize_results(ctx, job_id, sidecar, gone, answer)
    return _instance_end(ctx, job_id, instance, answer, gone, delete_instance, force, price_per_hour,
                         discard_results, stop_instance, archived)


def _nothing_to_reach(ctx: Context, record: RecordDocument, sidecar: JobSidecar, instance: str | None,
                      answer: TeardownAnswer, price_per_hour: float | None) -> tuple[TeardownAnswer, int] | None:
    """The teardown's answer when no exec may or need happen (no instance recorded, none existed,
    or stopped by an earlier teardown); else None."""
    job_id = record["id"]
    if instance is None:
        record = close_record(ctx, record, None, "canceled before launch (no instance recorded)")
        return {"ok": True, **answer, "state": record.get("terminal_state")}, 0
    if reconcile.launch_failed(sidecar) and reconcile.instance_missing(sidecar):
        # brev ls did not list the instance when the launch was settled: nothing exists to remove or ask
        answer["warnings"].append(f"job {job_id} never ran: no instance {instance} existed (brev ls); "
                                  "nothing to remove; the record is closed")
        record = close_record(ctx, record, None, f"never launched: no instance {instance}")
        ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": False})
        out: TeardownAnswer = {"ok": True, **answer, "state": record.get("terminal_state")}
        out["cost"] = cost.facts(ctx, job_id, owned=False, price_per_hour=price_per_hour, lookup=False)
        return out, 0
    if sidecar.instance_stopped_at and sidecar.teardown and is_terminal(record.get("terminal_state")):
        # torn down and stopped by the bundle: any exec would start it again (and bill)
        answer.update({"instance_stopped": True, "state": record.get("terminal_state")})
        answer["warnings"].append(f"instance {instance} was stopped by teardown at {sidecar.instance_stopped_at}; "
                                  "nothing left to remove (reaching it would start it)")
        out = {"ok": True, **answer}
        out["cost"] = cost.facts(ctx, job_id, owned=created_by_bundle(ctx, sidecar), price_per_hour=price_per_hour,
                                 lookup=False)
        return out, 0
    return None


def _instance_end(ctx: Context, job_id: str, instance: str, answer: TeardownAnswer, gone: bool,
                  delete_instance: bool | None, force: bool, price_per_hour: float | None,
                  discard_results: bool, stop_instance: bool,
                  archived: dict[str, remote.Section]) -> tuple[TeardownAnswer, int]:
    """After the container: the instance stopped (asked), deleted (asked or owned) or kept; + ``cost``.
    A live job container this state dir did not launch (``unknown_containers``, listed in the
    teardown's round trip) blocks a stop or delete like a live job of ours, unless ``force``."""
    owned = not gone and owns(ctx, instance)
    listing = archived.pop(OTHERS, None)
    unknown = [] if gone or force else unknown_containers(ctx, instance, job_id, listing)
    if stop_instance and not gone:
        out, code = stop.after_teardown(ctx, job_id, instance, answer,
                                        live_jobs(ctx, instance, job_id) + unverified_results(ctx, instance),
                                        job_ids_on(ctx, instance), unknown)
    elif not gone and (delete_instance is True or (delete_instance is None and owned)):
        out, code = delete(ctx, job_id, instance, answer, asked=delete_instance is True, force=force,
                           discard=discard_results, archived=archived, unknown=unknown)
    else:   # kept: one the bundle itself started is named, so that next stops it again (nextstep.teardown)
        started: BundleStarted = {} if gone else bundle_started(ctx, job_id, ctx.sidecars.load(job_id))
        out, code = {"ok": True, **answer, **started}, 0
    out["cost"] = cost.facts(ctx, job_id, owned=owned or created_by_bundle(ctx, ctx.sidecars.load(job_id)),
                             price_per_hour=price_per_hour, lookup=not gone)
    return out, code


def to_save(ctx: Context, instance: str, job_id: str, sidecar: JobSidecar, delete_instance: bool | None,
            force: bool, discard: bool) -> list[JobSidecar]:
    """The jobs on ``instance`` whose results exist only there, to archive in the teardown's exec:
    none unless this teardown may delete it (asked, or owned with no other live job, or forced)."""
    if discard or delete_instance is False or sidecar.instance_deleted_at:
        return []
    if delete_instance is None and not owns(ctx, instance):
        return []
    if live_jobs(ctx, instance, job_id) and not force:   # kept (owned) or refused (asked): no delete now
        return []
    return keep.pending(ctx, jobs_on(ctx, instance))


def finalize_results(ctx: Context, job_id: str, sidecar: JobSidecar, instance_gone: bool,
                     answer: TeardownAnswer) -> None:
    """Upload and verify S3-routed results (after the rm: the job no longer writes); ``answer["results"]``."""
    if not sidecar.results:
        return
    if not instance_gone:
        results = results_mod.finalize(ctx, job_id)   # never None: the sidecar has results
        if results is not None:
            answer["results"] = results
        return
    answer["results"] = results_mod.summary(sidecar.results)
    if answer["results"].get("kind") == "s3" and not answer["results"].get("verified"):
        answer["warnings"].append(f"results of {job_id} were not verified in S3 before {sidecar.instance} "
                                  "was deleted: what was not uploaded is lost")


def teardown_damaged(ctx: Context, job_id: str, damaged: TaoBrevError) -> tuple[TeardownAnswer, int]:
    """Teardown of a quarantined (damaged) record: remove the job's container when the
    sidecar names its instance (the record cannot say whether one runs), then close the
    record (``jobs/quarantine/closed/``). The instance is never deleted from here."""
    note_job(job_id)
    sidecar = ctx.sidecars.load(job_id)
    instance = sidecar.instance
    answer: TeardownAnswer = {"job_id": job_id, "instance": instance, "backend_ref": None, "container_removed": False,
                              "instance_deleted": False, "deleted": [], "state": None,
                              "warnings": [f"{damaged.message}; its state cannot be known"]}
    already = ctx.records.closed_quarantine(job_id)
    if instance and not already:   # a rerun after the close has nothing left to remove
        ctx.sidecars.update(job_id, cancel={"requested_at": now_iso(), "by": "teardown"})
        remove_container(ctx, instance, job_id, sidecar, answer)
    closed = ctx.records.close_quarantined(job_id)
    ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": answer["container_removed"],
                                          "record_closed": str(closed)})
    answer["warnings"].append(f"record closed: {closed}" + (f"; instance {instance} kept (teardown.py --orphans "
                                                             "lists it when nothing else runs on it)"
                                                             if instance else ""))
    return {"ok": True, **answer}, 0
