"""The brev transport end to end against the simulated brev: exit status and
output come back once, reads retry with bounded backoff, a launch is never
repeated, timeouts kill brev, one headless re-login, the readiness probe.
(The pure framing functions are in test_transport_framing.py.)"""

import os

import pytest

from tao_brev.context import Context
from tao_brev.errors import RemoteCommandError, TaoBrevError, TransportError
from tao_brev.transport import BACKOFF_S, Brev, backoff_from_env, unframe
from tao_brev.verbs import preflight

TOKEN = "brevtok-Q7w3Zx9Lm2Np5Rt8Vy4Kd6Hs1Fg0Jc"


def make_brev(world, **env):
    """A Brev on the simulator whose waits and progress lines are recorded, not slept/printed."""
    sleeps, logs = [], []
    given = {k: v for k, v in world.env.items() if k != "TAO_BREV_RETRY_BACKOFF_S"}   # the production waits:
    brev = Brev(env={**given, **env}, sleep=sleeps.append, log=logs.append)           # recorded, not slept
    return brev, sleeps, logs


def ran(world, marker):
    """How many times a remote shell ran a command containing ``marker``."""
    return sum(marker in cmd for cmd in world.sim.remote_commands("box"))


def test_status_and_output_come_back_once_and_the_command_runs_once(world):
    world.sim.set_instance("box", banner="Welcome to Ubuntu 22.04 (simulated banner)")
    brev, _, _ = make_brev(world)
    result = brev.exec("box", "echo out; echo err >&2; echo run-once-marker >/dev/null; exit 7")
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")
    # the frame makes the remote shell exit 0, so brev's retry-on-any-failure never re-runs it
    assert ran(world, "run-once-marker") == 1 and world.sim.exec_count() == 1
    with pytest.raises(RemoteCommandError) as failed:
        brev.run("box", "echo boom >&2; exit 3")
    assert failed.value.code == "REMOTE_COMMAND_FAILED" and failed.value.details["exit_status"] == 3
    assert "boom" in failed.value.message


@pytest.mark.parametrize("kind", ["reset_before", "reset_after"])
def test_an_idempotent_read_retries_through_dropped_connections(world, kind):
    world.sim.add_fault("read-marker", kind, times=2)   # brev's own retry is the second connection
    brev, sleeps, logs = make_brev(world)
    result = brev.exec("box", "echo read-marker answered", idempotent=True)
    assert result.ok and result.stdout == "read-marker answered\n" and result.attempts == 2
    assert sleeps == [BACKOFF_S[0]] and brev.exec_calls == 2
    assert any("retrying" in line for line in logs)


def test_reads_give_up_after_bounded_retries(world):
    world.sim.add_fault("read-marker", "reset_before", times=10)
    brev, sleeps, _ = make_brev(world)
    with pytest.raises(TransportError) as failed:
        brev.exec("box", "echo read-marker", idempotent=True)
    assert failed.value.code == "TRANSPORT_FAILED" and failed.value.exit_code == 3
    assert sleeps == list(BACKOFF_S) and brev.exec_calls == 3
    assert "Connection reset" in failed.value.message


@pytest.mark.parametrize("kind, runs", [("reset_before", 0), ("reset_after", 2)])
def test_a_command_that_is_not_idempotent_is_never_repeated_by_the_transport(world, kind, runs):
    world.sim.add_fault("launch-marker", kind, times=2)
    brev, sleeps, _ = make_brev(world)
    with pytest.raises(TransportError):
        brev.exec("box", "echo launch-marker")
    assert brev.exec_calls == 1 and sleeps == []
    # reset_after: brev itself ran it twice (its retry) - why launch scripts guard themselves
    assert ran(world, "launch-marker") == runs


def test_the_last_complete_frame_wins_when_brev_ran_the_command_twice():
    nonce = "TAOBREVtwice0123456789"
    complete = f"{nonce}:out\nfirst\n\n{nonce}:err\n\n{nonce}:rc 0\n"
    partial = f"{nonce}:out\nsecond, cut off"
    assert unframe("banner\n" + complete + partial, nonce) == (0, "first\n", "")
    assert unframe(partial + complete + "box\n", nonce) == (0, "first\n", "")
    assert unframe(partial, nonce) is None


