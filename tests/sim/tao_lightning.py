"""The TAO 7 PyTorch task functions of the stand-in (train, evaluate, the rest), as PyTorch Lightning runs them.

Each behaviour cites the TAO source it follows (tao-pytorch 7.0.1 ``nvidia_tao_pytorch/...``;
PyTorch Lightning 2.x, which the TAO 7 images carry):

- train: ``core/initialize_experiments.py:20-111`` (resume, GPUs, intervals), ``Trainer.fit`` with
  ``core/lightning/tao_lightning_module.py:59-130`` callbacks (``TAOStatusLogger``,
  ``ModelCheckpoint(every_n_epochs=checkpoint_interval, save_last='link',
  filename='model_{epoch:03d}_{step:05d}')``, ``TAOExceptionCheckpoint``) and the models'
  ``on_validation_epoch_end`` / ``on_train_epoch_end`` KPI lines (e.g.
  ``cv/visual_changenet/segmentation/models/cn_pl_model.py:357,401``).
- evaluate: ``core/initialize_experiments.py:114-140`` ("Loading checkpoint: ...") and the model's
  ``on_test_epoch_end`` ("Test metrics generated.", ``cn_pl_model.py:434``).

A checkpoint is a small JSON payload (``epoch``, ``global_step``): what resume reads back.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import signal
import sys
import time
from pathlib import Path

STEPS_PER_EPOCH = 25          # Lightning's num_training_batches of the simulated dataset
CHECKPOINT_MAGIC = b"sim-checkpoint "

# checkpoint_filename of each network's LightningModule (its ``<prefix>_latest.pth`` link), e.g.
# tao-pytorch cv/dino/model/pl_dino_model.py:48 'dino_model', cv/deformable_detr/model/pl_dd_model.py:43
# 'dd_model', cv/classification_pyt/model/classifier_pl_model.py:50 'classifier_model',
# cv/visual_changenet/{classification,segmentation}/models/cn_pl_model.py:78,93 'changenet_model_<task>'.
CHECKPOINT_PREFIX = {
    "action_recognition": "ar_model", "centerpose": "centerpose_model", "classification_pyt": "classifier_model",
    "codetr": "codetr_model", "deformable_detr": "dd_model", "depth_net": "dn_model", "dino": "dino_model",
    "grounding_dino": "gdino_model", "mal": "mal_model", "mask2former": "mask2former_model",
    "mask_grounding_dino": "mask_gdino_model", "ml_recog": "ml_model", "nvdinov2": "nvdinov2_model",
    "ocdnet": "ocd_model", "ocrnet": "ocr_model", "oneformer": "oneformer_model",
    "optical_inspection": "oi_model", "pose_classification": "pc_model", "re_identification": "reid_model",
    "rtdetr": "rtdetr_model", "segformer": "segformer_model", "sparse4d": "sparse4d_model",
    "stylegan_xl": "styleganxl_model", "clip": "clip", "nvpanoptix3d": "nvpanoptix3d_model",
}


class MisconfigurationException(Exception):
    """lightning_fabric.utilities.exceptions.MisconfigurationException (Lightning re-exports it)."""


MisconfigurationException.__module__ = "lightning_fabric.utilities.exceptions"


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError: the CUDA caching allocator could not allocate."""


OutOfMemoryError.__module__ = "torch"


def checkpoint_prefix(arch: str, cfg: dict) -> str:
    if arch == "visual_changenet":
        return f"changenet_model_{cfg.get('task') or 'segment'}"
    return CHECKPOINT_PREFIX.get(arch, f"{arch}_model")


def checkpoint_name(epoch: int, step: int, sim: dict) -> str:
    """``model_epoch_EEE_step_SSSSS.pth``: ModelCheckpoint's ``model_{epoch:03d}_{step:05d}`` with
    CHECKPOINT_EQUALS_CHAR "_" and FILE_EXTENSION ".pth" (tao_lightning_module.py:89-104); epoch is
    Lightning's current_epoch (from 0), step its global_step. ``checkpoint_names: epoch``: older archs."""
    if sim.get("checkpoint_names") == "epoch":
        return f"model_epoch_{epoch:03d}.pth"
    return f"model_epoch_{epoch:03d}_step_{step:05d}.pth"


