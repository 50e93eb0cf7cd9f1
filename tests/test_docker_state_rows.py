"""docker_state's behaviour, decided from docker's facts alone (no document read here):
every row of the state table, every alternative of every failure pattern, the OOM hint
whatever the exit code, StartedAt/FinishedAt and docker's zero time, the messages, what a
VM stop does, and the registry refusals. (test_docker_state.py checks the document
against the table.) Facts: moby container/state.go, daemon/start.go; the log lines are
real driver / CUDA / NCCL / PyTorch messages."""

import pytest

from conftest import validate_hint
from tao_brev import docker_state
from tao_brev.docker_state import (KILL_ADVICE, LOGS_ADVICE, after_instance_start, classify_logs,
                                   docker_error_code, from_inspect, registry_error_code)
from tao_brev.errors import CODES


def state(status, code=None, oom=False, error="", **more):
    out = {"Status": status, "OOMKilled": oom, "Error": error, **more}
    if code is not None:
        out["ExitCode"] = code
    return out


def klass(observed):
    return "-" if observed.hint is None else observed.hint["err_class"]


# (docker .State, the answer's state, the hint's class ("-" = no hint), a word of its reason)
ROWS = [
    (state("created", 128, error='could not select device driver "" with capabilities: [[gpu]]'),
     "ERROR", "ERR_INFRA", "failed launch"),
    (state("created", 128), "ERROR", "ERR_INFRA", "failed launch"),                 # ExitCode alone
    (state("created", 0, error="oci runtime error"), "ERROR", "ERR_INFRA", "failed launch"),   # Error alone
    (state("created", 0), "PENDING", "-", None),
    (state("created"), "PENDING", "-", None),
    (state("restarting", 1), "PENDING", "-", None),
    (state("running", 0), "RUNNING", "-", None),
    (state("paused", 0), "RUNNING", "-", None),
    (state("removing", 137), "UNKNOWN", "-", None),
    (state("exited", 0), "COMPLETE", "-", None),
    (state("exited", 0, oom=True), "COMPLETE", "-", None),
    (state("exited", 128, error="error gathering device information"), "ERROR", "ERR_INFRA", "start the container again"),
    (state("exited", 0, error="a later start failed"), "ERROR", "ERR_INFRA", "start the container again"),
    (state("exited", 137, oom=True), "ERROR", "ERR_PROGRAM", "out of memory"),
    (state("exited", 1, oom=True), "ERROR", "ERR_PROGRAM", "out of memory"),
    (state("exited", 139, oom=True), "ERROR", "ERR_PROGRAM", "out of memory"),
    (state("exited", 137, oom=True, error="and an error"), "ERROR", "ERR_PROGRAM", "out of memory"),
    (state("exited", 137), "ERROR", None, "SIGKILL"),
    (state("exited", 143), "ERROR", None, "SIGTERM"),
    (state("exited", 126), "ERROR", "ERR_PROGRAM", "missing or not executable"),
    (state("exited", 127), "ERROR", "ERR_PROGRAM", "missing or not executable"),
    (state("exited", 129), "ERROR", None, "SIGHUP"),
    (state("exited", 134), "ERROR", None, "SIGABRT"),
    (state("exited", 139), "ERROR", None, "SIGSEGV"),
    (state("exited", 159), "ERROR", None, "signal 31"),
    (state("exited", 128), "ERROR", None, "exit 128, no known pattern"),
    (state("exited", 160), "ERROR", None, "exit 160, no known pattern"),
    (state("exited", 1), "ERROR", None, "exit 1, no known pattern"),
    (state("exited", 255), "ERROR", None, "exit 255, no known pattern"),
    (state("dead", 137), "ERROR", "ERR_INFRA", "dead"),   # terminal: it never runs again
    (state("frozen", 0), "UNKNOWN", "-", None),
    (state("", 0), "UNKNOWN", "-", None),
]


@pytest.mark.parametrize("inspect, expected_state, expected_class, reason", ROWS,
                         ids=[f"{r[0]['Status']}-{r[0].get('ExitCode')}-{r[0]['OOMKilled']}-{bool(r[0]['Error'])}"
                              for r in ROWS])
