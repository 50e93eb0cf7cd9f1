"""What a preflight run answers with: the request, one check's outcome, and the
report that times the checks in order and counts the round trips spent. The other
modules of the package take ``Context`` and ``say`` from here (one place to change when
``Context`` leaves ``tao_brev.cli``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal, NoReturn, TypeVar

from ... import remote
from ...secrets import redact
from ...context import Context, say   # the package's one tie to the run: its modules take them from here
from ...errors import CODES, TaoBrevError
from ...model.answer_types import Check as CheckAnswer, PreflightAnswerRoundTrips
from ...vocabulary import StorageTier

# The steps whose ``brev exec`` calls the answer's ``round_trips`` counts (``copy``: ``brev copy`` calls).
Step = Literal["probe", "checks", "pull", "gpu_smoke", "copy"]
T = TypeVar("T")


@dataclass
class PreflightRequest:
    """What to check. Times in seconds; paths are instance paths (``~/...`` or absolute)."""

    instance: str
    image: str | None = None
    exec_timeout: float | None = None   # budget to reach the instance (start wait + probe); default 600 s
    host: bool = False
    start: bool = False
    pull: bool = False
    gpu_smoke: bool = False
    storage_tier: str = StorageTier.A
    bucket: str | None = None
    results_root: str | None = None


@dataclass
class Check:
    """One check's outcome under its stable name (``references/schemas/preflight.schema.json``)."""

    name: str
    ok: bool
    detail: str = ""
    fix: str | None = None
    code: str | None = None
    warning: bool = False
    elapsed_s: float | None = None
    data: dict[str, object] = field(default_factory=dict)   # the check's own facts (its module's TypedDict)

    @property
    def failure_code(self) -> str:
        """The code of a failed check (:meth:`Report.fail` gives every failed check one)."""
        if self.code is None:
            raise ValueError(f"the {self.name} check has no code")
        return self.code

    def to_json(self) -> CheckAnswer:
        out: CheckAnswer = {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix,
                            "elapsed_s": round(self.elapsed_s or 0.0, 3)}
        if self.code:
            out["code"] = self.code
        if self.warning:
            out["warning"] = True
        if self.data:
            out["data"] = self.data
        return out


class Stop(Exception):
    """A check failed that later checks depend on: answer now."""


class Report:
    """The checks in order, each timed from the previous one unless it brings its
    own time, and the round trips spent (``brev exec`` by step, ``brev copy``)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.checks: list[Check] = []
        self.round_trips: PreflightAnswerRoundTrips = {"probe": 0, "checks": 0, "pull": 0, "gpu_smoke": 0, "copy": 0}
        self._mark = ctx.clock()

    def add(self, check: Check) -> Check:
        now = self.ctx.clock()
        if check.elapsed_s is None:
            check.elapsed_s = now - self._mark
        self._mark = now
        self.checks.append(check)
        state = "ok" if check.ok and not check.warning else ("WARN" if check.ok else "FAIL")
        say(f"preflight {check.name}: {state} {check.detail}")
        return check

    def passed(self, name: str, detail: str, elapsed_s: float | None = None, **data: object) -> Check:
        return self.add(Check(name, True, detail, elapsed_s=elapsed_s, data=data))

    def warn(self, name: str, detail: str, fix: str | None, elapsed_s: float | None = None, code: str | None = None,
             **data: object) -> Check:
        return self.add(Check(name, True, detail, fix, code, warning=True, elapsed_s=elapsed_s, data=data))

    def fail(self, name: str, code: str, detail: str, fix: str | None = None, elapsed_s: float | None = None,
             **data: object) -> Check:
        return self.add(Check(name, False, detail, fix or CODES[code].fix, code, elapsed_s=elapsed_s, data=data))

    def error(self, name: str, exc: TaoBrevError, elapsed_s: float | None = None, **data: object) -> Check:
        return self.fail(name, exc.code, exc.message, exc.fix, elapsed_s, **data)

    def stop(self, name: str, exc: TaoBrevError, **data: object) -> NoReturn:
        self.error(name, exc, None, **data)
        raise Stop()

    def count(self, step: Step, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """Call ``fn`` and add the ``brev exec`` calls it made to ``round_trips[step]``."""
        before = self.ctx.brev.exec_calls
        try:
            return fn(*args, **kw)
        finally:
            self.round_trips[step] += self.ctx.brev.exec_calls - before


def code_fix(code: str, instance: str) -> str:
    """The default fix of ``code`` for this instance (its NAME placeholder filled in)."""
    return CODES[code].fix.replace("NAME", instance)


def section_tail(section: remote.Section | None, limit: int = 300) -> str:
    """The redacted end of a section's output (at most ``limit`` characters), or "no answer"."""
    return "no answer" if section is None else redact.tail(section.output, limit)
