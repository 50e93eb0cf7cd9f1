"""Issue 6: nothing lost, nothing launched twice, every fault named.

Each fault runs the scripts against the simulator and checks the record, the
JSON answer (schema-valid), the exit code and that the instance saw at most
one ``docker run`` for the job. Waits on background processes poll for an
observable effect with a generous deadline; no assertion depends on timing.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, TAO_IMAGE, validate, wait_until
from tao_brev import remote
from tao_brev.docker_state import after_instance_start, classify_logs, docker_error_code, from_inspect
from tao_brev.records import RecordStore, now_iso
from tao_brev.sidecar import SidecarStore
from tao_brev.transport import Brev

FAST = {"TAO_BREV_RETRY_BACKOFF_S": "0"}   # read retries without the production backoff


# -- helpers ---------------------------------------------------------------------
def records(world) -> RecordStore:
    return RecordStore(Path(world.env["TAO_STATE_DIR"]))


def sidecars(world) -> SidecarStore:
    return SidecarStore(Path(world.env["TAO_STATE_DIR"]))


def states(world, job_id) -> list[str]:
    return [t["state"] for t in records(world).load(job_id)["transitions"]]


def launches(world, job_id) -> int:
    return world.sim.docker_run_count("box", job_id)


def abandoned(world, job_id) -> bool:
    return (world.sim.instance_home("box") / "tao-jobs" / job_id / remote.ABANDONED).exists()


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def pending_record(world, instance: str | None = "box", pid: int | None = None) -> str:
    """A record as a submit killed between ``open`` and the launch leaves it."""
    job_id = records(world).open(image=TAO_IMAGE, network_arch="visual_changenet", action="train",
                                 storage_tier="A", results_root="~/tao-results")["id"]
    if instance is not None:
        sidecars(world).update(job_id, instance=instance,
                               launch={"state": "launching", "pid": pid, "started_at": now_iso()})
    return job_id


def launch_directly(world, job_id: str, spec_text: str = "simulate: {hang: true}\n") -> None:
    """Launch the job's container the way submit's launch script does."""
    run = remote.RunSpec(job_id=job_id, image=TAO_IMAGE, network_arch="visual_changenet", action="train",
                         results_dir=f"~/tao-results/{job_id}")
    Brev(env=world.env).run("box", remote.submit_script(run, spec_text))


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan is reaped by whoever adopted it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def script_argv(name: str, *args: str) -> list[str]:
    return [sys.executable, str(ROOT / "scripts" / name), *args]


def submit_args(world, spec: Path) -> list[str]:
    data = world.put_dataset("box")
    return ["--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
            "--action", "train", "--spec", str(spec), "--inputs", f"{data}=levir_cd_tiny"]


def hanging_job(world) -> str:
    sub = world.submit(spec=world.spec({"hang": True, "epoch_seconds": 0.01}))
    assert sub.code == 0, sub
    return sub.json["job_id"]


# -- 2. dropped connections: reads retry, a launch is reconciled, never repeated ------
def test_reads_retry_through_dropped_connections_and_give_up_named(world):
    job_id = hanging_job(world)
    for script, args in (("poll_status.py", ()), ("poll_status.py", ("--logs", "5"))):
        world.sim.add_fault(job_id, "reset_before", times=2)   # brev's retry fails too: a transport failure
        res = world.run(script, job_id, *args, **FAST)
        assert res.code == 0 and res.json["state"] == "RUNNING", res
        validate("poll_status", res.json)
        assert "retrying" in res.stderr
    world.sim.add_fault(job_id, "reset_after", times=6)   # every attempt runs, every answer is lost
    res = world.run("poll_status.py", job_id, **FAST)
    assert res.code == 3 and res.json["error"]["code"] == "TRANSPORT_FAILED", res
    validate("poll_status", res.json)
    assert states(world, job_id) == ["PENDING", "RUNNING"]
    world.sim.add_fault(job_id, "reset_before", times=2)
    down = world.run("teardown.py", job_id, **FAST)
    assert down.code == 0 and down.json["state"] == "CANCELED", down
    assert launches(world, job_id) == 1


@pytest.mark.parametrize("kind, times, exit_code, state, reconciled, runs", [
    ("reset_before", 1, 0, "RUNNING", None, 1),          # brev's own retry runs it once
    ("reset_after", 1, 0, "RUNNING", None, 1),           # brev's retry re-runs it: the guard adopts
    ("reset_after", 2, 0, "RUNNING", "adopted", 1),      # ran, every answer lost: reconciled, adopted
    ("reset_before", 2, 1, "ERROR", "never_launched", 0),  # never ran: reconciled, closed
])
def test_an_ambiguous_launch_is_reconciled_never_repeated(world, kind, times, exit_code, state, reconciled, runs):
    world.sim.add_fault("docker run", kind, times=times)
    sub = world.submit(**FAST)
    assert sub.code == exit_code and sub.json["state"] == state, sub
    validate("submit", sub.json)
    job_id = sub.json["job_id"]
    assert sub.json.get("reconciled") == reconciled
    assert launches(world, job_id) == runs
    record = records(world).load(job_id)
    assert states(world, job_id) == ["PENDING", state]
    if state == "RUNNING":
        assert record["backend_ref"] == f"box/{job_id}" and sub.json["backend_ref"] == f"box/{job_id}"
        if kind == "reset_after":
            assert sub.json["adopted"] is True
            scripts = [c for c in world.sim.remote_commands("box") if "docker run" in c]
            assert len(scripts) == 2           # the launch script really ran twice (brev's retry)
    else:
        assert sub.json["error"]["code"] == "NEVER_LAUNCHED" and f"--retry-of {job_id}" in sub.json["error"]["fix"]
        assert record["err_class"] == "ERR_INFRA" and record["backend_ref"] is None
        assert abandoned(world, job_id)
        retry = world.submit("--retry-of", job_id)
        assert retry.code == 0 and retry.json["state"] == "RUNNING", retry
        assert records(world).load(retry.json["job_id"])["retry_of"] == job_id
        assert launches(world, retry.json["job_id"]) == 1


def test_a_credential_file_is_not_left_behind_by_a_launch_that_never_ran(world):
    world.sim.add_fault("docker run", "reset_before", times=2)
    sub = world.submit("--env", "HF_TOKEN", HF_TOKEN="hf_LeftBehindSecret0123456789abcdef", **FAST)
    assert sub.code == 1 and sub.json["reconciled"] == "never_launched", sub
    assert list(world.sim.instance_home("box").glob(".tao-cred-*")) == []
    assert "hf_LeftBehindSecret" not in sub.stdout + sub.stderr


# -- 4. expired brev token ---------------------------------------------------------------
TOKEN = "brevtok-Ab12Cd34Ef56Gh78Ij90Kl12Mn34"


def test_an_expired_token_is_renewed_once_and_never_shown(world):
    world.sim.set_auth(token=TOKEN, expires_after_calls=2)
    sub = world.submit(BREV_API_TOKEN=TOKEN)                # calls 1-2 (brev ls: the instance's status, exec)
    job_id = sub.json["job_id"]
    res = world.run("poll_status.py", job_id, BREV_API_TOKEN=TOKEN)   # call 2: 401, login, repeated once
    assert res.code == 0 and res.json["state"] in ("RUNNING", "COMPLETE"), res
    validate("poll_status", res.json)
    assert "logging in headlessly" in res.stderr
    logins = [r for r in world.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["login"]]
    assert len(logins) == 1 and launches(world, job_id) == 1
    assert TOKEN not in sub.stdout + sub.stderr + res.stdout + res.stderr
    state_dir = Path(world.env["TAO_STATE_DIR"])
    assert all(TOKEN not in p.read_text() for p in state_dir.rglob("*.json"))


def test_without_a_token_an_expired_login_is_brev_not_logged_in(world):
    sub = world.submit()
    job_id = sub.json["job_id"]
    world.sim.set_auth(expired=True)
    res = world.run("poll_status.py", job_id)
    assert res.code == 3 and res.json["error"]["code"] == "BREV_NOT_LOGGED_IN", res
    validate("error", res.json)
    early = world.submit()                              # the status read (brev ls) fails: nothing recorded
    assert early.code == 3 and early.json["error"]["code"] == "BREV_NOT_LOGGED_IN", early
    assert early.json.get("job_id") is None
    world.sim.set_auth(expires_after_calls=1)           # brev ls answers, the launch's exec meets the expiry
    again = world.submit()
    assert again.code == 3 and again.json["error"]["code"] == "BREV_NOT_LOGGED_IN", again
    validate("submit", again.json)
    assert again.json["state"] == "PENDING" and again.json["job_id"]   # named, so it can be reconciled
    world.sim.set_auth()                                                # logged in again
    later = world.run("poll_status.py", again.json["job_id"])
    assert later.code == 1 and later.json["reconciled"] == "never_launched", later
    assert launches(world, again.json["job_id"]) == 0


# -- 5. the agent killed between open and the launch -------------------------------------
def test_a_pending_record_without_a_sidecar_is_closed_as_never_launched(world):
    job_id = pending_record(world, instance=None)
    res = world.run("poll_status.py", job_id)
    assert res.code == 1 and res.json["state"] == "ERROR" and res.json["reconciled"] == "never_launched", res
    validate("poll_status", res.json)
    assert res.json["error"]["code"] == "NEVER_LAUNCHED"
    assert records(world).load(job_id)["terminal_state"] == "ERROR"


def test_a_dead_submit_is_reconciled_adopting_its_container_or_closing_it(world):
    launched = pending_record(world, pid=dead_pid())
    launch_directly(world, launched)
    lost = pending_record(world, pid=dead_pid())
    live = pending_record(world, pid=os.getpid())        # a submit still launching (this test process)
    ghost = pending_record(world, instance="ghost", pid=dead_pid())

    res = world.run("poll_status.py", launched)
    assert res.code == 0 and res.json["state"] == "RUNNING" and res.json["reconciled"] == "adopted", res
    validate("poll_status", res.json)
    assert res.json["backend_ref"] == f"box/{launched}" and launches(world, launched) == 1

    res = world.run("poll_status.py", lost)
    assert res.code == 1 and res.json["error"]["code"] == "NEVER_LAUNCHED", res
    validate("poll_status", res.json)
    assert abandoned(world, lost) and records(world).load(lost)["err_class"] == "ERR_INFRA"

    res = world.run("poll_status.py", live)
    assert res.code == 0 and res.json["state"] == "PENDING" and "in progress" in res.json["message"], res
    assert states(world, live) == ["PENDING"]

    res = world.run("poll_status.py", ghost, **FAST)
    assert res.code == 1 and res.json["error"]["code"] == "UNKNOWN_INSTANCE", res
    validate("poll_status", res.json)
    assert records(world).load(ghost)["terminal_state"] == "ERROR"


def test_an_agent_killed_mid_launch_leaves_a_job_that_the_next_poll_closes(world):
    world.sim.set_timing(hang_s=1)
    world.sim.add_fault("docker run", "hang")             # the launch's ssh connection hangs
    proc = subprocess.Popen(script_argv("submit.py", *submit_args(world, world.spec())),
                            env=world.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_until(lambda: world.sim.world.state()["faults"][0]["remaining"] == 0, "the launch to hang")
    proc.kill()
    proc.wait()
    [record] = records(world).list()
    job_id = record["id"]
    orphan = [r["pid"] for r in world.sim.audit() if r["tool"] == "brev" and "docker run" in r["argv"][-1]][0]
    res = world.run("poll_status.py", job_id)
    validate("poll_status", res.json)
    wait_until(lambda: not alive(orphan), "the killed agent's brev to end")
    if res.json.get("reconciled") == "never_launched":
        assert res.code == 1 and abandoned(world, job_id) and launches(world, job_id) == 0
    else:   # the orphaned brev won the race and launched: adopted, still one container
        assert res.json["state"] == "RUNNING" and launches(world, job_id) == 1
    assert world.run("poll_status.py", job_id).json["state"] == res.json["state"]


@pytest.mark.parametrize("closer, exit_code, state", [("poll_status.py", 1, "ERROR"), ("teardown.py", 0, "CANCELED")])
def test_a_late_launch_after_the_job_was_closed_refuses(world, closer, exit_code, state):
    """A launch script still on its way when reconciliation or teardown closed the
    job (a timed-out exec keeps running remotely) finds the tombstone, launches nothing."""
    job_id = pending_record(world, pid=dead_pid())
    res = world.run(closer, job_id)
    assert res.code == exit_code and res.json["state"] == state, res
    run = remote.RunSpec(job_id=job_id, image=TAO_IMAGE, network_arch="visual_changenet", action="train",
                         results_dir=f"~/tao-results/{job_id}")
    late = Brev(env=world.env).exec("box", remote.submit_script(run, "simulate: {hang: true}\n"))
    assert late.exit_code == 6 and "TAO_LAUNCH_ABANDONED" in late.stdout
    assert launches(world, job_id) == 0 and world.sim.container("box", job_id) is None


def test_reconciliation_waits_for_a_launch_that_holds_the_lock(world):
    """Launch and reconciliation never interleave: while a launch holds the job's
    lock, reconciliation waits, then finds (and adopts) what the launch started."""
    import fcntl

    job_id = pending_record(world, pid=dead_pid())
    lock = world.sim.instance_home("box") / "tao-jobs" / job_id / ".launch.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)                 # a launch in progress on the instance
        poller = subprocess.Popen(script_argv("poll_status.py", job_id), env=world.env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)
        wait_until(lambda: any("TAO_NEVER_LAUNCHED" in c for c in world.sim.remote_commands("box")),
                   "reconciliation to reach the instance")
        Brev(env=world.env).run("box", f"docker run -d --name {job_id} --label tao-job={job_id} "
                                       "ubuntu:22.04 sleep 60")   # what the launch started
    answer = json.loads(poller.communicate(timeout=90)[0])
    assert poller.returncode == 0 and answer["reconciled"] == "adopted", answer
    assert not abandoned(world, job_id) and states(world, job_id) == ["PENDING", "RUNNING"]


def test_wait_goes_on_through_a_launch_the_instance_did_not_settle_yet(world):
    """--wait on a PENDING record whose reconciliation got no answer (ssh drops every
    connection of the first poll) asks again instead of ending: the next poll adopts
    the container a killed submit's launch had started, and the wait ends with the job."""
    job_id = pending_record(world, pid=dead_pid())
    Brev(env=world.env).run("box", f"docker run -d --name {job_id} --label tao-job={job_id} ubuntu:22.04 true")
    # every connection of the first poll (both reconcile execs and their retries), then some
    world.sim.add_fault("TAO_NEVER_LAUNCHED", "reset_before", times=12)
    res = world.run("poll_status.py", job_id, "--wait", "--interval", "0.1", "--timeout", "120")
    assert res.code == 0 and res.json["state"] == "COMPLETE", res
    assert world.run("poll_status.py", job_id).json["state"] == "COMPLETE"
    assert states(world, job_id) == ["PENDING", "RUNNING", "COMPLETE"]