def test_each_state_row(inspect, expected_state, expected_class, reason):
    observed = from_inspect(inspect)
    assert (observed.state, klass(observed)) == (expected_state, expected_class)
    if reason is not None:
        assert reason in observed.hint["reason"]
        assert f"ExitCode={inspect.get('ExitCode')}" in observed.hint["evidence"]
        assert f"OOMKilled={str(inspect['OOMKilled']).lower()}" in observed.hint["evidence"]
        validate_hint(observed.hint)
    assert observed.docker_status == (inspect["Status"] or None)
    assert observed.oom_killed is inspect["OOMKilled"] and observed.gone is None


def test_no_container_is_unknown_and_gone():
    for inspect in (None, {}):
        observed = from_inspect(inspect)
        assert (observed.state, observed.gone, observed.hint) == ("UNKNOWN", "container", None)
        assert "no such container" in observed.message
        assert observed.to_json() == {"state": "UNKNOWN", "message": observed.message, "oom_killed": False,
                                      "gone": "container"}


def test_docker_status_is_read_case_insensitively_and_odd_exit_codes_are_no_code():
    observed = from_inspect({"Status": "EXITED", "ExitCode": 0})
    assert (observed.state, observed.docker_status) == ("COMPLETE", "exited")
    odd = from_inspect({"Status": "exited", "ExitCode": "1"})
    assert odd.exit_code is None and odd.state == "COMPLETE"   # no integer code: read as 0


def test_an_oom_kill_gets_the_oom_advice_whatever_the_exit_code():
    for code in (1, 137, 139, 2):
        observed = from_inspect(state("exited", code, oom=True))
        assert observed.hint["err_class"] == "ERR_PROGRAM" and "OOMKilled true" in observed.hint["reason"]
        assert "batch size" in observed.hint["advice"]
        assert observed.message == f"docker status exited, exit code {code}: OOMKilled; out of memory"


def test_sigkill_without_oom_names_both_causes():
    observed = from_inspect(state("exited", 137))
    assert observed.hint["advice"] == KILL_ADVICE and "OOMKilled false" in observed.message
    assert observed.message == ("docker status exited, exit code 137 (SIGKILL, OOMKilled false): an external kill "
                                "or the host's OOM killer")


def test_started_and_finished_times_and_dockers_zero_time():
    observed = from_inspect(state("exited", 0, StartedAt="2026-11-30T10:00:00.123456789Z",
                                  FinishedAt="2026-11-30T11:30:00Z"))
    assert (observed.started_at, observed.finished_at) == ("2026-11-30T10:00:00.123456789Z", "2026-11-30T11:30:00Z")
    running = from_inspect(state("running", 0, StartedAt="2026-11-30T10:00:00Z", FinishedAt="0001-01-01T00:00:00Z"))
    assert (running.started_at, running.finished_at) == ("2026-11-30T10:00:00Z", None)
    created = from_inspect(state("created", 0, StartedAt="0001-01-01T00:00:00Z", FinishedAt=""))
    assert (created.started_at, created.finished_at) == (None, None)
    assert "started_at" not in created.to_json() and "finished_at" not in created.to_json()
    assert running.to_json()["started_at"] == "2026-11-30T10:00:00Z"


