"""ISO 8601 / RFC 3339 times read as aware datetimes: the record's and sidecars' timestamps,
docker's ``.State.StartedAt`` / ``FinishedAt`` (RFC3339Nano) and the instance-type cache's date."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Optional


_TS = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?"
                 r"\s*(Z|[+-]\d{2}:?\d{2})?$", re.I)


def parse_ts(value: Optional[str]) -> Optional[datetime]:
    """An ISO 8601 / RFC 3339 time as an aware datetime (UTC when it names no zone); None if
    unset or unreadable. Any fraction length is read: docker's RFC3339Nano trims trailing zeros
    (``12:00:00.5Z``, ``12:00:00.1234Z``) or has nine digits; Python 3.9/3.10's
    ``fromisoformat`` takes only 3 or 6, so this parser does not use it."""
    if not value or str(value).startswith("0001-01-01"):
        return None
    match = _TS.match(str(value).strip())
    if not match:
        return None
    year, month, day, hour, minute, sec, frac, zone = match.groups()
    micro = int((frac or "0")[:6].ljust(6, "0"))
    if not zone or zone.upper() == "Z":
        tz = timezone.utc
    else:
        sign = -1 if zone[0] == "-" else 1
        digits = zone[1:].replace(":", "")
        tz = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    try:
        return datetime(int(year), int(month), int(day), int(hour), int(minute), int(sec or 0), micro, tzinfo=tz)
    except ValueError:
        return None
