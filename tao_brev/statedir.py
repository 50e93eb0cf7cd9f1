"""The state dir is ours: no component inside ``$TAO_STATE_DIR`` may be a link.

``jobs/``, ``brev/logs/`` or ``brev/results/`` made a link to a directory elsewhere
would have records, logs and results written there and that directory chmod-ed.
:func:`check_inside` walks a path from the state root down with ``lstat`` and raises
UNSAFE_STATE_PATH naming the first component that is a link (or, for a directory
component, not a directory). The root itself may be a link (``~/.tao`` kept on
another disk): only what is inside it is checked. Roots are ``$TAO_STATE_DIR`` (or
``~/.tao``) and every root a store was opened on (:func:`note_root`). A directory
found clean is remembered for this process (a listing reads 50,000 records).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import TaoBrevError

_roots: set[str] = set()
_clean: set[str] = set()


def note_root(root) -> None:
    """``root`` is a state dir: paths inside it are checked from now on."""
    _roots.add(os.path.abspath(os.fspath(root)))


def roots() -> set[str]:
    found = set(_roots)
    env = os.environ.get("TAO_STATE_DIR")
    if env and os.path.isabs(env):
        found.add(os.path.abspath(env))
    elif env is None:
        found.add(os.path.abspath(os.path.expanduser("~/.tao")))
    return found


def root_of(path) -> str | None:
    """The state root ``path`` lies inside (the deepest one), or None."""
    text = os.path.abspath(os.fspath(path))
    inside = [r for r in roots() if text != r and text.startswith(r.rstrip(os.sep) + os.sep)]
    return max(inside, key=len) if inside else None


def refuse(path, why: str) -> TaoBrevError:
    return TaoBrevError("UNSAFE_STATE_PATH", f"{path} {why}: nothing is read or written through it",
                        f"The state dir's own files and directories must be real ones: move {path} away "
                        "(`mv` it, then look at what it pointed to), then run the same command again.")


def check_inside(root, path, last: bool = True) -> None:
    """Raise UNSAFE_STATE_PATH when a component of ``path`` below ``root`` is a symbolic link, or one
    that should be a directory is something else (``last=False``: the last component is not
    checked, e.g. a file opened with O_NOFOLLOW); BAD_STATE_DIR when ``root`` exists and is no
    directory. Components that do not exist yet end the walk (they will be made by this bundle)."""
    root_text = os.path.abspath(os.fspath(root))
    text = os.path.abspath(os.fspath(path))
    if not text.startswith(root_text.rstrip(os.sep) + os.sep):
        return
    if root_text not in _clean:
        try:
            if not stat.S_ISDIR(os.stat(root_text).st_mode):
                raise TaoBrevError("BAD_STATE_DIR", f"the state dir {root_text} is not a directory",
                                   "Set TAO_STATE_DIR to a directory (or unset it to use ~/.tao).")
        except FileNotFoundError:
            return
        _clean.add(root_text)
    parts = Path(text[len(root_text):].lstrip(os.sep)).parts
    current = root_text
    for index, part in enumerate(parts):
        final = index == len(parts) - 1
        if final and not last:
            return
        current = os.path.join(current, part)
        if current in _clean:
            continue
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise refuse(current, "is a symbolic link inside the state dir")
        if stat.S_ISDIR(st.st_mode):
            _clean.add(current)
        elif not final:
            raise refuse(current, "is not a directory")


def check(path, last: bool = True) -> None:
    """:func:`check_inside` for the state root ``path`` lies in, if any."""
    root = root_of(path)
    if root is not None:
        check_inside(root, path, last)


def forget() -> None:
    """Drop the directories found clean and the noted roots (tests)."""
    _clean.clear()
    _roots.clear()
