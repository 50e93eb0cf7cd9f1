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
is answered too. Without a ``.venv`` (a development checkout with the
dependencies installed) the current interpreter is used.
"""

import os
import signal
import sys

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _interrupted(signum, _frame):
    import json

    name = os.path.basename(sys.argv[0] if sys.argv else "script")
    answer = {"ok": False, "error": {"code": "INTERRUPTED",
                                     "message": f"{name} was interrupted ({signal.Signals(signum).name}) before "
                                                "it started: nothing was done",
                                     "fix": "Run the same command again."}}
    os.write(1, (json.dumps(answer, indent=2) + "\n").encode())
    os._exit(130)


# only when a script of this directory runs: a tool that imports one keeps its own handlers
_main = getattr(sys.modules.get("__main__"), "__file__", None) or ""
if _main and os.path.dirname(os.path.abspath(_main)) == os.path.dirname(os.path.abspath(__file__)):
    for _signum in _SIGNALS:
        signal.signal(_signum, _interrupted)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)   # a signal held across the re-exec arrives now

from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"


def setup() -> None:
    venv_python = VENV / "bin" / "python"
    inside = Path(sys.prefix).resolve() == VENV.resolve()
    if venv_python.exists() and not inside and not os.environ.get("TAO_BREV_NO_REEXEC"):
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        try:
            os.execv(str(venv_python), [str(venv_python), *sys.argv])
        finally:   # only reached when the exec failed
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
