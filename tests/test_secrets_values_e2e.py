"""The value guard end to end: shapeless secrets the process knows never leave it.

Two shapeless values (no known prefix, with ``/`` and ``+`` so every encoding
differs): one under a credential name (``WANDB_API_KEY``), one under an
unusual ``--env`` name that no pattern would ever call a credential
(``DATASET_MIRROR_CFG``). They are written into a spec (block and flow style),
an override, a stored name and a job's output (verbatim, URL-encoded with
lower-case escapes, JSON with ``\\/``, base64):

* every submit that carries one is refused (exit 2, SECRET_IN_COMMAND /
  SECRET_IN_IDENTIFIER) before any ``brev exec``, before a record opens, naming
  where and which variable, never the value;
* the submit that passes them with ``--env`` runs, the job prints them, and
  ``poll_status.py --logs`` - also from a later shell that only has the
  unusual variable set, not on its command line - and the log teardown saves
  show ``<redacted>`` instead;
* afterwards no form of either value is in the simulator's audit (every argv
  of brev, docker, the remote shell and the container), any script output,
  any file under TAO_STATE_DIR (which is 0700, its files 0600) or any file on
  the instance. The documented residual exposure is Docker's own store of a
  container's environment and logs, asserted exactly while the container
  exists, and gone after teardown.
"""

from __future__ import annotations

import base64
import json
import re
import stat
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

import conftest
from conftest import EXAMPLE_SPEC, run_script, validate

V_WANDB = "Xr7/Qm+Lk2Vw9Np4Tz6Bc8Hd3Jf"      # under a credential name
V_MIRROR = "mRq4/Zt+8sYp2Wn6Kv0Lb5Gh"         # under an unusual --env name
VALUES = {"WANDB_API_KEY": V_WANDB, "DATASET_MIRROR_CFG": V_MIRROR}
BOX = "valuebox"


def forms(value: str) -> dict[str, str]:
    """Every encoding of ``value`` that must not appear anywhere (computed here, not by the bundle)."""
    upper = quote(value, safe="")
    return {"verbatim": value, "url": upper, "url-lower": re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), upper),
            "url-keep-slash": quote(value, safe="/"), "json-slash": json.dumps(value)[1:-1].replace("/", "\\/"),
            "base64": base64.b64encode(value.encode()).decode()}


def leaks(text: str) -> list[str]:
    return [f"{name}:{how}" for name, value in VALUES.items() for how, form in forms(value).items() if form in text]


def tree_leaks(root: Path) -> list[str]:
    return conftest.tree_leaks(root, leaks)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    yield from conftest.secrets_world(tmp_path_factory.mktemp("values"), BOX, VALUES, "nvapi-ValuesE2Ekey0123456789abcd")


def run(world, script, *args, env=None, schema=None):
    res = run_script(script, *args, env=env or world["env"], timeout=120)
    world["outputs"].append((f"{script} {' '.join(args)}", res.stdout, res.stderr))
    if schema:
        assert res.json is not None, res
        validate(schema, res.json)
    return res


def spec_file(world, name: str, extra: str = "", simulate: dict | None = None) -> Path:
    data = yaml.safe_load(EXAMPLE_SPEC.read_text())
    data["simulate"] = {"epoch_seconds": 0.05, **(simulate or {})}
    data.pop("dataset", None)   # no inputs: the job reads nothing
    # a reference, where the real schema has a string (nvidia-tao-core's ExperimentConfig.wandb)
    data["wandb"] = {"enable": False, "name": "${oc.env:WANDB_API_KEY}"}
    path = world["tmp"] / name
    path.write_text(yaml.safe_dump(data) + extra)
    return path


def submit_args(spec: Path, *extra: str) -> list[str]:
    # the refused specs carry keys TAO's schema lacks (logging, mirror, ...): the secret guards refuse them
    # before the schema check would
    return ["--instance", BOX, "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
            "--action", "train", "--spec", str(spec), "--env", "WANDB_API_KEY", "--env", "DATASET_MIRROR_CFG", *extra]


def encoded_lower(value: str) -> str:
    return forms(value)["url-lower"]


