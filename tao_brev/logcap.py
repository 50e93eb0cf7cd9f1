"""Bounded logs: what an answer (or a saved log) may hold of a job's output.

A job can print one 8 MiB tqdm line (carriage-return updates, no newline) or a
40 KiB line; an agent's tool window holds a few KiB. Every log an answer
carries, and every log saved at teardown, passes through the same caps:

* a carriage-return progress line is collapsed to its last state (the text
  after its last ``\\r``: what a terminal shows);
* each line keeps its END, at most :data:`LINE_BYTES` bytes, behind a marker
  ``[tao-brev: N bytes cut] `` (a traceback's last words and a progress bar's
  last state are at the end);
* the whole log keeps its LAST lines within :data:`LOG_BYTES` (saved logs:
  :data:`SAVED_LOG_BYTES`), behind a first line saying how many earlier lines
  were left out and where the full log is.

The cutting happens twice. On the instance (:func:`remote_filter`, an ``awk``
filter in the same round trip, byte-wise in the C locale) so that an 8 MiB line
never crosses the network; and here (:func:`bound`), as the guarantee, whatever
arrived. Both count UTF-8 bytes and cut on character boundaries: a kept end
starts after any continuation byte (0x80-0xBF), so no character is split (it
would come back as U+FFFD). Both are linear in the input; :func:`bound` walks the text from its end
and copies only what it keeps (plus a margin), never a whole long line.

Secrets and cuts: a known secret value (``known_secrets``, every encoding) that
straddles a cut would leave a partial value behind, which redaction (whole
values only) cannot recognise. Where this process cuts, it redacts first (the
kept end plus a margin as long as the longest known form, so every value that
reaches into the kept end is whole in what is redacted); where the instance cut
(it knows no secrets), the kept text is stripped of the longest suffix of any
known form it starts with (:func:`strip_partial_prefix`) before it is redacted;
what is left of a value in a form not known here withholds the line
(``secrets.withhold.PART``). The one cut edge is a line's start: the end of a
kept line, and whole dropped lines, cut nothing.
"""

from __future__ import annotations

import copy
import json
import shlex
from dataclasses import dataclass, field
from typing import Optional, TypedDict

from .model.answer_types import AnswerCut, LogsCut
from .secrets import guard as known_secrets
from .secrets import redact

LINE_BYTES = 2048            # each log line keeps at most its last 2 KiB
LOG_BYTES = 32 * 1024        # the logs of one answer: the last lines within 32 KiB
SAVED_LOG_BYTES = 256 * 1024  # a log saved at teardown ($TAO_STATE_DIR/brev/logs/<id>.log)
ANSWER_BYTES = 64 * 1024     # a whole JSON answer (cli.emit), --all included
CUT_MARK = "[tao-brev: {n} bytes cut] "
LogsPart = TypedDict("LogsPart", {"logs": Optional[str], "logs_cut": LogsCut}, total=False)   # Bounded.answer


@dataclass
class Cut:
    """What :func:`bound` left out (the answer's ``logs_cut``)."""

    lines: int = 0                # lines kept
    lines_dropped: int = 0        # earlier lines left out (total cap, on the instance or here)
    lines_cut: int = 0            # kept lines whose start was cut (line cap)
    bytes_cut: int = 0            # bytes left out of kept lines (line cap)
    progress_collapsed: int = 0   # lines that were carriage-return progress (last state kept)
    notes: list = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.lines_dropped or self.lines_cut)

    def to_json(self, full_log: str | None) -> LogsCut:
        return {"lines": self.lines, "lines_dropped": self.lines_dropped, "lines_cut": self.lines_cut,
                "bytes_cut": self.bytes_cut, "line_bytes": LINE_BYTES, "full_log": full_log}


# awk (byte-wise, LC_ALL=C) snippets that move a cut of ``line`` onto a UTF-8 character boundary:
# a kept END starting at byte s skips continuation bytes (0x80-0xBF); a kept START of e bytes gives
# back the bytes of a character that byte e+1 continues. Octal escapes in a bracket expression,
# byte-wise in the C locale (mawk 1.3.4, gawk 5.2.1, busybox 1.35).
_AWK_CHAR_START = 'while (s <= n && substr(line, s, 1) ~ /^[\\200-\\277]$/) s++; '
_AWK_CHAR_END = 'while (e > 0 && substr(line, e + 1, 1) ~ /^[\\200-\\277]$/) e--; '


def remote_tail_bytes(limit) -> str:
    """A pipeline stage for the instance: the last ``limit`` bytes of its input (``tail -c``), the
    first kept line starting on a UTF-8 character (the bytes of a character cut in two are left out
    too, so at most 3 fewer). ``limit``: a number, or a shell word such as ``"$3"`` (inside a
    function). Every output line ends with a newline."""
    word = str(int(limit)) if isinstance(limit, int) else limit
    program = ('{ line = $0 } NR == 1 { n = length(line); s = 1; ' + _AWK_CHAR_START
               + 'line = substr(line, s) } { print line }')
    return f"tail -c {word} | LC_ALL=C awk {shlex.quote(program)}"


