"""Redaction of output. Invariant: a secret value the process knows never survives an output.

Two layers, kept apart (``references/redaction.md``): the GUARANTEE rests on values
(:mod:`tao_brev.secrets.guard`: every value this process knows, in every encoding;
:func:`redact_values` is that check applied to text); the ADVICE is the pattern lint
(:mod:`tao_brev.secrets.lint`), whose findings :func:`redact` replaces with ``<redacted>``,
keeping the name (``NGC_KEY=abc`` becomes ``NGC_KEY=<redacted>``); :func:`redact_uri` is the
gentle mode for paths and URIs. None of them ever raises, on any input.

``lint``, ``Finding``, ``KINDS`` and the name rules are handed on here: a caller that lints
and redacts imports this one module.
"""

from __future__ import annotations

import json
import re

from functools import lru_cache
from typing import Callable, Iterable, Mapping

from . import search
from .lint import KINDS, Finding, lint  # noqa: F401  (handed on)
from .names import MIN_VALUE_LENGTH, PLACEHOLDER, SECRET_ENV_NAMES, is_secret_name, name_words  # noqa: F401
from .rules import _TEXT_RULES, _URI_RULES, TOKEN_SHAPE_RE, _Hit, _scan

# A string redact_obj treats as a path or URI (no blanks): gets redact_uri.
_PATH_LIKE_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://|/|~/|\./|\.\./)\S*")
# Text no rule can find anything in (ids, timestamps, plain paths, image names): one line, no
# blank, quote, =, $, {, @, ?, &, #, comma, backslash or < - what every rule but the token
# shapes needs around a value (tests/test_redact.py checks each rule) - and no token shape.
_PLAIN_RE = re.compile(r"[A-Za-z0-9_.~/:+-]*")
_MEMO_MAX_CHARS = 1024   # longer texts are scanned each time (the memo stays small)


def redact(text: str) -> str:
    """``text`` with every literal credential replaced by ``<redacted>``."""
    if not isinstance(text, str) or _plain(text):
        return text
    return _redacted(text, _TEXT_RULES)


def redact_uri(value: str) -> str:
    """The gentle mode for paths and URIs: only URL-userinfo passwords,
    presigned-URL query credentials, well-known token shapes and PEM private
    keys are replaced, so ``/data/token=v1/run`` stays intact."""
    if not isinstance(value, str) or _plain(value):
        return value
    return _redacted(value, _URI_RULES)


def _plain(text: str) -> bool:
    """True when no rule can find a credential in ``text`` (see _PLAIN_RE): the common
    case in records and answers, decided by two scans at C speed."""
    return _PLAIN_RE.fullmatch(text) is not None and TOKEN_SHAPE_RE.search(text) is None


def _redacted(text: str, rules) -> str:
    """``text`` with what ``rules`` find replaced. A pure function of its arguments: texts up to
    _MEMO_MAX_CHARS are memoised (the same message or path in 50,000 records is scanned once),
    longer ones scanned each time (the memo stays small)."""
    if len(text) <= _MEMO_MAX_CHARS:
        return _memo_redacted(text, rules)
    return _replace(text, _scan(text, rules))


@lru_cache(maxsize=8192)
def _memo_redacted(text: str, rules) -> str:
    return _replace(text, _scan(text, rules))


def redact_values(text: str, env: Mapping[str, str] | None = None) -> str:
    """Replace every secret value this process knows wherever it appears, in
    each of its encodings (see :mod:`tao_brev.secrets.guard`): values from
    ``env`` when given, else from ``os.environ``, the environment of the
    running verb and the ``--env`` names of the jobs it read."""
    return search.redact_text(text, env)


def redact_obj(obj, env: Mapping[str, str] | None = None):
    """A copy of a JSON-like object with every string redacted (keys kept):
    paths and URIs get :func:`redact_uri`, other strings :func:`redact`, and
    all of them :func:`redact_values` (the known values looked up once per call)."""
    values = search.redactor(env)
    return _redact_obj(obj, lambda text: _redact_string(text, values))


def obj_redactor(env: Mapping[str, str] | None = None) -> ObjRedactor:
    """:func:`redact_obj` for many objects in a row (a streamed listing): the known values are
    looked up once and each distinct string is redacted once (the same image, state, message
    or timestamp in 50,000 records). Use it at once, for one answer, as ``search.redactor``."""
    return ObjRedactor(search.redactor(env))


class ObjRedactor:
    """Made by :func:`obj_redactor`. Calling it answers as :func:`redact_obj`; :meth:`json_text`
    writes the JSON text of that answer."""

    _MEMO_MAX = 4096   # strings remembered; memory stays flat, what repeats comes back at once

    def __init__(self, values: Callable[[str], str]):
        self._values = values
        self._memo: dict[str, str] = {}

    def __call__(self, obj):
        return _redact_obj(obj, self.string)

    def string(self, text: str) -> str:
        out = self._memo.get(text)
        if out is None:
            if len(self._memo) >= self._MEMO_MAX:
                self._memo.clear()
            out = self._memo[text] = _redact_string(text, self._values)
        return out

    def json_text(self, obj, level: int = 0) -> str:
        """``json.dumps(self(obj), indent=2, default=str)``, indented as an item ``level`` deep
        (a streamed listing's entries); ``ensure_ascii`` leaves no raw newline inside a string."""
        text = json.dumps(self(obj), indent=2, default=str)
        return text.replace("\n", "\n" + "  " * level) if level else text


def _redact_string(text: str, values: Callable[[str], str]) -> str:
    if _plain(text):   # what redact and redact_uri both leave as it is
        return values(text)
    gentle = _PATH_LIKE_RE.fullmatch(text) is not None
    return values(redact_uri(text) if gentle else redact(text))


def _redact_obj(obj, string: Callable[[str], str]):
    if isinstance(obj, str):
        return string(obj)
    if isinstance(obj, dict):   # keys too: a job names a KPI after a value (``acc_<value>``)
        return {(string(key) if key.__class__ is str else key): string(value) if value.__class__ is str
                else _redact_obj(value, string) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_redact_obj(value, string) for value in obj]
    if isinstance(obj, tuple):
        return tuple(_redact_obj(value, string) for value in obj)
    return obj



def _replace(text: str, hits: Iterable[_Hit]) -> str:
    merged: list[list[int]] = []
    for start, end in sorted((h.start, h.end) for h in hits):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)  # overlapping values: one placeholder
        else:
            merged.append([start, end])
    out: list[str] = []
    pos = 0
    for start, end in merged:
        out += [text[pos:start], PLACEHOLDER]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def tail(text: str | None, limit: int = 600, *also_hide: str) -> str:
    """The last ``limit`` characters of tool output for a message: redacted
    FIRST (a secret cut in half by the trim would no longer be recognised),
    then trimmed; ``also_hide`` are extra exact values to mask."""
    text = (text or "").strip()
    for value in also_hide:
        if value:
            text = text.replace(value, PLACEHOLDER)
    text = redact_values(redact(text))
    return ("..." + text[-limit:]) if len(text) > limit else (text or "(no output)")
