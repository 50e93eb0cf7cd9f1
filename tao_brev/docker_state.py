"""Docker container state -> the fixed status vocabulary, and failure hints.

ONE table, :data:`STATE_ROWS`, maps every ``.State.Status`` docker can report
(moby ``container/state.go`` ``StateString``: created, running, paused,
restarting, removing, exited, dead) and every combination of ``ExitCode`` /
``OOMKilled`` / ``Error`` to the status vocabulary and, for a failure, to a
hint. :func:`from_inspect` reads only that table. The failure classification
of log lines is :data:`LOG_PATTERNS`; docker's own error messages map to
error codes through :data:`DOCKER_ERRORS`. ``references/failure-classes.md``
embeds the tables printed by ``python -m tao_brev.docker_state --markdown``
(a test keeps the two equal, another runs every documented example row).

Facts the table rests on (moby sources):

* ``daemon/start.go``: when starting a created container fails (device
  driver, NVIDIA hook, missing executable), the container stays ``created``
  with ``State.Error`` set and ``ExitCode`` 128 (127/126 for a missing / not
  executable command); the CLI exits 125. So ``created`` + Error is a failed
  launch, never "pending".
* ``container/state.go``: ``removing`` and ``dead`` are reported for a
  container that is not running; ``dead`` is what a failed removal leaves.
  ``OOMKilled`` is docker's own record of the cgroup OOM killer; an exit 137
  without it is a SIGKILL whose sender docker does not know (``docker kill``,
  a stop timeout, the host's OOM killer, a VM stop).

A hint is ``{"err_class", "reason", "advice", "evidence": [lines]}``. Its
class is ``ERR_INFRA`` (retriable), ``ERR_PROGRAM`` (not retried blindly) or
null when the facts do not decide (an exit 137 without OOMKilled; an exit
code without a known log pattern). A job that ends ERROR always carries a hint.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional


STATES = ("PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN")

# The resume command of an advice: the poll answer replaces it with the job's exact submit command
# (tao_brev.resume_advice.fill: the job's own flags, then --resume-from for a train job, --retry-of otherwise).
RESUME = "submit.py ... --resume-from JOB_ID (continues from its last checkpoint)"
INFRA_ADVICE = f"retriable: resubmit, preferably on another instance: {RESUME}"
PROGRAM_ADVICE = "fix the spec/data/code before resubmitting"
GPU_RESET_ADVICE = ("the GPU needs a reset: stop and start the instance (brev stop INSTANCE, then brev start "
                    f"INSTANCE) or use another instance, then resubmit: {RESUME}; reinstalling the NVIDIA "
                    "Container Toolkit does not help")
DISK_ADVICE = ("free disk space on the instance (brev exec INSTANCE \"df -h ~ /var/lib/docker\"; remove old "
               f"results, docker image prune) or use a larger disk, then resubmit: {RESUME}")
LOGS_ADVICE = "read the last log lines: poll_status.py JOB_ID --logs 200"
# nvidia-container-toolkit issue #48: a `systemctl daemon-reload` on the host resets the device cgroup of
# running containers; their CUDA/NVML calls then fail while the GPU itself is fine and new containers get it.
GPU_ACCESS_ADVICE = ("not the spec: the container lost its GPU devices (a host `systemctl daemon-reload`, "
                     "nvidia-container-toolkit #48); resubmit with --resume-from JOB_ID (a new "
                     "container gets the GPUs again; checkpoints survive); if it repeats, replace the instance")
DRIVER_ADVICE = ("the instance's NVIDIA kernel driver is not loaded (a kernel upgraded without its driver): reboot "
                 "the instance's host, then rerun preflight.py --instance INSTANCE --gpu-smoke; if nvidia-smi still "
                 "fails, replace the instance; reinstalling the container toolkit does not help")
KILL_ADVICE = ("if nobody killed it (docker kill / docker stop / teardown), it was most likely the host's OOM "
               f"killer: check `dmesg | grep -i oom` on the instance, then resubmit: {RESUME}, with a smaller "
               "batch size or num_workers, or on an instance with more RAM")

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
           9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}


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
    state: str                           # the status vocabulary
    err_class: Optional[str]             # the hint's class; None: no hint, or the facts do not decide
    reason: str                          # why, in a few words ("" for states without a hint)
    advice: str
    example: Optional[dict]              # an example .State (None = no container); the tests run each
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
    StateRow("none", "no such container", lambda f: True, "UNKNOWN", None, "", "",
             None),
    StateRow("created", "Error set or ExitCode != 0 (docker could not start it; an Error saying the command is "
             "not found is ERR_PROGRAM, the command is not in the image)",
             lambda f: bool(f.error) or _code(f) != 0, "ERROR", "ERR_INFRA",
             "failed launch: docker created the container but could not start it",
             "read State.Error (evidence); fix the instance (see the error code's fix), then resubmit with --retry-of",
             {"Status": "created", "ExitCode": 128,
              "Error": 'could not select device driver "" with capabilities: [[gpu]]'}, hint=True, kind="start"),
    StateRow("created", "no Error, ExitCode 0", _ANY, "PENDING", None, "", "",
             {"Status": "created", "ExitCode": 0, "Error": ""}),
    StateRow("restarting", "any", _ANY, "PENDING", None, "", "",
             {"Status": "restarting", "ExitCode": 1}),
    StateRow("running", "any", _ANY, "RUNNING", None, "", "",
             {"Status": "running"}),
    StateRow("paused", "any (docker pause: no progress until docker unpause)", _ANY, "RUNNING", None, "", "",
             {"Status": "paused"}),
    StateRow("removing", "any (docker rm in progress)", _ANY, "UNKNOWN", None,
             "container being removed (docker rm)",
             "poll again: once it is gone the job answers CONTAINER_GONE; teardown.py JOB_ID closes the record",
             {"Status": "removing", "ExitCode": 137}, hint=False),
    StateRow("exited", "ExitCode 0, OOMKilled either way (true: a process inside was OOM-killed, the job still "
             "exited 0; the message notes it)", lambda f: _code(f) == 0 and not f.error, "COMPLETE", None, "", "",
             {"Status": "exited", "ExitCode": 0}),
    StateRow("exited", "Error set (a later start failed)", lambda f: bool(f.error) and not f.oom_killed,
             "ERROR", "ERR_INFRA", "docker could not start the container again",
             "read State.Error (evidence); fix the instance, then resubmit with --retry-of",
             {"Status": "exited", "ExitCode": 128, "Error": "error gathering device information while adding "
              "custom device \"/dev/nvidia0\": no such file or directory"}, hint=True, kind="start"),
    StateRow("exited", "OOMKilled true, ExitCode != 0", lambda f: f.oom_killed, "ERROR", "ERR_PROGRAM",
             "out of memory (OOM): docker's OOM killer record (OOMKilled true)",
             "the host's memory (RAM, not the GPU's) ran out: lower num_workers or the batch size, or use an "
             "instance with more RAM, then resubmit with --retry-of",
             {"Status": "exited", "ExitCode": 137, "OOMKilled": True}, hint=True),
    StateRow("exited", "ExitCode 137, OOMKilled false", lambda f: _code(f) == 137, "ERROR", None,
             "killed by SIGKILL (exit 137) without docker's OOM record: out of memory (the host's OOM killer) or "
             "an external kill (docker kill, a stop timeout, a VM stop); not a program error",
             KILL_ADVICE, {"Status": "exited", "ExitCode": 137, "OOMKilled": False}, hint=True),
    StateRow("exited", "ExitCode 143, OOMKilled false", lambda f: _code(f) == 143, "ERROR", None,
             "stopped by SIGTERM (exit 143): docker stop, a shutdown or a cancel from outside; not a program error",
             f"if nobody stopped it, check the instance's uptime (a reboot); resubmit: {RESUME}",
             {"Status": "exited", "ExitCode": 143}, hint=True),
    StateRow("exited", "ExitCode 126 or 127", lambda f: _code(f) in (126, 127), "ERROR", "ERR_PROGRAM",
             "the container's command is missing or not executable (exit 126/127)",
             "check --network-arch / --action and the image: the TAO entrypoint must exist in it",
             {"Status": "exited", "ExitCode": 127}, hint=True, logs_refine=True),
    StateRow("exited", "ExitCode 129-159 (killed by another signal), OOMKilled false",
             lambda f: 128 < _code(f) < 160, "ERROR", None,
             "killed by a signal (exit 128+N)", LOGS_ADVICE,
             {"Status": "exited", "ExitCode": 139}, hint=True, logs_refine=True, kind="signal"),
    StateRow("exited", "any other ExitCode != 0", _ANY, "ERROR", None,
             "no known pattern", LOGS_ADVICE,
             {"Status": "exited", "ExitCode": 2}, hint=True, logs_refine=True, kind="exit"),
    # terminal: moby container/state.go - a dead container never runs again (only removal is left);
    # its results dir is a bind mount on the instance, which the failed removal did not touch
    StateRow("dead", "any (docker could not remove it)", _ANY, "ERROR", "ERR_INFRA",
             "docker marked the container dead (its removal failed); it will never run again",
             "its results dir on the instance is intact: teardown.py JOB_ID collects them (upload, or copy "
             "home) and removes the container (docker rm -f); if that fails too, stop and start the instance "
             f"(the storage driver holds it); resubmit: {RESUME}",
             {"Status": "dead", "ExitCode": 137, "Dead": True}, hint=True),
    StateRow("*", "a status docker does not document", _ANY, "UNKNOWN", None, "", "",
             {"Status": "frozen"}),
)

DOCKER_STATUSES = ("created", "restarting", "running", "paused", "removing", "exited", "dead")


def row_for(state: Optional[dict]) -> tuple[StateRow, Facts]:
    """The :data:`STATE_ROWS` row of a ``.State`` (None: no container), with the facts it read."""
    if not state:
        return STATE_ROWS[0], Facts("none", None, False, "")
    code = state.get("ExitCode")
    facts = Facts(str(state.get("Status", "")).lower(), code if isinstance(code, int) else None,
                  bool(state.get("OOMKilled")), str(state.get("Error") or "").strip())
    status = facts.status if facts.status in DOCKER_STATUSES else "*"
    return next(row for row in STATE_ROWS if row.status == status and row.match(facts)), facts


@dataclass(frozen=True)
class LogPattern:
    err_class: str
    pattern: re.Pattern
    reason: str
    advice: str
    example: str     # a real message it must match (documented, and tested)
    detail: Optional[re.Pattern] = None   # its group 1 in the logs is added to the reason (e.g. the spec key)


# Runs only while the module is imported (it builds LOG_PATTERNS), before mutmut's workers
# fork: none of its mutants could ever be active, so dev/mutation.py does not make them.
# Its defaults (advice by class, case-insensitive) are tested through classify_logs.
def _p(err_class: str, regex: str, reason: str, example: str, advice: Optional[str] = None,
       flags: int = re.I, detail: Optional[str] = None) -> LogPattern:  # pragma: no mutate block
    default = INFRA_ADVICE if err_class == "ERR_INFRA" else PROGRAM_ADVICE
    return LogPattern(err_class, re.compile(regex, flags), reason, advice or default, example,
                      re.compile(detail) if detail else None)


# Log patterns. They must match the real messages (NVIDIA driver Xid lines,
# CUDA/NCCL/PyTorch errors) and not ordinary training output such as
# "loss: nan", "xid" in a file name or "ECCV" in a dataset name.
# Infrastructure patterns win over program ones (an Xid often ends in a traceback too).
LOG_PATTERNS: tuple[LogPattern, ...] = (
    _p("ERR_INFRA", r"NVRM: Xid|\bXid \(PCI:", "NVIDIA driver Xid error (GPU fault)",
       "NVRM: Xid (PCI:0000:00:04): 79, pid=1234, GPU has fallen off the bus.", GPU_RESET_ADVICE, flags=0),
    _p("ERR_INFRA", r"fallen off the bus|\bGPU is lost\b", "GPU has fallen off the bus",
       "RuntimeError: CUDA error: GPU has fallen off the bus", GPU_RESET_ADVICE),
    _p("ERR_INFRA", r"uncorrectable ECC|\bECC error", "GPU ECC error",
       "RuntimeError: CUDA error: uncorrectable ECC error encountered", GPU_RESET_ADVICE),
    _p("ERR_INFRA", r"Failed to initialize NVML: Unknown Error|CUDA error: unknown error",
       "the container lost its GPUs (NVML/CUDA: unknown error) while the job ran",
       "RuntimeError: CUDA error: unknown error", GPU_ACCESS_ADVICE),
    _p("ERR_INFRA", r"nvml error: driver not loaded|couldn't communicate with the NVIDIA driver",
       "the NVIDIA driver is not loaded on the instance",
       "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", DRIVER_ADVICE),
    _p("ERR_INFRA", r"CUDA driver version is insufficient|driver version is insufficient",
       "NVIDIA driver too old for the container's CUDA",
       "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
       "use an instance whose NVIDIA driver supports the image's CUDA version"),
    _p("ERR_INFRA", r"No CUDA GPUs are available|CUDA-capable device\(s\) is/are busy or unavailable",
       "no usable GPU in the container", "RuntimeError: No CUDA GPUs are available",
       f"check the instance's GPUs with preflight.py, then resubmit: {RESUME}"),
    _p("ERR_INFRA", r"NCCL (WARN|error).*(transport|socket|timeout|unhandled system error)",
       "NCCL transport fault", "NCCL WARN NET/Socket : socket timeout, unhandled system error"),
    # A full disk: the OS says ENOSPC, but PyTorch's checkpoint writer (caffe2
    # serialize/inline_container.cc) reports only "file write failed" or
    # "unexpected pos N vs M" when a write came up short.
    _p("ERR_INFRA", r"No space left on device|\[Errno 28\]|\bENOSPC\b|Disk quota exceeded|"
       r"PytorchStreamWriter failed writing|inline_container\.cc.*unexpected pos|unexpected pos \d+ vs \d+",
       "instance disk full",
       "RuntimeError: [enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file "
       "data/17: file write failed", DISK_ADVICE),
    # hydra-core 1.3.2 config_loader_impl.py:478 ("Error merging '<spec>' with schema") and :393 ("Could not
    # override"), with omegaconf's cause ("Key 'X' not in 'Y'" and its "full_key: a.b.X" line)
    _p("ERR_PROGRAM", r"Error merging '[^']*' with schema|Error merging override |Could not override '|"
       r"Key '[^']+' not in '[^']+'", "the spec does not merge with TAO's schema",
       "omegaconf.errors.ConfigKeyError: Key 'betas' not in 'CNOptimConfig'",
       "fix the spec: the key named is not in TAO's schema for this network and image version (or its value "
       "has the wrong type); submit.py checks specs before launch unless --no-spec-check, so resubmit with the "
       "spec fixed", detail=r"full_key: (\S+)|Key '([^']+)' not in|Could not override '([^']+)'"),
    # lightning fabric utilities/device_parser.py _sanitize_gpu_ids; torch's message when a rank's
    # device does not exist (the torchrun networks: tao-pytorch core/entrypoint.py:24-27)
    _p("ERR_PROGRAM", r"You requested gpu: |But your machine only has: |CUDA error: invalid device ordinal",
       "num_gpus / gpu_ids ask for more GPUs than the container sees",
       "lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1]",
       "the spec's (or an override's) num_gpus / gpu_ids name more GPUs than --gpus handed the container: "
       "resubmit without them (submit.py sets them from --gpus) or with --gpus naming that many GPUs"),
    _p("ERR_PROGRAM", r"CUDA out of memory|OutOfMemoryError", "CUDA out of memory",
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
       "reduce the batch size or the input size, or use a GPU with more memory"),
    _p("ERR_PROGRAM", r"device-side assert", "CUDA device-side assert",
       "RuntimeError: CUDA error: device-side assert triggered",
       "check the labels/classes in the data against the spec (an index out of range)"),
    _p("ERR_PROGRAM", r"DataLoader worker .* (Bus error|killed by signal)|\bBus error\b",
       "data loader ran out of shared memory", "RuntimeError: DataLoader worker (pid 77) is killed by signal: "
       "Bus error.", "raise --shm-size (e.g. 32g) or lower num_workers"),
    # an NGC entrypoint wrapper's `exec "$@"` (exit 127), or docker's own start error
    _p("ERR_PROGRAM", r"exec: .*: not found|executable file not found in \$PATH",
       "the command is not in the image", "/opt/nvidia/nvidia_entrypoint.sh: line 67: exec: visual_changenet_v9: "
       "not found", "check --network-arch/--action against the TAO image (each network arch is an executable in "
       "it) and the image tag"),
    _p("ERR_PROGRAM", r"FileNotFoundError|No such file or directory", "missing file",
       "FileNotFoundError: [Errno 2] No such file or directory: '/data/x'",
       "check the dataset paths in the spec against the mounts (/data/NAME)"),
    _p("ERR_PROGRAM", r"^Traceback \(most recent call last\)", "Python traceback",
       "Traceback (most recent call last):", flags=re.M),
)

OOM_HINT_REASON = "out of memory (OOM)"
STOP_EXIT_CODES = (137, 143, 255)   # SIGKILL, SIGTERM, daemon restart: how a VM stop ends a container
MAX_EVIDENCE = 5
EVIDENCE_CHARS = 400


@dataclass
class JobState:
    """One job's state read from the backend."""

    state: str
    message: str
    docker_status: Optional[str] = None
    exit_code: Optional[int] = None
    oom_killed: bool = False
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    docker_error: Optional[str] = None   # docker's State.Error (a failed start)
    hint: Optional[dict] = field(default=None)
    gone: Optional[str] = None   # a fact, set where it was learnt: "container" (docker: no such
    #                              container) or "instance" (brev ls: deleted / not RUNNING)

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def from_inspect(state: Optional[dict], logs: Optional[str] = None) -> JobState:
    """Map ``docker inspect --format '{{json .State}}'`` (None: no container) by :data:`STATE_ROWS`.

    ``logs``: the last log lines of an exited container, when read; a known
    pattern in them refines the hint of rows that allow it (``logs_refine``),
    and adds evidence to the others. Every ERROR carries a hint.
    """
    row, facts = row_for(state)
    if state is None or not state:
        return JobState("UNKNOWN", "no such container on the instance (removed, or never launched)",
                        gone="container")
    common = dict(docker_status=facts.status or None, exit_code=facts.exit_code, oom_killed=facts.oom_killed,
                  started_at=_ts(state.get("StartedAt")), finished_at=_ts(state.get("FinishedAt")),
                  docker_error=facts.error or None)
    message = _message(row, facts)
    hint = _hint(row, facts, logs) if row.hint else None   # every ERROR row has one
    return JobState(row.state, message, hint=hint, **common)


