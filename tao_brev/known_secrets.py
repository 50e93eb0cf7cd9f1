"""The secret values this process knows, checked at every exit: the GUARANTEE.

Patterns (``redact.lint``) only advise; this module rests on values the
process holds for certain. Its sources, read at each check:

1. the bundle's credential variables (``redact.SECRET_ENV_NAMES``: BREV_API_TOKEN,
   NGC_KEY / NGC_API_KEY, the AWS keys, HF_TOKEN, WANDB_API_KEY, ...);
2. every environment variable whose name looks like a credential
   (:func:`is_credential_env_name`: ``redact.is_secret_name`` - camelCase
   included - plus ``*_KEY``, ``*PASSWORD``, ``*_PWD``, ``*_PAT``, ``*_AUTH``,
   ``*_DSN``, ``*_SAS``, ``*_CONNECTION_STRING``), except values that are
   absolute paths (they name a file; the file is the secret);
3. every ``--env NAME`` of a submit and the ``--env`` names a job's sidecar
   remembers (:func:`watch`): a later verb redacts those values whenever they
   are set in ITS environment (an agent's next shell may not have them).

The environments searched are ``os.environ`` and the environment of the
running verb (:func:`observe_env`, called by ``cli.Context``), or only the
mapping a caller passes.

Every value is searched in each common encoding (:func:`encodings`):
verbatim; URL-encoded with upper- or lower-case escapes, with or without
``/`` kept, ``+`` for blanks or not, and percent-encoded byte by byte
(``%41%42``, either case); JSON-escaped (``\\/`` too) and Python-repr
escaped; base64 (padded or not), base64url (padded or not), and the base64
groups of the value alone (so it is found inside a longer base64 text such as
``Basic base64(user:value)``), base32 (padded or not, either case), hex (either
case); and base64 of ``user:value`` for the
login the bundle builds (``$oauthtoken:NGC_KEY``, what ``docker login``
stores). A spec or override is also checked after parsing
(:func:`refuse_parsed`): every key and string YAML or the override grammar
decodes, so an escape, a line continuation or a quoting the raw text hides
is still found. Values shorter than :data:`MIN_VALUE_LENGTH` are never searched as
free text (too many false hits); ``submit.py`` refuses such short values for
its ``--env`` names and the bundle's own credentials instead
(:func:`refuse_short`).

Outbound (commands, scripts, files and argv the bundle sends): :func:`refuse`
raises SECRET_IN_COMMAND naming WHERE and WHICH variable, never the value.
Inbound (JSON answers, stderr, records, sidecars, saved logs):
:func:`redact_text` replaces each form with ``<redacted>``.
"""

from __future__ import annotations

import base64
import bisect
import html
import json
import os
import re
import shlex
from functools import lru_cache
from typing import Callable, Iterable, Mapping
from urllib.parse import quote, quote_plus, unquote

from . import lazy_re
from . import redact
from .errors import TaoBrevError

MIN_VALUE_LENGTH = redact.MIN_VALUE_LENGTH   # 8
# The bundle's own credentials: they never reach a container unless submit.py
# is told so (--allow-bundle-credential-env).
BUNDLE_CREDENTIALS = ("BREV_API_TOKEN", "NGC_KEY", "NGC_API_KEY")
# Logins the bundle builds: docker stores base64("$oauthtoken:" + NGC_KEY).
LOGIN_USERS = {"NGC_KEY": "$oauthtoken", "NGC_API_KEY": "$oauthtoken"}
# Last words that make an environment variable's name a credential (``KAGGLE_KEY``).
_ENV_LAST_WORDS = frozenset({"key", "pwd", "pass", "passcode", "auth", "pat", "dsn", "sas", "cookie", "hmac",
                             "salt", "pin"})
