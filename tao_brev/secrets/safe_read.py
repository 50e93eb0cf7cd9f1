"""Every read bounded: files opened only when they are regular files, read with a size cap.

A record, sidecar, cache, spec or log path may be a directory, a FIFO (an ``open``
would wait for a writer forever), a device (``/dev/zero`` never ends) or a link to one.
:func:`read_bytes` opens with ``O_NONBLOCK`` (a FIFO never hangs the open) and, for
files inside the state dir, ``O_NOFOLLOW`` (a link is refused, never followed), then
``fstat``s the descriptor: anything but a regular file raises :class:`UnsafeFile`
(an ``OSError``, so every reader that handles an unreadable file handles it), as
does a file larger than the cap (checked on ``st_size`` and again while reading:
a file that grows is cut off, never read without end).

:func:`loads` is ``json.loads`` with bounds: an integer of more than
:data:`MAX_INT_DIGITS` digits becomes ``inf``/``-inf`` (Python's int-string limit
would raise ValueError), nesting deeper than the parser's limit is a ValueError.
"""

from __future__ import annotations

import errno
import json
import os
import stat

from .. import statedir

MAX_STATE_FILE_BYTES = 16 << 20   # a record, sidecar, cache or index: 16 MiB at most
MAX_INT_DIGITS = 300              # digits of a JSON integer kept as an int (float's range)
_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafeFile(OSError):
    """A path that is no regular file (directory, FIFO, device, socket, link) or is over its cap."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a link")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path, cap: int = MAX_STATE_FILE_BYTES, follow: bool = False) -> bytes:
    """The bytes of the regular file ``path``, at most ``cap`` of them. ``follow=False`` (state
    files): a symbolic link is refused. Raises FileNotFoundError, :class:`UnsafeFile` (not a
    regular file, a link, larger than ``cap`` bytes), other OSError."""
    try:
        fd = os.open(path, _FLAGS | (0 if follow else _NOFOLLOW))
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise UnsafeFile(errno.ELOOP, "is a symbolic link (refused, never followed)", str(path)) from None
        if exc.errno == errno.ENXIO:   # open(2) of a socket, or of a device without a driver
            raise UnsafeFile(errno.ENXIO, "is a socket or a device, not a regular file", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(errno.EINVAL, f"is {_kind(st.st_mode)}, not a regular file", str(path))
        if st.st_size > cap:
            raise UnsafeFile(errno.EFBIG, f"is larger than {cap} bytes ({st.st_size})", str(path))
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, min(1 << 16, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                raise UnsafeFile(errno.EFBIG, f"is larger than {cap} bytes (it grew while read)", str(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path, cap: int = MAX_STATE_FILE_BYTES, follow: bool = False, state_root=None) -> str:
    """:func:`read_bytes` decoded as UTF-8 (strict), universal newlines. ``state_root``: also refuse
    a link anywhere between it and ``path`` (``statedir.check_inside``)."""
    if state_root is not None:
        statedir.check_inside(state_root, path)
    text = read_bytes(path, cap, follow).decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def bounded_int(digits: str):
    """``parse_int`` of :func:`loads`: an int, or +-inf beyond :data:`MAX_INT_DIGITS` digits."""
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        return float("-inf") if digits.startswith("-") else float("inf")
    return int(digits)


def loads(text):
    """``json.loads`` with bounded integers; raises ValueError (also for nesting too deep)."""
    try:
        return json.loads(text, parse_int=bounded_int)
    except RecursionError:
        raise ValueError("JSON nested too deep") from None


def describe(exc: OSError) -> str:
    """``<path> is a FIFO, not a regular file`` for an :class:`UnsafeFile`, else ``strerror``."""
    if isinstance(exc, UnsafeFile):
        return f"{exc.filename} {exc.strerror}"
    return f"{exc.filename or ''}: {exc.strerror or exc}".strip(": ")