@pytest.mark.parametrize("inspect, message", [
    (state("created", 0), "docker status created: not started yet"),
    (state("created", 128, error="  no\n  gpu  "), "docker status created, exit code 128: docker could not start the "
                                                   "container (failed launch): no gpu"),
    (state("restarting", 3), "docker status restarting (last exit code 3)"),
    (state("paused", 0), "docker status paused: the job makes no progress until `docker unpause`"),
    (state("removing", 137), "docker status removing (exit code 137): container being removed (docker rm); "
                             "confirm with docker ps -a"),
    (state("dead", 1), "docker status dead (exit code 1): docker marked the container dead (its removal failed); it "
                       "will never run again; confirm with docker ps -a"),
    (state("running", 0), "docker status running"),
    (state("exited", 0), "docker status exited, exit code 0"),
    (state("exited", 0, oom=True), "docker status exited, exit code 0; note: OOMKilled is true (a process inside was "
                                   "OOM-killed), the job still exited 0"),
    (state("exited", 128, error="start failed"), "docker status exited, exit code 128: start failed"),
    (state("exited", 139), "docker status exited, exit code 139 (SIGSEGV)"),
    (state("exited", 129), "docker status exited, exit code 129 (SIGHUP)"),
    (state("exited", 159), "docker status exited, exit code 159 (signal 31)"),
    (state("exited", 160), "docker status exited, exit code 160"),
    (state("exited", 128), "docker status exited, exit code 128"),
    (state("exited", 2), "docker status exited, exit code 2"),
    (state("frozen", 0), "docker status frozen; confirm with docker ps -a"),
    (state("", 0), "docker status ?; confirm with docker ps -a"),
])
def test_messages(inspect, message):
    assert from_inspect(inspect).message == message


def test_a_long_error_is_shortened_in_the_message_and_evidence():
    observed = from_inspect(state("created", 128, error="x" * 1000))
    assert observed.message.endswith("x" * (docker_state.EVIDENCE_CHARS - 3) + "...")
    assert observed.hint["evidence"][0] == "State.Error=" + "x" * (docker_state.EVIDENCE_CHARS - 3) + "..."
    assert observed.docker_error == "x" * 1000


def test_a_failed_start_names_the_docker_error_code_and_its_fix():
    observed = from_inspect(state("created", 128, error='could not select device driver "" with capabilities: [[gpu]]'))
    assert observed.hint["reason"].endswith("(NVIDIA_RUNTIME_MISSING)")
    assert observed.hint["advice"] == CODES["NVIDIA_RUNTIME_MISSING"].fix
    assert observed.hint["evidence"][0].startswith("State.Error=could not select device driver")


def test_a_failed_start_of_a_missing_command_is_a_program_error():
    error = 'exec: "visual_changenet_v9": executable file not found in $PATH'
    observed = from_inspect(state("created", 127, error=error))
    assert observed.hint["err_class"] == "ERR_PROGRAM" and observed.hint["reason"] == "the command is not in the image"
    assert observed.hint["evidence"] == [f"State.Error={error}", "ExitCode=127", "OOMKilled=false"]


def test_a_failed_start_with_an_unknown_error_keeps_the_rows_hint():
    observed = from_inspect(state("created", 128, error="something new"))
    assert observed.hint["reason"] == "failed launch: docker created the container but could not start it"
    assert observed.hint["err_class"] == "ERR_INFRA"


def test_logs_refine_the_rows_that_allow_it_and_add_evidence_to_the_others():
    logs = "epoch 1\nRuntimeError: CUDA error: device-side assert triggered\n"
    refined = from_inspect(state("exited", 1), logs)
    assert refined.hint["reason"] == "CUDA device-side assert" and refined.hint["err_class"] == "ERR_PROGRAM"
    assert refined.hint["evidence"][0] == "RuntimeError: CUDA error: device-side assert triggered"
    assert "ExitCode=1" in refined.hint["evidence"]
    for code in (126, 139):
        assert from_inspect(state("exited", code), logs).hint["reason"] == "CUDA device-side assert"
    kept = from_inspect(state("exited", 137), logs)   # not refined: the kill is the cause
    assert kept.hint["reason"].startswith("killed by SIGKILL") and kept.hint["advice"].startswith(KILL_ADVICE)
    assert kept.hint["advice"].endswith("; the log also shows CUDA device-side assert: check the labels/classes "
                                        "in the data against the spec (an index out of range)")   # both causes
    assert kept.hint["evidence"] == ["ExitCode=137", "OOMKilled=false",
                                     "RuntimeError: CUDA error: device-side assert triggered"]
    oom = from_inspect(state("exited", 1, oom=True), logs)
    assert oom.hint["err_class"] == "ERR_PROGRAM" and oom.hint["reason"].startswith("out of memory")