def test_without_wait_an_unsettled_launch_answers_at_once(world):
    job_id = pending_record(world, pid=dead_pid())
    world.sim.add_fault("TAO_NEVER_LAUNCHED", "reset_before", times=1000)   # the instance never answers
    res = world.run("poll_status.py", job_id)
    assert res.code == 3 and res.json["state"] == "PENDING" and res.json["reconciled"] == "unanswered", res
    assert states(world, job_id) == ["PENDING"]


# -- 6/7. poll --wait killed and restarted; concurrent pollers ------------------------------
def test_a_killed_wait_is_picked_up_and_the_terminal_state_written_once(world, tmp_path):
    go = tmp_path / "go"   # the job runs until the test creates this file (simulated containers see the host)
    job_id = pending_record(world)
    Brev(env=world.env).run("box", f"docker run -d --name {job_id} --label tao-job={job_id} ubuntu:22.04 "
                                   f"bash -c 'while [ ! -e {go} ]; do sleep 0.05; done'")
    records(world).mark(job_id, "RUNNING", backend_ref=f"box/{job_id}")
    log = tmp_path / "wait.stderr"
    with open(log, "w") as err:
        waiter = subprocess.Popen(script_argv("poll_status.py", job_id, "--wait", "--interval", "0.1"),
                                  env=world.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        wait_until(lambda: "next poll in" in log.read_text(), "the waiter to poll once")
        waiter.send_signal(signal.SIGKILL)
        waiter.wait()
    go.touch()
    world.sim.wait_container("box", job_id)
    assert states(world, job_id) == ["PENDING", "RUNNING"]
    restarted = [subprocess.Popen(script_argv("poll_status.py", job_id, "--wait", "--interval", "0.1",
                                              "--timeout", "60"), env=world.env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                 for _ in range(2)]
    answers = [json.loads(p.communicate(timeout=90)[0]) for p in restarted]
    assert [p.returncode for p in restarted] == [0, 0]
    for answer in answers:
        validate("poll_status", answer)
        assert answer["state"] == "COMPLETE" and answer["terminal_state"] == "COMPLETE"
    assert states(world, job_id) == ["PENDING", "RUNNING", "COMPLETE"]
    assert records(world).load(job_id)["terminal_write_by"] == "poller"


# -- 8. the instance deleted or stopped under a running job --------------------------------
def brev_cli(world, *args: str) -> None:
    subprocess.run(["brev", *args], env=world.env, stdin=subprocess.DEVNULL, capture_output=True, check=True)


def test_a_deleted_instance_is_unknown_with_what_was_lost(world):
    job_id = hanging_job(world)
    brev_cli(world, "delete", "box")
    res = world.run("poll_status.py", job_id, **FAST)
    assert res.code == 0 and res.json["state"] == "UNKNOWN", res
    validate("poll_status", res.json)
    assert "deleted" in res.json["message"] and "lost" in res.json["message"]
    assert res.json["hint"]["err_class"] == "ERR_INFRA" and f"--resume-from {job_id}" in res.json["hint"]["advice"]
    wait = world.run("poll_status.py", job_id, "--wait", "--interval", "0.1", **FAST)
    assert wait.code == 1 and wait.json["error"]["code"] == "INSTANCE_LOST", wait
    down = world.run("teardown.py", job_id, **FAST)
    assert down.code == 0 and down.json["state"] == "CANCELED" and down.json["container_removed"] is False, down
    validate("teardown", down.json)
    assert any("no longer exists" in w for w in down.json["warnings"])


def test_a_stopped_instance_is_named_not_mistaken_for_oom(world):
    """poll --start: brev restarts the STOPPED instance to run the poll; the stop killed the container (137)."""
    job_id = hanging_job(world)
    brev_cli(world, "stop", "box")
    res = world.run("poll_status.py", job_id, "--start")
    assert res.code == 0 and res.json["state"] == "ERROR", res
    validate("poll_status", res.json)
    message = res.json["message"]
    assert "box was STOPPED" in message and "bills again" in message and "out of memory" not in message
    assert res.json["hint"]["err_class"] == "ERR_INFRA" and f"--resume-from {job_id}" in res.json["hint"]["advice"]
    assert "--retry-of" not in res.json["hint"]["advice"]   # a link only: never advised as a resume
    record = records(world).load(job_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA"
    assert world.sim.instance("box")["status"] == "RUNNING"


def test_teardown_after_a_stop_names_the_stop_too(world):
    job_id = hanging_job(world)
    brev_cli(world, "stop", "box")
    down = world.run("teardown.py", job_id, "--start")
    assert down.code == 0 and down.json["state"] == "ERROR" and down.json["container_removed"] is True, down
    validate("teardown", down.json)
    message = records(world).load(job_id)["transitions"][-1]["message"]
    assert "box was STOPPED" in message and "out of memory" not in message


def test_an_instance_that_is_stopping_is_unknown_and_named(world):
    job_id = hanging_job(world)
    world.sim.set_instance("box", status="STOPPING")
    res = world.run("poll_status.py", job_id, **FAST)
    assert res.code == 0 and res.json["state"] == "UNKNOWN", res
    validate("poll_status", res.json)
    assert "box is STOPPING" in res.json["message"] and res.json["hint"]["err_class"] == "ERR_INFRA"


def test_after_instance_start_keeps_a_real_failure():
    own = from_inspect({"Status": "exited", "ExitCode": 3})
    assert after_instance_start(own, "box").hint == own.hint and "note" in after_instance_start(own, "box").message
    assert own.hint["err_class"] is None and "exit 3, no known pattern" in own.hint["reason"]
    oom = from_inspect({"Status": "exited", "ExitCode": 137, "OOMKilled": True})
    assert after_instance_start(oom, "box").hint["err_class"] == "ERR_PROGRAM"


# -- 9. docker faults at submit and status ---------------------------------------------------
def test_docker_daemon_down_is_named_at_submit_and_at_status(world):
    job_id = hanging_job(world)
    world.sim.set_instance("box", docker_daemon="down")
    res = world.run("poll_status.py", job_id)
    assert res.code == 1 and res.json["error"]["code"] == "DOCKER_DAEMON_DOWN", res
    validate("poll_status", res.json)
    assert states(world, job_id) == ["PENDING", "RUNNING"]
    sub = world.submit()
    assert sub.code == 1 and sub.json["error"]["code"] == "DOCKER_DAEMON_DOWN", sub
    validate("submit", sub.json)
    assert "systemctl restart docker" in sub.json["error"]["fix"]
    assert records(world).load(sub.json["job_id"])["terminal_state"] == "ERROR"
    assert launches(world, sub.json["job_id"]) == 0


def test_missing_nvidia_runtime_is_named_at_submit(world):
    world.sim.set_instance("box", gpu_runtime=False)
    sub = world.submit()
    assert sub.code == 1 and sub.json["error"]["code"] == "NVIDIA_RUNTIME_MISSING", sub
    validate("submit", sub.json)
    assert "nvidia-ctk" in sub.json["error"]["fix"] and launches(world, sub.json["job_id"]) == 1


def test_an_image_that_needs_a_pull_is_refused_before_any_gpu_time(world):
    world.sim.add_image("nvcr.io/nvidia/tao/private:1.0", requires_auth=True)
    sub = world.submit("--image", "nvcr.io/nvidia/tao/private:1.0")
    assert sub.code == 1 and sub.json["error"]["code"] == "IMAGE_NOT_PULLED", sub
    validate("submit", sub.json)
    assert "--pull" in sub.json["error"]["fix"] and launches(world, sub.json["job_id"]) == 0


@pytest.mark.parametrize("message, code", [
    ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?",
     "DOCKER_DAEMON_DOWN"),
    ("docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].",
     "NVIDIA_RUNTIME_MISSING"),
    ("failed to register layer: write /var/lib/docker/overlay2/x/diff/usr/lib/libcudnn.so: "
     "no space left on device", "DISK_FULL"),
    ("Error response from daemon: unauthorized: authentication required", "IMAGE_PULL_UNAUTHORIZED"),
    ("Error response from daemon: manifest for nvcr.io/x:1 not found: manifest unknown", "IMAGE_NOT_FOUND"),
    ("bash: line 3: docker: command not found", "DOCKER_NOT_FOUND"),
    ("Error: No such image: nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", "REMOTE_COMMAND_FAILED"),
])
def test_docker_messages_map_to_distinct_codes(message, code):
    assert docker_error_code(message) == code


# -- 10. the job itself fails ----------------------------------------------------------------
@pytest.mark.parametrize("line, err_class, reason", [
    ("NVRM: Xid (PCI:0000:00:04): 79, pid=1234, GPU has fallen off the bus.", "ERR_INFRA", "Xid"),
    ("RuntimeError: CUDA error: GPU has fallen off the bus", "ERR_INFRA", "fallen off the bus"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "ERR_INFRA", "ECC"),
    ("RuntimeError: No CUDA GPUs are available", "ERR_INFRA", "no usable GPU"),
    ("OSError: [Errno 28] No space left on device: '/results/train/model_epoch_002.pth'", "ERR_INFRA", "disk"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "ERR_PROGRAM", "out of memory"),
    ("RuntimeError: CUDA error: device-side assert triggered", "ERR_PROGRAM", "device-side assert"),
    ("RuntimeError: DataLoader worker (pid 77) is killed by signal: Bus error.", "ERR_PROGRAM", "shared memory"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/data/x'", "ERR_PROGRAM", "missing file"),
])
def test_log_lines_are_classified(line, err_class, reason):
    hint = classify_logs(f"Epoch 1/3\nloss: 0.41\n{line}\nTraceback (most recent call last):\n")
    assert hint["err_class"] == err_class and reason in hint["reason"] and line.strip() in hint["evidence"]


@pytest.mark.parametrize("text", ["loss: nan", "saving xid_map.json", "Epoch 3/3", "dataset: ECCV-2022 split",
                                  "Execution status: PASS", "lr: 0.0001 bus_width: 4"])
def test_ordinary_training_output_is_not_a_failure(text):
    assert classify_logs(text) is None


def test_all_lists_the_jobs_that_need_action_first(world):
    """--all puts ended / failed jobs before quiet RUNNING ones, so an answer cut to its size
    bound drops the quiet ones first."""
    def submitted(spec: dict) -> str:
        sub = world.submit("--share-gpus", spec=world.spec(spec))   # several jobs on one instance
        assert sub.code == 0, sub
        return sub.json["job_id"]

    running = [submitted({"hang": True, "epoch_seconds": 0.01}) for _ in range(3)]
    failed = submitted({"exit_code": 3, "epoch_seconds": 0.01})
    world.sim.wait_container("box", failed)
    res = world.run("poll_status.py", "--all")
    order = [j["job_id"] for j in res.json["jobs"]]
    assert order == [failed, *sorted(running)], res.json
    assert res.json["jobs"][0]["state"] == "ERROR"


def test_failed_jobs_carry_their_failure_class_in_status_and_record(world):
    lines = {"infra": "RuntimeError: CUDA error: GPU has fallen off the bus",
             "oom": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
             "assert": "RuntimeError: CUDA error: device-side assert triggered"}
    jobs = {}
    brev = Brev(env=world.env)
    for key, line in lines.items():
        job_id = pending_record(world)
        brev.run("box", f"docker run -d --name {job_id} --label tao-job={job_id} ubuntu:22.04 "
                        f"bash -c {shlex.quote(f'echo {line!r} >&2; exit 1')}")
        records(world).mark(job_id, "RUNNING", backend_ref=f"box/{job_id}")
        world.sim.wait_container("box", job_id)
        jobs[key] = job_id
    res = world.run("poll_status.py", "--all")
    assert res.code == 0, res
    validate("poll_status", res.json)
    by_id = {j["job_id"]: j for j in res.json["jobs"]}
    expected = {"infra": "ERR_INFRA", "oom": "ERR_PROGRAM", "assert": "ERR_PROGRAM"}
    for key, job_id in jobs.items():
        assert by_id[job_id]["state"] == "ERROR" and by_id[job_id]["hint"]["err_class"] == expected[key]
        assert records(world).load(job_id)["err_class"] == expected[key]
    assert world.sim.exec_count() == len(lines) + 1   # one launch each, one round trip for all polls


# -- 11. bad input ---------------------------------------------------------------------------
BAD_IDS = ["../etc/passwd", "a/b", ".hidden", "id with space", "$(touch x)", ""]


@pytest.mark.parametrize("argv", [
    *[("poll_status.py", bad) for bad in BAD_IDS[:3]],
    *[("teardown.py", bad) for bad in BAD_IDS[2:]],
    ("tao_job_record.py", "mark", "../x", "--state", "RUNNING"),
])
def test_malformed_job_ids_are_refused_by_every_script(world, argv):
    res = world.run(*argv)
    assert res.code == 2 and res.json["error"]["code"] in ("BAD_JOB_ID", "BAD_ARGUMENT"), res
    validate("error", res.json)
    assert world.sim.exec_count() == 0


@pytest.mark.parametrize("damage", ["truncated", "not_an_object", "missing_fields", "sidecar"])
def test_corrupt_records_are_named_and_kept(world, damage):
    """A damaged record is named (with its job id) and its bytes are kept: moved aside to
    jobs/quarantine/ (a record) or left in place (a sidecar)."""
    job_id = pending_record(world, pid=os.getpid())
    path = records(world).path(job_id)
    if damage == "sidecar":
        path = sidecars(world).path(job_id)
    text = {"truncated": path.read_text()[:50], "not_an_object": "[1, 2]",
            "missing_fields": json.dumps({"id": job_id}), "sidecar": "{not json"}[damage]
    path.write_text(text)
    kept = path if damage == "sidecar" else records(world).quarantine_dir / path.name
    for script in ("poll_status.py", "teardown.py") if damage == "sidecar" else ("poll_status.py",):
        res = world.run(script, job_id)
        assert res.code == 2 and res.json["error"]["code"] == "CORRUPT_RECORD" and res.json["job_id"] == job_id, res
        validate("error", res.json)
        assert kept.read_text() == text
    assert world.sim.exec_count() == 0


@pytest.mark.parametrize("script", ["poll_status.py", "teardown.py"])
def test_an_unknown_job_is_named(world, script):
    res = world.run(script, "visual_changenet-train-000000")
    assert res.code == 2 and res.json["error"]["code"] == "UNKNOWN_JOB", res
    validate("error", res.json)


@pytest.mark.parametrize("extra, code", [
    (("--spec", "/nonexistent/spec.yaml"), "SPEC_NOT_FOUND"),
    (("--spec", "/tmp/$(touch x);.yaml"), "SPEC_NOT_FOUND"),
    (("--results-root", "~/../../etc"), "BAD_ARGUMENT"),
    (("--image", "images.no_such.key"), "UNKNOWN_VERSIONS_KEY"),
    (("--instance", "box;touch x"), "BAD_NAME"),
    (("--instance", "my box"), "BAD_NAME"),
    (("--network-arch", "visual changenet"), "BAD_NAME"),
    (("--action", "train;id"), "BAD_NAME"),
    (("--env", "HF-TOKEN"), "BAD_NAME"),
    (("--env", "X;touch"), "BAD_NAME"),
    (("--bucket", "b;touch x"), "BAD_ARGUMENT"),
    (("--gpus", "0;id"), "BAD_ARGUMENT"),
    (("--shm-size", "16g;id"), "BAD_ARGUMENT"),
    (("--inputs", "relative/path=x"), "BAD_ARGUMENT"),
    (("--retry-of", "../x"), "BAD_JOB_ID"),
    (("--bogus",), "BAD_ARGUMENT"),
    (("--", "key=nvapi-Abcdefghijklmnopqrstuvwxyz0123456789AB"), "SECRET_IN_COMMAND"),
])
def test_bad_submit_input_opens_no_record_and_runs_nothing(world, extra, code):
    res = world.submit(*extra)
    assert res.code == 2 and res.json["error"]["code"] == code, res
    validate("submit", res.json)
    assert records(world).list() == [] and world.sim.exec_count() == 0


def test_a_bad_spec_and_bad_script_arguments_are_bad_input(world, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train: [unclosed\n")
    res = world.submit(spec=bad)
    assert res.code == 2 and res.json["error"]["code"] == "BAD_SPEC", res
    for argv in (("poll_status.py", "a-b-000000", "extra"), ("teardown.py",), ("preflight.py", "--instance", "b;x"),
                 ("poll_status.py", "a-b-000000", "--wait", "--timeout", "-5"),
                 ("poll_status.py", "a-b-000000", "--wait", "--timeout", "nan")):
        res = world.run(*argv)
        assert res.code == 2 and res.json["error"]["code"] in ("BAD_ARGUMENT", "BAD_NAME"), res
        validate("error", res.json)
    assert records(world).list() == [] and world.sim.exec_count() == 0


def test_an_unknown_instance_is_refused_before_anything_is_recorded(world):
    world.sim.add_instance("other")
    res = world.run("submit.py", *submit_args(world, world.spec())[2:], "--instance", "ghost", **FAST)
    assert res.code == 1 and res.json["error"]["code"] == "UNKNOWN_INSTANCE", res
    validate("submit", res.json)
    assert res.json.get("job_id") is None       # `brev ls --json` is read before the record opens
    assert records(world).list() == [] and world.sim.exec_count() == 0


def test_injection_attempts_never_execute(world):
    marker = f"PWNED_{uuid.uuid4().hex[:8]}"
    host = Path("/tmp") / marker
    spec = world.spec({"epoch_seconds": 0.01})
    spec.write_text(spec.read_text() + f"note: $(touch {host}_spec) `touch {marker}_tick`\n")
    # --no-spec-check: TAO's schema would refuse the stray key and overrides first; unchecked, they reach the
    # instance and the container as plain words
    sub = world.submit("--results-root", f"~/r$(touch {host}_root)", "--no-spec-check", "--",
                       f"x=$(touch {host}_a)", f"y=`touch {marker}_b`", f";touch {host}_c", f"z=1;touch {marker}_d",
                       spec=spec)
    assert sub.code == 0, sub
    job_id = sub.json["job_id"]
    world.sim.wait_container("box", job_id)
    touched = {f"{marker}_{s}" for s in ("spec", "root", "a", "c", "tick", "b", "d")}
    assert not [p for p in Path("/tmp").iterdir() if p.name in touched]
    assert not [p for p in world.sim.root.rglob("*") if p.name in touched]   # instance home, containers
    assert launches(world, job_id) == 1
    container_argv = [r["argv"] for r in world.sim.audit() if r["tool"] == "container"][-1]
    assert f"x=$(touch {host}_a)" in container_argv and f";touch {host}_c" in container_argv


# -- 12. terminal states are immutable -------------------------------------------------------
def test_a_finished_job_keeps_its_terminal_state(world):
    job_id = world.submit().json["job_id"]
    wait = world.run("poll_status.py", job_id, "--wait", "--interval", "0.1", "--timeout", "60")
    assert wait.code == 0 and wait.json["state"] == "COMPLETE", wait
    refused = world.run("tao_job_record.py", "mark", job_id, "--state", "CANCELED")
    assert refused.code == 2 and refused.json["error"]["code"] == "TERMINAL_STATE"
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and down.json["state"] == "COMPLETE" and down.json["container_removed"] is True, down
    after = world.run("poll_status.py", job_id)                 # the container is gone now
    assert after.code == 0 and after.json["state"] == "COMPLETE" and after.json["observed"]["state"] == "UNKNOWN"
    validate("poll_status", after.json)
    assert states(world, job_id) == ["PENDING", "RUNNING", "COMPLETE"]
