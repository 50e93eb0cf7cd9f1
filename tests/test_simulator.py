"""The simulator reproduces the brev and docker behaviours the product must survive.

Each brev test names the point of references/brev-exec.md
it proves; docker tests follow the Docker CLI reference. Everything runs real
processes through the generated executables, as the product will.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import wait_until
from tests.sim.simctl import TAO_IMAGE, Simulator

NGC_KEY = "nvapi-sim-SECRET-key-0123"


@pytest.fixture
def sim(tmp_path):
    simulator = Simulator(tmp_path / "sim")
    simulator.add_instance("box")
    yield simulator
    simulator.close()


def brev(sim, *args, stdin=subprocess.DEVNULL, input=None, env=None, timeout=60):
    """Run the simulated brev like the product should: stdin from /dev/null unless told otherwise."""
    return subprocess.run(["brev", *args], env=env or sim.env(), stdin=None if input is not None else stdin,
                          input=input, capture_output=True, text=True, timeout=timeout)


def remote(sim, command, instance="box"):
    return brev(sim, "exec", instance, command)


def write_spec(sim, name="spec.yaml", **simulate) -> Path:
    """A TAO spec in ~/data of box (dataset dir included); the TAO image is already on the instance."""
    sim.preload_image("box", TAO_IMAGE)
    home = sim.instance_home("box")
    data = home / "data"
    (data / "images").mkdir(parents=True, exist_ok=True)
    lines = ["results_dir: /results", "dataset:", "  segment:", "    root_dir: /data/images", "train:",
             "  num_epochs: 2"]
    if simulate:
        lines.append("simulate:")
        lines += [f"  {k}: {json.dumps(v)}" for k, v in simulate.items()]
    (data / name).write_text("\n".join(lines) + "\n")
    return home


def tao_run(name, extra="", spec="/data/spec.yaml", gpus="--gpus all"):
    return (f"docker run -d --name {name} --label tao-job={name} {gpus} -v ~/data:/data -v ~/results:/results "
            f"{extra} {TAO_IMAGE} visual_changenet train -e {spec}")


def login_ngc(sim, instance="box"):
    sim.set_ngc_key(NGC_KEY)
    (sim.instance_home(instance) / ".ngc").write_text(NGC_KEY)
    result = remote(sim, "docker login nvcr.io -u '$oauthtoken' --password-stdin < .ngc", instance)
    assert result.returncode == 0, result.stderr


# ---------------------------------------------------------------------------
# brev exec

def test_exec_runs_in_clean_remote_env_and_echoes_name_when_piped(sim):
    env = sim.env()
    env["LOCAL_ONLY_SECRET"] = "laptop-value"
    result = brev(sim, "exec", "box", 'echo "[$LOCAL_ONLY_SECRET]"; pwd; echo "$HOME"; cat; echo end', env=env)
    home = str(sim.instance_home("box"))
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["[]", home, home, "end", "box"]  # point 4: echoed name last


def test_exec_does_not_echo_name_when_stdout_is_a_terminal(sim):
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(["brev", "exec", "box", "echo hi"], env=sim.env(), stdin=subprocess.DEVNULL,
                              stdout=slave, stderr=subprocess.PIPE, timeout=30)
        os.close(slave)
        output = b""
        while True:
            try:
                chunk = os.read(master, 1024)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0
    assert output.decode().split() == ["hi"]


def test_double_dash_does_not_group_words(sim):
    """Point 1: `brev exec box -- docker inspect X` = instances box, docker, inspect; command X."""
    result = brev(sim, "exec", "box", "--", "docker", "inspect", "X")
    assert result.returncode == 1
    assert "=== docker ===" in result.stderr and "=== inspect ===" in result.stderr
    assert 'could not look up instance "docker"' in result.stderr
    assert sim.remote_commands("box") == ["X", "X"]  # ran as a command, failed, ran again


def test_unknown_flag_among_words_is_a_cobra_error(sim):
    result = brev(sim, "exec", "box", "echo", "-n", "hi")
    assert result.returncode == 1
    assert "unknown shorthand flag: 'n' in -n" in result.stderr
    assert sim.remote_commands() == []


def test_piped_stdin_is_read_as_instance_names_and_echoed(sim):
    """Point 3: piped text becomes instance names; the error echoes it; the remote never sees stdin."""
    result = brev(sim, "exec", "box", "cat; echo done", input="hunter2-password\n")
    assert result.returncode == 1
    assert 'could not look up instance "hunter2-password"' in result.stderr
    assert result.stdout.splitlines()[:2] == ["done", "box"]
    record = next(r for r in sim.audit() if r["tool"] == "brev")
    assert record["stdin_is_tty_or_chardev"] is False and "hunter2-password" in record["stdin_text"]


def test_at_file_command_is_read_locally_and_audited(sim, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("echo from-file\n")
    result = brev(sim, "exec", "box", f"@{script}")
    assert result.stdout.splitlines() == ["from-file", "box"]
    assert any(r.get("file_content") == "echo from-file\n" for r in sim.audit() if r["tool"] == "brev")


def test_nonzero_remote_exit_is_retried_and_runs_twice(sim):
    """Point 7: any non-zero exit -> 'Connection failed' -> the command runs a second time -> exit 1."""
    result = remote(sim, "echo run >> runs.txt; echo payload; exit 3")
    assert result.returncode == 1
    assert "Connection failed, checking instance status..." in result.stderr
    assert result.stdout.splitlines() == ["payload", "payload"]
    assert (sim.instance_home("box") / "runs.txt").read_text() == "run\nrun\n"


def test_fresh_instance_refuses_ssh_then_brev_waits(sim):
    """Point 8: RUNNING before sshd accepts connections; brev's probe loop absorbs a short delay."""
    sim.add_instance("fresh", ssh_refusals=2)     # counted refusals: no race with the machine's load
    assert sim.instance("fresh")["status"] == "RUNNING"
    result = remote(sim, "echo ok", "fresh")
    assert result.returncode == 0 and result.stdout.splitlines() == ["ok", "fresh"]
    # brev prints the refusal of its first ssh; its wait loop's probe (the second refusal) is silent
    assert result.stderr.count("port 22: Connection refused") == 1
    assert sim.instance("fresh")["ssh_refusals"] == 0

    sim.add_instance("slow", ssh_delay_s=3600)    # beyond brev's probe loop on any machine
    result = remote(sim, "echo ok", "slow")
    assert result.returncode == 1 and 'could not connect to instance "slow"' in result.stderr
    assert sim.remote_commands("slow") == []