def test_a_hung_exec_times_out_and_brev_is_killed(world):
    world.sim.set_timing(hang_s=60)
    world.sim.add_fault("hang-marker", "hang")
    brev, _, _ = make_brev(world)
    with pytest.raises(TransportError) as failed:
        brev.exec("box", "echo hang-marker", timeout=1)
    assert failed.value.code == "TRANSPORT_TIMEOUT"
    pid = [r for r in world.sim.audit() if r["tool"] == "brev"][-1]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_backoff_is_tunable_from_the_environment():
    assert backoff_from_env({}) == BACKOFF_S
    assert backoff_from_env({"TAO_BREV_RETRY_BACKOFF_S": "0"}) == (0.0,)
    assert backoff_from_env({"TAO_BREV_RETRY_BACKOFF_S": " 0.5, 1 "}) == (0.5, 1.0)
    for bad in ("x", "-1", "nan", "1,,2", "99999"):
        with pytest.raises(TaoBrevError) as failed:
            backoff_from_env({"TAO_BREV_RETRY_BACKOFF_S": bad})
        assert failed.value.code == "BAD_ARGUMENT" and "TAO_BREV_RETRY_BACKOFF_S" in failed.value.message
    assert Brev(env={"TAO_BREV_RETRY_BACKOFF_S": "0"}).backoff_s == (0.0,)


@pytest.mark.parametrize("error_stream", ["stderr", "stdout"])
def test_an_expired_token_means_one_headless_login_and_one_repeat(world, error_stream):
    world.sim.set_timing(brev_error_stream=error_stream)
    world.sim.set_auth(token=TOKEN, expires_after_calls=1)
    brev, _, logs = make_brev(world, BREV_API_TOKEN=TOKEN)
    assert brev.exec("box", "echo first").stdout == "first\n"
    assert brev.exec("box", "echo auth-marker").stdout == "auth-marker\n"   # 401, login, repeat
    assert brev.logins == 1 and ran(world, "auth-marker") == 1
    logins = [r for r in world.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["login"]]
    assert len(logins) == 1
    assert TOKEN not in "\n".join(logs)


def test_no_token_is_brev_not_logged_in_and_nothing_runs(world):
    world.sim.set_auth(logged_in=False)
    brev, _, _ = make_brev(world)
    with pytest.raises(TaoBrevError) as failed:
        brev.exec("box", "echo never-marker", idempotent=True)
    assert failed.value.code == "BREV_NOT_LOGGED_IN" and failed.value.exit_code == 3
    assert ran(world, "never-marker") == 0 and brev.exec_calls == 1


def test_a_refused_token_is_login_failed_without_its_value(world):
    world.sim.set_auth(token="the-real-token", expired=True)
    brev, _, logs = make_brev(world, BREV_API_TOKEN=TOKEN)
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.code == "BREV_LOGIN_FAILED" and failed.value.exit_code == 3
    assert TOKEN not in failed.value.message + "\n".join(logs)


def test_brev_starting_a_stopped_instance_is_reported(world):
    brev, _, _ = make_brev(world)
    assert brev.exec("box", "echo ok").instance_started is False
    world.sim.set_instance("box", status="STOPPED")
    result = brev.exec("box", "echo ok")
    assert result.ok and result.stdout == "ok\n" and result.instance_started is True
    assert world.sim.instance("box")["status"] == "RUNNING"


@pytest.mark.parametrize("instance, script, code", [
    ("box;touch x", "echo ok", "BAD_NAME"),
    ("my box", "echo ok", "BAD_NAME"),
    ("box", "NGC_KEY=nvapi-Abcdefghijklmnopqrstuvwxyz0123456789AB docker login", "SECRET_IN_COMMAND"),
])
def test_bad_names_and_literal_secrets_are_refused_before_brev_runs(world, instance, script, code):
    brev, _, _ = make_brev(world)
    with pytest.raises(TaoBrevError) as failed:
        brev.exec(instance, script)
    assert failed.value.code == code and failed.value.exit_code == 2
    assert world.sim.exec_count() == 0


class FakeClock:
    """A monotonic clock that only moves when the code under test sleeps."""

    def __init__(self, on_sleep=None):
        self.now, self.sleeps, self.on_sleep = 0.0, [], on_sleep

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds
        if self.on_sleep:
            self.on_sleep()