def link_latest(out_dir: Path, name: str, target: str, mode: str) -> None:
    """``<prefix>_latest.pth``, a relative symlink as Lightning's ``ModelCheckpoint._link_checkpoint``
    writes it (``os.symlink(os.path.relpath(target, dir), link)``), replaced atomically here;
    ``dangling``: it names a checkpoint that is not there (after a cleanup); ``none``: no link."""
    if mode == "none":
        return
    if mode == "dangling":
        target = "model_epoch_999_step_99999.pth"
    tmp = out_dir / f".{name}.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, out_dir / name)


def latest_checkpoint(out_dir: Path, results_dir: str) -> str | None:
    """tao-pytorch core/utilities.py:109-119 get_latest_checkpoint: the first ``*_latest.pth`` of the
    results dir, resolved (os.path.realpath), as a container path."""
    links = sorted(out_dir.glob("*_latest.pth"))
    if not links:
        return None
    link = links[0]
    target = os.readlink(link) if link.is_symlink() else link.name
    if target.startswith("/"):
        return os.path.normpath(target)
    return os.path.normpath(f"{results_dir.rstrip('/')}/{target}")


def read_checkpoint(host: Path, cpath: str) -> dict:
    """Lightning's restore: lightning_fabric/plugins/io/torch_io.py load_checkpoint raises
    ``FileNotFoundError: Checkpoint file not found: PATH``; torch.load of a file that is no
    checkpoint fails in the zip reader."""
    if not host.is_file():
        raise FileNotFoundError(f"Checkpoint file not found: {cpath}")
    raw = host.read_bytes()
    try:
        data = json.loads(raw[len(CHECKPOINT_MAGIC):]) if raw.startswith(CHECKPOINT_MAGIC) else None
    except ValueError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("epoch"), int):
        raise RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central directory")
    return data


def write_checkpoint(path: Path, epoch: int, step: int) -> None:
    path.write_bytes(CHECKPOINT_MAGIC + json.dumps({"epoch": epoch, "global_step": step}).encode())


def val_kpis(epoch: int, sim: dict) -> dict:
    """What a segmentation model's on_validation_epoch_end sets as ``kpi`` (cn_pl_model.py:401 area)."""
    loss = 0.5 * (epoch + 1) if sim.get("diverge") else 1.0 / (epoch + 2)
    return {"val_loss": round(loss * 1.1, 6), "val_acc": round(1 - 0.5 / (epoch + 1), 6),
            "val_miou": round(0.9 - 0.4 / (epoch + 1), 6)}


def train_kpis(epoch: int, sim: dict) -> dict:
    """What the model's on_train_epoch_end sets as ``kpi`` (cn_pl_model.py:357 area)."""
    loss = 0.5 * (epoch + 1) if sim.get("diverge") else 1.0 / (epoch + 2)
    return {"train_loss": round(loss, 6)}


def test_kpis(arch: str, cfg: dict) -> dict:
    """on_test_epoch_end's ``kpi``: segmentation (cn_pl_model.py:434 area) or classification
    (classification/models/cn_pl_model.py:288-297) keys for visual_changenet; ``test_acc`` else."""
    if arch == "visual_changenet" and cfg.get("task") == "classify":
        return {"test_acc": 0.91, "test_fpr": 0.04, "test_fnr": 0.07, "defect_acc": 0.93}
    if arch == "visual_changenet":
        return {"test_acc": 0.95, "test_miou": 0.81, "test_mf1": 0.88, "test_mprecision": 0.9, "test_mrecall": 0.87}
    return {"test_acc": 0.9}


