"""Where a script's result becomes one JSON document on stdout and an exit code.

Invariant: whatever happens, a script prints exactly one JSON object on stdout
(``"ok"`` true/false, on failure ``"error": {"code", "message", "fix"}``), every
string in it passed through the redactor, and exits 0/1/2/3 as documented in
``errors.py``. Human text goes to stderr, redacted too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import _signal as signal   # signal.py's C core: signal.py's enum classes cost every start ~1 ms

from . import lazy_re, pipes
from .errors import EXIT_FAILURE, EXIT_OK, TaoBrevError

# Every script imports this module before it reads its arguments: what --help does not use
# (json, nextstep, pathlib, contextlib, ...) is imported where it is used
# (tests/test_bootstrap.py pins what a --help imports).
TYPE_CHECKING = False   # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Callable, Iterable

    from .records import RecordStore
    from .secrets.redact import ObjRedactor
    from .sidecar import SidecarStore
    from .transport import Brev


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
    import os

    try:
        columns = int(os.environ.get("COLUMNS", "80"))
    except ValueError:
        columns = 80
    return argparse.RawDescriptionHelpFormatter(prog, width=max(columns, 40) - 2)


def parser(prog: str, doc: str) -> JsonArgumentParser:
    return JsonArgumentParser(prog=prog, description=doc, allow_abbrev=False, formatter_class=help_formatter)


def say(message: str) -> None:
    """Progress for humans: stderr, redacted (lost, never fatal, when stderr's reader left)."""
    from .secrets import redact

    try:
        print(redact.redact_values(redact.redact(message)), file=sys.stderr, flush=True)
    except BrokenPipeError:
        pass


# Instances brev started by itself (a STOPPED instance resumed by `brev exec`) during this
# script's run: ``run`` puts them in the answer, whatever the verb (they bill again).
_STARTED: list[str] = []


def note_instance_started(name: str) -> None:
    """Transport callback: brev started the STOPPED instance ``name`` to run a command."""
    if name not in _STARTED:
        _STARTED.append(name)
        say(f"WARNING: brev started the STOPPED instance {name} by itself; it is RUNNING and BILLING again")


def instance_started_answer(names: list[str]) -> dict:
    """The ``instance_started`` object of an answer (schema: common.schema.json)."""
    stop = " && ".join(f"brev stop {n}" for n in names)
    return {"instances": list(names), "billing": True,
            "message": f"brev started the STOPPED instance(s) {', '.join(names)} by itself to run a command: "
                       "RUNNING and billing again; containers that ran before the stop were killed by it",
            "fix": f"If nothing should run there now, stop it: {stop}"}


class Context:
    """What a verb needs from the outside world; tests build their own.

    A plain class, not a dataclass: every script imports this module, ``--help`` too."""

    def __init__(self, env: dict | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, _brev: Brev | None = None):
        self.env = dict(os.environ) if env is None else env
        self.sleep = sleep
        self.clock = clock
        self._brev = _brev
        from .secrets import values as known_secrets

        known_secrets.observe_env(self.env)   # its secret values are redacted from every output

    @property
    def state_root(self) -> Path:
        from .records import state_root

        return state_root(self.env)

    @property
    def records(self) -> RecordStore:
        from .records import RecordStore

        return RecordStore(self.state_root)

    @property
    def sidecars(self) -> SidecarStore:
        from .sidecar import SidecarStore

        return SidecarStore(self.state_root)

    @property
    def brev(self) -> Brev:
        if self._brev is None:
            from .records import now_iso
            from .transport import Brev

            sidecars = self.sidecars
            self._brev = Brev(env=self.env, sleep=self.sleep, clock=self.clock, log=say,
                              ready_instances=sidecars.ready_instances(),
                              on_ready=lambda name: sidecars.note_instance(name, exec_ready_at=now_iso()),
                              on_deleted=lambda name: sidecars.note_instance(name, exec_ready_at=None),
                              on_started=note_instance_started)
        return self._brev


def emit(result: dict) -> None:
    """Print the answer (redacted, then within ``logcap.ANSWER_BYTES``: cut after redaction);
    a stdout reader that left ends the process quietly (``pipes``)."""
    import json

    from .secrets import redact
    from .logcap import cap_answer

    pipes.write_stdout(json.dumps(cap_answer(redact.redact_obj(withhold_job_output(result))), indent=2,
                                  default=str) + "\n")


WITHHELD = "[tao-brev: withheld: the job was given {names} by --env and this shell cannot prove it holds the " \
           "same values: its output cannot be redacted]"
OWN_EVIDENCE = ("ExitCode=", "OOMKilled=", "State.Error=")   # docker's facts, not the job's output
# Whole values a job wrote (status.json KPIs: names and values) withheld with its output.
JOB_VALUES = ("kpi", "final_kpi", "metrics")
PROGRESS_VALUES = ("warnings", "resumed_from")   # under ``progress``: the status file's FAILURE messages, a path
TAO_STATUSES = frozenset({"STARTED", "RUNNING", "SUCCESS", "FAILURE", "SKIPPED", "PENDING", "CANCELED", "ERROR"})


def withheld_fix(names: list[str]) -> str:
    """How to see the job's output again: export the values it was given (names known), or,
    for a job whose sidecar is lost or damaged (``*``), restore the sidecar."""
    from .secrets import values as known_secrets

    real = [n for n in names if n != "*"]
    parts = []
    if real:
        parts.append(f"export {' '.join(real)} (the same values the job was given) in the shell that runs this "
                     "script, then run it again")
    if "*" in names:
        parts.append(f"{known_secrets.unproven().get('*', 'the job sidecar is lost')}: restore it from a backup "
                     "(the job's output stays withheld without it)")
    return "; ".join(parts)


def _emptied(key: str, value, notice: str):
    """A withheld KPI value of the same type: ``metrics`` keeps its facts (available, file)
    without ``epochs`` and ``best``; another object or list is emptied; a string is ``notice``."""
    if key == "metrics" and isinstance(value, dict):
        return {**{k: v for k, v in value.items() if k in ("available", "file")}, "epochs": [], "best": {}}
    return {} if isinstance(value, dict) else [] if isinstance(value, list) else notice[:280]


def withhold_job_output(answer: dict) -> dict:
    """``answer`` without the text a job printed (``logs``, log lines in a hint's ``evidence``,
    a stall's ``last_log_line``/``evidence``, the status file's ``message``, ``status`` when it
    is not one of TAO's, and whole KPIs: ``kpi``, ``final_kpi``, ``metrics``, emptied) when a job's
    ``--env`` value is not proven in this process (:func:`known_secrets.unset_watched`: unset,
    another value, no digest or no sidecar): redaction rests on the values, so text that may hold
    unknown ones is never printed. ``withheld`` names the variables and the way out."""
    from .secrets import values as known_secrets

    names = known_secrets.unset_watched()
    if not names or not isinstance(answer, dict):
        return answer
    notice = WITHHELD.format(names=", ".join(n if n != "*" else "values (names unknown)" for n in names))
    found = []

    def walk(obj, parent: str = ""):
        if isinstance(obj, list):
            return [walk(item, parent) for item in obj]
        if not isinstance(obj, dict):
            return obj
        out = {}
        for key, value in obj.items():
            if key == "logs" and isinstance(value, str) and value:
                out[key], _ = notice, found.append(key)
            elif value and (key in JOB_VALUES or (parent == "progress" and key in PROGRESS_VALUES)):
                # the same type, emptied (answers keep their schema)
                out[key] = _emptied(key, value, notice)
                found.append(key)
            elif key == "evidence" and isinstance(value, list):
                kept = [v for v in value if isinstance(v, str) and v.startswith(OWN_EVIDENCE)]
                out[key] = kept + ([notice] if len(kept) < len(value) else [])
                if len(kept) < len(value):
                    found.append(key)
            elif (parent == "stall" and key in ("last_log_line", "evidence") and isinstance(value, str)) or \
                    (parent == "progress" and key == "message" and isinstance(value, str)) or \
                    (parent == "progress" and key == "status" and isinstance(value, str)
                     and value not in TAO_STATUSES):
                out[key], _ = notice[:280], found.append(key)
            else:
                out[key] = walk(value, key)
        return out

    result = walk(answer)
    if found:
        result["withheld"] = {"names": names, "fields": sorted(set(found)), "fix": withheld_fix(names)}
    return result


def emit_stream(head: dict, key: str, items: Iterable) -> None:
    """Print ``{**head, key: [*items]}`` byte for byte as :func:`emit` would, one item at a
    time, each redacted on its way: memory stays flat however many items (written in
    chunks of about 64 KiB). From the first byte on, signals are ignored (the one JSON
    document is being printed), as in ``run``."""
    emit_stream_texts(head, key, lambda redacted: (redacted.json_text(item, 2) for item in items))


def emit_stream_texts(head: dict, key: str, texts_of: Callable[[ObjRedactor], Iterable[str]]) -> None:
    """:func:`emit_stream` of items given as their JSON texts: ``texts_of(redacted)`` yields
    ``redacted.json_text(item, 2)`` of each item (depth 2: an item of the list), or the same
    text by another way (``record_listing.json_texts``)."""
    import json

    from .secrets import redact

    _RUN["answering"] = True
    redacted = redact.obj_redactor()
    opening = json.dumps(redacted({**head, key: []}), indent=2, default=str)
    assert opening.endswith(f"{json.dumps(key)}: []\n}}"), "the streamed key must be the last one"
    chunk = [opening[:-len("]\n}")]]
    size = 0
    separator = "\n    "
    for text in texts_of(redacted):
        chunk += (separator, text)
        separator = ",\n    "
        size += len(text)
        if size > 65536:
            sys.stdout.write("".join(chunk))
            chunk, size = [], 0
    chunk.append("]\n}\n" if separator == "\n    " else "\n  ]\n}\n")
    sys.stdout.write("".join(chunk))
    sys.stdout.flush()


# -- interrupts: every run signalled after the script's first line answers in JSON ----------
# scripts/_bootstrap.py answers a signal that arrives before run() (nothing done yet);
# run() installs _interrupt: the first SIGINT/SIGTERM raises KeyboardInterrupt (the verbs
# settle what they can and answer), a second one answers at once; once the answer is being
# printed, signals are ignored (exactly one JSON document).
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}
_HELP = {"-h", "--help"}
_RUN: dict = {}


