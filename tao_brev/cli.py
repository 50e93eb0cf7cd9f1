"""The script runner: argparse that answers bad input in JSON, the signal handlers, and
:func:`run`, where a script's result becomes one JSON document on stdout and an exit code.

Invariant: whatever happens, a script prints exactly one JSON object on stdout
(``"ok"`` true/false, on failure ``"error": {"code", "message", "fix"}``), every
string in it passed through the redactor, and exits 0/1/2/3 as documented in
``errors.py``. Human text goes to stderr, redacted too.

Every script imports this module before it reads its arguments, ``--help`` too
(bench/bench_overhead.py measures a --help against ``python -c pass``): what an answer or a verb needs
(``answering``: ``answers``, ``nextstep``, ...; ``context``) is imported once a run works or
answers, the two imports inside a function here; this module hands their names on
(``cli.Context``, ``cli.emit``, ...) for the scripts.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Callable

from . import pipes
from .errors import EXIT_FAILURE, EXIT_OK, TaoBrevError
from .run_state import RUN as _RUN
from .run_state import STARTED as _STARTED
from .run_state import deferred_interrupts, note_instance_started, note_job, note_state, say, warn  # noqa: F401
from .run_state import reset as _reset


class JsonArgumentParser(argparse.ArgumentParser):
    """argparse that reports bad input as BAD_ARGUMENT (exit 2) in JSON; help laid out by
    :func:`help_formatter` (sub-parsers too)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", help_formatter)
        super().__init__(*args, **kwargs)

    def error(self, message):  # noqa: D401 - argparse API
        raise TaoBrevError("BAD_ARGUMENT", f"{self.prog}: {message}",
                           f"Run {self.prog} --help for the accepted flags.")


