"""Regular expressions compiled on first use instead of at import.

A script's start-up pays for every module-level ``re.compile`` of every module
it imports, used or not (about 50 in this package); ``--help`` uses none. A
:class:`LazyPattern` is written where ``re.compile`` was and behaves as the
compiled pattern (``search``, ``sub``, ``finditer``, ``flags``, ...): the first
attribute read compiles it with :func:`re.compile` (same pattern, same flags,
so the same matches); each attribute read once is then stored on the object, so
later calls cost what a compiled pattern's do. ``pattern`` is known at once.
It is not an ``re.Pattern``: pass ``p.search``, not ``p``, to ``re`` functions.
"""

from __future__ import annotations

import re


class LazyPattern:
    """``re.compile(pattern, flags)``, done on the first use."""

    def __init__(self, pattern: str, flags: int = 0):
        self.pattern = pattern
        self._flags = flags

    def __getattr__(self, name: str):   # only called for names not stored yet
        if name.startswith("__") or name in ("pattern", "_flags"):
            raise AttributeError(name)   # copy/pickle probes; an object whose __init__ did not run
        value = getattr(re.compile(self.pattern, self._flags), name)
        self.__dict__[name] = value
        return value

    def __repr__(self) -> str:
        return repr(re.compile(self.pattern, self._flags))


def compile(pattern: str, flags: int = 0) -> LazyPattern:  # noqa: A001 - the name of what it stands for
    """The pattern :func:`re.compile` would return, compiled when first used."""
    return LazyPattern(pattern, flags)