def remote_head_bytes(limit: int) -> str:
    """A pipeline stage for the instance: the first ``limit`` bytes of its input (``head -c``),
    ending on a UTF-8 character (a character cut in two is left out whole). Lines kept whole end
    with a newline; a cut line does not."""
    program = ('{ line = $0; n = length(line) + 1 } used + n <= max { print line; used += n; next }\n'
               '{ e = max - used; if (e > 0) { ' + _AWK_CHAR_END + 'printf "%s", substr(line, 1, e) }; exit }')
    return f"LC_ALL=C awk -v max={int(limit)} {shlex.quote(program)}"


def remote_filter(token: str, line_bytes: int = LINE_BYTES, total_bytes: int = LOG_BYTES) -> str:
    """An ``awk`` program for the instance, reading ``command 2>&1; printf '%s' "<token>:rc:$?"``:
    collapse ``\\r`` progress, keep each line's last ``line_bytes`` bytes (``<token>:cut:N <end>``),
    keep the last lines within ``total_bytes`` (``<token>:dropped:N`` first), exit with the
    command's status. Byte-wise (``LC_ALL=C``); memory: one input line plus the kept ones."""
    program = (
        '{ line = $0 }\n'
        'match(line, tok ":rc:[0-9]+$") { rc = substr(line, RSTART + length(tok) + 4) + 0; '
        'line = substr(line, 1, RSTART - 1); if (line == "") next }\n'
        '{ sub(/\\r+$/, "", line); sub(/.*\\r/, "", line) }\n'
        '{ n = length(line); if (n > max) { s = n - max + 1; '
        + _AWK_CHAR_START +   # the kept end starts on a character
        'line = tok ":cut:" (s - 1) " " substr(line, s) } '
        'kept[++count] = line }\n'
        'END { used = 0; first = count + 1\n'
        '  while (first > 1 && used + length(kept[first - 1]) + 1 <= total) { first--; used += length(kept[first]) + 1 }\n'
        '  if (first > 1) print tok ":dropped:" (first - 1)\n'
        '  for (i = first; i <= count; i++) print kept[i]\n'
        '  exit rc }')
    return (f"LC_ALL=C awk -v tok={shlex.quote(token)} -v max={int(line_bytes)} -v total={int(total_bytes)} "
            f"{shlex.quote(program)}")


def remote_command(command: str, token: str, line_bytes: int = LINE_BYTES, total_bytes: int = LOG_BYTES) -> str:
    """``command`` (e.g. ``docker logs --tail N ID``) with its output bounded on the instance;
    the exit status is the command's (carried through the pipe as ``<token>:rc:N``)."""
    return (f"{{ {{ {command}\n}} 2>&1; printf '%s' \"{token}:rc:$?\"; }} | "
            f"{remote_filter(token, line_bytes, total_bytes)}")


def remote_head(command: str, token: str, keep_bytes: int = 1024) -> str:
    """``command``'s output with each line cut to its first ``keep_bytes`` bytes on the instance
    (for a line read from its start: ``docker logs --timestamps``); the command's exit status."""
    program = ('{ line = $0 }\n'
               'match(line, tok ":rc:[0-9]+$") { rc = substr(line, RSTART + length(tok) + 4) + 0; '
               'line = substr(line, 1, RSTART - 1); if (line == "") next }\n'
               # the kept start ends on a character: no UTF-8 continuation byte right after it
               '{ e = max; if (length(line) > e) ' + _AWK_CHAR_END +
               'print substr(line, 1, e) }\n'
               'END { exit rc }')
    return (f"{{ {{ {command}\n}} 2>&1; printf '%s' \"{token}:rc:$?\"; }} | LC_ALL=C awk -v tok={shlex.quote(token)} "
            f"-v max={int(keep_bytes)} {shlex.quote(program)}")


def _forms() -> tuple[str, ...]:
    forms = []
    for value, name in known_secrets.values().items():
        forms += [form for form, _how in known_secrets.encodings(value, name)]
    return tuple(forms)


def strip_partial_prefix(text: str, forms: tuple[str, ...] | None = None) -> str:
    """``text`` (which starts at a cut) without the longest suffix of a known secret form it
    starts with: no part of a value cut in two survives at the edge."""
    forms = _forms() if forms is None else forms
    longest = 0
    for form in forms:
        for k in range(min(len(form) - 1, len(text)), longest, -1):
            if text.startswith(form[-k:]):
                longest = k
                break
    return text[longest:]