def _message(row: StateRow, f: Facts) -> str:
    code = f.exit_code
    if row.status == "*":
        return f"docker status {f.status or '?'}; confirm with docker ps -a"
    base = f"docker status {f.status}"
    if row.state == "COMPLETE":
        text = f"{base}, exit code 0"
        return text + ("; note: OOMKilled is true (a process inside was OOM-killed), the job still exited 0"
                       if f.oom_killed else "")
    if row.status == "created" and row.state == "ERROR":
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


def _hint(row: StateRow, f: Facts, logs: Optional[str]) -> dict:
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
            from .errors import CODES

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


def _cut(line: str) -> str:
    """A log line for ``evidence``: redacted, THEN cut to EVIDENCE_CHARS (a cut never leaves part of a value)."""
    from .logcap import cut_redacted

    return cut_redacted(line, EVIDENCE_CHARS)


def _short(text: str) -> str:
    from .logcap import redacted

    text = " ".join(redacted(text or "").split())   # redacted before the cut
    return text if len(text) <= EVIDENCE_CHARS else text[:EVIDENCE_CHARS - 3] + "..."


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
              "advice": f"resubmit: {RESUME} (checkpoints on the instance disk survive a stop); if nothing else "
                        f"needs {instance}, stop it again (brev stop {instance}) or delete it with teardown.py",
              "evidence": [f"ExitCode={observed.exit_code}", f"OOMKilled={str(observed.oom_killed).lower()}",
                           f"brev: instance {instance} is starting"]})


