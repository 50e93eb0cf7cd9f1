"""Secret lint (ADVICE) and redaction. Invariant: a secret value the process
knows never survives an output.

Two layers, kept apart (``references/redaction.md``):

* The GUARANTEE rests on values: :mod:`tao_brev.known_secrets` collects every
  secret value this process knows (the bundle's credential variables, every
  ``--env`` value, every environment variable whose name looks like a
  credential) and checks every exit for them, in every common encoding.
  :func:`redact_values` is that check applied to text.
* The ADVICE is this module's pattern lint over text the bundle did not
  produce (specs, overrides, logs, commands): ``lint`` names what it found
  (variable, flag, key or pattern name, and line), never the value;
  ``redact`` replaces every literal credential with ``<redacted>`` and keeps
  the name, so ``NGC_KEY=abc`` becomes ``NGC_KEY=<redacted>``. Neither ever
  raises, on any input.

A name is a credential name when its words (split at ``_ . -``, camelCase and
digits) hold a credential word - SECRET, PASSWORD, PASSWD, PASSPHRASE, TOKEN,
CREDENTIAL(S), API KEY, ACCESS KEY, SECRET KEY, PRIVATE KEY, ACCOUNT KEY, AUTH
KEY, NGC KEY, or one word ending in PASSWORD / APIKEY / ... (``PGPASSWORD``,
``authtoken``) - and no descriptor word follows it (``_file``, ``_path``,
``_id`` after TOKEN, ``_dropout``, ``_ref``, ``_stdin``, ... : anything but a
value word such as ``_value``, ``_id`` after KEY, an environment or a number),
and TOKEN is not a tokenizer role (``pad_token``, ``eos_token``, ``num_token``).

Caught (a "literal" is any value of at least MIN_VALUE_LENGTH (8)
characters that is not only references - ``$VAR``,
``${VAR}``, ``$(...)``, ``${oc.env:VAR}`` and other ``${...}`` interpolations,
``{{ ... }}`` templates, ``os.getenv("X")``-style code -, a file path, placeholders such as ``<redacted>``, tokenizer
special tokens such as ``[PAD]`` / ``</s>`` / ``<|im_end|>``, booleans,
nulls, floats or integers of at most four digits):
  1. ``NAME=literal`` for credential names: plain, ``export``, ``docker
     -e``/``--env``, ``--export=ALL,NAME=...``, URL queries, dotted and Hydra
     overrides (``train.wandb.api_key=...``, ``+a.token=...``), npm
     ``:_authToken=``; ``${NAME:-literal}`` defaults.
  2. ``--NAME value`` for credential flag names (``--password``, ``--token``,
     ``--api-key``, ``--secret``, ``--secret-key``, ``--client-secret``, ...;
     space, ``=`` or ``["--token", "abc"]``); ``-p value`` after a ``login``
     word, ``mysql -pVALUE``, ``sshpass -p``, ``curl -u user:VALUE``,
     ``aws configure set <credential key> VALUE``.
  3. ``Authorization: Bearer|Basic|Token literal`` headers.
  4. Kubernetes env entries: a literal ``value:`` paired with a credential
     ``name:`` in block, flow and JSON forms, any key order, block scalars.
  5. A literal under a credential key: quoted keys anywhere (JSON, STS
     ``"SecretAccessKey"``, docker config ``"auth"``), YAML ``key: value``
     lines, and ``key: value`` pairs inside flow mappings.
  6. Presigned-URL query credentials (``X-Amz-Signature``, ``X-Amz-Credential``,
     ``X-Amz-Security-Token``, SigV2 ``Signature``, SAS ``sig``), passwords in
     URL userinfo (``https://user:pass@host``) and a token as the URL user
     (``https://<20+ letters and digits>@host``).
  7. Well-known token shapes anywhere: ``nvapi-``, ``hf_``, ``ghp_`` (and
     ``gho_ ghu_ ghs_ ghr_``), ``github_pat_``, ``glpat-``, ``npm_``,
     ``pypi-``, ``AKIA``/``ASIA`` + 16, ``AIza`` + 35, ``xox[abpr]-``,
     ``sk-``, ``sk_live_``/``rk_live_``, and PEM ``PRIVATE KEY`` blocks.
Backslash-continued lines are one logical line; a finding reports the first
physical line.

Deliberately not caught (use ``$VAR``, stdin or ``secretKeyRef``; the value
guard covers every value the process knows): secrets split across variables
or assembled at run time, encoded values, secrets under names without a
credential word (``wandb.key``) unless shaped, a literal piped into
``--password-stdin``, code such as ``os.environ["K"] = "v"``, multi-line
quoted YAML values, sequences under a credential key, ``-p`` of other
commands, secrets in binary files or files named by path. ``redact_obj``
sees strings one at a time: a bare value under a credential-named dict key
is not recognised by the lint (the value guard still removes known values).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple

from . import lazy_re

PLACEHOLDER = "<redacted>"
# Shorter values are never treated as secrets in free text: not searched for
# as known values, not reported by the lint (demo defaults such as
# ``password: test2`` in public configs). submit.py refuses --env values and
# the bundle's credentials shorter than this instead.
MIN_VALUE_LENGTH = 8

# The bundle's own credential variables (always secret, whatever their value's shape).
SECRET_ENV_NAMES = ("BREV_API_TOKEN", "NGC_KEY", "NGC_API_KEY", "AWS_ACCESS_KEY_ID",
                    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "ACCESS_KEY", "SECRET_KEY",
                    "HF_TOKEN", "WANDB_API_KEY")

# --- names ------------------------------------------------------------------

# Words of a name: ``AWS_SECRET_ACCESS_KEY`` -> aws secret access key,
# ``clientSecret`` -> client secret, ``SecretAccessKey`` -> secret access key.
_WORD_RE = lazy_re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# One word that is a credential by itself.
_CREDENTIAL_WORDS = frozenset({
    "secret", "secrets", "password", "passwords", "passwd", "passphrase", "token", "credential", "credentials",
    "apikey", "secretkey", "accesskey", "privatekey", "authkey", "authtoken", "accesstoken", "apitoken",
    "sessiontoken", "refreshtoken", "bearertoken", "idtoken", "identitytoken", "clientsecret"})
_CREDENTIAL_SUFFIXES = ("password", "passwd", "passphrase", "apikey", "secretkey", "accesskey", "privatekey")
# Two words that are a credential together (``api_key``, ``AccessKey``).
_CREDENTIAL_PAIRS = frozenset({("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
                               ("account", "key"), ("auth", "key"), ("ngc", "key"), ("master", "key"),
                               ("signing", "key"), ("connection", "string"),
                               # services whose API key is commonly written <service>_key
                               ("wandb", "key"), ("kaggle", "key"), ("openai", "key"), ("comet", "key"),
                               ("neptune", "key"), ("hf", "key"), ("huggingface", "key"), ("anthropic", "key"),
                               ("cohere", "key"), ("pinecone", "key"), ("replicate", "key")})
# An upper-case environment-style name ending in _KEY (``KAGGLE_KEY``) is a credential.
_ENV_KEY_RE = lazy_re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_KEY")
# Words after the credential word that still name the value itself
# (``AWS_ACCESS_KEY_ID``, ``SECRET_KEY_BASE``, ``API_KEY_PROD``); any other
# word makes the name a descriptor (``password_file``, ``token_dropout``).
_VALUE_TAILS = frozenset({"value", "val", "data", "string", "str", "b64", "base64", "hex", "raw", "plain",
                          "plaintext", "base", "prod", "production", "dev", "staging", "test", "live", "new",
                          "old", "current", "primary", "secondary", "v"})
# Words before TOKEN that make it a tokenizer or counting term, not a credential.
_TOKEN_ROLES = frozenset({
    "pad", "eos", "bos", "unk", "sep", "cls", "mask", "start", "end", "image", "img", "video", "audio",
    "vision", "special", "additional", "placeholder", "sot", "eot", "boi", "eoi", "boa", "eoa", "bov", "eov",
    "im", "think", "tool", "prefix", "suffix", "middle", "fim", "eod", "eom", "eoh", "num", "max", "min", "n",
    "stop", "patch", "box", "point", "quad", "obj", "object", "region", "frame", "lang", "timestamp", "split",
    "newline", "blank", "dummy", "added", "vocab", "merge", "subword"})


def name_words(name: str) -> tuple[str, ...]:
    """The lower-case words of an identifier (snake, kebab, dotted, camelCase)."""
    return tuple(w.lower() for w in _WORD_RE.findall(name or ""))


def _credential_end(words: tuple[str, ...]) -> tuple[int, str] | None:
    """(index of the last word of the LAST credential word/pair, that word), or None."""
    found = None
    for i, word in enumerate(words):
        if word in _CREDENTIAL_WORDS or word.endswith(_CREDENTIAL_SUFFIXES):
            found = (i, word)
        elif i and (words[i - 1], word) in _CREDENTIAL_PAIRS:
            found = (i, word)
    return found


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True if ``name`` names a credential (see the module doc): ``HF_TOKEN``,
    ``clientSecret``, ``PGPASSWORD``, ``AWS_ACCESS_KEY_ID``; not
    ``pad_token_id``, ``password_file``, ``max_new_tokens``, ``secretKeyRef``."""
    words = name_words(name)
    found = _credential_end(words)
    if found is None and _ENV_KEY_RE.fullmatch(name.rsplit(".", 1)[-1]):
        found = (len(words) - 1, "key")
    if found is None or words[0] == "no":
        return False
    end, word = found
    if word == "token" and end and words[end - 1] in _TOKEN_ROLES:
        return False
    for tail in words[end + 1:]:
        if tail.isdigit() or tail in _VALUE_TAILS or (tail in ("id", "ids") and word.endswith("key")):
            continue
        return False
    return True


