"""A misspelt instance name or job id (a typo, a case-only difference) that has one close known
name: the answer's ``next`` is this run's complete command with it corrected, flags kept."""

from __future__ import annotations

import pytest


def _submit_argv(world, instance):
    return ["--instance", instance, "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
            "--action", "train", "--spec", str(world.spec()), "--inputs", "~/tao-data/levir_cd_tiny=levir_cd_tiny",
            "--shm-size", "32g", "--", "train.num_epochs=2"]


INSTANCE_CASES = {   # (script, argv builder(world, misspelt instance))
    "submit": ("submit.py", _submit_argv),
    "preflight": ("preflight.py", lambda world, name: ["--instance", name]),
    "preflight with flags": ("preflight.py", lambda world, name: ["--instance", name, "--pull"]),
}
TYPOS = {"swapped": "bxo", "upper": "BOX", "one more": "boxx"}


@pytest.mark.parametrize("typo", sorted(TYPOS))
@pytest.mark.parametrize("case", sorted(INSTANCE_CASES))
def test_a_misspelt_instance_gets_the_corrected_command(world, case, typo):
    script, build = INSTANCE_CASES[case]
    argv = build(world, TYPOS[typo])
    res = world.run(script, *argv)
    assert res.json["error"]["code"] == "UNKNOWN_INSTANCE", res.stdout[-400:]
    want = [("box" if w == TYPOS[typo] else w) for w in argv]
    nxt = res.json.get("next") or ""
    assert nxt.split()[0].endswith(f"scripts/{script}"), nxt
    assert all(w.strip("'") in nxt for w in want) and f" {TYPOS[typo]} " not in f"{nxt} ", nxt


JOB_TYPOS = {"upper": str.upper, "upper with flags": str.upper, "last char": lambda j: j[:-1] + ("x" if j[-1] != "x" else "y")}


@pytest.mark.parametrize("typo", sorted(JOB_TYPOS))
def test_a_misspelt_job_id_gets_the_corrected_command(world, typo):
    job = world.submit(spec=world.spec({"epoch_seconds": 0.02})).json["job_id"]
    given = JOB_TYPOS[typo](job)
    extra = ["--logs", "7"] if "flags" in typo else []
    res = world.run("poll_status.py", given, *extra)
    assert res.json["error"]["code"] == "UNKNOWN_JOB", res.stdout[-400:]
    assert res.json["next"].split()[1:] == [job, *extra], res.json["next"]
