"""The instance side against the REAL Docker engine (tier ``real_docker``).

The bundle's scripts run as a user would; the simulated ``brev`` (tests/sim)
runs each remote command as the non-root instance user (``ubuntu`` unless
TAO_REAL_DOCKER_USER says otherwise, in the ``docker`` group, as on Brev) in a
home under that user's real home, with the real ``docker`` CLI talking to the
real daemon. The images are built offline by ``tests/real_docker/setup.sh``:
the TAO stand-in behind an NGC-style entrypoint wrapper (banner, then
``exec "$@"``), tagged as the pinned TAO image, and a stand-in ``nvidia-smi``
image tagged as the pinned GPU-smoke image.

Run: ``bash tests/real_docker/setup.sh && .venv/bin/python -m pytest -q -m real_docker``
(as root; ``tests/real_docker/teardown.sh`` stops the daemon). Without a
daemon every test here FAILS - this tier is never skipped.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from conftest import EXAMPLE_DATA, TAO_IMAGE, SimWorld, validate

pytestmark = pytest.mark.real_docker

USER = os.environ.get("TAO_REAL_DOCKER_USER", "ubuntu")
SMOKE_IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"
SMOKE_SOURCE = "tao-rd/cuda-smoke:test"
SETUP = Path(__file__).resolve().parent / "real_docker" / "setup.sh"
WAIT = ("--wait", "--interval", "0.5", "--timeout", "120")


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def containers_named(name: str) -> list[dict]:
    """``docker ps -a`` rows of containers named exactly ``name``."""
    out = docker("ps", "-a", "--filter", f"name=^/{name}$", "--format", "{{json .}}").stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def inspect_state(name: str) -> dict:
    return json.loads(docker("inspect", "--type", "container", "--format", "{{json .State}}", name).stdout)


@pytest.fixture(scope="session")
def engine():
    """The daemon answers, the user exists in the docker group, the images are built.
    Anything missing FAILS the tier (with the command that fixes it)."""
    if os.geteuid() != 0:
        pytest.fail(f"the real_docker tier runs as root (it runs remote commands as {USER}): "
                    f"sudo bash {SETUP}, then run pytest as root")
    if shutil.which("docker") is None or docker("info", check=False).returncode != 0:
        pytest.fail(f"no Docker daemon answers: run `bash {SETUP}` first "
                    f"({docker('info', check=False).stderr.strip()[-300:] if shutil.which('docker') else 'no docker CLI'})")
    ready = (docker("image", "inspect", TAO_IMAGE, check=False).returncode == 0
             and docker("image", "inspect", SMOKE_SOURCE, check=False).returncode == 0)
    try:
        in_group = "docker" in subprocess.run(["id", "-nG", USER], capture_output=True, text=True).stdout.split()
    except OSError:
        in_group = False
    if not (ready and in_group):
        done = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            pytest.fail(f"{SETUP} failed: {done.stderr[-2000:]}")
    docker("tag", SMOKE_SOURCE, SMOKE_IMAGE)
    return pwd.getpwnam(USER)


class RealWorld(SimWorld):
    """SimWorld whose instance ``box`` is this machine's Docker engine, reached as USER."""

    def put_dataset(self, instance: str = "box") -> str:
        target = self.sim.instance_home(instance) / "tao-data" / "levir_cd_tiny"
        if not target.exists():
            shutil.copytree(EXAMPLE_DATA, target)
            user = pwd.getpwnam(USER)
            for path in [target.parent, target, *target.rglob("*")]:
                os.chown(path, user.pw_uid, user.pw_gid)
        return "~/tao-data/levir_cd_tiny"

    @property
    def home(self) -> Path:
        return self.sim.instance_home("box")

    def as_user(self, command: str) -> subprocess.CompletedProcess:
        """``command`` in the instance user's shell, as brev exec would run it."""
        done = subprocess.run(["brev", "exec", "box", command], capture_output=True, text=True, env=self.env,
                              stdin=subprocess.DEVNULL, timeout=120)
        return done


@pytest.fixture
def real(engine, tmp_path, state_env):
    from tests.sim.simctl import Simulator

    base = Path(engine.pw_dir) / "tao-rd" / f"{tmp_path.name[:40]}-{uuid.uuid4().hex[:6]}"
    with Simulator(tmp_path / "sim") as sim:
        sim.add_instance("box", remote_user=USER, home=str(base / "home"))
        world = RealWorld(sim, sim.env(state_env), tmp_path)
        try:
            yield world
        finally:
            from tests.sim import real_host
            real_host.end_vm(sim.instance("box"), remove=True)