def test_without_a_pattern_the_last_log_lines_are_evidence():
    logs = "a\n\nb\nc\n  d  \n"
    for code in (2, 139):
        hint = from_inspect(state("exited", code), logs).hint
        assert hint["evidence"] == [f"ExitCode={code}", "OOMKilled=false", "b", "c", "d"]
        assert hint["advice"] == LOGS_ADVICE
    hint = from_inspect(state("exited", 143), logs).hint   # not a signal/exit row: no log lines
    assert hint["evidence"] == ["ExitCode=143", "OOMKilled=false"]


def test_evidence_is_bounded():
    logs = "\n".join(f"RuntimeError: CUDA error: device-side assert triggered #{i}" for i in range(50))
    hint = from_inspect(state("exited", 1), logs).hint
    assert len(hint["evidence"]) == docker_state.MAX_EVIDENCE + 2
    assert len(classify_logs(logs)["evidence"]) == docker_state.MAX_EVIDENCE
    assert len(classify_logs(logs, max_evidence=2)["evidence"]) == 2
    long_line = "Traceback (most recent call last):" + "y" * 1000
    assert len(classify_logs(long_line)["evidence"][0]) == docker_state.EVIDENCE_CHARS


# -- every alternative of every log pattern ------------------------------------------
SHM_REASON = "the container's shared memory (/dev/shm) ran out in the DataLoader workers"
PATTERN_LINES = [
    ("NVRM: Xid (PCI:0000:00:04): 79, pid=1234, GPU has fallen off the bus.", "NVIDIA driver Xid error (GPU fault)"),
    ("[ 812.3] Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error", "NVIDIA driver Xid error (GPU fault)"),
    ("RuntimeError: CUDA error: GPU has fallen off the bus", "GPU has fallen off the bus"),
    ("nvml: GPU is lost", "GPU has fallen off the bus"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "GPU ECC error"),
    ("Double Bit ECC error detected on GPU 0", "GPU ECC error"),
    ("CUDA driver version is insufficient for CUDA runtime version", "NVIDIA driver too old for the container's CUDA"),
    ("the NVIDIA driver version is insufficient", "NVIDIA driver too old for the container's CUDA"),
    ("RuntimeError: No CUDA GPUs are available", "no usable GPU in the container"),
    ("all CUDA-capable device(s) is/are busy or unavailable", "no usable GPU in the container"),
    ("NCCL WARN NET/IB : transport retry counter exceeded", "NCCL transport fault"),
    ("NCCL error: socket closed", "NCCL transport fault"),
    ("NCCL WARN Call to connect timeout", "NCCL transport fault"),
    ("NCCL error in: unhandled system error", "NCCL transport fault"),
    ("OSError: No space left on device", "instance disk full"),
    ("OSError: [Errno 28] writing checkpoint", "instance disk full"),
    ("write failed: ENOSPC", "instance disk full"),
    ("OSError: Disk quota exceeded", "instance disk full"),
    ("RuntimeError: PytorchStreamWriter failed writing file data/17", "instance disk full"),
    ("[enforce fail at inline_container.cc:445] . unexpected pos 640 vs 512", "instance disk full"),
    ("writer: unexpected pos 1234 vs 5678", "instance disk full"),
    ("torch.OutOfMemoryError: Tried to allocate 2.00 GiB", "CUDA out of memory"),
    ("RuntimeError: CUDA out of memory. Tried to allocate", "CUDA out of memory"),
    ("RuntimeError: CUDA error: device-side assert triggered", "CUDA device-side assert"),
    ("RuntimeError: DataLoader worker (pid 77) is killed by signal: Segmentation fault.",
     "a DataLoader worker died (killed by a signal other than SIGBUS: most often the host's RAM)"),
    ("ERROR: Unexpected Bus error encountered in worker", SHM_REASON),
    ("RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error.", SHM_REASON),
    ("RuntimeError: unable to write to file </torch_3_2045_0>: No space left on device (28)", SHM_REASON),
    ("/opt/nvidia/nvidia_entrypoint.sh: line 67: exec: visual_changenet_v9: not found", "the command is not in the image"),
    ('exec: "dino": executable file not found in $PATH', "the command is not in the image"),
    ("FileNotFoundError: '/data/x'", "missing file"),
    ("cannot open /data/x: No such file or directory", "missing file"),
    ("Traceback (most recent call last):", "Python traceback"),
]


