"""Training progress, metrics and stall detection from TAO's ``status.json``.

TAO containers append one JSON object per line to
``<results_dir>/<action>/status.json`` (nvidia-tao-core ``nvidia_tao_core/loggers/logging.py``
``StatusLogger``, whose format the tao-pytorch logger shares; older archs write
``<results_dir>/status.json``): ``date`` (``M/D/YYYY``), ``time`` (``H:M:S``, the container's
clock), ``status`` (STARTED, RUNNING, FAILURE; SUCCESS only from older containers),
``verbosity``, ``message``, and once set ``kpi`` (repeated on every later line). What the lines
mean (epochs from 0, KPI lines, FAILURE lines while training goes on, the success message) is
in :mod:`tao_brev.tao_status`. A field comes from the newest line that carries it: the epoch
fields from the newest epoch line, ``status`` / ``message`` from the last line, each KPI's
latest value.

Everything here is a pure function of the lines read and of ``now`` (the
instance's clock, epoch seconds), so tests inject the clock. File ages use
the file's mtime on the instance, never the line's ``date``/``time`` (whose
time zone is the container's); line times are only subtracted from each
other (the observed epoch rate, the age of the epoch line). Missing, partial or
foreign lines are normal (older archs, evaluate/inference, a line being written):
they are counted, never an error. ``references/progress.md`` documents the answers.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import cast

from . import tao_status
from .logcap import cut_redacted
from .model.answer_types import KpiPoint, Metrics, MetricsBestValue, Progress
from .progress_kpi import MAX_KPIS, clean_kpi, epoch_table, goal, line_kpi  # noqa: F401 (handed on)
from .progress_stall import (STALL_ADVICE, STALL_EPOCH_MULTIPLE, STALL_FALLBACK_S,  # noqa: F401 (handed on)
                             STALL_FLOOR_S, assess_stall, iso, rfc3339_epoch, stall_threshold)
from .secrets.safe_read import bounded_int
from .tao_status import Kpi, StatusLine
from .vocabulary import JobState, TaoStatus

METRICS_DEFAULT_EPOCHS = 10     # --metrics without a number
METRICS_MAX_EPOCHS = 200
_TIMEDELTA = re.compile(r"^(?:(-?\d{1,9}) days?, )?(\d{1,9}):(\d{1,2}):(\d{1,2}(?:\.\d{1,9})?)$")
BOUND = 10**12   # numbers of a status line beyond this (epochs, seconds) are no facts: ignored (bounded parse)


@dataclass
class StatusFile:
    """One status file read on the instance."""

    path: str                  # under the results dir: "<action>/status.json" or "status.json"
    mtime: int                 # epoch seconds, instance clock
    size: int
    lines: list[str] = field(default_factory=list)
    long_lines: int = 0        # lines longer than remote.MAX_STATUS_LINE (not read)


@dataclass
class JobProbe:
    """What ``__tb_jobs`` printed for one container."""

    state: str = ""                                   # docker .State JSON text
    files: list[StatusFile] = field(default_factory=list)
    tail: str | None = None                           # log tail of a container that exited non-zero


def parse_files(text: str, token: str) -> list[StatusFile]:
    """The ``__tb_progress`` output of one results dir."""
    return parse_jobs(text, token, single=True)[0][None].files


def parse_jobs(text: str, token: str, single: bool = False) -> tuple[dict[str | None, JobProbe], str]:
    """(``{job_id: JobProbe}``, other text) from ``__tb_jobs`` output; ``single``:
    one ``__tb_progress`` output under the key None. The other text is what no
    marker claimed (docker's error messages)."""
    jobs: dict[str | None, JobProbe] = {None: JobProbe()} if single else {}
    noise: list[str] = []
    job: JobProbe | None = jobs.get(None)
    file: StatusFile | None = None
    tail: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(f"{token}:J\t"):
            parts = line.split("\t", 2)
            job, file, tail = JobProbe(state=parts[2] if len(parts) == 3 else ""), None, None
            jobs[parts[1]] = job
        elif line.startswith(f"{token}:F ") and job is not None:
            parts, file, tail = line.split(" ", 3), None, None
            try:
                file = StatusFile(parts[3], int(parts[1]), int(parts[2]))
            except (IndexError, ValueError):
                continue
            job.files.append(file)
        elif line.startswith(f"{token}:LONG") and file is not None:
            file.long_lines += 1
        elif line == f"{token}:T" and job is not None:
            file, tail = None, []
            job.tail = ""
        elif tail is not None and job is not None:   # a tail follows its job's marker
            tail.append(line)
            job.tail = "\n".join(tail)
        elif file is not None:
            file.lines.append(line)
        elif line.strip():
            noise.append(line)
    return jobs, "\n".join(noise)


def pick(files: list[StatusFile], action: str) -> StatusFile | None:
    """The job's file: ``<action>/status.json``, else ``status.json`` (older archs)."""
    by_path = {f.path: f for f in files}
    return by_path.get(f"{action}/status.json") or by_path.get("status.json")


# -- values -----------------------------------------------------------------------
def seconds(value: object) -> float | None:
    """``time_per_epoch`` / ``eta``: a ``str(timedelta)`` (``1 day, 2:03:04.5``) or a number of seconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) and 0 <= value < BOUND else None
    if isinstance(value, str):
        match = _TIMEDELTA.match(value.strip().strip('"'))
        if match:
            days, hours, minutes, secs = match.groups()
            return int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(secs)
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) and 0 <= number < BOUND else None
    return None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value) and abs(value) < BOUND:
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d{1,12}\s*", value):
        return int(value)
    return None


def _line_time(entry: StatusLine) -> float | None:
    """The line's own time as seconds on the container's (unknown-zone) clock: only for differences."""
    try:
        stamp = datetime.strptime(f"{entry['date']} {entry['time']}", "%m/%d/%Y %H:%M:%S")
    except (KeyError, TypeError, ValueError):
        return None
    return stamp.replace(tzinfo=timezone.utc).timestamp()


# -- lines -> progress ----------------------------------------------------------
def entries(lines: list[str]) -> tuple[list[StatusLine], int]:
    """(the JSON objects, how many lines were not one: partial or foreign)."""
    out: list[StatusLine] = []
    bad = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line, parse_int=bounded_int)
        except (ValueError, RecursionError):   # not JSON, or nested past the parser's limit
            bad += 1
            continue
        if isinstance(entry, dict):
            out.append(cast(StatusLine, entry))   # TAO's line as read: each value is checked where it is read
        else:
            bad += 1
    return out, bad


def _epoch_line_age(items: list[StatusLine], latest: StatusLine, since: int) -> float:
    """Seconds since the epoch line was written: the file's age plus the line times between it and
    the last line (both on the container's clock; later KPI lines renew the file's mtime)."""
    last, at = _line_time(items[-1]), _line_time(latest)
    return since + (last - at if last is not None and at is not None and last >= at else 0.0)


def summarize(file: StatusFile | None, now: float | None, action: str = "") -> Progress:
    """The ``progress`` object of an answer (``references/progress.md``)."""
    if file is None:
        return {"available": False,
                "note": f"no status.json under the results dir yet (normal before the container starts, for "
                        f"archs that do not write one, and for some {action or 'non-train'} actions)"}
    items, bad = entries(file.lines)
    out: Progress = {"available": bool(items), "file": file.path,
                     "updated_at": iso(file.mtime) if file.mtime else None,
                     "since_update_s": max(0, int(now - file.mtime)) if now and file.mtime else None}
    if bad or file.long_lines:
        out["unreadable_lines"] = bad + file.long_lines
    if not items:
        out["note"] = "status.json holds no complete line yet"
        return out
    last = items[-1]
    out["status"] = cut_redacted(str(last.get("status") or ""), 20) or None
    if last.get("message"):
        out["message"] = cut_redacted(str(last["message"]), 200)
    run = tao_status.current_run(items)
    done = tao_status.finished(run)
    if done:
        out["finished"] = True
    warnings, resumed_from = tao_status.warnings(run), tao_status.resumed_from(run)
    if warnings:
        out["warnings"] = warnings
    if resumed_from:
        out["resumed_from"] = resumed_from
    if tao_status.interrupted(run) is not None:   # TAO caught an interrupt: exit 0, unfinished
        out["interrupted"] = True
    latest_kpi: Kpi = {}
    for item in items:   # the latest value of each KPI name (validation and training lines differ)
        latest_kpi.update(line_kpi(item))
    if latest_kpi:
        out["kpi"] = dict(list(latest_kpi.items())[-MAX_KPIS:])
    epoch_items = [(n, x) for x in items if (n := tao_status.epochs_done(x)) is not None]
    if not epoch_items:
        if action in ("", "train"):
            out["note"] = "no epoch line yet (before the first epoch ends, or an arch that writes none)"
        return out
    epoch, latest = epoch_items[-1]
    total = tao_status.num_epochs(latest)
    out["epoch"], out["num_epochs"] = epoch, total
    step, max_step = _int(latest.get("step")), _int(latest.get("max_step"))
    if step is not None:
        out["step"] = step
    if max_step is not None:
        out["max_step"] = max_step
    # ETA: the remaining epochs x time_per_epoch; else the line's own eta; else the remaining
    # epochs x the epoch rate observed between lines. Minus the time since the epoch line.
    tpe = seconds(latest.get("time_per_epoch"))
    observed = observed_epoch_seconds(items) if tpe is None else None
    rate = tpe if tpe is not None else observed
    out["time_per_epoch_s"] = round(rate, 3) if rate is not None and (tpe or observed) is not None else None
    if total:
        out["percent"] = 100.0 if done else round(min(100.0, 100.0 * epoch / total), 1)
    since = _epoch_line_age(items, latest, out["since_update_s"] or 0)
    eta_field = seconds(latest.get("eta"))
    out["eta_s"] = None
    if done:
        out["eta_s"] = 0
    elif total and tpe is not None:
        out["eta_s"], out["eta_source"] = int(max(0.0, (total - epoch) * tpe - since)), "time_per_epoch"
    elif eta_field is not None:
        out["eta_s"], out["eta_source"] = int(max(0.0, eta_field - since)), "eta_field"
    elif total and observed is not None:
        out["eta_s"], out["eta_source"] = int(max(0.0, (total - epoch) * observed - since)), "observed_rate"
    return out


def eta_note(progress: Progress, action: str, now: float | None, started_at: str | None) -> str | None:
    """Why a RUNNING train job's ``progress`` has no ETA: no epoch has finished yet (how long the
    container has run: ``now`` and docker's ``StartedAt``, both the instance's clock). None once
    an epoch finished or an ETA exists, and for actions without epochs (evaluate, inference)."""
    if action not in ("", "train") or progress.get("eta_s") is not None or progress.get("epoch"):
        return None
    started = rfc3339_epoch(started_at)
    ran = f" (the container has run {max(0, int(now - started))} s)" if now and started is not None else ""
    return f"no epoch finished yet{ran}; an ETA comes after the first epoch"


def observed_epoch_seconds(items: list[StatusLine]) -> float | None:
    """Seconds per epoch from the line times: the last two epoch lines with different
    epochs, else the STARTED line to the last epoch line."""
    timed = [(e, t) for e, t in ((tao_status.epochs_done(x), _line_time(x)) for x in items)
             if e is not None and t is not None]
    for (e1, t1) in reversed(timed[:-1]):
        e2, t2 = timed[-1]
        if e2 > e1 and t2 >= t1:
            return (t2 - t1) / (e2 - e1)
    if timed:
        started = [_line_time(x) for x in items if x.get("status") == TaoStatus.STARTED]
        e2, t2 = timed[-1]
        if started and started[-1] is not None and e2 > 0 and t2 >= started[-1]:
            return (t2 - started[-1]) / e2
    return None


# -- ends -----------------------------------------------------------------------
def after_end(progress: Progress, terminal: str | None, action: str = "", job_id: str = "JOB_ID") -> Progress:
    """``progress`` of a job that ended (``terminal``: its docker end, COMPLETE for exit 0), TAO's ``status`` word
    kept as ``last_tao_status`` (the job's state is the answer's ``state``). COMPLETE with TAO's
    "finished successfully" line: done (100 %, no ETA left). Else (no such line, an interrupt TAO caught, any other
    end): no ETA, a note that says which. An evaluate that ended COMPLETE without any KPI says so."""
    if not terminal or not progress.get("available"):
        return progress
    out = progress.copy()
    out.pop("eta_source", None)
    out.pop("status", None)
    if "status" in progress:   # TAO writes RUNNING even on its end line: its last word, not the job's state
        out["last_tao_status"] = progress["status"]
    tao_word = out.get("last_tao_status")
    if terminal == JobState.COMPLETE and progress.get("finished"):
        out["eta_s"] = 0
        if action == "evaluate" and not progress.get("kpi"):
            out["note"] = ("the evaluate finished but wrote no KPIs to status.json (the model logged none): "
                           f"read its logs (poll_status.py {job_id} --logs 50) for the metrics it printed")
        return out
    out["eta_s"] = None
    if tao_word == TaoStatus.FAILURE and terminal != JobState.COMPLETE:
        out["note"] = (f"the job ended {terminal}; TAO's last status line is FAILURE: "
                       f"{progress.get('message', '')}")[:300]
    elif terminal == JobState.COMPLETE:
        out["note"] = tao_status.INTERRUPTED_NOTE if progress.get("interrupted") else (
            "the container exited 0 but status.json has no \"finished successfully\" line: TAO did not "
            "report the end of the run (its last line: " + str(progress.get("message", ""))[:120] + ")")
    else:
        out["note"] = (f"the job ended {terminal}; last_tao_status {tao_word} is the status file's last line, "
                       "written before the end")
    return out


# -- metrics --------------------------------------------------------------------
def metrics(file: StatusFile | None, last: int = METRICS_DEFAULT_EPOCHS) -> Metrics:
    """``--metrics``: the last ``last`` epochs' KPIs and each KPI's best, last, min and max
    with their epochs, over every epoch line read (up to the last 4 MiB of the file)."""
    if file is None:
        return {"available": False, "epochs": [], "best": {}}
    items, _bad = entries(file.lines)
    rows = epoch_table(items)
    seen: dict[str, _Extremes] = {}
    for epoch, row in rows:
        for name, value in row.items():
            if not isinstance(value, (int, float)):
                continue
            entry = seen.get(name)
            if entry is None:
                seen[name] = _Extremes(_point(value, epoch), _point(value, epoch), _point(value, epoch))
                continue
            if value < entry.min["value"]:
                entry.min = _point(value, epoch)
            if value > entry.max["value"]:
                entry.max = _point(value, epoch)
            entry.last = _point(value, epoch)
    out: Metrics = {"available": bool(rows), "file": file.path, "epochs_read": len(rows),
                    "epochs": [{"epoch": e, "kpi": row} for e, row in rows[-last:]],
                    "best": {name: entry.to_json(goal(name)) for name, entry in seen.items()}}
    if len(rows) > last:
        out["truncated"] = True
    return out


@dataclass
class _Extremes:
    """One KPI's lowest, highest and last value over the epochs read (each with its epoch)."""

    min: KpiPoint
    max: KpiPoint
    last: KpiPoint

    def to_json(self, goal: str | None) -> MetricsBestValue:
        """``best``'s entry of the KPI: its goal (``min`` / ``max`` / None), the best by that goal
        (None without a goal), min, max and last."""
        best = self.min if goal == "min" else self.max if goal == "max" else None
        return {"goal": goal, "min": self.min, "max": self.max, "last": self.last, "best": best}


def _point(value: float, epoch: int) -> KpiPoint:
    """A KPI's value at an epoch (the shape of ``best``, ``min``, ``max`` and ``last``)."""
    return {"value": value, "epoch": epoch}
