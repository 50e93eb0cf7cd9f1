"""What counts as a literal value, and the text the rules read: logical lines (backslash
continuations joined, with the way back to the original offsets), the shell word or YAML scalar
after a name, and the test that a value writes credential material into the text (not a
reference such as ``$VAR`` / ``${oc.env:VAR}``, a path, a placeholder or a plain number).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Iterator

from .names import MIN_VALUE_LENGTH

# One shell word: quoted parts, ${...}, $(...) and unquoted runs glued together.
# Unquoted runs stop at blanks, quotes and shell operators, and at a comma that
# starts another NAME= (``--export=ALL,A=1,B=2``); other commas stay in the value.
# Must not run past ``&`` in a URL query.
WORD_RE = re.compile(r"(?:\"(?:[^\"\\]|\\.)*\"|'[^']*'|\$\{[^}]*\}|\$\([^)]*\)"
                     r"|(?:[^\s\"'`;&|<>(),]|,(?![A-Za-z_][\w.]*=))+)+")

# A whole word that is one quoted string: redaction keeps its quotes.
_QUOTED_RE = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'")

# The scalar after a key (see _scalar_after): quoted, a block indicator (| >),
# or plain up to a comment or trailing comma.
_QUOTED_SCALAR_RE = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'")
_COMMENT_RE = re.compile(r"(?:^|\s)#")
BLOCK_INDICATOR_RE = re.compile(r"[|>][-+0-9]*")

# What makes a value NOT literal: $VAR / ${VAR} / ${VAR:-default} / $(cmd)
# references, ${oc.env:VAR[,default]} and other ${...} interpolations,
# {{ templates }}, <placeholders> (<redacted>, <your key>), tokenizer special
# tokens ([PAD], </s>, <|im_end|>), and scalars that are never credentials
# (booleans, nulls, floats, integers of at most four digits).
_REFERENCE_RE = re.compile(r"\$\{(?P<name>[A-Za-z_]\w*)(?:(?P<op>:?[-=+?])(?P<default>[^}]*))?\}"
                           r"|\$\{oc\.env:[^,}]*(?:,(?P<ocdefault>[^}]*))?\}"
                           r"|\$\{[^{}]*\}|\{\{[^{}]*\}\}|\$\([^)]*\)|\$env:\w+|\$\{?[A-Za-z_]\w*\}?"
                           r"|<%=?[^%]*%>|%[A-Za-z_]\w*%|!ENV\b"
                           # code that reads a value at run time: os.environ["X"], os.getenv("X"), ENV.fetch(...)
                           r"|\b[A-Za-z_][\w.]*(?:environ|getenv|env|ENV|secret|secrets|fetch|get|read|load)"
                           r"\s*[(\[][^()\[\]]*[)\]]")
# A file path as a value names where the secret is, not the secret (``GOOGLE_APPLICATION_CREDENTIALS=
# /home/u/key.json``, ``private_key: ~/.ssh/id_rsa``): absolute, ``~/`` or ``./``, at least two
# segments, one of them a lower-case word (random base64 starting with ``/`` has none).
_PATH_VALUE_RE = re.compile(r"[\"']?(?:~|\.{1,2})?/[\w.@-]+(?:/[\w.@-]*)+[\"']?")
_PATH_WORD_RE = re.compile(r"(?:^|[/.])[a-z]{3,}(?=$|[/._-])")
_PLACEHOLDER_RE = re.compile(r"<[A-Za-z][\w .:-]*>|<\|[^|<>]*\|>|</[\w.:-]*>|\[[A-Za-z_]+\]")
_NOT_SECRET_SCALAR_RE = re.compile(r"(?i)true|false|yes|no|on|off|null|none|~|[-+]?\d{1,4}"
                                   r"|[-+]?(?:\d+\.\d*|\.\d+)(?:e[-+]?\d+)?|[-+]?\d+e[-+]?\d+")


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


def _unquote(value: str) -> str:
    return value[1:-1] if _QUOTED_RE.fullmatch(value) else value