@pytest.mark.parametrize("line, reason", PATTERN_LINES, ids=[p[0][:50] for p in PATTERN_LINES])
def test_every_alternative_of_every_log_pattern(line, reason):
    hint = classify_logs(f"epoch 3/10 loss 0.2\n{line}\nsaving")
    assert hint is not None and hint["reason"] == reason and hint["evidence"] == [line]


@pytest.mark.parametrize("line", [
    "loss: nan", "reading xid_list.txt", "ECCV2024 dataset", "nvrm: xid lowercase", "GPU is lostfound",
    "NCCL INFO socket ready", "OutOfMemory handler installed", "bus errors: 0", "  Traceback (most recent call last):",
    "exec: done", "unexpected pos", "Errno 2",
])
def test_ordinary_output_matches_no_pattern(line):
    assert classify_logs(f"epoch 1\n{line}\n") is None


def test_infrastructure_wins_over_a_program_pattern_in_any_order():
    for logs in ("Traceback (most recent call last):\nNVRM: Xid (PCI:0000:00:04): 79",
                 "NVRM: Xid (PCI:0000:00:04): 79\nTraceback (most recent call last):"):
        assert classify_logs(logs)["reason"] == "NVIDIA driver Xid error (GPU fault)"
    assert classify_logs("") is None


# -- docker's own messages -> error codes ---------------------------------------------
DOCKER_LINES = [
    ("bash: docker: command not found", "DOCKER_NOT_FOUND"),
    ("sh: 1: docker: not found", "DOCKER_NOT_FOUND"),
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.", "DOCKER_DAEMON_DOWN"),
    ("Is the docker daemon running?", "DOCKER_DAEMON_DOWN"),
    ("nvidia-container-cli: device error: 3: unknown device: unknown", "GPU_IDS_UNKNOWN"),
    ("nvidia-container-cli: initialization error: nvml error: gpu is lost", "GPU_UNHEALTHY"),
    ("nvml error: unknown error", "GPU_UNHEALTHY"),
    ("the GPU is lost", "GPU_UNHEALTHY"),
    ("GPU has fallen off the bus", "GPU_UNHEALTHY"),
    ("NVRM: Xid 79", "GPU_UNHEALTHY"),
    ("Failed to initialize NVML: Unknown Error", "GPU_ACCESS_LOST"),
    ("RuntimeError: CUDA error: unknown error", "GPU_ACCESS_LOST"),
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown", "GPU_DRIVER_NOT_LOADED"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "GPU_DRIVER_NOT_LOADED"),
    ("Failed to initialize NVML: Driver/library version mismatch", "GPU_UNHEALTHY"),
    ('could not select device driver "" with capabilities: [[gpu]]', "NVIDIA_RUNTIME_MISSING"),
    ("nvidia-container-cli: mount error: file creation failed", "NVIDIA_RUNTIME_MISSING"),
    ("unknown or invalid runtime name: nvidia", "NVIDIA_RUNTIME_MISSING"),
    ("write /var/lib/docker/tmp/x: no space left on device", "DISK_FULL"),
    ("dial tcp: lookup nvcr.io on 127.0.0.53:53: no such host", "REGISTRY_UNREACHABLE"),
    ("dial tcp: lookup nvcr.io: server misbehaving", "REGISTRY_UNREACHABLE"),
    ("dial tcp: lookup nvcr.io on 10.0.0.2:53: read udp: i/o timeout", "REGISTRY_UNREACHABLE"),
    ("dial tcp 1.2.3.4:443: i/o timeout", "REGISTRY_UNREACHABLE"),
    ("dial tcp 1.2.3.4:443: connect: connection refused", "REGISTRY_UNREACHABLE"),
    ("dial tcp 1.2.3.4:443: connect: network is unreachable", "REGISTRY_UNREACHABLE"),
    ("dial tcp 1.2.3.4:443: connect: no route to host", "REGISTRY_UNREACHABLE"),
    ("net/http: TLS handshake timeout", "REGISTRY_UNREACHABLE"),
    ("net/http: request canceled while waiting for connection", "REGISTRY_UNREACHABLE"),
    ("(Client.Timeout exceeded while awaiting headers)", "REGISTRY_UNREACHABLE"),
    ("Error response from daemon: unauthorized: authentication required", "IMAGE_PULL_UNAUTHORIZED"),
    ("Error response from daemon: Get https://r/v2/: authentication required", "IMAGE_PULL_UNAUTHORIZED"),
    ('denied: {"errors": [{"code": "DENIED", "message": "Access Denied"}]}', "IMAGE_PULL_UNAUTHORIZED"),
    ('{"errors": [{"code":  "DENIED"}]}', "IMAGE_PULL_UNAUTHORIZED"),
    ("manifest unknown: manifest unknown", "IMAGE_NOT_FOUND"),
    ("Error: not found: manifest unknown", "IMAGE_NOT_FOUND"),
    ("no such manifest: nvcr.io/x:y", "IMAGE_NOT_FOUND"),
    ("pull access denied, repository does not exist", "IMAGE_NOT_FOUND"),
]


