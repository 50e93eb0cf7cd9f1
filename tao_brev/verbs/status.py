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

from .. import cost, redact, remote
from ..cli import Context, say
from ..docker_state import JobState, after_instance_start, classify_logs, docker_error_code, from_inspect
from ..errors import CODES, TaoBrevError, TransportError
from ..records import current_state, is_terminal
from . import reconcile
from . import results as results_mod

CLASSIFY_TAIL_LINES = 200


def job_instance(record: dict, sidecar: dict) -> str | None:
    """The instance of a job: the sidecar's, else the backend ref's ``<instance>/<id>``."""
    if sidecar.get("instance"):
        return sidecar["instance"]
    ref = record.get("backend_ref") or ""
    return ref.split("/", 1)[0] if "/" in ref else None


def job_sections(token: str, job_id: str, log_lines: int) -> str:
    """The sections that observe one job: ``<id>:state``, ``<id>:logs``, ``<id>:tail``."""
    parts = [remote.section(token, f"{job_id}:state", remote.inspect_state(job_id))]
    if log_lines > 0:
        parts.append(remote.section(token, f"{job_id}:logs", remote.logs_tail(job_id, log_lines)))
    if log_lines < CLASSIFY_TAIL_LINES:
        parts.append(remote.section(token, f"{job_id}:tail", remote.logs_if_exited(job_id, CLASSIFY_TAIL_LINES)))
    return "\n".join(parts)


def read_job(sections: dict, job_id: str, log_lines: int) -> tuple[JobState, str | None]:
    """(state, logs) of one job from its parsed sections."""
    state_sec = sections.get(f"{job_id}:state")
    if state_sec is None:
        raise TransportError("TRANSPORT_FAILED", f"the answer for {job_id} was incomplete")
    if state_sec.exit_code == 0:
        try:
            observed = from_inspect(json.loads(state_sec.output.strip().splitlines()[-1]))
        except (json.JSONDecodeError, IndexError):
            raise TransportError("TRANSPORT_FAILED", f"docker inspect printed no JSON for {job_id}") from None
    elif "No such" in state_sec.output:
        observed = from_inspect(None)
    else:
        code = docker_error_code(state_sec.output)
        raise TaoBrevError(code, f"docker inspect {job_id} failed: {redact.tail(state_sec.output, 400)}")
    logs = sections[f"{job_id}:logs"].output if log_lines > 0 and f"{job_id}:logs" in sections else None
    tail = logs if logs is not None else (sections.get(f"{job_id}:tail").output
                                          if sections.get(f"{job_id}:tail") else "")
    if observed.state == "ERROR" and observed.hint is None:
        observed.hint = classify_logs(tail or "")
    return observed, logs


def apply(ctx: Context, record: dict, observed: JobState) -> dict:
    """Mark the record when the backend's state differs from its last transition
    (an ERROR carries its hint's failure class as ``err_class``)."""
    cost.note_container_times(ctx, record["id"], observed.started_at, observed.finished_at)
    if is_terminal(record.get("terminal_state")) or observed.state == current_state(record):
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
                                   "instance files survive a stop, not a delete",
                        hint=_lost_hint(f"instance {instance} is {status}", f"brev ls: {instance} {status}",
                                        f"poll again once {instance} is RUNNING (a stop killed the container; "
                                        "checkpoints on its disk survive), or resubmit with --retry-of"))
    raise exc


def _deleted(instance: str, evidence: str) -> JobState:
    return JobState("UNKNOWN", f"instance {instance} no longer exists (deleted): the container and any "
                               "results not uploaded are lost",
                    hint=_lost_hint(f"instance {instance} deleted", evidence,
                                    "resubmit with --retry-of on a live instance; close this record with "
                                    "teardown.py JOB_ID"))


def _lost_hint(reason: str, evidence: str, advice: str) -> dict:
    return {"err_class": "ERR_INFRA", "reason": reason, "advice": advice, "evidence": [evidence]}


