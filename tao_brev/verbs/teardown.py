"""teardown (cancel): remove the job's container, close the record, and delete
an instance this bundle owns so it stops billing.

One round trip reads the container's last state and removes it
(``docker rm -f``). The record is then closed: a job that had already exited
keeps the state the backend reports (COMPLETE/ERROR); one still running (or
gone) becomes CANCELED; a terminal record never changes. The intent to cancel
is written (sidecar ``cancel``) before the round trip, so a teardown killed
half-way leaves a job that the next poll or teardown closes as CANCELED - not
as the exit 137 of ``docker rm -f``'s SIGKILL read as out-of-memory
(``status.settle_interrupted_cancel``). A damaged (quarantined) record is
torn down too: its container, if the sidecar names an instance, is removed and
the record closed (``records.close_quarantined``).

Ownership is per instance: the bundle owns an instance when a job on it was
submitted with ``--ephemeral`` (:func:`owns`); a reused instance is deleted
only when asked by name (``--delete-instance``). An owned instance is deleted
(``brev delete``) by the teardown of its last job, unless ``--keep-instance``:
while another job on it is live it is kept (``instance_kept``, exit 0). Live
jobs (when asked by name) and results not verified in S3 refuse the delete
(INSTANCE_DELETE_REFUSED), unless ``--force``. The answer names exactly what
was deleted (``deleted``); every job on a deleted instance remembers it
(``instance_deleted_at``), so a rerun deletes nothing twice and never reaches
a new instance that took the name. The answer carries the job's ``cost`` facts.

Results routed to S3 are uploaded and verified (``results.finalize``, once)
right after the container is removed - they live in its bind-mounted results
dir on the instance, which ``docker rm`` does not touch, and a stopped job no
longer writes to them. Before ``brev delete``, the destination of every
verified job on the instance is LISTed again (``results.recheck``): an object
lost since its verification blocks the delete and names the file.
"""

from __future__ import annotations

import json
import re

from .. import lazy_re
from .. import cost, logcap, remote
from ..secrets import redact
from ..context import Context, note_job, note_state, say, warn
from ..docker_state import after_instance_start, from_inspect
from ..errors import TaoBrevError, TransportError
from ..records import current_state, is_terminal, now_iso
from . import instance_gate, keep, reconcile
from . import results as results_mod
from . import status

DELETE_REFUSED_FIX = ("Run teardown.py {job_id} --delete-instance again once the jobs ended: it uploads unverified "
                      "results again from the instance and verifies them; or pass --force to delete anyway and "
                      "lose what is listed.")


SAVED_LOG_LINES = 500   # kept in $TAO_STATE_DIR/brev/logs/<id>.log when the container is removed
# `docker rm -f` of a container that is already gone: Docker CLI >= 20.10 prints this and exits 0,
# older CLIs exit 1 (docker/cli cli/command/container/rm.go): either way, already removed.
NO_SUCH_CONTAINER = lazy_re.compile(r"No such container", re.IGNORECASE)


