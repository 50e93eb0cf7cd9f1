"""JSON text exactly as ``json.dumps(obj, indent=2, default=str)`` writes it, several times faster.

With ``indent`` the standard library encodes in pure Python, one generator step per
token; listing 50,000 records spent most of its time there. :func:`dumps` builds the
same text by recursion over the object, with the C string encoder the standard library
uses (``ensure_ascii``), ``int.__repr__``/``float.__repr__`` and NaN/Infinity as it
writes them, ``str(o)`` for anything else (``default=str``). Unlike ``json.dumps`` it does
not detect circular references (JSON read back from files has none).
:func:`encoder` makes a ``dumps`` that writes each string value through a function of the
caller (the streamed listing redacts and encodes each distinct string once, in the same
walk). ``tests/test_json_out.py`` compares both with ``json.dumps`` on generated objects.
"""

from __future__ import annotations

from json.encoder import INFINITY
from json.encoder import encode_basestring_ascii as _string

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_INT = int.__repr__
_FLOAT = float.__repr__


def encoder(string: Callable[[str], str] = _string) -> Callable[..., str]:
    """A ``dumps(obj, level=0)`` that writes every string value and string key (not what
    ``default=str`` made of another object) as ``string(value)``, which returns a JSON string
    literal: the default writes ``json.dumps(obj, indent=2, default=str)``'s text, and
    ``encoder(lambda s: _string(f(s)))`` the text of ``obj`` with each string value ``s``
    replaced by ``f(s)``. ``level`` is the nesting depth of ``obj``."""
    scalars = {**_SCALARS, str: string}
    scalar_of = scalars.get

    def dumps(obj, level: int = 0) -> str:
        scalar = scalar_of(obj.__class__)
        if scalar is not None:
            return scalar(obj)
        if isinstance(obj, str):   # None, True, False and exact str/int/float: the table above
            return string(obj)
        if isinstance(obj, int):
            return _INT(obj)
        if isinstance(obj, float):
            return _float(obj)
        if isinstance(obj, (list, tuple)):
            if not obj:
                return "[]"
            inner = _PAD[level + 1]
            deeper = level + 1
            return ("[" + inner + ("," + inner).join([s(v) if (s := scalar_of(v.__class__)) is not None
                                                      else dumps(v, deeper) for v in obj]) + _PAD[level] + "]")
        if isinstance(obj, dict):
            if not obj:
                return "{}"
            inner = _PAD[level + 1]
            deeper = level + 1
            return ("{" + inner + ("," + inner).join([(string(k) if k.__class__ is str else _key(k)) + ": "
                                                      + (s(v) if (s := scalar_of(v.__class__)) is not None
                                                         else dumps(v, deeper)) for k, v in obj.items()])
                    + _PAD[level] + "}")
        return _string(str(obj))   # default=str: the text of the object as it is

    return dumps


class _Pads(dict):
    def __missing__(self, level: int) -> str:
        self[level] = pad = "\n" + "  " * level
        return pad


_PAD = _Pads()


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == INFINITY:
        return "Infinity"
    if value == -INFINITY:
        return "-Infinity"
    return _FLOAT(value)


# Exact classes only (a subclass of str or int takes the general path, as json does).
_SCALARS = {str: _string, int: _INT, bool: lambda b: "true" if b else "false", type(None): lambda _: "null",
            float: _float}


def _key(key) -> str:
    if isinstance(key, str):
        return _string(key)
    if isinstance(key, float):
        return _string(_float(key))
    if key is True:
        return '"true"'
    if key is False:
        return '"false"'
    if key is None:
        return '"null"'
    if isinstance(key, int):
        return _string(_INT(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


dumps = encoder()
dumps.__doc__ = """``json.dumps(obj, indent=2, default=str)``; ``level`` is the nesting depth of ``obj``."""
