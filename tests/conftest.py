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


def run_script(name: str, *args: str, env: dict | None = None, timeout: float = 120) -> ScriptResult:
    """Run ``scripts/<name>`` as a user would (stdin closed), return its result."""
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / name), *args], capture_output=True,
                          text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
    return ScriptResult(done)


@pytest.fixture
def state_env(tmp_path):
    """A clean environment with a private TAO_STATE_DIR (no developer state leaks in)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "AWS_", "S3_", "BREV_"))}
    for name in ("NGC_KEY", "HF_TOKEN", "WANDB_API_KEY", "ACCESS_KEY", "SECRET_KEY"):
        env.pop(name, None)
    env["TAO_STATE_DIR"] = str(tmp_path / "state")
    env["TAO_BREV_NO_REEXEC"] = "1"
    return env
