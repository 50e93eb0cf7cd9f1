"""The MANIFEST: ``[{"path", "size", "sha256"}]`` of local files (relative posix paths, sorted),
its checks, and the forms it is stored in (``sha256sum -c`` text, a version digest).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence, TypedDict

from ..errors import TaoBrevError

CHUNK = 1024 * 1024           # streaming read size for hashing
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def file_checksum(path: str | os.PathLike) -> str:
    """sha256 hex of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def is_excluded(relpath: str, excludes: Iterable[str]) -> bool:
    """True when a glob matches the relative path, its name, or one of its parent dirs.

    So ``*.ckpt`` drops checkpoints at any depth, ``.git`` or ``__pycache__``
    drop those directories wherever they are, ``runs/tmp/*`` drops one subtree.
    """
    parts = relpath.split("/")
    candidates = {relpath, parts[-1]}
    candidates.update("/".join(parts[:i]) for i in range(1, len(parts)))
    candidates.update(parts[:-1])
    return any(fnmatch.fnmatchcase(c, pattern.rstrip("/")) for pattern in excludes for c in candidates)


def _list_local(source: Path, excludes: Sequence[str]) -> list[tuple[str, Path]]:
    """(relative posix path, absolute path) of every regular file, sorted."""
    if source.is_file():
        return [(source.name, source)]
    if not source.is_dir():
        raise TaoBrevError("BAD_ARGUMENT", f"no such file or directory: {str(source)!r}",
                           "Pass an existing local file or directory.")
    found = []
    for dirpath, dirnames, filenames in os.walk(source):
        rel_dir = Path(dirpath).relative_to(source).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if not is_excluded(rel_dir + d, excludes))
        for name in filenames:
            rel = rel_dir + name
            full = Path(dirpath) / name
            if full.is_file() and not is_excluded(rel, excludes):  # skips dangling links, sockets
                found.append((rel, full))
    return sorted(found)


class ManifestEntry(TypedDict):
    """One file of a MANIFEST: its relative posix path, its size in bytes, its sha256 (hex)."""
    path: str
    size: int
    sha256: str


def local_manifest(path: str | os.PathLike, excludes: Sequence[str] = (),
                   workers: Optional[int] = None, cache=None) -> list[ManifestEntry]:
    """The MANIFEST of a file or directory: ``[{"path", "size", "sha256"}]``, sorted by path.

    ``cache`` (a ``hash_cache.HashCache``) answers for files whose stat is
    unchanged since they were hashed; the others are hashed and remembered.
    """
    return [entry for entry, _ in manifest_with_files(Path(path), excludes, workers, cache)]


def manifest_with_files(source: Path, excludes: Sequence[str] = (), workers: Optional[int] = None,
                        cache=None) -> list[tuple[ManifestEntry, Path]]:
    """(manifest entry, local file) pairs, sorted by path; each file hashed at most once
    (not at all when ``cache`` knows it). The cache is saved before returning."""
    source = Path(source)
    files = _list_local(source, list(excludes))

    def one(item: tuple[str, Path]) -> tuple[ManifestEntry, Path]:
        rel, full = item
        try:
            before = full.stat()
            digest = cache.lookup(full, before) if cache is not None else None
            if digest is None:
                started = cache.now() if cache is not None else 0
                digest = file_checksum(full)
                if cache is not None:
                    cache.store(full, before, full.stat(), digest, started)
            return ({"path": rel, "size": before.st_size, "sha256": digest}, full)
        except OSError as exc:
            raise TaoBrevError("BAD_ARGUMENT", f"cannot read {str(full)!r}: {exc.strerror or exc}",
                               "Check that the local files are readable.")

    with ThreadPoolExecutor(max_workers=workers or min(8, (os.cpu_count() or 2))) as pool:
        out = list(pool.map(one, files))  # hashlib releases the GIL on large reads
    if cache is not None:
        if source.is_dir():
            cache.forget_missing_under(source)
        cache.save()
    return out


def check_manifest(manifest: Any) -> None:
    """Raise BAD_ARGUMENT unless ``manifest`` is a list of well-formed, unique entries."""
    def bad(why: str) -> TaoBrevError:
        return TaoBrevError("BAD_ARGUMENT", f"invalid manifest: {why}",
                            'A manifest is a JSON list of {"path", "size", "sha256"} (see references/storage.md).')

    if not isinstance(manifest, (list, tuple)):
        raise bad("not a list")
    seen = set()
    for entry in manifest:
        if not isinstance(entry, Mapping) or not {"path", "size", "sha256"} <= set(entry):
            raise bad(f"entry without path/size/sha256: {entry!r:.120}")
        path = entry["path"]
        if (not isinstance(path, str) or not path or path.startswith("/")
                or any(part in ("", ".", "..") for part in path.split("/"))):
            raise bad(f"path must be relative posix without '.', '..' or '//': {path!r}")
        if not isinstance(entry["size"], int) or isinstance(entry["size"], bool) or entry["size"] < 0:
            raise bad(f"size of {path!r} is not a byte count")
        if not isinstance(entry["sha256"], str) or not HEX64.match(entry["sha256"].lower()):
            raise bad(f"sha256 of {path!r} is not 64 hex digits")
        if path in seen:
            raise bad(f"duplicate path {path!r}")
        seen.add(path)


def manifest_digest(manifest: Sequence[ManifestEntry]) -> str:
    """16 hex digits identifying a manifest's content (paths, sizes, sha256s)."""
    canonical = json.dumps([[e["path"], e["size"], e["sha256"]] for e in manifest], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def sha256sum_text(manifest: Sequence[ManifestEntry]) -> str:
    """The manifest as ``sha256sum -c`` reads it: ``<sha256>  <path>`` per line.

    A path holding a backslash or newline is escaped as GNU coreutils does
    (``\\\\``, ``\\n``) and its line starts with a backslash; coreutils 8.x
    and 9.x both read that back.
    """
    lines = []
    for entry in manifest:
        path = entry["path"]
        if "\\" in path or "\n" in path:
            lines.append("\\" + entry["sha256"] + "  " + path.replace("\\", "\\\\").replace("\n", "\\n"))
        else:
            lines.append(entry["sha256"] + "  " + path)
    return "".join(line + "\n" for line in lines)


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")   # file names that are not UTF-8 keep their bytes