def classify_logs(log_text: str, max_evidence: int = MAX_EVIDENCE) -> Optional[dict]:
    """A failure hint ``{"err_class", "reason", "advice", "evidence": [lines]}``
    from the logs, or None. Infrastructure patterns win over program patterns."""
    lines = log_text.splitlines()
    for wanted in ("ERR_INFRA", "ERR_PROGRAM"):
        for item in LOG_PATTERNS:
            if item.err_class != wanted:
                continue
            evidence = [_cut(ln.strip()) for ln in lines if item.pattern.search(ln)]
            if evidence:
                return {"err_class": item.err_class, "reason": _detailed(item, lines), "advice": item.advice,
                        "evidence": evidence[:max_evidence]}
    return None


def _detailed(item: LogPattern, lines: list) -> str:
    """The pattern's reason with the ``detail`` the logs give (``reason: 'train.optim.betas'``): group 1
    (the whole key path) wherever it is, else the first group of the first match."""
    found = [m for m in (item.detail.search(line) for line in lines) if m] if item.detail is not None else []
    if not found:
        return item.reason
    full = [m.group(1) for m in found if m.group(1)]   # group 1: the whole key path, when the logs give it
    return f"{item.reason}: '{full[0] if full else next(g for g in found[0].groups() if g)}'"