def _observe_and_remove(ctx: Context, instance: str, job_id: str, owner: tuple[str, str] | None = None,
                        saves: list[dict] = ()) -> tuple[dict | None, bool, dict]:
    """(last docker .State or None, container was present, archive sections) in one round trip;
    the last SAVED_LOG_LINES log lines are kept locally (``poll_status --logs`` reads them).
    When brev had to start the STOPPED instance for it, the state carries
    ``"TaoInstanceStarted": true`` (the stop killed the container, see close_record).
    ``owner`` = (image, results instance dir): once the container is gone, its
    results are handed to the instance user (:func:`remote.own_results`); a
    failure there is reported on stderr, never a failed teardown. ``saves``: sidecars of jobs whose
    results exist only on the instance: each results dir is archived after the rm
    (``keep.sections``; their ``save:<job_id>`` sections are returned for ``keep.fetch``)."""
    token = remote.new_token()
    parts = [remote.abandon_launch(job_id),   # a launch still on its way now refuses
             remote.discard_job_credentials(job_id),   # none outlives the job
             remote.section(token, "state", remote.inspect_state(job_id)),
             remote.section(token, "logs", logcap.remote_command(remote.logs_tail(job_id, SAVED_LOG_LINES), token,
                                                                 total_bytes=logcap.SAVED_LOG_BYTES)),
             remote.section(token, "rm", remote.remove_container(job_id))]
    if owner:
        parts.append(remote.section(token, "own", remote.own_results(*owner)))
    parts += keep.sections(token, list(saves))
    # archiving a whole results dir can outlast the default exec budget (180 s)
    result = ctx.brev.exec(instance, "\n".join(parts), idempotent=True,
                           timeout=keep.ARCHIVE_TIMEOUT_S if saves else None)
    sections = remote.parse_sections(result.stdout, token)
    archived = {name: sec for name, sec in sections.items() if name.startswith("save:")}
    own = sections.get("own")
    if own is not None and own.exit_code != 0:
        warn(f"teardown {job_id}: could not hand the results to the instance user: {redact.tail(own.output, 300)}")
    if "state" not in sections or "rm" not in sections:
        raise TransportError("TRANSPORT_FAILED", f"incomplete answer from {instance} for teardown of {job_id}")
    if sections["rm"].exit_code != 0 and not NO_SUCH_CONTAINER.search(sections["rm"].output):
        from ..docker_state import docker_error_code

        raise TaoBrevError(docker_error_code(sections["rm"].output),
                           f"docker rm -f {job_id} failed: {redact.tail(sections['rm'].output, 400)}")
    logs = sections.get("logs")
    if logs is not None and logs.exit_code == 0 and logs.output.strip():   # `docker logs` dies with the container
        kept, _cut = logcap.bound(logs.output, token=token, total_bytes=logcap.SAVED_LOG_BYTES)
        ctx.sidecars.save_logs(job_id, kept + "\n")
    state_sec = sections["state"]
    if state_sec.exit_code != 0:
        return None, False, archived
    try:
        state = json.loads(state_sec.output.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None, True, archived
    return ({**state, "TaoInstanceStarted": True} if result.instance_started else state), True, archived


def close_record(ctx: Context, record: dict, docker_state: dict | None, why: str,
                 earlier_cancel: dict | None = None) -> dict:
    """Close a non-terminal record from the container's last state (``earlier_cancel``:
    the intent of an earlier teardown, interrupted, whose SIGKILL that state may show)."""
    if is_terminal(record.get("terminal_state")):
        return record
    observed = from_inspect(docker_state)
    if (docker_state or {}).get("TaoInstanceStarted"):
        observed = after_instance_start(observed, status.job_instance(record, ctx.sidecars.load(record["id"])) or "?")
    status.settle_interrupted_cancel(observed, earlier_cancel)
    if observed.state in ("COMPLETE", "ERROR"):
        return ctx.records.mark(record["id"], observed.state, message=observed.message, source="agent")
    return ctx.records.mark(record["id"], "CANCELED", message=observed.message if observed.state == "CANCELED"
                            else why, source="agent")


def jobs_on(ctx: Context, instance: str) -> list[dict]:
    """The sidecars of the jobs on ``instance`` as it is now: jobs on an earlier
    instance of that name, which a teardown deleted, are left out (a name can be reused)."""
    return [side for side in ctx.sidecars.all()
            if side.get("instance") == instance and side.get("job_id") and not side.get("instance_deleted_at")]


def owns(ctx: Context, instance: str) -> bool:
    """The instance is this bundle's to delete: a job on it was submitted with ``--ephemeral``.
    A reused instance (no such job) is deleted only when asked by name."""
    return any(side.get("ephemeral") for side in jobs_on(ctx, instance))


def live_jobs(ctx: Context, instance: str, except_job: str | None = None) -> list[str]:
    """``job X on I is RUNNING`` for each other job on ``instance`` that is not terminal
    (a job whose record cannot be read counts as live)."""
    live = []
    for side in jobs_on(ctx, instance):
        job_id = side["job_id"]
        if job_id == except_job:
            continue
        try:
            record = ctx.records.load(job_id)
        except TaoBrevError as exc:
            if not (side.get("teardown") or {}).get("record_closed"):   # a damaged record, not torn down
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
        results = side.get("results") or {}
        if results.get("kind") == "s3" and not results.get("verified"):
            out.append(f"job {side['job_id']}: results not verified in {results.get('destination')}: "
                       + results_mod.describe_loss(results))
    return out


def unsaved_results(ctx: Context, instance: str) -> list[str]:
    """The jobs on ``instance`` whose results exist only there (``keep.pending``), as blockers
    for a delete that does not copy them back first (``teardown.py --orphans --delete``)."""
    return [f"job {side['job_id']}: results only on {instance} ({side['results']['instance_dir']}): "
            f"teardown.py {side['job_id']} --delete-instance copies them back, verifies, then deletes"
            for side in keep.pending(ctx, jobs_on(ctx, instance))]


def instance_blockers(ctx: Context, instance: str, except_job: str | None) -> list[str]:
    """Why ``instance`` must not be deleted: live jobs and unverified results on it."""
    return live_jobs(ctx, instance, except_job) + unverified_results(ctx, instance)


def delete_and_record(ctx: Context, instance: str) -> None:
    """``brev delete`` and remember it: every job on the instance gets ``instance_deleted_at``
    (so a rerun deletes nothing twice) and the instance memory ``deleted_at``."""
    jobs = jobs_on(ctx, instance)
    try:
        ctx.brev.delete(instance)
    except TaoBrevError as exc:
        raise delete_pending(ctx, instance, exc) from None
    deleted_at = cost.now_precise()
    ctx.sidecars.note_instance(instance, deleted_at=deleted_at, delete_pending=None)
    for side in jobs:
        ctx.sidecars.update(side["job_id"], instance_deleted_at=deleted_at, delete_pending=None)
    say(f"teardown: instance {instance} deleted")


def delete_pending(ctx: Context, instance: str, exc: TaoBrevError) -> TaoBrevError:
    """``brev delete`` failed (the transport already logged in again once when brev
    reported an auth failure): remember the pending delete - the instance memory and
    every job on it carry ``delete_pending`` until a later delete succeeds, and
    ``teardown.py --orphans`` lists it - and return INSTANCE_DELETE_PENDING saying
    that the instance still bills, with the exact manual command."""
    pending = {"since": (ctx.sidecars.instance(instance).get("delete_pending") or {}).get("since") or now_iso(),
               "last_attempt_at": now_iso(), "error": exc.code, "message": exc.message,
               "manual_command": f"brev delete {instance}"}
    ctx.sidecars.note_instance(instance, delete_pending=pending)
    for side in jobs_on(ctx, instance):
        ctx.sidecars.update(side["job_id"], delete_pending=pending)
    say(f"teardown: brev delete {instance} failed ({exc.code}); cleanup pending, the instance still bills")
    return TaoBrevError("INSTANCE_DELETE_PENDING",
                        f"instance {instance} was NOT deleted and still bills: brev delete failed ({exc.code}: "
                        f"{exc.message}). Cleanup is pending (kept in the sidecar; teardown.py --orphans lists it).",
                        f"Run `brev delete {instance}` yourself (in a terminal where brev is logged in), or rerun "
                        "this teardown once brev answers; then teardown.py --orphans no longer lists it.",
                        manual_command=f"brev delete {instance}")


def forget_pending_delete(ctx: Context, instance: str) -> None:
    """The instance is gone (deleted by hand, or by someone else): nothing is pending any more."""
    if ctx.sidecars.instance(instance).get("delete_pending"):
        ctx.sidecars.note_instance(instance, delete_pending=None)
        for side in jobs_on(ctx, instance):
            ctx.sidecars.update(side["job_id"], delete_pending=None)


def _finalize_results(ctx: Context, job_id: str, sidecar: dict, instance_gone: bool, answer: dict) -> None:
    """Upload and verify S3-routed results (after the rm: the job no longer writes); ``answer["results"]``."""
    if not sidecar.get("results"):
        return
    if not instance_gone:
        answer["results"] = results_mod.finalize(ctx, job_id)
        return
    answer["results"] = results_mod.summary(sidecar["results"])
    if answer["results"].get("kind") == "s3" and not answer["results"].get("verified"):
        answer["warnings"].append(f"results of {job_id} were not verified in S3 before {sidecar.get('instance')} "
                                  "was deleted: what was not uploaded is lost")


def teardown(ctx: Context, job_id: str, delete_instance: bool | None = None, force: bool = False,
             price_per_hour: float | None = None, discard_results: bool = False,
             stop_instance: bool = False, start: bool = False) -> tuple[dict, int]:
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
            return _teardown_damaged(ctx, job_id, exc)
        raise
    note_job(job_id)
    note_state(record.get("terminal_state") or current_state(record))
    cost.note_price(ctx, job_id, price_per_hour)   # a known price spares the brev ls for the type
    sidecar = ctx.sidecars.load(job_id)
    instance = status.job_instance(record, sidecar)
    answer = {"job_id": job_id, "instance": instance, "backend_ref": record.get("backend_ref"),
              "results_dir": record["results_dir"], "container_removed": False,
              "instance_deleted": False, "deleted": [], "warnings": []}
    if instance is None:
        record = close_record(ctx, record, None, "canceled before launch (no instance recorded)")
        return {"ok": True, **answer, "state": record.get("terminal_state")}, 0
    if reconcile.launch_failed(sidecar) and reconcile.instance_missing(sidecar):
        # brev ls did not list the instance when the launch was settled: nothing exists to remove or ask
        answer["warnings"].append(f"job {job_id} never ran: no instance {instance} existed (brev ls); "
                                  "nothing to remove; the record is closed")
        record = close_record(ctx, record, None, f"never launched: no instance {instance}")
        ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": False})
        out = {"ok": True, **answer, "state": record.get("terminal_state")}
        out["cost"] = cost.facts(ctx, job_id, owned=False, price_per_hour=price_per_hour, lookup=False)
        return out, 0

    if sidecar.get("instance_stopped_at") and sidecar.get("teardown") and is_terminal(record.get("terminal_state")):
        # torn down and stopped by the bundle: any exec would start it again (and bill)
        answer.update(instance_stopped=True, state=record.get("terminal_state"))
        answer["warnings"].append(f"instance {instance} was stopped by teardown at {sidecar['instance_stopped_at']}; "
                                  "nothing left to remove (reaching it would start it)")
        out = {"ok": True, **answer}
        out["cost"] = cost.facts(ctx, job_id, owned=owns(ctx, instance), price_per_hour=price_per_hour, lookup=False)
        return out, 0

    deletes = delete_instance is True or (delete_instance is None and owns(ctx, instance))
    if not sidecar.get("instance_deleted_at") and instance_gate.stopped(ctx, instance, start or deletes):
        out = instance_gate.stopped_answer({"ok": False, **answer}, instance, "teardown.py", job_id,
                                           record.get("terminal_state"))
        return out, 1
    earlier_cancel = sidecar.get("cancel")
    if not is_terminal(record.get("terminal_state")) and not earlier_cancel:   # intent first, then act
        ctx.sidecars.update(job_id, cancel={"requested_at": now_iso(), "by": "teardown"})
    saves = _to_save(ctx, instance, job_id, sidecar, delete_instance, force, discard_results)
    docker_state, gone, archived = _remove_container(ctx, instance, job_id, sidecar, answer, record.get("image"),
                                                     saves)
    present = answer["container_removed"]
    record = close_record(ctx, record, docker_state, "canceled by teardown" if present
                          else "container not found at teardown", earlier_cancel)
    ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": present})
    if docker_state:
        seen = from_inspect(docker_state)
        cost.note_container_times(ctx, job_id, seen.started_at, seen.finished_at)
    answer["state"] = record.get("terminal_state")
    say(f"teardown {job_id}: container {'removed' if present else 'absent'}; record {answer['state']}")
    _finalize_results(ctx, job_id, sidecar, gone, answer)

    owned = not gone and owns(ctx, instance)
    if stop_instance and not gone:
        from . import stop

        out, code = stop.after_teardown(ctx, job_id, instance, answer,
                                        live_jobs(ctx, instance, job_id) + unverified_results(ctx, instance),
                                        [side["job_id"] for side in jobs_on(ctx, instance)])
    elif not gone and (delete_instance is True or (delete_instance is None and owned)):
        out, code = _delete(ctx, job_id, instance, answer, asked=delete_instance is True, force=force,
                            discard=discard_results, archived=archived)
    else:
        out, code = {"ok": True, **answer}, 0
    out["cost"] = cost.facts(ctx, job_id, owned=owned, price_per_hour=price_per_hour, lookup=not gone)
    return out, code


def _teardown_damaged(ctx: Context, job_id: str, damaged: TaoBrevError) -> tuple[dict, int]:
    """Teardown of a quarantined (damaged) record: remove the job's container when the
    sidecar names its instance (the record cannot say whether one runs), then close the
    record (``jobs/quarantine/closed/``). The instance is never deleted from here."""
    note_job(job_id)
    sidecar = ctx.sidecars.load(job_id)
    instance = sidecar.get("instance")
    answer = {"job_id": job_id, "instance": instance, "backend_ref": None, "container_removed": False,
              "instance_deleted": False, "deleted": [], "state": None,
              "warnings": [f"{damaged.message}; its state cannot be known"]}
    already = ctx.records.closed_quarantine(job_id)
    if instance and not already:   # a rerun after the close has nothing left to remove
        ctx.sidecars.update(job_id, cancel={"requested_at": now_iso(), "by": "teardown"})
        _remove_container(ctx, instance, job_id, sidecar, answer)
    closed = ctx.records.close_quarantined(job_id)
    ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": answer["container_removed"],
                                          "record_closed": str(closed)})
    answer["warnings"].append(f"record closed: {closed}" + (f"; instance {instance} kept (teardown.py --orphans "
                                                             "lists it when nothing else runs on it)"
                                                             if instance else ""))
    return {"ok": True, **answer}, 0


