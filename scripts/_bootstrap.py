"""Shared start of every script: find the bundle and its isolated environment.

``install.sh`` puts the Python dependencies in ``<bundle>/.venv``; a script
started with any other interpreter re-executes itself with that one, so an
agent just runs ``scripts/<name>.py``. Without a ``.venv`` (a development
checkout with the dependencies installed) the current interpreter is used.
"""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"


def setup() -> None:
    venv_python = VENV / "bin" / "python"
    inside = Path(sys.prefix).resolve() == VENV.resolve()
    if venv_python.exists() and not inside and not os.environ.get("TAO_BREV_NO_REEXEC"):
        os.execv(str(venv_python), [str(venv_python), *sys.argv])
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
