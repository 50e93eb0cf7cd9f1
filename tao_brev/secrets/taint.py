"""Text from a job or an instance is tainted until checked: the normaliser behind the guarantee.

``secrets.search`` finds each known value in the forms it computes from the value
(verbatim, URL-, JSON-, base64-, hex-encoded...). A job may write a value in a form
that list does not hold (``printf %q``, ``encodeURIComponent``, JSON nested three
deep, base64 wrapped at 76 columns or of UTF-16LE, HTML entities, quoted-printable,
colour codes inside it, split over two lines). This module goes the other way: it
DECODES the text, one layer of each common encoding and the layers below it, and
searches each reading (a *view*) for every form of every known value, with
whitespace, quotes, backslashes and control characters dropped on both sides.

Decoders (each linear in the text's length; at most :data:`MAX_VIEWS` views, each at
most :data:`MAX_VIEW_CHARS` characters, so the whole check is linear). A text whose readings
exceed a cap (too many, too long, escapes nested deeper than :data:`MAX_BACKSLASH_DEPTH`) is
not passed: :meth:`Matcher.hit` answers :data:`UNCHECKED` and the caller withholds or refuses
it (fail closed):

* terminal escapes (CSI, OSC, DCS, single-character ESC sequences, C1 controls) removed;
* lines joined where a token is broken (newline and indentation dropped);
* URL percent-escapes (``%41``, ``+`` for blank, ``%u0041``), once and twice;
* backslash escapes of any case and depth (JSON/Go ``\\u00F6`` ``\\u0026``, Python
  ``\\x41`` ``\\101`` ``\\U0001F600``, JS ``\\u{41}``, shell ``\\ ``, ``$'...'``), repeated
  until none is left (JSON inside JSON inside JSON); a Python bytes repr read as UTF-8;
* HTML entities (named, decimal, hex), twice;
* quoted-printable (``=41``, soft line breaks ``=\\n``);
* base64 and base64url runs (padded or not, wrapped or not, at each of the 4 offsets),
  read as UTF-8, UTF-16LE and Latin-1;
* hex runs, separated or not (``de:ad:be:ef``, ``0x41,0x42``, ``41 42``), and decimal
  byte lists (``[118, 97, ...]``), read the same ways;
* Unicode compatibility forms (NFKC: full-width letters), and the text without combining
  marks (a value underlined, struck through or enclosed mark by mark).

A hit says only that the text holds a known value in some reading; the caller
withholds the line it came from (``withhold.withhold_lines``). Pure functions, no I/O.
"""

from __future__ import annotations

import base64
import html
import re
import unicodedata
from typing import Callable, Iterable
from urllib.parse import unquote, unquote_plus

from .invisible import INVISIBLE_CLASS


MAX_VIEWS = 256                # readings of one text, at most (more: the text is withheld)
MAX_VIEW_CHARS = 1 << 20       # characters of one reading (1 MiB), at most (more: withheld)
MAX_BACKSLASH_DEPTH = 8        # JSON inside JSON ..., layers decoded
MIN_FORM = 8                   # names.MIN_VALUE_LENGTH

# ECMA-48: CSI ... final byte, OSC ... BEL/ST, DCS/SOS/PM/APC ... ST, two-byte ESC sequences, C1 CSI.
_TERMINAL_RE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]?|\x9b[0-?]*[ -/]*[@-~]?|\x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
                               r"|\x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?|\x1b[ -/]*[0-~]?")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")

