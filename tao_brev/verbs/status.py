"""status and logs: read the job's state from the instance, in one round trip.

The record says what was submitted; what runs now is read from the backend:
``docker inspect --format '{{json .State}}' <id>`` (never the container's
environment) mapped by ``docker_state.from_inspect``, plus the last N log
lines when asked, and the last 200 lines of an exited container for the
failure hint - all sections of ONE ``brev exec``. A state that differs from
the record's last transition is marked with source ``poller``; a terminal
state is written once and never changes.

Several jobs on one instance are polled with one round trip for all of them
(:func:`poll_many`), instances concurrently.

A job whose results are routed to S3 has them uploaded and verified
(``results.finalize``: one more round trip, once) when a poll finds it
terminal; the answer's ``results`` says how that went. Once terminal, the
answer carries the job's ``cost`` facts (``cost.facts``; the price when already
known - a poll adds no ``brev ls`` for the instance type, teardown does); docker's
StartedAt / FinishedAt are noted in the sidecar by every poll that reads them.

An instance that a teardown deleted is not asked again (no round trip): the
job's answer comes from its record.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .. import cost, docker_state, logcap, remote, resume_advice
from ..secrets import redact
from .. import progress as progress_mod
from ..context import Context, note_job, note_state, say, warn
from ..docker_state import JobState, after_instance_start, docker_error_code, from_inspect
from ..errors import CODES, TaoBrevError, TransportError
from ..records import check_job_id, current_state, is_terminal
from . import instance_gate, reconcile
from . import results as results_mod

CLASSIFY_TAIL_LINES = 200


def job_instance(record: dict, sidecar: dict) -> str | None:
    """The instance of a job: the sidecar's, else the backend ref's ``<instance>/<id>``."""
    if sidecar.get("instance"):
        return sidecar["instance"]
    ref = record.get("backend_ref") or ""
    return ref.split("/", 1)[0] if "/" in ref else None


def job_sections(token: str, job_id: str, log_lines: int, results_dir: str | None = None,
                 progress_bytes: int = remote.PROGRESS_BYTES) -> str:
    """The sections that observe one job: ``<id>:state``, ``<id>:logs``, ``<id>:tail``;
    with ``results_dir`` (its instance path) also ``<id>:progress`` (the status file,
    needs :func:`remote.progress_functions`) and ``<id>:lastlog`` (stall evidence)."""
    parts = [remote.section(token, f"{job_id}:state", remote.inspect_state(job_id))]
    if log_lines > 0:   # bounded on the instance (logcap): an 8 MiB progress line never crosses the network
        parts.append(remote.section(token, f"{job_id}:logs",
                                    logcap.remote_command(remote.logs_tail(job_id, log_lines), token)))
    if log_lines < CLASSIFY_TAIL_LINES:
        parts.append(remote.section(token, f"{job_id}:tail", logcap.remote_command(
            remote.logs_if_exited(job_id, CLASSIFY_TAIL_LINES), token)))
    if results_dir:
        lines = remote.PROGRESS_LINES if progress_bytes <= remote.PROGRESS_BYTES else 10 ** 7
        parts.append(remote.section(token, f"{job_id}:progress", remote.read_progress(results_dir, lines,
                                                                                      progress_bytes)))
        parts.append(remote.section(token, f"{job_id}:lastlog", logcap.remote_head(remote.last_log_line(job_id),
                                                                                   token)))
    return "\n".join(parts)


def results_instance_dir(record: dict, sidecar: dict) -> str | None:
    """The job's results dir on the instance (the sidecar's, else a record's instance path)."""
    known = (sidecar.get("results") or {}).get("instance_dir")
    if known:
        return known
    recorded = record.get("results_dir") or ""
    return recorded if recorded.startswith(("~/", "/")) else None


@dataclass
class Probe:
    """What a poll read beside the docker state (``None``: not read)."""

    now: float | None = None                  # the instance's clock, epoch seconds
    files: list | None = None                 # [progress.StatusFile] of the results dir
    last_log: str | None = None               # ``docker logs --timestamps --tail 1``
    status_only: bool = False                 # --all: stalls judged from the status file alone


