"""What each string of a parsed spec may become once OmegaConf evaluates its interpolations
(as TAO's loader does on the instance), evaluated conservatively: the submit guard checks every
such text for known credential values (``verbs.submit._refuse_interpolated_secrets``), so a value
split across keys and joined by an interpolation is still the value.

:func:`alternatives` is the entry point; the rest is the evaluator. Nothing here knows secrets.
"""

from __future__ import annotations

import re

from .. import yaml_bounded
from ..errors import TaoBrevError
from .parsed import parsed_strings

# OmegaConf's interpolation grammar (omegaconf/grammar/OmegaConfGrammarLexer.g4 and
# OmegaConfGrammarParser.g4, 2.3): ``${key}`` (blanks around the key allowed; dotted, relative
# ``${.a}``/``${..a}``, brackets ``${x[p]}``/``${x['p']}``/``${x[0]}``, keys themselves
# interpolated ``${x.${y}}``), ``${resolver:arg,...}`` (args quoted or bare, each may hold
# interpolations), ``\${`` an escaped, literal ``${``.
_RESOLVER_CALL = re.compile(r"\s*([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*)\s*:(.*)\Z", re.S)
_RESOLVER_HEAD = re.compile(r"\s*[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)*\s*:")
_KEY_PART = re.compile(r"\[\s*(?:'([^']*)'|\"([^\"]*)\"|([^\]]*?))\s*\]|([^.\[\]]+)|(\.)")
MAX_RESOLVED_CHARS = 65536   # an interpolated string is followed no longer than this (x: ${y}${y}, ...)
MAX_ALTERNATIVES = 256       # the texts one string may become (each unknown resolver: with and without it)


def alternatives(scalars: dict, path: tuple, memo: dict) -> list[str]:
    """Every text the string at ``path`` of ``scalars`` ({key segments: scalar text}, see
    :func:`leaves`) may become, at most MAX_ALTERNATIVES (BAD_SPEC beyond). RecursionError
    when interpolations nest deeper than Python can follow (the caller refuses the spec)."""
    return _alternatives(path, scalars, memo, ())


def leaves(node, path: tuple, out: dict) -> None:
    """Every scalar of a parsed spec by its key segments (``('train', 'a')``, ``('parts', '0')``)."""
    if isinstance(node, dict):
        for key, value in node.items():
            leaves(value, path + (str(key),), out)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            leaves(item, path + (str(i),), out)
    elif node is not None:
        out[path] = node if isinstance(node, str) else str(node)


def dotted(path: tuple) -> str:
    return ".".join(path)


def segments(key: str, base: tuple = ()) -> tuple:
    """The key segments of a reference ``key`` written at a node whose parent is ``base``:
    ``a.b``, ``a[0]``, ``a['b']``, ``.b`` (beside the node), ``..b`` (one level up)."""
    key = key.strip()
    dots = len(key) - len(key.lstrip("."))
    parts: list[str] = list(base[:len(base) - (dots - 1)] if dots and dots - 1 <= len(base) else ()) if dots else []
    for m in _KEY_PART.finditer(key[dots:]):
        if m.group(5) is None:
            part = next(g for g in m.groups()[:4] if g is not None)
            parts.append(part.strip())
    return tuple(parts)


def _alternatives(path: tuple, scalars: dict, memo: dict, visiting: tuple) -> list[str]:
    """The texts the string at ``path`` may become once OmegaConf evaluates it (memoised)."""
    if path in memo:
        return memo[path]
    if path not in scalars:
        return []
    if path in visiting or len(visiting) > 16:   # a loop or a chain too deep: OmegaConf fails on it too
        return [scalars[path]]
    outs = _evaluate(scalars[path], path[:-1], scalars, memo, visiting + (path,))
    memo[path] = outs
    return outs


def _evaluate(text: str, base: tuple, scalars: dict, memo: dict, visiting: tuple) -> list[str]:
    """Conservatively, every text ``text`` (a string at a node whose parent is ``base``) may become.

    A reference becomes the referenced string (itself evaluated where it stands); ``oc.select``
    the key's string or its default (literal text, evaluated); ``oc.decode`` its argument read as
    YAML (and as written); ``oc.env`` its default or nothing (the variable itself is read on the
    instance). Any other resolver (TAO's own, unknown ones) is not guessed: its argument text
    stays in place, and is removed, so a value split around it is still joined."""
    results = [""]
    i = 0
    while i < len(text):
        start = text.find("${", i)
        if start < 0:
            results = _join(results, [text[i:]])
            break
        if start > 0 and text[start - 1] == "\\":   # \${ : a literal ${
            results = _join(results, [text[i:start - 1] + "${"])
            i = start + 2
            continue
        end = _closing(text, start + 2)
        results = _join(results, [text[i:start]])
        if end < 0:   # not closed: OmegaConf refuses it; keep the text as it stands
            results = _join(results, [text[start:]])
            break
        results = _join(results, _interpolation(text[start + 2:end], base, scalars, memo, visiting))
        i = end + 1
    return results


