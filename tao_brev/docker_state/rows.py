"""The state table: docker's ``.State`` (Status, ExitCode, OOMKilled, Error) -> the status
vocabulary and a hint (moby container/state.go, daemon/start.go)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, TypedDict

from ..vocabulary import ErrClass, JobState
from .hints import KILL_ADVICE, LOGS_ADVICE, RESET_EITHER, RESUME

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}


class DockerState(TypedDict, total=False):
    """``docker inspect --format '{{json .State}}'`` (moby's ContainerState): the keys the bundle reads."""
    Status: str
    ExitCode: int
    OOMKilled: bool
    Error: str
    StartedAt: str
    FinishedAt: str
    Dead: bool


@dataclass(frozen=True)
class Facts:
    """The parts of docker's ``.State`` the table decides on."""

    status: str
    exit_code: Optional[int]
    oom_killed: bool
    error: str


@dataclass(frozen=True)
class StateRow:
    """One row: docker ``.State.Status`` + a condition on ExitCode / OOMKilled / Error -> state and hint."""

    status: str                          # docker .State.Status ("*" = anything not listed; "none" = no container)
    when: str                            # the condition on ExitCode / OOMKilled / Error, in words
    match: Callable[[Facts], bool]
    state: JobState                      # the status vocabulary
    err_class: Optional[ErrClass]        # the hint's class; None: no hint, or the facts do not decide
    reason: str                          # why, in a few words ("" for states without a hint)
    advice: str
    example: Optional[DockerState]       # an example .State (None = no container); the tests run each
    hint: bool = False                   # the row carries a hint
    logs_refine: bool = False            # a known log pattern replaces this row's hint
    kind: str = ""                       # "start": State.Error names the cause; "signal" / "exit": reason by code


def _code(f: Facts) -> int:
    return f.exit_code if isinstance(f.exit_code, int) else 0


def _signal_name(code: int) -> str:
    return SIGNALS.get(code - 128, f"signal {code - 128}")


_ANY = lambda f: True   # noqa: E731

# The table (first matching row of a status wins). Every row is documented in
# references/failure-classes.md and tested with its example.
STATE_ROWS: tuple[StateRow, ...] = (
    StateRow("none", "no such container", lambda f: True, JobState.UNKNOWN, None, "", "",
             None),
    StateRow("created", "Error set or ExitCode != 0 (docker could not start it; an Error saying the command is "
             "not found is ERR_PROGRAM, the command is not in the image)",
             lambda f: bool(f.error) or _code(f) != 0, JobState.ERROR, ErrClass.INFRA,
             "failed launch: docker created the container but could not start it",
             "read State.Error (evidence); fix the instance (see the error code's fix), then resubmit with --retry-of",
             {"Status": "created", "ExitCode": 128,
              "Error": 'could not select device driver "" with capabilities: [[gpu]]'}, hint=True, kind="start"),
    StateRow("created", "no Error, ExitCode 0", _ANY, JobState.PENDING, None, "", "",
             {"Status": "created", "ExitCode": 0, "Error": ""}),
    StateRow("restarting", "any", _ANY, JobState.PENDING, None, "", "",
             {"Status": "restarting", "ExitCode": 1}),
    StateRow("running", "any", _ANY, JobState.RUNNING, None, "", "",
             {"Status": "running"}),
    StateRow("paused", "any (docker pause: no progress until docker unpause)", _ANY, JobState.RUNNING, None, "", "",
             {"Status": "paused"}),
    StateRow("removing", "any (docker rm in progress)", _ANY, JobState.UNKNOWN, None,
             "container being removed (docker rm)",
             "poll again: once it is gone the job answers CONTAINER_GONE; teardown.py JOB_ID closes the record",
             {"Status": "removing", "ExitCode": 137}, hint=False),
    StateRow("exited", "ExitCode 0, OOMKilled either way (true: a process inside was OOM-killed, the job still "
             "exited 0; the message notes it)", lambda f: _code(f) == 0 and not f.error, JobState.COMPLETE, None, "", "",
             {"Status": "exited", "ExitCode": 0}),
    StateRow("exited", "Error set (a later start failed)", lambda f: bool(f.error) and not f.oom_killed,
             JobState.ERROR, ErrClass.INFRA, "docker could not start the container again",
             "read State.Error (evidence); fix the instance, then resubmit with --retry-of",
             {"Status": "exited", "ExitCode": 128, "Error": "error gathering device information while adding "
              "custom device \"/dev/nvidia0\": no such file or directory"}, hint=True, kind="start"),
    StateRow("exited", "OOMKilled true, ExitCode != 0", lambda f: f.oom_killed, JobState.ERROR, ErrClass.PROGRAM,
             "out of memory (OOM): docker's OOM killer record (OOMKilled true)",
             "the host's memory (RAM, not the GPU's) ran out: lower num_workers or the batch size, or use an "
             "instance with more RAM, then resubmit with --retry-of",
             {"Status": "exited", "ExitCode": 137, "OOMKilled": True}, hint=True),
    StateRow("exited", "ExitCode 137, OOMKilled false", lambda f: _code(f) == 137, JobState.ERROR, None,
             "killed by SIGKILL (exit 137) without docker's OOM record: out of memory (the host's OOM killer) or "
             "an external kill (docker kill, a stop timeout, a VM stop); not a program error",
             KILL_ADVICE, {"Status": "exited", "ExitCode": 137, "OOMKilled": False}, hint=True),
    StateRow("exited", "ExitCode 143, OOMKilled false", lambda f: _code(f) == 143, JobState.ERROR, None,
             "stopped by SIGTERM (exit 143): docker stop, a shutdown or a cancel from outside; not a program error",
             f"if nobody stopped it, check the instance's uptime (a reboot); resubmit: {RESUME}",
             {"Status": "exited", "ExitCode": 143}, hint=True),
    StateRow("exited", "ExitCode 126 or 127", lambda f: _code(f) in (126, 127), JobState.ERROR, ErrClass.PROGRAM,
             "the container's command is missing or not executable (exit 126/127)",
             "check --network-arch / --action and the image: the TAO entrypoint must exist in it",
             {"Status": "exited", "ExitCode": 127}, hint=True, logs_refine=True),
    StateRow("exited", "ExitCode 129-159 (killed by another signal), OOMKilled false",
             lambda f: 128 < _code(f) < 160, JobState.ERROR, None,
             "killed by a signal (exit 128+N)", LOGS_ADVICE,
             {"Status": "exited", "ExitCode": 139}, hint=True, logs_refine=True, kind="signal"),
    StateRow("exited", "any other ExitCode != 0", _ANY, JobState.ERROR, None,
             "no known pattern", LOGS_ADVICE,
             {"Status": "exited", "ExitCode": 2}, hint=True, logs_refine=True, kind="exit"),
    # terminal: moby container/state.go - a dead container never runs again (only removal is left);
    # its results dir is a bind mount on the instance, which the failed removal did not touch
    StateRow("dead", "any (docker could not remove it)", _ANY, JobState.ERROR, ErrClass.INFRA,
             "docker marked the container dead (its removal failed); it will never run again",
             "its results dir on the instance is intact: teardown.py JOB_ID collects them (upload, or copy "
             "home) and removes the container (docker rm -f); if that fails too, the storage driver holds it: "
             f"{RESET_EITHER}; resubmit: {RESUME}",
             {"Status": "dead", "ExitCode": 137, "Dead": True}, hint=True),
    StateRow("*", "a status docker does not document", _ANY, JobState.UNKNOWN, None, "", "",
             {"Status": "frozen"}),
)

DOCKER_STATUSES = ("created", "restarting", "running", "paused", "removing", "exited", "dead")


def row_for(state: Optional[DockerState]) -> tuple[StateRow, Facts]:
    """The :data:`STATE_ROWS` row of a ``.State`` (None: no container), with the facts it read."""
    if not state:
        return STATE_ROWS[0], Facts("none", None, False, "")
    code = state.get("ExitCode")
    facts = Facts(str(state.get("Status", "")).lower(), code if isinstance(code, int) else None,
                  bool(state.get("OOMKilled")), str(state.get("Error") or "").strip())
    status = facts.status if facts.status in DOCKER_STATUSES else "*"
    return next(row for row in STATE_ROWS if row.status == status and row.match(facts)), facts