class Job:
    """One task function's world: the merged config (a dict), the results dir (container and host
    paths), the simulated container, the ``simulate:`` knobs, the status logger and TAO's logger."""

    def __init__(self, arch, action, cfg, results_dir, out_dir, ctx, cwd, sim, status, log, gpu_ids):
        self.arch, self.action, self.cfg, self.sim = arch, action, cfg, sim
        self.results_dir, self.out_dir, self.ctx, self.cwd = results_dir, out_dir, ctx, cwd
        self.status, self.log, self.gpu_ids = status, log, gpu_ids

    def section(self, name: str) -> dict:
        value = self.cfg.get(name)
        return value if isinstance(value, dict) else {}

    def trainer_devices(self) -> None:
        """``Trainer(devices=gpu_ids)``: lightning_fabric/utilities/device_parser.py _sanitize_gpu_ids
        raises for an id the machine does not have. The torchrun networks (core/entrypoint.py:24,261:
        bevfusion, pointpillars, rtdetr) set CUDA_VISIBLE_DEVICES and fail in torch.cuda.set_device."""
        available = list(range(len(self.ctx.gpus())))
        if not all(g in available for g in self.gpu_ids):
            if self.arch in ("bevfusion", "pointpillars", "rtdetr"):
                raise RuntimeError("CUDA error: invalid device ordinal")
            raise MisconfigurationException(f"You requested gpu: {self.gpu_ids}\n But your machine only has: "
                                            f"{available}")
        # what Lightning prints for the devices it uses (trainer/setup.py _log_device_info, the DDP
        # strategy's "Initializing distributed" per rank, CUDAAccelerator's LOCAL_RANK line)
        print("GPU available: True (cuda), used: True", flush=True)
        if len(self.gpu_ids) > 1:
            for rank in range(len(self.gpu_ids)):
                print(f"Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/{len(self.gpu_ids)}",
                      flush=True)
        print(f"LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [{','.join(str(g) for g in available)}]", flush=True)


def _interval(train: dict, key: str, epochs: int) -> int:
    value = int(train.get(key) or 1)
    # core/initialize_experiments.py:32-40: the intervals may not exceed num_epochs
    assert value <= epochs, (f"{key.replace('_', ' ').capitalize()} {value} > Number of epochs {epochs}."
                             f"Please set experiment_config.train.{key} <= {epochs}")
    return value


def train(job: Job) -> None:
    """trainer.fit as TAO 7 runs it (see the module docstring)."""
    train_cfg, sim = job.section("train"), job.sim
    epochs = int(train_cfg.get("num_epochs") or 1)
    validation_interval = _interval(train_cfg, "validation_interval", epochs)
    checkpoint_interval = _interval(train_cfg, "checkpoint_interval", epochs)
    # initialize_experiments.py:66-75: the spec's resume path, else the results dir's *_latest.pth
    resume = train_cfg.get("resume_training_checkpoint_path") or latest_checkpoint(job.out_dir, job.results_dir)
    if resume:
        if not (resume.endswith(".tlt") or resume.endswith(".pth")):
            raise ValueError("Resume checkpoint has an invalid file format; it must be either a .tlt or a .pth")
        job.log.info(f"Setting resume checkpoint to {resume}")
        job.status.write(f"Resuming training from checkpoint: {resume}")
    job.trainer_devices()
    start_epoch, step = 0, 0
    if resume:   # Lightning _CheckpointConnector.resume_start: the epoch after the saved one, its global_step
        print(f"Restoring states from the checkpoint path at {resume}", flush=True)
        saved = read_checkpoint(job.ctx.host_path(resume, job.cwd), resume)
        start_epoch, step = saved["epoch"] + 1, int(saved.get("global_step") or 0)
        print(f"Restored all states from the checkpoint at {resume}", flush=True)
    if start_epoch >= epochs:   # Lightning _FitLoop.done: nothing left to run
        print(f"`Trainer.fit` stopped: `max_epochs={epochs}` reached.", flush=True)
        return
    job.status.write("Starting Training Loop.", status="STARTED")   # TAOStatusLogger.on_train_start (loggers.py:86-91)
    prefix = checkpoint_prefix(job.arch, job.cfg)
    epoch_seconds = float(sim.get("epoch_seconds", 0.05))
    log_errors = {int(k): v for k, v in (sim.get("log_errors") or {}).items()}
    for epoch in range(start_epoch, epochs):
        began = time.time()
        time.sleep(epoch_seconds)
        if sim.get("disk_full_at_epoch") is not None and int(sim["disk_full_at_epoch"]) == epoch:
            raise RuntimeError("[enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing "
                               f"file data/{17 + epoch}: file write failed")
        step += STEPS_PER_EPOCH
        print(f"Epoch {epoch}: 100%|##########| {STEPS_PER_EPOCH}/{STEPS_PER_EPOCH} [00:00<00:00, "
              f"{STEPS_PER_EPOCH / max(epoch_seconds, 0.001):.2f}it/s, v_num=1]", flush=True)
        if epoch in log_errors:   # an ERROR-level log call: core/tlt_logging.py:124-139 writes it as FAILURE
            job.log.error(str(log_errors[epoch]))
        if (epoch + 1) % validation_interval == 0:   # Lightning: (current_epoch + 1) % check_val_every_n_epoch
            job.status.kpi = val_kpis(epoch, sim)
            job.status.write("Eval metrics generated.")
        elapsed = time.time() - began
        # TAOStatusLogger.on_train_epoch_end (loggers.py:121-138): callbacks before the module's hook;
        # the line carries the logger's last kpi dict (BaseLogger.write adds self.kpi to every line)
        job.status.write("Training loop in progress", data={
            "epoch": epoch, "step": step, "max_epoch": epochs - 1, "max_step": epochs * STEPS_PER_EPOCH,
            "time_per_epoch": str(_dt.timedelta(seconds=elapsed)),
            "time_per_step": str(_dt.timedelta(seconds=elapsed / STEPS_PER_EPOCH)),
            "eta": str(_dt.timedelta(seconds=(epochs - 1 - epoch) * elapsed))})
        job.status.kpi = train_kpis(epoch, sim)
        job.status.write("Train metrics generated.")
        if (epoch + 1) % checkpoint_interval == 0:   # ModelCheckpoint(every_n_epochs, save_on_train_epoch_end)
            name = checkpoint_name(epoch, step, sim)
            write_checkpoint(job.out_dir / name, epoch, step)
            link_latest(job.out_dir, f"{prefix}_latest.pth", name, sim.get("latest_link", "valid"))
        after_epoch(job, epoch)
    job.status.write("Training loop complete.")   # TAOStatusLogger.on_train_end (loggers.py:140-145)


