"""The generated tables of ``references/failure-classes.md`` (``python -m tao_brev.docker_state --markdown``)."""

from __future__ import annotations

import json
from typing import Optional

from .docker_errors import DOCKER_ERRORS
from .patterns import LOG_PATTERNS
from .rows import STATE_ROWS, DockerState


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")   # a multi-line example stays in its cell


def _example_cell(example: Optional[DockerState]) -> str:
    return "none" if example is None else f"`{_cell(json.dumps(example, separators=(',', ':')))}`"


def markdown() -> str:
    """The generated part of ``references/failure-classes.md``."""
    out = ["### Docker state -> status (first matching row of a status wins)", "",
           "| `.State.Status` | ExitCode / OOMKilled / Error | state | hint class | reason | advice | example `.State` |",
           "|---|---|---|---|---|---|---|"]
    for row in STATE_ROWS:
        klass = (row.err_class or "null") if row.hint else "-"
        if row.logs_refine:
            klass += " (a log pattern wins)"
        out.append(f"| {row.status} | {_cell(row.when)} | {row.state} | {klass} | {_cell(row.reason) or '-'} | "
                   f"{_cell(row.advice) or '-'} | {_example_cell(row.example)} |")
    out += ["", "### Log patterns -> failure class (GPU faults first, then a row with its own code, then ERR_INFRA before ERR_PROGRAM; a row with a context counts only when its context is in the log too)", "",
            "| class | pattern (regex) | reason | advice | example evidence line |", "|---|---|---|---|---|"]
    out += [f"| {p.err_class}{f' (code {p.code})' if p.code else ''}{' (first)' if p.first else ''} | "
            f"`{_cell(p.pattern.pattern)}`{f' with context `{_cell(p.context.pattern)}`' if p.context else ''} | {_cell(p.reason)} | {_cell(p.advice)} | "
            f"`{_cell(p.example)}` |" for p in LOG_PATTERNS]
    out += ["", "### Docker error messages -> error code (first match wins)", "",
            "| pattern (regex, case-insensitive) | code |", "|---|---|"]
    out += [f"| `{_cell(pattern.pattern)}` | `{code}` |" for pattern, code in DOCKER_ERRORS]
    return "\n".join(out) + "\n"