def _ts(value) -> Optional[str]:
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
    # After an Xid (e.g. 79, fallen off the bus) NVML reports the GPU lost / an unknown error and the
    # runtime hook refuses every new container; a driver upgraded under a running kernel module says
    # "driver/library version mismatch". Only a reset (stop/start of the VM) helps, not the toolkit.
    # The driver's kernel module is not loaded (nvidia-container-cli's "nvml error: driver not loaded";
    # nvidia-smi's "couldn't communicate with the NVIDIA driver"): a reboot or another instance, not the toolkit.
    (re.compile(r"nvml error: driver not loaded|couldn't communicate with the NVIDIA driver", re.I),
     "GPU_DRIVER_NOT_LOADED"),
    # Inside a container whose device cgroup a host `systemctl daemon-reload` reset (nvidia-container-toolkit
    # #48): the GPU is fine, this container lost it; a new container gets it again.
    (re.compile(r"Failed to initialize NVML: Unknown Error|CUDA error: unknown error", re.I), "GPU_ACCESS_LOST"),
    (re.compile(r"nvml error: (gpu is lost|unknown error)|GPU is lost|fallen off the bus|\bXid\b|"
                r"driver/library version mismatch", re.I), "GPU_UNHEALTHY"),
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


def _example_cell(example: Optional[dict]) -> str:
    return "none" if example is None else f"`{_cell(json.dumps(example, separators=(',', ':')))}`"


