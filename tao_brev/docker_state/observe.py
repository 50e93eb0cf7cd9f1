"""One job's state read from docker (``docker inspect``'s ``.State`` and its last log lines), and the
state read right after brev started a STOPPED instance."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional, cast

from ..errors import CODES
from ..logcap import redacted
from ..model.answer_types import Hint, PollAnswerObserved
from ..vocabulary import ErrClass, JobState
from .docker_errors import docker_error_code
from .hints import RESUME
from .patterns import EVIDENCE_CHARS, STOP_EXIT_CODES, _cut, classify_logs
from .rows import DockerState, Facts, StateRow, _code, _signal_name, row_for


@dataclass
class Observed:
    """One job's state read from the backend."""

    state: JobState
    message: str
    docker_status: Optional[str] = None
    exit_code: Optional[int] = None
    oom_killed: bool = False
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    docker_error: Optional[str] = None   # docker's State.Error (a failed start)
    hint: Optional[Hint] = field(default=None)
    gone: Optional[str] = None   # a fact, set where it was learnt: "container" (docker: no such
    #                              container) or "instance" (brev ls: deleted / not RUNNING)

    def to_json(self) -> PollAnswerObserved:
        return cast(PollAnswerObserved, {k: v for k, v in self.__dict__.items() if v is not None})   # the fields, in order


def from_inspect(state: Optional[DockerState], logs: Optional[str] = None) -> Observed:
    """Map ``docker inspect --format '{{json .State}}'`` (None: no container) by :data:`STATE_ROWS`.

    ``logs``: the last log lines of an exited container, when read; a known
    pattern in them refines the hint of rows that allow it (``logs_refine``),
    and adds evidence to the others. Every ERROR carries a hint.
    """
    row, facts = row_for(state)
    if state is None or not state:
        return Observed(JobState.UNKNOWN, "no such container on the instance (removed, or never launched)",
                        gone="container")
    started_at, finished_at = _ts(state.get("StartedAt")), _ts(state.get("FinishedAt"))
    message = _message(row, facts)
    hint = _hint(row, facts, logs) if row.hint else None   # every ERROR row has one
    return Observed(row.state, message, hint=hint, docker_status=facts.status or None, exit_code=facts.exit_code,
                    oom_killed=facts.oom_killed, started_at=started_at, finished_at=finished_at,
                    docker_error=facts.error or None)


def _message(row: StateRow, f: Facts) -> str:
    code = f.exit_code
    if row.status == "*":
        return f"docker status {f.status or '?'}; confirm with docker ps -a"
    base = f"docker status {f.status}"
    if row.state == JobState.COMPLETE:
        text = f"{base}, exit code 0"
        return text + ("; note: OOMKilled is true (a process inside was OOM-killed), the job still exited 0"
                       if f.oom_killed else "")
    if row.status == "created" and row.state == JobState.ERROR:
        return f"{base}, exit code {code}: docker could not start the container (failed launch): {_short(f.error)}"
    if row.status == "created":
        return f"{base}: not started yet"
    if row.status == "paused":
        return f"{base}: the job makes no progress until `docker unpause`"
    if row.status == "restarting":
        return f"{base} (last exit code {code})"
    if row.status in ("removing", "dead"):
        return f"{base} (exit code {code}): {row.reason}; confirm with docker ps -a"
    if row.status == "exited":
        if f.oom_killed:
            return f"{base}, exit code {code}: OOMKilled; out of memory"
        if f.error:
            return f"{base}, exit code {code}: {_short(f.error)}"
        if code == 137:
            return f"{base}, exit code 137 (SIGKILL, OOMKilled false): an external kill or the host's OOM killer"
        if code is not None and 128 < code < 160:
            return f"{base}, exit code {code} ({_signal_name(code)})"
        return f"{base}, exit code {code}"
    return base


def _hint(row: StateRow, f: Facts, logs: Optional[str]) -> Hint:
    evidence = [f"ExitCode={f.exit_code}", f"OOMKilled={str(f.oom_killed).lower()}"]
    if f.error:
        evidence.insert(0, f"State.Error={_short(f.error)}")
    from_logs = classify_logs(logs or "")
    if from_logs and row.logs_refine:
        # no State.Error here (a row with one comes first): at most MAX_EVIDENCE + 2 lines
        return {**from_logs, "evidence": from_logs["evidence"] + evidence}
    reason, advice = row.reason, row.advice
    if row.kind == "start":
        code = docker_error_code(f.error, default="")
        if code:
            reason = f"{reason} ({code})"
            advice = CODES[code].fix
        else:
            missing = classify_logs(f.error)
            if missing and missing["reason"] == "the command is not in the image":
                return {**missing, "evidence": evidence}   # exit 127/126 at start: the spec names no command
    elif row.kind == "signal":
        reason = f"killed by {_signal_name(_code(f))} (exit {f.exit_code}), no known pattern in the logs"
    elif row.kind == "exit":
        reason = f"exit {f.exit_code}, no known pattern: read the last log lines"
    if from_logs:
        evidence += from_logs["evidence"]
        if from_logs["reason"] not in reason:   # both facts, neither hidden (every pattern has advice)
            advice = f"{advice}; the log also shows {from_logs['reason']}: {from_logs['advice']}"
    elif logs and row.kind in ("signal", "exit"):
        evidence += [_cut(ln.strip()) for ln in logs.splitlines() if ln.strip()][-3:]
    return {"err_class": row.err_class, "reason": reason, "advice": advice, "evidence": evidence}



def _short(text: str) -> str:
    text = " ".join(redacted(text or "").split())   # redacted before the cut
    return text if len(text) <= EVIDENCE_CHARS else text[:EVIDENCE_CHARS - 3] + "..."


def after_instance_start(observed: Observed, instance: str) -> Observed:
    """The state read right after brev started the STOPPED ``instance`` to answer.

    A VM stop kills every container (exit 137/143, or 255 after a daemon
    restart) and docker does not restart them: such an exit is the stop's
    doing, not the job's - ERROR with an ``ERR_INFRA`` hint naming the stop.
    Any other state only gains a note that the instance bills again.
    """
    note = f"instance {instance} was STOPPED; brev started it again to answer this poll (it bills again)"
    killed_by_stop = (observed.state == JobState.ERROR and not observed.oom_killed
                      and observed.exit_code in STOP_EXIT_CODES)
    if not killed_by_stop:
        return dataclasses.replace(observed, message=f"{observed.message}; note: {note}")
    return dataclasses.replace(
        observed,
        message=(f"{note}. The stop killed the job's container (exit code {observed.exit_code}); its work "
                 "since the last checkpoint is lost, files on the instance disk survive"),
        hint={"err_class": ErrClass.INFRA, "reason": "instance stopped while the job ran",
              "advice": f"resubmit: {RESUME} (checkpoints on the instance disk survive a stop); if nothing else "
                        f"needs {instance}, stop it again (brev stop {instance}: its type can stop, it was stopped) or delete it with teardown.py",
              "evidence": [f"ExitCode={observed.exit_code}", f"OOMKilled={str(observed.oom_killed).lower()}",
                           f"brev: instance {instance} is starting"]})



def _ts(value) -> Optional[str]:
    if not value or str(value).startswith("0001-01-01"):
        return None
    return str(value)
