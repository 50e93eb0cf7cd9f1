"""Shared start of every script: answer interrupts, find the bundle and its environment.

Imported on the first line of each script's own code. From that moment a
SIGINT or SIGTERM gets the script's one JSON answer (``INTERRUPTED``, exit
130): nothing has been done yet, so the answer says so; ``tao_brev.cli.run``
replaces this handler once the script starts working.

``install.sh`` puts the Python dependencies in ``<bundle>/.venv``; a script
started with any other interpreter re-executes itself with that one, so an
agent just runs ``scripts/<name>.py``. The two signals stay blocked across the
re-exec (the signal mask survives ``execve``) until the new process has
imported this module again and installed the handler, so a signal in between
is answered too. Without a usable ``.venv`` (e.g. a development checkout with
the dependencies installed) the current interpreter is used - if it can run
the bundle: Python >= 3.9 with the modules the script needs. If it cannot, the
script stops before importing anything of the bundle with exit 3 and the error
PYTHON_ENV_MISSING (JSON on stdout, or only a line on stderr for scripts whose
stdout is not JSON), naming the Python it needs and the install.sh command
that makes it. It never fails with exit 1, which some scripts use for a
verdict (redact_secrets.py: "credential found").

This file is read by whatever ``python3`` is first on PATH, possibly far older
than the bundle's floor (Ubuntu 20.04: 3.8, RHEL 8: 3.6): keep its syntax and
calls to what Python 3.5 understands (no f-strings, annotations or pathlib);
the scripts themselves must compile on 3.6 up to their ``setup()`` call.
"""

import os
import re  # noqa: F401  (whole before the handlers below can run: see _HANDLER_NEEDS)
import sys

import _signal as signal   # signal.py's C core (Python >= 3.5): signal.py's enum classes cost every start ~1 ms

# json and shlex are imported where an answer is made: --help and every working run need neither.
# An interrupt handler that imports them may run in the middle of any import of the script (its
# argparse loading re, ...): what they need beyond themselves is imported before the handlers are
# installed - re, which every script's argparse loads anyway - so they never meet a half-made module.
_HANDLER_NEEDS = ("json", "shlex")

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


# the verbs whose every answer carries "next" (tao_brev/nextstep.py); the bank-format tools do not
NEXT_SCRIPTS = ("preflight.py", "submit.py", "poll_status.py", "teardown.py")


def _rerun():
    """This script's own command line again: absolute path, every word quoted."""
    import shlex

    return " ".join(shlex.quote(word) for word in [os.path.abspath(sys.argv[0])] + sys.argv[1:])


def _answer(answer, next_command):
    """``answer`` with ``next`` when this script's answers carry one (tao_brev/nextstep.py;
    ``null`` plus ``next_note`` = the fix when no command fits)."""
    import json

    if os.path.basename(sys.argv[0] if sys.argv else "") in NEXT_SCRIPTS:
        answer["next"] = next_command
        if next_command is None:
            answer["next_note"] = "a person must act first: " + answer["error"]["fix"]
    return json.dumps(answer, indent=2) + "\n"


def _write(fd, text):
    """Write the one answer; a reader that left (``| head``) ends the process quietly, as a
    death by SIGPIPE would (tao_brev/pipes.py)."""
    try:
        os.write(fd, text.encode())
    except BrokenPipeError:
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)


def _interrupted(signum, _frame):
    name = os.path.basename(sys.argv[0] if sys.argv else "script")
    answer = {"ok": False, "error": {"code": "INTERRUPTED",
                                     "message": "%s was interrupted (%s) before it started: nothing was done"
                                                % (name, _NAMES[signum]),
                                     "fix": "Run the same command again: %s" % _rerun()}}
    _write(1, _answer(answer, _rerun()))
    os._exit(130)