# What the comparison ignores on both sides: blanks, line breaks, quotes, backslashes, controls,
# invisible characters (:mod:`.invisible`: format characters, variation selectors, ... by property).
_IGNORED_RE = re.compile(r"[\s'\"`\\\x00-\x1f\x7f-\x9f\u2028\u2029" + INVISIBLE_CLASS + "]+")
_BREAK_RE = re.compile(r"\\?\r?\n[ \t]*")
# A line break with the next line's comment marker (YAML/shell ``#``, C ``//``, SQL ``--``, ``;``, ``*``, ``>``):
# a value wrapped over comment lines.
_COMMENT_BREAK_RE = re.compile(r"\\?\r?\n[ \t]*(?:#+|//+|--|;+|\*+|>+)?[ \t]*")
_BACKSLASH_RE = re.compile(r"\\(?:[uUxX]\{([0-9a-fA-F]{1,6})\}|[uU]\+?([0-9a-fA-F]{4})(?![0-9a-fA-F]{4})|U([0-9a-fA-F]{8})"
                                r"|u([0-9a-fA-F]{4})|[xX]([0-9a-fA-F]{1,2})|([0-7]{1,3})|(.))", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "a": "\a", "0": "\0", "e": "\x1b"}
_PERCENT_U_RE = re.compile(r"%[uU]([0-9a-fA-F]{4})")
# Combining marks a value can be interleaved with and still read (underlined, struck through,
# enclosed): the Unicode blocks of combining diacritical marks (for letters, extended, supplement,
# for symbols, half marks), and the braille blank, which shows as a blank but is none.
_MARKS_RE = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f\u2800]+")
_CODE_POINT_RE = re.compile(r"(?<![A-Za-z0-9])[uU]\+([0-9a-fA-F]{4,6})\s*")   # U+0041 (Unicode's own notation)
_QP_RE = re.compile(rb"=([0-9A-Fa-f]{2})")
_QP_SOFT_RE = re.compile(r"=\r?\n")
_B64_RUN_RE = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")
# A stretch of hex digits, separators and 0x / \\x prefixes (no backtracking: one pass); its digits
# are read at both nibble offsets.
_HEX_RUN_RE = re.compile(r"[0-9a-fA-FxX\\\s:.,;_-]{16,}")
_HEX_SEP_RE = re.compile(r"0[xX]|\\[xX]|[^0-9a-fA-F]")
_DEC_LIST_RE = re.compile(r"\b\d{1,3}(?:\s*[,;]\s*\d{1,3}){7,}\b")


