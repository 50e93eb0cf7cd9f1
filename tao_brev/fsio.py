"""Atomic, locked, private files: the only way the bundle writes state to disk.

Invariant: a reader never sees a file half-written, even when the writer is
SIGKILLed at any instruction. Every write first puts the whole content in a
temp file in the same directory (flush + fsync), then makes it visible under
its final name in one step:

* :func:`atomic_write_json` / :func:`atomic_write_text` replace: ``rename``
  over the target;
* :func:`create_json` creates exclusively: ``link`` of the temp file to the
  final name fails when that name exists (``O_EXCL`` semantics without an
  empty file ever being visible);

then fsyncs the directory. A writer killed before that step leaves only a
hidden ``.<name>.<pid>.<random>.tmp`` file, which :func:`sweep_temp` removes
once its process is gone. ``locked(path)`` holds an exclusive ``flock`` on a
sibling ``.<name>.lock`` across a read-modify-write, so an agent and
background pollers can update the same file.

Private: the state directory is 0700 (:func:`private_dir`), every file 0600;
a temp file has a unique random name and is created with ``O_EXCL |
O_NOFOLLOW``, so a planted file or symlink is never written through.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import fcntl
import io
import json
import os
import re
import stat
import threading
import uuid
from pathlib import Path

from . import statedir
from .secrets import safe_read

FILE_MODE = 0o600
DIR_MODE = 0o700
CREATE_PRIVATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

_TEMP_RE = re.compile(r"^\..+\.(\d+)\.[0-9a-f]+\.tmp$")
# link(2) unsupported by the filesystem: fall back to a check under the directory lock
_NO_LINK = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK}


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) with mode 0700, and tighten it to
    0700 when it exists with a wider mode and belongs to us. Inside a state dir no
    component may be a link (``statedir.check``: UNSAFE_STATE_PATH); a link is never chmod-ed."""
    statedir.check(path)
    missing = [d for d in (path, *path.parents) if not d.exists()]
    for d in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(d, DIR_MODE)
    statedir.check(path)
    link = stat.S_ISLNK(os.lstat(path).st_mode)   # a state root kept elsewhere: used, never chmod-ed
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(str(path))
    if not link and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != DIR_MODE:
        os.chmod(path, DIR_MODE)
    return path


def read_text(path: str | os.PathLike) -> str:
    """``Path(path).read_text()`` of a regular file of at most 16 MiB (``safe_read``; a link, FIFO,
    directory or device raises ``safe_read.UnsafeFile``, an OSError): the text-mode default encoding, strict errors, universal
    newlines (``\r\n`` and ``\r`` read as ``\n``). When that encoding is UTF-8 (the usual
    case) the bytes are read with ``os.read`` and decoded at once, without file objects or a
    text-mode stream: a quarter of the cost per small file (a listing reads 50,000). Raises what ``read_text`` raises
    (OSError, UnicodeDecodeError)."""
    statedir.check(path, last=False)   # no link inside the state dir; the file itself: O_NOFOLLOW
    data = safe_read.read_bytes(path)   # regular files only, 16 MiB at most (safe_read.UnsafeFile)
    if not _utf8_text_mode():
        return io.TextIOWrapper(io.BytesIO(data)).read()
    text = data.decode("utf-8")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


_CHUNK = 1 << 16