def test_the_remote_side_is_the_real_engine_as_the_non_root_user(real):
    """The set-up itself: brev exec runs as USER, in the docker group, home under USER's home."""
    done = real.as_user("id -un; id -Gn; echo \"$HOME\"; docker version --format '{{.Server.Os}}'")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert lines[0] == USER and "docker" in lines[1].split()
    assert lines[2].startswith(pwd.getpwnam(USER).pw_dir + "/") and lines[3] == "linux"


# -- preflight ---------------------------------------------------------------------
def test_preflight_pull_with_the_image_present(real):
    pre = real.run("preflight.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--pull")
    validate("preflight", pre.json)
    checks = {c["name"]: c for c in pre.json["checks"]}
    assert checks["docker"]["ok"] and checks["docker"]["data"]["server_version"]
    assert checks["gpu"]["ok"] and checks["gpu"]["data"]["count"] == 1
    assert checks["image"]["ok"] and checks["image"]["data"]["present"] is True
    assert checks["image"]["data"]["pulled"] is False and checks["image"]["data"]["size_bytes"] > 10_000_000
    assert pre.json["round_trips"]["pull"] == 0
    assert checks["disk"]["ok"], checks["disk"]


def test_preflight_gpu_smoke_with_the_smoke_image(real):
    pre = real.run("preflight.py", "--instance", "box", "--gpu-smoke")
    validate("preflight", pre.json)
    smoke = {c["name"]: c for c in pre.json["checks"]}["gpu_smoke"]
    assert smoke["ok"], smoke
    assert smoke["data"]["gpus"] == ["GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5a1f0c2e-7b3d-4e8f-9a6b-1c2d3e4f5a6b)"]


def test_preflight_gpu_smoke_without_the_smoke_image_names_the_registry_not_the_gpu(real):
    """The smoke image cannot be pulled (no registry reachable here; `docker run`
    ends 125 with "dial tcp: lookup HOST ...: no such host"): the answer names the
    unreachable registry, never a false "no GPU" (nvidia-smi on the host lists it)."""
    docker("rmi", SMOKE_IMAGE)
    try:
        pre = real.run("preflight.py", "--instance", "box", "--gpu-smoke")
    finally:
        docker("tag", SMOKE_SOURCE, SMOKE_IMAGE)
    validate("preflight", pre.json)
    checks = {c["name"]: c for c in pre.json["checks"]}
    assert checks["gpu"]["ok"]
    smoke = checks["gpu_smoke"]
    assert not smoke["ok"] and pre.code == 1
    assert smoke["code"] == "REGISTRY_UNREACHABLE", smoke
    assert "no such host" in smoke["detail"]


@pytest.mark.parametrize("image", ["ubuntu:22.04", "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"])
def test_preflight_pull_against_an_unreachable_registry_names_it(real, image):
    """`preflight.py --pull` of an image the instance lacks, with no registry
    reachable: REGISTRY_UNREACHABLE (not REMOTE_COMMAND_FAILED "read the
    message", not an NGC login problem)."""
    pre = real.run("preflight.py", "--instance", "box", "--image", image, "--pull")
    validate("preflight", pre.json)
    checks = {c["name"]: c for c in pre.json["checks"]}
    assert not checks["image"]["ok"] and checks["image"]["code"] == "REGISTRY_UNREACHABLE", checks["image"]
    assert pre.code == 1 and checks["image"]["data"]["present"] is False
    assert docker("image", "inspect", image, check=False).returncode != 0


