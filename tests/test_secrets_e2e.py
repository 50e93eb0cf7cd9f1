"""Issue 3, "Secrets: no credential is ever exposed", proven end to end.

One world (module scope): the simulator with a fresh GPU instance that does not
have the NGC-gated TAO image yet, brev LOGGED OUT, and a real S3 server (moto).
The shell that runs the scripts holds six recognisable fake credentials. The
whole life of a tier C job runs through the scripts, as a user would run them:

    preflight (headless brev login, NGC login + --pull, S3 probe)
    -> submit (NGC image, --env HF_TOKEN --env WANDB_API_KEY, tier C, local input dir)
    -> status --logs -> --wait (results uploaded and verified) -> logs -> teardown

Then no value may be found in: any argv the simulator saw (brev, docker, the
remote shell command string, container entrypoints), any script's stdout or
stderr, anything under TAO_STATE_DIR, any file on the instance after teardown,
any object in the bucket, any temporary file on the laptop. The exceptions are
the documented residual exposures, asserted precisely:

* ``brev login --token``: BREV_API_TOKEN on the argv of exactly one brev call;
* docker's own NGC login store: base64 of ``$oauthtoken:NGC_KEY`` in
  ``~/.docker/config.json`` on the instance, and nowhere else;
* ``docker inspect``: a container's ``Config.Env`` holds the values the job got
  with ``--env-file`` while the container exists; after teardown nothing remains;
* what a job prints: redacted by ``poll_status --logs`` when the polling shell
  has the variable set or the value has a known token shape, not otherwise.

And the values DID arrive: the TAO stand-in writes sha256 of the variables it
sees; docker accepted the NGC login. The lint refuses a literal credential in a
spec or an override before anything is recorded or sent, and a container that
prints its credentials into its log has them redacted in ``poll_status --logs``.

A credential file whose consuming round trip never ran (a transport failure,
so its trap never fired) is removed by a follow-up ``rm -f`` (``credentials.discard``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import EXAMPLE_DATA, EXAMPLE_SPEC, TAO_IMAGE, run_script, validate

BREV_TOKEN = "brev-E2Esecret-tok-7Qw9Lm2Xc4Vb8Nn1"
SECRETS = {
    "BREV_API_TOKEN": BREV_TOKEN,
    "NGC_KEY": "nvapi-E2Esecret-ngc-K3y-Pz8Rt6Yu1Io0Aa",
    "AWS_ACCESS_KEY_ID": "AKIAE2ESECRETKEY0001",           # moto accepts any key without IAM auth
    "AWS_SECRET_ACCESS_KEY": "E2Esecret-aws-Zq7vT3mN9pL2xR8wK4bY6cH1dF5g",
    "HF_TOKEN": "hf_E2EsecretHuggingFace0123456789abcdef",
    "WANDB_API_KEY": "E2Esecret0wandb0f3a9c1d7e5b2a8c4d6e0f1a2b3c4",   # no well-known token shape
}
NGC_KEY = SECRETS["NGC_KEY"]
NGC_AUTH_B64 = base64.b64encode(f"$oauthtoken:{NGC_KEY}".encode()).decode()
JOB_ENV = ("HF_TOKEN", "WANDB_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")  # what the job container gets
CARRIER = "public.ecr.aws/aws-cli/aws-cli:2.22.35"
BOX = "gpubox"       # the main flow's instance (no TAO image yet)
ECHO_BOX = "echobox"  # a second instance for the container that prints its credentials
FAULT_BOX = "faultbox"  # a third one for transport faults


def forms(value: str) -> set[str]:
    """A value as it could leak: plain and base64 (the JSON / URL forms of these values are the plain one)."""
    return {value, base64.b64encode(value.encode()).decode()}


def find_secrets(text: str, names=tuple(SECRETS)) -> list[str]:
    return [name for name in names if any(f in text for f in forms(SECRETS[name]))]


def files_holding(root: Path, needle: str) -> list[Path]:
    """Every regular file under ``root`` whose bytes contain ``needle``."""
    hits = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            try:
                if needle.encode() in path.read_bytes():
                    hits.append(path)
            except OSError:
                pass
    return hits


def tree_leaks(root: Path, names=tuple(SECRETS)) -> dict[str, list[str]]:
    """{secret name: [files holding it (any form)]} under ``root``."""
    out = {}
    for name in names:
        paths = sorted({str(p.relative_to(root)) for f in forms(SECRETS[name]) for p in files_holding(root, f)})
        if paths:
            out[name] = paths
    return out


class World:
    def __init__(self, sim, env: dict, tmp: Path, s3_server, bucket: str):
        self.sim, self.env, self.tmp, self.bucket = sim, env, tmp, bucket
        self.s3 = s3_server["server"].boto_client()
        self.outputs: list[tuple[str, str, str]] = []   # (what, stdout, stderr) of every script run
        self.results: dict = {}

    def run(self, script: str, *args: str, schema: str | None = None, **extra_env):
        res = run_script(script, *args, env={**self.env, **extra_env}, timeout=120)
        self.outputs.append((f"{script} {' '.join(args)}", res.stdout, res.stderr))
        if schema:
            assert res.json is not None, res
            validate(schema, res.json)
        return res

    def spec(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def tao_spec(self, simulate: dict) -> Path:
        import yaml

        data = yaml.safe_load(EXAMPLE_SPEC.read_text())
        data["simulate"] = simulate
        return self.spec(f"spec-{len(list(self.tmp.glob('spec-*')))}.yaml", yaml.safe_dump(data))

    @property
    def state_dir(self) -> Path:
        return Path(self.env["TAO_STATE_DIR"])

    @property
    def laptop_tmp(self) -> Path:
        return Path(self.env["TMPDIR"])

    def instance_dir(self, name: str) -> Path:
        return self.sim.world.instance_dir(name)

    def bucket_text(self) -> str:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket)
        keys = [o["Key"] for page in pages for o in page.get("Contents", [])]
        return "\n".join(k + "\n" + self.s3.get_object(Bucket=self.bucket, Key=k)["Body"].read()
                         .decode("utf-8", "replace") for k in keys)


@pytest.fixture(scope="module")
def world(tmp_path_factory, s3_server):
    from tests.sim.simctl import Simulator

    tmp = tmp_path_factory.mktemp("secrets")
    (tmp / "laptop-tmp").mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TAO_", "AWS_", "S3_", "BREV_")) and k not in SECRETS
           and k not in ("NGC_API_KEY", "ACCESS_KEY", "SECRET_KEY")}
    with Simulator(tmp / "sim") as sim:
        sim.set_auth(token=BREV_TOKEN, logged_in=False)     # the first brev call must log in headlessly
        sim.set_ngc_key(NGC_KEY)
        sim.set_timing(ssh_probe_interval_s=0.02, ssh_probe_limit=2)
        sim.add_image(CARRIER, size_bytes=130_000_000)
        sim.add_instance(BOX, disk_free_bytes=500 * 10**9)  # the NGC-gated TAO image is NOT there yet
        sim.add_instance(ECHO_BOX, disk_free_bytes=500 * 10**9)
        sim.preload_image(ECHO_BOX, TAO_IMAGE)
        sim.add_instance(FAULT_BOX, disk_free_bytes=500 * 10**9)
        sim.preload_image(FAULT_BOX, TAO_IMAGE)
        bucket = s3_server["create_bucket"]()
        env = sim.env(env)
        env.update(s3_server["env"])                         # endpoint + region of the moto server
        env.update(SECRETS, S3_BUCKET_NAME=bucket, TAO_STATE_DIR=str(tmp / "state"),
                   TAO_BREV_NO_REEXEC="1", TAO_BREV_RETRY_BACKOFF_S="0", TMPDIR=str(tmp / "laptop-tmp"),
                   TAO_BREV_SPEC_LEAVE_OUT="simulate")   # the stand-in's block (conftest.state_env)
        yield World(sim, env, tmp, s3_server, bucket)


@pytest.fixture(scope="module")
def flow(world):
    """The whole life of one tier C job; returns what each step answered plus snapshots."""
    w, r = world, world.results
    dataset = w.tmp / "levir_cd_tiny"
    shutil.copytree(EXAMPLE_DATA, dataset)

    r["preflight"] = w.run("preflight.py", "--instance", BOX, "--image", "images.tao_toolkit.pyt", "--pull",
                           "--storage-tier", "C", "--bucket", w.bucket, schema="preflight")
    spec = w.tao_spec({"epoch_seconds": 0.4, "write_env_hashes": [*JOB_ENV, "NGC_KEY", "BREV_API_TOKEN"]})
    r["submit"] = w.run("submit.py", "--instance", BOX, "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train", "--spec", str(spec),
                        "--storage-tier", "C", "--bucket", w.bucket, "--inputs", f"{dataset}=levir_cd_tiny",
                        "--env", "HF_TOKEN", "--env", "WANDB_API_KEY", schema="submit")
    assert r["submit"].code == 0, r["submit"]
    job = r["job"] = r["submit"].json["job_id"]
    # enough lines to reach past TAO's experiment configuration dump (a few hundred lines)
    r["status"] = w.run("poll_status.py", job, "--logs", "400", schema="poll_status")
    r["wait"] = w.run("poll_status.py", job, "--wait", "--interval", "0.2", "--timeout", "60",
                      schema="poll_status")
    r["logs"] = w.run("poll_status.py", job, "--logs", "200", schema="poll_status")
    # Before teardown: the exited container still exists (never --rm), docker keeps its Config.Env.
    r["instance_leaks_before_teardown"] = tree_leaks(w.instance_dir(BOX))
    r["container_dir"] = w.sim.world.docker_dir(BOX) / "containers" / w.sim.container(BOX, job)["Id"]
    r["teardown"] = w.run("teardown.py", job, schema="teardown")
    r["audit"] = w.sim.audit_text()
    r["records"] = w.sim.audit()
    return r


# -- the flow worked, and the values reached their destinations -----------------------------------------
def test_the_job_ran_end_to_end_with_every_credential_in_place(world, flow):
    pre = flow["preflight"].json
    assert flow["preflight"].code == 0 and pre["ok"], flow["preflight"]
    checks = {c["name"]: c for c in pre["checks"]}
    assert pre["brev_logins"] == 1 and checks["brev_auth"]["data"]["headless_login"] is True
    assert checks["ngc_auth"]["data"]["status"] == "AUTH_OK" and checks["ngc_auth"]["data"]["logged_in_now"]
    assert checks["image"]["data"]["pulled"] is True              # the pull needed the NGC login
    assert checks["s3"]["ok"]
    assert flow["status"].code == 0 and flow["status"].json["state"] in ("RUNNING", "COMPLETE")
    # the job's first line (tao-pytorch core/utilities.py:92 update_results_dir), before any epoch
    assert "Train results will be saved at: /results/train" in flow["status"].json["logs"]
    wait = flow["wait"].json
    assert flow["wait"].code == 0 and wait["state"] == "COMPLETE", flow["wait"]
    assert wait["results"]["uploaded"] and wait["results"]["verified"], wait
    assert flow["logs"].code == 0 and "Execution status: PASS" in flow["logs"].json["logs"]
    assert flow["teardown"].code == 0 and flow["teardown"].json["container_removed"], flow["teardown"]


def test_the_job_container_received_exactly_its_credentials(world, flow):
    job = flow["job"]
    seen = json.loads((world.sim.instance_home(BOX) / "tao-results" / job / "env_seen.json").read_text())
    expected = {name: hashlib.sha256(SECRETS[name].encode()).hexdigest() for name in JOB_ENV}
    assert seen == {**expected, "NGC_KEY": None, "BREV_API_TOKEN": None}   # only what the job needs
    uploaded = world.s3.get_object(Bucket=world.bucket, Key=f"results/{job}/env_seen.json")["Body"].read()
    assert json.loads(uploaded) == seen


def test_docker_login_used_oauthtoken_and_the_key_on_stdin_only(world, flow):
    logins = [r for r in flow["records"] if r["tool"] == "docker" and r["argv"][:1] == ["login"]]
    assert [r["argv"] for r in logins] == [["login", "nvcr.io", "-u", "$oauthtoken", "--password-stdin"]]
    # The simulated registry accepts exactly ($oauthtoken, NGC_KEY): docker stored what it accepted.
    config = json.loads((world.sim.instance_home(BOX) / ".docker" / "config.json").read_text())
    assert base64.b64decode(config["auths"]["nvcr.io"]["auth"]).decode() == f"$oauthtoken:{NGC_KEY}"
    pulls = [r for r in flow["records"] if r["tool"] == "docker" and r["argv"][:1] == ["pull"]]
    assert pulls and all(r["instance"] == BOX for r in pulls)


# -- where the values must not be ------------------------------------------------------------------------
def test_brev_token_is_only_on_the_argv_of_one_brev_login(world, flow):
    holding = [r for r in flow["records"] if BREV_TOKEN in json.dumps(r)]
    assert len(holding) == 1, holding
    assert holding[0]["tool"] == "brev" and holding[0]["argv"] == ["login", "--token", BREV_TOKEN]
    without = flow["audit"].replace(json.dumps(holding[0]["argv"])[1:-1], "")
    assert find_secrets(without) == []


def test_no_other_credential_reaches_any_argv(world, flow):
    names = [n for n in SECRETS if n != "BREV_API_TOKEN"]
    assert find_secrets(flow["audit"], names) == [], "a credential reached an argv (or brev's stdin)"
    assert NGC_AUTH_B64 not in flow["audit"]
    tools = {r["tool"] for r in flow["records"]}
    assert {"brev", "remote-shell", "docker", "container"} <= tools   # every kind of process was audited
    copies = [r["argv"] for r in flow["records"] if r["tool"] == "brev" and r["argv"][:1] == ["copy"]]
    assert copies and all(a[2].startswith(f"{BOX}:.tao-cred-") for a in copies)   # only paths travel


def test_no_credential_in_any_script_output(world, flow):
    assert len(world.outputs) >= 6
    for what, stdout, stderr in world.outputs:
        assert find_secrets(stdout) == [] and find_secrets(stderr) == [], what
        assert NGC_AUTH_B64 not in stdout + stderr, what


def test_no_credential_in_records_sidecars_or_manifests(world, flow):
    state = world.state_dir
    assert (state / "jobs" / f"{flow['job']}.json").is_file()
    assert (state / "brev" / "manifests" / f"{flow['job']}.json").is_file()
    assert tree_leaks(state) == {}
    assert files_holding(state, NGC_AUTH_B64) == []


def test_credential_files_are_gone_on_both_sides(world, flow):
    home = world.sim.instance_home(BOX)
    assert list(home.rglob(".tao-cred-*")) == [] and list(home.rglob("*tao-cred*")) == []
    assert list(world.laptop_tmp.iterdir()) == []            # the 0600 local copies were removed too


def test_docker_inspect_env_is_the_only_residual_on_the_instance_until_teardown(world, flow):
    container_dir = flow["container_dir"]
    rel = str(container_dir.relative_to(world.instance_dir(BOX)))
    # Before teardown: exactly the job's credentials, only in the job container's docker config
    # (what `docker inspect` prints as Config.Env), plus docker's own NGC login store.
    before = flow["instance_leaks_before_teardown"]
    in_containers = {n: [p for p in paths if p != "home/.docker/config.json"] for n, paths in before.items()}
    assert {n: paths for n, paths in in_containers.items() if paths} == {name: [f"{rel}/config.json"]
                                                                         for name in JOB_ENV}
    assert before["NGC_KEY"] == ["home/.docker/config.json"]            # base64 only, see the next test
    # After teardown (docker rm -f): the container and its config are gone; nothing remains.
    assert not container_dir.exists()
    after = tree_leaks(world.instance_dir(BOX))
    assert after == {"NGC_KEY": ["home/.docker/config.json"]}


def test_ngc_login_store_holds_base64_only_in_dockers_config(world, flow):
    config = world.sim.instance_home(BOX) / ".docker" / "config.json"
    assert NGC_KEY not in config.read_text()                        # never the literal key
    assert files_holding(world.sim.root, NGC_AUTH_B64) == [config]  # the base64 form in that one file only
    assert files_holding(world.state_dir, NGC_AUTH_B64) == []


def test_no_credential_in_the_bucket(world, flow):
    text = world.bucket_text()
    assert f"results/{flow['job']}/env_seen.json" in text
    assert find_secrets(text) == []


# -- the lint refuses literal credentials before anything is recorded or sent -----------------------------
def test_a_literal_credential_in_an_override_or_a_spec_refuses_the_submit(world, flow):
    literal = "lit-E2Eoverride-9f8e7d6c5b4a"     # not in the environment: the backstop cannot hide it
    password = "lit-E2Especpass-1a2b3c4d5e6f"
    inputs = world.tmp / "fresh-input"
    inputs.mkdir(exist_ok=True)
    (inputs / "x.txt").write_text("never uploaded\n")
    jobs_before = sorted((world.state_dir / "jobs").glob("*.json"))
    execs_before, keys_before = world.sim.exec_count(), world.bucket_text()
    common = ["--instance", BOX, "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
              "--action", "train", "--storage-tier", "C", "--bucket", world.bucket,
              "--inputs", f"{inputs}=fresh", "--env", "HF_TOKEN"]

    override = world.run("submit.py", *common, "--spec", str(world.tao_spec({})), "--",
                         f"train.wandb.api_key={literal}", schema="submit")
    spec = world.spec("leaky.yaml", EXAMPLE_SPEC.read_text() + f"password: {password}\n")
    in_spec = world.run("submit.py", *common, "--spec", str(spec), schema="submit")

    for res, name, value in ((override, "train.wandb.api_key", literal), (in_spec, "password", password)):
        assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_COMMAND", res
        assert name in res.json["error"]["message"]                  # the finding is named ...
        assert value not in res.stdout + res.stderr                  # ... never the value
        assert res.json.get("job_id") is None
    assert sorted((world.state_dir / "jobs").glob("*.json")) == jobs_before   # no record opened
    assert world.sim.exec_count() == execs_before                               # nothing sent
    assert world.bucket_text() == keys_before                                   # nothing uploaded
    assert literal not in world.sim.audit_text() and password not in world.sim.audit_text()


# -- a container that prints its credentials: the answer is redacted ----------------------------------------
# The TAO image runs a real executable named as the command: `env bash -e /tao/job/spec.yaml ...` runs
# the spec as a bash script. Each line is a YAML mapping entry AND a shell command.
ECHO_SPEC = ("printenv HF_TOKEN WANDB_API_KEY || printed: 1\n"
             "printenv AWS_SECRET_ACCESS_KEY >&2 || printed_to_stderr: 1\n"
             "exit 3 || failed: 1\n")


def test_credentials_printed_by_the_container_are_redacted_in_status_and_logs(world, flow):
    local = {"TAO_RESULTS_ROOT": "~/tao-results"}     # results stay on the instance: no S3 round trip
    sub = world.run("submit.py", "--instance", ECHO_BOX, "--image", "images.tao_toolkit.pyt",
                    "--network-arch", "env", "--action", "bash", "--spec", str(world.spec("echo.yaml", ECHO_SPEC)),
                    "--env", "HF_TOKEN", "--env", "WANDB_API_KEY", "--env", "AWS_SECRET_ACCESS_KEY",
                    "--allow-unknown-arch", schema="submit", **local)   # `env bash`: not a TAO arch, on purpose
    assert sub.code == 0, sub
    job = sub.json["job_id"]
    world.sim.wait_container(ECHO_BOX, job)
    printed = world.sim.container_logs(ECHO_BOX, job)
    assert all(SECRETS[n] in printed for n in ("HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY"))

    logs = world.run("poll_status.py", job, "--logs", "20", schema="poll_status", **local)
    wait = world.run("poll_status.py", job, "--wait", "--interval", "0.2", "--timeout", "30", schema="poll_status",
                     **local)
    assert logs.json["state"] == "ERROR" and wait.code == 1 and wait.json["error"]["code"] == "JOB_FAILED", wait
    assert logs.json["logs"].count("<redacted>") == 3, logs.json["logs"]
    for res in (sub, logs, wait):
        assert find_secrets(res.stdout + res.stderr) == [], res
    # A shell without the variables set cannot recognise a shapeless value (WANDB_API_KEY here):
    # the job's output is withheld there, naming the variables to export (references/redaction.md).
    bare = {k: v for k, v in world.env.items() if k not in SECRETS}
    other_shell = run_script("poll_status.py", job, "--logs", "20", env={**bare, **local})   # not in outputs
    assert find_secrets(other_shell.stdout + other_shell.stderr) == [], other_shell
    # the S3 keys tier C hands the job container are proved like --env values: unproven in this shell too
    assert other_shell.json["withheld"]["names"] == ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "WANDB_API_KEY"]

    down = world.run("teardown.py", job, schema="teardown", **local)
    assert down.code == 0 and down.json["container_removed"], down
    assert find_secrets(world.sim.audit_text(), [n for n in SECRETS if n != "BREV_API_TOKEN"]) == []
    assert tree_leaks(world.state_dir) == {}
    assert tree_leaks(world.instance_dir(ECHO_BOX)) == {}             # container, env and log all gone


# -- a credential file whose consumer never ran (transport failure) -----------------------------------------
def cred_files(world, instance, label: str) -> list[str]:
    return sorted(p.name for p in world.sim.instance_home(instance).glob(f".tao-cred-{label}-*"))


def test_ngc_key_file_is_not_left_behind_when_the_checks_never_ran(world, flow):
    world.sim.add_fault("ngc_login", "reset_before", times=6)     # 3 idempotent attempts x brev's own retry
    failed = world.run("preflight.py", "--instance", FAULT_BOX, "--image", "images.tao_toolkit.pyt")
    assert failed.json["error"]["code"] == "TRANSPORT_FAILED", failed
    again = world.run("preflight.py", "--instance", FAULT_BOX, "--image", "images.tao_toolkit.pyt")
    assert again.code == 0, again
    assert find_secrets(failed.stdout + failed.stderr + again.stdout + again.stderr) == []
    assert cred_files(world, FAULT_BOX, "ngc") == []


def test_results_credential_file_is_not_left_behind_when_the_upload_never_ran(world, flow):
    data = world.sim.instance_home(FAULT_BOX) / "tao-data" / "levir_cd_tiny"
    shutil.copytree(EXAMPLE_DATA, data, dirs_exist_ok=True)
    sub = world.run("submit.py", "--instance", FAULT_BOX, "--image", "images.tao_toolkit.pyt",
                    "--network-arch", "visual_changenet", "--action", "train",
                    "--spec", str(world.tao_spec({"epoch_seconds": 0.01})), "--bucket", world.bucket,
                    "--inputs", "~/tao-data/levir_cd_tiny=levir_cd_tiny", "--env", "HF_TOKEN")
    assert sub.code == 0, sub
    job = sub.json["job_id"]
    world.sim.wait_container(FAULT_BOX, job)
    world.sim.add_fault("TAO_NO_RESULTS", "reset_before", times=2)   # the results round trip never runs
    failed = world.run("poll_status.py", job)
    assert failed.json["results"]["error"]["code"] == "TRANSPORT_FAILED", failed
    retried = world.run("poll_status.py", job)
    assert retried.json["results"]["verified"], retried
    down = world.run("teardown.py", job)
    assert down.code == 0, down
    assert find_secrets("".join(r.stdout + r.stderr for r in (sub, failed, retried, down))) == []
    assert cred_files(world, FAULT_BOX, job) == []
