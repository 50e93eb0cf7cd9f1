"""A local cache of file sha256s, so a re-stage hashes only what changed.

``$TAO_STATE_DIR/brev/hash-cache.json`` (0600, written atomically with
``fsio``) maps an absolute path to ``[size, mtime_ns, ctime_ns, inode, device,
sha256]`` of the file as it was when hashed. A lookup answers only when every
one of those stat fields is unchanged; anything else (or a damaged cache
file, a malformed entry) means "hash it again", so the cache can make a
staging slower, never wrong in a way a plain stat could see.

Why ``ctime_ns`` too: ``rsync`` and ``aws s3 sync`` compare size and mtime
only, so a file rewritten with the same size and its mtime put back
(``touch -d``, ``os.utime``, a restore tool) looks unchanged to them. Writing
a file and setting its times both set ``ctime`` to "now", and no call sets it
back, so such a file misses here and is hashed again. What remains (the same
limit as git's index): a writer that changes the clock, or edits the block
device under the filesystem. Inode and device tell a file replaced by
another (``mv new old``) even when size and times agree.

Racy entries (the idea of git's "racily clean" index): a file whose mtime or
ctime is within :data:`RACY_NS` of the moment its hash started could be
written again within the same timestamp tick without its stat changing; it is
hashed and used, but not cached. Whole-second timestamps (FAT, some network
filesystems) widen the window to two seconds.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Optional

from .. import fsio
from ..secrets.file_names import without_tainted
from .manifest import HEX64

FILE_NAME = "hash-cache.json"
FORMAT = 1
RACY_NS = 100_000_000            # 0.1 s: far above a kernel timestamp tick
COARSE_RACY_NS = 2_000_000_000   # whole-second (or 2 s, FAT) timestamps


def default_path(state_root: Path) -> Path:
    """Where the cache lives under a state dir: ``<state_root>/brev/hash-cache.json``."""
    return Path(state_root) / "brev" / FILE_NAME


def _key(st: os.stat_result) -> list:
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


class HashCache:
    """sha256 by (absolute path, size, mtime_ns, ctime_ns, inode, device).

    ``path=None`` is a cache that remembers nothing (every lookup misses).
    ``clock`` returns nanoseconds (``time.time_ns``; tests inject one).
    Thread-safe for lookups and stores (one dict, GIL-atomic updates).
    """

    def __init__(self, path: Optional[Path], clock: Callable[[], int] = time.time_ns):
        self.path = Path(path) if path is not None else None
        self.clock = clock
        self.entries: dict[str, list] = self._load()
        self.touched: set[str] = set()
        self.removed: set[str] = set()
        self.dirty = False
        self.hits = 0
        self.misses = 0

    def _load(self) -> dict[str, list]:
        if self.path is None:
            return {}
        try:
            data = json.loads(fsio.read_text(self.path))   # a regular file, bounded
            entries = data.get("entries") if isinstance(data, dict) and data.get("format") == FORMAT else None
            return entries if isinstance(entries, dict) else {}
        except (OSError, ValueError, UnicodeDecodeError):
            return {}   # absent or damaged: start empty, the next save replaces it

    def now(self) -> int:
        return self.clock()

    def lookup(self, full: Path, st: os.stat_result) -> Optional[str]:
        """The cached sha256 of ``full`` when its stat ``st`` is exactly the one cached, else None."""
        name = os.path.abspath(full)
        entry = self.entries.get(name)
        self.touched.add(name)
        if (isinstance(entry, list) and len(entry) == 6 and entry[:5] == _key(st)
                and isinstance(entry[5], str) and HEX64.match(entry[5])):
            self.hits += 1
            return entry[5]
        self.misses += 1
        return None

    def store(self, full: Path, before: os.stat_result, after: os.stat_result, sha256: str,
              started_ns: int) -> bool:
        """Remember ``sha256`` for ``full`` hashed between stats ``before`` and ``after``.

        Not stored (False) when the file changed while it was read (the two
        stats differ) or is racy (changed within the racy window before the
        hash started).
        """
        if self.path is None or _key(before) != _key(after):
            return False
        coarse = before.st_mtime_ns % 1_000_000_000 == 0
        window = COARSE_RACY_NS if coarse else RACY_NS
        if max(before.st_mtime_ns, before.st_ctime_ns) + window > started_ns:
            return False
        name = os.path.abspath(full)
        self.entries[name] = [*_key(before), sha256]
        self.touched.add(name)
        self.dirty = True
        return True

    def forget_missing_under(self, root: Path) -> None:
        """Drop entries under ``root`` (a walked directory) that this run did not see."""
        prefix = os.path.abspath(root).rstrip(os.sep) + os.sep
        gone = [name for name in self.entries if name.startswith(prefix) and name not in self.touched]
        for name in gone:
            del self.entries[name]
        self.removed.update(gone)
        self.dirty = self.dirty or bool(gone)

    def save(self) -> None:
        """Write the cache (0600, atomic) if anything changed; a failure to write is ignored
        (a cache that cannot be saved costs a re-hash next time, nothing else)."""
        if self.path is None or not self.dirty:
            return
        try:
            fsio.private_dir(self.path.parent)
            with fsio.locked(self.path):
                on_disk = self._load()          # keep what another process stored meanwhile
                on_disk.update(self.entries)
                for name in self.removed:
                    on_disk.pop(name, None)
                on_disk = without_tainted(on_disk)   # a path holding a known value is never kept
                fsio.atomic_write_text(self.path, json.dumps({"format": FORMAT, "entries": on_disk},
                                                             separators=(",", ":")) + "\n")
            self.dirty = False
        except OSError:
            pass