def observe(ctx: Context, job_id: str, log_lines: int = 0, price_per_hour: float | None = None) -> dict:
    """One poll of one job. Returns the JSON answer (without ``ok``)."""
    record = ctx.records.load(job_id)
    sidecar = ctx.sidecars.load(job_id)
    instance = job_instance(record, sidecar)
    answer = {"job_id": job_id, "instance": instance, "backend_ref": record.get("backend_ref"),
              "results_dir": record["results_dir"]}

    if current_state(record) == "PENDING" and not record.get("backend_ref") and not record.get("terminal_state"):
        if reconcile.launch_in_progress(sidecar):
            return {**answer, "state": "PENDING", "message": "launch in progress (submit is running)"}
        outcome = reconcile.pending_launch(ctx, record, instance, source="poller")
        if outcome["answer"].get("state") != "RUNNING":
            return {**answer, **outcome["answer"]}
        record = ctx.records.load(job_id)
        answer.update(backend_ref=record.get("backend_ref"), reconciled="adopted")

    if instance is None:
        raise TaoBrevError("CORRUPT_RECORD", f"job {job_id} names no instance (no sidecar, no backend ref)")
    deleted_at = sidecar.get("instance_deleted_at")
    if deleted_at:   # nothing to ask - and never a new instance that took the name
        observed, logs = _deleted(instance, f"teardown deleted {instance} at {deleted_at}"), None
    else:
        observed, logs = _read_backend(ctx, instance, job_id, log_lines)
    record = apply(ctx, record, observed)
    terminal = record.get("terminal_state")
    out = {**answer, "state": terminal or observed.state, "observed": observed.to_json(),
           "message": observed.message, "terminal_state": terminal}
    if observed.hint:
        out["hint"] = observed.hint
    if log_lines > 0 and (logs is None or observed.docker_status is None):   # the container is gone
        saved = ctx.sidecars.saved_logs(job_id)
        if saved is not None:
            logs = "\n".join(saved.splitlines()[-log_lines:])
            out["logs_source"] = f"saved at teardown ({ctx.sidecars.logs_path(job_id)})"
    if logs is not None:
        out["logs"] = logs
    results = results_mod.finalize(ctx, job_id)   # uploads + verifies once the job is terminal
    if results is not None:
        out["results"] = results
    if terminal:
        from .teardown import owns   # teardown imports this module

        out["cost"] = cost.facts(ctx, job_id, owned=not deleted_at and owns(ctx, instance),
                                 price_per_hour=price_per_hour, lookup=False)   # polls add no brev call
    return out


def _read_backend(ctx: Context, instance: str, job_id: str, log_lines: int) -> tuple[JobState, str | None]:
    """(state, logs) from the instance in one round trip (or why it cannot answer)."""
    token = remote.new_token()
    try:
        result = ctx.brev.exec(instance, job_sections(token, job_id, log_lines), idempotent=True)
        observed, logs = read_job(remote.parse_sections(result.stdout, token), job_id, log_lines)
    except TransportError as exc:
        return _instance_lost(ctx, instance, exc), None
    return (after_instance_start(observed, instance) if result.instance_started else observed), logs


def poll(ctx: Context, job_id: str, log_lines: int = 0, wait: bool = False,
         interval: float = 30.0, timeout: float | None = None,
         price_per_hour: float | None = None) -> tuple[dict, int]:
    """status (``wait=False``) or wait-until-terminal. Exit 0, or 1 when the wait
    ended in ERROR/CANCELED/lost or timed out."""
    cost.check_price(price_per_hour)
    started = ctx.clock()
    polls = 0
    while True:
        polls += 1
        out = observe(ctx, job_id, log_lines, price_per_hour)
        if out.get("error") and out.get("state") != "RUNNING":
            code = CODES.get(out["error"]["code"])
            return {"ok": False, **out, "polls": polls}, code.exit_code if code else 1
        state = out["state"]
        if not wait:
            return {"ok": True, **out, "polls": polls}, 0
        if is_terminal(state):
            if state == "COMPLETE":
                return {"ok": True, **out, "polls": polls}, 0
            code = "JOB_FAILED" if state == "ERROR" else "JOB_CANCELED"
            err = TaoBrevError(code, f"job {job_id} ended {state}: {out.get('message', '')}")
            return {"ok": False, **out, "polls": polls, "error": err.to_json()}, 1
        if state == "UNKNOWN":
            err = TaoBrevError("INSTANCE_LOST" if "instance" in out.get("message", "") else "CONTAINER_GONE",
                               f"job {job_id} is UNKNOWN: {out.get('message', '')}")
            return {"ok": False, **out, "polls": polls, "error": err.to_json()}, 1
        if timeout is not None and ctx.clock() - started + interval > timeout:
            err = TaoBrevError("WAIT_TIMEOUT", f"job {job_id} still {state} after {ctx.clock() - started:.0f} s")
            return {"ok": False, **out, "polls": polls, "error": err.to_json()}, 1
        say(f"poll {job_id}: {state} ({out.get('message', '')}); next poll in {interval:.0f} s")
        ctx.sleep(interval)


