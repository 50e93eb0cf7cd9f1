"""The package is type-checked: mypy over ``tao_brev`` (pyproject.toml ``[tool.mypy]``), and the
answer TypedDicts (``tao_brev/model/answer_types/``) are what ``dev/gen_answer_types.py`` makes
of ``references/schemas/`` today.

mypy's errors per module are a ratchet, as tests/test_architecture.py's DEBTS: a module may not
have more than MYPY_DEBTS lists, and one that has fewer fails too until the table is lowered
(``python tests/test_types.py --write``), so it only shrinks. An answer read with a key its
schema lacks (``answer.get("stauts")``) or built with a value of another type is an error here.
"""

from __future__ import annotations

import collections
import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# MYPY_DEBTS begin (python tests/test_types.py --write)
MYPY_DEBTS: dict = {}
# MYPY_DEBTS end

_ERROR = re.compile(r"^(tao_brev/[^:]+\.py):\d+: error: ")


@functools.lru_cache(maxsize=None)
def mypy_errors() -> tuple[dict, str]:
    """mypy's error count per file of the package, and its whole output."""
    pytest.importorskip("mypy", reason="mypy is in the test extra: install.sh --local --dev")
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir",
                           str(ROOT / ".mypy_cache"), "tao_brev"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode in (0, 1), done.stderr[-2000:] + done.stdout[-2000:]
    counts = collections.Counter(m.group(1) for line in done.stdout.splitlines() if (m := _ERROR.match(line)))
    return dict(sorted(counts.items())), done.stdout


def test_mypy_finds_no_error_beyond_the_ratchet():
    now, output = mypy_errors()
    worse = {f: (n, MYPY_DEBTS.get(f, 0)) for f, n in now.items() if n > MYPY_DEBTS.get(f, 0)}
    paid = {f: (now.get(f, 0), n) for f, n in MYPY_DEBTS.items() if now.get(f, 0) < n}
    new = "\n".join(line for line in output.splitlines() if any(line.startswith(f + ":") for f in worse))
    assert not worse, f"new mypy errors (now, listed): {worse}\n{new[:6000]}"
    assert not paid, f"mypy errors fixed: lower MYPY_DEBTS (python tests/test_types.py --write): {paid}"


def test_mypy_sees_an_answer_key_its_schema_lacks(tmp_path):
    """The check has teeth: a misspelt key of a PollAnswer, and a value of the wrong type."""
    pytest.importorskip("mypy", reason="mypy is in the test extra: install.sh --local --dev")
    probe = tmp_path / "probe.py"
    probe.write_text("from tao_brev.model.answer_types import PollAnswer\n"
                     "def f(answer: PollAnswer) -> object:\n"
                     "    answer['polls'] = 'two'\n"
                     "    return answer.get('stauts')\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "--cache-dir",
                           str(ROOT / ".mypy_cache"), str(probe)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={"MYPYPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert 'has no key "stauts"' in done.stdout and '"polls" has incompatible type' in done.stdout, done.stdout


def test_the_answer_types_are_made_from_todays_schemas():
    done = subprocess.run([sys.executable, str(ROOT / "dev" / "gen_answer_types.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def write_debts() -> None:
    me = Path(__file__)
    text = me.read_text(encoding="utf-8")
    head, rest = text.split("# MYPY_DEBTS begin", 1)
    _, tail = rest.split("# MYPY_DEBTS end\n", 1)
    import pprint

    table = pprint.pformat(mypy_errors()[0], width=110, sort_dicts=True)
    me.write_text(f"{head}# MYPY_DEBTS begin (python tests/test_types.py --write)\nMYPY_DEBTS: dict = {table}\n"
                  f"# MYPY_DEBTS end\n{tail}", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_debts()
    else:
        print("\n".join(f"{n:4d} {f}" for f, n in mypy_errors()[0].items()))
