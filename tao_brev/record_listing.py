"""``tao_job_record.py list --json`` without reading, parsing and checking every record each time.

Beside ``record_index`` (what ``poll_status.py --all`` needs), in the same state dir:
``$TAO_STATE_DIR/brev/record-listing.cache`` holds, for each record file that read as a
valid record, its key (inode, mtime ns, ctime ns, size of the record, then the same of its
sidecar ``brev/jobs/<id>.json``, ``0 0 0 -1`` when there is none: the listing's view of the
record reads it, ``results_now``) and the JSON text the listing prints for it with only the pattern redaction applied (``redact.redact`` /
``redact.redact_uri`` through the same per-string path as the answer, with no known
values: that part depends on the text alone). A listing stats each record; when the key
is unchanged it takes the cached text after checking that its every escape is one
``encode_basestring_ascii`` writes (:func:`_canonical`: ``\\u0041``, upper-case hex or
``\\/`` would spell a value the search cannot see) and ONE search of it for every form of
every secret value known NOW, as those forms read inside a JSON string
(``known_secrets.json_forms_pattern``). Nothing found: the cached text is what the full
path prints (no string holds a form, so the value redaction changes nothing). A text (or
name) holding a form of a value known now is never written to the cache, and a cached line
holding one is dropped from it (the file is rewritten without it). Anything
found, a text not canonical, or a key that changed, a record not cached, a damaged record: the record is read
and answered exactly as ``RecordStore.iter_list`` + ``results_now.view`` + ``ObjRedactor.json_text`` answer it
(a damaged record is quarantined as before). A secret known only now is therefore
redacted although the cache was written without it.

Why the key is safe: every write of a file - atomic rename (a new inode) or in place -
sets its ctime to the time of the write, which no tool can set back; an entry is cached
only when its mtime and ctime are at least :data:`SETTLED_NS` old at the listing's
start, so a later write always gives another key (a write within one tick of the
filesystem's clock included).

The file: an ASCII header line (format, and a fingerprint of the code and Python that
made the texts: the sources of this module, ``records``, ``results_now`` and ``redact``; ``json``'s with the Python version),
then one line a record in name order, ``crc32<TAB>stem<TAB>`` the 8 numbers of the key, each
followed by a tab, then the text (the text's newlines written as ``\\x1e``, which JSON text written with
``ensure_ascii`` never holds raw). It is read as a stream beside the sorted names and
written as a stream (memory stays flat) to a temp file put in place by one rename, and
only when something changed. Another fingerprint: the file is ignored and rebuilt. A line
whose checksum, form or order is wrong ends the use of the file for that listing (the
rest is read from the records) and the file is rebuilt. A cache name that is no regular
file (a FIFO, a directory, a link, e.g. to /dev/zero) is never followed, waited on or read:
ignored, and replaced when it can be. The cache is advisory, never a source of truth.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from .errors import TaoBrevError
from . import records, results_now
from .fsio import AdvisoryFile, sweep_temp
from .records import ID_RE, RecordStore, read_text
from .secrets import literal, names, redact, rules
from .secrets import search as known_secrets
from .secrets.redact import ObjRedactor

FORMAT = b"tao-brev-record-listing 2"
SETTLED_NS = 2_000_000_000   # a file written less than 2 s before the listing is read, never cached
_NEWLINE, _STORED_NEWLINE = "\n", "\x1e"
_NO_FILE = (0, 0, 0, -1)   # the key part of a sidecar not there
_Key = tuple[int, ...]   # (ino, mtime ns, ctime ns, size) of the record, then of its sidecar: 8 numbers
_clock = time.time_ns   # the listing's "now" (tests inject one)


def cache_path(state_root: Path) -> Path:
    return state_root / "brev" / "record-listing.cache"


def fingerprint() -> bytes | None:
    """sha256 of what decides the cached texts: this module's, ``records``', ``results_now``', the pattern redaction's
    (``secrets.names``, ``literal``, ``rules``, ``redact``) sources and the Python version (``json``'s
    text); None when a source cannot be read (no cache)."""
    digest = hashlib.sha256(sys.version.encode())
    for module in (sys.modules[__name__], records, results_now, names, literal, rules, redact):
        source = module.__file__
        if source is None:   # no source file: nothing to fingerprint
            return None
        try:
            with open(source, "rb") as fh:
                digest.update(fh.read())
        except (OSError, TypeError):
            return None
    return digest.hexdigest().encode()


def json_texts(store: RecordStore, redacted: ObjRedactor, state_root: Path) -> Iterator[str]:
    """``redacted.json_text(results_now.view(entry, state_root), 2)`` of each entry of ``store.iter_list()``, in its order,
    byte for byte; cached texts where the cache answers (see the module doc)."""
    stamp = fingerprint() if store.jobs_dir.is_dir() else None
    if stamp is None:   # nothing to list (no cache file made for it), or no fingerprint
        for entry in store.iter_list():
            yield redacted.json_text(results_now.view(entry, state_root), 2)
        return
    found = known_secrets.json_forms_pattern()
    holds_secret = found.search if found is not None else None
    patterns_only = ObjRedactor(_same)   # the answer's per-string path, no known values
    settled = _clock() - SETTLED_NS
    path = cache_path(state_root)
    sweep_temp(path.parent)   # temp files of listings killed before their rename
    cache = _Reader(path, stamp)
    out = _Writer(path, cache)
    try:
        for stem, file in store.listed_names():
            if file is None:
                yield redacted.json_text(store.quarantined_entry(stem), 2)
                continue
            key = _key(file, results_now.sidecar_path(state_root, stem))
            cached = cache.take(stem)
            if cached is not None and cached.key == key and _canonical(cached.text):
                if holds_secret is None or (holds_secret(cached.text) is None and holds_secret(stem) is None):
                    out.keep(cached)   # true of the file, and holds no value known now
                    yield cached.text
                    continue
                # a value known now is in it: the line is dropped (the file rewritten without it)
            try:
                record = results_now.view(store._parse(file, read_text(file)), state_root)
            except (TaoBrevError, OSError, UnicodeDecodeError) as exc:
                damaged = store.damaged_entry(stem, file, exc)
                if damaged is not None:
                    yield redacted.json_text(damaged, 2)
                continue
            text = patterns_only.json_text(record, 2)
            clean = holds_secret is None or (holds_secret(text) is None and holds_secret(stem) is None)
            if clean and key is not None and max(key[1], key[2], key[5], key[6]) < settled and ID_RE.fullmatch(stem):
                out.add(_line(stem, key, text))   # never a text holding a value known now
            yield text if clean else redacted.json_text(record, 2)
        out.finish()
    finally:
        out.abandon()
        cache.close()


def _key(file: str, sidecar: str | None) -> _Key | None:
    """(ino, mtime ns, ctime ns, size) of the record, then of its sidecar (:data:`_NO_FILE` when
    there is none); None when either cannot be read."""
    try:
        st = os.stat(file)
        try:
            side = os.stat(sidecar) if sidecar else None
            side_key = (side.st_ino, side.st_mtime_ns, side.st_ctime_ns, side.st_size) if side else _NO_FILE
        except FileNotFoundError:
            side_key = _NO_FILE
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, *side_key)


def _same(text: str) -> str:
    return text


# The escapes ``json.encoder.encode_basestring_ascii`` writes, and only those: ``\\`` ``\"``
# ``\b\f\n\r\t``, and ``\u`` with 4 lower-case hex digits for the other characters below
# 0x20 and every one from 0x7f on. A text spelling a printable ASCII character as ``\u0041``,
# using upper-case hex or ``\/`` decodes to what the value search did not see.
_CANONICAL_ESCAPE = re.compile(
    r'\\(?:[\\"bfnrt]|u(?:00(?:0[0-7bef]|1[0-9a-f]|7f|[89a-f][0-9a-f])|0[1-9a-f][0-9a-f]{2}|[1-9a-f][0-9a-f]{3}))')


def _canonical(text: str) -> bool:
    """Every escape in ``text`` is one ``encode_basestring_ascii`` writes for the character it
    stands for (so the text is the JSON this code writes for what it decodes to)."""
    # read left to right, each escape taken whole (so ``\\u0030`` is an escaped backslash, then text);
    # a backslash left after the canonical escapes are taken out starts one they never are
    return "\\" not in text or "\\" not in _CANONICAL_ESCAPE.sub("", text)


class _Cached:
    """One line of the cache file: its name, place (byte offsets), raw bytes, key and text."""

    __slots__ = ("stem", "start", "end", "raw", "key", "text")

    def __init__(self, stem: str, start: int, end: int, raw: bytes, key: _Key, text: str):
        self.stem, self.start, self.end, self.raw, self.key, self.text = stem, start, end, raw, key, text


class _Reader:
    """The cached lines in name order, one at a time, each with its place in the file (byte
    offsets); stops at the first line it cannot trust."""

    def __init__(self, path: Path, stamp: bytes):
        self.path = path
        self.header = FORMAT + b" " + stamp + b"\n"
        self.trusted = False
        self.size = -1
        self._fh: BinaryIO | None = None
        self._next: _Cached | None = None
        self._offset = 0
        self._last = ""
        try:
            self._fh = _open_regular(path)
            if self._fh is None:   # a FIFO, directory, device or link in its place: ignored, rebuilt
                return
            self.size = os.fstat(self._fh.fileno()).st_size
            header = self._fh.readline(len(self.header))   # bounded: a line longer is no header
        except OSError:
            return
        if header == self.header:
            self.trusted = True
            self._offset = len(header)
            self._advance()

    def _advance(self) -> None:
        self._next = None
        if not self.trusted or self._fh is None:   # trusted: the file is open
            return
        try:
            raw = self._fh.readline()
        except OSError:
            raw = b""
        if not raw:
            self.trusted = self._offset == self.size   # all of it read: nothing lost on the way
            return
        parsed = _parse_line(raw)
        if parsed is None or parsed[0] <= self._last:
            self.trusted = False   # damaged, truncated or out of order: nothing more of it is used
            return
        self._last = parsed[0]
        start, self._offset = self._offset, self._offset + len(raw)
        self._next = _Cached(parsed[0], start, self._offset, raw, parsed[1], parsed[2])

    def take(self, stem: str) -> _Cached | None:
        """The entry cached for ``stem``, or None. Names before ``stem`` are passed over
        (their records are gone)."""
        while self._next is not None and self._next.stem < stem:
            self._advance()
        if self._next is None or self._next.stem != stem:
            return None
        taken = self._next
        self._advance()
        return taken

    def complete(self) -> bool:
        """Every line read and trusted."""
        return self.trusted and self._next is None

    def copy(self, out: AdvisoryFile, end: int) -> None:
        """The first ``end`` bytes of the file this reader opened (not of one another listing
        may have put in its place since) into ``out``, in chunks."""
        assert self._fh is not None   # called only for a trusted cache: the file is open
        fd, offset = self._fh.fileno(), 0
        while offset < end:
            chunk = os.pread(fd, min(end - offset, 1 << 20), offset)
            if not chunk:
                raise OSError("the cache file shrank while it was copied")
            out.write(chunk)
            offset += len(chunk)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


def _open_regular(path: Path) -> BinaryIO | None:
    """``path`` opened for reading when it is a regular file, else None (a link is never followed,
    a FIFO never waited on: O_NOFOLLOW | O_NONBLOCK, then ``fstat``). Raises OSError (none there)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _parse_line(raw: bytes) -> tuple[str, _Key, str] | None:
    """(stem, key, text) of a cache line, or None when it is not one written whole by _line."""
    if raw[-1:] != b"\n" or raw[8:9] != b"\t":
        return None
    body = raw[9:-1]
    try:
        if int(raw[:8], 16) != zlib.crc32(body):
            return None
        raw_stem, *numbers, raw_text = body.split(b"\t", 9)
        stem = raw_stem.decode("ascii")
        key = tuple(int(n) for n in numbers)
        text = raw_text.decode("ascii")
    except ValueError:   # UnicodeDecodeError included; too few fields
        return None
    if len(key) != 8 or not ID_RE.fullmatch(stem):
        return None
    return stem, key, text.replace(_STORED_NEWLINE, _NEWLINE)