def help_formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's raw-description formatter at ``$COLUMNS`` (default 80) minus 2 columns, which is
    what argparse itself picks when stdout is not a terminal (an agent's pipe) - without the
    ``shutil`` import (bz2, lzma, ...) its terminal-size lookup costs every ``--help``."""
    try:
        columns = int(os.environ.get("COLUMNS", "80"))
    except ValueError:
        columns = 80
    return argparse.RawDescriptionHelpFormatter(prog, width=max(columns, 40) - 2)


def parser(prog: str, doc: str) -> JsonArgumentParser:
    return JsonArgumentParser(prog=prog, description=doc, allow_abbrev=False, formatter_class=help_formatter)


# Names handed on from the modules an answer or a verb needs (imported on first use).
_ANSWERS = {"emit": "emit", "emit_stream": "emit_stream", "emit_stream_texts": "emit_stream_texts",
            "concrete": "concrete", "absolute_scripts": "absolute_scripts",
            "withhold_job_output": "withhold_job_output", "withheld_fix": "withheld_fix",
            "instance_started_answer": "instance_started_answer", "interrupted_answer": "interrupted_answer",
            "_merge_warnings": "merge_warnings"}


def _answering():
    """``tao_brev.answering``: what a run needs once it works or answers; a --help needs none of it."""
    from . import answering

    return answering


def __getattr__(name: str):
    """``cli.Context`` (``context.Context``: the transport, the stores; not for a record listing)
    and the answer functions of ``answers``."""
    if name == "Context":
        from .context import Context

        return Context
    if name in _ANSWERS:
        return getattr(_answering().answers, _ANSWERS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- interrupts: every run signalled after the script's first line answers in JSON ----------
# scripts/_bootstrap.py answers a signal that arrives before run() (nothing done yet);
# run() installs _interrupt: the first SIGINT/SIGTERM raises KeyboardInterrupt (the verbs
# settle what they can and answer), a second one answers at once; once the answer is being
# printed, signals are ignored (exactly one JSON document). One arriving inside
# ``run_state.deferred_interrupts`` is handed back to _interrupt when the block ends.
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_HELP = {"-h", "--help"}


def _interrupt(signum, _frame):
    if _RUN["answering"]:
        return
    if _RUN["deferred"]:
        _RUN["pending"] = signum
        return
    if _RUN["signal"] is not None:   # a second signal while winding down: answer now
        _RUN["answering"] = True
        answers = _answering().answers
        answer = answers.interrupted_answer()
        if _RUN.get("next_step") is not None:
            _RUN["next_step"](answer, 130, _RUN["argv"])
        try:
            os.write(1, answers.interrupt_text(answer).encode())
        except BrokenPipeError:
            pass
        os._exit(130)
    _RUN["signal"] = signum
    raise KeyboardInterrupt(f"signal {signum}")


def dependency_missing(exc: ImportError) -> TaoBrevError | None:
    """DEPENDENCIES_MISSING for an import of a module that is not the bundle's own nor the standard
    library's (a dependency ``install.sh`` installs, or one of theirs); else None (a bug)."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    if not name or name == "tao_brev" or name in getattr(sys, "stdlib_module_names", ()):
        return None
    install_command = _answering().nextstep.install_command
    return TaoBrevError("DEPENDENCIES_MISSING",
                        f"Python {sys.version_info[0]}.{sys.version_info[1]} ({sys.executable}) cannot import "
                        f"the module {name!r} ({exc}): the bundle's environment is incomplete",
                        f"Create it: {install_command()} (bash {install_command().split()[1]} --check shows "
                        "what is installed).")


def _unexpected(exc: Exception) -> tuple[dict, int]:
    """The answer to an exception no verb turned into an error: a stdout reader that left
    (``| head``) ends the run quietly; a missing dependency is DEPENDENCIES_MISSING; anything
    else is a bug, INTERNAL_ERROR with the traceback on stderr."""
    if isinstance(exc, BrokenPipeError) and pipes.stdout_closed():
        pipes.end_as_sigpipe()
    if isinstance(exc, ImportError):
        missing = dependency_missing(exc)
        if missing is not None:
            say(f"{missing.message}. {missing.fix}")
            return {"ok": False, "error": missing.to_json()}, missing.exit_code
    say(traceback.format_exc())
    return {"ok": False, "error": TaoBrevError("INTERNAL_ERROR", f"{type(exc).__name__}: {exc}").to_json()}, \
        EXIT_FAILURE


def _next_step_of(name: str) -> Callable[[dict, int, list[str]], dict]:
    """``nextstep.<name>``, imported when an answer is made (a --help makes none)."""
    def next_step(answer: dict, code: int, argv: list[str]) -> dict:
        return getattr(_answering().nextstep, name)(answer, code, argv)

    return next_step


def _call(main: Callable[[list[str] | None], tuple[dict | None, int]],
          argv: list[str] | None) -> tuple[dict | None, int]:
    """``main(argv)`` with the signal handlers installed; an error raised becomes its answer."""
    try:
        for signum in _SIGNALS:   # an agent's tool timeout: answer like Ctrl-C (a signal that
            signal.signal(signum, _interrupt)   # arrived just before is handled here, inside the try)
        if not _HELP & set(_RUN["argv"]):   # a --help only prints: the next run sweeps
            _answering().sweep_local()   # credential files that killed runs left on this machine
            _answering().refuse_in_argv(_RUN["argv"])   # a credential's value given as a name: stop before anything is sent
        return main(argv)
    except TaoBrevError as exc:
        return {"ok": False, "error": exc.to_json(), **exc.details.get("answer", {})}, exc.exit_code
    except SystemExit:   # --help: its text, flushed here (a reader that left ends us quietly)
        pipes.flush_stdout()
        if pipes.stdout_closed():   # argparse drops a failed write itself: end as the rest do
            pipes.end_as_sigpipe()
        raise
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes one JSON answer
        return _unexpected(exc)


def run(main: Callable[[list[str] | None], tuple[dict | None, int]], argv: list[str] | None = None,
        next_step: Callable[[dict, int, list[str]], dict] | str | None = None) -> int:
    """Call ``main(argv) -> (result, exit_code)``; print its JSON; return the exit code.

    A :class:`TaoBrevError` becomes ``{"ok": false, "error": ...}`` with its exit
    code (``details["answer"]`` fields are merged into the answer); an
    unexpected exception is a bug, reported as ``INTERNAL_ERROR`` (exit 1)
    with the traceback on stderr; SIGINT/SIGTERM is ``INTERRUPTED`` (exit 130).
    Once a job was noted (:func:`note_job`) the answer names it. When brev started a
    STOPPED instance by itself meanwhile, the answer carries ``instance_started``
    (it bills again). A ``None`` result means ``main`` printed its own (non-JSON,
    bank-format) answer. ``next_step(answer, exit_code, argv)`` (``nextstep``) adds the
    answer's ``next`` / ``next_note``, on every answer including failures and interrupts;
    a string names a function of ``nextstep`` (imported only when an answer is made).
    A reader that closed stdout early (``| head``) ends the run quietly (``answers.emit``).
    """
    _reset(os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else None,
           sys.argv[1:] if argv is None else argv)
    if isinstance(next_step, str):
        next_step = _next_step_of(next_step)
    _RUN["next_step"] = next_step
    _RUN["on_signal"] = _interrupt   # run_state.deferred_interrupts acts on a held signal with it
    _STARTED.clear()
    interrupted = False
    try:
        result, code = _call(main, argv)
        _RUN["answering"] = True   # from here on signals are ignored: this answer is printed
    except KeyboardInterrupt:
        _RUN["answering"] = True
        _RUN["signal"] = _RUN["signal"] or signal.SIGINT
        result, code, interrupted = None, 130, True
    # hold any later signal until exit: Python resets the handlers while it shuts down, and a
    # signal then would turn this answered run into a death by signal
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    if result is None and not interrupted:
        pipes.flush_stdout()   # bank-format text printed by main: a reader that left ends us quietly
        return code
    answers = _answering().answers
    if result is None:   # interrupted (main's own None answer returned above)
        result = answers.interrupted_answer()
    result.setdefault("ok", code == EXIT_OK)
    if _RUN["job_id"] and not result.get("job_id"):
        result["job_id"] = _RUN["job_id"]
    if _STARTED:
        result["instance_started"] = answers.instance_started_answer(_STARTED)
    answers.merge_warnings(result)
    result = answers.concrete(result)
    if next_step is not None:
        next_step(result, code, _RUN["argv"])
        if isinstance(result.get("next_note"), str):
            result["next_note"] = answers.absolute_scripts(result["next_note"])
    answers.emit(result)
    return code