REFUSED = [
    # (id, spec extra text, extra args, error code, what the message names)
    ("spec-block", f"logging:\n  note: {V_WANDB}\n", [], "SECRET_IN_COMMAND", "WANDB_API_KEY"),
    ("spec-flow", f"mirror: {{enable: true, cfg: '{V_MIRROR}'}}\n", [], "SECRET_IN_COMMAND", "DATASET_MIRROR_CFG"),
    ("spec-url-encoded", f"mirror_url: https://m.example/?k={encoded_lower(V_MIRROR)}\n", [], "SECRET_IN_COMMAND",
     "DATASET_MIRROR_CFG"),
    ("override", "", ["--", f"train.wandb.key={V_WANDB}"], "SECRET_IN_COMMAND", "WANDB_API_KEY"),
    ("override-json", "", ["--", f"dataset.mirror={json.dumps(V_MIRROR)[1:-1].replace('/', chr(92) + '/')}"],
     "SECRET_IN_COMMAND", "DATASET_MIRROR_CFG"),
    # spellings only a parser turns into the value: YAML escapes and a line continuation, Hydra quoting
    ("spec-escaped", "mirror:\n  cfg: \"" + "".join(f"\\x{ord(c):02x}" for c in V_MIRROR) + "\"\n", [],
     "SECRET_IN_COMMAND", "DATASET_MIRROR_CFG"),
    ("spec-continued", f'logging:\n  note: "{V_WANDB[:9]}\\\n    {V_WANDB[9:]}"\n', [], "SECRET_IN_COMMAND",
     "WANDB_API_KEY"),
    ("override-hydra-escaped", "", ["--", "dataset.mirror=" + "".join("\\" + c if c in "/+" else c for c in V_MIRROR)],
     "SECRET_IN_COMMAND",
     "DATASET_MIRROR_CFG"),
    # encodings a reader may use: hex, base32
    ("spec-hex", f"mirror_hex: {V_MIRROR.encode().hex().upper()}\n", [], "SECRET_IN_COMMAND", "DATASET_MIRROR_CFG"),
    ("override-base32", "", ["--", f"train.note={base64.b32encode(V_WANDB.encode()).decode().rstrip('=')}"],
     "SECRET_IN_COMMAND", "WANDB_API_KEY"),
    ("identifier", "", ["--results-root", f"~/runs/{V_MIRROR.replace('+', '-')}"], None, None),
    ("results-root", "", ["--results-root", f"~/runs/{V_WANDB}"], "SECRET_IN_IDENTIFIER", "WANDB_API_KEY"),
    ("bundle-credential", "", ["--env", "NGC_KEY"], "BUNDLE_CREDENTIAL_ENV", "NGC_KEY"),
]


@pytest.fixture(scope="module")
def flow(world):
    sim, out = world["sim"], {}
    jobs_dir = Path(world["env"]["TAO_STATE_DIR"]) / "jobs"
    out["refused"] = {}
    for case_id, extra, args, code, _named in REFUSED:
        if code is None:
            continue
        before = sim.exec_count(), sorted(jobs_dir.glob("*.json")) if jobs_dir.exists() else []
        res = run(world, "submit.py", *submit_args(spec_file(world, f"{case_id}.yaml", extra), *args), schema="submit")
        after = sim.exec_count(), sorted(jobs_dir.glob("*.json")) if jobs_dir.exists() else []
        out["refused"][case_id] = (res, before, after)

    spec = spec_file(world, "job.yaml", simulate={"print_env": list(VALUES)})
    sub = out["submit"] = run(world, "submit.py", *submit_args(spec), schema="submit")
    assert sub.code == 0, sub
    job = out["job"] = sub.json["job_id"]
    sim.wait_container(BOX, job)
    out["printed"] = sim.container_logs(BOX, job)
    out["logs"] = run(world, "poll_status.py", job, "--logs", "50", schema="poll_status")
    # A later agent shell: it exports the unusual variable for its own reasons, never names it on a
    # command line; only the job's sidecar says that DATASET_MIRROR_CFG is a secret.
    later = {k: v for k, v in world["env"].items() if k != "WANDB_API_KEY"}
    out["later"] = run_script("poll_status.py", job, "--logs", "50", env=later)   # not in outputs: see the test
    out["docker_store_before"] = tree_leaks(sim.world.instance_dir(BOX))
    out["container_dir"] = sim.world.docker_dir(BOX) / "containers" / sim.container(BOX, job)["Id"]
    out["teardown"] = run(world, "teardown.py", job, schema="teardown")
    return out