def test_stopped_instance_is_started_by_exec(sim):
    sim.add_instance("cold", status="STOPPED")
    (sim.instance_home("cold") / "kept.txt").write_text("x\n")
    result = remote(sim, "cat kept.txt", "cold")
    assert result.returncode == 0
    assert "Instance cold is starting." in result.stdout and result.stdout.splitlines()[-1] == "cold"
    assert sim.instance("cold")["status"] == "RUNNING"


def test_instance_in_other_state_is_an_error(sim):
    sim.set_instance("box", status="DEPLOYING")
    result = remote(sim, "echo ok")
    assert result.returncode == 1
    assert 'instance "box" is in state "DEPLOYING"' in result.stderr


def test_multiple_instances_get_headers_on_stderr(sim):
    sim.add_instance("two")
    result = brev(sim, "exec", "box", "two", "echo hi")
    assert result.returncode == 0
    assert "=== box ===" in result.stderr and "=== two ===" in result.stderr
    assert result.stdout.splitlines() == ["hi", "box", "hi", "two"]


def test_banner_is_noise_on_stdout(sim):
    sim.set_instance("box", banner="Welcome to Brev!")
    assert remote(sim, "echo data").stdout.splitlines() == ["Welcome to Brev!", "data", "box"]


def test_faults_go_through_the_retry_rule(sim):
    sim.add_fault("marker-a", "reset_before")
    result = remote(sim, "echo marker-a >> a.txt; echo A")
    assert result.returncode == 0 and "Connection reset" in result.stderr
    assert (sim.instance_home("box") / "a.txt").read_text() == "marker-a\n"  # ran once (on retry)

    sim.add_fault("marker-b", "reset_after")
    result = remote(sim, "echo marker-b >> b.txt; echo B")
    assert result.returncode == 0 and result.stdout.splitlines() == ["B", "box"]  # first output lost
    assert (sim.instance_home("box") / "b.txt").read_text() == "marker-b\nmarker-b\n"  # ran twice

    sim.add_fault("marker-c", "reset_before", times=2)
    assert remote(sim, "echo marker-c").returncode == 1

    sim.add_fault("", "hang")
    with pytest.raises(subprocess.TimeoutExpired):
        brev(sim, "exec", "box", "echo never", timeout=1)
    assert sim.exec_count() == 4


