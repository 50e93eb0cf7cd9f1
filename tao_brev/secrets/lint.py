"""The secret lint (ADVICE, never raises, on any input): the literal credentials a text the
bundle did not produce writes (specs, overrides, logs, commands), one :class:`Finding` per value,
naming the variable, flag, key or pattern and the line, never the value. Its rules are
:mod:`tao_brev.secrets.rules`; ``redact.redact`` replaces what they find.

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

from dataclasses import dataclass
from typing import NamedTuple, TypedDict

from .rules import _TEXT_RULES, _Hit, _scan


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


class FindingJson(TypedDict):
    """A :class:`Finding` in an error's details (``findings``): never the value."""
    kind: str
    name: str
    line: int
    message: str


@dataclass(frozen=True)
class Finding:
    """One embedded credential: what kind, under which name, on which line."""

    kind: str   # a key of KINDS
    name: str   # the variable / flag / key / pattern name, never the value
    line: int   # first physical line of the logical line, 1-based

    @property
    def description(self) -> str:
        return KINDS[self.kind].description

    def to_json(self) -> FindingJson:
        return {"kind": self.kind, "name": self.name, "line": self.line, "message": str(self)}

    def __str__(self) -> str:
        return f"line {self.line}: {KINDS[self.kind].shape.format(name=self.name)} ({self.description})"


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


def _name_shown(name: str) -> str:
    """A finding's name, bounded (a name is never a value, but keep reports small)."""
    return name if len(name) <= 80 else name[:77] + "..."
