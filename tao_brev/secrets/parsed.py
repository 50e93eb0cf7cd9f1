"""A parsed document (a spec's YAML, an override's value) searched for known values: every key
and string a parser decodes, so an escape, a line continuation or a quoting the raw text hides
is still found (:func:`refuse_parsed`: SECRET_IN_COMMAND naming the variable and the key's path,
never the value).
"""

from __future__ import annotations

import bisect
import html
import json
import warnings
from typing import Callable, Mapping
from urllib.parse import unquote

from ..errors import TaoBrevError
from .forms import narrowed
from .names import MIN_VALUE_LENGTH
from .search import index, owners_matcher, redactor
from .values import Registry


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


def find_parsed(data, env: Mapping[str, str] | None = None,
                registry: Registry | None = None) -> list[tuple[str, str, str]]:
    """[(variable name, encoding, path), ...]: where known values occur in the keys and
    strings of a parsed document (:func:`parsed_strings`), never the value. The paths
    are redacted (a key may be a value) and at most 80 characters long."""
    pattern, owners = index(env, registry)
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
    hide = redactor(env, registry)
    hits: list[tuple[str, str, str]] = []
    pattern = narrowed(pattern, owners, joined)
    for m in pattern.finditer(joined) if pattern else ():
        name, how = owners[m.group()]
        path, view, _text = items[bisect.bisect_right(starts, m.start()) - 1]
        how = f"{how}, {view}" if view else how
        shown = hide(path)
        hit = (name, how, shown if len(shown) <= 80 else shown[:77] + "...")
        if hit not in hits:
            hits.append(hit)
    return hits or _decoded_parsed_hits(items, owners_matcher(owners), hide)


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
