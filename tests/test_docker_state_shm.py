"""Two failure kinds the logs must not confuse, and the reset advice brev may refuse.

* /dev/shm exhausted by PyTorch's DataLoader workers is SHM_EXHAUSTED, never "instance disk full"
  (ERR_INFRA, which a resubmit with the same settings would "fix"): PyTorch's own words,
  torch/csrc/DataLoader.cpp handler_SIGBUS ("ERROR: Unexpected bus error encountered in worker. This
  might be caused by insufficient shared memory (shm)."), _error_if_any_worker_fails / torch/utils/data/
  _utils/signal_handling.py ("DataLoader worker (pid N) is killed by signal: Bus error."), and ATen's
  MapAllocator ("unable to write to file </torch_...>: No space left on device (28)").
* brev-cli pkg/cmd/stop/stop.go (PR #416): `brev stop` of a type that cannot stop answers
  `instance "NAME" does not support stop.`: a reset names brev stop only for a type that can stop."""

from __future__ import annotations

import re

import pytest

from tao_brev import docker_state
from tao_brev.docker_state import classify_logs, from_inspect, gate_answer, gated

SHM_LINES = [
    "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible that dataloader's "
    "workers are out of shared memory. Please try to raise your shared memory limit.",
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
    "RuntimeError: unable to write to file </torch_77_1804289383_3>: No space left on device (28)",
    "RuntimeError: unable to open shared memory object </torch_12_99_0> in read-write mode: "
    "No space left on device (28)",
    "OSError: [Errno 28] No space left on device: '/dev/shm/torch_123_0'",
    "RuntimeError: DataLoader worker (pid(s) 311) is killed by signal: Bus error.",
]
DISK_LINES = [
    "OSError: [Errno 28] No space left on device: '/results/train/model_epoch_003.pth'",
    "write /var/lib/docker/overlay2/abc/diff/x: no space left on device",
    "RuntimeError: [enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file data/17",
]


@pytest.mark.parametrize("line", SHM_LINES)
def test_shm_exhaustion_has_its_own_code_and_a_larger_shm_size(line):
    for logs in (line, f"epoch 2\n{line}\nTraceback (most recent call last):\nOSError: No space left on device"):
        hint = classify_logs(logs)
        assert hint["code"] == "SHM_EXHAUSTED" and hint["err_class"] == "ERR_PROGRAM", hint
        assert "--shm-size" in hint["advice"] and "--resume-from" in hint["advice"]
        assert "disk" not in hint["reason"]


@pytest.mark.parametrize("line", DISK_LINES)
def test_a_real_full_disk_stays_the_disk(line):
    hint = classify_logs(line)
    assert hint["reason"] == "instance disk full" and hint["err_class"] == "ERR_INFRA" and "code" not in hint


def test_a_container_killed_by_sigbus_with_shm_lines_is_shm_exhausted():
    observed = from_inspect({"Status": "exited", "ExitCode": 135}, SHM_LINES[1])
    assert observed.state == "ERROR" and observed.hint["code"] == "SHM_EXHAUSTED"


def test_the_advice_names_the_exact_resubmit_with_a_larger_shm_size():
    """resume_advice.fill replaces `submit.py ... --resume-from JOB_ID` with the job's own command."""
    from tao_brev import resume_advice
    from tao_brev.model import JobSidecar

    hint = classify_logs(SHM_LINES[0])
    record, sidecar = {"id": "j1", "action": "train"}, JobSidecar(submit_argv=["--instance", "box", "--shm-size", "16g"])
    text = resume_advice.fill(hint["advice"], record, sidecar)
    assert "submit.py --instance box --shm-size 16g --resume-from j1 --shm-size 32g" in text


RESET_HINTS = [classify_logs("NVRM: Xid (PCI:0000:00:04): 79, pid=1234, GPU has fallen off the bus."),
               classify_logs("RuntimeError: CUDA error: uncorrectable ECC error encountered"),
               from_inspect({"Status": "dead", "ExitCode": 137, "Dead": True}).hint]


@pytest.mark.parametrize("hint", RESET_HINTS, ids=["xid", "ecc", "dead"])
def test_a_reset_names_brev_stop_only_for_a_type_that_can_stop(hint):
    answer = {"hint": hint, "observed": {"hint": hint}, "error": {"code": "X", "fix": hint["advice"]}}
    cannot = gate_answer(answer, False)
    for text in (cannot["hint"]["advice"], cannot["observed"]["hint"]["advice"], cannot["error"]["fix"]):
        assert "brev stop" not in text and "replace the instance" in text and "bills" in text
    can = gate_answer(answer, True)["hint"]["advice"]
    assert "brev stop INSTANCE, then brev start INSTANCE" in can and "does not support stop" not in can
    unknown = gate_answer(answer, None)["hint"]["advice"]
    assert "brev stop" in unknown and "does not support stop" in unknown and "replace" in unknown


