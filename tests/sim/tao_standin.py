"""Stand-in for a TAO Toolkit 5+ container entrypoint (``nvcr.io/nvidia/tao/tao-toolkit:*``).

Invoked as ``<network_arch> <action> -e <spec.yaml> [key=value ...]`` inside a
simulated container (the TAO 5+ command form). It sees the
container filesystem through the bind mounts (:class:`containers.ContainerContext`)
and fails the way TAO does: a Python traceback ending in ``FileNotFoundError``
(exit 1) for a missing spec or dataset path, ``RuntimeError`` without a GPU,
``OSError`` on a read-only results mount.

It writes ``<results_dir>/<action>/`` (``results_dir`` is a top-level spec key;
``<action>.results_dir`` and ``key=value`` overrides win) as TAO 5+ PyTorch
does: tiny checkpoints ``model_epoch_<EEE>_step_<SSSSS>.pth`` (older archs,
``simulate: {checkpoint_names: epoch}``: ``model_epoch_<EEE>.pth``), a
relative symlink ``<model>_latest.pth`` to the newest one (TAO's checkpoint
connector over PyTorch Lightning ``ModelCheckpoint._link_checkpoint``, which
writes ``os.symlink(os.path.relpath(target, dir), link)``; for
visual_changenet ``changenet_model_classify_latest.pth``), and
``status.json`` as TAO writes it (:class:`StatusLog`: STARTED, per epoch the
KPI lines and the epoch line with ``time_per_epoch``, the last one
``SUCCESS``/``FAILURE``), and prints ``Epoch i/N`` per epoch.

In a real container (the real-Docker tier's image, ``tests/real_docker/setup.sh``)
it runs as ``<arch>`` executables on PATH behind an NGC-style entrypoint and
uses :class:`RealContainer`.

A ``simulate:`` block in the spec (tests only) steers the run:
``exit_code``, ``oom`` (the host's OOM killer: marker + SIGKILL -> 137/OOMKilled, no message),
``cuda_oom`` (GPU memory: PyTorch's ``torch.OutOfMemoryError`` traceback, exit 1),
``xid`` (NVRM Xid 79 line, exit 1), ``epoch_seconds`` (default 0.05),
``hang`` (run until killed, after the last epoch), ``hang_after_epoch: N`` (no
output at all after epoch N), ``diverge`` (rising losses), ``write_env_hashes: [NAMES]`` (sha256 of each
variable's value into ``env_seen.json``, never the value), ``latest_link``
(``valid`` by default; ``dangling``: the link names a checkpoint that is not
there, as after a cleanup of old checkpoints; ``none``: no link),
``disk_full_at_epoch: N`` (the checkpoint write of epoch N fails the way
PyTorch's writer reports ENOSPC: ``PytorchStreamWriter failed writing file
data/N: file write failed``, exit 1), ``print_env: [NAMES]`` (each value
printed as a careless job would: verbatim, URL-encoded with lower-case
escapes, JSON with ``\/``, and base64 on stderr).
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from urllib.parse import quote

try:
    from containers import ContainerContext
except ImportError:   # inside a real image (real-Docker tier): no simulator modules there
    ContainerContext = None

TAO_MODULE = "/usr/local/lib/python3.10/dist-packages/nvidia_tao_pytorch"

# The network arches of a TAO 5+ PyTorch image: each is an executable on the
# image's PATH. Anything else is "not found" by the NGC entrypoint wrapper's
# `exec "$@"` (exit 127). tests/real_docker/setup.sh installs the same list
# (`python3 tao_standin.py --list-arches`).
TAO_ARCHES = ("action_recognition", "bevfusion", "centerpose", "classification_pyt", "deformable_detr", "dino",
              "grounding_dino", "mal", "mask2former", "mask_grounding_dino", "ml_recog", "nvdinov2", "ocdnet",
              "ocrnet", "optical_inspection", "pointpillars", "pose_classification", "re_identification",
              "rtdetr", "segformer", "stylegan_xl", "visual_changenet")
WRAPPER = "/opt/nvidia/nvidia_entrypoint.sh"
NGC_BANNER = """
==========
== TAO Toolkit PyTorch ==
==========

NVIDIA Release 7.3.0 (build 0000000)

Copyright (c) 2025, NVIDIA CORPORATION & AFFILIATES. All rights reserved.