_ENV_ANY_WORDS = frozenset({"webhook", "webhooks"})   # SLACK_WEBHOOK_URL: the URL is the secret
# A last word that says how the value is written, not what it is (``HF_TOKEN_B64``,
# ``GITHUB_TOKEN_BASE64``, ``MY_SECRET_JSON``, ``signingKeyPem``): the name without it decides.
# After ``_``, ``-``, ``.`` or at a camelCase step; never FILE/PATH/DIR (a path names a file).
_FORMAT_SUFFIX_RE = lazy_re.compile(
    r"(?:[_.\-]+|(?<=[a-z0-9])(?=[A-Z]))(?i:base64url|base64|b64url|b64|base32|b32|base58|b58|base85|b85|"
    r"hex|json|yaml|yml|toml|xml|ini|pem|der|crt|jwk|jwt|p12|pfx|pkcs12|raw|enc|encoded|encrypted|txt|text|"
    r"str|string|bin|binary|gz|gzip|asc|armored|armor|utf8|ascii|plain|plaintext|value|val|data)$")
# A URL with a password in an environment value (DATABASE_URL=postgres://u:PASSWORD@h/db): the password is known.
_URL_PASSWORD_RE = lazy_re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:(?P<password>[^\s/@]+)@")

_observed: list[Mapping[str, str]] = []   # the running verb's environment (latest Context)
_watched: set[str] = set()                # --env names: secret whatever their name says
_unproven: dict[str, str] = {}            # --env names of a job whose values are not proven here (env_proof)
_minted: set[str] = set()                 # identifiers the bundle minted itself (job ids): never a secret


def is_credential_env_name(name: str) -> bool:
    """True for the bundle's credential variables and every name that looks
    like a credential: ``HF_TOKEN``, ``clientSecret``, ``PGPASSWORD``,
    ``KAGGLE_KEY``, ``MYSQL_PWD``, ``AZURE_STORAGE_CONNECTION_STRING``, and
    such a name followed by a word saying how the value is written
    (``HF_TOKEN_B64``, ``GITHUB_TOKEN_BASE64``, ``MY_SECRET_JSON``,
    ``signingKeyPem``); not ``AWS_SHARED_CREDENTIALS_FILE``, ``SSH_AUTH_SOCK``, ``KEY``."""
    return _is_credential_env_name(name) if isinstance(name, str) else False


@lru_cache(maxsize=4096)
def _is_credential_env_name(name: str) -> bool:
    if name in redact.SECRET_ENV_NAMES or redact.is_secret_name(name):
        return True
    words = redact.name_words(name)
    if (len(words) >= 2 and words[-1] in _ENV_LAST_WORDS) or any(w in _ENV_ANY_WORDS for w in words):
        return True
    bare = _FORMAT_SUFFIX_RE.sub("", name)   # HF_TOKEN_B64 -> HF_TOKEN (once per call: JSON_B64 peels twice)
    return bool(bare) and bare != name and _is_credential_env_name(bare)


# records.RecordStore.open: f"{slug(network_arch)}-{slug(action)}-{uuid4().hex[:6]}" (slugs: letters,
# digits, . _ -, no leading or trailing . or -)
MINTED_ID_RE = lazy_re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?-[A-Za-z0-9](?:[A-Za-z0-9._-]*"
                               r"[A-Za-z0-9_])?-[0-9a-f]{6}")


def minted(ids: Iterable[str]) -> None:
    """The bundle minted these identifiers itself: job ids (``<network_arch>-<action>-<6 hex>``,
    ``records.RecordStore.open`` from a random uuid; every id the record store holds). A
    variable whose value EQUALS one holds no secret the user keeps (whatever its name says):
    that value is neither refused in commands nor redacted from answers and records. A value
    that only contains, or is contained in, such an id stays secret. Only ids of the minted
    shape count (:data:`MINTED_ID_RE`: at least two dashes, six lower-case hex digits last): a
    file name in the store's jobs directory is text anyone can write, and a credential of
    another shape (a 40-hex key, ``nvapi-...``) never becomes an exception by it."""
    new = {i for i in ids or () if isinstance(i, str) and MINTED_ID_RE.fullmatch(i)} - _minted
    if new:
        _minted.update(new)
        _LAST.clear()