def _to_save(ctx: Context, instance: str, job_id: str, sidecar: dict, delete_instance: bool | None,
             force: bool, discard: bool) -> list[dict]:
    """The jobs on ``instance`` whose results exist only there, to archive in the teardown's exec:
    none unless this teardown may delete it (asked, or owned with no other live job, or forced)."""
    if discard or delete_instance is False or sidecar.get("instance_deleted_at"):
        return []
    if delete_instance is None and not owns(ctx, instance):
        return []
    if live_jobs(ctx, instance, job_id) and not force:   # kept (owned) or refused (asked): no delete now
        return []
    return keep.pending(ctx, jobs_on(ctx, instance))


def _remove_container(ctx: Context, instance: str, job_id: str, sidecar: dict, answer: dict,
                      image: str | None = None, saves: list[dict] = ()) -> tuple[dict | None, bool, dict]:
    """(the container's last docker .State or None, the instance is gone, archive sections).
    No round trip once a teardown deleted the instance: a rerun reaches nothing (and never a
    new instance of that name)."""
    if sidecar.get("instance_deleted_at"):
        answer["warnings"].append(f"instance {instance} was deleted by teardown at "
                                  f"{sidecar['instance_deleted_at']}; nothing left to remove")
        return None, True, {}
    try:
        results = sidecar.get("results") or {}
        owner = (image, results["instance_dir"]) if image and results.get("instance_dir") else None
        docker_state, answer["container_removed"], archived = _observe_and_remove(ctx, instance, job_id, owner,
                                                                                  saves)
    except TransportError:
        if ctx.brev.instance(instance) is not None:
            raise
        answer["warnings"].append(f"instance {instance} no longer exists; nothing to remove")
        forget_pending_delete(ctx, instance)
        return None, True, {}
    return docker_state, False, archived