def exception_checkpoint(job: Job, epoch: int, step: int) -> None:
    """TAOExceptionCheckpoint.on_exception (core/callbacks/model_checkpoint.py:27-31): a checkpoint
    named by the current epoch and global_step, linked as the latest."""
    name = f"model_epoch_{epoch:03d}_step_{step:05d}.pth"
    write_checkpoint(job.out_dir / name, epoch - 1, step)
    link_latest(job.out_dir, f"{checkpoint_prefix(job.arch, job.cfg)}_latest.pth", name, "valid")


def after_epoch(job: Job, epoch: int) -> None:
    """The fault knobs that act at the end of an epoch."""
    sim = job.sim
    if sim.get("hang_after_epoch") is not None and epoch + 1 >= int(sim["hang_after_epoch"]):
        while True:          # a hung data loader / NCCL collective: no output, container running
            time.sleep(1)
    if sim.get("oom"):   # the kernel's OOM killer: SIGKILL, nothing written by the job itself
        job.ctx.oom_marker.write_text("oom")
        os.kill(os.getpid(), signal.SIGKILL)
    if sim.get("cuda_oom"):   # PyTorch's CUDA caching allocator raises torch.OutOfMemoryError
        exception_checkpoint(job, epoch + 1, (epoch + 1) * STEPS_PER_EPOCH)
        raise OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                               "79.15 GiB of which 1.06 GiB is free.")
    if sim.get("nvml_lost"):   # a host `systemctl daemon-reload` (nvidia-container-toolkit #48)
        print("Failed to initialize NVML: Unknown Error", flush=True)
        raise RuntimeError("CUDA error: unknown error")
    # xid_after_epochs: [N, ...]: the Xid after the N-th epoch counted from 1 in the whole run (a resumed
    # run counts on from its checkpoint, so each fault strikes once per chain; recovery tests)
    if sim.get("xid") or epoch + 1 in (sim.get("xid_after_epochs") or []):
        print("NVRM: Xid (PCI:0000:00:04): 79, GPU has fallen off the bus.", flush=True)
        raise RuntimeError("CUDA error: unspecified launch failure")


