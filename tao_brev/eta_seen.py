"""A job's ETA as the last poll saw it, and what is left of it now.

Every ``poll_status.py`` read that computes a RUNNING job's ETA (``progress.eta_s``) keeps it in
the job's sidecar as ``last_eta`` (``{"eta_s", "seen_at"}``: :func:`record`). A later verb that
meets the job without polling it - submit's ``GPUS_BUSY`` refusal (the job holds the GPUs) -
tells how long it has left from that: :func:`left` (the saved ETA minus the time since it was
seen, floored at 0) and :func:`phrase` ("about 12 min left as of a poll 3 min ago").
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import TYPE_CHECKING, TypedDict

from .isotime import parse_ts
from .model.sidecar_parts import LastEta

if TYPE_CHECKING:
    from typing_extensions import TypeIs   # typing's from Python 3.13 (the package runs on 3.9)

    from .model.answer_types import Progress

MAX_ETA_S = 30 * 86400   # an ETA past 30 days is no estimate to wait on


class EtaLeft(TypedDict):
    """What :func:`left` tells: the seconds left now, how long ago the poll saw the ETA, that ETA."""
    left_s: int
    age_s: int
    eta_s: int


def record(progress: Progress | None, seen_at: str) -> LastEta | None:
    """The sidecar's ``last_eta`` for this poll's ``progress`` (None: the poll computed no ETA)."""
    eta = progress.get("eta_s") if isinstance(progress, dict) else None
    return {"eta_s": int(eta), "seen_at": seen_at} if _seconds(eta) else None


def _seconds(value: object) -> TypeIs[int | float]:
    """A number of seconds an ETA can be: finite, 0 to MAX_ETA_S (a damaged sidecar may hold anything)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and 0 <= value <= MAX_ETA_S


def left(last_eta: object, now: datetime | None = None) -> EtaLeft | None:
    """``{"left_s", "age_s", "eta_s"}``: the seconds left now (never below 0), how long ago the
    poll saw the ETA, and the ETA it saw; None when no poll saw one (or the saved one is unreadable).
    ``last_eta``: what the sidecar holds (a :class:`LastEta`, or anything once damaged)."""
    if not isinstance(last_eta, dict):
        return None
    eta, seen = last_eta.get("eta_s"), parse_ts(last_eta.get("seen_at"))
    now = now or datetime.now(timezone.utc)
    if not _seconds(eta) or seen is None or seen > now:   # seen in the future: no clock to trust
        return None
    age = int((now - seen).total_seconds())
    return {"left_s": max(0, int(eta) - age), "age_s": age, "eta_s": int(eta)}


def span(seconds: int) -> str:
    """``45 s``, ``12 min``, ``2.5 h``: a duration as a person reads it."""
    if seconds < 90:
        return f"{seconds} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def phrase(known: EtaLeft | None) -> str:
    """What :func:`left` says, in words ('' when no poll saw an ETA)."""
    if known is None:
        return ""
    ago = f"a poll {span(known['age_s'])} ago"
    if known["left_s"] > 0:
        return f"about {span(known['left_s'])} left as of {ago}"
    return f"its ETA ({span(known['eta_s'])} as of {ago}) has passed: it should end any moment"