@pytest.mark.parametrize("case_id, extra, args, code, named", [c for c in REFUSED if c[3]], ids=[c[0] for c in REFUSED
                                                                                                 if c[3]])
def test_a_submit_carrying_a_value_is_refused_before_any_exec(world, flow, case_id, extra, args, code, named):
    res, (execs_before, jobs_before), (execs_after, jobs_after) = flow["refused"][case_id]
    assert res.code == 2 and res.json["error"]["code"] == code, res
    assert named in res.json["error"]["message"]                    # names which variable ...
    assert leaks(res.stdout + res.stderr) == []                     # ... never the value
    assert execs_after == execs_before and jobs_after == jobs_before  # nothing sent, no record opened


def test_a_name_that_merely_resembles_a_value_is_not_refused(world, flow):
    assert V_MIRROR.replace("+", "-") != V_MIRROR and V_MIRROR not in f"~/runs/{V_MIRROR.replace('+', '-')}"


def test_the_job_ran_and_printed_both_values_in_every_encoding(world, flow):
    printed = flow["printed"]
    assert all(forms(v)[how] in printed for v in VALUES.values() for how in ("verbatim", "url-lower", "json-slash",
                                                                             "base64"))
    assert flow["teardown"].code == 0 and flow["teardown"].json["container_removed"], flow["teardown"]


def test_logs_are_redacted_in_this_shell(world, flow):
    res = flow["logs"]
    assert res.code == 0 and "Epoch 0: 100%" in res.json["logs"], res   # Lightning's bar, epochs from 0
    assert leaks(res.stdout + res.stderr) == [], leaks(res.stdout + res.stderr)
    assert res.json["logs"].count("<redacted>") >= 6    # 3 stdout forms x 2 values (base64 went to stderr)


def test_a_later_shell_redacts_the_unusual_name_from_the_sidecar_alone(world, flow):
    """poll_status.py never gets --env: the job's sidecar names DATASET_MIRROR_CFG and WANDB_API_KEY.
    WANDB_API_KEY is not set in this shell, so nothing here can find its shapeless value: the job's
    output is withheld (``withheld`` names the variable to export), never printed."""
    res = flow["later"]
    assert res.code == 0, res
    assert leaks(res.stdout + res.stderr) == []
    assert res.json["withheld"]["names"] == ["WANDB_API_KEY"] and "withheld" in res.json["logs"], res.json


def test_no_value_reaches_any_argv_or_output(world, flow):
    audit = world["sim"].audit_text()
    assert leaks(audit) == [], "a value reached an argv"
    tools = {r["tool"] for r in world["sim"].audit()}
    assert {"brev", "remote-shell", "docker", "container"} <= tools
    for what, stdout, stderr in world["outputs"]:
        assert leaks(stdout + stderr) == [], what


def test_no_value_in_the_state_dir_which_is_private(world, flow):
    state = Path(world["env"]["TAO_STATE_DIR"])
    assert tree_leaks(state) == []
    saved = state / "brev" / "logs" / f"{flow['job']}.log"
    assert "<redacted>" in saved.read_text()
    sidecar = json.loads((state / "brev" / "jobs" / f"{flow['job']}.json").read_text())
    assert sidecar["env_names"] == ["WANDB_API_KEY", "DATASET_MIRROR_CFG"]      # names only
    assert stat.S_IMODE(state.stat().st_mode) == 0o700
    for path in state.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        elif path.is_dir():
            assert stat.S_IMODE(path.stat().st_mode) == 0o700, path


def test_docker_store_is_the_only_residual_and_it_goes_with_the_container(world, flow):
    rel = str(flow["container_dir"].relative_to(world["sim"].world.instance_dir(BOX)))
    before = flow["docker_store_before"]
    assert before and all(line.startswith(rel + "/") for line in before), before   # config (env) and logs only
    assert not flow["container_dir"].exists()
    assert tree_leaks(world["sim"].world.instance_dir(BOX)) == []                    # job dir, results, cred files