# ---------------------------------------------------------------------------
# ls, delete, stop/start, auth, copy

def test_ls_json_shape_and_null_workspaces(tmp_path):
    sim = Simulator(tmp_path / "sim")
    result = brev(sim, "ls", "--json")
    assert json.loads(result.stdout) == {"workspaces": None}
    sim.add_instance("box")
    sim.add_instance("off", status="STOPPED")
    rows = {w["name"]: w for w in json.loads(brev(sim, "ls", "--json").stdout)["workspaces"]}
    assert set(rows["box"]) == {"name", "id", "status", "build_status", "shell_status", "health_status",
                                "instance_type", "instance_kind", "gpu"}
    assert rows["box"]["shell_status"] == "READY" and rows["off"]["shell_status"] == "NOT READY"
    assert rows["off"]["status"] == "STOPPED"
    table = brev(sim, "ls").stdout
    assert "NAME" in table and "STATUS" in table  # a table, even when piped


def test_delete_has_no_yes_flag_and_loses_files(sim):
    result = brev(sim, "delete", "box", "--yes")
    assert result.returncode == 1 and "unknown flag: --yes" in result.stderr
    home = sim.instance_home("box")
    (home / "results").mkdir()
    result = brev(sim, "delete", "box")
    assert result.returncode == 0 and result.stdout == "box\n"
    assert not home.exists()
    assert json.loads(brev(sim, "ls", "--json").stdout) == {"workspaces": None}


def test_delete_reads_names_from_piped_stdin(sim):
    sim.add_instance("two")
    result = brev(sim, "delete", input="two\n")
    assert result.returncode == 0 and result.stdout == "two\n"
    assert sim.world.instance("two") is None


def test_auth_states(sim):
    sim.set_auth(logged_in=False)
    result = remote(sim, "echo ok")
    assert result.returncode == 1 and "EOF" in result.stderr and "tty" in result.stderr
    assert brev(sim, "login", "--token", "wrong").returncode == 1
    assert brev(sim, "login", "--token", "tok-valid").returncode == 0
    assert remote(sim, "echo ok").returncode == 0

    sim.set_auth(expired=True)
    result = brev(sim, "ls", "--json")
    assert result.returncode == 1 and "401" in result.stderr

    sim.set_auth(expires_after_calls=1)
    assert remote(sim, "echo ok").returncode == 0
    assert "401" in remote(sim, "echo ok").stderr
    assert brev(sim, "login", "--token", "tok-valid").returncode == 0
    assert remote(sim, "echo ok").returncode == 0


def test_stop_kills_containers_keeps_files_and_start_restores(sim):
    write_spec(sim, hang=True)
    assert remote(sim, tao_run("job")).returncode == 0
    assert brev(sim, "stop", "box").returncode == 0
    state = sim.container("box", "job")["State"]
    assert state["Status"] == "exited" and state["ExitCode"] == 137
    assert (sim.instance_home("box") / "data" / "spec.yaml").exists()
    assert remote(sim, "echo ok").returncode == 0  # exec starts it again
    assert sim.instance("box")["status"] == "RUNNING"


def test_copy_both_directions(sim, tmp_path):
    local = tmp_path / "up"
    local.mkdir()
    (local / "a.txt").write_text("A")
    assert brev(sim, "copy", str(local), "box:inputs").returncode == 0
    assert (sim.instance_home("box") / "inputs" / "a.txt").read_text() == "A"
    assert brev(sim, "copy", "box:/home/ubuntu/inputs/a.txt", str(tmp_path / "back.txt")).returncode == 0
    assert (tmp_path / "back.txt").read_text() == "A"
    assert brev(sim, "copy", "nope:/x", str(tmp_path)).returncode == 1


# ---------------------------------------------------------------------------
# docker