def evaluate(job: Job) -> None:
    """core/initialize_experiments.py:114-140 then trainer.test: "Loading checkpoint: PATH", the
    model's "Test metrics generated." with the test KPIs (``simulate: {evaluate_kpis: false}``: none)."""
    checkpoint = job.section("evaluate").get("checkpoint")
    if checkpoint in (None, "", "???"):
        raise MissingValue("evaluate.checkpoint")
    job.status.write(f"Loading checkpoint: {checkpoint}")
    job.trainer_devices()
    if not job.ctx.host_path(str(checkpoint), job.cwd).is_file():   # load_from_checkpoint -> fsspec open
        raise FileNotFoundError(f"[Errno 2] No such file or directory: '{checkpoint}'")
    time.sleep(float(job.sim.get("epoch_seconds", 0.05)))
    print("Testing DataLoader 0: 100%|##########| 4/4 [00:00<00:00, 40.00it/s]", flush=True)
    if job.sim.get("evaluate_kpis", True):
        job.status.kpi = test_kpis(job.arch, job.cfg)
        job.status.write("Test metrics generated.")


class MissingValue(Exception):
    """omegaconf.errors.MissingMandatoryValue, as reading a ``???`` field raises it."""

    def __init__(self, key: str):
        section = key.split(".")[0]
        super().__init__(f"Missing mandatory value: {key}\n    full_key: {key}\n    object_type={section}")


MissingValue.__module__ = "omegaconf.errors"
MissingValue.__name__ = MissingValue.__qualname__ = "MissingMandatoryValue"


def other(job: Job) -> None:
    """export / inference / the rest: "Loading checkpoint: PATH" when the action names one."""
    checkpoint = job.section(job.action).get("checkpoint")
    if checkpoint not in (None, "", "???"):
        job.status.write(f"Loading checkpoint: {checkpoint}")
    time.sleep(float(job.sim.get("epoch_seconds", 0.05)))


def run(job: Job) -> None:
    {"train": train, "evaluate": evaluate}.get(job.action, other)(job)
    if sys.stdout:
        sys.stdout.flush()


# -- pointpillars: its own training loop, not Lightning ------------------------------------------------
def pointpillars_train(job: Job) -> None:
    """tao-pytorch pointcloud/pointpillars/scripts/train.py and tools/train_utils/train_utils.py:
    status.json directly in results_dir (no ``<action>/``), STARTED "Starting PointPillars training",
    one "Train metrics generated." line per epoch with the 0-based ``epoch``, ``max_epoch`` =
    total_epochs, ``eta`` and the KPIs (learning_rate, loss) on it, ``checkpoint_epoch_<N>.pth`` (N
    the trained epochs, from 1) every checkpoint_interval, no ``_latest`` link; resume only from
    ``train.resume_training_checkpoint_path``; RUNNING "Training finished successfully." at the end;
    an exception: a FAILURE line with its text (train.py __main__), then the traceback."""
    job.status.write("Starting PointPillars training", status="STARTED")
    try:
        train_cfg, sim = job.section("train"), job.sim
        epochs = int(train_cfg.get("num_epochs") or 1)
        interval = int(train_cfg.get("checkpoint_interval") or 1)
        job.trainer_devices()
        start = 0
        resume = train_cfg.get("resume_training_checkpoint_path")
        if resume:
            start = read_checkpoint(job.ctx.host_path(resume, job.cwd), resume)["epoch"] + 1
        epoch_seconds = float(sim.get("epoch_seconds", 0.05))
        for epoch in range(start, epochs):
            began = time.time()
            time.sleep(epoch_seconds)
            print(f"epochs: {epoch + 1}/{epochs}", flush=True)
            elapsed = time.time() - began
            job.status.kpi = {"learning_rate": 0.003, "loss": train_kpis(epoch, sim)["train_loss"]}
            job.status.write("Train metrics generated.", data={
                "epoch": epoch, "time_per_epoch": str(_dt.timedelta(seconds=elapsed)), "max_epoch": epochs,
                "eta": str(_dt.timedelta(seconds=(epochs - epoch) * elapsed))})
            if (epoch + 1) % interval == 0:
                name = f"checkpoint_epoch_{epoch + 1}.pth"
                write_checkpoint(job.out_dir / name, epoch, (epoch + 1) * STEPS_PER_EPOCH)
            after_epoch(job, epoch)
    except Exception as exc:
        job.status.write(str(exc), status="FAILURE")
        raise
    job.status.write("Training finished successfully.")
