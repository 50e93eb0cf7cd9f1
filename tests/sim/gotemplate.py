"""The subset of Go's text/template that ``docker --format`` callers use.

Supported actions: ``{{.}}``, ``{{.A.B}}``, ``{{json .A}}``, ``{{index .A "k"}}``,
``{{.Label "k"}}`` (docker ps), ``{{join .A ","}}``, ``{{upper .A}}``,
``{{lower .A}}``, ``{{println .A}}``, ``{{eq .A "x"}}`` / ``ne`` / ``not`` /
``len``, pipes such as ``{{.A | json}}``, string literals, ``{{-``/``-}}``
whitespace trimming, and the control actions ``{{range .A}}...{{else}}...{{end}}``
(dot becomes each element; a map ranges over its values in key order) and
``{{if X}}...{{else}}...{{end}}`` with Go's truth (false, 0, nil and empty
values are false) - text/template's documented semantics
(https://pkg.go.dev/text/template#hdr-Actions), which ``docker inspect
--format '{{range .Mounts}}{{if eq .Destination "/x"}}{{.Source}}{{end}}{{end}}'``
relies on. Anything else raises :class:`TemplateError`, like a template Docker
could not parse.

Values print the way Go's ``fmt`` prints them (``map[k:v]``, ``[a b]``,
``true``, ``<no value>``); ``json`` escapes ``<``, ``>`` and ``&`` like Go's
encoding/json. A missing map key is an execution error, as with docker inspect
("map has no entry for key").
"""

from __future__ import annotations

import json
import re
import shlex

_ACTION = re.compile(r"{{(-?)(.*?)(-?)}}", re.S)


class TemplateError(Exception):
    """The template could not be parsed or executed."""


