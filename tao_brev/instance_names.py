"""An instance name that ``brev ls --json`` does not list, or a job id with no record: the closest
known names ("did you mean").

The names are the account's own (one ``brev ls``); similarity is difflib's ratio (>= 0.6), the
same rule as network archs (tao_brev/archs.py closest). Pure: the caller gives the listing.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from .errors import TaoBrevError


def closest(name: str, listed: list[str], n: int = 3) -> list[str]:
    """Up to ``n`` listed names most like ``name`` (best first, case ignored: ``BOX`` is near ``box``);
    [] when none is close."""
    return _close(name, [x for x in listed if isinstance(x, str) and x], n, 0.6)


def _close(name: str, known: list[str], n: int, cutoff: float) -> list[str]:
    """difflib's close matches of ``name`` among ``known``, compared case-folded, as ``known`` spells them."""
    folded: dict[str, str] = {}
    for word in known:
        folded.setdefault(word.casefold(), word)
    return [folded[x] for x in difflib.get_close_matches(name.casefold(), list(folded), n=n, cutoff=cutoff)]


def unknown_message(name: str, listed: list[str]) -> str:
    """``NAME is not in `brev ls --json```, with the close names or the listed ones."""
    near = closest(name, listed)
    if near:
        return f"{name} is not in `brev ls --json`; did you mean {' or '.join(repr(x) for x in near)}?"
    shown = ", ".join(sorted(listed)[:10]) or "none"
    return f"{name} is not in `brev ls --json` (the account's instances: {shown})"


def unknown_job(job_id: str, jobs_dir: Path) -> TaoBrevError:
    """UNKNOWN_JOB for ``job_id``, with the closest job id of ``jobs_dir`` when one is a near miss (a
    typo; job ids share their arch-action prefix, so only a close match counts): ``did_you_mean``."""
    known = sorted(p.stem for p in jobs_dir.glob("*.json")) if jobs_dir.is_dir() else []
    near = _close(job_id, known, 1, 0.9)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return TaoBrevError("UNKNOWN_JOB", f"no job record for {job_id!r} in {jobs_dir}{hint}",
                        answer={"did_you_mean": {job_id: near[0]}} if near else {})
