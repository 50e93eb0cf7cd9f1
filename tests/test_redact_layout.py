"""The layout of tao_brev/secrets/: one job per module, each under 400 lines, imports only at the
top of a module, and no module importing one listed after it in the package's own order (so
no import circle)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tao_brev.secrets

PACKAGE = Path(tao_brev.secrets.__file__).parent
# the order the package's docstring lists its modules in (``- ``name``: ...`` lines)
ORDER = [name for line in tao_brev.secrets.__doc__.splitlines()
         for name in re.findall(r"``(\w+)``", line.split(":")[0]) if line.startswith("- ")]


def _tree(name: str) -> ast.Module:
    return ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))


def _siblings(tree: ast.Module) -> set[str]:
    """The package modules a module imports (``from . import x``, ``from .x import y``)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found.update([node.module] if node.module else [a.name for a in node.names])
    return found


def test_the_order_names_every_module_once():
    modules = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert sorted(ORDER) == modules and len(set(ORDER)) == len(ORDER), ORDER


def test_no_module_imports_a_later_one():
    later = {}
    for i, name in enumerate(ORDER):
        wrong = sorted(_siblings(_tree(name)) & set(ORDER[i:]))
        if wrong:
            later[name] = wrong
    assert later == {}


def test_imports_are_at_the_top_of_each_module_and_the_package_imports_nothing():
    inside = []
    for name in ORDER:
        for node in ast.walk(_tree(name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside += [f"{name}.{node.name}" for sub in ast.walk(node)
                           if isinstance(sub, (ast.Import, ast.ImportFrom))]
    assert inside == []
    package = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    assert not [n for n in package.body if isinstance(n, (ast.Import, ast.ImportFrom))]


def test_every_module_is_under_400_lines():
    long = {p.name: n for p in PACKAGE.glob("*.py") if (n := len(p.read_text(encoding="utf-8").splitlines())) >= 400}
    assert long == {}
