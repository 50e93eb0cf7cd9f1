"""The rehearsal of references/README.md, run as written: a newcomer's whole lifecycle on the
simulator (preflight --pull, submit, poll, logs, cancel, close, cost) in a private temporary
directory, each line as its own shell call, with only the values the answers printed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from conftest import validate

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "references" / "README.md"


def rehearsal_lines() -> list[str]:
    text = README.read_text(encoding="utf-8").split("## Rehearsal on the simulator", 1)[1]
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL).group(1)
    return [line.replace("@SKILL_DIR@", shlex.quote(str(ROOT))) for line in block.splitlines() if line.strip()]


def shell(line: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, env=env, timeout=300,
                          stdin=subprocess.DEVNULL)


def test_the_rehearsal_runs_the_whole_lifecycle_in_a_private_directory(state_env, tmp_path):
    env = {**{k: v for k, v in state_env.items() if k != "TAO_BREV_SPEC_LEAVE_OUT"},   # the env file says it
           "TMPDIR": str(tmp_path)}    # mktemp -d makes the private dir under it
    lines = rehearsal_lines()
    assert len(lines) == 8 and "mktemp -d" in lines[0] and "/tmp/brev-sim" not in "".join(lines)
    first = shell(lines[0], env)
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads(first.stdout)["ok"] is True
    private = re.search(r"rehearsal dir: (\S+)", first.stderr).group(1)
    assert Path(private).parent == tmp_path and (Path(private) / "state").is_dir()

    def call(i: int, job: str = "") -> dict:
        done = shell(lines[i].replace("DIR", private).replace("JOB_ID", job), env)
        answer = json.loads(done.stdout)
        return answer if done.returncode == 0 else {"__exit": done.returncode, **answer}

    submitted = call(1)
    validate("submit", submitted)
    job = submitted["job_id"]
    assert submitted["ok"] and submitted["state"] == "RUNNING", submitted
    polled = call(2, job)
    assert polled["state"] == "RUNNING" and polled["progress"].get("max_epoch") in (None, 30), polled
    logs = call(3, job)
    assert "logs" in logs, logs
    canceled = call(4, job)
    validate("teardown", canceled)
    assert canceled["state"] == "CANCELED" and canceled["container_removed"] is True, canceled
    closed = call(5, job)
    assert closed["state"] == "CANCELED" and closed["next"] is None, closed
    cost = call(6)
    assert cost["total"]["jobs"] == 1 and cost["total"]["estimated_cost_usd"] is not None, cost
    end = shell(lines[7].replace("DIR", private), env)
    assert end.returncode == 0 and not Path(private).exists(), end.stderr