def markdown() -> str:
    """The generated part of ``references/failure-classes.md``."""
    out = ["### Docker state -> status (first matching row of a status wins)", "",
           "| `.State.Status` | ExitCode / OOMKilled / Error | state | hint class | reason | advice | example `.State` |",
           "|---|---|---|---|---|---|---|"]
    for row in STATE_ROWS:
        klass = (row.err_class or "null") if row.hint else "-"
        if row.logs_refine:
            klass += " (a log pattern wins)"
        out.append(f"| {row.status} | {_cell(row.when)} | {row.state} | {klass} | {_cell(row.reason) or '-'} | "
                   f"{_cell(row.advice) or '-'} | {_example_cell(row.example)} |")
    out += ["", "### Log patterns -> failure class (first class wins: ERR_INFRA before ERR_PROGRAM)", "",
            "| class | pattern (regex) | reason | advice | example evidence line |", "|---|---|---|---|---|"]
    out += [f"| {p.err_class} | `{_cell(p.pattern.pattern)}` | {_cell(p.reason)} | {_cell(p.advice)} | "
            f"`{_cell(p.example)}` |" for p in LOG_PATTERNS]
    out += ["", "### Docker error messages -> error code (first match wins)", "",
            "| pattern (regex, case-insensitive) | code |", "|---|---|"]
    out += [f"| `{_cell(pattern.pattern)}` | `{code}` |" for pattern, code in DOCKER_ERRORS]
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # python -m tao_brev.docker_state --markdown
    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m tao_brev.docker_state --markdown")
    sys.stdout.write(markdown())
