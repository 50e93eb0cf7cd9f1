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

from . import tao_status
from .logcap import cut_redacted
from .secrets.safe_read import bounded_int

STALL_EPOCH_MULTIPLE = 3        # default --stall-after: this many times the time per epoch ...
STALL_FLOOR_S = 1800            # ... but never less than 30 min (tqdm-only output, long validations)
STALL_FALLBACK_S = 3600         # before the first epoch line: 60 min, the TAO API's own default inactivity
                                # timeout (tao-core microservices/utils/job_utils/timeout_monitor.py)
MAX_KPIS = 24                   # KPI names kept per line
METRICS_DEFAULT_EPOCHS = 10     # --metrics without a number
METRICS_MAX_EPOCHS = 200
STALL_ADVICE = ("the container runs but writes nothing: usually a hung data loader (raise --shm-size or lower "
                "num_workers), an NCCL collective waiting for a peer (NCCL timeout; resubmit with "
                "NCCL_DEBUG=INFO), or I/O stalled on a full or slow disk. Look at poll_status.py {job} --logs 50; "
                "then teardown.py {job} stops the billing, and submit.py ... --resume-from JOB_ID continues from "
                "its last checkpoint. If epochs are legitimately this slow, poll_status.py {job} --stall-after "
                "with more seconds.")

_LOWER_IS_BETTER = re.compile(r"loss|err|mse|mae|rmse|wer|cer|perplexity|distance|fpr|fnr|miss", re.I)
_HIGHER_IS_BETTER = re.compile(r"acc|map|\bap|ap\d|_ap|precision|recall|f1|iou|dice|auc|score|psnr|ssim|tpr", re.I)
_NOT_A_GOAL = re.compile(r"^(lr|learning_rate|.*_lr)$|epoch|step|iter|time", re.I)
_TIMEDELTA = re.compile(r"^(?:(-?\d{1,9}) days?, )?(\d{1,9}):(\d{1,2}):(\d{1,2}(?:\.\d{1,9})?)$")
BOUND = 10**12   # numbers of a status line beyond this (epochs, seconds) are no facts: ignored (bounded parse)


@dataclass
class StatusFile:
    """One status file read on the instance."""

    path: str                  # under the results dir: "<action>/status.json" or "status.json"
    mtime: int                 # epoch seconds, instance clock
    size: int
    lines: list = field(default_factory=list)
    long_lines: int = 0        # lines longer than remote.MAX_STATUS_LINE (not read)


@dataclass
class JobProbe:
    """What ``__tb_jobs`` printed for one container."""

    state: str = ""                                   # docker .State JSON text
    files: list = field(default_factory=list)         # [StatusFile]
    tail: str | None = None                           # log tail of a container that exited non-zero


def parse_files(text: str, token: str) -> list[StatusFile]:
    """The ``__tb_progress`` output of one results dir."""
    return parse_jobs(text, token, single=True)[0][None].files


def parse_jobs(text: str, token: str, single: bool = False) -> tuple[dict, str]:
    """(``{job_id: JobProbe}``, other text) from ``__tb_jobs`` output; ``single``:
    one ``__tb_progress`` output under the key None. The other text is what no
    marker claimed (docker's error messages)."""
    jobs: dict = {None: JobProbe()} if single else {}
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
        elif tail is not None:
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
def seconds(value) -> float | None:
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


def _int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and math.isfinite(value) and abs(value) < BOUND:
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d{1,12}\s*", value):
        return int(value)
    return None


