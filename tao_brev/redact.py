"""Secret lint and redaction. Invariant: the secret value never survives the output.

A deterministic, dependency-free PATTERN lint over shell commands, scripts,
Kubernetes manifests (YAML or JSON), JSON documents, logs and job-record text.
``lint`` names what it found (variable, flag, key or pattern name, and line),
never the value; ``redact`` replaces every literal credential with
``<redacted>`` and keeps the name, so ``NGC_KEY=abc`` becomes
``NGC_KEY=<redacted>``. ``redact_values`` is the backstop every output of the
bundle passes through: it replaces the values of the credential variables set
in the environment wherever they appear.

Caught (a "literal" is any value that is not only ``$VAR`` / ``${VAR}`` /
``$(...)`` references, placeholders such as ``<redacted>``, booleans or
numbers of at most four digits):
  1. ``NAME=literal`` where NAME holds a credential word (SECRET, PASSWORD,
     PASSWD, TOKEN, API_KEY/APIKEY, ACCESS_KEY, NGC_KEY, CREDENTIAL, with
     letter boundaries), plain, ``export``, ``docker -e``/``--env``,
     ``--export=ALL,NAME=...``, URL queries and dotted overrides
     (``train.wandb.api_key=...``); ``${NAME:-literal}`` defaults.
  2. ``--password`` / ``--token`` / ``--api-key`` values (space, ``=`` or the
     JSON-array form ``["--token", "abc"]``); ``-p value`` on a line that
     contains ``login`` (port maps such as ``-p 8080:80`` pass).
  3. ``Authorization: Bearer|Basic|Token literal`` headers.
  4. Kubernetes env entries: a literal ``value:`` paired with a credential
     ``name:`` in block, flow (``{name: X, value: Y}``) and JSON forms, any key
     order, block scalars too. ``valueFrom.secretKeyRef`` and ``$(VAR)`` pass.
  5. A literal under a credential key: ``"api_key": "..."`` anywhere,
     ``password: ...`` at the start of a YAML line.
  6. Presigned-URL query credentials (``X-Amz-Signature``, ``X-Amz-Credential``,
     ``X-Amz-Security-Token``) and passwords in URL userinfo
     (``https://user:pass@host``).
  7. Well-known token shapes anywhere: ``nvapi-``, ``hf_``, ``ghp_`` (and
     ``gho_ ghu_ ghs_ ghr_``), ``github_pat_``, ``AKIA``/``ASIA`` + 16,
     ``xox[abpr]-``, ``sk-``.
Backslash-continued lines are one logical line; a finding reports the first
physical line.

Passes: ``$VAR``, ``${VAR}``, ``"$VAR"``, ``'$VAR'`` (expanded by the remote
shell), ``NAME=$(cat FILE)`` (the value is read at run time, not written
here), ``-e VAR``, ``--env-file F``, ``--password-stdin``, ``-u '$oauthtoken'``
(NGC's literal user name), empty values, ``TOKENIZERS_PARALLELISM=false``,
``max_new_tokens=5``, ``pad_token_id=0``.

Deliberately not caught (use ``$VAR``, stdin or ``secretKeyRef`` instead):
secrets split across variables or assembled at run time (``$(echo ...)``),
base64 or otherwise encoded values, secrets under names without a credential
word, a literal piped into ``--password-stdin``, code such as
``os.environ["K"] = "v"``, multi-line quoted YAML values, ``-p`` values of
commands on lines without ``login``, secrets in binary files or in files
named by path. ``redact_obj`` sees strings one at a time: a bare value under
a credential-named dict key is not recognised (the environment backstop
still removes the bundle's own credentials).
"""

from __future__ import annotations

import json
import os
import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterable, Iterator, Mapping, NamedTuple
from urllib.parse import quote

PLACEHOLDER = "<redacted>"

SECRET_ENV_NAMES = ("BREV_API_TOKEN", "NGC_KEY", "NGC_API_KEY", "AWS_ACCESS_KEY_ID",
                    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "ACCESS_KEY", "SECRET_KEY",
                    "HF_TOKEN", "WANDB_API_KEY")

# Environment values shorter than this are not searched for (too many false hits).
MIN_VALUE_LENGTH = 6

# --- patterns ---------------------------------------------------------------

