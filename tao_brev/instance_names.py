"""An instance name that ``brev ls --json`` does not list: the closest listed names ("did you mean").

The names are the account's own (one ``brev ls``); similarity is difflib's ratio (>= 0.6), the
same rule as network archs (tao_brev/archs.py closest). Pure: the caller gives the listing.
"""

from __future__ import annotations

import difflib


def closest(name: str, listed: list[str], n: int = 3) -> list[str]:
    """Up to ``n`` listed names most like ``name`` (best first); [] when none is close."""
    return difflib.get_close_matches(name, [x for x in listed if isinstance(x, str) and x], n=n, cutoff=0.6)


def unknown_message(name: str, listed: list[str]) -> str:
    """``NAME is not in `brev ls --json```, with the close names or the listed ones."""
    near = closest(name, listed)
    if near:
        return f"{name} is not in `brev ls --json`; did you mean {' or '.join(repr(x) for x in near)}?"
    shown = ", ".join(sorted(listed)[:10]) or "none"
    return f"{name} is not in `brev ls --json` (the account's instances: {shown})"