# -- submit, poll, teardown ------------------------------------------------------------
def test_plain_submit_runs_to_complete_with_wait_logs_and_teardown(real):
    sub = real.submit()
    assert sub.code == 0, sub
    validate("submit", sub.json)
    job_id = sub.json["job_id"]
    assert len(containers_named(job_id)) == 1
    wait = real.run("poll_status.py", job_id, *WAIT)
    assert wait.code == 0, wait
    validate("poll_status", wait.json)
    assert wait.json["state"] == "COMPLETE" and wait.json["terminal_state"] == "COMPLETE"
    logs = real.run("poll_status.py", job_id, "--logs", "50")
    assert logs.code == 0, logs
    assert "Epoch 2: 100%" in logs.json["logs"] and "Execution status: PASS" in logs.json["logs"]
    results = real.home / "tao-results" / job_id / "train"
    assert list(results.glob("model_epoch_002*.pth")) and (results / "changenet_model_segment_latest.pth").exists()
    assert (results / "status.json").stat().st_uid == 0   # written by the container, as root
    down = real.run("teardown.py", job_id)
    assert down.code == 0, down
    validate("teardown", down.json)
    assert down.json["state"] == "COMPLETE" and down.json["container_removed"] is True
    assert containers_named(job_id) == []
    again = real.run("teardown.py", job_id)   # a rerun changes nothing and fails nothing
    assert again.code == 0, again
    assert again.json["state"] == "COMPLETE" and again.json["container_removed"] is False
    record = real.run("tao_job_record.py", "show", job_id).json
    assert [t["state"] for t in record["transitions"]] == ["PENDING", "RUNNING", "COMPLETE"]


def test_submit_with_env_gives_the_container_the_value_and_no_command_line_holds_it(real):
    secret = "hf_" + uuid.uuid4().hex
    spec = real.spec({"epoch_seconds": 0.01, "write_env_hashes": ["HF_TOKEN"]})
    sub = real.submit("--env", "HF_TOKEN", spec=spec, HF_TOKEN=secret)
    assert sub.code == 0, sub
    job_id = sub.json["job_id"]
    assert real.run("poll_status.py", job_id, *WAIT).json["state"] == "COMPLETE"
    import hashlib
    seen = json.loads((real.home / "tao-results" / job_id / "env_seen.json").read_text())
    assert seen == {"HF_TOKEN": hashlib.sha256(secret.encode()).hexdigest()}
    assert secret not in real.sim.audit_text()                 # no remote command line held it
    assert not list(real.home.glob(".tao-cred-*"))            # the credential file is gone
    config = json.loads(docker("inspect", "--type", "container", "--format", "{{json .Config.Cmd}}", job_id).stdout)
    assert secret not in json.dumps(config)
    poll = real.run("poll_status.py", job_id, "--logs", "20")
    assert secret not in poll.stdout + poll.stderr


def test_submit_with_overrides_reaches_the_tao_command(real):
    sub = real.submit("--", "train.num_epochs=4")
    assert sub.code == 0, sub
    job_id = sub.json["job_id"]
    assert real.run("poll_status.py", job_id, *WAIT).json["state"] == "COMPLETE"
    cmd = json.loads(docker("inspect", "--format", "{{json .Config.Cmd}}", job_id).stdout)
    assert "train.num_epochs=4" in cmd
    # the instance's one GPU (nvidia-smi -L), set before the user's overrides: TAO's entrypoint reads the
    # first num_gpus= / gpu_ids= of all its arguments (tao-pytorch core/entrypoint.py:163-178)
    after = cmd[cmd.index("results_dir=/results") + 1:]
    assert after == ["train.num_gpus=1", "train.gpu_ids=[0]", "train.num_epochs=4"], cmd
    results = real.home / "tao-results" / job_id / "train"
    assert list(results.glob("model_epoch_003*.pth")) and not list(results.glob("model_epoch_004*.pth"))


def test_poll_logs_of_a_running_job_then_teardown_cancels_it(real):
    sub = real.submit(spec=real.spec({"epoch_seconds": 0.01, "hang": True}))
    job_id = sub.json["job_id"]
    for _ in range(100):
        poll = real.run("poll_status.py", job_id, "--logs", "20")
        if "Epoch 2: 100%" in (poll.json or {}).get("logs", ""):
            break
    assert poll.json["state"] == "RUNNING", poll
    # the NGC banner is part of the log (before TAO's experiment configuration dump: a longer tail)
    assert "NVIDIA Release" in real.run("poll_status.py", job_id, "--logs", "1000").json["logs"]
    down = real.run("teardown.py", job_id)
    assert down.code == 0, down
    assert down.json["state"] == "CANCELED" and down.json["container_removed"] is True
    assert containers_named(job_id) == []
    logs = real.run("poll_status.py", job_id, "--logs", "20")   # kept locally when the container went
    assert "Epoch 2: 100%" in logs.json["logs"]


