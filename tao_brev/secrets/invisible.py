"""The characters a text may hold without showing them, by Unicode property (never a hand list).

A value with one of them inside (``Kq7W\\u00adm2Zt``) shows on a terminal, in a log and in a
spec as the value itself: the comparison in :mod:`.taint` drops them on both sides. The class:
every format character (category Cf: soft hyphen, zero-width space/joiners, word joiner,
invisible operators, Arabic letter mark, bidi embeddings/overrides/isolates, BOM, interlinear
annotation, tags, ...), every variation selector (``VARIATION SELECTOR-n`` and the Mongolian
free variation selectors, category Mn), the combining grapheme joiner (Mn) and the Hangul
fillers (Lo, shown as nothing). Planes 0, 1 and 14 hold all of them (Unicode 15)."""

from __future__ import annotations

import re
import unicodedata

_PLANES = (range(0x20000), range(0xE0000, 0xE1000))


def invisible(char: str) -> bool:
    """True for a character of the class above."""
    category = unicodedata.category(char)
    if category == "Cf":
        return True
    if category not in ("Mn", "Lo"):
        return False
    name = unicodedata.name(char, "")
    return ("VARIATION SELECTOR" in name or name == "COMBINING GRAPHEME JOINER"
            or ("HANGUL" in name and name.endswith("FILLER")))


def _class_body() -> str:
    ranges: list[list[int]] = []
    for plane in _PLANES:
        for cp in plane:
            if invisible(chr(cp)):
                if ranges and ranges[-1][1] == cp - 1:
                    ranges[-1][1] = cp
                else:
                    ranges.append([cp, cp])
    return "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges)


INVISIBLE_CLASS = _class_body()   # a regex character-class body: f"[{INVISIBLE_CLASS}]"
