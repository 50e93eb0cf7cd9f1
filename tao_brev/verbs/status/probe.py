"""The remote probe of a poll: the sections that read one job on its instance (docker state,
log lines, the status file, the last log line), and what they answer - or, when the instance
does not answer, whether it is gone or stopped."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ... import docker_state, logcap, remote
from ...secrets import redact
from ... import progress as progress_mod
from ...context import Context
from ...docker_state import Observed
from ...docker_state import after_instance_start, docker_error_code, from_inspect
from ...errors import TaoBrevError, TransportError
from ...model.answer_types import Hint
from ...vocabulary import ErrClass, InstanceStatus, JobState

CLASSIFY_TAIL_LINES = 200


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


@dataclass
class Probe:
    """What a poll read beside the docker state (``None``: not read)."""

    now: float | None = None                  # the instance's clock, epoch seconds
    files: list[progress_mod.StatusFile] | None = None   # the status files of the results dir
    last_log: str | None = None               # ``docker logs --timestamps --tail 1``
    status_only: bool = False                 # --all: stalls judged from the status file alone


def read_job(sections: dict[str, remote.Section], job_id: str, log_lines: int,
             token: str | None = None) -> tuple[Observed, logcap.Bounded | None]:
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


def from_probe(job_id: str, probe: progress_mod.JobProbe | None) -> Observed:
    """A job's state from ``__tb_jobs`` output (no entry: no such container)."""
    if probe is None:
        return from_inspect(None)
    try:
        state = json.loads(probe.state)
    except json.JSONDecodeError:
        raise TransportError("TRANSPORT_FAILED", f"docker inspect printed no JSON for {job_id}") from None
    return from_inspect(state, probe.tail or "")   # the log tail refines an ERROR's hint


def read_backend(ctx: Context, instance: str, job_id: str, log_lines: int, results_dir: str | None = None,
                 metrics: int | None = None) -> tuple[Observed, logcap.Bounded | None, Probe | None]:
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
        return instance_lost(ctx, instance, exc), None, None
    probe = _probe(sections, token, job_id, results_dir)
    return (after_instance_start(observed, instance) if result.instance_started else observed), logs, probe


def instance_clock(sections: dict[str, remote.Section]) -> float | None:
    """The instance's clock (``now`` section, epoch seconds), or None."""
    now = sections.get("now")
    try:
        return float(now.output.strip().splitlines()[-1]) if now and now.exit_code == 0 else None
    except (ValueError, IndexError):
        return None


def _probe(sections: dict[str, remote.Section], token: str, job_id: str, results_dir: str | None) -> Probe | None:
    if not results_dir or f"{job_id}:progress" not in sections:
        return None
    lastlog = sections.get(f"{job_id}:lastlog")
    return Probe(now=instance_clock(sections),
                 files=progress_mod.parse_files(sections[f"{job_id}:progress"].output, token),
                 last_log=logcap.redacted(lastlog.output) if lastlog is not None and lastlog.exit_code == 0
                 else None)   # redacted before the stall evidence cuts the line


def instance_lost(ctx: Context, instance: str, exc: TransportError) -> Observed:
    """After a transport failure: is the instance gone or stopped? Else re-raise."""
    try:
        entry = ctx.brev.instance(instance)
    except TaoBrevError:
        raise exc from None
    if entry is None:
        return deleted(instance, f"brev ls: no instance {instance}")
    status = str(entry.get("status", "")).upper()
    if status != InstanceStatus.RUNNING:
        return Observed(JobState.UNKNOWN, f"instance {instance} is {status}: the job's container is not running; "
                                          "instance files survive a stop, not a delete", gone="instance",
                        hint=_lost_hint(f"instance {instance} is {status}", f"brev ls: {instance} {status}",
                                        f"poll again once {instance} is RUNNING (a stop killed the container; "
                                        f"checkpoints on its disk survive), or resubmit: {docker_state.RESUME}"))
    raise exc


def deleted(instance: str, evidence: str) -> Observed:
    """The state of a job whose instance no longer exists (UNKNOWN, ``gone: instance``)."""
    return Observed(JobState.UNKNOWN, f"instance {instance} no longer exists (deleted): the container and any "
                                      "results not uploaded are lost", gone="instance",
                    hint=_lost_hint(f"instance {instance} deleted", evidence,
                                    f"resubmit on a live instance: {docker_state.RESUME}, when its results "
                                    "reached S3 (else --retry-of JOB_ID starts again); close this record with "
                                    "teardown.py JOB_ID"))


def _lost_hint(reason: str, evidence: str, advice: str) -> Hint:
    return {"err_class": ErrClass.INFRA, "reason": reason, "advice": advice, "evidence": [evidence]}
