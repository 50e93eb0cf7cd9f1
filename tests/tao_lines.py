"""status.json lines written by TAO's own logger, in the order TAO 7's training writes them.

The writer is nvidia-tao-core 7.3.0's ``StatusLogger`` (``nvidia_tao_core/loggers/logging.py``),
created as tao-pytorch ``core/decorators/workflow.py:45-51`` creates it (``verbosity=1``,
``append=True``); its clock (``datetime.now`` in that module) is the test's. The order of the
lines follows tao-pytorch 7.0.1 and PyTorch Lightning 2.x:

- ``workflow.py:54-57`` STARTED "Starting <Name> <mode>.";
- ``initialize_experiments.py:70-73`` "Resuming training from checkpoint: PATH";
- ``callbacks/loggers.py:86-91`` STARTED "Starting Training Loop.";
- per epoch (current_epoch e from 0): validation inside the epoch when
  ``(e + 1) % validation_interval == 0`` ("Eval metrics generated.", the model's
  ``on_validation_epoch_end``, e.g. cv/visual_changenet/segmentation/models/cn_pl_model.py:401),
  then the callbacks' ``on_train_epoch_end`` (``loggers.py:121-138``: epoch, step, max_epoch =
  num_epochs - 1, max_step, time_per_epoch, time_per_step, eta), then the model's
  ``on_train_epoch_end`` ("Train metrics generated.", cn_pl_model.py:357);
- an ERROR-level log call: ``core/tlt_logging.py:124-139`` writes it as FAILURE, verbosity ERROR;
- ``loggers.py:140-145`` "Training loop complete.", ``workflow.py:59-62`` RUNNING
  "Train finished successfully." (no SUCCESS line).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
from pathlib import Path

from nvidia_tao_core.loggers import logging as core_logging

from tao_brev.progress import StatusFile

STEPS = 25
T0 = 1_795_000_000.0   # an arbitrary instance time (epoch seconds)


def val_kpis(epoch: int) -> dict:
    return {"val_loss": round(1.1 / (epoch + 2), 6), "val_acc": round(1 - 0.5 / (epoch + 1), 6)}


def train_kpis(epoch: int) -> dict:
    return {"train_loss": round(1.0 / (epoch + 2), 6)}


class TaoWriter:
    """A TAO job's status.json at ``path``, written by nvidia-tao-core's StatusLogger at ``now``."""

    def __init__(self, path: Path, now: float = T0):
        self.path, self.now, self.written = path, now, now
        self.logger = self._new_logger()

    def _new_logger(self):
        with self.clock():
            return core_logging.StatusLogger(filename=str(self.path), is_master=True, verbosity=1, append=True)

    @contextlib.contextmanager
    def clock(self):
        """The logger's ``datetime.now`` is the test's clock; its console echo is silenced."""
        writer = self

        class Clock(_dt.datetime):
            @classmethod
            def now(cls, tz=None):
                return _dt.datetime.fromtimestamp(writer.now, tz)

        real, console = core_logging.datetime, logging.getLogger("TAO Toolkit")
        core_logging.datetime, console.disabled = Clock, True
        try:
            yield
        finally:
            core_logging.datetime, console.disabled = real, False

    def write(self, message: str, status: str = "RUNNING", verbosity: str = "INFO", data: dict | None = None):
        self.written = self.now
        with self.clock():
            self.logger.write(data=data, status_level=getattr(core_logging.Status, status),
                              verbosity_level=getattr(core_logging.Verbosity, verbosity), message=message)

    def restart(self) -> None:
        """A new container process: a new logger (its kpi empty), appending to the same file."""
        self.logger = self._new_logger()

    def start(self, mode: str = "train", name: str = "Visual ChangeNet") -> None:
        self.write(f"Starting {name} {mode}.", status="STARTED")

    def train(self, num_epochs: int, *, first: int = 0, last: int | None = None, validation_interval: int = 1,
              epoch_s: float = 60.0, errors: dict | None = None, resume: str | None = None,
              end: bool = True) -> None:
        """Epochs ``first`` .. ``last`` (default: to the end) of a run of ``num_epochs``."""
        if resume:
            self.write(f"Resuming training from checkpoint: {resume}")
        self.write("Starting Training Loop.", status="STARTED")
        stop = num_epochs if last is None else last + 1
        for epoch in range(first, stop):
            self.now += epoch_s
            if epoch in (errors or {}):
                self.write(errors[epoch], status="FAILURE", verbosity="ERROR")
            if (epoch + 1) % validation_interval == 0:
                self.logger.kpi = val_kpis(epoch)
                self.write("Eval metrics generated.")
            eta = (num_epochs - 1 - epoch) * epoch_s
            self.write("Training loop in progress", data={
                "epoch": epoch, "step": (epoch + 1) * STEPS, "max_epoch": num_epochs - 1,
                "max_step": num_epochs * STEPS, "time_per_epoch": str(_dt.timedelta(seconds=epoch_s)),
                "time_per_step": str(_dt.timedelta(seconds=epoch_s / STEPS)),
                "eta": str(_dt.timedelta(seconds=eta))})
            self.logger.kpi = train_kpis(epoch)
            self.write("Train metrics generated.")
        if end and stop == num_epochs:
            self.write("Training loop complete.")
            self.write("Train finished successfully.")

    def evaluate(self, kpis: dict | None, checkpoint: str = "/results/train/model_epoch_002_step_00075.pth"):
        """core/initialize_experiments.py:125-127, the model's "Test metrics generated.", the end."""
        self.start("evaluate")
        self.write(f"Loading checkpoint: {checkpoint}")
        self.now += 30
        if kpis:
            self.logger.kpi = kpis
            self.write("Test metrics generated.")
        self.write("Evaluate finished successfully.")

    def file(self, rel: str = "train/status.json", last: int | None = None) -> StatusFile:
        """The file as the poll reads it (its last ``last`` lines; mtime = the last write)."""
        lines = self.path.read_text().splitlines()
        return StatusFile(rel, int(self.written), self.path.stat().st_size, lines[-last:] if last else lines)
