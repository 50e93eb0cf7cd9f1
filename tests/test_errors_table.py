"""The error codes and failure classes the documents list are the code's own:
``references/error-codes.md`` is generated from ``errors.CODES``, the tables of
``references/failure-classes.md`` from ``docker_state``, and every error code
written anywhere in the package is registered."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tao_brev import docker_state, errors
from tao_brev.errors import CODES

ROOT = Path(__file__).resolve().parent.parent
ERROR_CODES_MD = ROOT / "references" / "error-codes.md"
FAILURE_CLASSES_MD = ROOT / "references" / "failure-classes.md"
REGENERATE = "python -m tao_brev.errors --markdown > references/error-codes.md"


@pytest.mark.doc_sync
def test_error_codes_md_is_generated_from_codes():
    assert ERROR_CODES_MD.read_text() == errors.markdown(), f"stale: run {REGENERATE}"


@pytest.mark.parametrize("module", ["tao_brev.errors", "tao_brev.docker_state"])
def test_the_generators_run_as_modules(module):
    done = subprocess.run([sys.executable, "-m", module, "--markdown"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == sys.modules[module].markdown()


@pytest.mark.doc_sync
def test_failure_classes_md_embeds_the_generated_tables():
    text = FAILURE_CLASSES_MD.read_text()
    match = re.search(r"<!-- generated: [^>]*-->\n(.*?)<!-- end generated -->", text, re.DOTALL)
    assert match, "failure-classes.md lost its generated markers"
    assert match.group(1) == docker_state.markdown(), \
        "stale: paste the output of python -m tao_brev.docker_state --markdown between the markers"


def test_every_code_is_well_formed():
    for name, code in CODES.items():
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*", name), name
        assert code.exit_code in (1, 2, 3, 130), name
        assert code.meaning.strip() and code.fix.strip(), name
    assert all(code in CODES for _pattern, code in docker_state.DOCKER_ERRORS)


def _literal_codes(tree: ast.AST):
    """(line, code) of every error code written as a literal: the first argument
    of a ``*Error(...)`` call, a ``"code": ...`` dict entry, a ``code=`` or
    ``default=`` keyword or parameter default, an assignment to ``code``."""
    def const(node):
        return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name.endswith("Error") and node.args and const(node.args[0]) is not None:
                yield node.lineno, const(node.args[0])
            for kw in node.keywords:
                if kw.arg in ("code", "default") and const(kw.value) is not None:
                    yield node.lineno, const(kw.value)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            positional = node.args.args[len(node.args.args) - len(node.args.defaults):]
            for arg, default in [*zip(positional, node.args.defaults), *zip(node.args.kwonlyargs, node.args.kw_defaults)]:
                if arg.arg in ("code", "default") and default is not None and const(default) is not None:
                    yield node.lineno, const(default)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is not None and const(key) == "code" and const(value) is not None:
                    yield node.lineno, const(value)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                pairs = [(target, node.value)]
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts))
                for t, v in pairs:
                    if isinstance(t, ast.Name) and t.id == "code" and const(v) is not None:
                        yield node.lineno, const(v)


def test_every_error_code_written_in_the_code_is_registered():
    sources = [*(ROOT / "tao_brev").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    unknown, seen = [], set()
    for path in sources:
        for line, code in _literal_codes(ast.parse(path.read_text(), str(path))):
            if not re.fullmatch(r"[A-Z][A-Z0-9_]+", code):
                continue   # e.g. ValueError("a message")
            seen.add(code)
            if code not in CODES:
                unknown.append(f"{path.relative_to(ROOT)}:{line}: {code}")
    assert not unknown, "codes not in errors.CODES: " + ", ".join(unknown)
    assert {"NEVER_LAUNCHED", "TRANSPORT_FAILED", "BREV_NOT_LOGGED_IN"} <= seen   # the scan sees them


def test_an_unregistered_code_cannot_be_raised():
    with pytest.raises(ValueError):
        errors.TaoBrevError("NO_SUCH_CODE", "x")
