"""Shared fixtures: the schema validator, the script runner, the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.s3server import s3_server  # noqa: F401  (session fixture: a real S3-compatible server)

ROOT = Path(__file__).resolve().parent.parent


def pytest_configure(config):
    """The simulator's modules compiled once: each simulated ``brev`` / ``docker`` call is a Python
    start that imports them, and with PYTHONDONTWRITEBYTECODE=1 (a CI's environment may set it) it
    would compile them from source every time (~26 ms CPU a call, thousands of calls a run).
    ``compileall`` writes the bytecode whatever that variable says, and skips what is current."""
    import compileall

    compileall.compile_dir(str(ROOT / "tests" / "sim"), quiet=1, workers=1)


# The files that take longest (a worker's wall seconds per file, 3 workers on 2 cores, 2026-12-04: from
# 118 s for test_recover.py down to 22 s), scheduled first, longest first: pytest-xdist hands a file to
# a worker as it comes free, in collection order, so a long file collected last would run alone at the
# end while the other workers idle.
LONG_FILES = ("test_recover.py", "test_install.py", "test_resume.py", "test_brev_today.py", "test_robustness.py",
              "test_keep.py", "test_stop_instance.py", "test_one_story.py", "test_s3_tiers.py", "test_cost_guard.py",
              "test_submit_guards.py", "test_answers.py", "test_lifecycle.py", "test_crash_consistency.py",
              "test_chaos.py", "test_preflight_checks.py", "test_brev_edges.py", "test_status_states.py",
              "test_progress.py", "test_simulator.py", "test_known_secrets.py", "test_secrets_e2e.py",
              "test_results.py")


def pytest_collection_modifyitems(session, config, items):
    """Long files first (LONG_FILES, in that order), the rest as collected."""
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: a file's tests keep their order


SCHEMAS = ROOT / "references" / "schemas"
sys.path.insert(0, str(ROOT))


def _registry():
    from referencing import Registry, Resource

    resources = []
    for path in SCHEMAS.glob("*.json"):
        schema = json.loads(path.read_text())
        resources.append((schema["$id"], Resource.from_contents(schema)))
    return Registry().with_resources(resources)


_REGISTRY = None


def validate(schema_name: str, instance) -> None:
    """Validate ``instance`` against ``references/schemas/<schema_name>.schema.json``."""
    global _REGISTRY
    import jsonschema

    if _REGISTRY is None:
        _REGISTRY = _registry()
    schema = json.loads((SCHEMAS / f"{schema_name}.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema, registry=_REGISTRY,
                                                format_checker=jsonschema.FormatChecker())
    validator.validate(instance)


def validate_hint(hint: dict) -> None:
    """A failure hint is valid where answers carry it (a poll_status answer holding just it)."""
    validate("poll_status", {"ok": True, "hint": hint, "next": None, "next_note": "a hint alone"})


class ScriptResult:
    def __init__(self, done: subprocess.CompletedProcess):
        self.code = done.returncode
        self.stdout = done.stdout
        self.stderr = done.stderr
        try:
            self.json = json.loads(done.stdout) if done.stdout.strip() else None
        except json.JSONDecodeError:
            self.json = None

    def __repr__(self):
        return f"<exit {self.code} stdout={self.stdout[:2000]!r} stderr={self.stderr[-2000:]!r}>"


def watching(monkeypatch, name: str, value: str):
    """A generator fixture's body: ``name`` holds ``value`` in this environment and the secrets
    registry watches it (as ``--env NAME`` makes it), reset before and after the test."""
    from tao_brev.secrets import guard as known_secrets

    known_secrets.reset()
    monkeypatch.setenv(name, value)
    known_secrets.watch([name])
    yield
    known_secrets.reset()


def wait_until(predicate, what: str, timeout: float = 120.0) -> None:
    """Poll until ``predicate()`` (an observable event) holds. The timeout only stops a hung
    test; it is generous so that no test depends on how fast or loaded the machine is."""
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def find_python(version: str) -> str:
    """An interpreter of Python ``version`` ("3.9"): this one, ``pythonX.Y`` on PATH, or the newest
    patch release under the pyenv root. Fails the calling test (never skips) when there is none."""
    import glob
    import shutil

    if "%d.%d" % sys.version_info[:2] == version:
        return sys.executable
    roots = {os.environ.get("PYENV_ROOT") or "", str(Path.home() / ".pyenv"), "/root/.pyenv"} - {""}
    found = sorted((p for root in roots for p in glob.glob(f"{root}/versions/{version}.*/bin/python{version}")),
                   key=lambda p: [int(n) for n in Path(p).parent.parent.name.split(".") if n.isdigit()],
                   reverse=True)
    for candidate in [shutil.which(f"python{version}"), *found]:
        if not candidate:
            continue
        done = subprocess.run([candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)"],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.split()[:1] == [version]:
            return done.stdout.split(None, 1)[1].strip()    # the real file, not a pyenv shim
    pytest.fail(f"this test needs Python {version} (as python{version} on PATH or under $PYENV_ROOT/versions); "
                f"install it, e.g. `pyenv install {version}`", pytrace=False)


def tree_leaks(root: Path, leaks) -> list[str]:
    """``"<path below root> <what>"`` for each leak ``leaks(text)`` names in a regular file under ``root``."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            found += [f"{path.relative_to(root)} {what}" for what in leaks(path.read_bytes().decode("utf-8", "replace"))]
    return found


def secrets_world(tmp: Path, box: str, values: dict, ngc_key: str):
    """A generator for a module fixture: a simulator with instance ``box`` (the TAO image pulled) and
    an environment holding ``values`` and no credential of the caller's; yields the world dict."""
    from tests.sim.simctl import Simulator

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TAO_", "AWS_", "S3_", "BREV_")) and k not in ("NGC_KEY", "HF_TOKEN", "WANDB_API_KEY")}
    with Simulator(tmp / "sim") as sim:
        sim.add_instance(box, disk_free_bytes=500 * 10**9)
        sim.preload_image(box, TAO_IMAGE)
        env = sim.env(env)
        env.update(values, TAO_STATE_DIR=str(tmp / "state"), TAO_BREV_NO_REEXEC="1", TAO_BREV_RETRY_BACKOFF_S="0",
                   TAO_RESULTS_ROOT="~/tao-results", NGC_KEY=ngc_key,
                   TAO_BREV_SPEC_LEAVE_OUT="simulate")   # the stand-in's block (state_env)
        yield {"sim": sim, "env": env, "tmp": tmp, "outputs": []}


def run_script(name: str, *args: str, env: dict | None = None, timeout: float = 120) -> ScriptResult:
    """Run ``scripts/<name>`` as a user would (stdin closed), return its result (its answer is
    checked by the tap below, like every script answer of the suite)."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], capture_output=True,
                          text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    return ScriptResult(done)


# Every answer any test reads from one of the bundle's scripts (run_script, subprocess.run, Popen +
# communicate - subprocess.run is communicate too - of this checkout or of an installed copy) is
# checked as it is read: its fix texts agree with the scripts they name, and the four verbs' answers
# carry a `next` that their parser accepts (tests/fixtexts.py). A wrong answer fails the test that
# produced it, whatever that test asserts itself.
_communicate = subprocess.Popen.communicate


def _checked_communicate(self, *args, **kwargs):
    from tests.fixtexts import answer_violations

    out, err = _communicate(self, *args, **kwargs)
    wrong = answer_violations(self.args, out)
    assert not wrong, "\n".join(wrong)
    return out, err


subprocess.Popen.communicate = _checked_communicate


@pytest.fixture
def state_env(tmp_path):
    """A clean environment with a private TAO_STATE_DIR (no developer state leaks in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "AWS_", "S3_", "BREV_"))}
    for name in ("NGC_KEY", "HF_TOKEN", "WANDB_API_KEY", "ACCESS_KEY", "SECRET_KEY"):
        env.pop(name, None)
    env["TAO_STATE_DIR"] = str(tmp_path / "state")
    env["TAO_BREV_NO_REEXEC"] = "1"
    # Read retries without the production waits (2 s, 5 s: tao_brev/transport/settings.py BACKOFF_S), as
    # the unit layer and secrets_world run them: a retry still shows (its exec, its "retrying" line), it
    # just does not sleep. The production waits are checked in tests/test_transport_contract.py.
    env["TAO_BREV_RETRY_BACKOFF_S"] = "0"
    # The simulator's `simulate:` block steers the TAO stand-in; the stand-in sets it aside before
    # its schema merge, so the spec check leaves it out too (tests/test_spec_check.py runs without it).
    env["TAO_BREV_SPEC_LEAVE_OUT"] = "simulate"
    return env