def _reset(script: str | None = None, argv: list[str] | None = None) -> None:
    _RUN.update(job_id=None, fix=None, signal=None, deferred=0, pending=None, answering=False, state=None,
                script=script, argv=list(argv or []), warned=[])


_reset()


def warn(message: str) -> None:
    """A failure the verb survives: on stderr now (:func:`say`), and in the answer's ``warnings``
    too (``cli.run`` adds it), so no failure is told only to a human."""
    say(message)
    _RUN.setdefault("warned", []).append(message)


def _merge_warnings(result: dict) -> None:
    """The :func:`warn` messages of this run into ``result["warnings"]`` (not preflight's: its
    warnings are check names, its checks carry their failures), each once, redacted at emit."""
    warned = _RUN.get("warned") or []
    if not warned or _RUN.get("script") == "preflight.py" or not isinstance(result.get("warnings", []), list):
        return
    have = result.setdefault("warnings", [])
    for message in warned:
        if not any(message in w or w in message for w in have if isinstance(w, str)):
            have.append(message)


def note_job(job_id: str, interrupted_fix: str | None = None) -> None:
    """From now on every answer of this run names ``job_id`` (an interrupt's too);
    ``interrupted_fix`` is what an interrupted run tells the agent to do next."""
    _RUN["job_id"] = job_id
    if interrupted_fix:
        _RUN["fix"] = interrupted_fix