def test_no_advice_text_names_brev_stop_without_its_condition():
    """Every static text naming `brev stop` carries the replace branch (a type that cannot stop)."""
    from tao_brev.errors import CODES

    texts = [r.advice for r in docker_state.STATE_ROWS] + [p.advice for p in docker_state.LOG_PATTERNS]
    texts += [CODES["GPU_UNHEALTHY"].fix]
    for text in texts:
        if "brev stop" in text:
            assert "does not support stop" in text, text
            assert "brev stop" not in gated(text, False) or "does not support stop" in text
    assert gated("plain text", False) == "plain text"


def _package_texts():
    """(module, text) of every string the package can say (f-strings with their fields as {}), docstrings out."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "tao_brev"
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef))
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                yield path.name, "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and id(node) not in parts):
                yield path.name, node.value


def test_no_text_of_the_package_names_brev_stop_without_its_condition():
    """A text that tells the user to run `brev stop` says it needs a type that can stop (brev-cli
    pkg/cmd/stop/stop.go refuses the others: `does not support stop`), or is gated (RESET_EITHER)."""
    bare = re.compile(r"^brev stop \{\}$")   # the command itself (transport's label, answers' joined command)
    said = [(name, text) for name, text in _package_texts() if "brev stop" in text and not bare.match(text)
            and text != docker_state.RESET_BY_STOP]   # the branch gated() picks for a type that can stop
    assert said, "the sweep found no text at all"
    ungated = [(name, text) for name, text in said if "can stop" not in text and "does not support stop" not in text]
    assert ungated == [], ungated


# /dev/shm out of space in its other spellings: CPython Lib/multiprocessing/heap.py Arena._make_fd (the arena
# in /dev/shm), NCCL src/misc/shmutils.cc ncclShmOpen, ATen MapAllocator.cpp (mmap of a </torch_...> segment)
SHM_VARIANTS = [
    'Traceback (most recent call last):\n  File "/usr/lib/python3.10/multiprocessing/heap.py", line 94, in _make_fd\n'
    "    os.ftruncate(fd, size)\nOSError: [Errno 28] No space left on device",
    "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-vzIpS6 (size 9637888)",
    "misc/shmutils.cc:72 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-Ab12Cd (size 4194304)",
    "RuntimeError: unable to mmap 2097152 bytes from file </torch_1234_567_0>: Cannot allocate memory (12)",
    "RuntimeError: unable to resize file </torch_9_8_7> to the right size: No space left on device (28)",
    'File "/usr/local/lib/python3.10/dist-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop\n'
    "Bus error (core dumped)",
]
# the GPU lost: whatever SIGBUS follows it is its consequence (infrastructure, recovered), never shm
GPU_FAULT_THEN_BUS_ERROR = [
    "NVRM: Xid (PCI:0000:00:04): 79, pid=1234, GPU has fallen off the bus.\n"
    "RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error.",
    "Failed to initialize NVML: Unknown Error\nRuntimeError: CUDA error: unknown error\nBus error (core dumped)",
    "RuntimeError: CUDA error: uncorrectable ECC error encountered\nERROR: Unexpected bus error encountered in "
    "worker. This might be caused by insufficient shared memory (shm).",
    "RuntimeError: CUDA error: GPU has fallen off the bus\nRuntimeError: DataLoader worker (pid(s) 311) is killed "
    "by signal: Bus error.",
    "pcieport 0000:00:03.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer",
]
NOT_SHM = [   # a disk full on a path that merely contains "dev/shm"; a bare SIGBUS with no DataLoader beside it
    "OSError: [Errno 28] No space left on device: '/results/dev/shm_copy.bin'",
    "OSError: [Errno 28] No space left on device: '/data/dev/shm/x.bin'",
    "OSError: [Errno 28] No space left on device\n  File \"/workspace/heap.py\", line 3",
]


@pytest.mark.parametrize("text", SHM_VARIANTS)
def test_shm_out_of_space_in_every_spelling_is_shm_exhausted(text):
    hint = classify_logs("Epoch 1/3\n" + text)
    assert hint and hint.get("code") == "SHM_EXHAUSTED", hint


@pytest.mark.parametrize("text", GPU_FAULT_THEN_BUS_ERROR)
def test_a_gpu_fault_wins_over_the_bus_error_that_follows_it(text):
    hint = classify_logs(text)
    assert hint.get("code") != "SHM_EXHAUSTED" and hint["err_class"] == "ERR_INFRA", hint


@pytest.mark.parametrize("text", NOT_SHM)
def test_disk_full_on_a_path_naming_dev_shm_is_the_disk(text):
    hint = classify_logs(text)
    assert hint.get("code") != "SHM_EXHAUSTED" and hint["reason"] == "instance disk full", hint


def test_a_bare_bus_error_without_the_dataloader_is_not_shm():
    assert (classify_logs("Bus error (core dumped)") or {}).get("code") != "SHM_EXHAUSTED"
