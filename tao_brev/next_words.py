"""The words of a ``next`` command: the flags a run gave (kept, read, dropped) and the --timeout a
suggested wait gets (:func:`covering_timeout`: the job's known ETA plus a margin, bounded)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model.answer_types import PollAnswer

# A --wait in a ``next`` always has a --timeout: an agent with no memory that runs it must get its
# shell back (SKILL.md section 6: keep --timeout below the tool-call limit). The values given to this
# run win; these are the defaults (the example of SKILL.md section 6).
WAIT_INTERVAL_S = 20
WAIT_TIMEOUT_S = 100
# A suggested --timeout covers the job's known ETA (``progress.eta_s``) plus a margin (a quarter of
# it, at least two intervals), at most WAIT_TIMEOUT_MAX_S (references/answers.md); a larger value the
# user gave is kept.
WAIT_TIMEOUT_MAX_S = 3600


def covering_timeout(given, eta_s, interval=None) -> int:
    """The --timeout to suggest: ``given`` (else WAIT_TIMEOUT_S), raised to the known ETA plus a
    margin (a quarter of it, at least two intervals), that raise at most WAIT_TIMEOUT_MAX_S."""
    base = number(given)
    base = WAIT_TIMEOUT_S if base is None else base
    eta, step = number(eta_s), number(interval) or WAIT_INTERVAL_S
    if eta is None:
        return _whole(base)
    need = min(WAIT_TIMEOUT_MAX_S, -(-(eta + max(eta / 4, 2 * step)) // 1))
    return _whole(max(base, need))


def _whole(seconds: float) -> int:
    """Whole seconds, rounded up (a --timeout 0.5 stays a wait, never 0)."""
    return int(-(-seconds // 1))


def number(value):
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out >= 0 else None


def with_timeout(argv: list[str], eta_s) -> list[str]:
    """``argv`` with its --timeout (added at the end when missing) set to :func:`covering_timeout`."""
    timeout = str(covering_timeout(flag(argv, "--timeout"), eta_s, flag(argv, "--interval")))
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--timeout" and i + 1 < len(argv):
            out += ["--timeout", timeout]
            i += 2
            continue
        out.append(f"--timeout={timeout}" if argv[i].startswith("--timeout=") else argv[i])
        i += 1
    return out if "--timeout" in out or f"--timeout={timeout}" in out else [*out, "--timeout", timeout]


def eta_of(answer: PollAnswer) -> int | None:
    """The answer's known ETA in seconds (``progress.eta_s``), else None."""
    progress = answer.get("progress")
    return progress.get("eta_s") if isinstance(progress, dict) else None


def kept(argv: list[str], flags) -> list[str]:
    """The ``flags`` (each with its value) that ``argv`` gave, in its order."""
    out = []
    for i, word in enumerate(argv):
        name = word.split("=", 1)[0]
        if name in flags:
            out += [word] if "=" in word else argv[i:i + 2]
    return out


def flag(argv: list[str], flag: str) -> str | None:
    for i, word in enumerate(argv):
        if word == flag and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


def without(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag`` and its value."""
    out, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == flag:
            skip = True
        elif not word.startswith(flag + "="):
            out.append(word)
    return out