# only when a script of this directory runs: a tool that imports one keeps its own handlers
_main = getattr(sys.modules.get("__main__"), "__file__", None) or ""
if _main and os.path.dirname(os.path.abspath(_main)) == os.path.dirname(os.path.abspath(__file__)):
    for _signum in _SIGNALS:
        signal.signal(_signum, _interrupted)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)   # a signal held across the re-exec arrives now

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv")
MIN_PYTHON = (3, 9)                               # pyproject.toml: requires-python
DEPENDENCIES = ("yaml", "jsonschema", "boto3")    # pyproject.toml: dependencies, by import name
OLD_PYTHON = "PYTHON_ENV_MISSING"                 # tao_brev.errors.CODES (exit 3): Python too old
NO_MODULES = "DEPENDENCIES_MISSING"               # tao_brev.errors.CODES (exit 3): a module missing
EXIT_UNREACHABLE = 3


def _findable(name):
    """importlib.util.find_spec(name) is not None, for a top-level name, without importing
    importlib.util (on Python 3.9 it loads typing: a cost on every start, --help included)."""
    if name in sys.modules:
        return True
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is not None and find(name, None) is not None:
            return True
    return False


def _problem(needs):
    """(error code, why this interpreter cannot run the script), or None if it can."""
    version = "%d.%d" % sys.version_info[:2]
    if sys.version_info[:2] < MIN_PYTHON:
        return OLD_PYTHON, "Python %s (%s) started this script; the bundle needs Python >= %d.%d" % (
            (version, sys.executable) + MIN_PYTHON)
    missing = [name for name in needs if not _findable(name)]
    if missing:
        return NO_MODULES, "Python %s (%s) lacks the module(s) %s" % (version, sys.executable, ", ".join(missing))
    return None


def install_command():
    """The command that creates the bundle's environment (tao_brev.nextstep.install_command says the same)."""
    import shlex

    return " ".join(shlex.quote(word) for word in ["bash", os.path.join(ROOT, "install.sh"), "--local"])


def _refuse(problem, json_answer):
    """Stop before any import of the bundle: one JSON answer (or one stderr line), exit 3."""
    code, why = problem
    message = "%s, and the bundle's environment %s is missing or broken." % (why, VENV)
    old = " --python /path/to/python3.9-or-newer" if code == OLD_PYTHON else ""
    import shlex

    fix = ("Create it: %s%s%s; then run the same command again; bash %s --check shows what is installed."
           % (install_command(), old, " (a Python >= 3.9: python3 here is older)" if old else "",
              shlex.quote(os.path.join(ROOT, "install.sh"))))
    try:
        sys.stderr.write("%s: %s\n%s\n" % (os.path.basename(sys.argv[0]), message, fix))
    except BrokenPipeError:
        pass
    if json_answer:
        answer = {"ok": False, "error": {"code": code, "message": message, "fix": fix}}
        _write(1, _answer(answer, install_command() if not old else None))
    sys.exit(EXIT_UNREACHABLE)


def setup(needs=DEPENDENCIES, json_answer=True):
    """Re-execute with ``<bundle>/.venv/bin/python`` unless already in it; else check
    that this interpreter can run the script (``needs``: import names), or stop
    with exit 3. Then put the bundle on ``sys.path``."""
    venv_python = os.path.join(VENV, "bin", "python")
    inside = os.path.realpath(sys.prefix) == os.path.realpath(VENV)
    if not inside and not os.environ.get("TAO_BREV_NO_REEXEC"):
        if os.access(venv_python, os.X_OK):
            signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
            try:
                os.execv(venv_python, [venv_python] + sys.argv)
            except OSError as exc:
                sys.stderr.write("warning: %s cannot start (%s); trying %s\n" % (venv_python, exc, sys.executable))
            finally:   # only reached when the exec failed
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
        elif os.path.lexists(VENV):
            sys.stderr.write("warning: %s has no working bin/python (rerun install.sh); trying %s\n"
                             % (VENV, sys.executable))
    problem = _problem(needs)
    if problem:
        _refuse(problem, json_answer)
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