def watch_fields(ctx: Context, record: dict, observed: JobState, probe: Probe | None, *,
                 metrics: int | None = None, stall_after: float | None = None, terminal: str | None = None) -> dict:
    """``progress`` (always), ``stalled``/``stall`` (RUNNING), ``metrics`` (asked), ``final_kpi``
    (COMPLETE) for an answer. A terminal job's last progress is kept in the sidecar
    (``final_progress``): later answers, after teardown, still carry it."""
    job_id, action = record["id"], record.get("action") or ""
    file = progress_mod.pick(probe.files, action) if probe and probe.files is not None else None
    out: dict = {"progress": {"available": False, "note": "the status file was not read (the instance is deleted "
                                                      "or unreachable, or the job's results dir on it is unknown)"}}
    if probe is not None and probe.files is not None:
        out["progress"] = progress_mod.summarize(file, probe.now, action)
    saved = ctx.sidecars.load(job_id).get("final_progress")
    if terminal and out["progress"].get("available"):
        if not saved or (saved.get("updated_at"), saved.get("file")) != (out["progress"].get("updated_at"),
                                                                         out["progress"].get("file")):
            ctx.sidecars.update(job_id, final_progress=out["progress"])
    elif saved and not out["progress"].get("available"):
        out["progress"] = {**saved, "note": "kept from the last poll that read the status file"}
    out["progress"] = progress_mod.after_end(out["progress"], terminal, action, job_id)
    if terminal == "COMPLETE" and out.get("progress", {}).get("kpi"):
        out["final_kpi"] = out["progress"]["kpi"]
    if metrics:
        out["metrics"] = progress_mod.metrics(file, metrics)
    if observed.state == "RUNNING" and not terminal and probe is not None and probe.files is not None:
        stall = progress_mod.assess_stall(job_id, probe.now, out["progress"], observed.started_at,
                                          explicit=stall_after, last_log=probe.last_log,
                                          status_only=probe.status_only)
        if stall is not None:
            out.update(stalled=stall["stalled"], stall=stall)
    return out