# A credential word inside a name. Must match HF_TOKEN, NGC_KEY, NGC_API_KEY,
# AWS_SECRET_ACCESS_KEY, db_password, apiKey, token. Must NOT match
# TOKENIZERS_PARALLELISM, max_new_tokens, oauthtoken, secretKeyRef,
# AWS_SHARED_CREDENTIALS_FILE (letters on either side break the word).
SECRET_WORD_RE = re.compile(
    r"(?i)(?<![A-Za-z])(?:SECRET|PASSWORD|PASSWD|TOKEN|API_?KEY|ACCESS_?KEY|NGC_KEY|CREDENTIAL)"
    r"(?![A-Za-z])")

# One shell word: quoted parts, ${...}, $(...) and unquoted runs glued together.
# Unquoted runs stop at blanks, quotes and shell operators, and at a comma that
# starts another NAME= (``--export=ALL,A=1,B=2``); other commas stay in the value.
# Must not run past ``&`` in a URL query.
WORD_RE = re.compile(r"(?:\"(?:[^\"\\]|\\.)*\"|'[^']*'|\$\{[^}]*\}|\$\([^)]*\)"
                     r"|(?:[^\s\"'`;&|<>(),]|,(?![A-Za-z_][\w.]*=))+)+")

# A whole word that is one quoted string: redaction keeps its quotes.
_QUOTED_RE = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")

# NAME= where NAME starts a word or follows ; & | , ? = ( [ { or a quote.
# Must match ``export A=``, ``-e A=``, ``--env=A=``, ``ALL,A=``, ``?token=``,
# ``train.api_key=``. Must NOT match path segments (``/data/token=v1``), flag
# names (``--token=``, ``X-Amz-Signature=``) or ``==`` comparisons.
ASSIGNMENT_RE = re.compile(r"(?<![^\s\"'`;&|,?=(\[{])(?P<name>[A-Za-z_][\w.]*)=(?!=)")

# ${NAME:-default}, ${NAME-default}, ${NAME:=default}, ${NAME:+alt}: the
# default is a literal written into the text. ${NAME:?message} is not a value.
PARAM_DEFAULT_RE = re.compile(r"\$\{(?P<name>[A-Za-z_]\w*):?[-=+](?P<val>[^}]*)\}")

# Credential flags followed by =, blanks, or the JSON-array separator ``", "``.
# Must NOT match --password-stdin, --token-file, --tokenizer.
FLAG_RE = re.compile(
    r"(?<![\w-])(?P<name>--(?:password|passwd|token|api[-_]?key))(?![\w-])"
    r"(?:=|\s+|(?P<array>[\"']\s*,\s*))")

# ``-p value`` (or -p=value, -pvalue); only consulted on lines matching LOGIN_RE.
LOGIN_RE = re.compile(r"\blogin\b")
LOGIN_P_RE = re.compile(r"(?<!\S)(?P<name>-p)(?:=|\s+)?")
# Docker port maps, which ``-p`` also takes: 80, 8080:80, 127.0.0.1:8080:80/tcp.
PORT_MAP_RE = re.compile(r"(?:[\d.]+:)?(?:\d{1,5}(?:-\d{1,5})?:)?\d{1,5}(?:-\d{1,5})?(?:/(?:tcp|udp|sctp))?")

# Authorization: Bearer <token> (also Basic/Token), in headers or JSON.
AUTH_HEADER_RE = re.compile(
    r"(?i)(?P<name>Authorization)[\"']?\s*:\s*[\"']?(?:Bearer|Basic|Token)\s+(?P<val>[^\s\"'`,;]+)")

# Kubernetes env entry keys on a line of their own: ``- name: X``,
# ``value: Y``, ``"value": "Y",``. Must NOT match ``valueFrom:``.
ENTRY_KEY_RE = re.compile(r"^(?P<lead>\s*(?:-\s+)?)(?P<q>[\"']?)(?P<key>name|value)(?P=q)\s*:\s*")
# The scalar after a key: quoted, a block indicator (| >), or plain up to a
# comment or trailing comma.
SCALAR_RE = re.compile(
    r"(?P<val>\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[|>][-+0-9]*|[^\s#,{}\[\]][^#]*?)?\s*,?\s*(?:#.*)?$")