def redacted(text: str) -> str:
    """``text`` redacted (known values in every encoding, then literal credentials): what a cut may
    then shorten without leaving part of a secret."""
    return redact.redact_values(redact.redact(text))


@dataclass
class Bounded:
    """A bounded log (:func:`bound`) and what was cut from it."""

    text: str | None
    cut: Cut

    def answer(self, full_log: str | None) -> LogsPart:
        """The answer's ``logs`` (and ``logs_cut`` when anything was cut, saying where the full log is)."""
        out: LogsPart = {"logs": self.text}
        if self.cut.any:
            out["logs_cut"] = self.cut.to_json(full_log)
        return out


def bound(text: str | None, *, lines: int | None = None, line_bytes: int = LINE_BYTES,
          total_bytes: int = LOG_BYTES, token: str | None = None) -> tuple[str | None, Cut]:
    """(the last ``lines`` lines of ``text`` within the caps, what was cut). ``token``: the
    instance filter's token (its markers are read, its cuts stripped of partial secrets).
    Linear: walks from the end and copies only what is kept (plus a redaction margin)."""
    cut = Cut()
    if text is None:
        return None, cut
    forms = _forms()
    margin = max((len(f) for f in forms), default=0)
    kept: list[str] = []
    used = 0
    end = len(text)
    if text.endswith("\n"):
        end -= 1
    cut_tag = f"{token}:cut:" if token else None
    drop_tag = f"{token}:dropped:" if token else None
    while end >= 0 and (lines is None or len(kept) < lines):
        start = text.rfind("\n", 0, end) + 1
        if drop_tag and text.startswith(drop_tag, start):
            cut.lines_dropped += int(text[start + len(drop_tag):end].strip() or 0)
            end = start - 1
            continue
        piece = _line(text, start, end, line_bytes, margin, cut_tag, cut, forms)
        size = len(piece.encode("utf-8", "surrogatepass")) + 1
        if used + size > total_bytes and kept:
            earlier = text.count("\n", 0, start)
            if drop_tag and text.startswith(drop_tag):   # the instance's own count of what it left out
                first = text.find("\n")
                cut.lines_dropped += int(text[len(drop_tag):first].strip() or 0) - 1
            cut.lines_dropped += 1 + earlier
            break
        kept.append(piece)
        used += size
        end = start - 1
        if start == 0:
            break
    kept.reverse()
    cut.lines = len(kept)
    if cut.lines_dropped:
        kept.insert(0, f"[tao-brev: {cut.lines_dropped} earlier line(s) not shown: the log is capped at "
                       f"{total_bytes // 1024} KiB]")
    return "\n".join(kept), cut


def _line(text: str, start: int, end: int, line_bytes: int, margin: int, cut_tag: str | None, cut: Cut,
          forms: tuple[str, ...]) -> str:
    """One kept line: the instance's cut marker read, the line redacted AS RECEIVED (a value split
    by ``\r``, a backspace or an escape is whole only there), then progress collapsed and the line
    cap applied, the kept edge stripped of any partial form."""
    remote_cut = 0
    if cut_tag and text.startswith(cut_tag, start):
        space = text.find(" ", start + len(cut_tag), end)
        if space > 0 and text[start + len(cut_tag):space].isdigit():
            remote_cut = int(text[start + len(cut_tag):space])
            start = space + 1
            # the instance cut here: the rest of a known form it cut is dropped before redaction
            # (a part of a value left would withhold the whole line, secrets.withhold.PART)
            head = text[start:min(end, start + margin)]
            start += len(head) - len(strip_partial_prefix(head, forms))
    # Redaction first, on the line as received: a value holding (or split by) a carriage return,
    # a backspace or an escape sequence is whole here, and would not be after the collapse or a cut.
    first = max(start, end - line_bytes - 16 * margin - 64)   # controls inside a value make it longer
    line = redacted(text[first:end])
    edge = remote_cut > 0 or first > start   # the kept text does not start at the line's start
    trimmed = line.rstrip("\r")
    cr = trimmed.rfind("\r")
    skipped = 0   # bytes before the window that the line cap drops (a collapse drops them too)
    if cr < 0 and first > start:
        cr_before = text.rfind("\r", start, first)
        skipped = _utf8_size(text, (cr_before + 1) if cr_before >= 0 else start, first)
        cut.progress_collapsed += cr_before >= 0
    if cr >= 0:
        cut.progress_collapsed += 1
        trimmed, edge = trimmed[cr + 1:], True   # what a terminal shows; a value's tail is stripped below
    if _utf8_size(trimmed, 0, len(trimmed)) > line_bytes:
        kept = _tail_bytes(trimmed, line_bytes)
        skipped += _utf8_size(trimmed, 0, len(trimmed)) - _utf8_size(kept, 0, len(kept))
        trimmed, edge = kept, True
    remote_cut += skipped
    piece = strip_partial_prefix(trimmed, forms) if edge else trimmed
    if remote_cut:
        cut.lines_cut += 1
        cut.bytes_cut += remote_cut
        piece = CUT_MARK.format(n=remote_cut) + piece
    return piece


