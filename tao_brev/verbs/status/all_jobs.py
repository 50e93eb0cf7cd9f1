"""``poll_status.py --all``: every unfinished job polled once - one round trip per instance,
instances concurrently - and damaged records listed with what closes them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from ... import remote, resume_advice
from ...secrets import redact
from ... import progress as progress_mod
from ...context import Context
from ...docker_state import after_instance_start, docker_error_code
from ...errors import CODES, TaoBrevError, TransportError
from ...model.answer_types import ErrorObject, PollAnswer, PollAnswerJobsItem, PollAnswerQuarantinedItem
from ...model.answer_types import RecordDocument
from ...record_quarantine import QuarantinedEntry
from ...record_index import live_records
from ...records import is_terminal
from ...vocabulary import InstanceStatus, JobState
from .. import instance_gate, reconcile
from .. import results as results_mod
from ..job_facts import job_instance
from ..recovery_chain import recovering_command
from .observe import apply, interrupted_end, observe, watch_fields
from .probe import Probe, from_probe, instance_clock


def poll_many(ctx: Context, job_ids: list[str], max_workers: int = 8) -> list[PollAnswerJobsItem]:
    """Poll every job once: one round trip per instance, instances concurrently.

    The instance's script does not name the jobs: it finds every container
    labelled ``tao-job`` (one ``docker ps``, one ``docker inspect`` for all)
    and reads each one's status file through its ``/results`` bind mount
    (``remote.progress_functions``), so its size does not grow with the jobs.
    A job without a container there is UNKNOWN (no such container). Stall
    detection rests on the status file alone (no log call per job)."""
    by_instance: dict[str, list[RecordDocument]] = {}   # instance -> the records of its jobs
    answers: list[PollAnswerJobsItem] = []
    for job_id in job_ids:
        record = ctx.records.load(job_id)
        instance = job_instance(record, ctx.sidecars.load(job_id))
        if instance is None or not record.get("backend_ref") or reconcile.launch_failed(ctx.sidecars.load(job_id)):
            answers.append(observe_safely(ctx, job_id))   # reconciliation / never ran: one job at a time
        else:
            by_instance.setdefault(instance, []).append(record)

    if by_instance:
        instance_gate.read_all(ctx)   # ONE brev ls for all: a STOPPED instance is answered without exec

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        for group in pool.map(lambda item: _poll_instance(ctx, *item), sorted(by_instance.items())):
            answers.extend(group)
    return sorted(answers, key=lambda a: a["job_id"])


def _poll_instance(ctx: Context, instance: str, records: list[RecordDocument]) -> list[PollAnswerJobsItem]:
    """The answers of the jobs on one instance, from one round trip (none to a STOPPED one)."""
    if instance_gate.stopped(ctx, instance, fresh=False):
        return [{"job_id": r["id"], "instance": instance, "ok": False, "instance_status": InstanceStatus.STOPPED,
                 "state": r.get("terminal_state") or JobState.UNKNOWN,
                 "error": instance_gate.stopped_error(instance, "poll_status.py", r["id"]).to_json()}
                for r in records]
    token = remote.new_token()
    script = "\n".join([remote.progress_functions(token), remote.section(token, "now", remote.instance_now()),
                        remote.section(token, "jobs", remote.read_all_jobs())])
    try:
        result = ctx.brev.exec(instance, script, idempotent=True)
        sections = remote.parse_sections(result.stdout, token)
        if "jobs" not in sections:
            raise TransportError("TRANSPORT_FAILED", f"the answer of {instance} was incomplete")
        found, noise = progress_mod.parse_jobs(sections["jobs"].output, token)
        if sections["jobs"].exit_code != 0 and any("No such" not in line for line in noise.splitlines()):
            raise TaoBrevError(docker_error_code(noise), f"docker on {instance} failed: "
                                                         f"{redact.tail(noise, 400)}")
    except TaoBrevError as exc:
        return [{"job_id": r["id"], "instance": instance, "ok": False, "error": exc.to_json()} for r in records]
    now = instance_clock(sections)
    return [_job_answer(ctx, instance, record, found.get(record["id"]), now, result.instance_started)
            for record in records]


def _job_answer(ctx: Context, instance: str, record: RecordDocument, probe: progress_mod.JobProbe | None, now: float | None,
                instance_started: bool) -> PollAnswerJobsItem:
    """One job's ``--all`` answer from its entry in the instance's answer (``probe``: None, no container)."""
    try:
        observed = from_probe(record["id"], probe)
        if instance_started:
            observed = after_instance_start(observed, instance)
        observed = interrupted_end(observed, probe.files if probe else None, record.get("action", ""))
        record = apply(ctx, record, observed)
        terminal = record.get("terminal_state")
        results = results_mod.finalize(ctx, record["id"]) if terminal else None
        watched = watch_fields(ctx, record, observed,
                               Probe(now=now, files=probe.files if probe else [], status_only=True),
                               terminal=terminal)
        return resume_advice.fill_answer({
            "job_id": record["id"], "instance": instance, "ok": True, "state": terminal or observed.state,
            "message": observed.message, **({"hint": observed.hint} if observed.hint else {}),
            **watched, **({"results": results} if results else {})}, record, ctx.sidecars.load(record["id"]),
            recovering_command(ctx, record["id"]))
    except TaoBrevError as exc:
        return {"job_id": record["id"], "instance": instance, "ok": False, "error": exc.to_json()}


def _needs_action(job: PollAnswerJobsItem) -> bool:
    """A job the reader must act on (ended, lost, failed to answer, stalled): listed first, so an
    answer cut to its size bound (``answer_cut``) drops quiet RUNNING/PENDING jobs before these."""
    return (not job.get("ok") or job.get("stalled") is True
            or job.get("state") not in (JobState.RUNNING, JobState.PENDING))


def poll_all(ctx: Context) -> tuple[PollAnswer, int]:
    """``--all``: every unfinished Brev job in the record store, polled once.

    The store is scanned with ``record_index.live_records``: a record is read
    only when its file changed since the last scan (terminal records are
    not read again on every call).

    A damaged record is quarantined (``records``) and listed under
    ``quarantined`` with the instance its sidecar names and the command that
    closes it (it may hide a job that still bills), never skipped - and never a
    failure of the other jobs. Exit 0 when every job answered; else the worst
    class among the failures: 3 (the backend could not be reached), 2, 1.
    Jobs that need action come first (:func:`_needs_action`), then by job id.
    """
    ctx.records.note_held_ids()   # the ids it lists are the bundle's: no variable equal to one hides it
    # live: non-terminal records, and never-ran ones (kept in the scan until teardown closes them)
    live, corrupt = live_records(ctx.records, ctx.state_root, keep=reconcile.never_ran_record)
    ids = [record["id"] for record in live
           if not is_terminal(record.get("terminal_state")) or _never_ran_unclosed(ctx, record)]
    for bad in corrupt:
        if bad.get("quarantined"):   # moved aside by an earlier reader
            continue
        try:
            ctx.records.quarantine(bad["id"])   # moved aside: listed below with the earlier ones
        except TaoBrevError:   # a file name that is no job id: not ours to move
            continue
    quarantined = [_quarantined_entry(ctx, entry) for entry in ctx.records.quarantined_entries()]
    if ids:
        ctx.brev.path()   # BREV_NOT_FOUND: the whole answer is exit 3, not one error per job
    jobs = sorted(poll_many(ctx, ids), key=lambda a: (not _needs_action(a), a["job_id"]))
    extra: PollAnswer = {"quarantined": quarantined} if quarantined else {}
    failed = [j for j in jobs if not j.get("ok")]
    if not failed:
        return {"ok": True, "jobs": jobs, **extra}, 0
    classes = {CODES[j["error"]["code"]].exit_code for j in failed if j["error"]["code"] in CODES}
    code = 3 if 3 in classes else 2 if 2 in classes else 1
    first = failed[0]["error"]
    error: ErrorObject = {**first, "message": f"{len(failed)} of {len(jobs)} jobs answered with an error; "
                                 f"{failed[0]['job_id']}: {first['message']}"}
    return {"ok": False, "jobs": jobs, **extra, "error": error}, code


def _quarantined_entry(ctx: Context, listed: QuarantinedEntry) -> PollAnswerQuarantinedItem:
    """``--all``'s entry for a damaged record: where it is, its instance (sidecar), what closes it."""
    job_id = listed["id"]
    try:
        instance = ctx.sidecars.load(job_id).instance
    except TaoBrevError:
        instance = None
    return {"job_id": job_id, "instance": instance, "path": listed["quarantined"],
            "message": listed["error"],
            "fix": f"teardown.py {job_id} removes its container{' on ' + instance if instance else ''} "
                   "and closes the record"}


def _never_ran_unclosed(ctx: Context, record: RecordDocument) -> bool:
    """A terminal job that never ran and that no teardown closed yet: ``--all`` lists it (with its
    one answer) until ``teardown.py JOB_ID`` closes it. The sidecar is read only for ERROR records
    that this bundle closed as never launched."""
    if not reconcile.never_ran_record(record):
        return False
    try:
        sidecar = ctx.sidecars.load(record["id"])
    except TaoBrevError:
        return False
    return reconcile.launch_failed(sidecar) and not sidecar.teardown


def observe_safely(ctx: Context, job_id: str) -> PollAnswerJobsItem:
    """:func:`observe` as ``--all``'s entry: an error is the job's answer (``ok: false``), never raised."""
    try:
        entry: PollAnswer = {"ok": True, **observe(ctx, job_id, read_failed=False)}   # one job's answer
        return entry
    except TaoBrevError as exc:
        return {"job_id": job_id, "ok": False, "error": exc.to_json()}