def note_state(state: str | None) -> None:
    """The job's last known state: an interrupted answer reports it."""
    if state:
        _RUN["state"] = state


class deferred_interrupts:  # noqa: N801 - used as a function: `with deferred_interrupts():`
    """A SIGINT/SIGTERM arriving inside is acted on when the block ends: what the block
    makes (a record) and what names it (:func:`note_job`) exist together or not at all.
    (A class, not ``contextlib.contextmanager``: --help does not import contextlib.)"""

    def __enter__(self):
        _RUN["deferred"] += 1
        return self

    def __exit__(self, *_exc):
        _RUN["deferred"] -= 1
        if not _RUN["deferred"] and _RUN["pending"] is not None:
            signum, _RUN["pending"] = _RUN["pending"], None
            _interrupt(signum, None)
        return False


def _interrupt(signum, _frame):
    if _RUN["answering"]:
        return
    if _RUN["deferred"]:
        _RUN["pending"] = signum
        return
    if _RUN["signal"] is not None:   # a second signal while winding down: answer now
        _RUN["answering"] = True
        import json

        from .secrets import redact

        answer = interrupted_answer()
        if _RUN.get("next_step") is not None:
            _RUN["next_step"](answer, 130, _RUN["argv"])
        try:
            os.write(1, (json.dumps(redact.redact_obj(answer), indent=2) + "\n").encode())
        except BrokenPipeError:
            pass
        os._exit(130)
    _RUN["signal"] = signum
    raise KeyboardInterrupt(f"signal {signum}")


