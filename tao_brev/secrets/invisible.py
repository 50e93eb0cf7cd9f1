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


# The class as ranges, the union over Unicode 13.0-15.1 (Python 3.9-3.13), written out so that an
# import costs nothing (computed over the planes it took ~0.1 s CPU per script);
# tests/test_redact_invisible.py checks that it holds every character :func:`invisible` finds here.
INVISIBLE_RANGES = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x115F, 0x1160), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F), (0xE0100, 0xE01EF),
)


def _class_body() -> str:
    return "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in INVISIBLE_RANGES)


INVISIBLE_CLASS = _class_body()   # a regex character-class body: f"[{INVISIBLE_CLASS}]"