def test_a_failing_job_ends_error_with_its_exit_code_and_traceback_hint(real):
    sub = real.submit(spec=real.spec({"exit_code": 3, "epoch_seconds": 0.01}))
    wait = real.run("poll_status.py", sub.json["job_id"], *WAIT)
    assert wait.code == 1, wait
    validate("poll_status", wait.json)
    assert wait.json["state"] == "ERROR" and wait.json["observed"]["exit_code"] == 3
    assert wait.json["error"]["code"] == "JOB_FAILED"


def test_a_missing_dataset_is_refused_on_the_instance_before_docker_run(real):
    """The spec-path check runs on the instance in the launch round trip (a real shell's test -e)."""
    spec = real.spec({"epoch_seconds": 0.01})
    import yaml
    data = yaml.safe_load(spec.read_text())
    data["dataset"]["segment"]["root_dir"] = "/data/levir_cd_tiny/nowhere"   # under a staged input, absent
    spec.write_text(yaml.safe_dump(data))
    sub = real.submit(spec=spec)
    assert sub.code == 1 and sub.json["error"]["code"] == "SPEC_PATH_MISSING", sub
    assert "dataset.segment.root_dir" in sub.json["error"]["message"]
    assert containers_named(sub.json["job_id"]) == []   # refused before docker run


def test_a_missing_dataset_fails_as_a_program_fault(real):
    spec = real.spec({"epoch_seconds": 0.01})
    import yaml
    data = yaml.safe_load(spec.read_text())
    data["dataset"]["segment"]["root_dir"] = "/data/nowhere"   # a real key of TAO's schema (submit checks it)
    spec.write_text(yaml.safe_dump(data))
    sub = real.submit("--no-spec-check", spec=spec)   # past the bundle's own path check: TAO's error
    wait = real.run("poll_status.py", sub.json["job_id"], *WAIT)
    assert wait.json["state"] == "ERROR" and wait.json["observed"]["exit_code"] == 1
    assert wait.json["hint"]["err_class"] == "ERR_PROGRAM" and wait.json["hint"]["reason"] == "missing file"


def test_an_unknown_network_arch_exits_127_from_the_entrypoint_wrapper(real):
    """The NGC wrapper runs ``exec "$@"``: the container starts, prints the banner
    and exits 127 ("exec: NAME: not found") - an ERROR naming the missing command."""
    sub = real.run(
        "submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
        "visual_changenet_v9", "--action", "train", "--spec", str(real.spec({"epoch_seconds": 0.01})),
        "--allow-unknown-arch", "--no-spec-check")   # no input is staged: the entrypoint is what is tested
    assert sub.code == 0, sub
    wait = real.run("poll_status.py", sub.json["job_id"], *WAIT)
    assert wait.code == 1, wait
    assert wait.json["state"] == "ERROR" and wait.json["observed"]["exit_code"] == 127
    assert wait.json["hint"]["err_class"] == "ERR_PROGRAM", wait.json
    assert "visual_changenet_v9" in " ".join(wait.json["hint"]["evidence"])
    assert "not in the image" in wait.json["hint"]["reason"]


def test_a_job_stopped_while_running_is_not_called_out_of_memory(real):
    """``docker stop`` of a PID 1 that ignores SIGTERM (python as PID 1 keeps the
    default disposition, which the kernel ignores for init) waits 10 s and
    SIGKILLs it: exit 137 without OOMKilled. That is a stop, not an OOM."""
    sub = real.submit(spec=real.spec({"epoch_seconds": 0.01, "hang": True}))
    job_id = sub.json["job_id"]
    stop = real.as_user(f"docker stop -t 1 {job_id}")
    assert stop.returncode == 0, stop.stderr
    state = inspect_state(job_id)
    assert state["ExitCode"] == 137 and state["OOMKilled"] is False
    poll = real.run("poll_status.py", job_id)
    assert poll.json["state"] == "ERROR" and poll.json["observed"]["exit_code"] == 137
    assert "out of memory" not in poll.json["message"].lower(), poll.json
    assert (poll.json.get("hint") or {}).get("reason") != "out of memory (OOM)"
    down = real.run("teardown.py", job_id)
    assert down.code == 0 and down.json["container_removed"] is True


def test_the_launch_replayed_by_brevs_second_execution_makes_one_container(real):
    """The launch ran, its answer was lost (ssh 255), brev ran it again: the
    second run finds the container and adopts it."""
    real.sim.add_fault("docker run -d", "reset_after", times=1)
    sub = real.submit()
    assert sub.code == 0, sub
    job_id = sub.json["job_id"]
    launches = [c for c in real.sim.remote_commands("box") if "docker run -d" in c]
    assert len(launches) == 2                      # brev's retry really ran the launch twice
    assert len(containers_named(job_id)) == 1
    assert real.run("poll_status.py", job_id, *WAIT).json["state"] == "COMPLETE"


