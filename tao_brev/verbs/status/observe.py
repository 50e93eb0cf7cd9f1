"""One poll of one job: the record, the sidecar and the backend's answer made into the poll's
answer (state, progress, stall, logs, results, cost, the recovery chain)."""

from __future__ import annotations

import dataclasses
from typing import TypedDict

from ... import cost, eta_seen, logcap, prices, remote, resume_advice, tao_status
from ... import progress as progress_mod
from ...context import Context, warn
from ...docker_state import Observed, gate_answer
from ...errors import TaoBrevError
from ...records import current_state, is_terminal, now_iso
from ...vocabulary import ErrClass, JobState, Source
from .. import instance_gate, reconcile
from .. import results as results_mod
from ..instance_jobs import bundle_started, created_by_bundle
from ..job_facts import job_instance, results_instance_dir, settle_interrupted_cancel
from ..recovery_chain import annotate, recovering_command
from .probe import Probe, deleted, job_sections, read_backend, read_job
from ...model import JobSidecar
from ...model.answer_types import Hint, Metrics, PollAnswer, Progress, RecordDocument, Stall


class Watched(TypedDict, total=False):
    """What :func:`watch_fields` adds to a job's answer."""
    progress: Progress
    final_kpi: dict[str, float | str]
    metrics: Metrics
    stalled: bool
    stall: Stall


def watch_fields(ctx: Context, record: RecordDocument, observed: Observed, probe: Probe | None, *,
                 metrics: int | None = None, stall_after: float | None = None,
                 terminal: str | None = None) -> Watched:
    """``progress`` (always; a RUNNING train job's says why it has no ETA yet: ``eta_note``),
    ``stalled``/``stall`` (RUNNING), ``metrics`` (asked), ``final_kpi``
    (COMPLETE) for an answer. A terminal job's last progress is kept in the sidecar
    (``final_progress``): later answers, after teardown, still carry it; a RUNNING job's ETA too
    (``last_eta``, :mod:`eta_seen`)."""
    job_id, action = record["id"], record.get("action") or ""
    file = progress_mod.pick(probe.files, action) if probe and probe.files is not None else None
    out: Watched = {"progress": {"available": False, "note": "the status file was not read (the instance is deleted "
                                                      "or unreachable, or the job's results dir on it is unknown)"}}
    if probe is not None and probe.files is not None:
        out["progress"] = progress_mod.summarize(file, probe.now, action)
    saved = ctx.sidecars.load(job_id).final_progress
    if terminal and out["progress"].get("available"):
        if not saved or (saved.get("updated_at"), saved.get("file")) != (out["progress"].get("updated_at"),
                                                                         out["progress"].get("file")):
            ctx.sidecars.update(job_id, final_progress=out["progress"])
    elif saved and not out["progress"].get("available"):
        out["progress"] = {**saved, "note": "kept from the last poll that read the status file"}
    out["progress"] = progress_mod.after_end(out["progress"], terminal, action, job_id)
    if terminal == JobState.COMPLETE and out.get("progress", {}).get("kpi"):
        out["final_kpi"] = out["progress"]["kpi"]
    if metrics:
        out["metrics"] = progress_mod.metrics(file, metrics)
    seen = eta_seen.record(out["progress"], now_iso()) if observed.state == JobState.RUNNING and not terminal else None
    if seen is not None:   # a GPUS_BUSY refusal of a later submit tells from it how long this job has left
        ctx.sidecars.update(job_id, last_eta=seen)
    if observed.state == JobState.RUNNING and not terminal and probe is not None and probe.files is not None:
        why = progress_mod.eta_note(out["progress"], action, probe.now, observed.started_at)
        if why:
            out["progress"]["eta_note"] = why
        stall = progress_mod.assess_stall(job_id, probe.now, out["progress"], observed.started_at,
                                          explicit=stall_after, last_log=probe.last_log,
                                          status_only=probe.status_only)
        if stall is not None:
            out.update({"stalled": stall["stalled"], "stall": stall})
    return out


def interrupted_end(observed: Observed, files: list[progress_mod.StatusFile] | None, action: str) -> Observed:
    """An exit 0 is no success when TAO caught an interrupt: it writes the FAILURE line "... was
    interrupted" and returns (tao-pytorch core/decorators/workflow.py:68-73). Such a COMPLETE
    becomes ERROR, ERR_PROGRAM (an interrupt is a stop asked of the process, not an infrastructure
    failure to recover from: the advice resumes it); any other observation is returned as is."""
    file = progress_mod.pick(files, action) if observed.state == JobState.COMPLETE and files else None
    message = tao_status.interrupted(tao_status.current_run(progress_mod.entries(file.lines)[0])) if file else None
    if message is None:
        return observed
    hint: Hint = {"err_class": ErrClass.PROGRAM, "reason": "TAO caught an interrupt and exited 0 without finishing",
                  "advice": f"Find what sent the interrupt, then run {resume_advice.RESUME_WORDS} (continues from "
                            "its last checkpoint); nothing resumes it by itself.",
                  "evidence": [logcap.cut_redacted(message, 200)]}   # a list of lines, as every hint's
    return dataclasses.replace(observed, state=JobState.ERROR, hint=hint,
                               message=f"exited 0 but did not finish: {tao_status.INTERRUPTED_NOTE}")