def _delete(ctx: Context, job_id: str, instance: str, answer: dict, asked: bool, force: bool,
            discard: bool = False, archived: dict | None = None) -> tuple[dict, int]:
    """``brev delete`` the instance unless something on it would be lost.

    Unverified (or since lost) S3 results and, when asked by name, live jobs refuse
    (INSTANCE_DELETE_REFUSED, exit 1) unless ``force``. An owned instance that another
    job still uses is kept without an error: the last job on it to end deletes it.
    Results that exist only on the instance are copied back and verified first
    (``keep.fetch``; ``results_saved_to``); any not verified refuses (RESULTS_ONLY_ON_INSTANCE,
    exit 1, ``still_billing``) unless ``discard``."""
    lost = results_mod.recheck_instance(ctx, instance)   # a LIST per verified job: nothing lost since?
    if "results" in answer:
        answer["results"] = results_mod.summary(ctx.sidecars.load(job_id)["results"])
    lost += unverified_results(ctx, instance)
    live = live_jobs(ctx, instance, job_id)
    if live and not lost and not asked and not force:
        answer["instance_kept"] = "; ".join(live)
        answer["warnings"].append(f"instance {instance} kept, it still bills: {'; '.join(live)}. The last job on it "
                                  "to end deletes it (poll_status.py JOB_ID --wait --teardown --timeout S), or "
                                  "teardown.py --orphans --delete once all ended")
        return {"ok": True, **answer}, 0
    blockers = live + lost
    if blockers and not force:
        err = TaoBrevError("INSTANCE_DELETE_REFUSED", f"not deleting {instance}: " + "; ".join(blockers),
                           DELETE_REFUSED_FIX.format(job_id=job_id))
        return {"ok": False, **answer, "blockers": blockers, "error": err.to_json()}, 1
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
    results = ctx.sidecars.load(job_id).get("results") or {}
    if results.get("kind") == "local":
        answer["warnings"].append(f"results of {job_id} live only on {instance} ({results.get('instance_dir')}); "
                                  "deleting the instance deletes them")
    cost.learn_instance_type(ctx, job_id)   # brev ls forgets a deleted instance's type
    try:
        delete_and_record(ctx, instance)
    except TaoBrevError as exc:   # the container is removed and the record closed: say so, then fail
        pending = {"cleanup_pending": True, "still_billing": True, "manual_command": f"brev delete {instance}"} \
            if exc.code == "INSTANCE_DELETE_PENDING" else {}
        return {"ok": False, **answer, **pending, "error": exc.to_json()}, exc.exit_code
    answer.update(instance_deleted=True, deleted=[instance], forced=bool(blockers))
    return {"ok": True, **answer}, 0