This container image and its contents are governed by the NVIDIA Deep Learning Container License.
By pulling and using the container, you accept the terms and conditions of this license:
https://developer.nvidia.com/ngc/nvidia-deep-learning-container-license
"""


def traceback_exit(arch: str, action: str, exc_line: str, code: int = 1) -> int:
    sys.stderr.write(
        "Traceback (most recent call last):\n"
        f'  File "{TAO_MODULE}/cv/{arch}/scripts/{action}.py", line 112, in <module>\n'
        "    main()\n"
        f'  File "{TAO_MODULE}/core/hydra/hydra_runner.py", line 107, in wrapper\n'
        "    _run_hydra(\n"
        f"{exc_line}\n")
    sys.stderr.flush()
    return code


def apply_override(spec: dict, dotted: str, raw: str) -> None:
    import yaml

    node = spec
    keys = dotted.split(".")
    for key in keys[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    node[keys[-1]] = yaml.safe_load(raw) if raw != "" else ""


def dataset_paths(node) -> list[str]:
    """Every absolute path under the ``dataset`` section (TAO reads them all at start)."""
    if isinstance(node, dict):
        return [p for value in node.values() for p in dataset_paths(value)]
    if isinstance(node, list):
        return [p for value in node for p in dataset_paths(value)]
    if isinstance(node, str) and node.startswith("/"):
        return [node]
    return []


class StatusLog:
    """TAO's status.json, written as ``nvidia_tao_pytorch/core/loggers/api_logging.py``
    (``StatusLogger``) does: one ``json.dumps`` object per line, ``date``
    ``M/D/YYYY`` and ``time`` ``H:M:S`` (not zero-padded) from the container's
    local clock, ``status``, ``verbosity``, ``message``, and ``kpi`` on every line
    once a model has set it (the logger keeps the last ``kpi`` dict). ``clock``
    (epoch seconds) is injectable so tests can write a file as TAO would at any time."""

    def __init__(self, path: Path, clock=time.time):
        self.path = path
        self.clock = clock
        self.kpi: dict = {}

    def write(self, status: str = "RUNNING", message: str | None = None, **data) -> None:
        now = _dt.datetime.fromtimestamp(self.clock())
        record = {**data, "date": f"{now.month}/{now.day}/{now.year}",
                  "time": f"{now.hour}:{now.minute}:{now.second}", "status": status, "verbosity": "INFO"}
        if message:
            record["message"] = message
        if self.kpi:
            record["kpi"] = self.kpi
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")

    def epoch_end(self, epoch: int, max_epoch: int, seconds: float, kpis: dict) -> None:
        """What TAO's Lightning training writes when epoch ``epoch`` (1-based) ends: the
        model's validation KPIs, then ``TAOStatusLogger.on_train_epoch_end``
        (``core/callbacks/loggers.py``: ``epoch``, ``max_epoch``, ``time_per_epoch`` and
        ``eta`` as ``str(timedelta)``), then the model's training KPIs."""
        val = {k: v for k, v in kpis.items() if k.startswith("val")}
        train = {k: v for k, v in kpis.items() if not k.startswith("val")}
        if val:
            self.kpi = val
            self.write(message="Eval metrics generated.")
        self.write(epoch=epoch, max_epoch=max_epoch, time_per_epoch=str(_dt.timedelta(seconds=seconds)),
                   eta=str(_dt.timedelta(seconds=(max_epoch - epoch) * seconds)), message="Training loop in progress")
        if train:
            self.kpi = train
            self.write(message="Train metrics generated.")


def simulated_kpis(epoch: int, sim: dict) -> dict:
    """Losses that fall (or rise with ``simulate: {diverge: true}``) and an accuracy that climbs."""
    loss = 0.5 * epoch if sim.get("diverge") else 1.0 / (epoch + 1)
    return {"val_loss": round(loss * 1.1, 6), "val_acc": round(1 - 0.5 / epoch, 6), "train_loss": round(loss, 6)}


class RealContainer:
    """The context inside a real Docker container (the real-Docker test tier's
    image): container paths are real paths; the GPUs are what the NVIDIA
    ``--gpus`` driver granted (it sets NVIDIA_VISIBLE_DEVICES, moby
    daemon/nvidia_linux.go); an OOM kill is the kernel's, not simulated."""

    config: dict = {"Config": {"WorkingDir": os.getcwd()}}
    oom_marker = Path("/dev/null")

    @staticmethod
    def current():
        return RealContainer() if os.environ.get("TAO_RD_IMAGE") else None   # ENV of the tier's images

    @staticmethod
    def host_path(cpath: str, cwd: str = "/") -> Path:
        return Path(cwd, cpath)

    @staticmethod
    def writable(cpath: str) -> bool:
        path = Path(cpath)
        while not path.exists():
            path = path.parent
        return os.access(path, os.W_OK)

    @staticmethod
    def gpus() -> list[str]:
        visible = os.environ.get("NVIDIA_VISIBLE_DEVICES", "")
        return [] if visible in ("", "void", "none") else ["NVIDIA A100-SXM4-80GB"]