def test_run_detached_inspect_logs_rm(sim):
    write_spec(sim, hang=True)
    result = remote(sim, tao_run("job-1"))
    assert result.returncode == 0, result.stderr
    cid = result.stdout.splitlines()[0]
    assert len(cid) == 64 and all(c in "0123456789abcdef" for c in cid)
    status = remote(sim, "docker inspect -f '{{.State.Status}} {{.Name}} {{json .Config.Labels}}' job-1")
    assert status.stdout.splitlines()[0] == 'running /job-1 {"tao-job":"job-1"}'
    ps = remote(sim, "docker ps -a --filter label=tao-job=job-1 --format '{{.Names}}\\t{{.State}}'")
    assert ps.stdout.splitlines()[0] == "job-1\trunning"
    # Lightning's progress bar of the second epoch (current_epoch 1: Lightning counts from 0)
    wait_until(lambda: "Epoch 1: 100%" in sim.container_logs("box", "job-1"), "the second epoch's log line")
    # the two last log entries, then brev's echoed instance name; which entry precedes the epoch line
    # depends on how the container's stdout and stderr interleaved (two streams, as in docker)
    tail = remote(sim, "docker logs --tail 2 job-1 2>&1").stdout.splitlines()
    assert len(tail) == 3 and tail[1].startswith("Epoch 1: 100%") and tail[2] == "box", tail
    pid = sim.container("box", "job-1")["State"]["Pid"]
    assert remote(sim, "docker rm -f job-1").returncode == 0

    def gone() -> bool:   # killed: no such process, or a zombie not yet reaped
        try:
            return "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]
        except FileNotFoundError:
            return True

    wait_until(gone, "the container's process to die")
    missing = remote(sim, "docker inspect job-1")
    assert missing.returncode == 1 and "Error: No such object: job-1" in missing.stderr
    assert remote(sim, "docker rm -f job-1").returncode == 0
    assert "No such container: job-1" in remote(sim, "docker logs job-1").stderr
    assert sim.docker_run_count("box", "job-1") == 1


def test_name_conflict_exits_125(sim):
    write_spec(sim)
    assert remote(sim, tao_run("dup")).returncode == 0
    result = remote(sim, tao_run("dup") + " ; echo rc=$?")
    assert "rc=125" in result.stdout
    assert 'Conflict. The container name "/dup" is already in use' in result.stderr


def test_completed_run_and_failures_are_inspectable(sim):
    home = sim.instance_home("box")
    write_spec(sim)
    write_spec(sim, "oom.yaml", oom=True)
    write_spec(sim, "xid.yaml", xid=True)
    write_spec(sim, "bad.yaml", exit_code=3)
    for name, spec in [("ok", "spec"), ("oom", "oom"), ("xid", "xid"), ("bad", "bad")]:
        # a results dir each: TAO resumes from the *_latest.pth of a shared one (initialize_experiments.py:66)
        assert remote(sim, tao_run(name, spec=f"/data/{spec}.yaml") + f" results_dir=/results/{name}").returncode == 0
    states = {n: sim.wait_container("box", n)["State"] for n in ("ok", "oom", "xid", "bad")}
    assert (states["ok"]["ExitCode"], states["ok"]["OOMKilled"]) == (0, False)
    assert (states["oom"]["ExitCode"], states["oom"]["OOMKilled"]) == (137, True)
    assert states["xid"]["ExitCode"] == 1 and states["bad"]["ExitCode"] == 3
    assert "GPU has fallen off the bus" in sim.container_logs("box", "xid")
    results = home / "results" / "ok" / "train"
    assert (results / "model_epoch_001_step_00050.pth").exists()
    lines = [json.loads(line) for line in (results / "status.json").read_text().splitlines()]
    # TAO 7 ends a success with a RUNNING line (core/decorators/workflow.py:59-62); SUCCESS is never written
    assert {"status": "RUNNING", "message": "Train finished successfully."}.items() <= lines[-1].items() \
        or any(x.get("message") == "Train finished successfully." for x in lines)
    assert not any(x["status"] == "SUCCESS" for x in lines)


def test_missing_spec_or_dataset_fails_like_tao(sim):
    home = sim.instance_home("box")
    write_spec(sim)
    assert remote(sim, tao_run("nogpu", gpus="")).returncode == 0  # no --gpus: TAO finds no CUDA device
    assert sim.wait_container("box", "nogpu")["State"]["ExitCode"] == 1
    assert "RuntimeError: No CUDA GPUs are available" in sim.container_logs("box", "nogpu")
    (home / "data" / "images").rmdir()
    assert remote(sim, tao_run("nodata")).returncode == 0
    assert remote(sim, tao_run("nospec", spec="/data/absent.yaml")).returncode == 0
    for name in ("nodata", "nospec"):
        assert sim.wait_container("box", name)["State"]["ExitCode"] == 1
    logs = remote(sim, "docker logs nodata")
    assert "Traceback" in logs.stderr and "FileNotFoundError: [Errno 2] No such file or directory: '/data/images'" \
        in logs.stderr
    assert "Traceback" not in logs.stdout  # stderr stays stderr, as with real docker logs
    # tao-pytorch core/entrypoint.py:129-135: the entrypoint checks the spec itself, on stdout, exit 1
    assert "ERROR: The indicated experiment spec file `/data/absent.yaml` doesn't exist!" \
        in remote(sim, "docker logs nospec").stdout