def observe_env(env: Mapping[str, str]) -> None:
    """Search ``env`` (the running verb's environment) too, from now on."""
    if env is not os.environ:
        _observed[:] = [env]
    _LAST.clear()


def watch(names: Iterable[str] | None) -> None:
    """Treat the values of ``names`` (``--env`` names) as secrets wherever set."""
    _watched.update(n for n in names or () if isinstance(n, str) and n)
    _LAST.clear()


def unset_watched(env: Mapping[str, str] | None = None) -> list[str]:
    """The ``--env`` names whose value this process cannot know: watched names unset or empty in
    its environment and in the observed ones, and every name a job's sidecar could not prove
    (:func:`unprove`; ``*`` when a sidecar is lost or damaged and the names are not known).
    Text a job printed may hold those values, and nothing here can find them. Sorted."""
    envs = [env] if env is not None else [os.environ, *_observed]
    unset = {n for n in _watched if not any(source.get(n) for source in envs)}
    return sorted(unset | set(_unproven))


def unprove(name: str, why: str) -> None:
    """A job was given ``name`` by ``--env`` and this process cannot prove it holds that value
    (``env_proof.verdicts``: unset, another value, no digest; ``*``: the job's names are not
    known): every answer of this run withholds what a job printed."""
    _unproven.setdefault(name, why)


def unproven() -> dict[str, str]:
    """{name: why} of :func:`unprove` (``*``: the names themselves are not known)."""
    return dict(_unproven)


def held_value(name: str) -> str | None:
    """The value of ``name`` in this process's environment or an observed one (None: unset or empty)."""
    for source in (os.environ, *_observed):
        value = source.get(name)
        if value:
            return value
    return None


def reset() -> None:
    """Forget observed environments and watched names (tests)."""
    _observed.clear()
    _watched.clear()
    _unproven.clear()
    _LAST.clear()


