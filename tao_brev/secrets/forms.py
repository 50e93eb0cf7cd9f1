"""The forms a secret value is searched in, and the one pattern of all of them.

Every value is searched in each common encoding (:func:`encodings`):
verbatim; URL-encoded with upper- or lower-case escapes, with or without
``/`` kept, ``+`` for blanks or not, and percent-encoded byte by byte
(``%41%42``, either case); JSON-escaped (``\\/`` too) and Python-repr
escaped; base64 (padded or not), base64url (padded or not), and the base64
groups of the value alone (so it is found inside a longer base64 text such as
``Basic base64(user:value)``), base32 (padded or not, either case), hex (either
case); and base64 of ``user:value`` for the login the bundle builds
(``$oauthtoken:NGC_KEY``, what ``docker login`` stores). Forms shorter than
``names.MIN_VALUE_LENGTH`` are never searched as free text.

:func:`index_of` makes the search of a set of values: one trie regex of every form
(:func:`pattern_of`; long forms found with ``str.find``) and each form's owner. Pure
functions (memoised), no state: the values come from :mod:`tao_brev.secrets.values`.
"""

from __future__ import annotations

import base64
import html
import json
import re
import shlex
from functools import lru_cache
from typing import Union
from urllib.parse import quote, quote_plus

from .names import MIN_VALUE_LENGTH

# Logins the bundle builds: docker stores base64("$oauthtoken:" + NGC_KEY).
LOGIN_USERS = {"NGC_KEY": "$oauthtoken", "NGC_API_KEY": "$oauthtoken"}


def _lower_escapes(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), text)


def _bytes(text: str) -> bytes:
    """The bytes a value stands for: os.environ decodes bytes that are not UTF-8 to lone
    surrogates (PEP 383 ``surrogateescape``), which give the original bytes back."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:   # a surrogate PEP 383 never makes (e.g. from JSON's \ud800)
        return text.encode("utf-8", "surrogatepass")


def _b64(text: str) -> str:
    return base64.b64encode(_bytes(text)).decode()


@lru_cache(maxsize=512)
def encodings(value: str, name: str = "") -> tuple[tuple[str, str], ...]:
    """((form, encoding name), ...) of ``value``: every form at least
    MIN_VALUE_LENGTH long, each once, longest first."""
    forms: dict[str, str] = {}

    def add(form: str, how: str) -> None:
        if len(form) >= MIN_VALUE_LENGTH and form not in forms:
            forms[form] = how

    add(value, "verbatim")
    add(value.strip(), "verbatim")
    # case changed: hex keys (W&B's 40 digits, digests) mean the same in either case, and jobs print
    # them upper-cased (`tr a-z A-Z`, Go's %X, Python's .upper()); so may any tool
    add(value.upper(), "case-changed")
    add(value.lower(), "case-changed")
    raw = _bytes(value)
    if raw.decode("utf-8", "replace") != value:   # not UTF-8: how a reader that is not PEP 383 shows it
        add(raw.decode("utf-8", "replace"), "verbatim")
        add(raw.decode("latin-1"), "verbatim")
    for safe in ("", "/"):
        for encoded in (quote(raw, safe=safe), quote_plus(raw, safe=safe)):
            add(encoded, "URL-encoded")
            add(_lower_escapes(encoded), "URL-encoded")
    for ascii_only in (True, False):
        escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        add(escaped, "JSON-escaped")
        add(escaped.replace("/", "\\/"), "JSON-escaped")
        add(json.dumps(escaped)[1:-1], "JSON-escaped")
    add(repr(value)[1:-1], "escaped")
    add(shlex.quote(value), "shell-quoted")
    # inside a longer single-quoted word (shlex.join of a path holding it): each ' is '"'"'
    add(value.replace("'", "'\"'\"'"), "shell-quoted")
    add(html.escape(value), "HTML-escaped")
    encoded = _b64(value)
    add(encoded, "base64")
    add(encoded.rstrip("="), "base64")
    urlsafe = base64.urlsafe_b64encode(raw).decode()
    add(urlsafe, "base64url")
    add(urlsafe.rstrip("="), "base64url")
    # The value inside a longer base64 text (``Basic base64(user:value)``, a JSON blob): whatever
    # comes before it, it starts within one of the 3 byte positions of a base64 group; the
    # groups made of its bytes alone are the same text wherever it sits.
    for skip in range(3):
        whole = (len(raw) - skip) // 3 * 3
        if whole >= 6:
            core = raw[skip:skip + whole]
            add(base64.b64encode(core).decode(), "base64 (inside a longer base64 text)")
            add(base64.urlsafe_b64encode(core).decode(), "base64url (inside a longer base64 text)")
    b32 = base64.b32encode(raw).decode()
    for form in (b32, b32.rstrip("=")):
        add(form, "base32")
        add(form.lower(), "base32")
    add(raw.hex(), "hex")
    add(raw.hex().upper(), "hex")
    add(base64.b85encode(raw).decode(), "base85")
    add(base64.a85encode(raw).decode(), "ascii85")
    every = "".join(f"%{b:02X}" for b in raw)   # every byte escaped (``%41%42``), not only the unsafe ones
    add(every, "percent-encoded")
    add(every.lower(), "percent-encoded")
    user = LOGIN_USERS.get(name)
    if user:
        add(_b64(f"{user}:{value}"), "base64 login")
    return tuple(sorted(forms.items(), key=lambda item: (-len(item[0]), item[0])))

LONG_FORM = 256   # forms longer than this are found with str.find (linear), not compiled into the regex


class _Found:
    """A match of a long form (what :class:`Forms` yields like ``re.Match``)."""

    __slots__ = ("_text", "_start")

    def __init__(self, text: str, start: int):
        self._text, self._start = text, start

    def group(self) -> str:
        return self._text

    def start(self) -> int:
        return self._start


class Forms:
    """``re.Pattern``'s ``sub``/``search``/``finditer`` over forms of which some are long: those
    are found with ``str.find`` (two-way search: linear in text and form), the rest with the trie
    regex; a 64 KiB value's forms compiled into one regex cost seconds, and more than linearly."""

    def __init__(self, short: re.Pattern | None, long_forms: tuple[str, ...]):
        self._short, self._long = short, long_forms

    def _long_hits(self, text: str) -> list[_Found]:
        hits: list[_Found] = []
        taken: list[tuple[int, int]] = []
        for form in self._long:   # longest first: a shorter form inside a longer hit is no new hit
            at = text.find(form)
            while at >= 0:
                if not any(s <= at < e for s, e in taken):
                    hits.append(_Found(form, at))
                    taken.append((at, at + len(form)))
                at = text.find(form, at + len(form))
        return sorted(hits, key=_Found.start)

    def sub(self, repl: str, text: str) -> str:
        for form in self._long:
            if form in text:
                text = text.replace(form, repl)
        return self._short.sub(repl, text) if self._short is not None else text

    def search(self, text: str):
        hits = self._long_hits(text)
        if hits:
            return hits[0]
        return self._short.search(text) if self._short is not None else None

    def finditer(self, text: str):
        yield from self._long_hits(text)
        if self._short is not None:
            yield from self._short.finditer(text)