STEPS_PER_EPOCH = 25


def checkpoint_name(epoch: int, sim: dict) -> str:
    """TAO 5+ PyTorch names (older archs: epoch only)."""
    if sim.get("checkpoint_names") == "epoch":
        return f"model_epoch_{epoch:03d}.pth"
    return f"model_epoch_{epoch:03d}_step_{(epoch + 1) * STEPS_PER_EPOCH:05d}.pth"


def latest_name(arch: str) -> str:
    return "changenet_model_classify_latest.pth" if arch == "visual_changenet" else f"{arch}_model_latest.pth"


def link_latest(out_dir: Path, name: str, target: str, mode: str) -> None:
    """The ``*_latest.pth`` symlink, relative, replaced atomically as Lightning does (``valid``),
    pointing at a checkpoint that is not there (``dangling``), or none."""
    if mode == "none":
        return
    if mode == "dangling":
        target = "model_epoch_999_step_99999.pth"
    tmp = out_dir / f".{name}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, out_dir / name)


def main(argv: list[str]) -> int:
    if argv == ["--list-arches"]:
        print(" ".join(TAO_ARCHES))
        return 0
    ctx = ContainerContext.current() if ContainerContext is not None else None
    if ctx is not None and argv:
        # the simulated image's NGC entrypoint wrapper (the real image has the script):
        # the banner on stdout, then `exec "$@"` - an unknown command ends the container 127
        print(NGC_BANNER, flush=True)
        if argv[0] not in TAO_ARCHES:
            print(f"{WRAPPER}: line 31: exec: {argv[0]}: not found", file=sys.stderr, flush=True)
            return 127
    ctx = ctx or RealContainer.current()
    if ctx is None:
        print("tao_standin: not running inside a simulated container", file=sys.stderr)
        return 2
    import yaml
    cwd = (ctx.config.get("Config") or {}).get("WorkingDir") or "/"
    if len(argv) < 2 or argv[0].startswith("-"):
        print("usage: <network_arch> <action> -e <experiment_spec> [key=value ...]", file=sys.stderr)
        return 2
    arch, action, rest = argv[0], argv[1], argv[2:]
    spec_path, overrides = None, []
    i = 0
    while i < len(rest):
        if rest[i] in ("-e", "--experiment_spec_file", "--experiment_spec"):
            spec_path = rest[i + 1] if i + 1 < len(rest) else None
            i += 2
        elif "=" in rest[i]:
            overrides.append(rest[i].split("=", 1))
            i += 1
        else:
            print(f"{arch} {action}: error: unrecognized arguments: {rest[i]}", file=sys.stderr)
            return 2
    print(f"=== TAO Toolkit PyTorch ({arch} {action}) ===", file=sys.stderr, flush=True)
    if spec_path is None:
        return traceback_exit(arch, action, "hydra.errors.MissingConfigException: experiment spec (-e) is required")
    host_spec = ctx.host_path(spec_path, cwd)
    if not host_spec.is_file():
        return traceback_exit(arch, action,
                              f"FileNotFoundError: [Errno 2] No such file or directory: '{spec_path}'")
    spec = yaml.safe_load(host_spec.read_text()) or {}
    for key, value in overrides:
        apply_override(spec, key, value)
    for path in dataset_paths(spec.get("dataset", {})):
        if not ctx.host_path(path, cwd).exists():
            return traceback_exit(arch, action, f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'")
    if not ctx.gpus():
        return traceback_exit(arch, action, "RuntimeError: No CUDA GPUs are available")

    action_cfg = spec.get(action) if isinstance(spec.get(action), dict) else {}
    top_results = str(spec.get("results_dir", "/results"))
    results_dir = action_cfg.get("results_dir") or f"{top_results.rstrip('/')}/{action}"
    if not ctx.writable(results_dir):
        return traceback_exit(arch, action, f"OSError: [Errno 30] Read-only file system: '{results_dir}'")
    out_dir = ctx.host_path(results_dir, cwd)
    out_dir.mkdir(parents=True, exist_ok=True)
    status = StatusLog(out_dir / "status.json")
    sim = spec.get("simulate") or {}
    train_cfg = spec.get("train") if isinstance(spec.get("train"), dict) else {}
    epochs = int(action_cfg.get("num_epochs") or train_cfg.get("num_epochs") or 2) if action == "train" else 1
    epoch_seconds = float(sim.get("epoch_seconds", 0.05))

    if sim.get("write_env_hashes"):
        seen = {name: (hashlib.sha256(os.environ[name].encode()).hexdigest() if name in os.environ else None)
                for name in sim["write_env_hashes"]}
        ctx.host_path(top_results, cwd).joinpath("env_seen.json").write_text(json.dumps(seen, indent=1))

    for name in sim.get("print_env") or []:   # a job that logs a credential, as jobs do, in several encodings
        value = os.environ.get(name, "")
        print(f"{name}={value}", flush=True)
        lower = re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quote(value, safe=""))
        print(f"url: https://mirror.example/fetch?key={lower}", flush=True)
        print(json.dumps({"config": {name.lower(): value}}).replace("/", "\\/"), flush=True)
        print(f"auth: {base64.b64encode(value.encode()).decode()}", file=sys.stderr, flush=True)

    status.write(status="STARTED", message=f"Starting {arch} {action}.")
    if action == "train":
        status.write(status="STARTED", message="Starting Training Loop.")
    epoch = 0
    while True:
        print(f"Epoch {epoch + 1}/{epochs}", flush=True)
        began = time.time()
        time.sleep(epoch_seconds)
        if sim.get("disk_full_at_epoch") is not None and int(sim["disk_full_at_epoch"]) == epoch:
            status.write(status="FAILURE", message="file write failed")
            return traceback_exit(arch, action, "RuntimeError: [enforce fail at inline_container.cc:603] . "
                                  f"PytorchStreamWriter failed writing file data/{17 + epoch}: file write failed")
        checkpoint = out_dir / checkpoint_name(epoch, sim)
        checkpoint.write_bytes(b"sim-checkpoint " + str(epoch).encode())
        link_latest(out_dir, latest_name(arch), checkpoint.name, sim.get("latest_link", "valid"))
        if action == "train":
            status.epoch_end(epoch + 1, epochs, time.time() - began, simulated_kpis(epoch + 1, sim))
        if sim.get("hang_after_epoch") is not None and epoch + 1 >= int(sim["hang_after_epoch"]):
            while True:          # a hung data loader / NCCL collective: no output, container running
                time.sleep(1)
        if sim.get("oom"):   # the kernel's OOM killer: SIGKILL, nothing written by the job itself
            ctx.oom_marker.write_text("oom")
            os.kill(os.getpid(), signal.SIGKILL)
        if sim.get("cuda_oom"):   # PyTorch's CUDA caching allocator raises torch.OutOfMemoryError: exit 1
            status.write(status="FAILURE", message="CUDA out of memory")
            return traceback_exit(arch, action, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                  "2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.06 GiB is free.")
        if sim.get("xid"):
            print("NVRM: Xid (PCI:0000:00:04): 79, GPU has fallen off the bus.", flush=True)
            status.write(status="FAILURE", message="CUDA error: unspecified launch failure")
            return traceback_exit(arch, action, "RuntimeError: CUDA error: unspecified launch failure")
        epoch += 1
        if epoch >= epochs:
            break
    while sim.get("hang"):
        time.sleep(1)
    code = int(sim.get("exit_code", 0))
    if code:
        status.write(status="FAILURE", message=f"{action} failed with exit code {code}")
        print("Execution status: FAIL", flush=True)
        return code
    if action == "train":
        status.write(message="Training loop complete.")
    status.write(status="SUCCESS", message=f"{action} finished successfully.")
    print("Execution status: PASS", flush=True)
    long = sim.get("long_lines")
    if long:   # a 40 KiB line (a credential where a 2 KiB cut of its end falls), then tqdm's \r progress as its last output
        value = os.environ.get(long.get("env", ""), "")
        tail = int(long.get("cut_at", 2048)) - (len(value) - len(value) // 2)
        print("A" * (int(long.get("line_bytes", 40960)) - tail - len(value)) + value + "B" * tail, flush=True)
        total, step = 0, 0
        while total < int(long.get("progress_bytes", 8 * 1024 * 1024)):   # one line: no newline until the end
            chunk = f"\rEpoch 1: {step % 100:3d}%|{'#' * (step % 40):<40}| {step}/1000000 [00:01<00:02, 9.9it/s]"
            sys.stdout.write(chunk)
            total, step = total + len(chunk), step + 1
        sys.stdout.flush()   # no newline: the job ends on its last progress state
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