BLOCK_INDICATOR_RE = re.compile(r"[|>][-+0-9]*")
# One flow / JSON object on a line, and its name/value pairs.
FLOW_OBJECT_RE = re.compile(r"\{[^{}]*\}")
FLOW_PAIR_RE = re.compile(
    r"(?:^|[{,\s])(?P<q>[\"']?)(?P<key>name|value)(?P=q)\s*:\s*"
    r"(?P<val>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,}\s][^,}]*)")

# A quoted key with a quoted value anywhere (JSON, Python dicts), and a plain
# YAML key at the start of a line. The key must hold a credential word.
QUOTED_MAPPING_RE = re.compile(
    r"(?P<q>[\"'])(?P<name>[A-Za-z_][\w.-]*)(?P=q)\s*:\s*(?P<val>\"(?:[^\"\\]|\\.)*\"|'[^']*')")
YAML_MAPPING_RE = re.compile(r"^\s*(?:-\s+)?(?P<name>[A-Za-z_][\w.-]*)\s*:[ \t]+")

# Presigned-URL query credentials. The value stops at & and quotes.
PRESIGNED_RE = re.compile(
    r"(?i)(?P<name>X-Amz-(?:Signature|Credential|Security-Token))=(?P<val>[^&\s\"'#<>]+)")

# scheme://user:password@host -- only the password is replaced.
# Must NOT match ``git@host:path``, ``host:8080/``, ``https://user@host``.
URL_USERINFO_RE = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9+.-]*)://[^\s:/@]*:(?P<val>[^\s/@]+)@")

# Well-known token shapes, valid anywhere (even inside paths and URIs).
# Must NOT match inside longer words (``disk-...``, ``task-...``) nor
# ``sk-learn-...``-style names.
TOKEN_SHAPE_RE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:nvapi-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])|xox[abpr]-[A-Za-z0-9-]{10,}"
    r"|sk-[A-Za-z0-9]{20,}|sk-(?:proj|svcacct|admin|ant)-[A-Za-z0-9_-]{20,})")
TOKEN_PREFIX_RE = re.compile(r"nvapi-|hf_|gh[pousr]_|github_pat_|AKIA|ASIA|xox[abpr]-|sk-")

# What makes a value NOT literal: $VAR / ${VAR} / ${VAR:-default} / $(cmd)
# references, <placeholders> (<redacted>, <your key>), and scalars that are
# never credentials (booleans, nulls, numbers of at most four digits, so
# pad_token_id=0 and use_cls_token: true pass).
_REFERENCE_RE = re.compile(r"\$\{(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-=+?])(?P<default>[^}]*))?\}"
                           r"|\$\([^)]*\)|\$\{?[A-Za-z_]\w*\}?")
_PLACEHOLDER_RE = re.compile(r"<[A-Za-z][\w .:-]*>")
_NOT_SECRET_SCALAR_RE = re.compile(r"(?i)true|false|yes|no|on|off|null|none|~|\d{1,4}")
# A string redact_obj treats as a path or URI (no blanks): gets redact_uri.
_PATH_LIKE_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://|/|~/|\./|\.\./)\S*")


# --- findings ---------------------------------------------------------------

class _Kind(NamedTuple):
    shape: str         # how a finding is shown; {name} is the name, never the value
    description: str


# Stable kind ids, in priority order: when two findings cover the same value,
# the first kind listed wins the report.
KINDS: dict[str, _Kind] = {
    "assignment": _Kind("{name}=<literal>", "inline credential assignment"),
    "parameter-default": _Kind("${{{name}:-<literal>}}", "literal default in a parameter expansion"),
    "flag": _Kind("{name} <literal>", "credential passed as a command-line flag"),
    "login-password": _Kind("{name} <literal>", "password passed to a login command"),
    "auth-header": _Kind("{name}: Bearer <literal>", "literal token in an Authorization header"),
    "manifest-env": _Kind("name: {name}, value: <literal>",
                          "inline manifest credential; use valueFrom.secretKeyRef"),
    "mapping": _Kind("{name}: <literal>", "literal value under a credential key"),
    "presigned-url": _Kind("{name}=<literal>", "presigned-URL credential in a query string"),
    "url-password": _Kind("{name}://user:<literal>@", "password in URL userinfo"),
    "token-shape": _Kind("{name}<literal>", "well-known credential token shape"),
}
_PRIORITY = {kind: i for i, kind in enumerate(KINDS)}


