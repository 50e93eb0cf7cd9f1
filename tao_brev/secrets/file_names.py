"""File names that hold a known value: refused at staging, kept only as digests elsewhere.

A name is tainted like any text from outside (``search.find(..., decoded=True)``:
every form, every reading ``taint.views`` gives). Input file names are refused before
anything is uploaded or cached (:func:`refuse_names`, SECRET_IN_IDENTIFIER naming the
input and the file's place in its listing, never the name). A result file name, or any
name a state file would keep (``hash-cache.json``, ``s3-index/*.json``, manifests), is
replaced by :func:`stored_name` (``sha256:<hex of the name>``) or left out
(:func:`without_tainted`): a state file never holds the value, not even redacted.
Every name is checked, however many there are: the names are searched in chunks of whole
names, each short enough for the normaliser to examine every reading of it
(:data:`CHUNK_CHARS`); a chunk that hits, or that the normaliser could not examine whole, is
halved until each hit is one name, and a name it cannot examine whole counts as holding a value (fail
closed: refused at staging, kept as its digest elsewhere). Linear in the names' total length.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Mapping, Sequence, TypeVar

from ..errors import TaoBrevError
from .search import find
from .taint import MAX_VIEW_CHARS

DIGEST_PREFIX = "sha256:"
CHUNK_CHARS = MAX_VIEW_CHARS // 4   # names joined per search: every reading of them fits the normaliser's cap


def _chunks(names: Sequence[str]) -> Iterable[list[int]]:
    """Indexes of ``names`` (strings only) in runs whose names joined are at most CHUNK_CHARS
    long (a longer name alone); every string is in exactly one run."""
    run: list[int] = []
    size = 0
    for i, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if run and size + len(name) + 1 > CHUNK_CHARS:
            yield run
            run, size = [], 0
        run.append(i)
        size += len(name) + 1
    if run:
        yield run


def _hits(names: Sequence[str], env: Mapping[str, str] | None) -> list[int]:
    """Indexes of ``names`` that hold a known value (in any form or reading), or that the
    normaliser could not examine whole (fail closed)."""
    hits: list[int] = []
    for run in _chunks(names):
        hits += _narrow(names, run, env)
    return hits


def _narrow(names: Sequence[str], run: list[int], env: Mapping[str, str] | None) -> list[int]:
    """The names of ``run`` that hit, halving a run that hits until each hit is one name
    (a few searches per hit, each over fewer names)."""
    if not find("\n".join(names[i] for i in run), env, decoded=True):
        return []
    if len(run) == 1:
        return run
    middle = len(run) // 2
    return _narrow(names, run[:middle], env) + _narrow(names, run[middle:], env)


def refuse_names(names: Sequence[str], where: str, env: Mapping[str, str] | None = None) -> None:
    """SECRET_IN_IDENTIFIER when one of ``names`` (file names of ``where``, e.g. ``input data``)
    holds a known value; the message gives the variable and the file's number, never the name."""
    hits = _hits(list(names), env)
    if not hits:
        return
    found = find(names[hits[0]], env, decoded=True)
    var = found[0][0]
    raise TaoBrevError("SECRET_IN_IDENTIFIER",
                       f"{where}: file {hits[0] + 1} of {len(names)} (sorted by path) has a name holding the value "
                       f"of {var} ({found[0][1]}); {len(hits)} file name(s) do: nothing was uploaded or recorded",
                       f"Rename the file(s) whose name holds the value of {var} (a name is stored and shown "
                       f"wherever the file is listed), or unset {var} if it holds no credential; then run the same "
                       "command again.", variable=var, argument=where)


def stored_name(name: str, env: Mapping[str, str] | None = None) -> str:
    """``name``, or ``sha256:<hex>`` of it when it holds a known value (a state file keeps the digest)."""
    if isinstance(name, str) and find(name, env, decoded=True):
        return DIGEST_PREFIX + hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()
    return name


def stored_names(names: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """:func:`stored_name` of each, with one search when none holds a value."""
    hits = set(_hits(list(names), env))
    return [stored_name(n, env) if i in hits else n for i, n in enumerate(names)]


V = TypeVar("V")


def without_tainted(mapping: Mapping[str, V], env: Mapping[str, str] | None = None) -> dict[str, V]:
    """``mapping`` without the entries whose key holds a known value (a cache keyed by path)."""
    keys = list(mapping)
    drop = {keys[i] for i in _hits(keys, env)}
    return {k: v for k, v in mapping.items() if k not in drop}


def tainted(names: Iterable[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The names that hold a known value."""
    names = list(names)
    return [names[i] for i in _hits(names, env)]


def resolve_keys(paths: Iterable[str], listed: Iterable[str], prefix: str) -> dict[str, str]:
    """{``sha256:<hex>`` path: the listed key it stands for}: a manifest kept a tainted result
    name as its digest (:func:`stored_name`); the object under ``prefix`` is found by the digest
    of its name. Empty when no path is a digest."""
    wanted = {p for p in paths if isinstance(p, str) and p.startswith(DIGEST_PREFIX)}
    if not wanted:
        return {}
    found = {}
    for key in listed:
        if key.startswith(prefix):
            digest = DIGEST_PREFIX + hashlib.sha256(key[len(prefix):].encode("utf-8", "surrogateescape")).hexdigest()
            if digest in wanted:
                found[digest] = key
    return found
