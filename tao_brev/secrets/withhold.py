"""Known values in the readings of a text from a job, and the lines that hold them withheld.

:class:`Matcher` finds a known value's forms in a text's readings (:func:`taint.examine`):
whole forms, and for values of more than :data:`PART` characters, any :data:`PART`
consecutive characters of the value in any case (a *part*). A part is what is left where no
whole form is: a value cut by a line cap keeps its end in the line; a value split over two lines
that are not adjacent (a job's stdout and stderr interleaved line by line, as ``docker
logs`` merges them) leaves a half on each. Parts are looked for in what came from a job
only (answers, records, saved logs), never in the user's own input (the spec guard refuses
whole values). :func:`withhold_lines` replaces each line that holds a form or a part with a
note naming the variable, never the value. Pure functions, no I/O.
"""

from __future__ import annotations

from typing import Callable

from .forms import Searcher
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
    canonical value, compared in lower case) count as the value, except a part inside one of
    ``exempt`` (job ids the bundle minted: no secret, ``values.Registry.minted``)."""

    LONG = 1024       # texts from this length on are searched form by form (str.find), not by the regex
    LONG_FORM = 256   # forms longer than this are searched by str.find only, never put in the regex

    def __init__(self, forms: dict[str, object], pattern_of: Callable[[tuple[str, ...]], Searcher | None],
                 parts: dict[str, object] | None = None, exempt: tuple[str, ...] = ()):
        self.owners: dict[str, object] = {}
        for form, owner in forms.items():
            key = canon(form)
            if len(key) >= MIN_FORM:
                self.owners.setdefault(key, owner)
        self._short = tuple(f for f in self.owners if len(f) <= self.LONG_FORM)
        self._pattern = pattern_of(self._short)   # None: no form
        self._long = tuple(f for f in self.owners if len(f) > self.LONG_FORM)
        self.shortest = min(map(len, self.owners), default=0)   # of the whole forms
        self._part_owner: dict[str, object] = {}
        exempt_keys = [canon(other).lower() for other in exempt]
        for value, owner in (parts or {}).items():
            key = canon(value).lower()   # in any case: a part printed upper- or lower-cased
            if len(key) <= PART:   # no longer than a part: the value is a form, no part
                continue
            for i in range(len(key) - PART + 1):
                part = key[i:i + PART]
                if not any(part in other for other in exempt_keys):
                    self._part_owner.setdefault(part, owner)
        self._parts = pattern_of(tuple(sorted(self._part_owner)))   # None: no part
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
            return next((self.owners[form] for form in self._short if form in text), None)
        m = self._pattern.search(text)
        return self.owners[m.group()] if m else None

    def part_in(self, text: str) -> object | None:
        """The owner of the first part of a value ``text`` holds as it is (no reading taken; in any
        case), else None."""
        m = self._parts.search(text.lower()) if self._parts is not None else None
        return self._part_owner[m.group()] if m else None

    def hit(self, text: str) -> tuple[object, str] | None:
        """(owner, how) of the first known value a reading of ``text`` holds: a whole form in any
        reading first, then a part; (:data:`UNCHECKED`, why) when none does but not every reading
        could be examined (fail closed); else None. Runs of base64 and hex are decoded once they
        could spell a part (the shortest form without parts)."""
        if not self.owners or not text or len(text) < self.least:
            return None
        readings, incomplete = examine(text, self.least)
        keys = [(how, canon(reading)) for how, reading in readings]
        for how, key in keys:
            owner = self._in(key)
            if owner is not None:
                return owner, how
        for how, key in keys:
            owner = self.part_in(key)
            if owner is not None:
                return owner, f"{PART} or more of its characters, {how}"
        return None if incomplete is None else (UNCHECKED, incomplete)


def withhold_lines(text: str, matcher: Matcher, note: str = NOTE, needs: Callable[[str], object] | None = None) -> str:
    """``text`` with every line that holds a known value (or a part of one) in some reading
    replaced by a note naming the variable (never the value). A value split over two lines
    withholds both; one spread wider (a wrapped base64 block, a part over lines too short for
    one) withholds its run of lines; if no line or run can be blamed the whole text is
    withheld. Linear: the whole text is checked once, and only a text that hits is checked line
    by line. ``needs(line)`` false: the line alone has no reading but itself (the caller's form
    search covered it), it is not decoded."""
    if matcher.hit(text) is None:
        return text
    lines = text.split("\n")
    out = list(lines)
    for i, line in enumerate(lines):
        found = matcher.hit(line) if needs is None or needs(line) else None
        if found is not None:
            out[i] = note.format(name=found[0], how=found[1])
    if matcher.hit("\n".join(out)) is not None:   # not one line holds it alone
        for i in range(len(out) - 1):
            found = matcher.hit(out[i] + "\n" + out[i + 1])
            if found is not None:
                out[i] = out[i + 1] = note.format(name=found[0], how=found[1] + ", across lines")
        found = matcher.hit("\n".join(out))
        if found is not None:   # spread over a longer run of lines: all of it
            return note.format(name=found[0], how=found[1] + ", across lines")
    return "\n".join(out)
