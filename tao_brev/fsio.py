"""Atomic, locked JSON files: the only way the bundle writes state to disk.

Write = temp file in the same directory + flush + fsync + rename over the
target + fsync of the directory, so a reader sees the old file or the new one,
never a torn one, even across a crash. ``locked(path)`` holds an exclusive
``flock`` on a sibling ``.<name>.lock`` across a read-modify-write, so an agent
and background pollers can update the same file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path


def atomic_write_json(path: Path, obj, mode: int = 0o644) -> None:
    """Replace ``path`` with ``obj`` as indented JSON, atomically and durably."""
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=2, sort_keys=False)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def reserve(path: Path) -> bool:
    """Create ``path`` exclusively (O_EXCL). False when it already exists."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


@contextlib.contextmanager
def locked(path: Path):
    """Exclusive lock for a read-modify-write of ``path`` (blocks until held)."""
    lock_path = path.parent / f".{path.name}.lock"
    with open(lock_path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