def wait_and_teardown(ctx: Context, job_id: str, log_lines: int = 0, interval: float = 30.0,
                      timeout: float | None = None, price_per_hour: float | None = None,
                      metrics: int | None = None, stall_after: float | None = None) -> tuple[dict, int]:
    """``poll_status.py JOB_ID --wait --teardown``: carry the job to its end in one call.

    Wait until terminal (``status.poll``: the results are uploaded and verified
    there), then :func:`teardown` with its defaults: the container is removed and
    an instance this bundle owns is deleted unless something on it would be lost.
    A job still running (``WAIT_TIMEOUT``) or whose instance is gone or stopped
    (``INSTANCE_LOST``: starting it again would bill) is not torn down
    (``teardown_skipped`` says why). A stalled job (``JOB_STALLED``) is torn down
    only when the caller gave ``stall_after`` explicitly (a stall is a heuristic;
    the explicit threshold is the request to act); the answer then carries
    ``stalled_s`` (seconds without a sign of life, also in ``cost.stalled_s``)
    and answers ``ok: true``, exit 0, the job CANCELED (``stall_teardown``: what was saved). Safe to kill and rerun at any point:
    verified results are not sent again, a deleted instance is not asked again.

    The answer is the poll's, with ``teardown`` (its answer) and the final ``cost``.
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
                                   f"poll_status.py {job_id} --wait --teardown --stall-after SECONDS --timeout S to tear a "
                                   "stalled job down automatically")
        return out, code
    if not stalled and not is_terminal(out.get("state")) and error != "CONTAINER_GONE":
        out["teardown_skipped"] = (f"job {job_id} is {out.get('state')} ({error}): nothing was removed or deleted; "
                                   f"run teardown.py {job_id} to cancel it")
        return out, code
    if stalled:
        out["stalled_s"] = out["stall"]["idle_s"]
        ctx.sidecars.update(job_id, cost={"stalled_s": out["stalled_s"]})   # the cost facts carry it from now on
        say(f"job {job_id} stalled for {out['stalled_s']} s (--stall-after {stall_after:g}): tearing it down")
    try:
        down, down_code = teardown(ctx, job_id, price_per_hour=price_per_hour)
    except TaoBrevError as exc:
        down, down_code = {"ok": False, "job_id": job_id, "error": exc.to_json()}, exc.exit_code
    if "cost" in down:
        out["cost"] = down.pop("cost")
    out["teardown"] = down
    if down.get("state"):   # one story: the answer's state is the record's after the teardown
        out["state"] = down["state"]
        if "terminal_state" in out and is_terminal(down["state"]):
            out["terminal_state"] = down["state"]
    if down_code != 0:
        out.update(ok=False, error=down["error"])
        code = down_code
    elif stalled:   # the stop that --stall-after asked for happened: done, not a failure
        out.pop("error", None)
        out.update(ok=True, stall_teardown=_stall_story(ctx, job_id, out, down, stall_after))
        code = 0
    return out, code


def _stall_story(ctx: Context, job_id: str, out: dict, down: dict, stall_after: float) -> dict:
    """What the stall teardown did and what it kept: the job CANCELED after ``stalled_s`` without a
    sign of life, its last log lines saved here, its results where the teardown left them."""
    logs = ctx.sidecars.logs_path(job_id)
    results = down.get("results") or {}
    return {"state": down.get("state"), "stalled_s": out.get("stalled_s"), "stall_after_s": stall_after,
            "logs_saved_to": str(logs) if logs.is_file() else None,
            "results": ({k: results.get(k) for k in ("kind", "destination", "verified") if k in results}
                        if results else None),
            "results_saved_to": down.get("results_saved_to"),
            "results_dir_on_instance": None if down.get("instance_deleted") else down.get("results_dir")}