@dataclass(frozen=True)
class Finding:
    """One embedded credential: what kind, under which name, on which line."""

    kind: str   # a key of KINDS
    name: str   # the variable / flag / key / pattern name, never the value
    line: int   # first physical line of the logical line, 1-based

    @property
    def description(self) -> str:
        return KINDS[self.kind].description

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "line": self.line, "message": str(self)}

    def __str__(self) -> str:
        return f"line {self.line}: {KINDS[self.kind].shape.format(name=self.name)} ({self.description})"


@dataclass(frozen=True)
class _Hit:
    kind: str
    name: str
    line: int
    start: int  # span of the value in the original text
    end: int


# --- public API -------------------------------------------------------------

@lru_cache(maxsize=1024)
def is_secret_name(name: str) -> bool:
    """True if ``name`` holds a credential word (letter boundaries, any case)."""
    return SECRET_WORD_RE.search(name) is not None


def lint(text: str) -> list[Finding]:
    """The literal credentials in ``text``, one finding per value, in order."""
    kept: list[_Hit] = []
    for hit in sorted(_scan(text, _TEXT_RULES), key=lambda h: (_PRIORITY[h.kind], h.start)):
        if not any(hit.start < k.end and k.start < hit.end for k in kept):
            kept.append(hit)
    kept.sort(key=lambda h: (h.line, h.start))
    return [Finding(h.kind, h.name, h.line) for h in kept]


def redact(text: str) -> str:
    """``text`` with every literal credential replaced by ``<redacted>``."""
    return _replace(text, _scan(text, _TEXT_RULES))


def redact_uri(value: str) -> str:
    """The gentle mode for paths and URIs: only URL-userinfo passwords,
    presigned-URL query credentials and well-known token shapes are replaced,
    so ``/data/token=v1/run`` stays intact."""
    return _replace(value, _scan(value, _URI_RULES, manifests=False))


def redact_values(text: str, env: Mapping[str, str] | None = None) -> str:
    """Replace the values of the credential variables set in ``env`` (default
    ``os.environ``) wherever they appear: names in SECRET_ENV_NAMES or holding
    a credential word, values of at least MIN_VALUE_LENGTH characters, also in
    their URL-quoted and JSON-escaped forms."""
    if not text:
        return text
    pattern = _values_pattern(_secret_values(os.environ if env is None else env))
    return pattern.sub(PLACEHOLDER, text) if pattern else text


def redact_obj(obj, env: Mapping[str, str] | None = None):
    """A copy of a JSON-like object with every string redacted (keys kept):
    paths and URIs get :func:`redact_uri`, other strings :func:`redact`, and
    all of them :func:`redact_values`."""
    if isinstance(obj, str):
        gentle = _PATH_LIKE_RE.fullmatch(obj) is not None
        return redact_values(redact_uri(obj) if gentle else redact(obj), env)
    if isinstance(obj, dict):
        return {key: redact_obj(value, env) for key, value in obj.items()}
    if isinstance(obj, list):
        return [redact_obj(value, env) for value in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(value, env) for value in obj)
    return obj


# --- values -----------------------------------------------------------------

def _is_literal(value: str) -> bool:
    """True if ``value`` writes credential material into the text, rather than
    referring to it ($VAR, ${VAR}, $(cmd)) or being a placeholder."""
    def keep_default(m: re.Match) -> str:
        op = m.group("op")
        if op and op[-1] in "-=+":
            return _REFERENCE_RE.sub(keep_default, m.group("default"))
        return ""

    rest = _REFERENCE_RE.sub(keep_default, value)
    rest = _PLACEHOLDER_RE.sub("", rest).replace('"', "").replace("'", "").strip()
    return re.search(r"[A-Za-z0-9]", rest) is not None and not _NOT_SECRET_SCALAR_RE.fullmatch(rest)


def _value_span(start: int, word: str) -> tuple[int, int]:
    """The span to replace: inside the quotes of a wholly quoted word."""
    if len(word) > 2 and _QUOTED_RE.fullmatch(word):
        return start + 1, start + len(word) - 1
    return start, start + len(word)


