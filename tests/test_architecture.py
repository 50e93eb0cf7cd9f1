"""The package's shape, read from its source with ``ast`` (ARCHITECTURE.md, "Rules of the house"):

- no import circle between the package's modules (an import inside a function counts:
  it hides a circle, it does not remove it);
- no import inside a function except of the declared lazy boundary (LAZY: third-party
  libraries whose import costs a script that does not use them; HELP_BOUNDARY: the package
  modules a ``--help`` must not load, imported where a run starts working);
- no module over 400 lines; no function over 60 lines in the verbs;
- no module below the script layer imports the CLI runner (``tao_brev.cli``).

What the code owes today is DEBTS, a ratchet: a module may not owe more than it is
listed with, and a listed debt that is paid (or smaller) fails too, so the table only
shrinks. ``python tests/test_architecture.py`` prints the table as it stands; ``--write``
puts it here (after paying a debt).
"""

from __future__ import annotations

import ast
import functools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tao_brev"
LAZY = frozenset({"boto3", "botocore", "yaml", "omegaconf", "nvidia_tao_core", "jsonschema", "hydra"})
# The --help path (tests/test_bootstrap.py): cli loads what a run needs once it works, run_state's
# say() the redaction; imported with their module they would cost every --help (ARCHITECTURE.md).
HELP_BOUNDARY = {"tao_brev.cli": {"tao_brev.answering", "tao_brev.context"},
                 "tao_brev.run_state": {"tao_brev.secrets.redact"}}
# Modules whose subject is a JSON document of any shape (the edge, where any script's answer becomes
# JSON: cli.run and answering; an answer walked whole for redaction,
# withholding and the size cap; a state file read or written whole; a spec as YAML gave it): there
# ``dict[str, Any]`` is the type. Elsewhere a signature names what it takes (model/answer_types).
FREE_FORM = frozenset({"tao_brev.cli", "tao_brev.answering", "tao_brev.answers", "tao_brev.logcap",
                       "tao_brev.secrets.redact", "tao_brev.secrets.withhold",
                       "tao_brev.secrets.safe_read", "tao_brev.model.base", "tao_brev.fsio", "tao_brev.yaml_bounded",
                       "tao_brev.record_schema", "tao_brev.secrets.parsed", "tao_brev.secrets.interpolation",
                       "tao_brev.tao_schema", "tao_brev.tao_schema_values", "tao_brev.spec_paths"})
MAX_MODULE_LINES = 400
MAX_VERB_FUNCTION_LINES = 60
CLI = "tao_brev.cli"

# The ratchet (python tests/test_architecture.py prints it anew): what each rule still finds.
# DEBTS begin (python tests/test_architecture.py --write)
DEBTS: dict = {'circles': [],
 'function_imports': {},
 'import_cli': [],
 'long_modules': {'tao_brev.cost': 401},
 'long_verb_functions': {},
 'untyped_dicts': {'tao_brev.bank': 3,
                   'tao_brev.resume': 1,
                   'tao_brev.sidecar': 1,
                   'tao_brev.spec_check': 1,
                   'tao_brev.tao_gpus': 3,
                   'tao_brev.verbs.submit.guards': 2,
                   'tao_brev.verbs.submit.spec_guards': 2}}
