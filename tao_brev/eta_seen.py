"""A job's ETA as the last poll saw it, and what is left of it now.

Every ``poll_status.py`` read that computes a RUNNING job's ETA (``progress.eta_s``) keeps it in
the job's sidecar as ``last_eta`` (``{"eta_s", "seen_at"}``: :func:`record`). A later verb that
meets the job without polling it - submit's ``GPUS_BUSY`` refusal (the job holds the GPUs) -
tells how long it has left from that: :func:`left` (the saved ETA minus the time since it was
seen, floored at 0) and :func:`phrase` ("about 12 min left as of a poll 3 min ago").
"""

from __future__ import annotations

from datetime import datetime, timezone

from .isotime import parse_ts


def record(progress: dict | None, seen_at: str) -> dict | None:
    """The sidecar's ``last_eta`` for this poll's ``progress`` (None: the poll computed no ETA)."""
    eta = progress.get("eta_s") if isinstance(progress, dict) else None
    if not isinstance(eta, (int, float)) or isinstance(eta, bool) or eta < 0:
        return None
    return {"eta_s": int(eta), "seen_at": seen_at}


def left(last_eta: dict | None, now: datetime | None = None) -> dict | None:
    """``{"left_s", "age_s", "eta_s"}``: the seconds left now (never below 0), how long ago the
    poll saw the ETA, and the ETA it saw; None when no poll saw one (or the saved one is unreadable)."""
    if not isinstance(last_eta, dict):
        return None
    eta, seen = last_eta.get("eta_s"), parse_ts(last_eta.get("seen_at"))
    if not isinstance(eta, (int, float)) or isinstance(eta, bool) or seen is None:
        return None
    age = max(0, int(((now or datetime.now(timezone.utc)) - seen).total_seconds()))
    return {"left_s": max(0, int(eta) - age), "age_s": age, "eta_s": int(eta)}


def span(seconds: int) -> str:
    """``45 s``, ``12 min``, ``2.5 h``: a duration as a person reads it."""
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def phrase(known: dict | None) -> str:
    """What :func:`left` says, in words ('' when no poll saw an ETA)."""
    if known is None:
        return ""
    ago = f"a poll {span(known['age_s'])} ago"
    if known["left_s"] > 0:
        return f"about {span(known['left_s'])} left as of {ago}"
    return f"its ETA ({span(known['eta_s'])} as of {ago}) has passed: it should end any moment"