def test_results_written_by_root_are_handed_to_the_user_at_teardown(real):
    """Everything the container writes belongs to root, mode as the job chose
    (here a 0600 file in a 0700 dir): the user can neither read nor delete
    it. Every step of the bundle still succeeds, and teardown hands the
    results to the user (a container runs chown: no sudo), keeping every file."""
    sub = real.submit(spec=real.spec({"epoch_seconds": 0.01}))
    job_id = sub.json["job_id"]
    assert real.run("poll_status.py", job_id, *WAIT).json["state"] == "COMPLETE"
    results = real.home / "tao-results" / job_id
    docker("run", "--rm", "-v", f"{results}:/results", "--entrypoint", "/bin/sh", TAO_IMAGE, "-c",
           "mkdir -m 700 /results/private && echo x > /results/private/ckpt && chmod 600 /results/private/ckpt")
    denied = real.as_user(f"cat ~/tao-results/{job_id}/private/ckpt; rm -rf ~/tao-results/{job_id}/private")
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    assert real.run("poll_status.py", job_id, "--logs", "5").code == 0
    down = real.run("teardown.py", job_id)
    assert down.code == 0, down
    user = pwd.getpwnam(USER)
    owners = {(p.stat().st_uid, p.stat().st_gid) for p in [results, *results.rglob("*")]}
    assert owners == {(user.pw_uid, user.pw_gid)}
    assert list((results / "train").glob("model_epoch_002*.pth"))
    mine = real.as_user(f"cat ~/tao-results/{job_id}/private/ckpt && rm -rf ~/tao-results/{job_id}/private")
    assert mine.returncode == 0 and mine.stdout.startswith("x"), mine.stderr
    again = real.run("teardown.py", job_id)
    assert again.code == 0 and again.json["container_removed"] is False, again


def test_a_command_missing_from_an_image_without_wrapper_leaves_a_created_container_and_an_error(real):
    """Without an entrypoint wrapper, ``docker run -d`` itself fails (exit 127,
    "executable file not found in $PATH") and leaves a container in ``created``
    with that Error: the job is an ERROR, never a PENDING that waits forever."""
    sub = real.run("submit.py", "--instance", "box", "--image", "tao-rd/base:bookworm", "--network-arch",
                   "visual_changenet", "--action", "train", "--spec", str(real.spec({"epoch_seconds": 0.01})),
                   "--no-spec-check")   # no input is staged: the image's missing command is what is tested
    job_id = sub.json["job_id"]
    assert [c["State"] for c in containers_named(job_id)] == ["created"]
    poll = real.run("poll_status.py", job_id, *WAIT)
    assert poll.json["state"] == "ERROR", (sub, poll)
    assert poll.json["observed"]["exit_code"] == 127 and "executable file not found" in poll.json["message"]
    down = real.run("teardown.py", job_id)
    assert down.code == 0 and down.json["state"] == "ERROR" and containers_named(job_id) == []


# -- the simulator's docker against the real one -------------------------------------------
# Every docker subcommand and output format the bundle sends to an instance
# (including `poll_status --all`'s `ps -aq` + `inspect` with its Go template and
# `logs --timestamps`) runs on both, through `brev exec`, and what the bundle PARSES from each
# answer is compared. Not compared, with the reason (tests/sim/README.md):
# `docker pull`, `docker manifest inspect`, `docker login` and `docker run` of
# the S3 carrier need a registry, which the real tier cannot reach; `docker
# info .Runtimes` lists `nvidia` only where the NVIDIA runtime is registered
# (the simulated instance has it, this engine has just the `--gpus` hook).
RFC3339_NANO = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$"


def _exec(world, command: str) -> tuple[int, str, str]:
    done = subprocess.run(["brev", "exec", "box", command], capture_output=True, text=True, env=world.env,
                          stdin=subprocess.DEVNULL, timeout=120)
    out = done.stdout
    if out.endswith("box\n"):   # brev echoes the instance name on piped stdout
        out = out[: -len("box\n")]
    return done.returncode, out, done.stderr