def _utf8_size(text: str, start: int, end: int) -> int:
    """The UTF-8 size of ``text[start:end]``, encoded 64 Ki characters at a time (no copy of a long line)."""
    return sum(len(text[i:min(end, i + 65536)].encode("utf-8", "surrogatepass")) for i in range(start, end, 65536))


def _tail_bytes(text: str, limit: int) -> str:
    """The end of ``text`` within ``limit`` UTF-8 bytes, starting on a character boundary
    (a character cut in two would come back as U+FFFD)."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    tail = data[len(data) - limit:]
    skip = 0
    while skip < len(tail) and tail[skip] & 0xC0 == 0x80:   # a continuation byte: inside a character
        skip += 1
    return tail[skip:].decode("utf-8", "surrogatepass")


def full_log_command(instance: str, job_id: str) -> str:
    """The command that fetches a job's whole log from its instance into ``./<job_id>.log``."""
    return (f"brev exec {shlex.quote(instance)} {shlex.quote('docker logs ' + job_id)} </dev/null "
            f"> {shlex.quote(job_id + '.log')} 2>&1")


# -- the whole answer -------------------------------------------------------------------------
ANSWER_FLOOR = 256   # a string the answer cap shortens keeps at least its last 256 characters


def _size(obj) -> int:
    return len(json.dumps(obj, indent=2, default=str).encode())


def _strings(obj, path=()):
    """(path, length) of every string leaf of a JSON-like object."""
    if isinstance(obj, str):
        yield path, len(obj)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from _strings(value, path + (key,))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _strings(value, path + (i,))


def _get(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def _put(obj, path, value):
    _get(obj, path[:-1])[path[-1]] = value


def cap_answer(answer: dict, limit: int = ANSWER_BYTES) -> dict:
    """``answer`` within ``limit`` bytes of JSON (``cli.emit``'s guarantee, --all included).

    Usually a no-op: logs are bounded where they are read. Else the longest strings keep their
    ends (one water-filling pass: every string longer than a common ceiling is cut to it), then
    the longest lists keep their first items; ``answer_cut`` says what was left out. Linear in
    the answer's size (a few serialisations)."""
    size = _size(answer)
    if size <= limit:
        return answer

    out = copy.deepcopy(answer)
    note: AnswerCut = {"bytes_before": size, "limit": limit, "strings_cut": 0, "items_dropped": 0}
    out["answer_cut"] = note
    for _round in range(4):
        excess = _size(out) - limit
        if excess <= 0:
            return out
        leaves = sorted(((p, n) for p, n in _strings(out) if p[:1] != ("answer_cut",) and n > ANSWER_FLOOR),
                        key=lambda item: -item[1])
        ceiling = _ceiling([n for _p, n in leaves], excess + 64 * len(leaves) + 256)
        if ceiling is None:
            break
        for path, length in leaves:
            if length <= ceiling:
                break
            text = _get(out, path)
            _put(out, path, f"[tao-brev: {length - ceiling} characters cut] " + text[length - ceiling:])
            note["strings_cut"] += 1
    while _size(out) > limit:   # lists: keep their first items
        lists = [(p, len(_get(out, p))) for p in _lists(out) if p[:1] != ("answer_cut",)]
        path, length = max(lists, key=lambda item: item[1], default=((), 0))
        if length <= 1:
            break
        keep = max(1, length // 2)
        _get(out, path)[keep:] = []
        note["items_dropped"] += length - keep
    return out


def _ceiling(lengths: list[int], excess: int) -> int | None:
    """The largest ceiling c >= ANSWER_FLOOR with sum(max(0, n - c)) >= excess (None: none)."""
    lengths = sorted(lengths, reverse=True)
    total, removable = 0, sum(n - ANSWER_FLOOR for n in lengths)
    if removable < excess:
        return ANSWER_FLOOR if lengths else None
    for i, n in enumerate(lengths):
        total += n
        ceiling = (total - excess) // (i + 1)
        nxt = lengths[i + 1] if i + 1 < len(lengths) else ANSWER_FLOOR
        if ceiling >= nxt:
            return max(ANSWER_FLOOR, ceiling)
    return ANSWER_FLOOR


def _lists(obj, path=()):
    if isinstance(obj, list):
        yield path
        for i, value in enumerate(obj):
            yield from _lists(value, path + (i,))
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from _lists(value, path + (key,))


def cut_redacted(text: str, limit: int) -> str:
    """``text`` redacted (:func:`redacted`: known values in every reading, then literal
    credentials), THEN cut to ``limit`` characters: a cut never leaves part of a value."""
    return redacted(text)[:limit] if text else text