def test_readiness_probe_waits_for_sshd_on_a_fresh_instance(world):
    """RUNNING in brev ls while sshd still refuses: the probe waits, then succeeds."""
    world.sim.add_instance("fresh", ssh_delay_s=3600)
    world.sim.set_timing(ssh_probe_limit=1)   # brev's own wait for ssh gives up at once
    clock = FakeClock(on_sleep=lambda: world.sim.set_instance("fresh", ssh_delay_s=0))   # sshd comes up
    ctx = Context(env=world.env, sleep=clock.sleep, clock=clock)
    attempts = preflight._probe_until_ready(ctx, preflight.PreflightRequest("fresh"), deadline=600)
    assert attempts == 2 and clock.sleeps == [preflight.PROBE_INTERVAL_S]
    assert "fresh" in ctx.brev.ready_instances and ctx.brev.exec_calls == 2


def test_readiness_probe_gives_up_within_its_budget(world):
    world.sim.add_instance("fresh", ssh_delay_s=3600)
    world.sim.set_timing(ssh_probe_limit=1)
    clock = FakeClock()
    ctx = Context(env=world.env, sleep=clock.sleep, clock=clock)
    with pytest.raises(TaoBrevError) as failed:
        preflight._probe_until_ready(ctx, preflight.PreflightRequest("fresh"), deadline=3)
    assert failed.value.code == "NOT_EXEC_READY" and failed.value.exit_code == 3
    assert "Connection refused" in failed.value.message
    assert clock.now <= 3 and ctx.brev.exec_calls == len(clock.sleeps) + 1 >= 2


def test_an_interrupt_kills_brev_and_its_ssh(world):
    """Ctrl-C / SIGTERM (cli.run maps it to KeyboardInterrupt) while brev hangs:
    the brev process group is killed, nothing outlives the script."""
    import signal
    import subprocess
    import threading

    world.sim.set_timing(hang_s=60)
    world.sim.add_fault("sleep-marker", "hang", times=2)
    brev = Brev(env=world.env)
    # Python's own SIGINT handler, as a script has it: a suite started with a shell's `&` (no job
    # control) inherits SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            brev.exec("box", "echo sleep-marker", timeout=30)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    left = subprocess.run(["pgrep", "-f", str(world.sim.root / "bin" / "brev")], capture_output=True, text=True)
    assert left.stdout.strip() == ""


# -- brev's ssh ControlPersist master, publickey refusals, the logged-out prompt ------------
def master_alive(world) -> bool:
    from tests.sim.simstate import master_alive as alive

    return alive(world.sim.ssh_master_pid("box"), world.sim.root)


@pytest.mark.parametrize("holds", ["stdout", "stderr", "both"])
def test_a_call_ends_when_brev_exits_although_its_ssh_master_holds_the_pipes(world, holds):
    """brev's ssh config (ControlMaster auto, ControlPersist 10m) leaves a detached master
    that keeps brev's stdout/stderr open: the answer comes back when brev exits."""
    world.sim.set_timing(control_persist_s=3600, control_master_holds=holds)
    brev, sleeps, _ = make_brev(world)
    result = brev.exec("box", "echo answered; echo to-stderr >&2", timeout=60)
    assert (result.exit_code, result.stdout, result.stderr, result.attempts) == (0, "answered\n", "to-stderr\n", 1)
    assert master_alive(world), "the child holding brev's pipes is still alive: the call did not wait for it"
    assert brev.exec("box", "echo again", timeout=60).stdout == "again\n" and sleeps == []