def test_gpu_runtime_missing_and_daemon_down(sim):
    write_spec(sim)
    sim.set_instance("box", gpu_runtime=False)
    result = remote(sim, tao_run("gpu-job") + "; echo rc=$?")
    assert "rc=125" in result.stdout and 'could not select device driver "" with capabilities: [[gpu]]' \
        in result.stderr
    # moby daemon/start.go: the start failed after the create; the container stays, created, with the error
    state = sim.container("box", "gpu-job")["State"]
    assert (state["Status"], state["ExitCode"]) == ("created", 128)
    assert state["Error"] == 'could not select device driver "" with capabilities: [[gpu]]'
    assert "created" in remote(sim, "docker ps -a --format '{{.Names}} {{.State}}'").stdout
    sim.set_instance("box", docker_daemon="down")
    result = remote(sim, "docker ps; echo rc=$?")
    assert "rc=1" in result.stdout and "Cannot connect to the Docker daemon" in result.stderr


def test_ngc_login_needs_literal_oauthtoken_user(sim):
    sim.set_ngc_key(NGC_KEY)
    (sim.instance_home("box") / ".ngc").write_text(NGC_KEY)
    expanded = remote(sim, 'docker login nvcr.io -u "$oauthtoken" --password-stdin < .ngc; echo rc=$?')
    assert "Must provide --username with --password-stdin" in expanded.stderr and "rc=1" in expanded.stdout
    unquoted = remote(sim, "docker login nvcr.io -u $oauthtoken --password-stdin < .ngc; echo rc=$?")
    assert "non TTY" in unquoted.stderr and "rc=1" in unquoted.stdout
    wrong = remote(sim, "echo nope | docker login nvcr.io -u '$oauthtoken' --password-stdin; echo rc=$?")
    assert "unauthorized: authentication required" in wrong.stderr and "rc=1" in wrong.stdout
    good = remote(sim, "docker login nvcr.io -u '$oauthtoken' --password-stdin < .ngc")
    assert good.returncode == 0 and "Login Succeeded" in good.stdout
    config = json.loads((sim.instance_home("box") / ".docker" / "config.json").read_text())
    assert base64.b64decode(config["auths"]["nvcr.io"]["auth"]).decode() == f"$oauthtoken:{NGC_KEY}"
    assert NGC_KEY not in sim.audit_text()  # stdin is not recorded; argv never held it


def test_manifest_inspect_auth_then_entitlement(sim):
    check = f"docker manifest inspect {TAO_IMAGE} >/dev/null && echo AUTH_OK || echo AUTH_FAIL"
    before = remote(sim, check)
    assert before.stdout.splitlines()[0] == "AUTH_FAIL" and "unauthorized" in before.stderr
    login_ngc(sim)
    assert remote(sim, check).stdout.splitlines()[0] == "AUTH_OK"
    sim.add_image(TAO_IMAGE, requires_auth=True, entitled=False)
    denied = remote(sim, check)
    assert denied.stdout.splitlines()[0] == "AUTH_FAIL" and 'denied: {"errors": [{"code": "DENIED"' in denied.stderr
    pull = remote(sim, f"docker pull {TAO_IMAGE}; echo rc=$?")
    assert 'denied: {"errors": [{"code": "DENIED"' in pull.stderr and "rc=1" in pull.stdout   # nvcr.io's answer
    sim.add_image(TAO_IMAGE, requires_auth=True, entitled=True)
    remote(sim, "docker logout nvcr.io")
    pull = remote(sim, f"docker pull {TAO_IMAGE}; echo rc=$?")
    assert "unauthorized: authentication required" in pull.stderr and "rc=1" in pull.stdout


