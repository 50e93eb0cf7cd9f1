"""The records ``poll_status.py --all`` must poll, without re-reading every record.

An agent's state dir holds mostly finished jobs (tens of thousands of
terminal records); ``--all`` needs the non-terminal Brev ones and every
corrupt record (it may hide a job that still bills). This scan lists the
jobs dir with one ``stat`` per file and reads a record only when its file
changed since the last scan: ``$TAO_STATE_DIR/brev/record-index.json`` maps
each file name to its (inode, mtime ns, size) and what it held -
``terminal`` (a finished job) or ``foreign`` (another platform's record).

Why that is safe: a terminal record never becomes non-terminal and a
record's platform never changes (the record contract), and any write - by
this bundle or by the bank's own ``tao_job_record.py`` (atomic rename: a new
inode) or by hand - changes the (inode, mtime, size) key, so the file is read
again. Non-terminal Brev records and corrupt files are never cached: they are
read on every scan. A missing, unreadable or foreign-version index is
rebuilt; the index is advisory, never a source of truth.

A damaged record that a reader already moved to ``jobs/quarantine/`` (see
``records``) is still named among the corrupt ones until a teardown closes
it: it may hide a job that still bills just the same.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Callable, TypedDict, Union
from pathlib import Path

from .errors import TaoBrevError
from .fsio import AdvisoryFile, read_text
from .records import PLATFORM, RecordStore, is_terminal

if TYPE_CHECKING:   # type hints only (the answer types cost ~10 ms to import)
    from .model.answer_types import RecordDocument

INDEX_VERSION = 1
CACHED_KINDS = ("terminal", "foreign")
_Files = dict[str, list[Union[int, str]]]   # file name -> [inode, mtime ns, size, "terminal" | "foreign"]


class CorruptRecord(TypedDict, total=False):
    """A record that does not read: its id, why, and where it is kept when quarantined."""
    id: str
    error: str
    quarantined: str


def index_path(state_root: Path) -> Path:
    return state_root / "brev" / "record-index.json"


def _load(path: Path) -> _Files:
    try:
        data = json.loads(read_text(path))   # a regular file, bounded
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != INDEX_VERSION or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def live_records(store: RecordStore, state_root: Path, platform: str = PLATFORM,
                 keep: Callable[[RecordDocument], bool] | None = None) -> tuple[list[RecordDocument], list[CorruptRecord]]:
    """(non-terminal records of ``platform``, corrupt records as ``{"id", "error"}``), both sorted by id.

    Corrupt: a damaged file in the jobs dir, and each quarantined record not
    closed yet (``{"id", "error", "quarantined": path}``, from
    ``RecordStore.quarantined_entries``; an id damaged in both places is named once).
    Reads only files that are new or changed since the last scan (plus the
    live and corrupt ones); updates the index when something changed.
    ``keep(record)``: terminal records it selects are returned with the live
    ones and read on every scan (a few, e.g. never-ran jobs not closed yet).
    """
    if not store.jobs_dir.is_dir():
        return [], []
    path = index_path(state_root)
    cached = _load(path)
    fresh: _Files = {}
    live: list[RecordDocument] = []
    corrupt: list[CorruptRecord] = []
    with os.scandir(store.jobs_dir) as entries:
        for entry in entries:
            name = entry.name
            if not name.endswith(".json") or name.startswith("."):
                continue
            try:
                st = entry.stat()
            except OSError as exc:
                corrupt.append({"id": name[:-5], "error": f"{entry.path}: {exc}"})
                continue
            key = [st.st_ino, st.st_mtime_ns, st.st_size]
            known = cached.get(name)
            if isinstance(known, list) and known[:3] == key and known[3:] and known[3] in CACHED_KINDS:
                fresh[name] = known
                continue
            try:
                record = RecordStore._parse(Path(entry.path), read_text(entry.path))
            except (TaoBrevError, OSError, UnicodeDecodeError) as exc:
                corrupt.append({"id": name[:-5], "error": str(exc)})
                continue
            if record.get("platform") != platform:
                fresh[name] = key + ["foreign"]
            elif is_terminal(record.get("terminal_state")) and not (keep and keep(record)):
                fresh[name] = key + ["terminal"]
            else:
                live.append(record)
    if fresh != cached:
        _save(path, fresh)
    named = {bad["id"] for bad in corrupt}
    corrupt += [{"id": q["id"], "error": q["error"], "quarantined": q["quarantined"]}
                for q in store.quarantined_entries() if q["id"] not in named]
    return sorted(live, key=lambda r: r["id"]), sorted(corrupt, key=lambda r: r["id"])


def _save(path: Path, files: _Files) -> None:
    """Compact JSON, replaced atomically; no fsync and no lock: the index is advisory
    (a lost or concurrent write only means the next scan reads more)."""
    out = AdvisoryFile(path)
    out.write(json.dumps({"version": INDEX_VERSION, "files": files}, separators=(",", ":")).encode())
    out.commit()