def _secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    found: set[str] = set()
    for name, value in env.items():
        if value and (name in SECRET_ENV_NAMES or is_secret_name(name)):
            found.update(v for v in _value_forms(value) if len(v) >= MIN_VALUE_LENGTH)
    return tuple(sorted(found, key=lambda v: (-len(v), v)))  # longest first


@lru_cache(maxsize=256)
def _value_forms(value: str) -> tuple[str, ...]:
    return (value, value.strip(), quote(value, safe=""), json.dumps(value)[1:-1])


@lru_cache(maxsize=16)
def _values_pattern(values: tuple[str, ...]) -> re.Pattern | None:
    return re.compile("|".join(map(re.escape, values))) if values else None


# --- logical lines ----------------------------------------------------------

@dataclass(frozen=True)
class _Line:
    """A logical line: physical lines joined at trailing backslashes."""

    number: int                # first physical line, 1-based
    text: str                  # the joined text, continuation backslashes removed
    starts: tuple[int, ...]    # offset in ``text`` where each physical line begins
    origins: tuple[int, ...]   # offset in the original text of the same point

    def original(self, start: int, end: int) -> tuple[int, int]:
        return self._at(start), self._at(end - 1) + 1

    def _at(self, pos: int) -> int:
        i = bisect_right(self.starts, pos) - 1
        return self.origins[i] + pos - self.starts[i]


def _logical_lines(text: str) -> Iterator[_Line]:
    parts: list[str] = []
    starts: list[int] = []
    origins: list[int] = []
    first = joined = offset = 0
    for number, raw in enumerate(text.split("\n"), start=1):
        body = raw[:-1] if raw.endswith("\r") else raw
        continued = (len(body) - len(body.rstrip("\\"))) % 2 == 1
        if continued:
            body = body[:-1]
        if not parts:
            first = number
        parts.append(body)
        starts.append(joined)
        origins.append(offset)
        joined += len(body)
        offset += len(raw) + 1
        if not continued:
            yield _Line(first, "".join(parts), tuple(starts), tuple(origins))
            parts, starts, origins, joined = [], [], [], 0
    if parts:
        yield _Line(first, "".join(parts), tuple(starts), tuple(origins))


# --- rules: each yields (kind, name, start, end) within one logical line ------

def _word_after(text: str, pos: int) -> tuple[int, str] | None:
    m = WORD_RE.match(text, pos)
    return (pos, m.group()) if m else None


def _assignments(text: str) -> Iterator[tuple]:
    for m in ASSIGNMENT_RE.finditer(text):
        found = _word_after(text, m.end())
        if found and is_secret_name(m.group("name")) and _is_literal(found[1]):
            yield ("assignment", m.group("name"), *_value_span(*found))


def _parameter_defaults(text: str) -> Iterator[tuple]:
    for m in PARAM_DEFAULT_RE.finditer(text):
        if is_secret_name(m.group("name")) and _is_literal(m.group("val")):
            yield ("parameter-default", m.group("name"), *_value_span(m.start("val"), m.group("val")))


def _flags(text: str) -> Iterator[tuple]:
    for m in FLAG_RE.finditer(text):
        if m.group("array"):  # ["--token", "value"]: the value is one quoted string
            quoted = _QUOTED_RE.match(text, m.end())
            found = (m.end(), quoted.group()) if quoted else None
        else:
            found = _word_after(text, m.end())
        if found and not found[1].lstrip("\"'").startswith("-") and _is_literal(found[1]):
            yield ("flag", m.group("name"), *_value_span(*found))


def _login_passwords(text: str) -> Iterator[tuple]:
    if not LOGIN_RE.search(text):
        return
    for m in LOGIN_P_RE.finditer(text):
        found = _word_after(text, m.end())
        if found and not PORT_MAP_RE.fullmatch(found[1]) and _is_literal(found[1]):
            yield ("login-password", "-p", *_value_span(*found))


def _auth_headers(text: str) -> Iterator[tuple]:
    for m in AUTH_HEADER_RE.finditer(text):
        if _is_literal(m.group("val")):
            yield ("auth-header", m.group("name"), m.start("val"), m.end("val"))


def _flow_entries(text: str) -> Iterator[tuple]:
    for obj in FLOW_OBJECT_RE.finditer(text):
        pairs = {m.group("key"): m for m in FLOW_PAIR_RE.finditer(obj.group())}
        if "name" not in pairs or "value" not in pairs:
            continue
        name = _unquote(pairs["name"].group("val").strip())
        value = pairs["value"].group("val").rstrip()
        if is_secret_name(name) and _is_literal(value):
            yield ("manifest-env", name, *_value_span(obj.start() + pairs["value"].start("val"), value))


