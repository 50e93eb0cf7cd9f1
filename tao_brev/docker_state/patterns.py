"""The failure-pattern table: log lines -> a failure class, reason and advice (the real messages
of the NVIDIA driver, CUDA, NCCL, PyTorch, Hydra)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from ..logcap import cut_redacted
from ..model.answer_types import Hint
from ..vocabulary import ErrClass
from .hints import (DISK_ADVICE, DRIVER_ADVICE, GPU_ACCESS_ADVICE, GPU_RESET_ADVICE, INFRA_ADVICE, PROGRAM_ADVICE,
                    RESUME, SHM_ADVICE, SHM_CODE)


@dataclass(frozen=True)
class LogPattern:
    err_class: str
    pattern: re.Pattern
    reason: str
    advice: str
    example: str     # a real message it must match (documented, and tested)
    detail: Optional[re.Pattern] = None   # its group 1 in the logs is added to the reason (e.g. the spec key)
    code: Optional[str] = None            # a failure code of its own (the hint's ``code``); such rows win next
    first: bool = False                   # GPU-fault evidence: wins over every other row (a SIGBUS after it is not shm)
    context: Optional[re.Pattern] = None  # the row counts only when this also matches the whole log


# Runs only while the module is imported (it builds LOG_PATTERNS), before mutmut's workers
# fork: none of its mutants could ever be active, so dev/mutation.py does not make them.
# Its defaults (advice by class, case-insensitive) are tested through classify_logs.
def _p(err_class: str, regex: str, reason: str, example: str, advice: Optional[str] = None,
       flags: int = re.I, detail: Optional[str] = None, code: Optional[str] = None, first: bool = False,
       context: Optional[str] = None) -> LogPattern:  # pragma: no mutate block
    default = INFRA_ADVICE if err_class == ErrClass.INFRA else PROGRAM_ADVICE
    return LogPattern(err_class, re.compile(regex, flags), reason, advice or default, example,
                      re.compile(detail) if detail else None, code, first, re.compile(context, flags) if context else None)


# Log patterns. They must match the real messages (NVIDIA driver Xid lines,
# CUDA/NCCL/PyTorch errors) and not ordinary training output such as
# "loss: nan", "xid" in a file name or "ECCV" in a dataset name.
# GPU faults win first, then rows with a code of their own, then infrastructure over program rows
# (an Xid often ends in a traceback or a SIGBUS too).
# /dev/shm as a path of its own (not "/results/dev/shm_copy.bin"), and ENOSPC in any of its spellings
_SHM_PATH = r"(?<![\w.-])/dev/shm(?![\w.-])"
_ENOSPC = r"(?:No space left on device|\[Errno 28\]|\bENOSPC\b)"

LOG_PATTERNS: tuple[LogPattern, ...] = (
    # GPU faults first (``first``): the GPU lost takes the job's processes down with it, so a SIGBUS or a
    # traceback that follows is its consequence, never the cause (not shm, not the program)
    _p(ErrClass.INFRA, r"NVRM: Xid|\bXid \(PCI:", "NVIDIA driver Xid error (GPU fault)",
       "NVRM: Xid (PCI:0000:00:04): 79, pid=1234, GPU has fallen off the bus.", GPU_RESET_ADVICE, flags=0, first=True),
    _p(ErrClass.INFRA, r"fallen off the bus|\bGPU is lost\b", "GPU has fallen off the bus",
       "RuntimeError: CUDA error: GPU has fallen off the bus", GPU_RESET_ADVICE, first=True),
    _p(ErrClass.INFRA, r"uncorrectable ECC|\bECC error", "GPU ECC error",
       "RuntimeError: CUDA error: uncorrectable ECC error encountered", GPU_RESET_ADVICE, first=True),
    _p(ErrClass.INFRA, r"Failed to initialize NVML: Unknown Error|CUDA error: unknown error",
       "the container lost its GPUs (NVML/CUDA: unknown error) while the job ran",
       "RuntimeError: CUDA error: unknown error", GPU_ACCESS_ADVICE, first=True),
    # the Linux kernel's PCIe AER report (drivers/pci/pcie/aer.c aer_print_error: "PCIe Bus Error:
    # severity=%s, type=%s"): a PCIe link fault, nothing to do with shared memory
    _p(ErrClass.INFRA, r"\bAER: .*PCIe Bus Error|PCIe Bus Error: severity=", "PCIe bus error (AER) on the GPU's link",
       "pcieport 0000:00:03.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer",
       GPU_RESET_ADVICE, first=True),
    # /dev/shm exhausted, on shm-specific evidence only (then checked before the disk: its ENOSPC is not the
    # disk). PyTorch: torch/csrc/DataLoader.cpp handler_SIGBUS ("ERROR: Unexpected bus error encountered in
    # worker. This might be caused by insufficient shared memory (shm)."), _error_if_any_worker_fails /
    # torch/utils/data/_utils/signal_handling.py ("DataLoader worker (pid N) is killed by signal: Bus error."),
    # aten/src/ATen/MapAllocator.cpp / libshm ("unable to write to file </torch_N_...>: No space left on device
    # (28)", "unable to open shared memory object <...>", "unable to resize file <...>", "unable to mmap N bytes
    # from file <...>: Cannot allocate memory (12)"); NCCL src/misc/shmutils.cc ncclShmOpen ("Error while
    # creating shared memory segment /dev/shm/nccl-XXXXXX (size N)"); ENOSPC on a /dev/shm path.
    _p(ErrClass.PROGRAM, r"insufficient shared memory \(shm\)|Unexpected bus error encountered in worker|"
       r"DataLoader worker \(pid\(?s?\)? ?[\d, ]+\) is killed by signal: Bus error|"
       r"unable to (?:write to file|open shared memory object|allocate shared memory|resize file|"
       r"mmap \d+ bytes from file)[^\n]*</?torch_|"
       r"Error while (?:creating|attaching to) shared memory segment|"
       rf"(?:{_SHM_PATH}|shared memory)[^\n]*{_ENOSPC}|{_ENOSPC}[^\n]*{_SHM_PATH}",
       "the container's shared memory (/dev/shm) ran out in the DataLoader workers",
       "RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error. It is possible that dataloader's "
       "workers are out of shared memory. Please try to raise your shared memory limit.", SHM_ADVICE, code=SHM_CODE),
    # CPython Lib/multiprocessing/heap.py Arena._make_fd: the arena file lives in /dev/shm (_dir_candidates)
    # and os.ftruncate / os.posix_fallocate there raise ENOSPC: the ENOSPC line counts only after that frame
    _p(ErrClass.PROGRAM, _ENOSPC, "the container's shared memory (/dev/shm) ran out (a multiprocessing arena)",
       '  File "/usr/lib/python3.10/multiprocessing/heap.py", line 94, in _make_fd\n'
       "OSError: [Errno 28] No space left on device", SHM_ADVICE, code=SHM_CODE,
       context=rf"multiprocessing/heap\.py[^\n]*\n(?:[^\n]*\n){{0,6}}?[^\n]*{_ENOSPC}"),
    # a bare "Bus error" (SIGBUS) is shm only with the DataLoader's own frames or words beside it
    _p(ErrClass.PROGRAM, r"\bBus error\b", "a DataLoader worker died of SIGBUS (the shared memory /dev/shm)",
       '  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py", line 308, in _worker_loop\n'
       "Bus error (core dumped)", SHM_ADVICE, code=SHM_CODE,
       context=r"torch/utils/data/|\bDataLoader\b|_worker_loop"),
    _p(ErrClass.INFRA, r"nvml error: driver not loaded|couldn't communicate with the NVIDIA driver",
       "the NVIDIA driver is not loaded on the instance",
       "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", DRIVER_ADVICE),
    _p(ErrClass.INFRA, r"CUDA driver version is insufficient|driver version is insufficient",
       "NVIDIA driver too old for the container's CUDA",
       "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
       "use an instance whose NVIDIA driver supports the image's CUDA version"),
    _p(ErrClass.INFRA, r"No CUDA GPUs are available|CUDA-capable device\(s\) is/are busy or unavailable",
       "no usable GPU in the container", "RuntimeError: No CUDA GPUs are available",
       f"check the instance's GPUs with preflight.py, then resubmit: {RESUME}"),
    _p(ErrClass.INFRA, r"NCCL (WARN|error).*(transport|socket|timeout|unhandled system error)",
       "NCCL transport fault", "NCCL WARN NET/Socket : socket timeout, unhandled system error"),
    # A full disk: the OS says ENOSPC, but PyTorch's checkpoint writer (caffe2
    # serialize/inline_container.cc) reports only "file write failed" or
    # "unexpected pos N vs M" when a write came up short.
    _p(ErrClass.INFRA, r"No space left on device|\[Errno 28\]|\bENOSPC\b|Disk quota exceeded|"
       r"PytorchStreamWriter failed writing|inline_container\.cc.*unexpected pos|unexpected pos \d+ vs \d+",
       "instance disk full",
       "RuntimeError: [enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file "
       "data/17: file write failed", DISK_ADVICE),
    # hydra-core 1.3.2 config_loader_impl.py:478 ("Error merging '<spec>' with schema") and :393 ("Could not
    # override"), with omegaconf's cause ("Key 'X' not in 'Y'" and its "full_key: a.b.X" line)
    _p(ErrClass.PROGRAM, r"Error merging '[^']*' with schema|Error merging override |Could not override '|"
       r"Key '[^']+' not in '[^']+'", "the spec does not merge with TAO's schema",
       "omegaconf.errors.ConfigKeyError: Key 'betas' not in 'CNOptimConfig'",
       "fix the spec: the key named is not in TAO's schema for this network and image version (or its value "
       "has the wrong type); submit.py checks specs before launch unless --no-spec-check, so resubmit with the "
       "spec fixed", detail=r"full_key: (\S+)|Key '([^']+)' not in|Could not override '([^']+)'"),
    # lightning fabric utilities/device_parser.py _sanitize_gpu_ids; torch's message when a rank's
    # device does not exist (the torchrun networks: tao-pytorch core/entrypoint.py:24-27)
    _p(ErrClass.PROGRAM, r"You requested gpu: |But your machine only has: |CUDA error: invalid device ordinal",
       "num_gpus / gpu_ids ask for more GPUs than the container sees",
       "lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1]",
       "the spec's (or an override's) num_gpus / gpu_ids name more GPUs than --gpus handed the container: "
       "resubmit without them (submit.py sets them from --gpus) or with --gpus naming that many GPUs"),
    _p(ErrClass.PROGRAM, r"CUDA out of memory|OutOfMemoryError", "CUDA out of memory",
       "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
       "reduce the batch size or the input size, or use a GPU with more memory"),
    _p(ErrClass.PROGRAM, r"device-side assert", "CUDA device-side assert",
       "RuntimeError: CUDA error: device-side assert triggered",
       "check the labels/classes in the data against the spec (an index out of range)"),
    _p(ErrClass.PROGRAM, r"DataLoader worker \(pid\(?s?\)? ?[\d, ]+\) is killed by signal|"
       r"DataLoader worker \(pid\(?s?\)? ?[\d, ]+\) exited unexpectedly",
       "a DataLoader worker died (killed by a signal other than SIGBUS: most often the host's RAM)",
       "RuntimeError: DataLoader worker (pid 77) is killed by signal: Killed.",
       "lower num_workers or the batch size, or use an instance with more RAM, then resubmit with --retry-of"),
    # an NGC entrypoint wrapper's `exec "$@"` (exit 127), or docker's own start error
    _p(ErrClass.PROGRAM, r"exec: .*: not found|executable file not found in \$PATH",
       "the command is not in the image", "/opt/nvidia/nvidia_entrypoint.sh: line 67: exec: visual_changenet_v9: "
       "not found", "check --network-arch/--action against the TAO image (each network arch is an executable in "
       "it) and the image tag"),
    _p(ErrClass.PROGRAM, r"FileNotFoundError|No such file or directory", "missing file",
       "FileNotFoundError: [Errno 2] No such file or directory: '/data/x'",
       "check the dataset paths in the spec against the mounts (/data/NAME)"),
    _p(ErrClass.PROGRAM, r"^Traceback \(most recent call last\)", "Python traceback",
       "Traceback (most recent call last):", flags=re.M),
)

OOM_HINT_REASON = "out of memory (OOM)"
STOP_EXIT_CODES = (137, 143, 255)   # SIGKILL, SIGTERM, daemon restart: how a VM stop ends a container
MAX_EVIDENCE = 5
EVIDENCE_CHARS = 400


def classify_logs(log_text: str, max_evidence: int = MAX_EVIDENCE) -> Optional[Hint]:
    """A failure hint ``{"err_class", "reason", "advice", "evidence": [lines]}``
    from the logs, or None. GPU faults win first, then a row with its own code, then infrastructure
    patterns over program patterns; a row with a ``context`` counts only when the log holds it."""
    lines = log_text.splitlines()
    for wanted in ("first", "code", "ERR_INFRA", "ERR_PROGRAM"):   # GPU faults, then a row with its own code
        for item in LOG_PATTERNS:
            if _tier(item) != wanted or (item.context is not None and not item.context.search(log_text)):
                continue
            evidence = [_cut(ln.strip()) for ln in lines if item.pattern.search(ln)]
            if evidence:
                hint: Hint = {"err_class": item.err_class, "reason": _detailed(item, lines), "advice": item.advice,
                        "evidence": evidence[:max_evidence]}
                return {**hint, "code": item.code} if item.code else hint
    return None


def _tier(item: LogPattern) -> str:
    return "first" if item.first else "code" if item.code is not None else item.err_class


def _detailed(item: LogPattern, lines: list) -> str:
    """The pattern's reason with the ``detail`` the logs give (``reason: 'train.optim.betas'``): group 1
    (the whole key path) wherever it is, else the first group of the first match."""
    found = [m for m in (item.detail.search(line) for line in lines) if m] if item.detail is not None else []
    if not found:
        return item.reason
    full = [m.group(1) for m in found if m.group(1)]   # group 1: the whole key path, when the logs give it
    return f"{item.reason}: '{full[0] if full else next(g for g in found[0].groups() if g)}'"



def _cut(line: str) -> str:
    """A log line for ``evidence``: redacted, THEN cut to EVIDENCE_CHARS (a cut never leaves part of a value)."""
    return cut_redacted(line, EVIDENCE_CHARS)