def _section(world, command: str):
    """``command`` framed as the bundle frames it (a section of a script), parsed back."""
    from tao_brev import remote
    token = remote.new_token()
    _, out, _ = _exec(world, remote.section(token, "x", command))
    return remote.parse_sections(out, token)["x"]


def _parsed(world, job_done: str, job_hung: str, plain_image: str) -> dict:
    """What the bundle makes of each docker answer on ``world``'s instance."""
    import re

    from tao_brev import docker_state, progress, remote
    from tao_brev.verbs import preflight

    facts: dict = {}
    info = preflight._json_line(_section(world, "docker info --format '{{json .}}'").output)
    facts["info"] = {"server_version": bool(info.get("ServerVersion")), "errors": info.get("ServerErrors"),
                     "root_dir_absolute": str(info.get("DockerRootDir", "")).startswith("/"),
                     "runc": "runc" in (info.get("Runtimes") or {})}
    root = _section(world, "docker info --format '{{.DockerRootDir}}'")
    facts["root_dir"] = (root.exit_code, root.output.strip().startswith("/"), len(root.output.strip().splitlines()))
    answers = preflight.Answers({"image": _section(world, f"docker image inspect --format '{{{{.Size}}}}' {TAO_IMAGE}")}, 0)
    image = preflight.image_facts(answers, TAO_IMAGE)
    facts["image_present"] = (image.present, isinstance(image.local_bytes, int) and image.local_bytes > 0)
    missing = _section(world, "docker image inspect --format '{{.Size}}' example.invalid/none:1")
    answers = preflight.Answers({"image": missing}, 0)
    facts["image_missing"] = (preflight.image_facts(answers, "example.invalid/none:1").present, missing.exit_code,
                              "no such image" in missing.output.lower())
    for name, job in (("done", job_done), ("stopped", job_hung), ("missing", "tao-no-such-job")):
        sec = _section(world, remote.inspect_state(job))
        state = json.loads(sec.output.strip().splitlines()[-1]) if sec.exit_code == 0 else None
        observed = docker_state.from_inspect(state).to_json()
        for key in ("started_at", "finished_at"):
            if key in observed:
                observed[key] = bool(re.match(RFC3339_NANO, observed[key]))
        facts[f"state_{name}"] = (sec.exit_code, sorted(state) if state else None, observed,
                                  "No such" in sec.output)
    # Each stream of the whole log: the order of lines *between* stdout and stderr is the order two pipes
    # were read in (containerd-shim's copiers, the simulator's pump threads), which no engine fixes, so a
    # tail that cuts through an interleaving compares that race; how --tail counts is the paced fact below.
    # stderr's experiment configuration is the stand-in's merge (the host has TAO's schema package, the
    # test image has not): its last line is compared.
    logs = _section(world, remote.logs_if_exited(job_done, 1000) + " 2>/dev/null")
    errs = _section(world, remote.logs_if_exited(job_done, 1000) + " >/dev/null")
    # TAO's logging lines start with the time they were written ("2026-12-01 23:38:29,687 - [TAO Toolkit]"):
    # the two runs differ there only
    untimed = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
    facts["logs_stdout"] = (logs.exit_code, [untimed.sub("<time> ", x) for x in logs.output.strip().splitlines()])
    facts["logs_stderr_last"] = (errs.exit_code, [untimed.sub("<time> ", x) for x in errs.output.strip().splitlines()][-1:])
    # --tail N counts the lines of both streams together, newest last (moby daemon/logger/jsonfilelog reads one
    # file); the writes are 0.3 s apart so their order is the order they were written in.
    _exec(world, f"docker run -d --name interleaved {plain_image} sh -c "
                 "'echo o1; sleep 0.3; echo e1 >&2; sleep 0.3; echo o2; sleep 0.3; echo e2 >&2'")
    _exec(world, "docker wait interleaved")
    tail_out = _section(world, remote.logs_if_exited("interleaved", 3) + " 2>/dev/null")
    tail_err = _section(world, remote.logs_if_exited("interleaved", 3) + " >/dev/null")
    facts["logs_tail_counts_both_streams"] = (tail_out.output.split(), tail_err.output.split())
    last = _section(world, remote.last_log_line("interleaved"))
    stamp, _, text = last.output.strip().partition(" ")
    facts["last_log_line"] = (last.exit_code, progress.rfc3339_epoch(stamp) is not None, text)
    facts["logs_if_running"] = _section(world, remote.logs_if_exited("tao-no-such-job", 5)).output.strip()
    ps = _section(world, remote.list_job_containers())
    roles = {job_done: "done", job_hung: "stopped"}
    rows = sorted((roles[name], state) for name, state in
                  (line.split("\t") for line in ps.output.splitlines() if "\t" in line) if name in roles)
    facts["ps"] = (ps.exit_code, rows)
    code, out, _ = _exec(world, f"docker run -d --name no-cmd {plain_image} tao-no-such-command")
    state = json.loads(_section(world, remote.inspect_state("no-cmd")).output.strip().splitlines()[-1])
    observed = docker_state.from_inspect(state)
    facts["run_missing_command"] = (code, observed.state, observed.exit_code, observed.docker_status,
                                    "executable file not found" in observed.message)
    code, out, _ = _exec(world, f"docker run -d --name wrapped {TAO_IMAGE} tao_no_such_arch train")
    facts["run_id"] = (code, bool(re.fullmatch(r"[0-9a-f]{64}\n", out)))
    waited = _exec(world, "docker wait wrapped")
    wrapped = _section(world, remote.logs_if_exited("wrapped", 20))
    facts["wrapper_127"] = (waited[1].strip(), docker_state.classify_logs(wrapped.output)["reason"],
                            "NVIDIA Release" in wrapped.output)
    token = remote.new_token()
    _, out, _ = _exec(world, remote.progress_functions(token) + "\n"
                      + remote.section(token, "jobs", remote.read_all_jobs()))
    sec = remote.parse_sections(out, token)["jobs"]
    found, noise = progress.parse_jobs(sec.output, token)
    facts["all_jobs"] = (sec.exit_code, noise.strip(), {
        roles[job]: (docker_state.from_inspect(json.loads(probe.state)).state,
                     sorted(f.path for f in probe.files), [json.loads(line)["status"] for f in probe.files
                                                           for line in f.lines[-1:]], probe.tail is not None)
        for job, probe in found.items() if job in roles})
    rm = _section(world, remote.remove_container(job_done))
    rm_missing = _section(world, remote.remove_container(job_done))
    facts["rm"] = (rm.exit_code, rm.output.strip() == job_done, rm_missing.exit_code)
    _exec(world, "docker rm -f no-cmd wrapped interleaved")
    return facts


