"""Docker container state -> the fixed status vocabulary, and failure hints.

The mapping (from the TAO bank's docker contract) is :data:`STATE_ROWS`; the
failure classification is :data:`LOG_PATTERNS`; docker's own error messages
map to error codes through :data:`DOCKER_ERRORS`. ``references/failure-classes.md``
embeds the tables printed by ``python -m tao_brev.docker_state --markdown``
(a test keeps the two equal).

The failure classification is a *hint* with the log lines that support it;
the decision to retry stays with the caller. Infrastructure faults
(``ERR_INFRA``) are retriable, program faults (``ERR_PROGRAM``) are not.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass, field

STATES = ("PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN")

INFRA_ADVICE = "retriable: resubmit with --retry-of, preferably on another instance"
PROGRAM_ADVICE = "fix the spec/data/code before resubmitting"

# docker ``.State`` -> state: (condition as documented, an example .State or
# None for "no container", the state). ``from_inspect`` implements it; a test
# runs every example through it.
STATE_ROWS: tuple[tuple[str, dict | None, str], ...] = (
    ("created", {"Status": "created"}, "PENDING"),
    ("restarting", {"Status": "restarting"}, "PENDING"),
    ("running", {"Status": "running"}, "RUNNING"),
    ("paused", {"Status": "paused"}, "RUNNING"),
    ("exited, ExitCode 0", {"Status": "exited", "ExitCode": 0}, "COMPLETE"),
    ("exited, ExitCode != 0", {"Status": "exited", "ExitCode": 2}, "ERROR"),
    ("exited, OOMKilled (named OOM, hint ERR_PROGRAM)",
     {"Status": "exited", "ExitCode": 137, "OOMKilled": True}, "ERROR"),
    ("exited, ExitCode 137 without OOMKilled (SIGKILL from outside: docker stop/kill/rm -f; not named OOM)",
     {"Status": "exited", "ExitCode": 137, "OOMKilled": False}, "ERROR"),
    ("created, ExitCode != 0 or Error set (the start failed: no container process ever ran)",
     {"Status": "created", "ExitCode": 127, "Error": "exec: \"x\": executable file not found in $PATH"}, "ERROR"),
    ("dead", {"Status": "dead"}, "UNKNOWN"),
    ("no such container", None, "UNKNOWN"),
)
_BY_STATUS = {"created": "PENDING", "restarting": "PENDING", "running": "RUNNING", "paused": "RUNNING"}


@dataclass(frozen=True)
class LogPattern:
    err_class: str
    pattern: re.Pattern
    reason: str
    advice: str


def _p(err_class: str, regex: str, reason: str, advice: str | None = None, flags: int = re.I) -> LogPattern:
    default = INFRA_ADVICE if err_class == "ERR_INFRA" else PROGRAM_ADVICE
    return LogPattern(err_class, re.compile(regex, flags), reason, advice or default)


# Log patterns. They must match the real messages (NVIDIA driver Xid lines,
# CUDA/NCCL/PyTorch errors) and not ordinary training output such as
# "loss: nan", "xid" in a file name or "ECCV" in a dataset name.
# Infrastructure patterns win over program ones (an Xid often ends in a traceback too).
LOG_PATTERNS: tuple[LogPattern, ...] = (
    _p("ERR_INFRA", r"NVRM: Xid|\bXid \(PCI:", "NVIDIA driver Xid error (GPU fault)", flags=0),
    _p("ERR_INFRA", r"fallen off the bus", "GPU has fallen off the bus"),
    _p("ERR_INFRA", r"uncorrectable ECC|\bECC error", "GPU ECC error"),
    _p("ERR_INFRA", r"CUDA driver version is insufficient|driver version is insufficient",
       "NVIDIA driver too old for the container's CUDA",
       "use an instance whose NVIDIA driver supports the image's CUDA version"),
    _p("ERR_INFRA", r"No CUDA GPUs are available|CUDA-capable device\(s\) is/are busy or unavailable",
       "no usable GPU in the container",
       "check the instance's GPUs with preflight.py, then resubmit with --retry-of"),
    _p("ERR_INFRA", r"NCCL (WARN|error).*(transport|socket|timeout|unhandled system error)",
       "NCCL transport fault"),
    _p("ERR_INFRA", r"No space left on device", "instance disk full",
       "free disk space on the instance (old results, docker image prune) or use a larger disk, "
       "then resubmit with --retry-of"),
    _p("ERR_PROGRAM", r"CUDA out of memory|OutOfMemoryError", "CUDA out of memory",
       "reduce the batch size or the input size, or use a GPU with more memory"),
    _p("ERR_PROGRAM", r"device-side assert", "CUDA device-side assert",
       "check the labels/classes in the data against the spec (an index out of range)"),
    _p("ERR_PROGRAM", r"DataLoader worker .* (Bus error|killed by signal)|\bBus error\b",
       "data loader ran out of shared memory", "raise --shm-size (e.g. 32g) or lower num_workers"),
    # an NGC entrypoint wrapper's `exec "$@"` (exit 127), or docker's own start error
    _p("ERR_PROGRAM", r"exec: .*: not found|executable file not found in \$PATH",
       "the command is not in the image",
       "check --network-arch/--action against the TAO image (each network arch is an executable in it) "
       "and the image tag"),
    _p("ERR_PROGRAM", r"FileNotFoundError|No such file or directory", "missing file",
       "check the dataset paths in the spec against the mounts (/data/NAME)"),
    _p("ERR_PROGRAM", r"^Traceback \(most recent call last\)", "Python traceback", flags=re.M),
)

OOM_HINT_REASON = "out of memory (OOM)"
STOP_EXIT_CODES = (137, 143, 255)   # SIGKILL, SIGTERM, daemon restart: how a VM stop ends a container


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
    if status == "created" and (code or state.get("Error")):
        # `docker run` created it, then the start failed (e.g. exit 127: the
        # command is not in an image without an entrypoint wrapper): it never runs.
        return JobState("ERROR", f"docker status created, the start failed (exit code {code}): "
                        f"{str(state.get('Error') or '')[:300]}", **common)
    if status in _BY_STATUS:
        return JobState(_BY_STATUS[status], f"docker status {status}", **common)
    if status == "exited":
        if code == 0:
            return JobState("COMPLETE", "docker status exited, exit code 0", **common)
        if oom:   # the daemon saw the cgroup's OOM kill: a fact, not a guess from 137
            return JobState("ERROR", f"docker status exited, exit code {code}: OOMKilled; out of memory",
                            hint={"err_class": "ERR_PROGRAM", "reason": OOM_HINT_REASON,
                                  "advice": "reduce the batch size or use a larger instance",
                                  "evidence": [f"OOMKilled={oom}", f"ExitCode={code}"]}, **common)
        if code == 137:   # `docker stop` of a PID 1 that ignores SIGTERM ends 137 too (after its timeout)
            return JobState("ERROR", f"docker status exited, exit code 137: killed by SIGKILL (docker stop, "
                            "docker kill or rm -f; OOMKilled=false)", **common)
        return JobState("ERROR", f"docker status exited, exit code {code}", **common)
    return JobState("UNKNOWN", f"docker status {status or '?'}; confirm with docker ps -a", **common)


def after_instance_start(observed: JobState, instance: str) -> JobState:
    """The state read right after brev started the STOPPED ``instance`` to answer.

    A VM stop kills every container (exit 137/143, or 255 after a daemon
    restart) and docker does not restart them: such an exit is the stop's
    doing, not the job's - ERROR with an ``ERR_INFRA`` hint naming the stop.
    Any other state only gains a note that the instance bills again.
    """
    note = f"instance {instance} was STOPPED; brev started it again to answer this poll (it bills again)"
    killed_by_stop = (observed.state == "ERROR" and not observed.oom_killed
                      and observed.exit_code in STOP_EXIT_CODES)
    if not killed_by_stop:
        return dataclasses.replace(observed, message=f"{observed.message}; note: {note}")
    return dataclasses.replace(
        observed,
        message=(f"{note}. The stop killed the job's container (exit code {observed.exit_code}); its work "
                 "since the last checkpoint is lost, files on the instance disk survive"),
        hint={"err_class": "ERR_INFRA", "reason": "instance stopped while the job ran",
              "advice": f"resubmit with --retry-of (checkpoints under the results dir survive); if nothing else "
                        f"needs {instance}, stop it again (brev stop {instance}) or delete it with teardown.py",
              "evidence": [f"ExitCode={observed.exit_code}", f"OOMKilled={observed.oom_killed}",
                           f"brev: instance {instance} is starting"]})


def classify_logs(log_text: str, max_evidence: int = 5) -> dict | None:
    """A failure hint ``{"err_class", "reason", "advice", "evidence": [lines]}``
    from the logs, or None. Infrastructure patterns win over program patterns."""
    lines = log_text.splitlines()
    for wanted in ("ERR_INFRA", "ERR_PROGRAM"):
        for item in LOG_PATTERNS:
            if item.err_class != wanted:
                continue
            evidence = [ln.strip() for ln in lines if item.pattern.search(ln)]
            if evidence:
                return {"err_class": item.err_class, "reason": item.reason, "advice": item.advice,
                        "evidence": evidence[:max_evidence]}
    return None


def _ts(value) -> str | None:
    if not value or str(value).startswith("0001-01-01"):
        return None
    return str(value)


# Docker CLI / daemon messages -> error codes (Docker CLI reference, moby
# daemon errors, NVIDIA Container Toolkit). Order matters: first match wins.
DOCKER_ERRORS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"\bdocker: (command )?not found", re.I), "DOCKER_NOT_FOUND"),
    (re.compile(r"Cannot connect to the Docker daemon|Is the docker daemon running", re.I), "DOCKER_DAEMON_DOWN"),
    # nvidia-container-cli: "device error: 3: unknown device" = --gpus named an id the host lacks
    (re.compile(r"nvidia-container-cli: device error: .*unknown device", re.I), "GPU_IDS_UNKNOWN"),
    (re.compile(r'could not select device driver "" with capabilities: \[\[gpu\]\]|nvidia-container-cli|'
                r"unknown or invalid runtime name: nvidia", re.I), "NVIDIA_RUNTIME_MISSING"),
    (re.compile(r"no space left on device", re.I), "DISK_FULL"),
    # the registry is not reached at all (DNS, TCP, TLS): never "unauthorized", never a GPU fault
    (re.compile(r"dial tcp: lookup \S+.*(no such host|server misbehaving|i/o timeout)|"
                r"dial tcp \S+: (i/o timeout|connect: (connection refused|network is unreachable|no route to host))|"
                r"TLS handshake timeout|request canceled while waiting for connection|"
                r"Client\.Timeout exceeded while awaiting headers", re.I), "REGISTRY_UNREACHABLE"),
    # distribution's error envelope: {"errors": [{"code": "DENIED" | "UNAUTHORIZED", ...}]}
    (re.compile(r"unauthorized|authentication required|\bdenied: |\"code\":\s*\"DENIED\"", re.I),
     "IMAGE_PULL_UNAUTHORIZED"),
    (re.compile(r"manifest unknown|not found: manifest|no such manifest|repository does not exist", re.I),
     "IMAGE_NOT_FOUND"),
)


def docker_error_code(text: str, default: str = "REMOTE_COMMAND_FAILED") -> str:
    """The error code for a docker failure message (``default`` when unknown)."""
    for pattern, code in DOCKER_ERRORS:
        if pattern.search(text or ""):
            return code
    return default


NGC_REGISTRY = "nvcr.io"
_DENIED = re.compile(r"\bdenied: |\"code\":\s*\"DENIED\"", re.I)


def registry_error_code(text: str, registry: str | None, *, logged_in: bool = False,
                        default: str = "REMOTE_COMMAND_FAILED") -> str:
    """The error code for a failed pull, ``docker run`` of a missing image, login or
    ``docker manifest inspect`` against ``registry`` - the one classification used
    wherever an image is pulled or a registry is logged in to.

    On nvcr.io a refusal is split by what the registry said: ``denied`` (its current
    answer for a valid key whose org is not entitled:
    ``denied: {"errors": [{"code": "DENIED", "message": "Access Denied"}]}``) or any
    refusal after a successful login = NGC_NOT_ENTITLED; ``unauthorized`` without a
    login = NGC_NOT_AUTHENTICATED. Elsewhere it stays IMAGE_PULL_UNAUTHORIZED. A
    registry that is not reached at all (``dial tcp: lookup HOST ...: no such host``)
    is REGISTRY_UNREACHABLE, whatever command met it.
    """
    code = docker_error_code(text, default)
    if code != "IMAGE_PULL_UNAUTHORIZED" or registry != NGC_REGISTRY:
        return code
    return "NGC_NOT_ENTITLED" if logged_in or _DENIED.search(text or "") else "NGC_NOT_AUTHENTICATED"


# -- the tables of references/failure-classes.md ------------------------------
def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """The generated part of ``references/failure-classes.md``."""
    out = ["### Docker state -> status", "", "| docker `.State` | state |", "|---|---|"]
    out += [f"| {_cell(cond)} | {state} |" for cond, _example, state in STATE_ROWS]
    out += ["", "### Log patterns -> failure class (first class wins: ERR_INFRA before ERR_PROGRAM)", "",
            "| class | pattern (regex) | reason | advice |", "|---|---|---|---|"]
    out += [f"| {p.err_class} | `{_cell(p.pattern.pattern)}` | {_cell(p.reason)} | {_cell(p.advice)} |"
            for p in LOG_PATTERNS]
    out += ["", "### Docker error messages -> error code (first match wins)", "",
            "| pattern (regex, case-insensitive) | code |", "|---|---|"]
    out += [f"| `{_cell(pattern.pattern)}` | `{code}` |" for pattern, code in DOCKER_ERRORS]
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # python -m tao_brev.docker_state --markdown
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m tao_brev.docker_state --markdown")
    sys.stdout.write(markdown())
