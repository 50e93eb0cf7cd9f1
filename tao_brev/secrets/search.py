"""Where the known values occur in a text, and the text with them replaced (inbound: answers,
stderr, records, sidecars, saved logs): :func:`redactor` / :func:`redact_text` replace each form
with ``<redacted>`` and withhold each line that holds a value only a decoder finds, or a part of
one (:mod:`tao_brev.secrets.withhold` over :mod:`tao_brev.secrets.taint`); :func:`find` names the
variable, encoding and line, never the value. Every function takes an optional ``registry``
(default: ``values.DEFAULT``).
"""

from __future__ import annotations

import re
from functools import lru_cache
from json.encoder import encode_basestring_ascii
from typing import Callable, Mapping

from . import taint, withhold
from .forms import LONG_TEXT, Searcher, narrowed, pattern_of
from .names import PLACEHOLDER
from .values import DEFAULT, Registry


def index(env: Mapping[str, str] | None = None, registry: Registry | None = None):
    """(one regex of every form of every known value, {form: (variable name, encoding)})."""
    return (DEFAULT if registry is None else registry).index(env)


def owners_matcher(owners: dict[str, tuple[str, str]]):
    """The :class:`withhold.Matcher` of the forms of an index (``{form: (name, encoding)}``)."""
    return _matcher_of(_owners_key(owners))


def redactor(env: Mapping[str, str] | None = None, registry: Registry | None = None) -> Callable[[str], str]:
    """:func:`redact_text` with the known values looked up once: for many strings in a row
    (one answer, one record). Use it at once; a later change of the environment needs a new one."""
    pattern, owners = index(env, registry)
    if pattern is None:
        return _unchanged
    sub, placeholder = pattern.sub, PLACEHOLDER
    shortest = min(min(map(len, owners)), withhold.PART)   # a shorter text holds no form nor part (most fields of a record)
    untaint = _untainter(_job_matcher(owners, registry))

    def redact_one(text):
        if not text or not isinstance(text, str) or len(text) < shortest:
            return text
        if len(text) < LONG_TEXT:
            return untaint(sub(placeholder, text))
        only = narrowed(pattern, owners, text)
        return untaint(only.sub(placeholder, text) if only else text)

    return redact_one


def matcher(env: Mapping[str, str] | None = None, registry: Registry | None = None):
    """The :class:`withhold.Matcher` the redactor withholds lines by (None: no value known): every
    form of every known value, in the readings a decoder gives of a text (``taint.views``), and
    their parts (``withhold.PART``)."""
    pattern, owners = index(env, registry)
    return None if pattern is None else _job_matcher(owners, registry)


