"""What runs before the bundle's own code: scripts/_bootstrap.py (which Python a
script runs on) and scripts/_pyproject.py (what install.sh and CI read from
pyproject.toml).

Invariants: every script runs on the bundle's environment, or stops with exit 3
and the error PYTHON_ENV_MISSING naming the Python it needs and the install.sh
command - never exit 1 (redact_secrets.py's "credential found"), never a
traceback - even when the python3 first on PATH is older than the bundle's
floor (3.8: Ubuntu 20.04, 3.6: RHEL 8). The dependency lists and the claimed
Pythons are read from pyproject.toml exactly as a TOML parser reads them, on
every claimed Python (no tomllib before 3.11).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tao_brev.errors import CODES
from conftest import find_python, validate

try:
    import tomllib as reference_toml
except ImportError:   # Python < 3.11: tomli, the same parser (test extra of pyproject.toml)
    import tomli as reference_toml

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.name for p in (ROOT / "scripts").glob("[!_]*.py"))
TEXT_SCRIPTS = {"redact_secrets.py"}       # stdout is findings / redacted text, not JSON
OLDER_THAN_THE_CLAIM = ["3.6", "3.8"]      # RHEL 8, Ubuntu 20.04
SECRET_LINE = "export NGC_KEY=nvapi-" + "Q" * 40 + "\n"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pyproject = _load(ROOT / "scripts" / "_pyproject.py", "_pyproject_under_test")
bootstrap = _load(ROOT / "scripts" / "_bootstrap.py", "_bootstrap_under_test")
PYPROJECT = reference_toml.loads((ROOT / "pyproject.toml").read_text())


# -- scripts/_pyproject.py: a TOML reader that agrees with tomllib ------------------------
TRICKY = [
    # what broke the old regex: ']' inside a requirement, then comments and odd spacing
    'test = [\n  "pytest>=7.0",   # comment ]\n  "moto[server]>=5.0",\n  \'awscli>=1.29\' ,\n]\n',
    'a = ["x]y", """multi\n]line""", \'\'\'lit\\eral\'\'\', [1, [2, 3]], {k = "v", "d.k" = true}]\n',
    '[project]\ndependencies = [] # none\n[project.optional-dependencies]\ntest = ["a; python_version < \'3.11\'"]\n',
    'k = """\\\n    folded \\\n    line"""\nq = "tab\\tquote\\" uni\\u00e9"\nend = """ends with quotes"""""\n',
    'a.b.c = 1\n"quoted key" = -2_000\n[[arr]]\nx = 1.5\n[[arr]]\nx = 2e3\n[t . u]\nv = false\n',
]
UNSUPPORTED_OR_BROKEN = ['a = [1, 2\n', 'a = "open\n', 'a = 1979-05-27\n', 'a = 1 b\n', 'a = 1\na = 2\n',
                         'a = inf\n', '[t\nb = 1\n']


def test_the_reader_reads_pyproject_toml_as_tomllib_does():
    assert pyproject.parse((ROOT / "pyproject.toml").read_text()) == PYPROJECT


@pytest.mark.parametrize("text", TRICKY)
def test_the_reader_agrees_with_tomllib_on_tricky_toml(text):
    assert pyproject.parse(text) == reference_toml.loads(text)


@pytest.mark.parametrize("text", UNSUPPORTED_OR_BROKEN)
def test_the_reader_stops_with_a_line_number_instead_of_reading_half(text):
    with pytest.raises(pyproject.TomlError, match=r"^line \d+: "):
        pyproject.parse(text)


def test_requirements_and_claimed_pythons_on_the_oldest_claimed_python():
    """The exact command install.sh runs, on the floor of requires-python (no tomllib there)."""
    project = PYPROJECT["project"]
    floor = project["requires-python"].removeprefix(">=")
    oldest = find_python(floor)
    script = str(ROOT / "scripts" / "_pyproject.py")
    done = subprocess.run([oldest, "-I", script, "requirements", "--extra", "test", str(ROOT / "pyproject.toml")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == project["dependencies"] + project["optional-dependencies"]["test"]
    assert "moto[server]>=5.0" in done.stdout.splitlines() and "awscli>=1.29" in done.stdout.splitlines()
    claimed = subprocess.run([oldest, "-I", script, "pythons"], capture_output=True, text=True, cwd="/")
    newest = max((c.rsplit(" ", 1)[1] for c in project["classifiers"] if re.search(r":: 3\.\d+$", c)),
                 key=lambda v: int(v.split(".")[1]))
    assert claimed.returncode == 0 and claimed.stdout.split() == [floor, newest], claimed
    bad = subprocess.run([oldest, "-I", script, "requirements", "--extra", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_every_copy_of_the_floor_and_the_dependencies_agrees_with_pyproject():
    floor = PYPROJECT["project"]["requires-python"].removeprefix(">=")
    assert "%d.%d" % bootstrap.MIN_PYTHON == floor
    assert re.search(rf'^MIN_PY="{re.escape(floor)}"', (ROOT / "install.sh").read_text(), re.M)
    # omegaconf (+ antlr4, hydra-core) only serve the spec check, which says "not checked" without them: no start needs them
    import_names = {"pyyaml": "yaml", "jsonschema": "jsonschema", "boto3": "boto3", "omegaconf": None,
                    "antlr4-python3-runtime": None, "hydra-core": None}
    dists = [re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower() for req in PYPROJECT["project"]["dependencies"]]
    assert sorted(import_names[d] for d in dists if import_names[d]) == sorted(bootstrap.DEPENDENCIES)


def test_pip_install_is_refused_with_the_way_to_install():
    """pyproject.toml's build backend is _pyproject.py: every hook stops with the install.sh message."""
    system = PYPROJECT["build-system"]
    assert system == {"requires": [], "build-backend": "_pyproject", "backend-path": ["scripts"]}
    for hook in ("get_requires_for_build_wheel", "build_wheel", "build_sdist", "build_editable",
                 "prepare_metadata_for_build_wheel"):
        with pytest.raises(SystemExit) as refused:
            getattr(pyproject, hook)("wheel-dir")
        assert "not a pip package" in str(refused.value) and "bash install.sh" in str(refused.value)


