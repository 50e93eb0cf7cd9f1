"""``brev copy`` with colon-free local paths (brev-cli pkg/cmd/copy/copy.go parseWorkspacePath)."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Callable

from ..errors import TaoBrevError
from .names import INSTANCE_RE


def safe_copy(copy: Callable[[str, str], object], src: str, dst: str) -> None:
    """``copy(src, dst)`` (one side ``NAME:path``) with a local side free of ':' (brev-cli
    copy.go parseWorkspacePath splits on every colon): a local path holding one is replaced by
    a file in a fresh colon-free temporary directory, copied from (upload) or moved to
    (download) the real path. Raises BAD_ARGUMENT unless exactly one side names an instance,
    BAD_NAME for a colon in the remote path."""
    sides = [_remote_side(src), _remote_side(dst)]
    if (sides[0] is None) == (sides[1] is None):
        raise TaoBrevError("BAD_ARGUMENT", f"brev copy needs exactly one NAME:path side (got {src!r}, {dst!r})")
    remote = sides[0] or sides[1]
    assert remote is not None   # exactly one side names an instance
    remote_path = remote[1]
    if ":" in remote_path:
        raise TaoBrevError("BAD_NAME", f"a remote path with ':' cannot be copied (brev splits on it): {remote_path!r}")
    local = dst if sides[0] is not None else src
    if ":" not in local:
        copy(src, dst)
        return
    with tempfile.TemporaryDirectory(dir=colon_free_tmp()) as tmp:
        staged = os.path.join(tmp, STAGED_NAME)
        if sides[0] is not None:   # download: into the temporary path, then moved
            copy(src, staged)
            target = os.path.join(local, os.path.basename(remote_path.rstrip("/"))) if os.path.isdir(local) else local
            shutil.move(staged, target)
        else:
            (shutil.copytree if os.path.isdir(local) else shutil.copy2)(local, staged)
            copy(staged, dst)


STAGED_NAME = "staged"   # the colon-free file or directory of safe_copy's temporary directory


def _remote_side(arg: str) -> tuple[str, str] | None:
    """(instance, path) of a ``NAME:path`` argument the bundle built, else None (a local path)."""
    head, sep, tail = arg.partition(":")
    return (head, tail) if sep and INSTANCE_RE.fullmatch(head) else None   # a name has no '/': "/x/a:b" is local


def colon_free_tmp() -> str:
    """A writable temporary directory whose path holds no ':' ($TMPDIR, else /tmp, /var/tmp)."""
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if ":" not in candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK):
            return candidate
    raise TaoBrevError("BAD_STATE_DIR", "no temporary directory without ':' in its path ($TMPDIR, /tmp, /var/tmp)")