def interrupted_answer() -> dict:
    """``INTERRUPTED`` (exit 130), naming the job this run worked on, if any."""
    from . import nextstep

    name = _NAMES[_RUN["signal"]] if _RUN["signal"] else "SIGINT"
    job_id, state, script = _RUN["job_id"], _RUN["state"], _RUN["script"] or ""
    fix = _RUN["fix"] or nextstep.resume_fix(script, _RUN["argv"], job_id, state)
    if job_id is None:
        return {"ok": False, "error": TaoBrevError("INTERRUPTED", f"interrupted ({name})", fix).to_json()}
    known = f" (last known state {state})" if state else ""
    return {"ok": False, "job_id": job_id, "state": state,
            "error": TaoBrevError("INTERRUPTED", f"interrupted ({name}) while working on job {job_id}{known}",
                                  fix).to_json()}


def dependency_missing(exc: ImportError) -> TaoBrevError | None:
    """DEPENDENCIES_MISSING for an import of a module that is not the bundle's own nor the standard
    library's (a dependency ``install.sh`` installs, or one of theirs); else None (a bug)."""
    name = (getattr(exc, "name", None) or "").split(".")[0]
    if not name or name == "tao_brev" or name in getattr(sys, "stdlib_module_names", ()):
        return None
    from .nextstep import install_command

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
    import traceback

    say(traceback.format_exc())
    return {"ok": False, "error": TaoBrevError("INTERNAL_ERROR", f"{type(exc).__name__}: {exc}").to_json()}, \
        EXIT_FAILURE


_INSTANCE_PLACEHOLDER = lazy_re.compile(r"(--instance |brev (?:delete|stop|start|exec|copy [^\s]+) )NAME\b")
_JOB_PLACEHOLDER = lazy_re.compile(r"\bJOB_ID\b")
# a script of this bundle named bare (``teardown.py``) or relative (``scripts/teardown.py``) in a text
_SCRIPT_WORD = lazy_re.compile(r"(?<![\w/.@-])(?:scripts/)?((?:preflight|submit|poll_status|teardown|tao_job_record|"
                               r"redact_secrets)\.py)\b")
COMMAND_TEXTS = ("fix", "advice", "next_note", "teardown_skipped", "why")


def absolute_scripts(text: str) -> str:
    """``text`` with every script of this bundle it names by its absolute path (runnable as is)."""
    from .nextstep import SCRIPTS_DIR

    return _SCRIPT_WORD.sub(lambda m: str(SCRIPTS_DIR / m.group(1)), text)


