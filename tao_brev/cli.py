"""Where a script's result becomes one JSON document on stdout and an exit code.

Invariant: whatever happens, a script prints exactly one JSON object on stdout
(``"ok"`` true/false, on failure ``"error": {"code", "message", "fix"}``), every
string in it passed through the redactor, and exits 0/1/2/3 as documented in
``errors.py``. Human text goes to stderr, redacted too.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import redact
from .errors import EXIT_FAILURE, EXIT_OK, TaoBrevError
from .records import RecordStore, now_iso, state_root
from .sidecar import SidecarStore
from .transport import Brev


class JsonArgumentParser(argparse.ArgumentParser):
    """argparse that reports bad input as BAD_ARGUMENT (exit 2) in JSON."""

    def error(self, message):  # noqa: D401 - argparse API
        raise TaoBrevError("BAD_ARGUMENT", f"{self.prog}: {message}",
                           f"Run {self.prog} --help for the accepted flags.")


def parser(prog: str, doc: str) -> JsonArgumentParser:
    return JsonArgumentParser(prog=prog, description=doc, allow_abbrev=False,
                              formatter_class=argparse.RawDescriptionHelpFormatter)


def say(message: str) -> None:
    """Progress for humans: stderr, redacted."""
    print(redact.redact_values(redact.redact(message)), file=sys.stderr, flush=True)


@dataclass
class Context:
    """What a verb needs from the outside world; tests build their own."""

    env: dict = field(default_factory=lambda: dict(os.environ))
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    _brev: Brev | None = None

    @property
    def state_root(self) -> Path:
        return state_root(self.env)

    @property
    def records(self) -> RecordStore:
        return RecordStore(self.state_root)

    @property
    def sidecars(self) -> SidecarStore:
        return SidecarStore(self.state_root)

    @property
    def brev(self) -> Brev:
        if self._brev is None:
            sidecars = self.sidecars
            self._brev = Brev(env=self.env, sleep=self.sleep, clock=self.clock, log=say,
                              ready_instances=sidecars.ready_instances(),
                              on_ready=lambda name: sidecars.note_instance(name, exec_ready_at=now_iso()),
                              on_deleted=lambda name: sidecars.note_instance(name, exec_ready_at=None))
        return self._brev


def emit(result: dict) -> None:
    print(json.dumps(redact.redact_obj(result), indent=2, default=str), flush=True)


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def run(main: Callable[[list[str] | None], tuple[dict, int]], argv: list[str] | None = None) -> int:
    """Call ``main(argv) -> (result, exit_code)``; print its JSON; return the exit code.

    A :class:`TaoBrevError` becomes ``{"ok": false, "error": ...}`` with its exit
    code (``details["answer"]`` fields are merged into the answer); an
    unexpected exception is a bug, reported as ``INTERNAL_ERROR`` (exit 1)
    with the traceback on stderr.
    """
    signal.signal(signal.SIGTERM, _interrupt)   # an agent's tool timeout: answer like Ctrl-C
    try:
        result, code = main(argv)
    except TaoBrevError as exc:
        result = {"ok": False, "error": exc.to_json(), **exc.details.get("answer", {})}
        code = exc.exit_code
    except KeyboardInterrupt:
        result, code = {"ok": False, "error": TaoBrevError("INTERRUPTED", "interrupted").to_json()}, 130
    except SystemExit:
        raise
    except Exception as exc:  # a bug: still one JSON answer, never a silent traceback on stdout
        import traceback

        say(traceback.format_exc())
        result = {"ok": False, "error": TaoBrevError("INTERNAL_ERROR", f"{type(exc).__name__}: {exc}").to_json()}
        code = EXIT_FAILURE
    result.setdefault("ok", code == EXIT_OK)
    emit(result)
    return code