def _kpi_value(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if math.isfinite(value):
            return round(value, 6) if isinstance(value, float) else value
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        try:
            return _kpi_value(float(value))
        except ValueError:
            return cut_redacted(value, 80)
    return None


def clean_kpi(kpi) -> dict:
    """A line's ``kpi``: numbers kept (non-finite as "nan"/"inf"/"-inf"), strings cut to 80
    characters, other values dropped; at most MAX_KPIS names of up to 64 characters."""
    if not isinstance(kpi, dict):
        return {}
    out = {}
    for key, value in kpi.items():
        cleaned = _kpi_value(value)
        if cleaned is not None and len(out) < MAX_KPIS:
            out[cut_redacted(str(key), 64)] = cleaned
    return out


# Fields of a status line that are not metrics (TAO's logger fields, progress and mmlab bookkeeping).
_NOT_KPI_FIELDS = frozenset({"date", "time", "status", "verbosity", "message", "epoch", "max_epoch", "time_per_epoch",
                             "eta", "kpi", "graphical", "categorical", "mode", "phase", "iter", "cur_iter",
                             "max_iter", "max_iters", "step", "max_step", "time_per_step", "global_step", "memory",
                             "data_time"})


def line_kpi(item: dict) -> dict:
    """A line's metrics: ``kpi``, else numbers under ``graphical`` and numbers at the top
    level (TAO's mmlab loggers write ``loss`` and ``lr`` there), ``kpi`` winning."""
    loose = {k: v for k, v in item.items() if k not in _NOT_KPI_FIELDS and isinstance(v, (int, float))}
    graphical = item.get("graphical") if isinstance(item.get("graphical"), dict) else {}
    graphical = {k: v for k, v in graphical.items() if isinstance(v, (int, float))}
    merged = {**clean_kpi(loose), **clean_kpi(graphical), **clean_kpi(item.get("kpi"))}
    return dict(list(merged.items())[:MAX_KPIS])


def _line_time(entry: dict) -> float | None:
    """The line's own time as seconds on the container's (unknown-zone) clock: only for differences."""
    try:
        stamp = datetime.strptime(f"{entry['date']} {entry['time']}", "%m/%d/%Y %H:%M:%S")
    except (KeyError, TypeError, ValueError):
        return None
    return stamp.replace(tzinfo=timezone.utc).timestamp()


def iso(epoch_s: float | None) -> str | None:
    if epoch_s is None:
        return None
    return datetime.fromtimestamp(epoch_s, timezone.utc).isoformat(timespec="seconds")


def rfc3339_epoch(value: str | None) -> float | None:
    """Docker's ``2026-11-30T10:00:00.123456789Z`` (or with an offset) -> epoch seconds."""
    if not value:
        return None
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", value.strip())
    if not match or value.startswith("0001-01-01"):
        return None
    zone = match.group(3) or "Z"
    stamp = datetime.fromisoformat(match.group(1) + ("+00:00" if zone == "Z" else zone))
    return stamp.timestamp() + float(match.group(2) or 0)


# -- lines -> progress ----------------------------------------------------------
def entries(lines: list[str]) -> tuple[list[dict], int]:
    """(the JSON objects, how many lines were not one: partial or foreign)."""
    out, bad = [], 0
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
            out.append(entry)
        else:
            bad += 1
    return out, bad


def _epoch_line_age(items: list[dict], latest: dict, since: int) -> float:
    """Seconds since the epoch line was written: the file's age plus the line times between it and
    the last line (both on the container's clock; later KPI lines renew the file's mtime)."""
    last, at = _line_time(items[-1]), _line_time(latest)
    return since + (last - at if last is not None and at is not None and last >= at else 0.0)


def summarize(file: StatusFile | None, now: float | None, action: str = "") -> dict:
    """The ``progress`` object of an answer (``references/progress.md``)."""
    if file is None:
        return {"available": False,
                "note": f"no status.json under the results dir yet (normal before the container starts, for "
                        f"archs that do not write one, and for some {action or 'non-train'} actions)"}
    items, bad = entries(file.lines)
    out: dict = {"available": bool(items), "file": file.path, "updated_at": iso(file.mtime) if file.mtime else None,
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
    facts = (("warnings", tao_status.warnings(run)), ("resumed_from", tao_status.resumed_from(run)),
             ("interrupted", tao_status.interrupted(run) is not None))   # TAO caught an interrupt: exit 0, unfinished
    for key, value in facts:
        if value:
            out[key] = value
    latest_kpi: dict = {}
    for item in items:   # the latest value of each KPI name (validation and training lines differ)
        latest_kpi.update(line_kpi(item))
    if latest_kpi:
        out["kpi"] = dict(list(latest_kpi.items())[-MAX_KPIS:])
    epoch_items = [x for x in items if tao_status.epochs_done(x) is not None]
    if not epoch_items:
        if action in ("", "train"):
            out["note"] = "no epoch line yet (before the first epoch ends, or an arch that writes none)"
        return out
    latest = epoch_items[-1]
    epoch, total = tao_status.epochs_done(latest), tao_status.num_epochs(latest)
    out.update(epoch=epoch, num_epochs=total)
    for key in ("step", "max_step"):
        if _int(latest.get(key)) is not None:
            out[key] = _int(latest.get(key))
    # ETA: the remaining epochs x time_per_epoch; else the line's own eta; else the remaining
    # epochs x the epoch rate observed between lines. Minus the time since the epoch line.
    tpe = seconds(latest.get("time_per_epoch"))
    observed = observed_epoch_seconds(items) if tpe is None else None
    out["time_per_epoch_s"] = round(tpe if tpe is not None else observed, 3) if (tpe or observed) is not None else None
    if total:
        out["percent"] = 100.0 if done else round(min(100.0, 100.0 * epoch / total), 1)
    since = _epoch_line_age(items, latest, out["since_update_s"] or 0)
    eta_field = seconds(latest.get("eta"))
    out["eta_s"] = None
    if done:
        out["eta_s"] = 0
    elif total and tpe is not None:
        out.update(eta_s=int(max(0.0, (total - epoch) * tpe - since)), eta_source="time_per_epoch")
    elif eta_field is not None:
        out.update(eta_s=int(max(0.0, eta_field - since)), eta_source="eta_field")
    elif total and observed is not None:
        out.update(eta_s=int(max(0.0, (total - epoch) * observed - since)), eta_source="observed_rate")
    return out


def observed_epoch_seconds(items: list[dict]) -> float | None:
    """Seconds per epoch from the line times: the last two epoch lines with different
    epochs, else the STARTED line to the last epoch line."""
    timed = [(e, t) for e, t in ((tao_status.epochs_done(x), _line_time(x)) for x in items)
             if e is not None and t is not None]
    for (e1, t1) in reversed(timed[:-1]):
        e2, t2 = timed[-1]
        if e2 > e1 and t2 >= t1:
            return (t2 - t1) / (e2 - e1)
    if timed:
        started = [_line_time(x) for x in items if x.get("status") == "STARTED"]
        e2, t2 = timed[-1]
        if started and started[-1] is not None and e2 > 0 and t2 >= started[-1]:
            return (t2 - started[-1]) / e2
    return None


# -- ends -----------------------------------------------------------------------
def after_end(progress: dict, terminal: str | None, action: str = "", job_id: str = "JOB_ID") -> dict:
    """``progress`` of a job that ended (``terminal``: its docker end, COMPLETE for exit 0). COMPLETE with TAO's
    "finished successfully" line: done (100 %, no ETA left). Else (no such line, an interrupt TAO caught, any other
    end): no ETA, a note that says which. An evaluate that ended COMPLETE without any KPI says so."""
    if not terminal or not progress.get("available"):
        return progress
    out = {k: v for k, v in progress.items() if k != "eta_source"}
    if terminal == "COMPLETE" and progress.get("finished"):
        out["eta_s"] = 0
        if action == "evaluate" and not progress.get("kpi"):
            out["note"] = ("the evaluate finished but wrote no KPIs to status.json (the model logged none): "
                           f"read its logs (poll_status.py {job_id} --logs 50) for the metrics it printed")
        return out
    out["eta_s"] = None
    if progress.get("status") == "FAILURE" and terminal != "COMPLETE":
        out["note"] = (f"the job ended {terminal}; TAO's last status line is FAILURE: "
                       f"{progress.get('message', '')}")[:300]
    elif terminal == "COMPLETE":
        out["note"] = tao_status.INTERRUPTED_NOTE if progress.get("interrupted") else (
            "the container exited 0 but status.json has no \"finished successfully\" line: TAO did not "
            "report the end of the run (its last line: " + str(progress.get("message", ""))[:120] + ")")
    else:
        out["note"] = (f"the job ended {terminal}; status {progress.get('status')} is the status file's last line, "
                       "written before the end")
    return out


# -- metrics --------------------------------------------------------------------
def goal(name: str) -> str | None:
    """``min`` / ``max`` for a KPI name (a heuristic from its name), None when unknown."""
    if _NOT_A_GOAL.search(name):
        return None
    if _LOWER_IS_BETTER.search(name):
        return "min"
    if _HIGHER_IS_BETTER.search(name):
        return "max"
    return None


def epoch_table(items: list[dict]) -> list[tuple[int, dict]]:
    """[(completed epochs, {kpi: value})]: :func:`tao_brev.tao_status.epoch_rows` (each KPI dict
    counted once, on the epoch it belongs to)."""
    return tao_status.epoch_rows(items, line_kpi)


def metrics(file: StatusFile | None, last: int = METRICS_DEFAULT_EPOCHS) -> dict:
    """``--metrics``: the last ``last`` epochs' KPIs and each KPI's best, last, min and max
    with their epochs, over every epoch line read (up to the last 4 MiB of the file)."""
    if file is None:
        return {"available": False, "epochs": [], "best": {}}
    items, _bad = entries(file.lines)
    rows = epoch_table(items)
    summary: dict = {}
    for epoch, row in rows:
        for name, value in row.items():
            if not isinstance(value, (int, float)):
                continue
            entry = summary.setdefault(name, {"goal": goal(name), "min": None, "max": None})
            if entry["min"] is None or value < entry["min"]["value"]:
                entry["min"] = {"value": value, "epoch": epoch}
            if entry["max"] is None or value > entry["max"]["value"]:
                entry["max"] = {"value": value, "epoch": epoch}
            entry["last"] = {"value": value, "epoch": epoch}
    for entry in summary.values():
        entry["best"] = entry[entry["goal"]] if entry["goal"] else None
    return {"available": bool(rows), "file": file.path, "epochs_read": len(rows),
            "epochs": [{"epoch": e, "kpi": row} for e, row in rows[-last:]], "best": summary,
            **({"truncated": True} if len(rows) > last else {})}


# -- stalls ---------------------------------------------------------------------
def stall_threshold(explicit: float | None, time_per_epoch_s: float | None) -> tuple[float, str]:
    """(seconds, source): ``--stall-after`` (``flag``); else STALL_EPOCH_MULTIPLE x the time per
    epoch, at least STALL_FLOOR_S (``time_per_epoch``); else STALL_FALLBACK_S (``fallback``)."""
    if explicit is not None:
        return float(explicit), "flag"
    if time_per_epoch_s:
        return max(STALL_FLOOR_S, STALL_EPOCH_MULTIPLE * time_per_epoch_s), "time_per_epoch"
    return float(STALL_FALLBACK_S), "fallback"


def assess_stall(job_id: str, now: float | None, progress: dict, started_at: str | None,
                 explicit: float | None = None, last_log: str | None = None,
                 status_only: bool = False) -> dict | None:
    """The ``stall`` object of a RUNNING job, or None when the instance clock is unknown
    or, with ``status_only`` (``--all``: no log call per job), when there is no status
    file to judge by (an arch that writes none may be logging happily).

    Idle time = instance now minus the latest sign of life: the status file's
    mtime, the last log line's docker timestamp (``last_log``: ``docker logs
    --timestamps --tail 1`` output; None in ``--all``, which reads the status
    file alone), else the container's StartedAt.
    """
    if now is None or (status_only and not progress.get("available")):
        return None
    status_at = (now - progress["since_update_s"]) if progress.get("since_update_s") is not None else None
    log_at, log_line = None, None
    if last_log and last_log.strip():
        stamp, _, rest = last_log.strip().splitlines()[-1].partition(" ")
        log_at, log_line = rfc3339_epoch(stamp), cut_redacted(rest, 300)
    started = rfc3339_epoch(started_at)
    signs = [t for t in (status_at, log_at) if t is not None]
    latest = max(signs) if signs else started
    threshold, source = stall_threshold(explicit, progress.get("time_per_epoch_s"))
    if latest is None:
        return {"stalled": False, "idle_s": None, "threshold_s": threshold, "threshold_source": source,
                "evidence": "no sign of life known (no status file, no log line, no start time)"}
    idle = max(0, int(now - latest))
    out = {"stalled": idle > threshold, "idle_s": idle, "threshold_s": int(threshold),
           "threshold_source": source, "last_progress_at": iso(latest), "last_status_at": iso(status_at),
           "last_log_at": iso(log_at)}
    if log_line is not None:
        out["last_log_line"] = log_line
    if out["stalled"]:
        out["advice"] = STALL_ADVICE.format(job=job_id)
    return out