def apply(ctx: Context, record: RecordDocument, observed: Observed) -> RecordDocument:
    """Mark the record when the backend's state differs from its last transition
    (an ERROR carries its hint's failure class as ``err_class``; an interrupted
    teardown's leftovers are CANCELED: :func:`settle_interrupted_cancel`)."""
    cost.note_container_times(ctx, record["id"], observed.started_at, observed.finished_at)
    if is_terminal(record.get("terminal_state")):
        return record
    settle_interrupted_cancel(observed, ctx.sidecars.load(record["id"]).cancel)
    if observed.state == current_state(record):
        return record
    err_class = (observed.hint or {}).get("err_class") if observed.state == JobState.ERROR else None
    return ctx.records.mark(record["id"], observed.state, message=observed.message, source=Source.POLLER,
                            err_class=err_class)


def observe(ctx: Context, job_id: str, log_lines: int = 0, price_per_hour: float | None = None,
            metrics: int | None = None, stall_after: float | None = None, read_failed: bool = True,
            start: bool = False) -> PollAnswer:
    """One poll of one job. Returns the JSON answer (without ``ok``): the docker state,
    the progress from the job's status file, read in the same round trip, ``metrics``
    (the last N epochs' KPIs) when asked, and for a RUNNING job whether it stalled
    (``stall_after`` seconds, default :func:`progress.stall_threshold`). A STOPPED
    instance is not started (INSTANCE_STOPPED, ``instance_gate``) unless ``start``."""
    record = ctx.records.load(job_id)
    sidecar = ctx.sidecars.load(job_id)
    instance = job_instance(record, sidecar)
    answer: PollAnswer = {"job_id": job_id, "instance": instance, "backend_ref": record.get("backend_ref"),
                                  "results_dir": record["results_dir"]}
    if reconcile.launch_failed(sidecar) and is_terminal(record.get("terminal_state")):
        return _never_ran(ctx, job_id, answer, record, sidecar, price_per_hour, log_lines, read_failed)
    # torn down, then stopped by the bundle (teardown --stop-instance): an exec would start it (and bill)
    stopped_at = sidecar.instance_stopped_at if sidecar.teardown and is_terminal(
        record.get("terminal_state")) else None
    if not stopped_at and instance and _stopped(ctx, instance, sidecar, start):
        return {**answer, **instance_gate.stopped_fields(instance, "poll_status.py", job_id,
                                                         record.get("terminal_state"))}
    if current_state(record) == JobState.PENDING and not record.get("backend_ref") and not record.get("terminal_state"):
        settled, sidecar = _settle_launch(ctx, record, sidecar, instance, answer,
                                          price_per_hour, log_lines, read_failed)
        if settled is not None:
            return settled
        record = ctx.records.load(job_id)
        answer.update({"backend_ref": record.get("backend_ref"), "reconciled": "adopted"})

    if instance is None:
        raise TaoBrevError("CORRUPT_RECORD", f"job {job_id} names no instance (no sidecar, no backend ref)")
    return _answer(ctx, record, sidecar, instance, answer, stopped_at, log_lines, price_per_hour,
                   metrics, stall_after)


def _settle_launch(ctx: Context, record: RecordDocument, sidecar: JobSidecar, instance: str | None, answer: PollAnswer,
                   price_per_hour: float | None, log_lines: int,
                   read_failed: bool) -> tuple[PollAnswer | None, JobSidecar]:
    """A PENDING launch without a backend ref: (the answer when it stays unsettled or never ran,
    else None: adopted; the sidecar as it is now)."""
    job_id = record["id"]
    if reconcile.launch_in_progress(sidecar):
        return {**answer, "state": JobState.PENDING, "message": "launch in progress (submit is running)"}, sidecar
    outcome = reconcile.pending_launch(ctx, record, instance, source=Source.POLLER)
    sidecar = ctx.sidecars.load(job_id)
    if reconcile.launch_failed(sidecar):
        return _never_ran(ctx, job_id, answer, ctx.records.load(job_id), sidecar, price_per_hour, log_lines,
                          read_failed), sidecar
    if outcome["answer"].get("state") != JobState.RUNNING:
        return {**answer, **outcome["answer"]}, sidecar
    return None, sidecar