@pytest.mark.parametrize("line, code", DOCKER_LINES, ids=[d[0][:50] for d in DOCKER_LINES])
def test_every_alternative_of_every_docker_error(line, code):
    assert docker_error_code(line) == code


def test_an_unknown_docker_error_is_the_default():
    assert docker_error_code("something else") == "REMOTE_COMMAND_FAILED"
    assert docker_error_code("", default="") == "" and docker_error_code(None, default="X") == "X"


@pytest.mark.parametrize("text, registry, logged_in, code", [
    ("unauthorized: authentication required", "nvcr.io", False, "NGC_NOT_AUTHENTICATED"),
    ("unauthorized: authentication required", "nvcr.io", True, "NGC_NOT_ENTITLED"),
    ('denied: {"errors": [{"code": "DENIED"}]}', "nvcr.io", False, "NGC_NOT_ENTITLED"),
    ('{"code": "DENIED"}', "nvcr.io", False, "NGC_NOT_ENTITLED"),
    ("unauthorized: authentication required", "ghcr.io", True, "IMAGE_PULL_UNAUTHORIZED"),
    ("unauthorized: authentication required", None, False, "IMAGE_PULL_UNAUTHORIZED"),
    ("dial tcp: lookup nvcr.io: no such host", "nvcr.io", True, "REGISTRY_UNREACHABLE"),
    ("manifest unknown", "nvcr.io", True, "IMAGE_NOT_FOUND"),
    ("odd", "nvcr.io", True, "REMOTE_COMMAND_FAILED"),
])
def test_registry_refusals(text, registry, logged_in, code):
    assert registry_error_code(text, registry, logged_in=logged_in) == code
    assert registry_error_code("odd", "nvcr.io", default="X") == "X"


# -- an instance that brev started again -----------------------------------------------
@pytest.mark.parametrize("code", docker_state.STOP_EXIT_CODES)
def test_a_container_killed_by_the_vm_stop_is_an_infrastructure_error(code):
    observed = after_instance_start(from_inspect(state("exited", code)), "box")
    assert observed.state == "ERROR" and observed.hint["err_class"] == "ERR_INFRA"
    assert observed.hint["reason"] == "instance stopped while the job ran"
    assert observed.hint["evidence"] == [f"ExitCode={code}", "OOMKilled=false", "brev: instance box is starting"]
    assert "brev stop box" in observed.hint["advice"] and f"exit code {code}" in observed.message
    assert observed.message.startswith("instance box was STOPPED")


@pytest.mark.parametrize("inspect", [state("exited", 137, oom=True), state("exited", 1), state("running", 0),
                                     state("exited", 0)])
