"""What TAO 7's status.json lines mean: epochs, KPI lines, FAILURE lines, the end.

The sources (tao-pytorch 7.0.1, nvidia-tao-core 7.3.0):

- ``nvidia_tao_core/loggers/logging.py`` ``BaseLogger.write``: every line carries the logger's
  last ``kpi`` dict once a model has set one, so a dict repeats on later lines until a new one is
  set (a repeat is not a new value).
- ``nvidia_tao_pytorch/core/callbacks/loggers.py:121-138`` ``TAOStatusLogger.on_train_epoch_end``:
  ``epoch`` is Lightning's ``current_epoch`` (from 0) of the epoch that just ended,
  ``max_epoch`` is ``max_epochs - 1``, plus ``step`` / ``max_step`` (global steps) and
  ``time_per_epoch`` / ``eta``. After that line ``epoch + 1`` epochs are complete, of
  ``max_epoch + 1``.
- the Lightning models' hooks (e.g. ``cv/visual_changenet/segmentation/models/cn_pl_model.py``):
  "Eval metrics generated." (validation, run inside the epoch, so before that epoch's callback
  line) and "Train metrics generated." (the model's ``on_train_epoch_end``, after it).
- ``core/tlt_logging.py:124-139`` (dual logging): every ERROR-level log call is a
  ``"status": "FAILURE"`` line while the job goes on; a FAILURE line is not the end.
- ``core/decorators/workflow.py:59-62`` ``monitor_status``: a success ends with
  ``"status": "RUNNING"``, "<Action> finished successfully." (TAO 7 never writes SUCCESS; older
  containers did); its caught exceptions end with a FAILURE line, then the process exits 1,
  except one: ``workflow.py:68-73`` catches ``KeyboardInterrupt`` / ``SystemError``, writes the
  FAILURE line "User/System interruption: <Action> was interrupted" and does not re-raise, so the
  container exits 0 (the scripts' own catches, e.g. ``cv/dino/scripts/convert.py:30-35``, write
  "Dataset convert was interrupted" the same way). Such a line after the end of a success (or
  with no end) means the run did not finish (:func:`interrupted`).
- ``core/initialize_experiments.py:70-73``: "Resuming training from checkpoint: PATH".
- pointpillars' own loop (``pointcloud/pointpillars/tools/train_utils/train_utils.py:84-99``):
  one "Train metrics generated." line per epoch with the 0-based ``epoch``, ``max_epoch`` =
  total_epochs and its KPIs on the same line.

Lines without ``max_epoch`` (TAO's mmlab loggers: one line per iteration) name the epoch in
progress as written; they count no completed epochs.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, TypedDict, Union

from .logcap import cut_redacted
from .vocabulary import TaoStatus

# A KPI name -> its value, cleaned (``progress_kpi.clean_kpi``): a number, or "nan"/"inf"/"-inf" or a
# string cut to 80 (the answers' ``kpi``, references/schemas/poll_status.schema.json ``$defs/kpi``).
Kpi = Dict[str, Union[float, str]]


class StatusLine(TypedDict, total=False):
    """One JSON line of ``status.json``: the keys TAO writes (nvidia-tao-core
    ``nvidia_tao_core/loggers/logging.py`` ``BaseLogger.write`` / ``StatusLogger``: ``date``,
    ``time``, ``status``, ``verbosity``, ``message``, the logger's ``kpi`` / ``graphical`` /
    ``categorical`` dicts; tao-pytorch ``core/callbacks/loggers.py:121-138``: ``epoch``,
    ``max_epoch``, ``step``, ``max_step``, ``time_per_epoch`` / ``eta`` as ``str(timedelta)``).
    A document from outside: a foreign or older line may carry other types (numbers as text,
    seconds as numbers) or other keys (mmlab's loose ``loss`` / ``lr``), so every reader checks
    the value it reads."""
    date: str
    time: str
    status: str
    verbosity: str
    message: str
    kpi: dict[str, object]
    graphical: dict[str, object]
    categorical: dict[str, object]
    epoch: int
    max_epoch: int
    step: int
    max_step: int
    time_per_epoch: object
    eta: object

MAX_WARNINGS = 5                 # FAILURE lines kept in an answer (the newest)
WARNING_CHARS = 200
_FINISHED = re.compile(r"finished successfully\.?\s*$", re.I)
_INTERRUPTED = re.compile(r"^\s*(User/System interruption:.*|[\w ]+ was interrupted\.?)\s*$", re.I)
INTERRUPTED_NOTE = ("the container exited 0 but the run did NOT finish: TAO caught an interrupt (KeyboardInterrupt / "
                    "SystemError), wrote its FAILURE line \"... was interrupted\" and exited 0 (tao-pytorch "
                    "core/decorators/workflow.py:68-73); resubmit or resume it")
_METRICS_LINE = re.compile(r"metrics generated", re.I)
_EVAL_LINE = re.compile(r"^\s*(eval|validation)\b", re.I)
_RESUMING = re.compile(r"^Resuming training from checkpoint: (\S+)")


def _int(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(value) if abs(value) < 1e12 else None


def epochs_done(item: StatusLine) -> int | None:
    """Completed epochs after this line: ``epoch + 1`` on a TAOStatusLogger line (it has
    ``max_epoch``); the epoch as written on other epoch lines; None without ``epoch``."""
    epoch = _int(item.get("epoch"))
    if epoch is None:
        return None
    return epoch + 1 if _int(item.get("max_epoch")) is not None else epoch


def num_epochs(item: StatusLine) -> int | None:
    """The planned number of epochs (None without ``max_epoch``): ``max_epoch + 1`` on a
    TAOStatusLogger line (it has ``step`` / ``max_step``); ``max_epoch`` itself on the lines of
    pointpillars' own loop (``pointcloud/pointpillars/tools/train_utils/train_utils.py:89-94``:
    ``max_epoch`` is total_epochs there, ``epoch`` the 0-based epoch that ended)."""
    max_epoch = _int(item.get("max_epoch"))
    if max_epoch is None or max_epoch < 0:
        return None
    lightning = _int(item.get("step")) is not None or _int(item.get("max_step")) is not None
    return max_epoch + 1 if lightning else (max_epoch or None)


def current_run(items: list[StatusLine]) -> list[StatusLine]:
    """The lines from the newest run start on: a STARTED line other than the training loop's
    ("Starting <Name> <mode>.", workflow.py:54-57). A resumed run appends to the status.json of
    the run it resumes (StatusLogger append=True): that run's end and warnings are not its own."""
    for i in range(len(items) - 1, -1, -1):
        item = items[i]
        if item.get("status") == TaoStatus.STARTED and item.get("message") != "Starting Training Loop.":
            return items[i:]
    return items


