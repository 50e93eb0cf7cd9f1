"""Stall detection of a RUNNING job (``poll_status.py``'s ``stall``): the idle time since the latest
sign of life against a threshold (``--stall-after``, else from the time per epoch); and the
timestamps it reads (docker's RFC 3339) and writes (ISO 8601)."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from .logcap import cut_redacted
from .model.answer_types import Progress, Stall

STALL_EPOCH_MULTIPLE = 3        # default --stall-after: this many times the time per epoch ...
STALL_FLOOR_S = 1800            # ... but never less than 30 min (tqdm-only output, long validations)
STALL_FALLBACK_S = 3600         # before the first epoch line: 60 min, the TAO API's own default inactivity
                                # timeout (tao-core microservices/utils/job_utils/timeout_monitor.py)
STALL_ADVICE = ("the container runs but writes nothing: usually a hung data loader (raise --shm-size or lower "
                "num_workers), an NCCL collective waiting for a peer (NCCL timeout; resubmit with "
                "NCCL_DEBUG=INFO), or I/O stalled on a full or slow disk. Look at poll_status.py {job} --logs 50; "
                "then teardown.py {job} stops the billing, and submit.py ... --resume-from JOB_ID continues from "
                "its last checkpoint. If epochs are legitimately this slow, poll_status.py {job} --stall-after "
                "with more seconds.")


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


# -- stalls ---------------------------------------------------------------------
def stall_threshold(explicit: float | None, time_per_epoch_s: float | None) -> tuple[float, str]:
    """(seconds, source): ``--stall-after`` (``flag``); else STALL_EPOCH_MULTIPLE x the time per
    epoch, at least STALL_FLOOR_S (``time_per_epoch``); else STALL_FALLBACK_S (``fallback``)."""
    if explicit is not None:
        return float(explicit), "flag"
    if time_per_epoch_s:
        return max(STALL_FLOOR_S, STALL_EPOCH_MULTIPLE * time_per_epoch_s), "time_per_epoch"
    return float(STALL_FALLBACK_S), "fallback"


def assess_stall(job_id: str, now: float | None, progress: Progress, started_at: str | None,
                 explicit: float | None = None, last_log: str | None = None,
                 status_only: bool = False) -> Stall | None:
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
    since = progress.get("since_update_s")
    status_at = (now - since) if since is not None else None
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
    out: Stall = {"stalled": idle > threshold, "idle_s": idle, "threshold_s": int(threshold),
                  "threshold_source": source, "last_progress_at": iso(latest), "last_status_at": iso(status_at),
                  "last_log_at": iso(log_at)}
    if log_line is not None:
        out["last_log_line"] = log_line
    if out["stalled"]:
        out["advice"] = STALL_ADVICE.format(job=job_id)
    return out