def test_pull_rules(sim):
    login_ngc(sim)
    sim.set_instance("box", disk_free_bytes=10**9)
    full = remote(sim, f"docker pull {TAO_IMAGE}; echo rc=$?")
    assert "no space left on device" in full.stderr and "rc=1" in full.stdout
    assert str(10**9) in remote(sim, "df -P -B1 .").stdout
    unknown = remote(sim, "docker pull nvcr.io/nvidia/nope:1; echo rc=$?")
    assert "manifest unknown" in unknown.stderr and "rc=1" in unknown.stdout
    sim.add_image("flaky/img:1", pull_fails="toomanyrequests: rate limit")
    assert "toomanyrequests" in remote(sim, "docker pull flaky/img:1").stderr
    sim.set_instance("box", disk_free_bytes=None)
    assert remote(sim, f"docker pull {TAO_IMAGE}").returncode == 0
    size = remote(sim, f"docker image inspect --format '{{{{.Size}}}}' {TAO_IMAGE}")
    assert size.stdout.splitlines()[0] == "18000000000"
    assert "No such image" in remote(sim, "docker image inspect ubuntu:22.04").stderr


def test_env_passthrough_comes_from_the_remote_shell(sim):
    """-e VAR copies docker's own env (clean over ssh); --env-file keeps values verbatim."""
    home = sim.instance_home("box")
    write_spec(sim, write_env_hashes=["NGC_KEY", "FROM_FILE", "PASSED", "QUOTED"])
    (home / "job.env").write_text("# comment\nFROM_FILE=file-value\nPASSED\nQUOTED=\"q\"\n")
    env = sim.env()
    env["NGC_KEY"] = NGC_KEY  # set on the laptop only
    command = "export PASSED=remote-value; " + tao_run("envjob", extra="-e NGC_KEY --env-file job.env")
    assert brev(sim, "exec", "box", command, env=env).returncode == 0
    sim.wait_container("box", "envjob")
    seen = json.loads((home / "results" / "env_seen.json").read_text())
    sha = lambda v: hashlib.sha256(v.encode()).hexdigest()  # noqa: E731
    assert seen == {"NGC_KEY": None, "FROM_FILE": sha("file-value"), "PASSED": sha("remote-value"),
                    "QUOTED": sha('"q"')}


def test_foreground_run_streams_and_returns_exit_code(sim):
    result = remote(sim, "docker run --rm ubuntu:22.04 bash -c 'echo out; echo err >&2; exit 4'; echo rc=$?")
    assert "Unable to find image 'ubuntu:22.04' locally" in result.stderr
    assert result.stdout.splitlines()[:2] == ["out", "rc=4"] and "err" in result.stderr
    assert sim.containers("box") == []  # --rm
    smi = remote(sim, "docker run --rm --gpus '\"device=0\"' ubuntu:22.04 nvidia-smi "
                      "--query-gpu=name,memory.total,driver_version --format=csv,noheader")
    assert smi.stdout.splitlines()[0] == "NVIDIA A100-SXM4-80GB, 81920 MiB, 550.54.15"
    no_gpu = remote(sim, "docker run --rm ubuntu:22.04 nvidia-smi; echo rc=$?")
    assert "couldn't communicate with the NVIDIA driver" in no_gpu.stdout and "rc=9" in no_gpu.stdout
    unquoted = remote(sim, "docker run --rm --gpus device=0,1 ubuntu:22.04 true; echo rc=$?")
    assert "cannot set both Count and DeviceIDs" in unquoted.stderr and "rc=125" in unquoted.stdout


def test_foreground_run_belongs_to_the_daemon_once_the_cli_is_gone(sim):
    """moby AutoRemove: a ``--rm`` container killed away from its CLI still runs to its end and is
    removed by the daemon; docker/cli ForwardAllSignals: a SIGTERM the CLI gets reaches the container."""
    killed = remote(sim, "docker run --rm ubuntu:22.04 bash -c 'sleep 4; echo done' & pid=$!; sleep 0.5; "
                         "kill -9 $pid; echo killed")
    assert "killed" in killed.stdout
    assert [c["State"]["Status"] for c in sim.containers("box")] == ["running"]
    wait_until(lambda: sim.containers("box") == [], "the daemon removed the --rm container")
    proxied = remote(sim, "docker run --rm ubuntu:22.04 bash -c 'trap \"echo got-term; exit 7\" TERM; "
                          "sleep 5 & wait' & pid=$!; sleep 0.8; kill -TERM $pid; wait $pid; echo rc=$?")
    assert "got-term" in proxied.stdout and "rc=7" in proxied.stdout, proxied
    assert sim.containers("box") == []