def _join(heads: list[str], tails: list[str]) -> list[str]:
    out = list(dict.fromkeys(h + t for h in heads for t in tails if len(h) + len(t) <= MAX_RESOLVED_CHARS))
    if len(out) > MAX_ALTERNATIVES:
        raise TaoBrevError("BAD_SPEC", f"a string of the spec or an override has more than {MAX_ALTERNATIVES} "
                           "possible values once its interpolations are evaluated: it cannot be checked for "
                           "credentials", "Use fewer resolver calls in one string (split it across keys).")
    return out or [""]


def _closing(text: str, i: int) -> int:
    """The index of the ``}`` closing an interpolation whose body starts at ``i``; -1 if none.
    Quotes count only in a resolver's arguments (``${oc.select:a,'}'}``)."""
    calls, quote = [_RESOLVER_HEAD.match(text, i) is not None], ""   # one entry per open ${ or {
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"" and calls[-1]:
            quote = char
        elif text.startswith("${", i):
            calls.append(_RESOLVER_HEAD.match(text, i + 2) is not None)
            i += 1
        elif char == "{":
            calls.append(calls[-1])
        elif char == "}":
            calls.pop()
            if not calls:
                return i
        i += 1
    return -1


def _interpolation(body: str, base: tuple, scalars: dict, memo: dict, visiting: tuple) -> list[str]:
    call = _RESOLVER_CALL.match(body)
    if not call:   # a reference; its key may itself hold interpolations (${x.${y}})
        outs = []
        for key in _evaluate(body, base, scalars, memo, visiting):
            target = segments(key, base)
            outs += _alternatives(target, scalars, memo, visiting) or [""]
        return outs or [""]
    name, args = call.group(1), _arguments(call.group(2), base, scalars, memo, visiting)
    if name == "oc.select":
        outs = []
        for key in args[0] if args else [""]:
            outs += _alternatives(segments(key, base), scalars, memo, visiting)
        return list(dict.fromkeys(outs + [d for default in args[1:2] for d in default] + [""]))
    if name == "oc.decode":
        outs = []
        for arg in args[0] if args else [""]:
            outs += [arg, *_decoded(arg)]
        return list(dict.fromkeys(outs))
    if name == "oc.env":
        return list(dict.fromkeys([d for default in args[1:2] for d in default] + [""]))
    whole = _evaluate(call.group(2), base, scalars, memo, visiting)
    return list(dict.fromkeys([*whole, *(a for arg in args for a in arg), ""]))


def _arguments(text: str, base: tuple, scalars: dict, memo: dict, visiting: tuple) -> list[list[str]]:
    """A resolver's arguments (split at top-level commas, blanks around each dropped, quotes
    removed), each as the texts it may become."""
    args, start, depth, quote, i = [], 0, 0, "", 0
    while i <= len(text):
        char = text[i] if i < len(text) else ","
        if char == "\\" and i + 1 < len(text):
            i += 2
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        elif char == "," and depth <= 0:
            args.append(text[start:i])
            start = i + 1
        i += 1
    out = []
    for arg in args:
        arg = arg.strip()
        if len(arg) >= 2 and arg[0] == arg[-1] and arg[0] in "'\"":   # a quoted string: escapes of its quote
            arg = arg[1:-1].replace("\\" + arg[0], arg[0])
        out.append(_evaluate(arg, base, scalars, memo, visiting))
    return out


def _decoded(text: str) -> list[str]:
    """What ``oc.decode`` makes of ``text``: the YAML it holds, its strings if a collection."""
    try:
        value = yaml_bounded.load(text, "oc.decode argument")
    except TaoBrevError:
        return []
    if isinstance(value, (dict, list)):
        return [t for _p, t in parsed_strings(value)]
    return [] if value is None else [value if isinstance(value, str) else str(value)]
