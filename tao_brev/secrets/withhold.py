"""Known values in the readings of a text from a job, and the lines that hold them withheld.

:class:`Matcher` finds a known value's forms in a text's readings (:func:`taint.examine`):
whole forms, and for values of more than :data:`PART` characters, any :data:`PART`
consecutive characters of the value (a *part*). A part is what is left where no whole
form is: a value cut by a line cap keeps its end in the line; a value split over two lines
that are not adjacent (a job's stdout and stderr interleaved line by line, as ``docker
logs`` merges them) leaves a half on each. Parts are looked for in what came from a job
only (answers, records, saved logs), never in the user's own input (the spec guard refuses
whole values). :func:`withhold_lines` replaces each line that holds a form or a part with a
note naming the variable, never the value. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from typing import Callable

from .taint import MIN_FORM, canon, examine

PART = MIN_FORM   # consecutive characters of a longer value that count as the value (8: as short as a value may be)

# The owner of a hit that is no value found but a text not examined whole: it is withheld or
# refused as if it held one (the guarantee rests on certainty, never on a budget).
UNCHECKED = "a credential variable, not ruled out"

NOTE = "[tao-brev: withheld: this line held the value of {name} ({how}); the rest of the output is shown]"


class Matcher:
    """Finds any of ``forms`` ({form: owner}) in a text's canonical views; built once per set of
    known values. ``hit(text)`` -> (owner, how) or None. Linear in the text: a short text goes
    through one regex of all canonical forms, a long one through ``str.find`` per form (C speed,
    linear for long needles); parts through one regex.

    ``parts`` ({value: owner}): values of which any :data:`PART` consecutive characters (of the
    canonical value) count as the value, except a part inside one of ``exempt`` (job ids the bundle
    minted: no secret, ``values.Registry.minted``)."""

    LONG = 1024

    def __init__(self, forms: dict[str, object], pattern_of: Callable[[tuple[str, ...]], re.Pattern | None],
                 parts: dict[str, object] | None = None, exempt: tuple[str, ...] = ()):
        self.owners: dict[str, object] = {}
        for form, owner in forms.items():
            key = canon(form)
            if len(key) >= MIN_FORM:
                self.owners.setdefault(key, owner)
        ordered = tuple(sorted(self.owners, key=lambda f: (-len(f), f)))
        short = tuple(f for f in ordered if len(f) <= 256)
        self._pattern = pattern_of(short) if short else None
        self._long = tuple(f for f in ordered if len(f) > 256)
        self.shortest = min(map(len, self.owners)) if self.owners else 0   # of the whole forms
        self._part_owner: dict[str, object] = {}
        for value, owner in (parts or {}).items():
            key = canon(value)
            for i in range(len(key) - PART + 1) if len(key) > PART else ():
                part = key[i:i + PART]
                if not any(part in canon(other) for other in exempt):
                    self._part_owner.setdefault(part, owner)
        self._parts = pattern_of(tuple(sorted(self._part_owner))) if self._part_owner else None
        self.least = min(self.shortest, PART) if self._part_owner else self.shortest   # shortest text that can hit

    def _in(self, text: str) -> object | None:
        if len(text) < self.shortest:
            return None
        for form in self._long:
            if form in text:
                return self.owners[form]
        if self._pattern is None:
            return None
        if len(text) >= self.LONG:
            for form in self.owners:
                if len(form) <= 256 and form in text:
                    return self.owners[form]
            return None
        m = self._pattern.search(text)
        return self.owners[m.group()] if m else None

    def part_in(self, text: str) -> object | None:
        """The owner of the first part of a value ``text`` holds as it is (no reading taken), else None."""
        m = self._parts.search(text) if self._parts is not None else None
        return self._part_owner[m.group()] if m else None

    def hit(self, text: str, parts: bool = True) -> tuple[object, str] | None:
        """(owner, how) of the first known value a reading of ``text`` holds (a whole form in any
        reading first, then, with ``parts``, a part); (:data:`UNCHECKED`, why) when none does but not
        every reading could be examined (fail closed); else None."""
        whole, part = self.hits(text, parts)
        return whole or part

    def hits(self, text: str, parts: bool = True) -> tuple[tuple[object, str] | None, tuple[object, str] | None]:
        """(whole, part): :meth:`hit` of the whole forms (or :data:`UNCHECKED`), and of the parts
        (None without ``parts`` or when a whole form hit), from one examination of ``text``."""
        if not self.owners or not text or len(text) < (self.least if parts else self.shortest):
            return None, None
        # base64 and hex runs are decoded where they could spell a whole form (the same runs, and
        # so the same caps, with or without parts); a reading as short as a part is kept
        readings, incomplete = examine(text, self.shortest, self.least if parts else self.shortest)
        keys = [(how, canon(reading)) for how, reading in readings]
        for how, key in keys:
            owner = self._in(key)
            if owner is not None:
                return (owner, how), None
        for how, key in keys if parts else ():
            owner = self.part_in(key)
            if owner is not None:
                return None, (owner, f"{PART} or more of its characters, {how}")
        return (None if incomplete is None else (UNCHECKED, incomplete)), None


def withhold_lines(text: str, matcher: Matcher, note: str = NOTE, needs: Callable[[str], object] | None = None) -> str:
    """``text`` with every line that holds a known value in some reading replaced by a note
    naming the variable (never the value). A value split over two lines withholds both; one
    spread wider (a wrapped base64 block) withholds its run of lines; if no line or run can
    be blamed the whole text is withheld. Then each line left that holds a part of a value
    (:data:`PART` characters, in one line's reading) is withheld. Linear: the whole text is
    checked once, and only a text that hits is checked line by line. ``needs(line)`` false: the
    line alone has no reading but itself (the caller's form search covered it), it is not decoded."""
    if matcher.hit(text) is None:
        return text
    lines = text.split("\n")
    out = list(lines)
    part_hits = {}
    for i, line in enumerate(lines):
        whole, part = matcher.hits(line) if needs is None or needs(line) else (None, None)
        if whole is not None:
            out[i] = note.format(name=whole[0], how=whole[1])
        elif part is not None:
            part_hits[i] = part
    if len(lines) > 1 and matcher.hit("\n".join(out), parts=False) is not None:
        for i in range(len(out) - 1):
            found = matcher.hit(out[i] + "\n" + out[i + 1], parts=False)
            if found is not None:
                out[i] = out[i + 1] = note.format(name=found[0], how=found[1] + ", across lines")
        found = matcher.hit("\n".join(out), parts=False)
        if found is not None:   # spread over a longer run of lines: all of it
            return note.format(name=found[0], how=found[1] + ", across lines")
    for i, part in part_hits.items():   # what is left of a value the lines above did not hold whole
        if out[i] == lines[i]:
            out[i] = note.format(name=part[0], how=part[1])
    return "\n".join(out)