def _is_end(item: StatusLine) -> bool:
    return bool(_FINISHED.search(str(item.get("message") or ""))) or item.get("status") == TaoStatus.SUCCESS


def is_interruption(item: StatusLine) -> bool:
    """A FAILURE line of an interrupt TAO caught (workflow.py:68-73: the process then exits 0). Its
    verbosity is INFO; an ERROR-level log call (tlt_logging.py:124-139) is a warning, not this."""
    return (item.get("status") == TaoStatus.FAILURE and item.get("verbosity") != "ERROR"
            and bool(_INTERRUPTED.match(str(item.get("message") or ""))))


def interrupted(items: list[StatusLine]) -> str | None:
    """The message of the newest caught-interrupt FAILURE line after TAO's last end of a success
    (all lines when there is none), else None: such a run did not finish even when it exits 0."""
    last_end = max((i for i, x in enumerate(items) if _is_end(x)), default=-1)
    for item in reversed(items[last_end + 1:]):
        if is_interruption(item):
            return str(item.get("message"))
    return None


def finished(items: list[StatusLine]) -> bool:
    """Whether TAO wrote its end of a success: "... finished successfully." (or an older SUCCESS)
    and no caught-interrupt FAILURE line after it (:func:`interrupted`)."""
    return any(_is_end(x) for x in items) and interrupted(items) is None


def warnings(items: list[StatusLine]) -> list[str]:
    """The messages of the FAILURE lines read (the newest MAX_WARNINGS), each cut to WARNING_CHARS."""
    found = [cut_redacted(str(x.get("message") or "FAILURE line without a message"), WARNING_CHARS)
             for x in items if x.get("status") == TaoStatus.FAILURE]   # redacted, then cut
    return found[-MAX_WARNINGS:]


def resumed_from(items: list[StatusLine]) -> str | None:
    """The checkpoint of the newest "Resuming training from checkpoint: PATH" line read."""
    for item in reversed(items):
        match = _RESUMING.match(str(item.get("message") or ""))
        if match:
            return cut_redacted(match.group(1), 300)
    return None


def is_eval(item: StatusLine, kpi: Kpi) -> bool:
    """A validation KPI line: its message says so, or every KPI name starts with ``val``."""
    message = str(item.get("message") or "")
    return bool(_EVAL_LINE.search(message)) or (bool(kpi) and all(k.startswith("val") for k in kpi))


def epoch_rows(items: list[StatusLine], line_kpi: Callable[[StatusLine], Kpi]) -> list[tuple[int, Kpi]]:
    """[(completed epochs, {kpi: value})], by epoch.

    A KPI dict counts once: on the line that sets it (it differs from the previous line's, or
    the line says "metrics generated"), never on the lines that repeat it. A new validation dict
    belongs to the next epoch line (validation runs inside the epoch, before its callback line);
    any other new dict to the last epoch line before it. An epoch that appears again (a resumed
    run re-running it) replaces its earlier row."""
    rows: dict[int, Kpi] = {}
    order: list[int] = []
    pending: Kpi = {}
    previous: Kpi | None = None
    for item in items:
        kpi = line_kpi(item)
        new = bool(kpi) and (kpi != previous or bool(_METRICS_LINE.search(str(item.get("message") or ""))))
        previous = kpi
        done = epochs_done(item)
        if done is not None:
            if not order or order[-1] != done:
                if done in rows:
                    order.remove(done)
                rows[done] = dict(pending)
                order.append(done)
                pending = {}
            if new:
                rows[done].update(kpi)
        elif new:
            if is_eval(item, kpi) or not order:
                pending.update(kpi)
            else:
                rows[order[-1]].update(kpi)
    return [(n, rows[n]) for n in sorted(order)]
