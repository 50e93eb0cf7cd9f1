"""Fail closed when the proof is damaged (issue 28, "fail-open when memory is lost"): a sidecar
whose env_names was emptied or blanked, while its env_proof still holds the digests, no longer
proves "no --env here": the names MAC of the proof (secrets/proof.py) no longer matches, so the
job's output is withheld; a value of a variable whose name does not look like a credential
(DATASET_MIRROR_CFG, passed with --env) is never printed, from the submitting shell or another,
and a teardown stores nothing of it."""
import json
from pathlib import Path

import pytest
import yaml

import conftest
from conftest import EXAMPLE_SPEC, run_script

V = "mRq4/Zt+8sYp2Wn6Kv0Lb5Gh(q)x"
BOX = "openbox"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    yield from conftest.secrets_world(tmp_path_factory.mktemp("fo"), BOX, {"DATASET_MIRROR_CFG": V},
                                      "nvapi-FailOpen0123456789abcdefgh")


@pytest.fixture(scope="module")
def job(world):
    data = yaml.safe_load(EXAMPLE_SPEC.read_text())
    data["simulate"] = {"epoch_seconds": 0.02, "print_env": ["DATASET_MIRROR_CFG"]}
    data.pop("dataset", None)
    spec = world["tmp"] / "job.yaml"
    spec.write_text(yaml.safe_dump(data))
    sub = run_script("submit.py", "--instance", BOX, "--image", "images.tao_toolkit.pyt", "--network-arch",
                     "visual_changenet", "--action", "train", "--spec", str(spec), "--env", "DATASET_MIRROR_CFG",
                     env=world["env"], timeout=180)
    assert sub.code == 0, sub
    world["sim"].wait_container(BOX, sub.json["job_id"])
    return sub.json["job_id"]


@pytest.mark.parametrize("damage", ["empty-names", "names-null-entry"])
@pytest.mark.parametrize("shell", ["same", "unset"])
def test_damaged_env_names_withhold(world, job, damage, shell):
    state = Path(world["env"]["TAO_STATE_DIR"])
    path = state / "brev" / "jobs" / f"{job}.json"
    kept = json.loads(path.read_text())
    side = dict(kept)
    side["env_names"] = [] if damage == "empty-names" else [""]
    path.write_text(json.dumps(side))
    env = dict(world["env"])
    if shell == "unset":
        env.pop("DATASET_MIRROR_CFG")
    try:
        res = run_script("poll_status.py", job, "--logs", "200", env=env, timeout=120)
    finally:
        path.write_text(json.dumps(kept))
    assert V not in res.stdout + res.stderr, f"{damage}/{shell}: the value printed verbatim"


def test_damaged_env_names_then_teardown_stores_nothing(world, job):
    state = Path(world["env"]["TAO_STATE_DIR"])
    path = state / "brev" / "jobs" / f"{job}.json"
    side = json.loads(path.read_text())
    side["env_names"] = []
    path.write_text(json.dumps(side))
    res = run_script("teardown.py", job, env=world["env"], timeout=180)
    stored = conftest.tree_leaks(state, lambda t: ["verbatim"] if V in t else [])
    print("teardown", res.code, "stored:", stored)
    assert V not in res.stdout + res.stderr and not stored, stored