Searcher = Union[re.Pattern, Forms]   # what pattern_of gives: a regex, or Forms when some forms are long
_Trie = dict[str, "_Trie"]   # a trie of forms, one character a level; "" marks a form's end


@lru_cache(maxsize=32)
def pattern_of(forms: tuple[str, ...]) -> Searcher | None:
    long_forms = tuple(f for f in forms if len(f) > LONG_FORM)
    if long_forms:
        return Forms(_trie_pattern(tuple(f for f in forms if len(f) <= LONG_FORM)), long_forms)
    return _trie_pattern(forms)


def _trie_pattern(forms: tuple[str, ...]) -> re.Pattern | None:
    """One regex matching the longest of ``forms`` at the leftmost place, as a trie
    (``(?:ab(?:c|d)|x...)``): the engine tries each first character once instead of
    every form at every position (about 2x faster than a flat alternation of 15 forms a value)."""
    if not forms:
        return None
    root: _Trie = {}
    for form in forms:
        node = root
        for char in form:
            node = node.setdefault(char, {})
        node[""] = {}   # a form ends here
    return re.compile(_trie_source(root))


def _trie_source(node: _Trie) -> str:
    parts = []
    for char in sorted(c for c in node if c):
        run, child = [char], node[char]
        while len(child) == 1 and "" not in child:   # a chain of single children: one literal
            (char, child), = child.items()
            run.append(char)
        parts.append(re.escape("".join(run)) + _trie_source(child))
    if not parts:
        return ""
    body = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    return f"(?:{body})?" if "" in node else body   # greedy: the longer form first


# From this length on, a text is first searched for each form on its own (``in``: C speed, a
# few microseconds a form) and the regex is built of the forms it contains only: most long
# texts (logs, scripts) contain none. Shorter ones go straight to the regex.
LONG_TEXT = 1024


def narrowed(pattern: Searcher | None, owners: dict[str, tuple[str, str]], text: str) -> Searcher | None:
    """``pattern``, or for a long ``text`` the pattern of only the forms it contains (None: none):
    what a form not in the text cannot match is the same either way."""
    if pattern is None or len(text) < LONG_TEXT:
        return pattern
    present = tuple(sorted((form for form in owners if form in text), key=lambda f: (-len(f), f)))
    return pattern_of(present) if present else None


@lru_cache(maxsize=32)
def index_of(known: tuple[tuple[str, str], ...]) -> tuple[Searcher | None, dict[str, tuple[str, str]]]:
    """(one pattern of every form of ``known`` ((value, variable name), ...), {form: (name, encoding)});
    a form two values share belongs to the first."""
    owners: dict[str, tuple[str, str]] = {}
    for value, name in known:
        for form, how in encodings(value, name):
            owners.setdefault(form, (name, how))
    forms = tuple(sorted(owners, key=lambda f: (-len(f), f)))
    return pattern_of(forms), owners