# --- patterns ---------------------------------------------------------------

# One shell word: quoted parts, ${...}, $(...) and unquoted runs glued together.
# Unquoted runs stop at blanks, quotes and shell operators, and at a comma that
# starts another NAME= (``--export=ALL,A=1,B=2``); other commas stay in the value.
# Must not run past ``&`` in a URL query.
WORD_RE = lazy_re.compile(r"(?:\"(?:[^\"\\]|\\.)*\"|'[^']*'|\$\{[^}]*\}|\$\([^)]*\)"
                     r"|(?:[^\s\"'`;&|<>(),]|,(?![A-Za-z_][\w.]*=))+)+")

# A whole word that is one quoted string: redaction keeps its quotes.
_QUOTED_RE = lazy_re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")

# NAME= where NAME starts a word or follows ; & | , ? = ( [ { : + ~ or a quote.
# Must match ``export A=``, ``-e A=``, ``--env=A=``, ``ALL,A=``, ``?token=``,
# ``train.api_key=``, ``+train.token=``, ``/:_authToken=``. Must NOT match path
# segments (``/data/token=v1``), flag names (``--token=``) or ``==`` comparisons.
ASSIGNMENT_RE = lazy_re.compile(r"(?<![^\s\"'`;&|,?=(\[{:+~])(?P<name>[A-Za-z_][\w.]*)=(?!=)")

