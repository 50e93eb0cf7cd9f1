"""Docker container state -> the fixed status vocabulary, and failure hints.

Mapping (``references/failure-classes.md``, from the TAO bank's docker
contract):

| docker ``.State.Status`` | state    |
|--------------------------|----------|
| created, restarting      | PENDING  |
| running, paused          | RUNNING  |
| exited, ExitCode 0       | COMPLETE |
| exited, ExitCode != 0    | ERROR (OOMKilled / 137 named) |
| dead, or no container    | UNKNOWN  |

The failure classification is a *hint* with the log lines that support it;
the decision to retry stays with the caller. Infrastructure faults
(``ERR_INFRA``) are retriable, program faults (``ERR_PROGRAM``) are not.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

STATES = ("PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN")

# Log patterns, each with its class and a short reason. They must match the
# real messages (NVIDIA driver Xid lines, CUDA/NCCL/PyTorch errors) and not
# ordinary training output such as "loss: nan" or "xid" in a file name.
_PATTERNS: tuple[tuple[str, re.Pattern, str], ...] = (
    ("ERR_INFRA", re.compile(r"NVRM: Xid|\bXid \(PCI:"), "NVIDIA driver Xid error (GPU fault)"),
    ("ERR_INFRA", re.compile(r"fallen off the bus", re.I), "GPU has fallen off the bus"),
    ("ERR_INFRA", re.compile(r"uncorrectable ECC|ECC error", re.I), "GPU ECC error"),
    ("ERR_INFRA", re.compile(r"driver version is insufficient|CUDA driver version is insufficient", re.I),
     "NVIDIA driver too old for the container's CUDA"),
    ("ERR_INFRA", re.compile(r"NCCL (WARN|error).*(transport|socket|timeout|unhandled system error)", re.I),
     "NCCL transport fault"),
    ("ERR_PROGRAM", re.compile(r"CUDA out of memory|OutOfMemoryError", re.I), "CUDA out of memory"),
    ("ERR_PROGRAM", re.compile(r"device-side assert", re.I), "CUDA device-side assert"),
    ("ERR_PROGRAM", re.compile(r"FileNotFoundError|No such file or directory", re.I), "missing file"),
    ("ERR_PROGRAM", re.compile(r"^Traceback \(most recent call last\)", re.M), "Python traceback"),
)


@dataclass
class JobState:
    """One job's state read from the backend."""

    state: str
    message: str
    docker_status: str | None = None
    exit_code: int | None = None
    oom_killed: bool = False
    started_at: str | None = None
    finished_at: str | None = None
    hint: dict | None = field(default=None)

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def from_inspect(state: dict | None) -> JobState:
    """Map ``docker inspect --format '{{json .State}}'`` (or None: no container)."""
    if not state:
        return JobState("UNKNOWN", "no such container on the instance (removed, or never launched)")
    status = str(state.get("Status", "")).lower()
    code = state.get("ExitCode")
    oom = bool(state.get("OOMKilled"))
    common = dict(docker_status=status, exit_code=code, oom_killed=oom,
                  started_at=_ts(state.get("StartedAt")), finished_at=_ts(state.get("FinishedAt")))
    if status in ("created", "restarting"):
        return JobState("PENDING", f"docker status {status}", **common)
    if status in ("running", "paused"):
        return JobState("RUNNING", f"docker status {status}", **common)
    if status == "exited":
        if code == 0:
            return JobState("COMPLETE", "docker status exited, exit code 0", **common)
        if oom or code == 137:
            why = "OOMKilled" if oom else "exit code 137 (SIGKILL, usually the OOM killer)"
            return JobState("ERROR", f"docker status exited, exit code {code}: {why}; out of memory",
                            hint={"err_class": "ERR_PROGRAM", "reason": "out of memory (OOM)",
                                  "advice": "reduce the batch size or use a larger instance",
                                  "evidence": [f"OOMKilled={oom}", f"ExitCode={code}"]}, **common)
        return JobState("ERROR", f"docker status exited, exit code {code}", **common)
    return JobState("UNKNOWN", f"docker status {status or '?'}; confirm with docker ps -a", **common)


def classify_logs(log_text: str, max_evidence: int = 5) -> dict | None:
    """A failure hint ``{"err_class", "reason", "evidence": [lines]}`` from the
    logs, or None. Infrastructure patterns win over program patterns (an Xid
    often ends in a traceback too)."""
    lines = log_text.splitlines()
    for wanted in ("ERR_INFRA", "ERR_PROGRAM"):
        for err_class, pattern, reason in _PATTERNS:
            if err_class != wanted:
                continue
            evidence = [ln.strip() for ln in lines if pattern.search(ln)]
            if evidence:
                advice = ("retriable: resubmit with --retry-of, preferably on another instance"
                          if err_class == "ERR_INFRA" else "fix the spec/data/code before resubmitting")
                return {"err_class": err_class, "reason": reason, "advice": advice,
                        "evidence": evidence[:max_evidence]}
    return None


def _ts(value) -> str | None:
    if not value or str(value).startswith("0001-01-01"):
        return None
    return str(value)


# Docker CLI / daemon messages -> error codes (Docker CLI reference, moby
# daemon errors, NVIDIA Container Toolkit). Order matters: first match wins.
_DOCKER_ERRORS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"Cannot connect to the Docker daemon|Is the docker daemon running", re.I), "DOCKER_DAEMON_DOWN"),
    (re.compile(r'could not select device driver "" with capabilities: \[\[gpu\]\]|nvidia-container-cli|'
                r"unknown or invalid runtime name: nvidia", re.I), "NVIDIA_RUNTIME_MISSING"),
    (re.compile(r"no space left on device", re.I), "DISK_FULL"),
    (re.compile(r"unauthorized|authentication required|denied: requested access", re.I), "IMAGE_PULL_UNAUTHORIZED"),
    (re.compile(r"manifest unknown|not found: manifest|repository does not exist", re.I), "IMAGE_NOT_FOUND"),
)


def docker_error_code(text: str, default: str = "REMOTE_COMMAND_FAILED") -> str:
    """The error code for a docker failure message (``default`` when unknown)."""
    for pattern, code in _DOCKER_ERRORS:
        if pattern.search(text or ""):
            return code
    return default