def _owners_key(owners: dict[str, tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple((form, name) for form, (name, _how) in owners.items())


def _job_matcher(owners: dict[str, tuple[str, str]], registry: Registry | None):
    """The matcher of text from a job: the forms of an index, the parts of its verbatim values,
    except inside the minted ids (``values.Registry.minted``) that occur in one of them (only there
    can a part lie inside an id)."""
    verbatim = tuple((form, name) for form, (name, how) in owners.items() if how == "verbatim")
    minted = (DEFAULT if registry is None else registry).minted_ids()
    exempt = tuple(sorted(i for i in minted if any(i in value for value, _name in verbatim)))
    return _matcher_of(_owners_key(owners), verbatim, exempt)


@lru_cache(maxsize=16)
def _matcher_of(forms: tuple, parts: tuple = (), exempt: tuple = ()):
    """The matcher of ``forms`` ((form, owner), ...); ``parts`` ((value, owner), ...): values of which
    a part counts as the value, except inside ``exempt`` (``withhold.Matcher``; for what comes from a
    job, never for the user's input)."""
    return withhold.Matcher(dict(forms), pattern_of, dict(parts), exempt)


@lru_cache(maxsize=16)
def _taint_trigger(shortest: int) -> re.Pattern:
    """Texts with none of these can have no reading but themselves (the form regex has searched
    them): a character the comparison ignores or a decoder reads, a base64 run or a hex run long
    enough to spell ``shortest`` characters (``taint.views``)."""
    return re.compile(r"[^A-Za-z0-9_.,:;/@()\[\]{}<>|!?#$*~^+-]|[A-Za-z0-9+/_-]{%d}|"
                      r"(?:[0-9a-fA-F]{2}[:.,;_-]?){%d}" % (max(12, -(-4 * shortest // 3)), shortest))


def _untainter(found: withhold.Matcher) -> Callable[[str], str]:
    """``text`` with each line that holds a known value in a reading only a decoder finds, or a
    part of one (``withhold.PART`` characters), withheld (``withhold.withhold_lines``, by the
    :func:`_job_matcher` ``found``): the forms were replaced before."""
    trigger = _taint_trigger(max(found.least, taint.MIN_FORM)).search

    def search(text: str) -> object:
        return trigger(text) or found.part_in(text)

    def untaint(text: str) -> str:
        if len(text) < taint.MIN_FORM or not search(text):
            return text
        return withhold.withhold_lines(text, found, needs=search)

    return untaint


def _unchanged(text: str) -> str:
    return text


def json_forms_pattern(env: Mapping[str, str] | None = None, registry: Registry | None = None) -> Searcher | None:
    """One regex of every form of every known value as it reads inside a JSON string written with
    ``ensure_ascii`` (``json.encoder.encode_basestring_ascii(form)[1:-1]``), or None when no value is
    known. That escaping is character by character, so a string holding a form holds its escaped
    form in the JSON text: JSON text this finds nothing in has no string :func:`redactor` would change."""
    pattern, owners = index(env, registry)
    return None if pattern is None else _escaped_pattern(tuple(owners))


@lru_cache(maxsize=8)
def _escaped_pattern(forms: tuple[str, ...]) -> Searcher | None:
    escaped = {encode_basestring_ascii(form)[1:-1] for form in forms}
    return pattern_of(tuple(sorted(escaped, key=lambda f: (-len(f), f))))


def redact_text(text: str, env: Mapping[str, str] | None = None, registry: Registry | None = None) -> str:
    """``text`` with every known secret value, in any of its encodings, replaced by ``<redacted>``."""
    if not text or not isinstance(text, str):
        return text
    return redactor(env, registry)(text)


def find(text: str, env: Mapping[str, str] | None = None, decoded: bool = False,
         registry: Registry | None = None) -> list[tuple[str, str, int]]:
    """[(variable name, encoding, line), ...]: where known values occur in ``text`` (never the value);
    ``decoded``: also in the readings a decoder gives of it (``taint.views``), when no form is there."""
    if not text or not isinstance(text, str):
        return []
    pattern, owners = index(env, registry)
    if pattern is None:
        return []
    only = narrowed(pattern, owners, text)
    hits = []
    for m in only.finditer(text) if only else ():
        name, how = owners[m.group()]
        hit = (name, how, text.count("\n", 0, m.start()) + 1)
        if hit not in hits:
            hits.append(hit)
    return hits or (_decoded_hits(text, owners_matcher(owners)) if decoded else [])


def _decoded_hits(text: str, found) -> list[tuple[str, str, int]]:
    """[(variable, encoding, line)] of the first value a decoder's reading of ``text`` holds
    (``taint.views``): the line that holds it alone, else the first of two, else line 1."""
    whole = found.hit(text)
    if whole is None:
        return []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        one = found.hit(line)
        if one is not None:
            return [(one[0], f"{one[1]}, once decoded", number)]
    for number in range(1, len(lines)):
        two = found.hit(lines[number - 1] + "\n" + lines[number])
        if two is not None:
            return [(two[0], f"{two[1]}, across lines", number)]
    return [(whole[0], f"{whole[1]}, across lines", 1)]