# -- scripts/_bootstrap.py: which Python runs a script --------------------------------------
def _bundle(base: Path, venv: Path | None) -> Path:
    """A bundle with this checkout's code and ``venv`` (or none) as its .venv. scripts/ is a copy:
    Python puts a script's resolved directory on sys.path, so a link would lead to this .venv."""
    bundle = base / "bundle"
    bundle.mkdir()
    shutil.copytree(ROOT / "scripts", bundle / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    for item in ("tao_brev", "references", "versions.yaml", "examples"):
        (bundle / item).symlink_to(ROOT / item)
    if venv is not None:
        (bundle / ".venv").symlink_to(venv)
    return bundle


def _python3_first(base: Path, python: str) -> str:
    """PATH whose python3 is ``python`` (what `#!/usr/bin/env python3` then starts)."""
    bin_dir = base / "python3-bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python)
    return f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"


def _run(bundle: Path, script: str, *args: str, path: str, input: str | None = None, **env):
    return subprocess.run([str(bundle / "scripts" / script), *args], capture_output=True, text=True, input=input,
                          env={"PATH": path, "HOME": str(bundle.parent), "PYTHONDONTWRITEBYTECODE": "1", **env},
                          timeout=120)


@pytest.mark.parametrize("version", OLDER_THAN_THE_CLAIM)
def test_every_script_started_by_an_old_python_runs_on_the_bundles_environment(tmp_path, version):
    bundle = _bundle(tmp_path, Path(sys.prefix))     # this test's own environment stands in for .venv
    path = _python3_first(tmp_path, find_python(version))
    for script in SCRIPTS:
        done = _run(bundle, script, "--help", path=path)
        assert done.returncode == 0 and f"usage: {script}" in done.stdout, (script, done)
    clean = _run(bundle, "redact_secrets.py", "lint", path=path, input="docker login -u '$oauthtoken'\n")
    assert clean.returncode == 0 and clean.stdout == "", clean
    found = _run(bundle, "redact_secrets.py", "lint", path=path, input=SECRET_LINE)
    assert found.returncode == 1 and "NGC_KEY" in found.stdout and "Q" * 40 not in found.stdout, found


def _assert_refused(done, script: str, why: str, code: str = "PYTHON_ENV_MISSING"):
    assert done.returncode == 3, (script, done)
    assert "Traceback" not in done.stderr and why in done.stderr, (script, done)
    if script in TEXT_SCRIPTS:
        assert done.stdout == "", (script, done)
        return
    answer = json.loads(done.stdout)
    validate("error", answer)
    assert answer["error"]["code"] == code and why in answer["error"]["message"], answer
    bundle = Path(done.args[0]).parent.parent
    install = f"bash {bundle / 'install.sh'} --local"
    assert install in answer["error"]["fix"] and "Report it" not in answer["error"]["fix"], answer
    assert ("--python" in answer["error"]["fix"]) == (code == "PYTHON_ENV_MISSING"), answer
    if script in ("preflight.py", "submit.py", "poll_status.py", "teardown.py"):   # the verbs name the next step
        assert answer["next"] == (install if code == "DEPENDENCIES_MISSING" else None), answer
        assert code == "DEPENDENCIES_MISSING" or answer["next_note"].endswith(answer["error"]["fix"]), answer
    else:
        assert "next" not in answer, answer   # bank-format tools keep their format


@pytest.mark.parametrize("version", OLDER_THAN_THE_CLAIM)
def test_without_an_environment_an_old_python_gets_exit_3_and_the_python_it_needs(tmp_path, version):
    bundle = _bundle(tmp_path, None)
    path = _python3_first(tmp_path, find_python(version))
    for script in SCRIPTS:
        done = _run(bundle, script, "--help", path=path)
        _assert_refused(done, script, f"Python {version} (")
        assert "the bundle needs Python >= 3.9" in done.stderr
    # the lint gate's own call: a literal credential must not look like a verdict
    gate = _run(bundle, "redact_secrets.py", "lint", path=path, input=SECRET_LINE)
    _assert_refused(gate, "redact_secrets.py", "needs Python >= 3.9")


def test_a_python_without_the_dependencies_is_named_and_redact_needs_none(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    bundle = _bundle(tmp_path, None)
    path = f"{bare / 'bin'}{os.pathsep}/usr/bin{os.pathsep}/bin"      # the venv's own bin: its python3 has no packages
    for script in SCRIPTS:
        if script in TEXT_SCRIPTS:
            continue
        _assert_refused(_run(bundle, script, "--help", path=path), script, "lacks the module(s) yaml, jsonschema, boto3",
                        "DEPENDENCIES_MISSING")
    found = _run(bundle, "redact_secrets.py", "lint", path=path, input=SECRET_LINE)
    assert found.returncode == 1 and "NGC_KEY" in found.stdout, found   # the standard library suffices


def test_an_environment_that_cannot_start_is_named_and_this_python_used(tmp_path):
    bundle = _bundle(tmp_path, tmp_path / "removed-venv")          # a dangling .venv link
    path = f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"   # a python3 with the dependencies
    done = _run(bundle, "tao_job_record.py", "--help", path=path)
    assert done.returncode == 0 and "usage: tao_job_record.py" in done.stdout, done
    assert f"warning: {bundle / '.venv'} has no working bin/python (rerun install.sh)" in done.stderr


def test_the_refusal_code_is_registered_with_exit_3():
    assert bootstrap.OLD_PYTHON == "PYTHON_ENV_MISSING" and CODES["PYTHON_ENV_MISSING"].exit_code == 3
    assert bootstrap.NO_MODULES == "DEPENDENCIES_MISSING" and CODES["DEPENDENCIES_MISSING"].exit_code == 3
    assert bootstrap.EXIT_UNREACHABLE == 3


@pytest.mark.parametrize("version", OLDER_THAN_THE_CLAIM)
def test_the_start_of_every_script_compiles_on_old_pythons(version):
    """An old python3 reads the whole script file before its setup() runs: no newer syntax in it."""
    old = find_python(version)
    files = [ROOT / "scripts" / name for name in (*SCRIPTS, "_bootstrap.py", "_pyproject.py")]
    source = "import sys\nfor f in sys.argv[1:]: compile(open(f, encoding='utf-8').read(), f, 'exec')\n"
    done = subprocess.run([old, "-c", source, *map(str, files)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# -- start-up: what a script loads before it has anything to do -------------------------------
# A script's --help (and a bad flag) needs argparse and the runner (cli), nothing of the verbs, the
# services or the answer machinery (cli imports tao_brev.answering once a run works or answers).
NOT_FOR_HELP = ("tao_brev.verbs", "tao_brev.s3", "tao_brev.transport", "tao_brev.secrets", "tao_brev.answering",
                "tao_brev.answers", "tao_brev.context", "tao_brev.records", "tao_brev.docker_state",
                "tao_brev.progress", "boto3", "botocore", "jsonschema", "yaml", "omegaconf")
HELP_BUDGET_MS, HELP_BUDGET_X = 60, 6   # CPU time of a --help; times the bare interpreter's


def _imported(*argv: str, **env: str) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True,
                          env={**os.environ, "TAO_BREV_NO_REEXEC": "1", **env}, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_imports_nothing_of_the_verbs_services_or_answers(script):
    """Beyond what the bare interpreter imports (a site .pth file's imports cancel out)."""
    imported = _imported(str(ROOT / "scripts" / script), "--help") - _imported("-c", "pass")
    heavy = sorted(m for m in imported if m.startswith(NOT_FOR_HELP))
    assert heavy == [], f"{script} --help imports {heavy}: import them where a run works (tao_brev.answering)"


def test_help_start_up_figures_against_the_bare_interpreter(record_property):
    """Figures, not a timed assertion (a shared machine's load moves them): each script's --help
    beside `python -c pass`, interleaved, CPU time (user + system, from the kernel); the budget is
    HELP_BUDGET_MS and HELP_BUDGET_X. Printed at the end of the run (conftest.py); the full table
    (installed copy, no bytecode) is bench/bench_overhead.py's."""
    sys.path.insert(0, str(ROOT / "bench"))
    import _measure

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "PYTHON"))}
    env["TAO_BREV_NO_REEXEC"] = "1"
    for script in SCRIPTS:
        ours, bare = _measure.side_by_side([sys.executable, str(ROOT / "scripts" / script), "--help"],
                                           [sys.executable, "-c", "pass"], 3, env)   # exits non-zero: fails
        record_property("figure", f"{script} --help: CPU {ours['cpu'] * 1000:.0f} ms, "
                                  f"{ours['cpu'] / bare['cpu']:.1f}x `python -c pass` ({bare['cpu'] * 1000:.0f} ms); "
                                  f"budget <= {HELP_BUDGET_MS} ms and <= {HELP_BUDGET_X}x; {_measure.load()}")


def test_what_the_interrupt_handler_imports_needs_nothing_the_script_may_be_importing():
    """_bootstrap's handler may run in the middle of any import of the script: the modules it imports
    itself (json, shlex) must load nothing more than themselves once _bootstrap is loaded, or a
    signal during the script's import of re would meet a half-made module (a traceback, not JSON)."""
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import _bootstrap; before = set(sys.modules)\n"
             "for name in _bootstrap._HANDLER_NEEDS: __import__(name)\n"
             "print(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", probe, str(ROOT / "scripts")], capture_output=True, text=True)
    assert done.returncode == 0, done
    own = {name for name in done.stdout.split() if name.split(".")[0] in bootstrap._HANDLER_NEEDS or name == "_json"}
    assert set(done.stdout.split()) == own, done.stdout


def test_a_record_listing_imports_no_verb_transport_or_s3(tmp_path):
    imported = _imported(str(ROOT / "scripts" / "tao_job_record.py"), "list", TAO_STATE_DIR=str(tmp_path))
    heavy = sorted(m for m in imported if m.startswith(("tao_brev.verbs", "tao_brev.transport", "tao_brev.s3",
                                                       "boto3", "jsonschema")))
    assert heavy == [], heavy