# ${NAME:-default}, ${NAME-default}, ${NAME:=default}, ${NAME:+alt}: the
# default is a literal written into the text. ${NAME:?message} is not a value.
PARAM_DEFAULT_RE = lazy_re.compile(r"\$\{(?P<name>[A-Za-z_]\w*):?[-=+](?P<val>[^}]*)\}")

# A long flag followed by =, blanks, or the JSON-array separator ``", "``;
# the flag is a credential flag when its name is a credential name.
FLAG_RE = lazy_re.compile(r"(?<![\w-])(?P<name>--[A-Za-z][A-Za-z0-9_-]*)(?:=|\s+|(?P<array>[\"']\s*,\s*))")
# docker build --secret id=x,src=FILE / env=VAR: names a source, not a value.
_BUILD_SECRET_RE = lazy_re.compile(r"[\"']?(?:id|type|src|source|env|required|target|mode|uid|gid)=")

# ``-p value`` after a standalone ``login`` word (docker/podman/helm login).
LOGIN_RE = lazy_re.compile(r"(?<![\w.-])login(?![\w.-])")
LOGIN_P_RE = lazy_re.compile(r"(?<!\S)(?P<name>-p)(?:=|\s+)?")
# Docker port maps, which ``-p`` also takes: 80, 8080:80, 127.0.0.1:8080:80/tcp.
PORT_MAP_RE = lazy_re.compile(r"(?:[\d.]+:)?(?:\d{1,5}(?:-\d{1,5})?:)?\d{1,5}(?:-\d{1,5})?(?:/(?:tcp|udp|sctp))?")
# mysql/mariadb take the password attached (``-pVALUE``; ``-p VALUE`` prompts).
MYSQL_RE = lazy_re.compile(r"(?<![\w.-])(?:mysql\w*|mariadb\w*)(?![\w.-])")
MYSQL_P_RE = lazy_re.compile(r"(?<!\S)(?P<name>-p)(?=[^\s-])")
# sshpass -p VALUE / -pVALUE.
SSHPASS_P_RE = lazy_re.compile(r"(?<![\w.-])sshpass\b[^;&|\n]{0,400}?(?<!\S)(?P<name>-p)(?:\s+|=)?")
# curl/wget -u / --user user:password (only the password part is the value).
CURL_RE = lazy_re.compile(r"(?<![\w.-])(?:curl|wget|http|https|xh)(?![\w.-])")
USER_FLAG_RE = lazy_re.compile(r"(?<!\S)(?P<name>-u|--user)(?:=|\s+)")
# aws configure set [profile.P.]aws_secret_access_key VALUE
AWS_SET_RE = lazy_re.compile(r"\baws\s+configure\s+set\s+(?:--profile\s+\S+\s+)?(?P<name>[\w.-]+)\s+")