def test_a_timeout_kills_brev_without_waiting_for_the_pipe_holding_master(world):
    world.sim.set_timing(hang_s=3600, control_persist_s=3600, control_master_holds="both")
    world.sim.add_fault("hang-marker", "hang")
    brev, _, _ = make_brev(world)
    with pytest.raises(TransportError) as failed:
        brev.exec("box", "echo hang-marker", timeout=1)
    assert failed.value.code == "TRANSPORT_TIMEOUT" and master_alive(world)
    pid = [r for r in world.sim.audit() if r["tool"] == "brev"][-1]["pid"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_refused_ssh_key_fails_fast_with_a_fix_about_brevs_key(world):
    world.sim.set_instance("box", ssh_key_rejected=True)
    brev, sleeps, _ = make_brev(world)
    with pytest.raises(TransportError) as failed:
        brev.exec("box", "echo never-marker", idempotent=True)
    err = failed.value
    assert (err.code, err.exit_code, brev.exec_calls, sleeps) == ("SSH_KEY_REJECTED", 3, 1, [])
    assert "Permission denied (publickey)" in err.message and "brev refresh" in err.fix
    assert 'brev exec box "echo ok"' in err.fix and "NAME" not in err.fix
    assert ran(world, "never-marker") == 0


@pytest.mark.parametrize("auth", [{"logged_in": False}, {"expired": True}])
def test_the_logged_out_prompt_with_a_failed_ssh_means_one_headless_login(world, auth):
    """Token gone and ssh failing: brev prints its login prompt on stdout and names only the
    failed lookup on stderr ("could not look up instance"): that is an auth failure."""
    world.sim.set_auth(token=TOKEN, **auth)
    world.sim.add_fault("prompt-marker", "reset_before", times=1)
    brev, sleeps, logs = make_brev(world, BREV_API_TOKEN=TOKEN)
    result = brev.exec("box", "echo prompt-marker", idempotent=True)
    assert (result.stdout, brev.logins, brev.exec_calls, sleeps) == ("prompt-marker\n", 1, 1, [])
    assert ran(world, "prompt-marker") == 1 and TOKEN not in "\n".join(logs)


def test_the_simulated_prompt_is_brevs(world):
    """What the transport must recognise, as the simulated brev prints it (auth.go shouldLogin)."""
    import subprocess

    world.sim.set_auth(logged_in=False)
    world.sim.add_fault("x-marker", "reset_before", times=1)
    done = subprocess.run(["brev", "exec", "box", "echo x-marker"], env=world.env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stdout == "You are currently logged out, would you like to log in? [Y/n]: "
    assert 'ssh connection failed and could not look up instance "box"' in done.stderr


def test_search_returns_brevs_rows_for_gpu_and_cpu(world):
    brev, _, _ = make_brev(world)
    gpu = {row["type"]: row for row in brev.search("gpu")}
    assert gpu["a2-highgpu-1g"]["price_per_hour"] == 4.09 and gpu["a2-highgpu-1g"]["stoppable"] is True
    assert gpu["hyperstack_H100"]["stoppable"] is False and "n2-standard-8" not in gpu
    assert [row["type"] for row in brev.search("cpu")] == ["n2-standard-8"]
    assert [r["argv"][:3] for r in world.sim.audit() if r["tool"] == "brev"][-1] == ["search", "cpu", "--json"]
    with pytest.raises(ValueError):
        brev.search("tpu")


@pytest.mark.parametrize("printed", ["not json", '{"items": []}'])
def test_search_that_prints_no_array_is_brev_failed(world, tmp_path, printed):
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "brev").write_text(f"#!/bin/sh\necho '{printed}'\n")
    (fake / "brev").chmod(0o755)
    brev = Brev(env={**world.env, "PATH": f"{fake}:/usr/bin:/bin"}, sleep=lambda s: None, log=lambda m: None)
    with pytest.raises(TaoBrevError) as err:
        brev.search("gpu")
    assert err.value.code == "BREV_FAILED" and "did not print a JSON array" in err.value.message


def test_search_keeps_only_objects_and_a_failed_search_is_brev_failed(world, tmp_path):
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "brev").write_text("#!/bin/sh\necho '[{\"type\": \"x\"}, 3, null]'\n")
    (fake / "brev").chmod(0o755)
    brev = Brev(env={**world.env, "PATH": f"{fake}:/usr/bin:/bin"}, sleep=lambda s: None, log=lambda m: None)
    assert brev.search("cpu") == [{"type": "x"}]
    world.sim.add_brev_fault("search", "internal server error")
    brev, _, _ = make_brev(world)
    with pytest.raises(TaoBrevError) as err:
        brev.search("gpu")
    assert err.value.code == "BREV_FAILED" and "internal server error" in err.value.message


def test_stop_stops_a_stoppable_instance_and_forgets_its_readiness(world):
    brev, _, _ = make_brev(world)
    brev.exec("box", "echo ok")
    assert "box" in brev.ready_instances
    brev.stop("box")
    assert world.sim.instance("box")["status"] == "STOPPED" and "box" not in brev.ready_instances


def test_stop_of_a_type_that_cannot_stop_is_brevs_refusal(world):
    world.sim.add_instance("h100", instance_type="hyperstack_H100")
    brev, _, _ = make_brev(world)
    with pytest.raises(TaoBrevError) as err:
        brev.stop("h100")
    assert err.value.code == "BREV_FAILED" and 'instance "h100" does not support stop.' in err.value.message
    assert world.sim.instance("h100")["status"] == "RUNNING"
    with pytest.raises(TaoBrevError) as bad:
        brev.stop("h100;x")
    assert bad.value.code == "BAD_NAME"
