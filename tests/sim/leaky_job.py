"""A job that leaks its credentials the ways red teams found (``simulate: {leak_env: [NAMES]}``).

The TAO stand-in calls :func:`leak` before its first epoch: each value is printed in
every form of :func:`forms` (stdout and stderr), named in a KPI key (``kpi`` and a
loose top-level KPI, as TAO's mmlab loggers write numbers at the top level), past
the 80th character of a KPI string, and in status.json's ``message``. Tests import
:func:`forms` to look for every leaked text in what the bundle prints and stores.
"""

from __future__ import annotations

import base64
import html
import json
import quopri
import re
import sys
from urllib.parse import quote


def _printf_q(value: str) -> str:
    """bash ``printf %q``: every character outside [A-Za-z0-9_./-] after a backslash (printable ASCII)."""
    return "".join(c if re.match(r"[A-Za-z0-9_./-]", c) else "\\" + c for c in value)


def _declare_p(name: str, value: str) -> str:
    """bash ``declare -p``: ``declare -x NAME="..."`` with \\ " $ ` escaped."""
    return f'declare -x {name}="' + re.sub(r'([\\"$`])', r"\\\1", value) + '"'


def _go_json(value: str) -> str:
    """Go's encoding/json: <, >, & as \\u003c \\u003e \\u0026."""
    return json.dumps(value).replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def forms(name: str, value: str) -> dict[str, str]:
    """{form name: the line a leaking job prints}."""
    raw = value.encode()
    wrapped = base64.encodebytes(b"x" * 7 + raw * 3).decode().rstrip("\n")   # MIME: 76 columns, lines of the value
    js = quote(value, safe="-_.!~*'()")
    return {
        "encodeURIComponent": f"fetch?k={js}",
        "printf-q": _printf_q(value),
        "declare-p": _declare_p(name, value),
        "go-json": _go_json(value),
        "json-upper-u": json.dumps(value).replace("\\u00f6", "\\u00F6"),
        "json-3-deep": json.dumps(json.dumps(json.dumps({"cfg": {"k": value}}))),
        "base64-wrapped": wrapped,
        "base64-utf16le": base64.b64encode(value.encode("utf-16-le")).decode(),
        "utf16le-raw": value.encode("utf-16-le").decode("latin-1"),
        "url-twice": quote(quote(value, safe=""), safe=""),
        "html-entities": "".join(f"&#{ord(c)};" if i % 2 else f"&#x{ord(c):X};" for i, c in enumerate(value)),
        "quoted-printable": quopri.encodestring(raw, quotetabs=True).decode().replace("=\n", "=\n"),
        "ansi-inside": f"key: {value[:6]}\x1b[1;31m{value[6:12]}\x1b[0m{value[12:]}",
        "split-lines": f"key: {value[:9]}\n{value[9:]}",
        # a line between the halves, as when stdout and stderr interleave in docker's log
        # (moby daemon/logger/copier.go copies each stream on its own)
        "split-apart": f"key: {value[:9]}\n50%\n{value[9:]}",
        "python-bytes": repr(raw + b"\xff"),
        "hex-colons": ":".join(f"{b:02x}" for b in raw),
        "python-unicode-escape": value.encode("unicode_escape").decode().replace("/", "\\x2f"),
        "html-named": html.escape(value).replace("/", "&sol;"),
        "terminal-title": f"\x1b]0;{value}\x07done",
    }


def leak(names: list[str], env, status) -> None:
    """Print each value of ``names`` in every form, and write it into status.json's KPIs."""
    for name in names:
        value = env.get(name, "")
        if not value:
            continue
        for how, text in forms(name, value).items():
            print(f"[{how}] {text}", flush=True)
            print(f"[{how}] {text}", file=sys.stderr, flush=True)
        status.kpi = {f"acc_{value}": 0.5, "note": "n" * 75 + value}
        status.write(message=f"loaded {quote(value, safe='-_.!~*()')}", **{f"loss_{value}": 0.25})