def read_bytes_or_error(path: str | os.PathLike) -> bytes | OSError:
    """The bytes of the regular file ``path`` (``safe_read.read_bytes``: 16 MiB at most, never
    through a link inside the state dir), or the OSError that says why it is none (a directory,
    FIFO, device, link, over the cap): the caller treats that file as damaged. Raises
    FileNotFoundError only."""
    try:
        statedir.check(path, last=False)
        return safe_read.read_bytes(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        return exc


_TEXT_MODE: list = []


def _utf8_text_mode() -> bool:
    """True when text-mode ``open`` without an encoding decodes UTF-8 (asked of a text
    stream itself, so the locale, UTF-8 mode and the Python version decide as they do for it)."""
    if not _TEXT_MODE:
        _TEXT_MODE.append(codecs.lookup(io.TextIOWrapper(io.BytesIO()).encoding).name == "utf-8")
    return _TEXT_MODE[0]


def _write_temp(path: Path, text: str, mode: int) -> Path:
    """``text`` in a fresh private temp file beside ``path`` (fsynced)."""
    statedir.check(path, last=False)   # never written through a link inside the state dir
    tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
    fd = os.open(tmp, CREATE_PRIVATE, mode)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    return tmp


def _json_text(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=False) + "\n"


def _fsync_dir(directory: Path) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def atomic_write_text(path: Path, text: str, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``text``, atomically and durably, mode 0600."""
    tmp = _write_temp(path, text, mode)
    try:
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _fsync_dir(path.parent)


def atomic_write_json(path: Path, obj, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``obj`` as indented JSON, atomically and durably, mode 0600."""
    atomic_write_text(path, _json_text(obj), mode)


def create_json(path: Path, obj, mode: int = FILE_MODE) -> bool:
    """Create ``path`` holding ``obj`` (mode 0600) only if no file has that name;
    False when one has (a planted symlink included: it is never written through).

    The content is complete before the name appears (``link`` of a fsynced temp
    file), so no reader ever sees ``path`` empty or partial, whatever kills the writer.
    """
    tmp = _write_temp(path, _json_text(obj), mode)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _NO_LINK:
                raise
            with locked(path.parent / ".create"):   # every writer of this bundle creates under this lock
                if os.path.lexists(path):
                    return False
                os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _fsync_dir(path.parent)
    return True


class AdvisoryFile:
    """A cache file written whole, then put in place by one ``rename``: readers see the old
    file or the new one, never a mix. For files that are advisory only (an index, a cache
    that is checked before use): no fsync and no lock - a lost or concurrent write only means
    the next reader rebuilds. The temp file beside ``path`` is private (0600, ``O_EXCL |
    O_NOFOLLOW``) and its name is one :func:`sweep_temp` recognises. Never raises OSError:
    a write that fails is abandoned (:meth:`commit` then answers False)."""

    def __init__(self, path: Path):
        self.path = path
        self._tmp = path.parent / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:12]}.tmp"
        self._fh: io.BufferedWriter | None
        try:
            private_dir(path.parent)
            self._fh = os.fdopen(os.open(self._tmp, CREATE_PRIVATE, FILE_MODE), "wb")
        except OSError:
            self._fh = None

    def write(self, data: bytes) -> None:
        if self._fh is not None:
            try:
                self._fh.write(data)
            except OSError:
                self.abort()

    def commit(self) -> bool:
        """Replace ``path`` with what was written; False when nothing was put in place."""
        if self._fh is None:
            return False
        try:
            self._fh.close()
            os.replace(self._tmp, self.path)
        except OSError:
            self.abort()
            return False
        self._fh = None
        return True

    def abort(self) -> None:
        """Drop the temp file; ``path`` stays as it was."""
        fh, self._fh = self._fh, None
        with contextlib.suppress(OSError):
            if fh is not None:
                fh.close()
        with contextlib.suppress(OSError):
            os.unlink(self._tmp)


def pid_alive(pid: int) -> bool:
    """True unless no process ``pid`` exists (a process of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temp(directory: Path) -> list[Path]:
    """Remove the temp files that writers killed before their rename/link left in
    ``directory`` (those whose process no longer exists). Returns what was removed."""
    removed = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.scandir(directory):
            match = _TEMP_RE.match(entry.name)
            if match and int(match.group(1)) != os.getpid() and not pid_alive(int(match.group(1))):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed.append(Path(entry.path))
    return removed


_held = threading.local()


LOCK_FLAGS = (os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
              | getattr(os, "O_CLOEXEC", 0))


def _open_lock(lock_path: Path) -> int:
    """A descriptor of the regular lock file ``lock_path`` (created 0600), or UNSAFE_STATE_PATH
    (``statedir.refuse``) when that name is a link, FIFO, directory, socket or device: opened
    with O_NOFOLLOW | O_NONBLOCK, so a planted FIFO or a link to /dev/zero never blocks or is
    written through; ``fstat`` of what was opened decides."""
    try:
        fd = os.open(lock_path, LOCK_FLAGS, FILE_MODE)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP, errno.ENODEV, errno.EMLINK):
            raise statedir.refuse(lock_path, "(a lock file) is not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise statedir.refuse(lock_path, "(a lock file) is not a regular file")
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def locked(path: Path):
    """Exclusive lock for a read-modify-write of ``path`` (blocks until held).

    The lock file is 0600 and never opened through a symlink; one that is no regular file (a
    FIFO, a directory, a link to a device) raises UNSAFE_STATE_PATH (:func:`_open_lock`). Re-entrant within
    one thread (a second ``flock`` on a new descriptor of the same file would
    wait for the first forever); other threads and processes wait."""
    lock_path = path.parent / f".{path.name}.lock"
    held = _held.__dict__.setdefault("paths", set())
    if lock_path in held:
        yield
        return
    fd = _open_lock(lock_path)
    with os.fdopen(fd, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        held.add(lock_path)
        try:
            yield
        finally:
            held.discard(lock_path)
            fcntl.flock(fh, fcntl.LOCK_UN)
