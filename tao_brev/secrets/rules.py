"""The pattern rules of the secret lint: where a text writes a literal credential.

They advise (``lint.lint`` names what they find, ``redact.redact`` replaces it); the
guarantee rests on the values the process knows (``guard``). Each rule reads one logical
line (``literal``) and yields (kind, name, start, end) of a literal value; :func:`_scan`
runs them and the multi-line ones (Kubernetes env entries, next-line YAML values, PEM keys).

What they catch, and what they deliberately do not: :mod:`tao_brev.secrets.lint`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from .literal import (BLOCK_INDICATOR_RE, _QUOTED_RE, _is_literal, _Line, _logical_lines, _scalar_after,
                      _unquote, _value_span, _word_after)
from .names import is_secret_name

# NAME= where NAME starts a word or follows ; & | , ? = ( [ { : + ~ or a quote.
# Must match ``export A=``, ``-e A=``, ``--env=A=``, ``ALL,A=``, ``?token=``,
# ``train.api_key=``, ``+train.token=``, ``/:_authToken=``. Must NOT match path
# segments (``/data/token=v1``), flag names (``--token=``) or ``==`` comparisons.
ASSIGNMENT_RE = re.compile(r"(?<![^\s\"'`;&|,?=(\[{:+~])(?P<name>[A-Za-z_][\w.]*)=(?!=)")

# ${NAME:-default}, ${NAME-default}, ${NAME:=default}, ${NAME:+alt}: the
# default is a literal written into the text. ${NAME:?message} is not a value.
PARAM_DEFAULT_RE = re.compile(r"\$\{(?P<name>[A-Za-z_]\w*):?[-=+](?P<val>[^}]*)\}")

# A long flag followed by =, blanks, or the JSON-array separator ``", "``;
# the flag is a credential flag when its name is a credential name.
FLAG_RE = re.compile(r"(?<![\w-])(?P<name>--[A-Za-z][A-Za-z0-9_-]*)(?:=|\s+|(?P<array>[\"']\s*,\s*))")
# docker build --secret id=x,src=FILE / env=VAR: names a source, not a value.
_BUILD_SECRET_RE = re.compile(r"[\"']?(?:id|type|src|source|env|required|target|mode|uid|gid)=")

# ``-p value`` after a standalone ``login`` word (docker/podman/helm login).
LOGIN_RE = re.compile(r"(?<![\w.-])login(?![\w.-])")
LOGIN_P_RE = re.compile(r"(?<!\S)(?P<name>-p)(?:=|\s+)?")
# Docker port maps, which ``-p`` also takes: 80, 8080:80, 127.0.0.1:8080:80/tcp.
PORT_MAP_RE = re.compile(r"(?:[\d.]+:)?(?:\d{1,5}(?:-\d{1,5})?:)?\d{1,5}(?:-\d{1,5})?(?:/(?:tcp|udp|sctp))?")
# mysql/mariadb take the password attached (``-pVALUE``; ``-p VALUE`` prompts).
MYSQL_RE = re.compile(r"(?<![\w.-])(?:mysql\w*|mariadb\w*)(?![\w.-])")
MYSQL_P_RE = re.compile(r"(?<!\S)(?P<name>-p)(?=[^\s-])")
# sshpass -p VALUE / -pVALUE.
SSHPASS_P_RE = re.compile(r"(?<![\w.-])sshpass\b[^;&|\n]{0,400}?(?<!\S)(?P<name>-p)(?:\s+|=)?")
# curl/wget -u / --user user:password (only the password part is the value).
CURL_RE = re.compile(r"(?<![\w.-])(?:curl|wget|http|https|xh)(?![\w.-])")
USER_FLAG_RE = re.compile(r"(?<!\S)(?P<name>-u|--user)(?:=|\s+)")
# aws configure set [profile.P.]aws_secret_access_key VALUE
AWS_SET_RE = re.compile(r"\baws\s+configure\s+set\s+(?:--profile\s+\S+\s+)?(?P<name>[\w.-]+)\s+")

# A credential keyword of a login call: ``wandb.login(key="...")``, ``hf.login(token=...)``,
# ``Client(api_key=...)`` (names a credential only inside such a call: ``key`` alone is no name).
LOGIN_CALL_RE = re.compile(r"\b(?:login|log_in|authenticate|auth|connect)\s*\(")
LOGIN_KWARG_RE = re.compile(r"(?<![\w.])(?P<name>key|token|password|passwd|secret|pat)\s*=\s*")
# ~/.netrc (curl, git, wandb): ``machine HOST login USER password S`` on one line, or a line
# ``password S`` of a multi-line entry.
NETRC_RE = re.compile(r"(?:^|\s)(?:machine\s+\S+|default)\b.*?\s(?P<name>password)\s+")
NETRC_LINE_RE = re.compile(r"^\s*(?P<name>password)\s+(?=\S+\s*$)")

# Authorization: Bearer <token> (also Basic/Token), in headers or JSON.
AUTH_HEADER_RE = re.compile(
    r"(?i)(?P<name>Authorization)[\"']?\s*:\s*[\"']?(?:Bearer|Basic|Token)\s+(?P<val>[^\s\"'`,;]+)")

# Kubernetes env entry keys on a line of their own: ``- name: X``,
# ``value: Y``, ``"value": "Y",``. Must NOT match ``valueFrom:``.
ENTRY_KEY_RE = re.compile(r"^(?P<lead>\s*(?:-\s+)?)(?P<q>[\"']?)(?P<key>name|value)(?P=q)\s*:\s*")
# One flow / JSON object on a line (innermost), and its pairs.
FLOW_OBJECT_RE = re.compile(r"\{[^{}]*\}")
FLOW_PAIR_RE = re.compile(
    r"(?:^|[{,\s])(?P<q>[\"']?)(?P<key>name|value)(?P=q)\s*:\s*"
    r"(?P<val>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,}\s][^,}]*)")
FLOW_ANY_PAIR_RE = re.compile(
    r"(?:^|[{,])\s*(?P<q>[\"']?)(?P<key>[A-Za-z_][\w.-]*)(?P=q)\s*:\s+"
    r"(?P<val>\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^,}\[\]\s][^,}]*)")

# A quoted key with a quoted value anywhere (JSON, Python dicts), and a plain
# YAML key at the start of a line. The key must be a credential name (or
# docker's ``"auth"``).
QUOTED_MAPPING_RE = re.compile(
    r"(?P<q>[\"'])(?P<name>[A-Za-z_][\w.-]*)(?P=q)\s*:\s*(?P<val>\"(?:[^\"\\]|\\.)*\"|'[^']*')")
YAML_MAPPING_RE = re.compile(r"^\s*(?:-\s+)?(?P<name>[A-Za-z_][\w.-]*)\s*:[ \t]+")

# Presigned-URL query credentials (SigV4, SigV2, Azure SAS). The value stops at & and quotes.
PRESIGNED_RE = re.compile(
    r"(?i:(?P<v4>X-(?:Amz|Goog)-(?:Signature|Credential|Security-Token)))=(?P<val4>[^&\s\"'#<>]+)"
    r"|(?<=[?&])(?P<v2>Signature|sig)=(?P<val2>[^&\s\"'#<>]+)")

# scheme://user:password@host -- only the password is replaced.
# Must NOT match ``git@host:path``, ``host:8080/``, ``https://user@host``.
URL_USERINFO_RE = re.compile(r"(?<![A-Za-z0-9+.-])(?P<name>[A-Za-z][A-Za-z0-9+.-]*)://[^\s:/@]*:(?P<val>[^\s/@]+)@")
# scheme://TOKEN@host: a user part of 20+ letters/digits with both kinds is a token.
URL_TOKEN_USER_RE = re.compile(r"(?<![A-Za-z0-9+.-])(?P<name>[A-Za-z][A-Za-z0-9+.-]*)://(?P<val>[A-Za-z0-9_-]{20,})@")

# Well-known token shapes, valid anywhere (even inside paths and URIs).
# Must NOT match inside longer words (``disk-...``, ``task-...``) nor
# ``sk-learn-...``-style names.
TOKEN_SHAPE_RE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:nvapi-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{30,}|pypi-[A-Za-z0-9_-]{40,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])|AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])"
    r"|xox[abpr]-[A-Za-z0-9-]{10,}|[sr]k_live_[A-Za-z0-9]{20,}"
    r"|sk-[A-Za-z0-9]{20,}|sk-(?:proj|svcacct|admin|ant)-[A-Za-z0-9_-]{20,}"
    # a JWT (header and payload are base64url JSON: both start eyJ), e.g. after `Authorization:` without Bearer
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    # incoming webhooks: the URL is the credential (Slack api docs "Sending messages using incoming webhooks";
    # Discord developer docs "Webhook Resource": /api/webhooks/{webhook.id}/{webhook.token})
    r"|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{20,}"
    r"|discord(?:app)?\.com/api/webhooks/[0-9]{5,}/[A-Za-z0-9_-]{20,})")
TOKEN_PREFIX_RE = re.compile(r"nvapi-|hf_|gh[pousr]_|github_pat_|glpat-|npm_|pypi-|AKIA|ASIA|AIza|xox[abpr]-"
                             r"|[sr]k_live_|sk-|eyJ|hooks\.slack\.com/|discord(?:app)?\.com/api/webhooks/")
# PEM private keys: the whole block is the value (matched over the whole text).
PRIVATE_KEY_RE = re.compile(r"-----BEGIN (?P<name>(?:[A-Z0-9]+ )*PRIVATE KEY)-----"
                            r"(?P<val>[\s\S]{0,16384}?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)")


@dataclass(frozen=True)
class _Hit:
    kind: str
    name: str
    line: int
    start: int  # span of the value in the original text
    end: int


def _assignments(text: str) -> Iterator[tuple]:
    for m in ASSIGNMENT_RE.finditer(text):
        if not is_secret_name(m.group("name")):
            continue
        found = _word_after(text, m.end())
        if not found:
            continue
        start, word = found
        # NAME=os.getenv("X"): code reading a value at run time, not a literal (a word never ends before [)
        if text[start + len(word):start + len(word) + 1] == "(" and word[-1].isalnum():
            continue
        if _is_literal(word):
            yield ("assignment", m.group("name"), *_value_span(start, word))


def _parameter_defaults(text: str) -> Iterator[tuple]:
    for m in PARAM_DEFAULT_RE.finditer(text):
        if is_secret_name(m.group("name")) and _is_literal(m.group("val")):
            yield ("parameter-default", m.group("name"), *_value_span(m.start("val"), m.group("val")))


def _flags(text: str) -> Iterator[tuple]:
    for m in FLAG_RE.finditer(text):
        if not is_secret_name(m.group("name")[2:]):
            continue
        if m.group("array"):  # ["--token", "value"]: the value is one quoted string
            quoted = _QUOTED_RE.match(text, m.end())
            found = (m.end(), quoted.group()) if quoted else None
        else:
            found = _word_after(text, m.end())
        if (found and not found[1].lstrip("\"'").startswith("-") and _is_literal(found[1])
                and not _BUILD_SECRET_RE.match(found[1])):
            yield ("flag", m.group("name"), *_value_span(*found))


def _login_passwords(text: str) -> Iterator[tuple]:
    login = LOGIN_RE.search(text)
    if login:
        for m in LOGIN_P_RE.finditer(text, login.end()):
            found = _word_after(text, m.end())
            if found and not PORT_MAP_RE.fullmatch(found[1]) and _is_literal(found[1]):
                yield ("login-password", "-p", *_value_span(*found))
    mysql = MYSQL_RE.search(text)
    if mysql:
        for m in MYSQL_P_RE.finditer(text, mysql.end()):
            found = _word_after(text, m.end())
            if found and _is_literal(found[1]):
                yield ("login-password", "-p", *_value_span(*found))
    for m in SSHPASS_P_RE.finditer(text):
        found = _word_after(text, m.end())
        if found and _is_literal(found[1]):
            yield ("login-password", "-p", *_value_span(*found))
    curl = CURL_RE.search(text)
    if curl:
        for m in USER_FLAG_RE.finditer(text, curl.end()):
            found = _word_after(text, m.end())
            if not found:
                continue
            start, end = _value_span(*found)
            user, colon, password = text[start:end].partition(":")
            if colon and _is_literal(password):
                yield ("login-password", m.group("name"), start + len(user) + 1, end)
    for m in AWS_SET_RE.finditer(text):   # the name may be dotted: default.aws_secret_access_key
        found = _word_after(text, m.end())
        if found and is_secret_name(m.group("name")) and _is_literal(found[1]):
            yield ("flag", m.group("name"), *_value_span(*found))


def _login_kwargs(text: str) -> Iterator[tuple]:
    call = LOGIN_CALL_RE.search(text)
    if call:
        for m in LOGIN_KWARG_RE.finditer(text, call.end()):
            found = _word_after(text, m.end())
            if not found or text[found[0] + len(found[1]):found[0] + len(found[1]) + 1] == "(":
                continue   # key=read_key(...): code reading a value at run time
            start, word = found
            word = word if word.count("(") else word.rstrip(",)")   # the call's own ``)`` is no part of it
            if _is_literal(word):
                yield ("assignment", m.group("name"), *_value_span(start, word))


def _netrc(text: str) -> Iterator[tuple]:
    m = NETRC_RE.search(text) or NETRC_LINE_RE.match(text)
    if m:
        found = _word_after(text, m.end())
        if found and _is_literal(found[1]):
            yield ("login-password", m.group("name"), *_value_span(*found))


def _auth_headers(text: str) -> Iterator[tuple]:
    for m in AUTH_HEADER_RE.finditer(text):
        if _is_literal(m.group("val")):
            yield ("auth-header", m.group("name"), m.start("val"), m.end("val"))


def _flow_entries(text: str) -> Iterator[tuple]:
    for obj in FLOW_OBJECT_RE.finditer(text):
        pairs = {m.group("key"): m for m in FLOW_PAIR_RE.finditer(obj.group())}
        if "name" in pairs and "value" in pairs:
            name = _unquote(pairs["name"].group("val").strip())
            value = pairs["value"].group("val").rstrip()
            if is_secret_name(name) and _is_literal(value):
                yield ("manifest-env", name, *_value_span(obj.start() + pairs["value"].start("val"), value))
        for m in FLOW_ANY_PAIR_RE.finditer(obj.group()):
            value = m.group("val").rstrip()
            if _is_mapping_key(m.group("key")) and _is_literal(value):
                yield ("mapping", m.group("key"), *_value_span(obj.start() + m.start("val"), value))


def _is_mapping_key(name: str) -> bool:
    return is_secret_name(name) or name.lower() == "auth"   # docker config.json "auth": base64(user:password)


def _mappings(text: str) -> Iterator[tuple]:
    for m in QUOTED_MAPPING_RE.finditer(text):
        if _is_mapping_key(m.group("name")) and _is_literal(m.group("val")):
            yield ("mapping", m.group("name"), *_value_span(m.start("val"), m.group("val")))
    found = YAML_MAPPING_RE.match(text)
    if found and is_secret_name(found.group("name")):
        value = _scalar_after(text[found.end():])
        if not BLOCK_INDICATOR_RE.fullmatch(value) and _is_literal(value):
            yield ("mapping", found.group("name"), *_value_span(found.end(), value))


def _presigned(text: str) -> Iterator[tuple]:
    for m in PRESIGNED_RE.finditer(text):
        group = "val4" if m.group("v4") else "val2"
        if _is_literal(m.group(group)):
            yield ("presigned-url", m.group("v4") or m.group("v2"), m.start(group), m.end(group))


def _url_passwords(text: str) -> Iterator[tuple]:
    for m in URL_USERINFO_RE.finditer(text):
        if _is_literal(m.group("val")):
            yield ("url-password", m.group("name"), m.start("val"), m.end("val"))
    for m in URL_TOKEN_USER_RE.finditer(text):
        user = m.group("val")
        if re.search(r"[0-9]", user) and re.search(r"[A-Za-z]", user) and _is_literal(user):
            yield ("url-password", m.group("name"), m.start("val"), m.end("val"))


def _token_shapes(text: str) -> Iterator[tuple]:
    for m in TOKEN_SHAPE_RE.finditer(text):
        prefix = TOKEN_PREFIX_RE.match(m.group())
        assert prefix is not None   # every shape starts with one of the prefixes: the finding names it
        yield ("token-shape", prefix.group(), m.start(), m.end())


_TEXT_RULES = (_assignments, _login_kwargs, _parameter_defaults, _flags, _login_passwords, _netrc, _auth_headers,
               _flow_entries, _mappings, _presigned, _url_passwords, _token_shapes)
_URI_RULES = (_presigned, _url_passwords, _token_shapes)


def _private_keys(text: str) -> Iterator[_Hit]:
    for m in PRIVATE_KEY_RE.finditer(text):
        if _is_literal(m.group("val")):
            yield _Hit("private-key", m.group("name"), text.count("\n", 0, m.start()) + 1,
                       m.start("val"), m.end("val"))


# --- Kubernetes env entries across lines ------------------------------------

def _manifest_entries(lines: Iterable[_Line]) -> Iterator[_Hit]:
    """``name:`` / ``value:`` pairs of block-style env entries, any key order.

    An entry is the run of ``name``/``value`` keys at one column; a list item
    (``- ``), another column or a dedent starts the next. A value waits in
    ``pending`` until its name is known; ``value: |`` collects the indented
    lines below it.
    """
    column: int | None = None
    name = ""
    pending: list[tuple[int, int, int]] = []   # (line, start, end) of literal values
    block: tuple[int, int] | None = None  # (key column, line of ``value: |``)

    def flush() -> Iterator[_Hit]:
        if is_secret_name(name):
            yield from (_Hit("manifest-env", name, *span) for span in pending)
            pending.clear()

    for line in lines:
        text = line.text
        stripped = text.strip()
        indent = len(text) - len(text.lstrip())
        if block is not None:
            if not stripped or indent > block[0]:
                if _is_literal(stripped):
                    pending.append((block[1], *line.original(indent, len(text.rstrip()))))
                    yield from flush()
                continue
            block = None
        if not stripped or stripped.startswith("#"):
            continue
        m = ENTRY_KEY_RE.match(text)
        if m is None:
            if column is not None and indent < column:
                column, name, pending = None, "", []
            continue
        key_column = len(m.group("lead"))
        if "-" in m.group("lead") or key_column != column:
            column, name, pending = key_column, "", []
        value = _scalar_after(text[m.end():])
        if m.group("key") == "name":
            name = _unquote(value)
        elif BLOCK_INDICATOR_RE.fullmatch(value):
            block = (key_column, line.number)
        elif _is_literal(value):
            pending.append((line.number, *line.original(*_value_span(m.end(), value))))
        yield from flush()


YAML_KEY_ONLY_RE = re.compile(r"^(?P<lead>\s*(?:-\s+)?)(?P<name>[A-Za-z_][\w.-]*)\s*:\s*(?P<block>[|>][-+0-9]*)?\s*$")
_YAML_NOT_SCALAR_RE = re.compile(r"^\s*(?:-(?:\s|$)|[#\[{&*!]|[\"']?[A-Za-z_][\w.-]*[\"']?\s*:(?:\s|$))")


def _next_line_values(lines: list[_Line]) -> Iterator[_Hit]:
    """A credential key whose value sits on the next, deeper-indented line (a YAML plain scalar
    continued, or a block scalar ``password: |``): ``password:\n  S``."""
    for i, line in enumerate(lines[:-1]):
        m = YAML_KEY_ONLY_RE.match(line.text)
        if not m or not is_secret_name(m.group("name")):
            continue
        column = len(m.group("lead"))
        for nxt in lines[i + 1:]:
            if nxt.text.strip():
                break
        else:
            continue
        indent = len(nxt.text) - len(nxt.text.lstrip())
        value = nxt.text.strip()
        if indent > column and not _YAML_NOT_SCALAR_RE.match(nxt.text) and _is_literal(value):
            yield _Hit("mapping", m.group("name"), nxt.number, *nxt.original(indent, indent + len(value)))



def _scan(text: str, rules) -> list[_Hit]:
    """What ``rules`` find on each logical line, block-style env entries and PEM private keys."""
    if not text or not isinstance(text, str):
        return []
    lines = list(_logical_lines(text))
    hits = [_Hit(kind, name, line.number, *line.original(start, end))
            for line in lines for rule in rules for kind, name, start, end in rule(line.text)]
    hits.extend(_manifest_entries(lines))
    if rules is _TEXT_RULES:
        hits.extend(_next_line_values(lines))
    hits.extend(_private_keys(text))
    return hits
