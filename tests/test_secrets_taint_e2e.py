"""Taint end to end on the simulator: a job leaks its --env values in the encodings red teams
used (``tests/sim/leaky_job.py``: encodeURIComponent, printf %q, declare -p, Go JSON, upper-case
JSON escapes, JSON three deep, MIME base64, base64 of UTF-16LE, raw UTF-16LE, URL twice, HTML
entities, quoted-printable, colour codes inside, split over two lines (with a line between, as
stdout and stderr interleave), a Python bytes repr, ...),
names KPIs after them and puts them past the 80th character of a KPI string.

Exits checked, in each case below: stdout and stderr of every script, the saved log, the record,
the sidecar and every other file under TAO_STATE_DIR, and the instance's files after teardown.

* the shell that holds the values: every form is redacted or its line withheld; KPI keys too;
* a shell where WANDB_API_KEY holds ANOTHER value (a rotated key, ``x``, 8 blanks) or none:
  the job's output (logs, KPIs, status message) is withheld, naming the variable;
* the job's sidecar deleted (the proof lost): withheld, the fix says what is missing;
* the sidecar restored, the right values exported: shown again (redacted).
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

import conftest
from conftest import EXAMPLE_SPEC, run_script, validate
from tests.sim.leaky_job import forms

V_WANDB = "Xr7/Qm+Lk2&Vw9!Np4\u00f6Tz6Bc8Hd3Jf~"
V_MIRROR = "mRq4/Zt+8sYp2Wn6Kv0Lb5Gh(q)"
VALUES = {"WANDB_API_KEY": V_WANDB, "DATASET_MIRROR_CFG": V_MIRROR}
BOX = "taintbox"


def pieces(name: str, value: str) -> dict[str, str]:
    """Distinctive texts that must appear nowhere: each leaked form's lines (8+ characters, the
    ones that hold a part of the value), the value itself and its plain encodings (computed here)."""
    out = {"verbatim": value, "base64": base64.b64encode(value.encode()).decode(), "url": quote(value, safe="")}
    for how, text in forms(name, value).items():
        for number, line in enumerate(text.replace("\x1b", "\n").split("\n")):
            if len(line.strip()) >= 8 and not line.startswith("declare -x"):
                out[f"{how}:{number}"] = line.strip()
        out[f"{how}:tail"] = text[-12:]
    out["first-10"] = value[:10]   # what a cut before redaction leaves (80 + 10 characters)
    return out


def leaks(text: str) -> list[str]:
    return [f"{name}:{how}" for name, value in VALUES.items() for how, piece in pieces(name, value).items()
            if piece and piece in text]


def tree_leaks(root: Path) -> list[str]:
    return conftest.tree_leaks(root, leaks)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    yield from conftest.secrets_world(tmp_path_factory.mktemp("taint"), BOX, VALUES, "nvapi-TaintE2Ekey0123456789abcdef")


def run(world, script, *args, env=None):
    res = run_script(script, *args, env=env or world["env"], timeout=180)
    world["outputs"].append((f"{script} {' '.join(args)}", res.stdout, res.stderr))
    return res


def shell(world, **changes):
    env = dict(world["env"])
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


@pytest.fixture(scope="module")
def flow(world):
    sim, out = world["sim"], {}
    data = yaml.safe_load(EXAMPLE_SPEC.read_text())
    data["simulate"] = {"epoch_seconds": 0.05, "leak_env": list(VALUES)}
    data.pop("dataset", None)
    spec = world["tmp"] / "job.yaml"
    spec.write_text(yaml.safe_dump(data))
    sub = out["submit"] = run(world, "submit.py", "--instance", BOX, "--image", "images.tao_toolkit.pyt",
                              "--network-arch", "visual_changenet", "--action", "train", "--spec", str(spec),
                              "--env", "WANDB_API_KEY", "--env", "DATASET_MIRROR_CFG")
    assert sub.code == 0, sub
    job = out["job"] = sub.json["job_id"]
    sim.wait_container(BOX, job)
    out["printed"] = sim.container_logs(BOX, job)
    poll = ("poll_status.py", job, "--logs", "400", "--metrics")
    for case, value in (("rotated", "Yq8/Rn+Ml3&Wx0!Oq5\u00f6Ua7Cd9Ie4Kg~"), ("x", "x"), ("blanks", " " * 8),
                        ("unset", None)):   # first: what an unproven poll reads is never stored
        out[case] = run(world, *poll, env=shell(world, WANDB_API_KEY=value))
    state = Path(world["env"]["TAO_STATE_DIR"])
    out["state_after_unproven"] = tree_leaks(state)
    out["same"] = run(world, *poll)
    sidecar = state / "brev" / "jobs" / f"{job}.json"
    kept = world["tmp"] / "sidecar.bak"
    shutil.copy2(sidecar, kept)
    sidecar.unlink()
    out["lost"] = run(world, *poll, env=shell(world, WANDB_API_KEY=None))
    out["lost_same_shell"] = run(world, *poll)
    damaged = json.loads(kept.read_text())
    damaged.pop("env_names")
    sidecar.write_text(json.dumps(damaged))
    out["no_names"] = run(world, *poll)
    shutil.copy2(kept, sidecar)
    out["restored"] = run(world, *poll)
    out["teardown"] = run(world, "teardown.py", job)
    return out


def test_the_job_leaked_every_form(flow):
    printed = flow["printed"]
    assert all(text.split("\n")[0] in printed for name, value in VALUES.items()
               for text in forms(name, value).values())


def test_the_shell_holding_the_values_shows_the_output_without_any_form(flow):
    res = flow["same"]
    assert res.code == 0 and "withheld" not in res.json, res
    validate("poll_status", res.json)
    assert "Execution status" in res.json["logs"]
    assert leaks(res.stdout + res.stderr) == []
    kpi = res.json["progress"].get("kpi") or {}
    assert any(key.startswith("acc_<redacted>") or key == "<redacted>" for key in kpi), kpi   # keys redacted
    assert "[tao-brev: withheld: this line held the value of" in res.json["logs"]           # decoded forms


@pytest.mark.parametrize("case", ["rotated", "x", "blanks", "unset"])
def test_a_shell_with_another_value_or_none_gets_the_output_withheld(flow, case):
    res = flow[case]
    assert res.code == 0, res
    validate("poll_status", res.json)
    assert leaks(res.stdout + res.stderr) == []
    assert res.json["withheld"]["names"] == ["WANDB_API_KEY"], res.json
    assert "logs" in res.json["withheld"]["fields"] and "withheld" in res.json["logs"]
    assert "export WANDB_API_KEY" in res.json["withheld"]["fix"]
    assert not res.json["progress"].get("kpi") and "kpi" in res.json["withheld"]["fields"]


@pytest.mark.parametrize("case", ["lost", "lost_same_shell", "no_names"])
def test_a_lost_or_damaged_proof_withholds_even_in_the_shell_with_the_values(flow, case):
    res = flow[case]
    assert leaks(res.stdout + res.stderr) == []
    if res.code == 0:
        assert "*" in res.json["withheld"]["names"] and "withheld" in res.json["logs"], res.json
        assert "sidecar" in res.json["withheld"]["fix"]
    else:   # no sidecar: the verb may stop (it names the instance from it); never with the output
        assert res.json["error"]["code"], res


def test_polls_that_cannot_prove_the_values_store_nothing_of_the_job(flow):
    assert flow["state_after_unproven"] == []


def test_the_restored_proof_shows_the_output_again(flow):
    res = flow["restored"]
    assert res.code == 0 and "withheld" not in res.json and "Execution status" in res.json["logs"], res
    assert leaks(res.stdout + res.stderr) == []


def test_no_form_in_any_output_the_state_dir_or_the_instance(world, flow):
    assert flow["teardown"].code == 0, flow["teardown"]
    for what, stdout, stderr in world["outputs"]:
        assert leaks(stdout + stderr) == [], what
    state = Path(world["env"]["TAO_STATE_DIR"])
    assert tree_leaks(state) == []
    saved = (state / "brev" / "logs" / f"{flow['job']}.log").read_text()
    assert "Execution status" in saved and "\x1b" not in saved    # terminal escapes stripped
    results = f"home/tao-results/{flow['job']}/"   # what the job itself wrote into its results: its own
    assert [hit for hit in tree_leaks(world["sim"].world.instance_dir(BOX)) if not hit.startswith(results)] == []
    proof = json.loads((state / "brev" / "jobs" / f"{flow['job']}.json").read_text())["env_proof"]
    assert proof["alg"] == "hmac-sha256" and sorted(proof["digests"]) == sorted(VALUES)
    key = state / "brev" / "env-proof.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600"