def test_any_other_state_only_gains_the_billing_note(inspect):
    before = from_inspect(inspect)
    after = after_instance_start(before, "box")
    assert after.state == before.state and after.hint == before.hint
    assert after.message == before.message + "; note: instance box was STOPPED; brev started it again to answer " \
                                              "this poll (it bills again)"


# -- the generated tables (what the document embeds) ------------------------------------
def test_markdown_has_one_line_per_row_pattern_and_error():
    text = docker_state.markdown()
    lines = text.splitlines()
    state_table = text.split("### Log patterns")[0].splitlines()
    assert [ln.split(" | ")[0][2:] for ln in state_table if ln.startswith("| ")][1:] == \
        [row.status for row in docker_state.STATE_ROWS]
    assert sum(ln.startswith("| ERR_") for ln in lines) == len(docker_state.LOG_PATTERNS)
    errors_table = text.split("### Docker error messages")[1].splitlines()
    assert sum(ln.startswith("| `") for ln in errors_table) == len(docker_state.DOCKER_ERRORS)
    assert "| none | no such container | UNKNOWN | - | - | - | none |" in lines
    assert any(ln.startswith("| exited | ExitCode 126 or 127 | ERROR | ERR_PROGRAM (a log pattern wins) |")
               for ln in lines)
    assert any(ln.startswith("| exited | ExitCode 137, OOMKilled false | ERROR | null |") for ln in lines)
    assert "| dead | any (docker could not remove it) | ERROR | ERR_INFRA |" in text
    assert '`{"Status":"exited","ExitCode":137,"OOMKilled":true}`' in text
    assert "\\|" in text and text.endswith("\n")   # table cells escape | (regex alternatives)
    assert "| `\\bdocker: (command )?not found` | `DOCKER_NOT_FOUND` |" in lines


def test_a_pattern_without_its_own_advice_gets_its_class_default_and_ignores_case():
    nccl = classify_logs("nccl warn NET/Socket : socket timeout")
    assert (nccl["err_class"], nccl["advice"]) == ("ERR_INFRA", docker_state.INFRA_ADVICE)
    traceback = classify_logs("Traceback (most recent call last):")
    assert (traceback["err_class"], traceback["advice"]) == ("ERR_PROGRAM", docker_state.PROGRAM_ADVICE)
    assert classify_logs("no space left on device")["advice"] == docker_state.DISK_ADVICE
    assert classify_logs("nvrm: xid (pci:0000:00:04): 79") is None   # the driver's own spelling only


def test_markdown_headings_and_escaped_cells():
    lines = docker_state.markdown().splitlines()
    assert lines[:4] == ["### Docker state -> status (first matching row of a status wins)", "",
                         "| `.State.Status` | ExitCode / OOMKilled / Error | state | hint class | reason | advice | "
                         "example `.State` |", "|---|---|---|---|---|---|---|"]
    i = lines.index("### Log patterns -> failure class (GPU faults first, then a row with its own code, then ERR_INFRA "
                    "before ERR_PROGRAM; a row with a context counts only when its context is in the log too)")
    assert lines[i - 1:i + 4] == ["", lines[i], "", "| class | pattern (regex) | reason | advice | example evidence line |",
                                  "|---|---|---|---|---|"]
    j = lines.index("### Docker error messages -> error code (first match wins)")
    assert lines[j - 1:j + 4] == ["", lines[j], "", "| pattern (regex, case-insensitive) | code |", "|---|---|"]
    assert lines[i + 4].startswith("| ERR_INFRA (first) | `NVRM: Xid\\|\\bXid \\(PCI:` | NVIDIA driver Xid error (GPU fault) |")
    assert any(line.startswith("| ERR_PROGRAM (code SHM_EXHAUSTED) | `insufficient shared memory") for line in lines)


def test_short_errors_are_kept_whole_up_to_the_limit_and_an_empty_one_stays_empty():
    exact = "e" * docker_state.EVIDENCE_CHARS
    assert from_inspect(state("created", 128, error=exact)).hint["evidence"][0] == f"State.Error={exact}"
    assert from_inspect(state("created", 128)).message.endswith("could not start the container (failed launch): ")