def test_the_simulators_docker_answers_as_the_real_engine_does(real, tmp_path, state_env):
    from tests.sim.simctl import Simulator

    def jobs(world) -> tuple[str, str]:
        done = world.submit(spec=world.spec({"epoch_seconds": 0.01})).json["job_id"]
        hung = world.submit("--share-gpus", spec=world.spec({"epoch_seconds": 0.01, "hang": True})).json["job_id"]
        assert world.run("poll_status.py", done, *WAIT).json["state"] == "COMPLETE"
        for _ in range(200):
            if _section(world, f"docker logs {hung}").output.count("Epoch 2: 100%"):
                break
        stop = _exec(world, f"docker stop -t 1 {hung}")
        assert stop[0] == 0, stop
        return done, hung

    with Simulator(tmp_path / "sim-only") as sim:
        sim.add_instance("box", images=[TAO_IMAGE, "ubuntu:22.04"])
        simulated = SimWorld(sim, sim.env({**state_env, "TAO_STATE_DIR": str(tmp_path / "sim-state")}),
                             tmp_path / "sim-only")
        from_sim = _parsed(simulated, *jobs(simulated), "ubuntu:22.04")
    from_real = _parsed(real, *jobs(real), "tao-rd/base:bookworm")
    differences = {key: {"sim": from_sim[key], "real": from_real.get(key)}
                   for key in from_sim if from_sim[key] != from_real.get(key)}
    assert differences == {}, json.dumps(differences, indent=1)
    assert set(from_real["all_jobs"][2]) == {"done", "stopped"} and from_real["all_jobs"][2]["done"][1]
    assert from_real["last_log_line"] == (0, True, "e2")
    assert from_real["logs_tail_counts_both_streams"] == (["o2"], ["e1", "e2"])
    assert "Execution status: PASS" in from_real["logs_stderr_last"][1][0]
    assert from_real["state_stopped"][2]["exit_code"] == 137          # docker stop of a PID 1 without handler
    assert from_real["wrapper_127"][0] == "127" and from_real["run_missing_command"][2] == 127