def _answer(ctx: Context, record: RecordDocument, sidecar: JobSidecar, instance: str, answer: PollAnswer,
            stopped_at: str | None, log_lines: int, price_per_hour: float | None, metrics: int | None,
            stall_after: float | None) -> PollAnswer:
    """The answer of a job that ran: its state read (or known), marked, and all an answer carries."""
    job_id = record["id"]
    deleted_at = sidecar.instance_deleted_at
    probe: Probe | None = None
    logs: logcap.Bounded | None
    if deleted_at:   # nothing to ask - and never a new instance that took the name
        observed, logs = deleted(instance, f"teardown deleted {instance} at {deleted_at}"), None
    elif stopped_at:
        observed = Observed(JobState(record["terminal_state"]), f"closed; instance {instance} was stopped by teardown at "
                                                      f"{stopped_at} and is not reached (that would start it)")
        logs = None
    else:
        observed, logs, probe = read_backend(ctx, instance, job_id, log_lines,
                                             results_instance_dir(record, sidecar), metrics)
        observed = interrupted_end(observed, probe.files if probe else None, record.get("action", ""))
    record = apply(ctx, record, observed)
    terminal = record.get("terminal_state")
    out: PollAnswer = {**answer, "state": terminal or observed.state, "observed": observed.to_json(),
                               "message": observed.message, "terminal_state": terminal}
    if observed.hint:
        out["hint"] = observed.hint
    out.update(watch_fields(ctx, record, observed, probe, metrics=metrics, stall_after=stall_after,
                            terminal=terminal))
    _add_logs(ctx, out, instance, job_id, observed, logs, log_lines, reached=not (deleted_at or stopped_at))
    results = results_mod.finalize(ctx, job_id)   # uploads + verifies once the job is terminal
    if results is not None:
        out["results"] = results
    if terminal:
        out["cost"] = cost.facts(ctx, job_id, owned=created_by_bundle(ctx, sidecar),
                                 price_per_hour=price_per_hour, lookup=False)   # polls add no brev call
        out.update(bundle_started(ctx, job_id, sidecar))
    sidecar = ctx.sidecars.load(job_id)   # a reset names brev stop only for a type that can stop (cached: no call)
    out = gate_answer(out, prices.stoppable(ctx, cost.known_instance_type(ctx, job_id), lookup=False))
    return annotate(ctx, job_id, resume_advice.fill_answer(out, record, sidecar,
                                                           recovering_command(ctx, job_id)))   # + the chain


def _add_logs(ctx: Context, out: PollAnswer, instance: str, job_id: str, observed: Observed,
              logs: logcap.Bounded | None, log_lines: int, reached: bool) -> None:
    """The asked log lines: the instance's, else (the container gone) those a teardown saved here."""
    full_log = logcap.full_log_command(instance, job_id) if reached else None
    if log_lines > 0 and (logs is None or observed.docker_status is None):   # the container is gone
        saved = ctx.sidecars.saved_logs(job_id)
        if saved is not None:
            logs = logcap.Bounded(*logcap.bound(saved, lines=log_lines))
            full_log = str(ctx.sidecars.logs_path(job_id))
            out["logs_source"] = f"saved at teardown ({full_log})"
    if logs is not None:
        put_logs(out, logs.answer(full_log))


def put_logs(out: PollAnswer, part: logcap.LogsPart) -> None:
    """``logs`` (and ``logs_cut``) of :meth:`logcap.Bounded.answer` into ``out``; a log bounded
    from a text is a text (``logcap.bound`` gives None only for None)."""
    text = part.get("logs")
    if text is not None:
        out["logs"] = text
    if "logs_cut" in part:
        out["logs_cut"] = part["logs_cut"]


def _stopped(ctx: Context, instance: str | None, sidecar: JobSidecar, start: bool) -> bool:
    """The job's instance is STOPPED and must stay so (no exec follows); never asked once a
    teardown deleted it (a new instance may carry the name)."""
    if not instance:
        return False
    return not sidecar.instance_deleted_at and instance_gate.stopped(ctx, instance, start)


def _never_ran(ctx: Context, job_id: str, answer: PollAnswer, record: RecordDocument, sidecar: JobSidecar,
               price_per_hour: float | None, log_lines: int = 0, read_failed: bool = True) -> PollAnswer:
    """A job whose launch failed or never happened: the same answer on every poll (``reconcile``).
    When docker may have left a container (a refused or failed start), its ``.State`` is read as
    ``observed`` (facts only: the answer stays the same; ``read_failed`` False, as in ``--all``:
    not read); else no round trip at all."""
    out: PollAnswer = {**answer, **reconcile.launch_failure_answer(ctx, record, sidecar)}
    instance = answer.get("instance")
    if (read_failed and reconcile.container_may_exist(sidecar) and instance
            and not _stopped(ctx, instance, sidecar, False)):
        token = remote.new_token()
        try:
            result = ctx.brev.exec(instance, job_sections(token, job_id, log_lines), idempotent=True)
            observed, logs = read_job(remote.parse_sections(result.stdout, token), job_id, log_lines, token)
        except TaoBrevError as exc:
            warn(f"poll {job_id}: its container could not be read ({exc.message}); the answer stands")
        else:
            if observed.docker_status:
                out["observed"] = observed.to_json()
            if logs is not None:
                put_logs(out, logs.answer(logcap.full_log_command(instance, job_id)))
    results = results_mod.finalize(ctx, job_id)
    if results is not None:
        out["results"] = results
    out["cost"] = cost.facts(ctx, job_id, owned=False, price_per_hour=price_per_hour, lookup=False)
    return out