TAO_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt"
EXAMPLE_SPEC = ROOT / "examples" / "visual_changenet" / "train.yaml"
EXAMPLE_DATA = ROOT / "examples" / "data" / "levir_cd_tiny"


class SimWorld:
    """The simulator plus the environment a user's shell would have."""

    def __init__(self, sim, env: dict, tmp_path: Path):
        self.sim = sim
        self.env = env
        self.tmp_path = tmp_path

    def run(self, script: str, *args: str, timeout: float = 120, **extra_env) -> ScriptResult:
        env = {**self.env, **extra_env}
        return run_script(script, *args, env=env, timeout=timeout)

    def spec(self, simulate: dict | None = None, **train) -> Path:
        """The example spec, optionally with a ``simulate:`` block / train overrides."""
        import yaml

        data = yaml.safe_load(EXAMPLE_SPEC.read_text())
        data["train"].update(train)
        if simulate:
            data["simulate"] = simulate
        path = self.tmp_path / f"spec-{len(list(self.tmp_path.glob('spec-*.yaml')))}.yaml"
        path.write_text(yaml.safe_dump(data))
        return path

    def put_dataset(self, instance: str = "box") -> str:
        """Pre-position the tiny dataset on the instance (tier A); returns its instance path."""
        import shutil

        target = self.sim.instance_home(instance) / "tao-data" / "levir_cd_tiny"
        shutil.copytree(EXAMPLE_DATA, target, dirs_exist_ok=True)
        return "~/tao-data/levir_cd_tiny"

    def submit(self, *extra: str, spec: Path | None = None, instance: str = "box", **extra_env) -> ScriptResult:
        """submit.py of the example on ``instance``; its dataset as the input unless ``extra`` names
        the inputs (repeated --inputs add up: submit.py's argparse "extend")."""
        data = None if "--inputs" in extra else self.put_dataset(instance)
        return self.run("submit.py", "--instance", instance, "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train",
                        "--spec", str(spec or self.spec({"epoch_seconds": 0.05})),
                        *(["--inputs", f"{data}=levir_cd_tiny"] if data else []), *extra, **extra_env)