def go_json(value: object) -> str:
    """encoding/json.Marshal: compact, HTML characters escaped."""
    text = json.dumps(_plain(value), separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def go_fmt(value: object) -> str:
    """fmt.Sprint of a decoded JSON value."""
    if value is None:
        return "<no value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value)) if abs(value) < 1e6 else f"{value:e}"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(go_fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        items = ((k, v) for k, v in sorted(value.items()) if not callable(v))
        return "map[" + " ".join(f"{k}:{go_fmt(v)}" for k, v in items) + "]"
    return str(value)


def _plain(value: object) -> object:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if not callable(v)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def render(template: str, data: object) -> str:
    """Render ``template`` against ``data`` (dicts/lists from JSON)."""
    nodes, stop = _parse(_tokens(template), 0)
    if stop is not None:
        raise TemplateError(f"template: :1: unexpected {{{{{stop[1]}}}}}")
    out: list[str] = []
    _execute(nodes, data, out)
    return "".join(out)


def _tokens(template: str) -> list[tuple]:
    """[("text", s)] and [("action", expr, col)] with ``{{-``/``-}}`` trimming applied."""
    tokens: list[tuple] = []
    pos = 0
    for match in _ACTION.finditer(template):
        literal = template[pos:match.start()]
        if match.group(1):
            literal = literal.rstrip()
        tokens.append(("text", literal))
        tokens.append(("action", match.group(2).strip(), match.start()))
        pos = match.end()
        if match.group(3):
            rest = template[pos:]
            pos += len(rest) - len(rest.lstrip())
    if "{{" in template[pos:]:
        raise TemplateError('template: :1: unclosed action')
    tokens.append(("text", template[pos:]))
    return tokens


def _parse(tokens: list[tuple], i: int) -> tuple[list, tuple | None]:
    """Nodes up to a closing ``else``/``end`` (returned as the stop token, with the next index)."""
    nodes: list = []
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token[0] == "text":
            nodes.append(token)
            continue
        expr, col = token[1], token[2]
        word = expr.split(None, 1)[0] if expr else ""
        if word in ("end", "else"):
            return nodes, (i, word)
        if word in ("range", "if"):
            body, stop = _parse(tokens, i)
            if stop is None:
                raise TemplateError(f"template: :1: unexpected EOF (unclosed {word})")
            i, kind = stop
            other: list = []
            if kind == "else":
                other, stop = _parse(tokens, i)
                if stop is None or stop[1] != "end":
                    raise TemplateError(f"template: :1: unexpected EOF (unclosed {word})")
                i = stop[0]
            nodes.append((word, expr[len(word):].strip(), col, body, other))
            continue
        nodes.append(("action", expr, col))
    return nodes, None


def _truth(value: object) -> bool:
    return not (value is None or value is False or value == 0 or value in ("", [], {}))


def _execute(nodes: list, data: object, out: list[str]) -> None:
    for node in nodes:
        if node[0] == "text":
            out.append(node[1])
        elif node[0] == "action":
            out.append(go_fmt(_pipeline(node[1], data, node[2])))
        elif node[0] == "if":
            _execute(node[3] if _truth(_pipeline(node[1], data, node[2])) else node[4], data, out)
        else:   # range
            items = _pipeline(node[1], data, node[2])
            if isinstance(items, dict):
                items = [items[k] for k in sorted(items)]
            if not items:
                _execute(node[4], data, out)
                continue
            for item in items:
                _execute(node[3], item, out)


def _pipeline(expr: str, data: object, col: int) -> object:
    if not expr:
        raise TemplateError(f"template: :1:{col}: missing value for command")
    value: object = _NOTHING
    for stage in expr.split("|"):
        value = _command(stage.strip(), data, value, col)
    if isinstance(value, _Raw):
        return value.text
    return value


class _Raw:
    """A function result that must print as-is (json output is already text)."""

    def __init__(self, text: str):
        self.text = text


_NOTHING = object()


def _command(stage: str, data: object, piped: object, col: int) -> object:
    try:
        words = shlex.split(stage, posix=False)
    except ValueError as exc:
        raise TemplateError(f"template: :1:{col}: {exc}") from None
    if not words:
        raise TemplateError(f"template: :1:{col}: missing value for command")
    head, args = words[0], [_arg(w, data, col) for w in words[1:]]
    if piped is not _NOTHING:
        args.append(piped.text if isinstance(piped, _Raw) else piped)
    if head.startswith(".") or head.startswith('"'):
        value = _arg(head, data, col)
        if callable(value):
            return value(*args)
        if args:
            raise TemplateError(f"template: :1:{col}: can't give argument to non-function {head}")
        return value
    func = _FUNCS.get(head)
    if func is None:
        raise TemplateError(f'template: :1: function "{head}" not defined')
    try:
        return func(*args)
    except TypeError:
        raise TemplateError(f"template: :1:{col}: wrong number of args for {head}") from None


def _arg(word: str, data: object, col: int) -> object:
    if word.startswith('"') and word.endswith('"') and len(word) >= 2:
        return json.loads(word)
    if word == ".":
        return data
    if word.startswith("."):
        value = data
        for key in word[1:].split("."):
            if isinstance(value, dict):
                if key not in value:
                    raise TemplateError(
                        f'template: :1:{col + 2}: executing "" at <{word}>: map has no entry for key "{key}"')
                value = value[key]
            else:
                return None
        return value
    if re.fullmatch(r"-?\d+", word):
        return int(word)
    raise TemplateError(f'template: :1: function "{word}" not defined')


def _index(container: object, *keys: object) -> object:
    for key in keys:
        if isinstance(container, dict):
            container = container.get(key)
        elif isinstance(container, list) and isinstance(key, int):
            container = container[key]
        else:
            return None
    return container


_FUNCS = {
    "json": lambda v: _Raw(go_json(v)),
    "index": _index,
    "join": lambda v, sep: sep.join(go_fmt(x) for x in (v or [])),
    "upper": lambda v: go_fmt(v).upper(),
    "lower": lambda v: go_fmt(v).lower(),
    "println": lambda *v: _Raw(" ".join(go_fmt(x) for x in v) + "\n"),
    "print": lambda *v: _Raw("".join(go_fmt(x) for x in v)),
    "title": lambda v: go_fmt(v).title(),
    "eq": lambda a, *others: any(a == b for b in others),
    "ne": lambda a, b: a != b,
    "not": lambda v: not _truth(v),
    "len": lambda v: len(v or ()),
}