def concrete(answer, job_id: str | None = None, instance: str | None = None):
    """``answer`` with the placeholders of its fix and advice texts filled with the real values
    it names: ``JOB_ID`` with the job id of the nearest object that has one, ``NAME`` after
    ``--instance`` / ``brev delete`` etc. with its instance (an error's default fix is generic)."""
    if isinstance(answer, list):
        return [concrete(item, job_id, instance) for item in answer]
    if not isinstance(answer, dict):
        return answer
    job_id = answer.get("job_id") if isinstance(answer.get("job_id"), str) else job_id
    instance = answer.get("instance") if isinstance(answer.get("instance"), str) else instance
    out = {}
    for key, value in answer.items():
        if key in ("fix", "advice") and isinstance(value, str):
            if job_id:
                value = _JOB_PLACEHOLDER.sub(job_id, value)
            if instance:
                value = _INSTANCE_PLACEHOLDER.sub(lambda m: m.group(1) + instance, value)
        if key in COMMAND_TEXTS and isinstance(value, str):
            value = absolute_scripts(value)
        out[key] = concrete(value, job_id, instance)
    return out


def _next_step_of(name: str) -> Callable[[dict, int, list[str]], dict]:
    """``nextstep.<name>``, imported when an answer is made (a --help makes none)."""
    def next_step(answer: dict, code: int, argv: list[str]) -> dict:
        from . import nextstep

        return getattr(nextstep, name)(answer, code, argv)

    return next_step


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
    A reader that closed stdout early (``| head``) ends the run quietly (:func:`emit`).
    """
    _reset(os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else None,
           sys.argv[1:] if argv is None else argv)
    if isinstance(next_step, str):
        next_step = _next_step_of(next_step)
    _RUN["next_step"] = next_step
    _STARTED.clear()
    try:
        try:
            for signum in _SIGNALS:   # an agent's tool timeout: answer like Ctrl-C (a signal that
                signal.signal(signum, _interrupt)   # arrived just before is handled here, inside the try)
            if not _HELP & set(_RUN["argv"]):   # a --help only prints: the next run sweeps
                from .credentials import sweep_local

                sweep_local()   # credential files that killed runs left on this machine
                from .secrets.guard import refuse_in_argv

                refuse_in_argv(_RUN["argv"])   # a credential's value given as a name: stop before anything is sent
            result, code = main(argv)
        except TaoBrevError as exc:
            result = {"ok": False, "error": exc.to_json(), **exc.details.get("answer", {})}
            code = exc.exit_code
        except SystemExit:   # --help: its text, flushed here (a reader that left ends us quietly)
            pipes.flush_stdout()
            if pipes.stdout_closed():   # argparse drops a failed write itself: end as the rest do
                pipes.end_as_sigpipe()
            raise
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure becomes one JSON answer
            result, code = _unexpected(exc)
        _RUN["answering"] = True   # from here on signals are ignored: this answer is printed
    except KeyboardInterrupt:
        _RUN["answering"] = True
        _RUN["signal"] = _RUN["signal"] or signal.SIGINT
        result, code = interrupted_answer(), 130
    # hold any later signal until exit: Python resets the handlers while it shuts down, and a
    # signal then would turn this answered run into a death by signal
    signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    if result is None:
        pipes.flush_stdout()   # bank-format text printed by main: a reader that left ends us quietly
        return code
    result.setdefault("ok", code == EXIT_OK)
    if _RUN["job_id"] and not result.get("job_id"):
        result["job_id"] = _RUN["job_id"]
    if _STARTED:
        result["instance_started"] = instance_started_answer(_STARTED)
    _merge_warnings(result)
    result = concrete(result)
    if next_step is not None:
        next_step(result, code, _RUN["argv"])
        if isinstance(result.get("next_note"), str):
            result["next_note"] = absolute_scripts(result["next_note"])
    emit(result)
    return code