# A credential keyword of a login call: ``wandb.login(key="...")``, ``hf.login(token=...)``,
# ``Client(api_key=...)`` (names a credential only inside such a call: ``key`` alone is no name).
LOGIN_CALL_RE = lazy_re.compile(r"\b(?:login|log_in|authenticate|auth|connect)\s*\(")
LOGIN_KWARG_RE = lazy_re.compile(r"(?<![\w.])(?P<name>key|token|password|passwd|secret|pat)\s*=\s*")
# ~/.netrc (curl, git, wandb): ``machine HOST login USER password S`` on one line, or a line
# ``password S`` of a multi-line entry.
NETRC_RE = lazy_re.compile(r"(?:^|\s)(?:machine\s+\S+|default)\b.*?\s(?P<name>password)\s+")
NETRC_LINE_RE = lazy_re.compile(r"^\s*(?P<name>password)\s+(?=\S+\s*$)")

# Authorization: Bearer <token> (also Basic/Token), in headers or JSON.
AUTH_HEADER_RE = lazy_re.compile(
    r"(?i)(?P<name>Authorization)[\"']?\s*:\s*[\"']?(?:Bearer|Basic|Token)\s+(?P<val>[^\s\"'`,;]+)")

# Kubernetes env entry keys on a line of their own: ``- name: X``,
# ``value: Y``, ``"value": "Y",``. Must NOT match ``valueFrom:``.
ENTRY_KEY_RE = lazy_re.compile(r"^(?P<lead>\s*(?:-\s+)?)(?P<q>[\"']?)(?P<key>name|value)(?P=q)\s*:\s*")
# The scalar after a key (see _scalar_after): quoted, a block indicator (| >),
# or plain up to a comment or trailing comma.
_QUOTED_SCALAR_RE = lazy_re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'")
_COMMENT_RE = lazy_re.compile(r"(?:^|\s)#")
BLOCK_INDICATOR_RE = lazy_re.compile(r"[|>][-+0-9]*")
# One flow / JSON object on a line (innermost), and its pairs.
FLOW_OBJECT_RE = lazy_re.compile(r"\{[^{}]*\}")
FLOW_PAIR_RE = lazy_re.compile(
    r"(?:^|[{,\s])(?P<q>[\"']?)(?P<key>name|value)(?P=q)\s*:\s*"
    r"(?P<val>\"(?:[^\"\\]|\\.)*\"|'[^']*'|[^,}\s][^,}]*)")