def poll_many(ctx: Context, job_ids: list[str], max_workers: int = 8) -> list[dict]:
    """Poll every job once: one round trip per instance, instances concurrently."""
    by_instance: dict[str, list[dict]] = {}
    answers = []
    for job_id in job_ids:
        record = ctx.records.load(job_id)
        instance = job_instance(record, ctx.sidecars.load(job_id))
        if instance is None or not record.get("backend_ref"):
            answers.append(observe_safely(ctx, job_id))   # reconciliation path, one job at a time
        else:
            by_instance.setdefault(instance, []).append(record)

    def one_instance(item):
        instance, records = item
        token = remote.new_token()
        script = "\n".join(job_sections(token, r["id"], 0) for r in records)
        try:
            result = ctx.brev.exec(instance, script, idempotent=True)
            sections = remote.parse_sections(result.stdout, token)
        except TaoBrevError as exc:
            return [{"job_id": r["id"], "instance": instance, "ok": False, "error": exc.to_json()} for r in records]
        out = []
        for record in records:
            try:
                observed, _ = read_job(sections, record["id"], 0)
                if result.instance_started:
                    observed = after_instance_start(observed, instance)
                record = apply(ctx, record, observed)
                results = results_mod.finalize(ctx, record["id"]) if record.get("terminal_state") else None
                out.append({"job_id": record["id"], "instance": instance, "ok": True,
                            "state": record.get("terminal_state") or observed.state,
                            "message": observed.message, **({"hint": observed.hint} if observed.hint else {}),
                            **({"results": results} if results else {})})
            except TaoBrevError as exc:
                out.append({"job_id": record["id"], "instance": instance, "ok": False, "error": exc.to_json()})
        return out

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        for group in pool.map(one_instance, sorted(by_instance.items())):
            answers.extend(group)
    return sorted(answers, key=lambda a: a["job_id"])


def poll_all(ctx: Context) -> tuple[dict, int]:
    """``--all``: every unfinished Brev job in the record store, polled once.

    A corrupt record is listed with CORRUPT_RECORD (it may hide a job that
    still bills), never skipped. Exit 0 when every job answered; else the
    worst class among the failures: 3 (the backend could not be reached), 2
    (a corrupt record), 1.
    """
    ids, jobs = [], []
    for record in ctx.records.list():
        if record.get("corrupt"):
            jobs.append({"job_id": record["id"], "ok": False,
                         "error": TaoBrevError("CORRUPT_RECORD", record["error"]).to_json()})
        elif record.get("platform") == "brev" and not is_terminal(record.get("terminal_state")):
            ids.append(record["id"])
    if ids:
        ctx.brev.path()   # BREV_NOT_FOUND: the whole answer is exit 3, not one error per job
    jobs = sorted(jobs + poll_many(ctx, ids), key=lambda a: a["job_id"])
    failed = [j for j in jobs if not j.get("ok")]
    if not failed:
        return {"ok": True, "jobs": jobs}, 0
    classes = {CODES[j["error"]["code"]].exit_code for j in failed if j["error"]["code"] in CODES}
    code = 3 if 3 in classes else 2 if 2 in classes else 1
    first = failed[0]["error"]
    error = {**first, "message": f"{len(failed)} of {len(jobs)} jobs answered with an error; "
                                 f"{failed[0]['job_id']}: {first['message']}"}
    return {"ok": False, "jobs": jobs, "error": error}, code


def observe_safely(ctx: Context, job_id: str) -> dict:
    try:
        return {"ok": True, **observe(ctx, job_id)}
    except TaoBrevError as exc:
        return {"job_id": job_id, "ok": False, "error": exc.to_json()}