def _mappings(text: str) -> Iterator[tuple]:
    for m in QUOTED_MAPPING_RE.finditer(text):
        if is_secret_name(m.group("name")) and _is_literal(m.group("val")):
            yield ("mapping", m.group("name"), *_value_span(m.start("val"), m.group("val")))
    m = YAML_MAPPING_RE.match(text)
    if m and is_secret_name(m.group("name")):
        scalar = SCALAR_RE.match(text, m.end())
        value = scalar.group("val") or ""
        if value and not BLOCK_INDICATOR_RE.fullmatch(value) and _is_literal(value):
            yield ("mapping", m.group("name"), *_value_span(scalar.start("val"), value))


def _presigned(text: str) -> Iterator[tuple]:
    for m in PRESIGNED_RE.finditer(text):
        if _is_literal(m.group("val")):
            yield ("presigned-url", m.group("name"), m.start("val"), m.end("val"))


def _url_passwords(text: str) -> Iterator[tuple]:
    for m in URL_USERINFO_RE.finditer(text):
        if _is_literal(m.group("val")):
            yield ("url-password", m.group("name"), m.start("val"), m.end("val"))


def _token_shapes(text: str) -> Iterator[tuple]:
    for m in TOKEN_SHAPE_RE.finditer(text):
        yield ("token-shape", TOKEN_PREFIX_RE.match(m.group()).group(), m.start(), m.end())


_TEXT_RULES = (_assignments, _parameter_defaults, _flags, _login_passwords, _auth_headers,
               _flow_entries, _mappings, _presigned, _url_passwords, _token_shapes)
_URI_RULES = (_presigned, _url_passwords, _token_shapes)


# --- Kubernetes env entries across lines ------------------------------------

def _manifest_entries(lines: Iterable[_Line]) -> Iterator[_Hit]:
    """``name:`` / ``value:`` pairs of block-style env entries, any key order.

    An entry is the run of ``name``/``value`` keys at one column; a list item
    (``- ``), another column or a dedent starts the next. A value waits in
    ``pending`` until its name is known; ``value: |`` collects the indented
    lines below it.
    """
    column: int | None = None
    name: str | None = None
    pending: list[_Hit] = []
    block: tuple[int, int] | None = None  # (key column, line of ``value: |``)

    def flush() -> Iterator[_Hit]:
        if name and is_secret_name(name):
            yield from (_Hit("manifest-env", name, h.line, h.start, h.end) for h in pending)
            pending.clear()

    for line in lines:
        text = line.text
        stripped = text.strip()
        indent = len(text) - len(text.lstrip())
        if block is not None:
            if not stripped or indent > block[0]:
                if _is_literal(stripped):
                    pending.append(_Hit("manifest-env", "", block[1], *line.original(indent, len(text.rstrip()))))
                    yield from flush()
                continue
            block = None
        if not stripped or stripped.startswith("#"):
            continue
        m = ENTRY_KEY_RE.match(text)
        if m is None:
            if column is not None and indent < column:
                column, name, pending = None, None, []
            continue
        key_column = len(m.group("lead"))
        if "-" in m.group("lead") or key_column != column:
            column, name, pending = key_column, None, []
        scalar = SCALAR_RE.match(text, m.end())
        value = scalar.group("val") or ""
        if m.group("key") == "name":
            name = _unquote(value)
        elif BLOCK_INDICATOR_RE.fullmatch(value):
            block = (key_column, line.number)
        elif value and _is_literal(value):
            pending.append(_Hit("manifest-env", "", line.number,
                                *line.original(*_value_span(scalar.start("val"), value))))
        yield from flush()


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


# --- scanning and replacing -------------------------------------------------

def _scan(text: str, rules, manifests: bool = True) -> list[_Hit]:
    if not text:
        return []
    lines = list(_logical_lines(text))
    hits = [_Hit(kind, name, line.number, *line.original(start, end))
            for line in lines for rule in rules for kind, name, start, end in rule(line.text)]
    if manifests:
        hits.extend(_manifest_entries(lines))
    return hits


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