def read_job(sections: dict, job_id: str, log_lines: int,
             token: str | None = None) -> tuple[JobState, logcap.Bounded | None]:
    """(state, bounded logs) of one job from its parsed sections (``token``: the sections' token,
    which the instance's log filter marks its cuts with)."""
    state_sec = sections.get(f"{job_id}:state")
    if state_sec is None:
        raise TransportError("TRANSPORT_FAILED", f"the answer for {job_id} was incomplete")
    logs = None
    if log_lines > 0 and f"{job_id}:logs" in sections:
        logs = logcap.Bounded(*logcap.bound(sections[f"{job_id}:logs"].output, lines=log_lines, token=token))
    raw_tail = sections.get(f"{job_id}:tail")
    tail_text = logs.text if logs is not None else (
        logcap.bound(raw_tail.output, token=token)[0] if raw_tail else "")
    tail = logcap.redacted(tail_text or "")   # the hint's evidence lines are cut after redaction
    if state_sec.exit_code == 0:
        try:
            state = json.loads(state_sec.output.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            raise TransportError("TRANSPORT_FAILED", f"docker inspect printed no JSON for {job_id}") from None
        observed = from_inspect(state, tail)   # the table of docker_state; the log tail refines an ERROR's hint
    elif "No such" in state_sec.output:
        observed = from_inspect(None)
    else:
        code = docker_error_code(state_sec.output)
        raise TaoBrevError(code, f"docker inspect {job_id} failed: {redact.tail(state_sec.output, 400)}")
    return observed, logs


def settle_interrupted_cancel(observed: JobState, cancel: dict | None) -> None:
    """Turn ``observed`` into CANCELED (in place) when it is what a teardown that recorded
    its intent (sidecar ``cancel``) and was then interrupted leaves: the container removed
    (``gone == "container"``), or killed by ``docker rm -f`` before its removal (exit 137
    without ``OOMKilled``: SIGKILL, not the OOM killer). Anything else is the job's own state."""
    if not cancel or observed.state not in ("UNKNOWN", "ERROR"):
        return
    killed = observed.state == "ERROR" and observed.exit_code == 137 and not observed.oom_killed
    if observed.gone != "container" and not killed:
        return
    what = "its container is gone" if observed.gone == "container" else "its container was killed (exit 137)"
    observed.state, observed.hint = "CANCELED", None
    observed.message = (f"canceled: a teardown requested at {cancel.get('requested_at')} was interrupted before "
                        f"it closed the record; {what}")


def apply(ctx: Context, record: dict, observed: JobState) -> dict:
    """Mark the record when the backend's state differs from its last transition
    (an ERROR carries its hint's failure class as ``err_class``; an interrupted
    teardown's leftovers are CANCELED: :func:`settle_interrupted_cancel`)."""
    cost.note_container_times(ctx, record["id"], observed.started_at, observed.finished_at)
    if is_terminal(record.get("terminal_state")):
        return record
    settle_interrupted_cancel(observed, ctx.sidecars.load(record["id"]).get("cancel"))
    if observed.state == current_state(record):
        return record
    err_class = (observed.hint or {}).get("err_class") if observed.state == "ERROR" else None
    return ctx.records.mark(record["id"], observed.state, message=observed.message, source="poller",
                            err_class=err_class)


def _instance_lost(ctx: Context, instance: str, exc: TransportError) -> JobState:
    """After a transport failure: is the instance gone or stopped? Else re-raise."""
    try:
        entry = ctx.brev.instance(instance)
    except TaoBrevError:
        raise exc from None
    if entry is None:
        return _deleted(instance, f"brev ls: no instance {instance}")
    status = str(entry.get("status", "")).upper()
    if status != "RUNNING":
        return JobState("UNKNOWN", f"instance {instance} is {status}: the job's container is not running; "
                                   "instance files survive a stop, not a delete", gone="instance",
                        hint=_lost_hint(f"instance {instance} is {status}", f"brev ls: {instance} {status}",
                                        f"poll again once {instance} is RUNNING (a stop killed the container; "
                                        f"checkpoints on its disk survive), or resubmit: {docker_state.RESUME}"))
    raise exc


def _deleted(instance: str, evidence: str) -> JobState:
    return JobState("UNKNOWN", f"instance {instance} no longer exists (deleted): the container and any "
                               "results not uploaded are lost", gone="instance",
                    hint=_lost_hint(f"instance {instance} deleted", evidence,
                                    f"resubmit on a live instance: {docker_state.RESUME}, when its results "
                                    "reached S3 (else --retry-of JOB_ID starts again); close this record with "
                                    "teardown.py JOB_ID"))


def _lost_hint(reason: str, evidence: str, advice: str) -> dict:
    return {"err_class": "ERR_INFRA", "reason": reason, "advice": advice, "evidence": [evidence]}


def observe(ctx: Context, job_id: str, log_lines: int = 0, price_per_hour: float | None = None,
            metrics: int | None = None, stall_after: float | None = None, read_failed: bool = True,
            start: bool = False) -> dict:
    """One poll of one job. Returns the JSON answer (without ``ok``): the docker state,
    the progress from the job's status file, read in the same round trip, ``metrics``
    (the last N epochs' KPIs) when asked, and for a RUNNING job whether it stalled
    (``stall_after`` seconds, default :func:`progress.stall_threshold`). A STOPPED
    instance is not started (INSTANCE_STOPPED, ``instance_gate``) unless ``start``."""
    record = ctx.records.load(job_id)
    sidecar = ctx.sidecars.load(job_id)
    instance = job_instance(record, sidecar)
    answer = {"job_id": job_id, "instance": instance, "backend_ref": record.get("backend_ref"),
              "results_dir": record["results_dir"]}
    if reconcile.launch_failed(sidecar) and is_terminal(record.get("terminal_state")):
        return _never_ran(ctx, job_id, answer, record, sidecar, price_per_hour, log_lines, read_failed)
    # torn down, then stopped by the bundle (teardown --stop-instance): an exec would start it (and bill)
    stopped_at = sidecar.get("instance_stopped_at") if sidecar.get("teardown") and is_terminal(
        record.get("terminal_state")) else None
    if not stopped_at and _stopped(ctx, instance, sidecar, start):
        return instance_gate.stopped_answer(answer, instance, "poll_status.py", job_id,
                                            record.get("terminal_state"))
    if current_state(record) == "PENDING" and not record.get("backend_ref") and not record.get("terminal_state"):
        if reconcile.launch_in_progress(sidecar):
            return {**answer, "state": "PENDING", "message": "launch in progress (submit is running)"}
        outcome = reconcile.pending_launch(ctx, record, instance, source="poller")
        sidecar = ctx.sidecars.load(job_id)
        if reconcile.launch_failed(sidecar):
            return _never_ran(ctx, job_id, answer, ctx.records.load(job_id), sidecar, price_per_hour, log_lines,
                              read_failed)
        if outcome["answer"].get("state") != "RUNNING":
            return {**answer, **outcome["answer"]}
        record = ctx.records.load(job_id)
        answer.update(backend_ref=record.get("backend_ref"), reconciled="adopted")

    if instance is None:
        raise TaoBrevError("CORRUPT_RECORD", f"job {job_id} names no instance (no sidecar, no backend ref)")
    deleted_at = sidecar.get("instance_deleted_at")
    probe = None
    if deleted_at:   # nothing to ask - and never a new instance that took the name
        observed, logs = _deleted(instance, f"teardown deleted {instance} at {deleted_at}"), None
    elif stopped_at:
        observed = JobState(record["terminal_state"], f"closed; instance {instance} was stopped by teardown at "
                                                      f"{stopped_at} and is not reached (that would start it)")
        logs = None
    else:
        observed, logs, probe = _read_backend(ctx, instance, job_id, log_lines,
                                              results_instance_dir(record, sidecar), metrics)
    record = apply(ctx, record, observed)
    terminal = record.get("terminal_state")
    out = {**answer, "state": terminal or observed.state, "observed": observed.to_json(),
           "message": observed.message, "terminal_state": terminal}
    if observed.hint:
        out["hint"] = observed.hint
    out.update(watch_fields(ctx, record, observed, probe, metrics=metrics, stall_after=stall_after,
                            terminal=terminal))
    full_log = logcap.full_log_command(instance, job_id) if not (deleted_at or stopped_at) else None
    if log_lines > 0 and (logs is None or observed.docker_status is None):   # the container is gone
        saved = ctx.sidecars.saved_logs(job_id)
        if saved is not None:
            logs = logcap.Bounded(*logcap.bound(saved, lines=log_lines))
            full_log = str(ctx.sidecars.logs_path(job_id))
            out["logs_source"] = f"saved at teardown ({full_log})"
    if logs is not None:
        out.update(logs.answer(full_log))
    results = results_mod.finalize(ctx, job_id)   # uploads + verifies once the job is terminal
    if results is not None:
        out["results"] = results
    if terminal:
        from .teardown import owns   # teardown imports this module

        out["cost"] = cost.facts(ctx, job_id, owned=not deleted_at and owns(ctx, instance),
                                 price_per_hour=price_per_hour, lookup=False)   # polls add no brev call
    from .recovery_chain import annotate   # it reads records and sidecars only

    return annotate(ctx, job_id, resume_advice.fill_answer(out, record, ctx.sidecars.load(job_id)))   # + the chain


def _stopped(ctx: Context, instance: str | None, sidecar: dict, start: bool) -> bool:
    """The job's instance is STOPPED and must stay so (no exec follows); never asked once a
    teardown deleted it (a new instance may carry the name)."""
    return bool(instance) and not sidecar.get("instance_deleted_at") and instance_gate.stopped(ctx, instance, start)


def _never_ran(ctx: Context, job_id: str, answer: dict, record: dict, sidecar: dict,
               price_per_hour: float | None, log_lines: int = 0, read_failed: bool = True) -> dict:
    """A job whose launch failed or never happened: the same answer on every poll (``reconcile``).
    When docker may have left a container (a refused or failed start), its ``.State`` is read as
    ``observed`` (facts only: the answer stays the same; ``read_failed`` False, as in ``--all``:
    not read); else no round trip at all."""
    out = {**answer, **reconcile.launch_failure_answer(ctx, record, sidecar)}
    if (read_failed and reconcile.container_may_exist(sidecar) and answer.get("instance")
            and not _stopped(ctx, answer["instance"], sidecar, False)):
        token = remote.new_token()
        try:
            result = ctx.brev.exec(answer["instance"], job_sections(token, job_id, log_lines), idempotent=True)
            observed, logs = read_job(remote.parse_sections(result.stdout, token), job_id, log_lines, token)
        except TaoBrevError as exc:
            warn(f"poll {job_id}: its container could not be read ({exc.message}); the answer stands")
        else:
            if observed.docker_status:
                out["observed"] = observed.to_json()
            if logs is not None:
                out.update(logs.answer(logcap.full_log_command(answer["instance"], job_id)))
    results = results_mod.finalize(ctx, job_id)
    if results is not None:
        out["results"] = results
    out["cost"] = cost.facts(ctx, job_id, owned=False, price_per_hour=price_per_hour, lookup=False)
    return out


def _read_backend(ctx: Context, instance: str, job_id: str, log_lines: int, results_dir: str | None = None,
                  metrics: int | None = None) -> tuple[JobState, logcap.Bounded | None, Probe | None]:
    """(state, logs, progress probe) from the instance in one round trip (or why it cannot answer)."""
    token = remote.new_token()
    size = remote.METRICS_BYTES if metrics else remote.PROGRESS_BYTES
    script = "\n".join([remote.progress_functions(token), remote.section(token, "now", remote.instance_now()),
                        job_sections(token, job_id, log_lines, results_dir, size)])
    try:
        result = ctx.brev.exec(instance, script, idempotent=True)
        sections = remote.parse_sections(result.stdout, token)
        observed, logs = read_job(sections, job_id, log_lines, token)
    except TransportError as exc:
        return _instance_lost(ctx, instance, exc), None, None
    probe = _probe(sections, token, job_id, results_dir)
    return (after_instance_start(observed, instance) if result.instance_started else observed), logs, probe


def _instance_clock(sections: dict) -> float | None:
    now = sections.get("now")
    try:
        return float(now.output.strip().splitlines()[-1]) if now and now.exit_code == 0 else None
    except (ValueError, IndexError):
        return None


def _probe(sections: dict, token: str, job_id: str, results_dir: str | None) -> Probe | None:
    if not results_dir or f"{job_id}:progress" not in sections:
        return None
    lastlog = sections.get(f"{job_id}:lastlog")
    return Probe(now=_instance_clock(sections),
                 files=progress_mod.parse_files(sections[f"{job_id}:progress"].output, token),
                 last_log=logcap.redacted(lastlog.output) if lastlog is not None and lastlog.exit_code == 0
                 else None)   # redacted before the stall evidence cuts the line


def poll(ctx: Context, job_id: str, log_lines: int = 0, wait: bool = False,
         interval: float = 30.0, timeout: float | None = None,
         price_per_hour: float | None = None, metrics: int | None = None,
         stall_after: float | None = None, start: bool = False) -> tuple[dict, int]:
    """status (``wait=False``) or wait-until-terminal. Exit 0, or 1 when the wait
    ended in ERROR/CANCELED/lost, timed out, or found the job stalled (JOB_STALLED:
    RUNNING with no status line and no log output for longer than the threshold).
    A wait goes on through a launch not settled yet (PENDING, ``reconciled:
    "unanswered"``: the instance did not answer, or a launch holds the lock) as
    through a RUNNING job's unanswered poll; ``timeout`` bounds both."""
    cost.check_price(price_per_hour)
    check_watch(metrics, stall_after)
    note_job(check_job_id(job_id))   # every answer of this run names the job, an interrupt's too
    try:
        note_state(current_state(ctx.records.load(job_id)))   # the recorded state until a poll reads one
    except TaoBrevError:
        pass   # the poll below answers it
    started = ctx.clock()
    polls = 0
    while True:
        polls += 1
        out = observe(ctx, job_id, log_lines, price_per_hour, metrics=metrics, stall_after=stall_after, start=start)
        note_state(out.get("state"))   # an interrupted wait reports it
        # A launch whose outcome the instance did not tell yet (no answer, lock busy) is not an end:
        # --wait asks again, as it does for a RUNNING job whose instance did not answer.
        unsettled = out.get("state") == "PENDING" and out.get("reconciled") == "unanswered"
        if out.get("error") and out.get("state") != "RUNNING" and not (wait and unsettled):
            code = CODES.get(out["error"]["code"])
            return {"ok": False, **out, "polls": polls}, code.exit_code if code else 1
        state = out["state"]
        if not wait:
            return {"ok": True, **out, "polls": polls}, 0
        if is_terminal(state):
            if state == "COMPLETE":
                unverified = _unverified_results(job_id, out.get("results"))
                if unverified is not None:   # the documented contract: the job ended, its S3 results did not
                    code = CODES.get(unverified["code"])
                    return {"ok": False, **out, "polls": polls, "error": unverified}, code.exit_code if code else 1
                return {"ok": True, **out, "polls": polls}, 0
            code = "JOB_FAILED" if state == "ERROR" else "JOB_CANCELED"
            err = TaoBrevError(code, f"job {job_id} ended {state}: {out.get('message', '')}",
                               failed_fix(job_id, out) if state == "ERROR" else None)
            return {"ok": False, **out, "polls": polls, "error": _with_resume(ctx, job_id, err)}, 1
        if state == "UNKNOWN":
            lost = (out.get("observed") or {}).get("gone") == "instance"   # a fact, never the message's words
            err = TaoBrevError("INSTANCE_LOST" if lost else "CONTAINER_GONE",
                               f"job {job_id} is UNKNOWN: {out.get('message', '')}")
            return {"ok": False, **out, "polls": polls, "error": _with_resume(ctx, job_id, err)}, 1
        if out.get("stalled"):
            stall = out["stall"]
            err = TaoBrevError("JOB_STALLED", f"job {job_id} is RUNNING but wrote nothing for {stall['idle_s']} s "
                                              f"(threshold {stall['threshold_s']} s, {stall['threshold_source']})")
            return {"ok": False, **out, "polls": polls, "error": _with_resume(ctx, job_id, err)}, 1
        if timeout is not None and ctx.clock() - started + interval > timeout:
            last = f" (last error: {out['error']['code']})" if out.get("error") else ""
            err = TaoBrevError("WAIT_TIMEOUT", f"job {job_id} still {state} after {ctx.clock() - started:.0f} s{last}")
            return {"ok": False, **out, "polls": polls, "error": _with_resume(ctx, job_id, err)}, 1
        say(f"poll {job_id}: {state} ({out.get('message', '')}){progress_note(out.get('progress'))}; "
            f"next poll in {interval:.0f} s")
        ctx.sleep(interval)


def _with_resume(ctx: Context, job_id: str, err: TaoBrevError) -> dict:
    """The error as JSON, its fix naming the exact resume command (``resume_advice.fill``)."""
    return resume_advice.fill_job(ctx, job_id, {"error": err.to_json()})["error"]


def failed_fix(job_id: str, out: dict) -> str:
    """JOB_FAILED's fix for this answer: the cause is in ``hint`` (and the log tail, when this
    answer carries it); only an answer without logs sends the reader to read them."""
    read = ("the log tail is in this answer (logs)" if out.get("logs")
            else f"read the log tail: poll_status.py {job_id} --logs 200")
    if (out.get("hint") or {}).get("err_class") == "ERR_INFRA":   # not the program's fault: continue it
        return (f"Act on hint.advice (the cause, from docker's record and the logs; {read}), then resubmit: "
                f"{docker_state.RESUME}.")
    return (f"Act on hint.advice (the cause, from docker's record and the logs; {read}; classes: "
            f"references/failure-classes.md), then submit again with --retry-of {job_id} (a link: it starts "
            f"from scratch; after a fix that keeps the model, {docker_state.RESUME}).")


def check_watch(metrics: int | None, stall_after: float | None) -> None:
    """``--metrics N`` in 1..METRICS_MAX_EPOCHS, ``--stall-after S`` > 0 (BAD_ARGUMENT otherwise)."""
    if metrics is not None and not 1 <= metrics <= progress_mod.METRICS_MAX_EPOCHS:
        raise TaoBrevError("BAD_ARGUMENT", f"--metrics takes 1 to {progress_mod.METRICS_MAX_EPOCHS} epochs "
                                           f"(got {metrics})")
    if stall_after is not None and not stall_after > 0:
        raise TaoBrevError("BAD_ARGUMENT", f"--stall-after must be > 0 seconds (got {stall_after})")


def progress_note(progress: dict | None) -> str:
    """`` - epoch 3/10 (30%), ETA 420 s`` (3 epochs completed of 10) for the stderr progress line
    ('' when unknown)."""
    if not progress or progress.get("epoch") is None:
        return ""
    eta = f", ETA {progress['eta_s']} s" if progress.get("eta_s") is not None else ""
    return f" - epoch {progress['epoch']}/{progress.get('num_epochs') or '?'} ({progress.get('percent', '?')}%){eta}"


def _unverified_results(job_id: str, results: dict | None) -> dict | None:
    """The error of S3-routed results that are not verified (RESULTS_UPLOAD_FAILED, S3_VERIFY_FAILED,
    or what stopped the attempt), else None."""
    if not results or results.get("kind") != "s3" or results.get("verified"):
        return None
    return results.get("error") or TaoBrevError(
        "RESULTS_UPLOAD_FAILED", f"the results of {job_id} are not uploaded to {results.get('destination')} yet: "
        + results_mod.describe_loss(results)).to_json()


def poll_many(ctx: Context, job_ids: list[str], max_workers: int = 8) -> list[dict]:
    """Poll every job once: one round trip per instance, instances concurrently.

    The instance's script does not name the jobs: it finds every container
    labelled ``tao-job`` (one ``docker ps``, one ``docker inspect`` for all)
    and reads each one's status file through its ``/results`` bind mount
    (``remote.progress_functions``), so its size does not grow with the jobs.
    A job without a container there is UNKNOWN (no such container). Stall
    detection rests on the status file alone (no log call per job)."""
    by_instance: dict[str, list[dict]] = {}
    answers = []
    for job_id in job_ids:
        record = ctx.records.load(job_id)
        instance = job_instance(record, ctx.sidecars.load(job_id))
        if instance is None or not record.get("backend_ref") or reconcile.launch_failed(ctx.sidecars.load(job_id)):
            answers.append(observe_safely(ctx, job_id))   # reconciliation / never ran: one job at a time
        else:
            by_instance.setdefault(instance, []).append(record)

    if by_instance:
        instance_gate.read_all(ctx)   # ONE brev ls for all: a STOPPED instance is answered without exec

    def one_instance(item):
        instance, records = item
        if instance_gate.stopped(ctx, instance, fresh=False):
            return [{"job_id": r["id"], "instance": instance, "ok": False, "instance_status": "STOPPED",
                     "state": r.get("terminal_state") or "UNKNOWN",
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
        now = _instance_clock(sections)
        out = []
        for record in records:
            try:
                probe = found.get(record["id"])
                observed = _from_probe(record["id"], probe)
                if result.instance_started:
                    observed = after_instance_start(observed, instance)
                record = apply(ctx, record, observed)
                terminal = record.get("terminal_state")
                results = results_mod.finalize(ctx, record["id"]) if terminal else None
                watched = watch_fields(ctx, record, observed,
                                       Probe(now=now, files=probe.files if probe else [], status_only=True),
                                       terminal=terminal)
                out.append(resume_advice.fill_answer({
                    "job_id": record["id"], "instance": instance, "ok": True, "state": terminal or observed.state,
                    "message": observed.message, **({"hint": observed.hint} if observed.hint else {}),
                    **watched, **({"results": results} if results else {})}, record, ctx.sidecars.load(record["id"])))
            except TaoBrevError as exc:
                out.append({"job_id": record["id"], "instance": instance, "ok": False, "error": exc.to_json()})
        return out

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        for group in pool.map(one_instance, sorted(by_instance.items())):
            answers.extend(group)
    return sorted(answers, key=lambda a: a["job_id"])


def _from_probe(job_id: str, probe) -> JobState:
    """A job's state from ``__tb_jobs`` output (no entry: no such container)."""
    if probe is None:
        return from_inspect(None)
    try:
        state = json.loads(probe.state)
    except json.JSONDecodeError:
        raise TransportError("TRANSPORT_FAILED", f"docker inspect printed no JSON for {job_id}") from None
    return from_inspect(state, probe.tail or "")   # the log tail refines an ERROR's hint


def _needs_action(job: dict) -> bool:
    """A job the reader must act on (ended, lost, failed to answer, stalled): listed first, so an
    answer cut to its size bound (``answer_cut``) drops quiet RUNNING/PENDING jobs before these."""
    return (not job.get("ok") or job.get("stalled") is True
            or job.get("state") not in ("RUNNING", "PENDING"))


def poll_all(ctx: Context) -> tuple[dict, int]:
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
    from ..record_index import live_records

    ctx.records.note_held_ids()   # the ids it lists are the bundle's: no variable equal to one hides it
    # live: non-terminal records, and never-ran ones (kept in the scan until teardown closes them)
    live, corrupt = live_records(ctx.records, ctx.state_root, keep=reconcile.never_ran_record)
    ids = [record["id"] for record in live
           if not is_terminal(record.get("terminal_state")) or _never_ran_unclosed(ctx, record)]
    jobs = []
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
    jobs = sorted(jobs + poll_many(ctx, ids), key=lambda a: (not _needs_action(a), a["job_id"]))
    extra = {"quarantined": quarantined} if quarantined else {}
    failed = [j for j in jobs if not j.get("ok")]
    if not failed:
        return {"ok": True, "jobs": jobs, **extra}, 0
    classes = {CODES[j["error"]["code"]].exit_code for j in failed if j["error"]["code"] in CODES}
    code = 3 if 3 in classes else 2 if 2 in classes else 1
    first = failed[0]["error"]
    error = {**first, "message": f"{len(failed)} of {len(jobs)} jobs answered with an error; "
                                 f"{failed[0]['job_id']}: {first['message']}"}
    return {"ok": False, "jobs": jobs, **extra, "error": error}, code


def _quarantined_entry(ctx: Context, listed: dict) -> dict:
    """``--all``'s entry for a damaged record: where it is, its instance (sidecar), what closes it."""
    job_id = listed["id"]
    try:
        instance = ctx.sidecars.load(job_id).get("instance")
    except TaoBrevError:
        instance = None
    return {"job_id": job_id, "instance": instance, "path": listed.get("quarantined"),
            "message": listed["error"],
            "fix": f"teardown.py {job_id} removes its container{' on ' + instance if instance else ''} "
                   "and closes the record"}


def _never_ran_unclosed(ctx: Context, record: dict) -> bool:
    """A terminal job that never ran and that no teardown closed yet: ``--all`` lists it (with its
    one answer) until ``teardown.py JOB_ID`` closes it. The sidecar is read only for ERROR records
    that this bundle closed as never launched."""
    if not reconcile.never_ran_record(record):
        return False
    try:
        sidecar = ctx.sidecars.load(record["id"])
    except TaoBrevError:
        return False
    return reconcile.launch_failed(sidecar) and not sidecar.get("teardown")


def observe_safely(ctx: Context, job_id: str) -> dict:
    try:
        return {"ok": True, **observe(ctx, job_id, read_failed=False)}
    except TaoBrevError as exc:
        return {"job_id": job_id, "ok": False, "error": exc.to_json()}