def values(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """{value: variable name} of every secret value known (see the module doc)."""
    envs = [env] if env is not None else [os.environ, *_observed]
    found: dict[str, str] = {}
    watched = frozenset(_watched)
    for source in envs:
        for value, name in _scan(_snapshot(source), watched):
            if value.strip() not in _minted:   # an id the bundle minted is no secret (:func:`minted`)
                found.setdefault(value, name)
    return found


def _snapshot(env: Mapping[str, str]) -> tuple:
    """The items of ``env``, read at C speed (``os.environ`` decodes each item in Python)."""
    if env is os.environ:
        data = getattr(os.environ, "_data", None)
        if isinstance(data, dict):
            return tuple(data.items())
    return tuple(env.items())


@lru_cache(maxsize=64)
def _scan(items: tuple, watched: frozenset) -> tuple[tuple[str, str], ...]:
    found = []
    for name, value in items:
        if isinstance(name, bytes):
            name, value = os.fsdecode(name), os.fsdecode(value)
        if not isinstance(value, str) or len(value.strip()) < MIN_VALUE_LENGTH:
            continue
        explicit = name in watched or name in redact.SECRET_ENV_NAMES
        if explicit or (is_credential_env_name(name) and not value.startswith("/")):
            found.append((value, name))
        for m in _URL_PASSWORD_RE.finditer(value):
            password = unquote(m.group("password"))
            if len(password) >= MIN_VALUE_LENGTH and not password.startswith("$"):
                found.append((password, f"{name} (URL password)"))
    return tuple(found)


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
    """A match of a long form (what :class:`_Forms` yields like ``re.Match``)."""

    __slots__ = ("_text", "_start")

    def __init__(self, text: str, start: int):
        self._text, self._start = text, start

    def group(self) -> str:
        return self._text

    def start(self) -> int:
        return self._start


class _Forms:
    """``re.Pattern``'s ``sub``/``search``/``finditer`` over forms of which some are long: those
    are found with ``str.find`` (two-way search: linear in text and form), the rest with the trie
    regex; a 64 KiB value's forms compiled into one regex cost seconds, and more than linearly."""

    def __init__(self, short: re.Pattern | None, long_forms: tuple[str, ...]):
        self._short, self._long = short, long_forms

    def _long_hits(self, text: str) -> list[_Found]:
        hits, taken = [], []
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


@lru_cache(maxsize=32)
def _pattern(forms: tuple[str, ...]) -> re.Pattern | _Forms | None:
    long_forms = tuple(f for f in forms if len(f) > LONG_FORM)
    if long_forms:
        return _Forms(_trie_pattern(tuple(f for f in forms if len(f) <= LONG_FORM)), long_forms)
    return _trie_pattern(forms)


def _trie_pattern(forms: tuple[str, ...]) -> re.Pattern | None:
    """One regex matching the longest of ``forms`` at the leftmost place, as a trie
    (``(?:ab(?:c|d)|x...)``): the engine tries each first character once instead of
    every form at every position (about 2x faster than a flat alternation of 15 forms a value)."""
    if not forms:
        return None
    root: dict = {}
    for form in forms:
        node = root
        for char in form:
            node = node.setdefault(char, {})
        node[""] = {}   # a form ends here
    return re.compile(_trie_source(root))


def _trie_source(node: dict) -> str:
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


# The index of the last call without an explicit env, with copies of what it was built from:
# os.environ's items, the observed environments, the watched names. Reused while all three
# compare equal (dict/set equality, at C speed: no rescan, no re-encoding per string);
# observe_env/watch/reset also drop it.
_LAST: list = []


def _index(env: Mapping[str, str] | None) -> tuple[re.Pattern | None, dict[str, tuple[str, str]]]:
    """(one regex of every form, {form: (variable name, encoding)})."""
    if env is not None:
        return _index_of(tuple(sorted(values(env).items())))
    environ = getattr(os.environ, "_data", None)
    if not isinstance(environ, dict):   # not CPython's os.environ: no cheap snapshot to compare
        return _index_of(tuple(sorted(values().items())))
    if _LAST and _LAST[0] == environ and _LAST[2] == _watched and len(_LAST[1]) == len(_observed) \
            and all(seen == now for seen, now in zip(_LAST[1], _observed)):
        return _LAST[3]
    index = _index_of(tuple(sorted(values().items())))
    _LAST[:] = [dict(environ), [dict(e) for e in _observed], set(_watched), index]
    return index


def redactor(env: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """:func:`redact_text` with the known values looked up once: for many strings in a row
    (one answer, one record). Use it at once; a later change of the environment needs a new one."""
    pattern, owners = _index(env)
    if pattern is None:
        return _unchanged
    sub, placeholder = pattern.sub, redact.PLACEHOLDER
    shortest = min(map(len, owners))   # a shorter text holds no form (most fields of a record)
    untaint = _untainter(owners)

    def redact_one(text):
        if not text or not isinstance(text, str) or len(text) < shortest:
            return text
        if len(text) < LONG_TEXT:
            return untaint(sub(placeholder, text))
        narrowed = _narrowed(pattern, owners, text)
        return untaint(narrowed.sub(placeholder, text) if narrowed else text)

    return redact_one


def matcher(env: Mapping[str, str] | None = None):
    """The :class:`taint.Matcher` of every form of every known value (None: no value known):
    finds a value in the readings a decoder gives of a text (``taint.views``)."""
    pattern, owners = _index(env)
    return None if pattern is None else _matcher_of(_owners_key(owners))


def _owners_key(owners: dict) -> tuple:
    return tuple((form, name) for form, (name, _how) in owners.items())


@lru_cache(maxsize=16)
def _matcher_of(forms: tuple):
    from . import taint

    return taint.Matcher(dict(forms), _pattern)


@lru_cache(maxsize=16)
def _taint_trigger(shortest: int) -> re.Pattern:
    """Texts with none of these can have no reading but themselves (the form regex has searched
    them): a character the comparison ignores or a decoder reads, a base64 run or a hex run long
    enough to spell ``shortest`` characters (``taint.views``)."""
    return re.compile(r"[^A-Za-z0-9_.,:;/@()\[\]{}<>|!?#$*~^+-]|[A-Za-z0-9+/_-]{%d}|"
                      r"(?:[0-9a-fA-F]{2}[:.,;_-]?){%d}" % (max(12, -(-4 * shortest // 3)), shortest))


def _untainter(owners: dict) -> Callable[[str], str]:
    """``text`` with each line that holds a known value in a reading only a decoder finds
    withheld (``taint.withhold_lines``): the forms were replaced before."""
    from . import taint

    found = _matcher_of(_owners_key(owners))
    search = _taint_trigger(max(found.shortest, taint.MIN_FORM)).search

    def untaint(text: str) -> str:
        if len(text) < taint.MIN_FORM or not search(text):
            return text
        return taint.withhold_lines(text, found, needs=search)

    return untaint


# From this length on, a text is first searched for each form on its own (``in``: C speed, a
# few microseconds a form) and the regex is built of the forms it contains only: most long
# texts (logs, scripts) contain none. Shorter ones go straight to the regex.
LONG_TEXT = 1024


def _narrowed(pattern: re.Pattern | None, owners: dict, text: str) -> re.Pattern | None:
    """``pattern``, or for a long ``text`` the pattern of only the forms it contains (None: none):
    what a form not in the text cannot match is the same either way."""
    if pattern is None or len(text) < LONG_TEXT:
        return pattern
    present = tuple(sorted((form for form in owners if form in text), key=lambda f: (-len(f), f)))
    return _pattern(present) if present else None


def _unchanged(text: str) -> str:
    return text


@lru_cache(maxsize=32)
def _index_of(known: tuple[tuple[str, str], ...]) -> tuple[re.Pattern | None, dict[str, tuple[str, str]]]:
    owners: dict[str, tuple[str, str]] = {}
    for value, name in known:
        for form, how in encodings(value, name):
            owners.setdefault(form, (name, how))
    forms = tuple(sorted(owners, key=lambda f: (-len(f), f)))
    return _pattern(forms), owners


def json_forms_pattern(env: Mapping[str, str] | None = None) -> re.Pattern | None:
    """One regex of every form of every known value as it reads inside a JSON string written with
    ``ensure_ascii`` (``json.encoder.encode_basestring_ascii(form)[1:-1]``), or None when no value is
    known. That escaping is character by character, so a string holding a form holds its escaped
    form in the JSON text: JSON text this finds nothing in has no string :func:`redactor` would change."""
    pattern, owners = _index(env)
    return None if pattern is None else _escaped_pattern(tuple(owners))


@lru_cache(maxsize=8)
def _escaped_pattern(forms: tuple[str, ...]) -> re.Pattern | None:
    from json.encoder import encode_basestring_ascii

    escaped = {encode_basestring_ascii(form)[1:-1] for form in forms}
    return _pattern(tuple(sorted(escaped, key=lambda f: (-len(f), f))))


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` with every known secret value, in any of its encodings, replaced by ``<redacted>``."""
    if not text or not isinstance(text, str):
        return text
    return redactor(env)(text)


def find(text: str, env: Mapping[str, str] | None = None, decoded: bool = False) -> list[tuple[str, str, int]]:
    """[(variable name, encoding, line), ...]: where known values occur in ``text`` (never the value);
    ``decoded``: also in the readings a decoder gives of it (``taint.views``), when no form is there."""
    if not text or not isinstance(text, str):
        return []
    pattern, owners = _index(env)
    if pattern is None:
        return []
    narrowed = _narrowed(pattern, owners, text)
    hits = []
    for m in narrowed.finditer(text) if narrowed else ():
        name, how = owners[m.group()]
        hit = (name, how, text.count("\n", 0, m.start()) + 1)
        if hit not in hits:
            hits.append(hit)
    return hits or (_decoded_hits(text, _matcher_of(_owners_key(owners))) if decoded else [])


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


def describe(hits: list[tuple[str, str, int]], limit: int = 5) -> str:
    """``the value of HF_TOKEN (verbatim, line 3)``, ... (names and places, never values)."""
    parts = [f"the value of {name} ({how}, line {line})" for name, how, line in hits[:limit]]
    more = f" and {len(hits) - limit} more" if len(hits) > limit else ""
    return ", ".join(parts) + more


def refuse(text: str, where: str, env: Mapping[str, str] | None = None) -> None:
    """Raise SECRET_IN_COMMAND when ``text`` (about to leave this process as
    ``where``) holds a known secret value, in any encoding."""
    hits = find(text, env)
    if hits:
        raise TaoBrevError("SECRET_IN_COMMAND", f"{where} holds {describe(hits)}",
                           "Refer to a credential by name only (--env NAME; ${oc.env:NAME} or $NAME in a spec); "
                           "never write its value into a spec, an override or a name.",
                           findings=[{"kind": "known-value", "name": n, "encoding": h, "line": ln}
                                     for n, h, ln in hits])


def parsed_strings(data, prefix: str = "") -> list[tuple[str, str]]:
    """[(path, text), ...]: every key and every scalar of a parsed document (YAML,
    JSON, an override's value), nested, as the text a program reading it gets:
    ``train.wandb.key`` for a mapping's value, ``train.wandb.key (the key)`` for
    the key itself, ``callbacks[2]`` for a list item; bytes (YAML ``!!binary``)
    as the text they stand for, numbers and other scalars as ``str()``. Shared
    nodes (YAML aliases) are walked where each is used (a spec is bounded by
    ``yaml_bounded``)."""
    found: list[tuple[str, str]] = []
    stack = [(prefix, data)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in reversed(list(node.items())):
                dotted = f"{path}.{key}" if path else str(key)
                found.append((f"{dotted} (the key)", _text_of(key)))
                stack.append((dotted, value))
        elif isinstance(node, (list, tuple, set, frozenset)):
            stack.extend(reversed([(f"{path}[{i}]", item) for i, item in enumerate(node)]))
        elif node is not None:
            found.append((path, _text_of(node)))
    return found


def _text_of(scalar) -> str:
    if isinstance(scalar, str):
        return scalar
    if isinstance(scalar, (bytes, bytearray)):
        return bytes(scalar).decode("utf-8", "surrogateescape")
    return str(scalar)


def find_parsed(data, env: Mapping[str, str] | None = None) -> list[tuple[str, str, str]]:
    """[(variable name, encoding, path), ...]: where known values occur in the keys and
    strings of a parsed document (:func:`parsed_strings`), never the value. The paths
    are redacted (a key may be a value) and at most 80 characters long."""
    pattern, owners = _index(env)
    if pattern is None:
        return []
    items = [(path, view, decoded) for path, text in parsed_strings(data) if text and len(text) >= MIN_VALUE_LENGTH
             for view, decoded in _decoded_views(text) if len(decoded) >= MIN_VALUE_LENGTH]
    if not items:
        return []
    # One search over all of them: NUL never occurs in an environment value, so no form spans two strings.
    joined = "\0".join(text for _path, _view, text in items)
    starts, offset = [], 0
    for _path, _view, text in items:
        starts.append(offset)
        offset += len(text) + 1
    hide = redactor(env)
    hits: list[tuple[str, str, str]] = []
    pattern = _narrowed(pattern, owners, joined)
    for m in pattern.finditer(joined) if pattern else ():
        name, how = owners[m.group()]
        path, view, _text = items[bisect.bisect_right(starts, m.start()) - 1]
        how = f"{how}, {view}" if view else how
        shown = hide(path)
        hit = (name, how, shown if len(shown) <= 80 else shown[:77] + "...")
        if hit not in hits:
            hits.append(hit)
    return hits or _decoded_parsed_hits(items, _matcher_of(_owners_key(owners)), hide)


def _decoded_parsed_hits(items: list, found, hide: Callable[[str], str]) -> list[tuple[str, str, str]]:
    """The same as a decoder reads each string (``taint.views``: wrapped base64 in a block scalar,
    colon-separated hex, base64 of UTF-16LE, ...): the first string that holds a value."""
    for path, view, text in items:
        hit = found.hit(text)
        if hit is not None:
            how = f"{hit[1]}, {view}" if view else hit[1]
            shown = hide(path)
            return [(hit[0], how, shown if len(shown) <= 80 else shown[:77] + "...")]
    return []


def _decoded_views(text: str) -> list[tuple[str, str]]:
    """(view, text) of one parsed string as a program reading it may decode it again:
    itself, URL-decoded (``%58r7`` partly escaped), backslash escapes decoded (``\\x41``
    written literally), HTML entities decoded (``&#x41;``), and the strings of the JSON
    it holds (``'{"k": "\\u0041..."}'``). Generous by design: a view only matters when
    it holds a known value."""
    views = [("", text)]
    if len(text) > 65536:   # a spec is at most 64 KiB: nothing longer to decode again
        return views
    if "%" in text:
        views.append(("once URL-decoded", unquote(text)))
    if "\\" in text:
        import warnings

        try:
            with warnings.catch_warnings():   # "invalid escape sequence" (an unknown escape stays as it is)
                warnings.simplefilter("ignore")
                views.append(("once its escapes are decoded",
                              text.encode("latin-1", "backslashreplace").decode("unicode_escape")))
        except UnicodeDecodeError:   # a truncated escape: no program decodes it either
            pass
    if "&" in text:
        views.append(("once HTML-decoded", html.unescape(text)))
    if text.lstrip()[:1] in ("{", "[", '"'):
        try:
            inner = json.loads(text)
        except (ValueError, RecursionError):
            inner = None
        views += [("in the JSON it holds", t) for _p, t in parsed_strings(inner) if isinstance(t, str)]
    return views


def refuse_parsed(data, where: str, env: Mapping[str, str] | None = None) -> None:
    """Raise SECRET_IN_COMMAND when a key or string of ``data`` (``where`` after
    parsing: the spec's YAML, an override's value) holds a known secret value in any
    encoding: the spellings a parser decodes (YAML escapes ``\\x41``, line
    continuations, ``''``, block scalars, ``!!binary``) are caught here, whatever the
    raw text looked like. The message names the variable and the key's path, never the value."""
    hits = find_parsed(data, env)
    if hits:
        shown = ", ".join(f"the value of {name} ({how}, at {path})" for name, how, path in hits[:5])
        more = f" and {len(hits) - 5} more" if len(hits) > 5 else ""
        raise TaoBrevError("SECRET_IN_COMMAND", f"{where} holds {shown}{more} once parsed",
                           "Refer to a credential by name only (--env NAME; ${oc.env:NAME} or $NAME in a spec); "
                           "never write its value into a spec, an override or a name, in any spelling.",
                           findings=[{"kind": "known-value", "name": n, "encoding": h, "path": p}
                                     for n, h, p in hits])


def refuse_argv(argv: list[str], where: str, env: Mapping[str, str] | None = None,
                allow: str | None = None) -> None:
    """:func:`refuse` for each argument of a command line; ``allow`` is the one
    value that may stand alone as an argument (``brev login --token``)."""
    for number, arg in enumerate(argv):
        if allow and arg == allow:
            continue
        refuse(arg, f"{where} (argument {number})", env)


def refuse_in_identifiers(identifiers: Mapping[str, str | None], env: Mapping[str, str] | None = None) -> None:
    """SECRET_IN_IDENTIFIER when a name the bundle stores and later reads back
    (instance, arch, action, results root, bucket, input names) holds a known
    value: redacting it would leave ``<redacted>`` in state that later verbs need."""
    for label, value in identifiers.items():
        hits = find(value or "", env, decoded=True)
        if hits:
            names = list(dict.fromkeys(name for name, _how, _line in hits))
            equal = [name for v, name in values(env).items() if v == value or v.strip() == value]
            var = (equal or names)[0]
            raise TaoBrevError(
                "SECRET_IN_IDENTIFIER",
                f"{label} {'equals' if equal else 'contains'} the value of {var} "
                f"(a variable this process treats as a credential: its name, or --env): {describe(hits)}",
                f"Pass a {label} that is not (and does not contain) the value of {var}; or, if {var} holds no "
                f"credential, unset it (`unset {var}`) or rename it in the shell that runs the script, then run "
                "the same command again. A credential's value in a name would leak wherever the name is shown.",
                findings=[{"kind": "known-value", "name": n, "encoding": h, "line": ln} for n, h, ln in hits],
                variable=var, argument=label)


# Flags whose value is a name the user gives (checked by :func:`refuse_in_argv` before a verb runs).
# Job ids are not here: one the record store holds was minted by the bundle (:func:`minted`), and
# one it does not hold stops at UNKNOWN_JOB before anything is sent.
IDENTIFIER_FLAGS = ("--instance", "--image", "--network-arch", "--action", "--results-root", "--results-dir", "--spec",
                    "--bucket", "--host", "--platform", "--upload-exclude", "--backend-ref", "--parent-job",
                    "--shm-size", "--gpus", "--message")
# Names the bundle reads from the environment and stores or sends (the bucket is in the record's
# results root, the endpoint and region in every carrier command): a known value there is refused.
IDENTIFIER_ENV = ("S3_BUCKET_NAME", "TAO_RESULTS_ROOT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL",
                  "AWS_DEFAULT_REGION", "AWS_REGION", "CLOUD_REGION", "TAO_STATE_DIR", "TAO_SKILL_BANK_PATH",
                  "AWS_PROFILE")


def refuse_in_env_identifiers(env: Mapping[str, str]) -> None:
    """:func:`refuse_in_identifiers` for the IDENTIFIER_ENV names set in ``env`` (``S3_BUCKET_NAME``
    holding a credential: refused, never stored as ``s3://<redacted>/...``)."""
    for name in IDENTIFIER_ENV:
        if env.get(name):   # its own value is no reason (``--env S3_BUCKET_NAME`` makes it one)
            refuse_in_identifiers({name: env[name]}, {k: v for k, v in env.items() if k != name})


def refuse_in_argv(argv: Iterable[str], env: Mapping[str, str] | None = None) -> None:
    """:func:`refuse_in_identifiers` for the IDENTIFIER_FLAGS of a script's ``argv``
    (``--flag value`` and ``--flag=value``), and the IDENTIFIER_ENV names of ``env``: a credential's
    value given as a name stops the verb before anything is sent, with an error naming the flag (or
    variable) and the variable whose value it holds."""
    words = [w for w in argv if isinstance(w, str)]
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in IDENTIFIER_FLAGS and (eq or i + 1 < len(words)):
            refuse_in_identifiers({flag: value if eq else words[i + 1]}, env)
    refuse_in_env_identifiers(os.environ if env is None else env)   # S3_BUCKET_NAME, endpoints, roots


def refuse_short(names: Iterable[str], env: Mapping[str, str]) -> None:
    """SECRET_TOO_SHORT for a set value of ``names`` shorter than MIN_VALUE_LENGTH
    (it could not be found in free text, so it could not be redacted)."""
    short = sorted({n for n in names if 0 < len((env.get(n) or "").strip()) < MIN_VALUE_LENGTH})
    if short:
        raise TaoBrevError("SECRET_TOO_SHORT", f"{', '.join(short)} is shorter than {MIN_VALUE_LENGTH} characters: "
                           "a value that short cannot be told apart in logs, so it could not be redacted",
                           f"Use a credential of at least {MIN_VALUE_LENGTH} characters, or unset the variable.")
