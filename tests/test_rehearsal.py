"""The rehearsal of references/README.md, run verbatim: a newcomer's whole lifecycle on the
simulator (preflight --pull, submit, poll, logs, cancel, close, cost) in a private temporary
directory, each line pasted as printed into its own shell call (only @SKILL_DIR@ read as the
checkout's path): the lines themselves carry the directory and the job id from call to call."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

from conftest import validate

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "references" / "README.md"
POINTER = ".tao-brev-rehearsal"   # in $HOME: the lines say where the private dir is


def rehearsal_lines() -> list[str]:
    text = README.read_text(encoding="utf-8").split("## Rehearsal on the simulator", 1)[1]
    block = re.search(r"```bash\n(.*?)```", text, re.DOTALL).group(1)
    return [line.replace("@SKILL_DIR@", shlex.quote(str(ROOT))) for line in block.splitlines() if line.strip()]


def test_every_line_pastes_as_printed():
    lines = rehearsal_lines()
    assert len(lines) == 8 and "mktemp -d" in lines[0] and "/tmp/brev-sim" not in "".join(lines)
    for line in lines:   # nothing left for the user to fill in
        assert not re.search(r"\bDIR\b|JOB_ID|<[a-z_]+>", line), line
    for line in lines[1:]:
        assert line.startswith(f'D=$(cat "$HOME/{POINTER}") && . "$D/env" && '), line
    assert lines[-1].endswith(f'rm -rf "$D" "$HOME/{POINTER}"'), lines[-1]


def test_the_rehearsal_runs_the_whole_lifecycle_in_a_private_directory(state_env, tmp_path):
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    env = {**{k: v for k, v in state_env.items() if k not in ("TAO_BREV_SPEC_LEAVE_OUT", "TAO_STATE_DIR")},
           "HOME": str(home), "TMPDIR": str(tmp)}   # the env file sets both; mktemp -d makes the dir under TMPDIR
    lines = rehearsal_lines()

    def call(i: int, schema: str | None = None) -> dict:
        done = subprocess.run(["bash", "-c", lines[i]], capture_output=True, text=True, env=env, timeout=300,
                              stdin=subprocess.DEVNULL)
        answer = json.loads(done.stdout)
        assert done.returncode == 0, (lines[i], done.stderr[-3000:], answer)
        if schema:
            validate(schema, answer)
        return answer

    preflight = call(0, "preflight")
    assert preflight["ok"] is True, preflight
    private = Path((home / POINTER).read_text().strip())
    assert private.parent == tmp and (private / "state").is_dir() and (private / "env").is_file()

    submitted = call(1, "submit")
    job = submitted["job_id"]
    assert submitted["ok"] and submitted["state"] == "RUNNING", submitted
    assert (private / "job").read_text().strip() == job
    assert json.loads((private / "submit.json").read_text())["job_id"] == job

    polled = call(2, "poll_status")
    progress = polled["progress"]
    assert polled["job_id"] == job and polled["state"] == "RUNNING", polled
    # before the first 20 s epoch ends the note says why there is no ETA; after it, the epoch of 30
    assert progress.get("eta_note") or progress.get("num_epochs") == 30, progress
    logs = call(3, "poll_status")
    assert logs["job_id"] == job and "logs" in logs, logs
    canceled = call(4, "teardown")
    assert canceled["state"] == "CANCELED" and canceled["container_removed"] is True, canceled
    closed = call(5, "poll_status")
    assert closed["state"] == "CANCELED" and closed["next"] is None, closed
    cost = call(6)
    assert cost["ok"] and cost["total"]["jobs"] == 1 and cost["total"]["estimated_cost_usd"] is not None, cost
    assert [j["job_id"] for j in cost["jobs"]] == [job], cost

    end = subprocess.run(["bash", "-c", lines[7]], capture_output=True, text=True, env=env, timeout=300,
                         stdin=subprocess.DEVNULL)
    assert end.returncode == 0, end.stderr
    assert not private.exists() and not (home / POINTER).exists()
    assert list(tmp.iterdir()) == [], list(tmp.iterdir())   # (other tools on PATH may write to HOME)