FLOW_ANY_PAIR_RE = lazy_re.compile(
    r"(?:^|[{,])\s*(?P<q>[\"']?)(?P<key>[A-Za-z_][\w.-]*)(?P=q)\s*:\s+"
    r"(?P<val>\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^,}\[\]\s][^,}]*)")

# A quoted key with a quoted value anywhere (JSON, Python dicts), and a plain
# YAML key at the start of a line. The key must be a credential name (or
# docker's ``"auth"``).
QUOTED_MAPPING_RE = lazy_re.compile(
    r"(?P<q>[\"'])(?P<name>[A-Za-z_][\w.-]*)(?P=q)\s*:\s*(?P<val>\"(?:[^\"\\]|\\.)*\"|'[^']*')")
YAML_MAPPING_RE = lazy_re.compile(r"^\s*(?:-\s+)?(?P<name>[A-Za-z_][\w.-]*)\s*:[ \t]+")

# Presigned-URL query credentials (SigV4, SigV2, Azure SAS). The value stops at & and quotes.
PRESIGNED_RE = lazy_re.compile(
    r"(?i:(?P<v4>X-(?:Amz|Goog)-(?:Signature|Credential|Security-Token)))=(?P<val4>[^&\s\"'#<>]+)"
    r"|(?<=[?&])(?P<v2>Signature|sig)=(?P<val2>[^&\s\"'#<>]+)")

# scheme://user:password@host -- only the password is replaced.
# Must NOT match ``git@host:path``, ``host:8080/``, ``https://user@host``.
URL_USERINFO_RE = lazy_re.compile(r"(?<![A-Za-z0-9+.-])(?P<name>[A-Za-z][A-Za-z0-9+.-]*)://[^\s:/@]*:(?P<val>[^\s/@]+)@")
# scheme://TOKEN@host: a user part of 20+ letters/digits with both kinds is a token.
URL_TOKEN_USER_RE = lazy_re.compile(r"(?<![A-Za-z0-9+.-])(?P<name>[A-Za-z][A-Za-z0-9+.-]*)://(?P<val>[A-Za-z0-9_-]{20,})@")