def strip_terminal(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (tab and line
    breaks kept): what a terminal would not show as text. Linear."""
    if "\x1b" in text or "\x9b" in text:
        text = _TERMINAL_RE.sub("", text)
    return _CONTROL_RE.sub("", text)


def backspaced(text: str) -> str:
    """``text`` as a terminal shows it after its backspaces (``x\\b`` erases ``x``). Linear."""
    out: list[str] = []
    for char in text:
        if char == "\b":
            if out and out[-1] != "\n":
                out.pop()
        else:
            out.append(char)
    return "".join(out)


def canon(text: str) -> str:
    """``text`` as compared: blanks, line breaks, quotes, backslashes, controls (ESC and BEL
    too: what is left of an escape sequence stays) and invisible characters (:mod:`.invisible`) dropped."""
    return _IGNORED_RE.sub("", text)


def _chr(hexes: str) -> str:
    try:
        return chr(int(hexes, 16))
    except (ValueError, OverflowError):
        return ""


def _backslash_once(text: str) -> str:
    def one(m: re.Match) -> str:
        hexes = m.group(1) or m.group(2) or m.group(3) or m.group(4)
        try:
            if hexes:
                return chr(int(hexes, 16))
            if m.group(5):
                return chr(int(m.group(5), 16))
            if m.group(6):
                return chr(int(m.group(6), 8))
        except (ValueError, OverflowError):
            return ""
        char = m.group(7)
        return _SIMPLE.get(char, char)

    out = _BACKSLASH_RE.sub(one, text)
    if any("\ud800" <= c <= "\udfff" for c in out):   # JSON's surrogate pairs (\ud83d\ude00)
        out = out.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return out


def _backslashes(text: str) -> tuple[list[str], bool]:
    """(each layer of backslash escapes decoded, outermost first (JSON nested N deep: N layers),
    True when no layer is left undecoded: False when :data:`MAX_BACKSLASH_DEPTH` layers were
    decoded and one more would still change the text)."""
    layers: list[str] = []
    for _ in range(MAX_BACKSLASH_DEPTH):
        if "\\" not in text:
            return layers, True
        decoded = _backslash_once(text)
        if decoded == text:   # only a lone trailing backslash: nothing more to decode
            return layers, True
        text = decoded
        layers.append(text)
        latin = _as_bytes_repr(text)
        if latin is not None:
            layers.append(latin)
    return layers, "\\" not in text or _backslash_once(text) == text


def _as_bytes_repr(text: str) -> str | None:
    """A Python bytes repr's ``\\xc3\\xb6`` decoded as characters, read again as the UTF-8 bytes they were."""
    if not any("\x80" <= c <= "\xff" for c in text) or any(c > "\xff" for c in text):
        return None
    return text.encode("latin-1").decode("utf-8", "ignore")


_SEP = "\ufffd"   # between the readings of separate runs: never dropped by canon, never in a value


def _readings(chunks: list[bytes]) -> list[str]:
    """What byte strings may spell, each way joined into one reading: UTF-8, UTF-16LE (both
    byte offsets), Latin-1."""
    if not chunks:
        return []
    out = [_SEP.join(c.decode("utf-8", "ignore") for c in chunks),
           _SEP.join(c.decode("utf-16-le", "ignore") for c in chunks),
           _SEP.join(c[1:].decode("utf-16-le", "ignore") for c in chunks)]
    if not all(c.isascii() for c in chunks):   # every byte of every chunk looked at, never a prefix
        out.append(_SEP.join(c.decode("latin-1") for c in chunks))
    return out


def _base64_runs(text: str, shortest: int = MIN_FORM) -> list[str]:
    """Readings of the base64 runs of ``text`` long enough to spell ``shortest`` characters."""
    chunks, least = [], max(12, -(-4 * shortest // 3))
    for m in _B64_RUN_RE.finditer(text):
        if m.end() - m.start() < least:
            continue
        run = m.group().rstrip("=").replace("-", "+").replace("_", "/")
        for skip in range(4):
            part = run[skip:]
            if len(part) % 4 == 1:
                part = part[:-1]
            if len(part) >= 12:   # only alphabet characters: padded, it always decodes
                chunks.append(base64.b64decode(part + "=" * (-len(part) % 4)))
    return _readings(chunks)


def _hex_runs(text: str, shortest: int = MIN_FORM) -> list[str]:
    """Readings of the hex runs and decimal byte lists of ``text`` (at least ``shortest`` bytes)."""
    chunks = []
    for m in _HEX_RUN_RE.finditer(text):
        digits = _HEX_SEP_RE.sub("", m.group())
        if len(digits) < 2 * shortest:
            continue
        for skip in (0, 1):
            part = digits[skip:]
            chunks.append(bytes.fromhex(part[:len(part) // 2 * 2]))
    for m in _DEC_LIST_RE.finditer(text) if text.count(",") + text.count(";") >= 7 else ():
        run: list[int] = []   # a number above 255 ends a run of bytes, never hides the list
        for number in [int(n) for n in re.findall(r"\d+", m.group())] + [256]:
            if number < 256:
                run.append(number)
                continue
            if len(run) >= shortest:
                chunks.append(bytes(run))
            run = []
    return _readings(chunks)


def _quoted_printable(text: str) -> str | None:
    if "=" not in text:
        return None
    raw = _QP_SOFT_RE.sub("", text).encode("utf-8", "surrogateescape")
    return _QP_RE.sub(lambda m: bytes([int(m.group(1), 16)]), raw).decode("utf-8", "ignore")


def _decoders(text: str, shortest: int = MIN_FORM) -> Iterable[tuple[str, str | None]]:
    """(how, reading) one layer down from ``text``; ``shortest``: the length of the shortest text
    searched for (shorter base64 and hex runs cannot spell it)."""
    if "%" in text:
        yield "URL-decoded", unquote(_PERCENT_U_RE.sub(lambda m: chr(int(m.group(1), 16)), text))
        if "+" in text:
            yield "URL-decoded", unquote_plus(text)
    if "\\" in text:
        layers, complete = _backslashes(text)
        for layer in layers:
            yield "escapes decoded", layer
        if not complete:
            yield "escapes nested deeper than the check decodes", None
    if "&" in text:
        yield "HTML-decoded", html.unescape(text)
    if "+" in text and _CODE_POINT_RE.search(text):
        yield "code points decoded", _CODE_POINT_RE.sub(lambda m: _chr(m.group(1)), text)
    qp = _quoted_printable(text)
    if qp is not None and qp != text:
        yield "quoted-printable decoded", qp
    for reading in _base64_runs(text, shortest):
        yield "base64-decoded", reading
    for reading in _hex_runs(text, shortest):
        yield "hex-decoded", reading
    if not text.isascii():
        yield "NFKC", unicodedata.normalize("NFKC", text)
        if _MARKS_RE.search(text):
            yield "combining marks dropped", _MARKS_RE.sub("", text)


_FIRST_VIEWS = ("as written", "lines joined", "inside terminal escapes", "backspaces applied")


def views(text: str, shortest: int = MIN_FORM) -> list[tuple[str, str]]:
    """[(how, reading), ...] of ``text`` (:func:`examine`'s readings)."""
    return examine(text, shortest)[0]


def examine(text: str, shortest: int = MIN_FORM) -> tuple[list[tuple[str, str]], str | None]:
    """([(how, reading), ...], why not all): the readings of ``text``: itself with terminal
    escapes removed, its lines joined, and each decoder's reading, two layers deep (``%2541`` ->
    ``%41`` -> ``A``; base64 of a URL-encoded value), at most :data:`MAX_VIEWS`, each at most
    :data:`MAX_VIEW_CHARS`. ``why not all`` is None when every reading the decoders give was
    listed, else why one was not (too many, too long, escapes nested too deep): the caller
    withholds or refuses the text (fail closed), it never passes one it could not examine whole.
    ``shortest``: the shortest text searched for (a decoded reading, or a base64 or hex run, that
    cannot spell it is left out)."""
    if len(text) > MAX_VIEW_CHARS:
        return [("as written", text[:MAX_VIEW_CHARS])], f"longer than the {MAX_VIEW_CHARS} characters the check reads"
    first = strip_terminal(text)
    seen = {first}
    out = [("as written", first)]
    if first != text:   # a value inside an escape sequence (an OSC window title)
        seen.add(text)
        out.append(("inside terminal escapes", text))
    if "\b" in text:   # what a terminal shows once the backspaces erased what they follow
        shown = strip_terminal(backspaced(text))
        if shown not in seen:
            seen.add(shown)
            out.append(("backspaces applied", shown))
    for joined in (_BREAK_RE.sub("", first), _COMMENT_BREAK_RE.sub("", first)):
        if joined not in seen:
            seen.add(joined)
            out.append(("lines joined", joined))
    level = list(out)
    for _depth in range(2):
        below = []
        for how, reading in level:
            for step, decoded in _decoders(reading, shortest):
                if decoded is None:
                    return out, step
                decoded = strip_terminal(decoded)
                if len(decoded) < shortest or decoded in seen:
                    continue
                if len(decoded) > MAX_VIEW_CHARS:
                    return out, f"a reading longer than the {MAX_VIEW_CHARS} characters the check reads"
                if len(out) >= MAX_VIEWS:
                    return out, f"more than the {MAX_VIEWS} readings the check examines"
                seen.add(decoded)
                item = (step if how in _FIRST_VIEWS else f"{how}, {step}",
                        decoded)
                out.append(item)
                below.append(item)
        level = below
    return out, None