def test_docker_cli_argument_rules(sim):
    bad_flag = remote(sim, "docker run --bogus ubuntu:22.04 true; echo rc=$?")
    assert "unknown flag: --bogus" in bad_flag.stderr and "rc=125" in bad_flag.stdout
    tilde = remote(sim, "docker run --rm -v '~/data:/data' ubuntu:22.04 true; echo rc=$?")
    assert "includes invalid characters for a local volume name" in tilde.stderr and "rc=125" in tilde.stdout
    missing = remote(sim, "docker run -d --name miss ubuntu:22.04 no-such-tool; echo rc=$?")
    assert "executable file not found" in missing.stderr and "rc=127" in missing.stdout
    assert sim.container("box", "miss")["State"]["Status"] == "created"
    running = remote(sim, "docker run -d --name sleeper ubuntu:22.04 sleep 30 >/dev/null; docker rm sleeper; "
                          "echo rc=$?")
    assert "container is running" in running.stderr and "rc=1" in running.stdout
    # `sleep` as the container's PID 1 has no SIGTERM handler: the kernel drops the
    # signal, docker stop waits out -t and SIGKILLs (137, as a real engine answers)
    stopped = remote(sim, "docker stop -t 1 sleeper >/dev/null; docker inspect -f '{{.State.ExitCode}}' sleeper")
    assert stopped.stdout.splitlines()[0] == "137"


def test_remote_tools_and_audit(sim):
    smi = remote(sim, "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader")
    assert smi.stdout.splitlines()[0] == "NVIDIA A100-SXM4-80GB, 81920 MiB, 550.54.15"
    sim.add_instance("cpu", gpus=())
    assert "rc=9" in remote(sim, "nvidia-smi; echo rc=$?", "cpu").stdout
    info = remote(sim, "docker info --format '{{json .Runtimes}}'")
    assert "nvidia" in json.loads(info.stdout.splitlines()[0])
    tools = {r["tool"] for r in sim.audit()}
    assert {"brev", "remote-shell", "nvidia-smi", "docker"} <= tools
    assert all(r["stdin_is_tty_or_chardev"] for r in sim.audit() if r["tool"] == "brev")


def test_simctl_cli_init(tmp_path):
    root = tmp_path / "demo"
    out = subprocess.run([sys.executable, str(Path(__file__).parent / "sim" / "simctl.py"), "init", str(root),
                          "--instance", "demo-box"], capture_output=True, text=True, check=True).stdout
    env = dict(os.environ, **json.loads(out))
    result = subprocess.run(["brev", "exec", "demo-box", "echo ok"], env=env, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=30)
    assert result.stdout.splitlines() == ["ok", "demo-box"]
    # brev leaked an ssh-agent (SSH_AUTH_SOCK is unset here); `close` ends it, and says so
    assert Simulator(root).ssh_agents_alive()
    closed = subprocess.run([sys.executable, str(Path(__file__).parent / "sim" / "simctl.py"), "close", str(root)],
                            capture_output=True, text=True, check=True)
    assert "no simulated process" in closed.stderr and "runs now" in closed.stderr, closed
    assert not Simulator(root).ssh_agents_alive()


def test_an_unnamed_container_gets_a_name_no_container_holds(tmp_path, monkeypatch):
    """moby daemon/names.go generateAndReserveName: a generated name that is taken is drawn again (a
    digit appended from the second try on), six tries, then the short id - never a name conflict."""
    from tests.sim.containers import _ADJECTIVES, _SURNAMES, ContainerStore

    store = ContainerStore(tmp_path / "docker")
    every_base = {f"{a}_{s}" for a in _ADJECTIVES for s in _SURNAMES}
    monkeypatch.setattr(store, "name_in_use", lambda name: "holder" if name in every_base else None)
    drawn = store.free_random_name()
    assert drawn not in every_base and drawn[:-1] in every_base and drawn[-1].isdigit(), drawn
    monkeypatch.setattr(store, "name_in_use", lambda name: "holder")   # every draw taken
    short_id = store.free_random_name()
    assert len(short_id) == 12 and int(short_id, 16) >= 0, short_id