# Well-known token shapes, valid anywhere (even inside paths and URIs).
# Must NOT match inside longer words (``disk-...``, ``task-...``) nor
# ``sk-learn-...``-style names.
TOKEN_SHAPE_RE = lazy_re.compile(
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
TOKEN_PREFIX_RE = lazy_re.compile(r"nvapi-|hf_|gh[pousr]_|github_pat_|glpat-|npm_|pypi-|AKIA|ASIA|AIza|xox[abpr]-"
                             r"|[sr]k_live_|sk-|eyJ|hooks\.slack\.com/|discord(?:app)?\.com/api/webhooks/")
# PEM private keys: the whole block is the value (matched over the whole text).
PRIVATE_KEY_RE = lazy_re.compile(r"-----BEGIN (?P<name>(?:[A-Z0-9]+ )*PRIVATE KEY)-----"
                            r"(?P<val>[\s\S]{0,16384}?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)")

# What makes a value NOT literal: $VAR / ${VAR} / ${VAR:-default} / $(cmd)
# references, ${oc.env:VAR[,default]} and other ${...} interpolations,
# {{ templates }}, <placeholders> (<redacted>, <your key>), tokenizer special
# tokens ([PAD], </s>, <|im_end|>), and scalars that are never credentials
# (booleans, nulls, floats, integers of at most four digits).
_REFERENCE_RE = lazy_re.compile(r"\$\{(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-=+?])(?P<default>[^}]*))?\}"
                           r"|\$\{oc\.env:[^,}]*(?:,(?P<ocdefault>[^}]*))?\}"
                           r"|\$\{[^{}]*\}|\{\{[^{}]*\}\}|\$\([^)]*\)|\$env:\w+|\$\{?[A-Za-z_]\w*\}?"
                           r"|<%=?[^%]*%>|%[A-Za-z_]\w*%|!ENV\b"
                           # code that reads a value at run time: os.environ["X"], os.getenv("X"), ENV.fetch(...)
                           r"|\b[A-Za-z_][\w.]*(?:environ|getenv|env|ENV|secret|secrets|fetch|get|read|load)"
                           r"\s*[(\[][^()\[\]]*[)\]]")
# A file path as a value names where the secret is, not the secret (``GOOGLE_APPLICATION_CREDENTIALS=
# /home/u/key.json``, ``private_key: ~/.ssh/id_rsa``): absolute, ``~/`` or ``./``, at least two
# segments, one of them a lower-case word (random base64 starting with ``/`` has none).
_PATH_VALUE_RE = lazy_re.compile(r"[\"']?(?:~|\.{1,2})?/[\w.@-]+(?:/[\w.@-]*)+[\"']?")
_PATH_WORD_RE = lazy_re.compile(r"(?:^|[/.])[a-z]{3,}(?=$|[/._-])")
_PLACEHOLDER_RE = lazy_re.compile(r"<[A-Za-z][\w .:-]*>|<\|[^|<>]*\|>|</[\w.:-]*>|\[[A-Za-z_]+\]")
_NOT_SECRET_SCALAR_RE = lazy_re.compile(r"(?i)true|false|yes|no|on|off|null|none|~|[-+]?\d{1,4}"
                                   r"|[-+]?(?:\d+\.\d*|\.\d+)(?:e[-+]?\d+)?|[-+]?\d+e[-+]?\d+")
# A string redact_obj treats as a path or URI (no blanks): gets redact_uri.
_PATH_LIKE_RE = lazy_re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://|/|~/|\./|\.\./)\S*")
# Text no rule can find anything in (ids, timestamps, plain paths, image names): one line, no
# blank, quote, =, $, {, @, ?, &, #, comma, backslash or < - what every rule but the token
# shapes needs around a value (tests/test_redact.py checks each rule) - and no token shape.
_PLAIN_RE = lazy_re.compile(r"[A-Za-z0-9_.~/:+-]*")
_MEMO_MAX_CHARS = 1024   # longer texts are scanned each time (the memo stays small)


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
    "url-password": _Kind("{name}://user:<literal>@", "password or token in URL userinfo"),
    "private-key": _Kind("-----BEGIN {name}-----", "PEM private key block"),
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

def lint(text: str) -> list[Finding]:
    """The literal credentials in ``text``, one finding per value, in order.
    Never raises; anything but a ``str`` is linted as empty text."""
    kept: list[_Hit] = []
    for hit in sorted(_scan(text, _TEXT_RULES), key=lambda h: (_PRIORITY[h.kind], h.start)):
        if not any(_overlap(hit, k) for k in kept):
            kept.append(hit)
    kept.sort(key=lambda h: (h.line, h.start))
    return [Finding(h.kind, _name_shown(h.name), h.line) for h in kept]


def _overlap(a: _Hit, b: _Hit) -> bool:
    """True when the spans share a character (spans that only touch do not)."""
    return a.start < b.end and b.start < a.end


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
    each of its encodings (see :mod:`tao_brev.known_secrets`): values from
    ``env`` when given, else from ``os.environ``, the environment of the
    running verb and the ``--env`` names of the jobs it read."""
    from . import known_secrets

    return known_secrets.redact_text(text, env)


def redact_obj(obj, env: Mapping[str, str] | None = None):
    """A copy of a JSON-like object with every string redacted (keys kept):
    paths and URIs get :func:`redact_uri`, other strings :func:`redact`, and
    all of them :func:`redact_values` (the known values looked up once per call)."""
    from . import known_secrets

    values = known_secrets.redactor(env)
    return _redact_obj(obj, lambda text: _redact_string(text, values))


def obj_redactor(env: Mapping[str, str] | None = None) -> ObjRedactor:
    """:func:`redact_obj` for many objects in a row (a streamed listing): the known values are
    looked up once and each distinct string is redacted once (the same image, state, message
    or timestamp in 50,000 records). Use it at once, for one answer, as ``known_secrets.redactor``."""
    from . import known_secrets

    return ObjRedactor(known_secrets.redactor(env))


class ObjRedactor:
    """Made by :func:`obj_redactor`. Calling it answers as :func:`redact_obj`; :meth:`json_text`
    writes the JSON text of that answer without building it."""

    _MEMO_MAX = 4096   # strings remembered; memory stays flat, what repeats comes back at once

    def __init__(self, values: Callable[[str], str]):
        self._values = values
        self._memo: dict[str, str] = {}
        self._literals = _Literals(self._redacted)
        self._dumps = None

    def __call__(self, obj):
        return _redact_obj(obj, self.string)

    def string(self, text: str) -> str:
        out = self._memo.get(text)
        if out is None:
            if len(self._memo) >= self._MEMO_MAX:
                self._memo.clear()
            out = self._memo[text] = _redact_string(text, self._values)
        return out

    def _redacted(self, text: str) -> str:
        return _redact_string(text, self._values)

    def json_text(self, obj, level: int = 0) -> str:
        """``json_out.dumps(self(obj), level)``, in one walk: each distinct string is redacted
        and encoded once (its JSON literal is remembered), no redacted copy is built."""
        if self._dumps is None:
            from . import json_out

            self._dumps = json_out.encoder(self._literals.__getitem__)
        return self._dumps(obj, level)


class _Literals(dict):
    """{string: JSON literal of its redacted text}, filled on first use, at most
    ``ObjRedactor._MEMO_MAX`` entries (a hit is one dict lookup)."""

    def __init__(self, redacted: Callable[[str], str]):
        super().__init__()
        self._redacted = redacted

    def __missing__(self, text: str) -> str:
        from json.encoder import encode_basestring_ascii

        if len(self) >= ObjRedactor._MEMO_MAX:
            self.clear()
        out = self[text] = encode_basestring_ascii(self._redacted(text))
        return out


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


def _name_shown(name: str) -> str:
    """A finding's name, bounded (a name is never a value, but keep reports small)."""
    return name if len(name) <= 80 else name[:77] + "..."


# --- values -----------------------------------------------------------------

def _strip_references(value: str) -> str:
    def keep_default(m: re.Match) -> str:
        if m.group("ocdefault") is not None:
            return _REFERENCE_RE.sub(keep_default, m.group("ocdefault"))
        op = m.group("op")   # one of - = + ? after an optional colon; ? gives an error message, not a value
        if op and op[-1] != "?":
            return _REFERENCE_RE.sub(keep_default, m.group("default"))
        return ""

    return _REFERENCE_RE.sub(keep_default, value)


def _is_literal(value: str) -> bool:
    """True if ``value`` writes credential material into the text, rather than
    referring to it ($VAR, ${VAR}, ${oc.env:VAR}, $(cmd)) or being a
    placeholder, a tokenizer special token or a plain number / boolean."""
    if _PATH_VALUE_RE.fullmatch(value) and _PATH_WORD_RE.search(value):
        return False
    rest = _PLACEHOLDER_RE.sub("", _strip_references(value)).replace('"', "").replace("'", "").strip()
    return (len(rest) >= MIN_VALUE_LENGTH and re.search(r"[A-Za-z0-9]", rest) is not None
            and not _NOT_SECRET_SCALAR_RE.fullmatch(rest))


def _value_span(start: int, word: str) -> tuple[int, int]:
    """The span to replace: inside the quotes of a wholly quoted word."""
    if _QUOTED_RE.fullmatch(word):   # callers pass literals only: never an empty ""
        return start + 1, start + len(word) - 1
    return start, start + len(word)


# --- logical lines ----------------------------------------------------------

@dataclass(frozen=True)
class _Line:
    """A logical line: physical lines joined at trailing backslashes."""

    number: int                # first physical line, 1-based
    text: str                  # the joined text, continuation backslashes removed
    starts: tuple[int, ...]    # offset in ``text`` where each physical line begins
    origins: tuple[int, ...]   # offset in the original text of the same point

    def original(self, start: int, end: int) -> tuple[int, int]:
        return self._at(start), self._at(max(start, end - 1)) + 1

    def _at(self, pos: int) -> int:
        i = max(bisect_right(self.starts, pos) - 1, 0)
        return self.origins[i] + pos - self.starts[i]


def _logical_lines(text: str) -> Iterator[_Line]:
    parts: list[str] = []
    starts: list[int] = []
    origins: list[int] = []
    first = joined = offset = 0
    physical = text.split("\n")
    for number, raw in enumerate(physical, start=1):
        body = raw[:-1] if raw.endswith("\r") else raw
        # an odd run of trailing backslashes joins the next line (the last line has none to join)
        continued = number < len(physical) and (len(body) - len(body.rstrip("\\"))) % 2 == 1
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


# --- rules: each yields (kind, name, start, end), a non-empty span within one logical line ---

def _word_after(text: str, pos: int) -> tuple[int, str] | None:
    m = WORD_RE.match(text, pos)
    return (pos, m.group()) if m else None


def _scalar_after(rest: str) -> str:
    """The YAML scalar that starts ``rest`` (what follows a key's colon and the blanks
    after it: ENTRY_KEY_RE and YAML_MAPPING_RE consume them), or "" when nothing, a
    comment or a flow collection follows. Quoted: up to the closing quote (and only a
    trailing comma or comment after it); a block indicator (``|``, ``>-``) as such;
    plain: up to `` #`` or the end, trailing blanks and one comma dropped.
    Linear in the line's length."""
    if not rest or rest[0] in "#,{}[]":
        return ""
    quoted = _QUOTED_SCALAR_RE.match(rest)
    if quoted:
        after = rest[quoted.end():].strip()
        if after.startswith(","):
            after = after[1:].strip()
        if not after or after.startswith("#"):
            return quoted.group()
    comment = _COMMENT_RE.search(rest)
    value = rest[:comment.start() if comment else len(rest)].rstrip()
    if value.endswith(","):
        value = value[:-1].rstrip()
    return value


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
    m = YAML_MAPPING_RE.match(text)
    if m and is_secret_name(m.group("name")):
        value = _scalar_after(text[m.end():])
        if not BLOCK_INDICATOR_RE.fullmatch(value) and _is_literal(value):
            yield ("mapping", m.group("name"), *_value_span(m.end(), value))


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
        # every shape starts with one of the prefixes: the finding names it
        yield ("token-shape", TOKEN_PREFIX_RE.match(m.group()).group(), m.start(), m.end())


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


YAML_KEY_ONLY_RE = lazy_re.compile(r"^(?P<lead>\s*(?:-\s+)?)(?P<name>[A-Za-z_][\w.-]*)\s*:\s*(?P<block>[|>][-+0-9]*)?\s*$")
_YAML_NOT_SCALAR_RE = lazy_re.compile(r"^\s*(?:-(?:\s|$)|[#\[{&*!]|[\"']?[A-Za-z_][\w.-]*[\"']?\s*:(?:\s|$))")


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


def _unquote(value: str) -> str:
    return value[1:-1] if _QUOTED_RE.fullmatch(value) else value


# --- scanning and replacing -------------------------------------------------

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
