"""tao_brev/lazy_re.py: a pattern compiled on first use answers exactly as the
compiled pattern does, and importing the package's modules compiles none of theirs.

Invariant: a module-level pattern costs nothing until it is used, and once used it
is ``re.compile(pattern, flags)`` - same matches, same flags, same groups.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

from tao_brev import lazy_re

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    (r"(?P<name>[A-Z_]+)=(?P<val>\S+)", 0, "export NGC_KEY=nvapi-x AWS_X=y"),
    (r"^\s*-\s+(\w+)$", re.MULTILINE, "a:\n - one\n - two\n"),
    (r"token", re.IGNORECASE, "TOKEN Token token"),
]


def test_a_lazy_pattern_answers_as_the_compiled_one():
    for pattern, flags, text in CASES:
        lazy, compiled = lazy_re.compile(pattern, flags), re.compile(pattern, flags)
        assert lazy.pattern == compiled.pattern and lazy.flags == compiled.flags
        assert lazy.groupindex == compiled.groupindex and lazy.groups == compiled.groups
        assert lazy.search(text).span() == compiled.search(text).span()
        assert [m.groups() for m in lazy.finditer(text)] == [m.groups() for m in compiled.finditer(text)]
        assert lazy.sub("<r>", text) == compiled.sub("<r>", text)
        assert lazy.split(text) == compiled.split(text) and lazy.findall(text) == compiled.findall(text)
        assert repr(lazy) == repr(compiled)


def test_a_bad_pattern_fails_when_used_as_re_compile_would():
    lazy = lazy_re.compile(r"(unclosed")
    try:
        lazy.search("x")
    except re.error as exc:
        assert "missing )" in str(exc)
    else:
        raise AssertionError("an invalid pattern matched")


def test_importing_the_package_compiles_no_pattern_of_its_own():
    """Every module of tao_brev is imported in a fresh interpreter with re.compile counted:
    none of the package's files calls it at import."""
    modules = sorted(p.stem for p in (ROOT / "tao_brev").glob("*.py") if p.stem != "__init__")
    probe = (
        "import re, sys\n"
        "seen = []\n"
        "real = re._compile\n"
        "def counting(*args, **kwargs):\n"
        # frames only (no source lines: reading them imports tokenize, which compiles patterns itself);
        # re is a package from 3.11 on (re/__init__.py), a module before (re.py)
        "    f = sys._getframe(1)\n"
        "    while f is not None and ('/re/' in f.f_code.co_filename or f.f_code.co_filename.endswith('/re.py')):\n"
        "        f = f.f_back\n"
        "    if f is not None and '/tao_brev/' in f.f_code.co_filename:\n"
        "        seen.append(f'{f.f_code.co_filename}:{f.f_lineno}')\n"
        "    return real(*args, **kwargs)\n"
        "re._compile = counting\n"
        f"for name in {modules!r}: __import__('tao_brev.' + name)\n"
        "for name in ('status', 'submit', 'teardown', 'preflight', 'orphans'): __import__('tao_brev.verbs.' + name)\n"
        "print('\\n'.join(seen))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    own = [line for line in done.stdout.splitlines() if line]
    assert own == [], own


def test_the_module_is_importable_by_its_name():
    assert importlib.import_module("tao_brev.lazy_re").compile is lazy_re.compile