def test_a_vm_stop_message_in_full():
    observed = after_instance_start(from_inspect(state("exited", 143)), "box")
    assert observed.message == ("instance box was STOPPED; brev started it again to answer this poll (it bills "
                                "again). The stop killed the job's container (exit code 143); its work since the "
                                "last checkpoint is lost, files on the instance disk survive")


def test_an_nvcr_refusal_without_a_login_is_not_authenticated_by_default():
    assert registry_error_code("unauthorized: authentication required", "nvcr.io") == "NGC_NOT_AUTHENTICATED"


def test_the_facts_read_from_no_container_and_from_a_state_without_a_status():
    assert docker_state.row_for(None) == (docker_state.STATE_ROWS[0], docker_state.Facts("none", None, False, ""))
    row, facts = docker_state.row_for({"ExitCode": 0})
    assert (row.status, facts) == ("*", docker_state.Facts("", 0, False, ""))
    assert from_inspect(None).message == "no such container on the instance (removed, or never launched)"


def test_every_error_row_carries_a_hint_and_every_log_pattern_advice():
    assert [r.when for r in docker_state.STATE_ROWS if r.state == "ERROR" and not r.hint] == []
    assert [p.err_class for p in docker_state.LOG_PATTERNS if not p.advice or not p.reason] == []


# -- real TAO failures: the schema merge and more GPUs than the container sees ----------------------
TAO_MERGE_LOG = ("Error merging 'spec.yaml' with schema\nKey 'betas' not in 'CNOptimConfig'\n"
                 "    full_key: train.optim.betas\n    reference_type=CNOptimConfig\n"
                 "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.")


def test_a_schema_merge_error_names_the_whole_key_and_says_fix_the_spec():
    hint = classify_logs("Traceback (most recent call last):\n" + TAO_MERGE_LOG)
    assert hint["err_class"] == "ERR_PROGRAM"
    assert hint["reason"] == "the spec does not merge with TAO's schema: 'train.optim.betas'"
    assert hint["advice"].startswith("fix the spec") and "--no-spec-check" in hint["advice"]
    assert hint["evidence"] == ["Error merging 'spec.yaml' with schema", "Key 'betas' not in 'CNOptimConfig'"]


@pytest.mark.parametrize("log,key", [
    ("Key 'stray' not in 'ExperimentConfig'", "stray"),                       # no full_key line: the key
    ("Could not override 'train.num_epochz'.\nTo append to your config use +train.num_epochz=3",
     "train.num_epochz"),
    ("Error merging override train.num_epochs=abc", None),                    # no key in the logs
])
def test_each_schema_message_gives_the_key_it_has(log, key):
    hint = classify_logs(log)
    reason = "the spec does not merge with TAO's schema"
    assert hint["reason"] == (f"{reason}: '{key}'" if key else reason)


@pytest.mark.parametrize("line", ["lightning_fabric.utilities.exceptions.MisconfigurationException: You requested "
                                  "gpu: [0, 1, 2, 3, 4, 5, 6, 7]", " But your machine only has: [0]",
                                  "RuntimeError: CUDA error: invalid device ordinal"])
def test_more_gpus_than_the_container_sees_has_its_own_hint(line):
    hint = classify_logs(f"Traceback (most recent call last):\n{line}\n")
    assert hint["err_class"] == "ERR_PROGRAM" and hint["reason"] == ("num_gpus / gpu_ids ask for more GPUs than "
                                                                     "the container sees")
    assert "--gpus" in hint["advice"] and hint["evidence"] == [line.strip()]


def test_a_dead_container_is_a_terminal_infra_error_whose_results_are_still_collectable():
    observed = from_inspect(state("dead", 137))
    assert observed.state == "ERROR" and observed.hint["err_class"] == "ERR_INFRA"
    assert "never run again" in observed.message and "results dir on the instance is intact" in observed.hint["advice"]
    assert "teardown.py JOB_ID collects them" in observed.hint["advice"]