# DEBTS end


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text(encoding="utf-8"), str(p))
            for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def resolve(importer: str, node: ast.ImportFrom | ast.Import, is_package: bool) -> list[str]:
    """The absolute module names an import statement loads (``from . import x`` may name a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level == 0:
        base = node.module or ""
    else:
        parts = importer.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = ".".join(parts[:keep] + ([node.module] if node.module else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def imports(tree: ast.AST) -> list[ast.stmt]:
    """Every import statement of a module, at module level or in a function (an import put in a
    function still ties the two modules: it only hides the circle until the call), but not
    those under ``if TYPE_CHECKING:`` (type hints only)."""
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo += node.orelse
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        todo += ast.iter_child_nodes(node)
    return found


def import_graph(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    graph = {}
    for name, tree in trees.items():
        is_package = (PACKAGE / Path(*name.split(".")[1:]) / "__init__.py").is_file() if "." in name \
            else True
        targets = {t for node in imports(tree) for t in resolve(name, node, is_package)}
        graph[name] = {t for t in targets if t in trees and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _loads(trees: dict[str, ast.Module], importer: str, node: ast.ImportFrom) -> set[str]:
    """The package modules a relative import loads: the modules it names, else the one it is from."""
    is_package = (PACKAGE / Path(*importer.split(".")[1:]) / "__init__.py").is_file() if "." in importer \
        else True
    base, *named = resolve(importer, node, is_package)
    return {m for m in named if m in trees} or {base}


def function_imports(trees: dict[str, ast.Module]) -> dict[str, int]:
    """Per module: imports inside a function of anything but the lazy boundary."""
    counts = {}
    for name, tree in trees.items():
        n = 0
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Import):
                    roots = [a.name.split(".")[0] for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    roots = ["."] if node.level else [(node.module or "").split(".")[0]]
                else:
                    continue
                if roots == ["."] and _loads(trees, name, node) <= HELP_BOUNDARY.get(name, set()):
                    continue
                n += sum(1 for r in roots if r not in LAZY)
        if n:
            counts[name] = n
    return counts


def long_modules() -> dict[str, int]:
    return {module_name(p): n for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts
            for n in [len(p.read_text(encoding="utf-8").splitlines())] if n > MAX_MODULE_LINES}


def long_verb_functions(trees: dict[str, ast.Module]) -> dict[str, int]:
    return {f"{name}:{fn.name}": fn.end_lineno - fn.lineno + 1
            for name, tree in trees.items() if name.startswith("tao_brev.verbs")
            for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            and fn.end_lineno - fn.lineno + 1 > MAX_VERB_FUNCTION_LINES}


def _untyped(annotation: ast.AST) -> int:
    """How many untyped mappings an annotation names: a bare ``dict`` / ``Dict`` / ``Mapping``,
    or one of ``str`` to ``Any`` / ``object`` (a TypedDict or ``dict[str, int]`` says its shape)."""
    n = 0
    for node in ast.walk(annotation):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) in MAPPINGS:
            n += ast.unparse(node.slice).strip("()") in ("str, Any", "str, object")
        elif isinstance(node, ast.Name) and node.id in MAPPINGS:
            n += 1
    subscripted = sum(1 for node in ast.walk(annotation) if isinstance(node, ast.Subscript)
                      and ast.unparse(node.value) in MAPPINGS)
    return n - subscripted   # a subscripted name was counted as a Name too


MAPPINGS = frozenset({"dict", "Dict", "Mapping", "MutableMapping"})


def untyped_dicts(trees: dict[str, ast.Module]) -> dict[str, int]:
    """Per module (but the FREE_FORM ones): untyped mappings in function signatures."""
    counts = {}
    for name, tree in trees.items():
        if name in FREE_FORM:
            continue
        n = 0
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs + \
                    [a for a in (fn.args.vararg, fn.args.kwarg) if a]
                n += sum(_untyped(a.annotation) for a in args if a.annotation)
                n += _untyped(fn.returns) if fn.returns else 0
        if n:
            counts[name] = n
    return counts


def import_cli(trees: dict[str, ast.Module]) -> list[str]:
    graph = import_graph(trees)
    return sorted(name for name, targets in graph.items() if CLI in targets and name != CLI)


@functools.lru_cache(maxsize=None)
def measured() -> dict:
    trees = modules()
    return {"circles": circles(import_graph(trees)), "function_imports": function_imports(trees),
            "long_modules": long_modules(), "long_verb_functions": long_verb_functions(trees),
            "import_cli": import_cli(trees), "untyped_dicts": untyped_dicts(trees)}


def _ratchet(rule: str) -> None:
    now, owed = measured()[rule], DEBTS[rule]   # the cached reading: tests do not change the tree
    if isinstance(owed, dict):
        worse = {k: (v, owed.get(k)) for k, v in now.items() if v > owed.get(k, 0)}
        paid = {k: (now.get(k), v) for k, v in owed.items() if now.get(k, 0) < v}
    else:
        worse = [x for x in now if x not in owed]
        paid = [x for x in owed if x not in now]
    assert not worse, f"{rule}: new debt (now, listed): {worse}"
    assert not paid, f"{rule}: debt paid, lower DEBTS[{rule!r}] (now, listed): {paid}"


def test_no_import_circle_beyond_the_ratchet():
    _ratchet("circles")


def test_no_function_level_import_but_the_lazy_boundary():
    _ratchet("function_imports")


def test_no_module_over_400_lines():
    _ratchet("long_modules")


def test_no_verb_function_over_60_lines():
    _ratchet("long_verb_functions")


def test_no_module_below_the_scripts_imports_the_cli_runner():
    _ratchet("import_cli")


def test_no_untyped_mapping_in_a_signature_beyond_the_ratchet():
    """An answer, a record, a sidecar or any other structure a function takes or gives has a type
    (model/answer_types' TypedDicts, model's dataclasses, ``dict[str, int]``...), not ``dict``."""
    _ratchet("untyped_dicts")


def test_the_rules_see_what_they_claim(tmp_path, monkeypatch):
    """The readers themselves: a circle, a relative import of a package, a lazy import."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    tree = ast.parse("import os\ndef f():\n    import yaml\n    from . import x\n    import json\n")
    assert function_imports({"m": tree}) == {"m": 2}
    cli = ast.parse("def f():\n    from . import answering\n    from .context import Context\n"
                    "    from . import records\n")
    trees = {"tao_brev.cli": cli, "tao_brev.answering": tree, "tao_brev.context": tree, "tao_brev.records": tree}
    assert function_imports(trees) == {"tao_brev.cli": 1, "tao_brev.answering": 2, "tao_brev.context": 2,
                                       "tao_brev.records": 2}   # the --help boundary names answering, context only
    typed = ast.parse("def f(a: dict, b: dict[str, Any], c: dict[str, int], d: list[dict] | None,\n"
                      "      e: PollAnswer, *f: Mapping[str, object], **g: Dict) -> dict | None: ...")
    assert untyped_dicts({"tao_brev.x": typed, "tao_brev.answers": typed}) == {"tao_brev.x": 6}
    node = ast.parse("from ..errors import TaoBrevError").body[0]
    assert resolve("tao_brev.verbs.status", node, False)[0] == "tao_brev.errors"
    node = ast.parse("from . import remote").body[0]
    assert "tao_brev.verbs.remote" in resolve("tao_brev.verbs", node, True)


def write_debts() -> None:
    """Rewrite the DEBTS block of this file with what the rules find now."""
    import pprint

    me = Path(__file__)
    text = me.read_text(encoding="utf-8")
    head, rest = text.split("# DEBTS begin", 1)
    _, tail = rest.split("# DEBTS end\n", 1)
    table = pprint.pformat(measured(), width=110, sort_dicts=True)
    me.write_text(f"{head}# DEBTS begin (python tests/test_architecture.py --write)\nDEBTS: dict = {table}\n"
                  f"# DEBTS end\n{tail}", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_debts()
    else:
        import pprint

        pprint.pprint(measured(), width=110, sort_dicts=True)