@pytest.fixture
def world(tmp_path, state_env):
    """A RUNNING instance ``box`` with the TAO image already pulled, brev logged in."""
    from tests.sim.simctl import Simulator

    with Simulator(tmp_path / "sim") as sim:
        sim.add_instance("box")
        sim.preload_image("box", TAO_IMAGE)
        yield SimWorld(sim, sim.env(state_env), tmp_path)


@pytest.fixture
def hashed(monkeypatch) -> list:
    """Names of the files ``storage.file_checksum`` reads from now on (the real hash still runs)."""
    from tao_brev.s3 import manifest as storage

    names: list = []
    real = storage.file_checksum

    def spy(path):
        names.append(Path(path).name)
        return real(path)
    monkeypatch.setattr(storage, "file_checksum", spy)
    return names


def pytest_terminal_summary(terminalreporter):
    """The figures tests record (``record_property("figure", text)``: start-up against the bare
    interpreter, ...), printed at the end of the run; with xdist too (the reports carry them)."""
    figures = [value for key in ("passed", "failed") for report in terminalreporter.stats.get(key, [])
               if report.when == "call" for name, value in report.user_properties if name == "figure"]
    if figures:
        terminalreporter.write_sep("-", "figures (measured, not asserted)")
        for text in figures:
            terminalreporter.write_line(text)