def _line(stem: str, key: _Key, text: str) -> bytes:
    body = "\t".join((stem, *map(str, key), text.replace(_NEWLINE, _STORED_NEWLINE))).encode("ascii")
    return b"%08x\t%s\n" % (zlib.crc32(body), body)


class _Writer:
    """The new cache, in name order. While the new lines are exactly the old file's first
    ones, nothing is written (``_same_until``: where that prefix ends); at the first
    difference a temp file is started with that prefix; it replaces the cache at :meth:`finish`."""

    def __init__(self, path: Path, old: _Reader):
        self._path, self._old = path, old
        self._same_until = len(old.header) if old.trusted else None
        self._out: AdvisoryFile | None = None

    def keep(self, cached: _Cached) -> None:
        """An old line, still true of its file."""
        if self._same_until == cached.start:
            self._same_until = cached.end
            return
        self._start().write(cached.raw)

    def add(self, raw: bytes) -> None:
        self._start().write(raw)

    def _start(self) -> AdvisoryFile:
        if self._out is not None:
            return self._out
        out = self._out = AdvisoryFile(self._path)
        if self._same_until is not None:
            try:
                self._old.copy(out, self._same_until)
            except OSError:
                out.abort()
        else:
            out.write(self._old.header)
        self._same_until = None
        return out

    def finish(self) -> None:
        """Put the new cache in place when it differs from the old one."""
        if self._out is None and not (self._same_until is not None and self._same_until == self._old.size
                                      and self._old.complete()):
            self._start()
        if self._out is not None:
            self._out.commit()
            self._out = None

    def abandon(self) -> None:
        if self._out is not None:
            self._out.abort()
            self._out = None
