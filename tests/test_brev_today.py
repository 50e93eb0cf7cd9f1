"""Today's brev, through the scripts on the simulator, each behaviour taught to the
simulator first with its brev-cli source (tests/sim/brev_today.py, brev_sim.py):

1. exec.go runSSHWithTimeout leaks one ssh-agent per ssh when SSH_AUTH_SOCK is empty:
   no script leaves one, whatever it did (a finished lifecycle, an interrupt).
2. API keys: BREV_API_KEY read from brev's environment (PR #464), `brev login --api-key`
   (login.go, PR #369) never needed; a bak- value in BREV_API_TOKEN never reaches --token;
   an org listing with one name twice is refused with both ids.
3. A STOPPED instance is never started by a read (util/ssh.go StartWorkspaceIfStopped).
4. GPUs lost mid-run / a driver not loaded, for a running job and preflight.
5. copy.go parseWorkspacePath: every ':' splits; results still come home to a state dir
   under a path with a colon.
6. The Brev API's transient errors are retried and then unreachable (exit 3), never a
   login; a migrated account's browser login is stopped with the command to run by hand.
7. preflight waits for BUILD COMPLETED / SHELL READY, or refuses.
8. SKILL.md logs brev in through a script before any plain brev command."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import ROOT, TAO_IMAGE, run_script, validate
import tests.sim.simctl  # noqa: F401,E402  (puts tests/sim on sys.path)
from brev_today import api_eof, api_status_error  # noqa: E402

KEY = "bak-Today0123456789abcdefghijklmnop"
TOKEN = "brevtok-Today0123456789abcdefghijkl"
FAST = {"TAO_BREV_RETRY_BACKOFF_S": "0"}
WAIT = ("--wait", "--interval", "0.2", "--timeout", "60")


@pytest.fixture
def box(world):
    world.env.pop("SSH_AUTH_SOCK", None)   # agent sandboxes, cron, CI: no agent of their own
    world.env.update(FAST)
    world.sim.set_timing(ssh_probe_interval_s=0.01, ssh_probe_limit=2)
    return world


def brev(world, *argv, **env):
    return subprocess.run(["brev", *argv], env={**world.env, **env}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def calls(world, verb):
    return [r["argv"] for r in world.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == [verb]]


def job_of(world, *extra, **sim):
    res = world.submit(*extra, spec=world.spec({"epoch_seconds": 0.02, **sim}))
    assert res.code == 0, res
    return res.json["job_id"]


# -- 1. ssh-agent ------------------------------------------------------------------------------------
def test_the_simulated_brev_leaks_an_agent_per_ssh_as_brev_does(box):
    """exec.go runSSHWithTimeout: `if [ -z "$SSH_AUTH_SOCK" ]; then eval $(ssh-agent -s)`."""
    assert brev(box, "exec", "box", "echo ok").returncode == 0
    assert len(box.sim.ssh_agents_alive()) == 1
    assert brev(box, "exec", "box", "exit 3").returncode == 1   # brev's retry is a second ssh: a second agent
    assert len(box.sim.ssh_agents_alive()) == 3
    assert brev(box, "exec", "box", "echo ok", SSH_AUTH_SOCK="/nowhere/agent").returncode == 0
    assert len(box.sim.ssh_agents_alive()) == 3


def test_no_script_leaves_an_ssh_agent_behind(box):
    assert box.run("preflight.py", "--instance", "box", "--image", TAO_IMAGE).code == 0
    job = job_of(box)
    for _ in range(3):
        assert box.run("poll_status.py", job).code == 0
    assert box.run("poll_status.py", job, *WAIT).code == 0
    assert box.run("teardown.py", job).code == 0
    assert box.sim.world.state().get("ssh_agents", []) == []   # none was ever started


def test_an_interrupted_script_leaves_no_agent_either(box):
    job = job_of(box, hang=True)
    env = {**box.env}
    proc = subprocess.Popen([str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "scripts" / "poll_status.py"), job,
                             "--wait", "--interval", "0.2", "--timeout", "60"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while box.sim.exec_count() < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert box.sim.ssh_agents_alive() == [] and box.sim.world.state().get("ssh_agents", []) == []


# -- 2. API keys ---------------------------------------------------------------------------------------
def test_with_only_brev_api_key_exported_every_verb_works_and_no_login_runs(box):
    box.sim.set_auth(token=TOKEN, logged_in=False, api_key=KEY)
    env = {"BREV_API_KEY": KEY}
    pre = box.run("preflight.py", "--instance", "box", "--image", TAO_IMAGE, **env)
    assert pre.code == 0 and pre.json["ok"], pre
    job = box.submit(spec=box.spec({"epoch_seconds": 0.02}), **env).json["job_id"]
    assert box.run("poll_status.py", job, *WAIT, **env).code == 0
    assert box.run("teardown.py", job, **env).code == 0
    assert calls(box, "login") == [] and KEY not in box.sim.audit_text()
    assert KEY not in pre.stdout + pre.stderr


def test_a_bak_key_in_brev_api_token_is_never_passed_to_token(box):
    box.sim.set_auth(token=TOKEN, logged_in=False, api_key=KEY)
    res = box.run("preflight.py", "--login", BREV_API_TOKEN=KEY)
    assert res.code == 0 and res.json["ok"], res
    validate("preflight", res.json)
    assert calls(box, "login") == [] and KEY not in box.sim.audit_text()
    auth = next(c for c in res.json["checks"] if c["name"] == "brev_auth")
    assert auth["data"]["api_key"] is True and "BREV_API_KEY" in auth["detail"]


def test_a_refused_api_key_is_named_and_never_becomes_a_token_login(box):
    box.sim.set_auth(token=TOKEN, logged_in=False, api_key=KEY)
    res = box.run("preflight.py", "--login", BREV_API_KEY="bak-wrong0123456789abcdefghijklm", BREV_API_TOKEN=TOKEN)
    assert res.code == 3 and res.json["error"]["code"] == "BREV_API_KEY_REJECTED", res
    assert calls(box, "login") == [] and res.json["next"] is None


def test_brev_login_with_an_api_key_as_brev_does_it(box):
    """login.go doApiKeyLogin / auth.go LoginWithAPIKey (PR #369): the org id is required."""
    assert "requires an org id" in brev(box, "login", "--api-key", KEY).stderr
    assert "must start with bak-" in brev(box, "login", "--api-key", "nope", "--org-id", "o").stderr
    assert brev(box, "login", "--api-key", KEY, "--org-id", "org-sim").stdout == "API key saved for org org-sim\n"


def test_one_name_two_instances_in_the_org_is_refused_with_both_ids(box):
    job = job_of(box)
    box.sim.set_auth(token=TOKEN, logged_in=False, api_key=KEY)
    theirs = box.sim.add_org_instance("box", instance_id="teammate1")
    ours = box.sim.instance("box")["id"]
    pre = box.run("preflight.py", "--instance", "box", BREV_API_KEY=KEY)
    assert pre.code == 1 and pre.json["error"]["code"] == "INSTANCE_AMBIGUOUS", pre
    assert theirs in pre.json["error"]["message"] and ours in pre.json["error"]["message"]
    before = box.sim.exec_count()
    poll = box.run("poll_status.py", job, BREV_API_KEY=KEY)
    assert poll.json["error"]["code"] == "INSTANCE_AMBIGUOUS" and box.sim.exec_count() == before, poll
    everything = box.run("poll_status.py", "--all", BREV_API_KEY=KEY)
    assert everything.json["jobs"][0]["error"]["code"] == "INSTANCE_AMBIGUOUS" and box.sim.exec_count() == before


# -- 3. STOPPED instances --------------------------------------------------------------------------------
def test_poll_all_reads_one_listing_and_starts_nothing(box):
    box.sim.add_instance("spare")
    box.sim.preload_image("spare", TAO_IMAGE)
    parked, running = job_of(box, hang=True), box.submit(instance="spare", spec=box.spec({"hang": True}))
    assert running.code == 0, running
    assert brev(box, "stop", "box").returncode == 0
    ls_before, exec_before = len(calls(box, "ls")), box.sim.exec_count()
    res = box.run("poll_status.py", "--all")
    validate("poll_status", res.json)
    by_job = {j["job_id"]: j for j in res.json["jobs"]}
    assert by_job[parked]["error"]["code"] == "INSTANCE_STOPPED" and by_job[parked]["instance_status"] == "STOPPED"
    assert by_job[running.json["job_id"]]["state"] == "RUNNING"
    assert len(calls(box, "ls")) - ls_before == 1 and box.sim.exec_count() - exec_before == 1   # spare only
    assert box.sim.instance("box")["status"] == "STOPPED"


def test_a_stopped_answer_says_what_it_means_how_to_start_and_that_results_are_safe(box):
    job = job_of(box, hang=True)
    assert brev(box, "stop", "box").returncode == 0
    for script in ("poll_status.py", "teardown.py"):
        res = box.run(script, job)
        err = res.json["error"]
        assert res.code == 1 and err["code"] == "INSTANCE_STOPPED", res
        assert "safe" in err["message"] and "bills no GPU time" in err["message"]
        assert res.json["next"] is None and "--start" in err["fix"]   # starting bills: a person decides
        assert res.json["next_note"].endswith(f"scripts/{script} {job} --start") and "ask first" in res.json["next_note"]
    assert box.sim.instance("box")["status"] == "STOPPED" and not box.sim.world.state().get("ssh_agents")
    assert box.run("tao_job_record.py", "show", job).json["terminal_state"] is None   # nothing closed


def test_a_start_that_outlasts_the_wait_says_brev_started_it_and_it_bills(box, monkeypatch):
    from tao_brev import transport

    box.sim.set_instance("box", status="STOPPED")
    box.sim.set_timing(start_delay_s=30)
    monkeypatch.setattr(transport.remote_exec, "BREV_START_WAIT_S", 1.0)
    heard = []
    b = transport.Brev(env=box.env, on_started=heard.append, log=lambda m: None)
    b.ls()
    with pytest.raises(transport.TransportError) as timed_out:
        b.exec("box", "echo ok", start=True, timeout=1.0)
    assert timed_out.value.code == "TRANSPORT_TIMEOUT" and "BILLS" in timed_out.value.message
    assert heard == ["box"] and box.sim.instance("box")["status"] in ("STARTING", "RUNNING")


def test_brev_start_is_as_unkind_as_brev(box):
    """start.go: an unknown name prints and exits 0; a RUNNING one is refused."""
    unknown = brev(box, "start", "no-such-box")
    assert (unknown.returncode, unknown.stdout) == (0, "tried to start with local path but path not found\n")
    assert brev(box, "start", "box").stderr.startswith("Instance is not stopped status=RUNNING")


# -- 4. GPUs lost, drivers gone -------------------------------------------------------------------------
def test_a_job_that_lost_its_gpus_mid_run_is_infrastructure_with_resume_advice(box):
    job = job_of(box, nvml_lost=True)
    res = box.run("poll_status.py", job, *WAIT)
    assert res.code == 1 and res.json["state"] == "ERROR", res
    hint = res.json["hint"]
    assert hint["err_class"] == "ERR_INFRA" and "--resume-from" in hint["advice"]
    assert any("Failed to initialize NVML: Unknown Error" in line for line in hint["evidence"])


def test_a_driver_that_is_not_loaded_is_named_by_preflight_and_its_smoke(box):
    box.sim.set_instance("box", driver_loaded=False)
    res = box.run("preflight.py", "--instance", "box", "--image", TAO_IMAGE, "--gpu-smoke")
    checks = {c["name"]: c for c in res.json["checks"]}
    assert checks["gpu"]["code"] == "GPU_DRIVER_NOT_LOADED" and "reboot" in checks["gpu"]["fix"].lower(), res
    assert checks["gpu_smoke"]["code"] == "GPU_DRIVER_NOT_LOADED" and "nvidia-ctk" not in checks["gpu_smoke"]["fix"]
    assert "brev exec box --host" in checks["gpu"]["fix"]


def test_a_submit_on_an_instance_without_its_driver_names_the_driver(box):
    box.sim.set_instance("box", driver_loaded=False)
    res = box.submit(spec=box.spec({"epoch_seconds": 0.02}))
    text = str(res.json)
    assert res.code != 0 and "GPU_DRIVER_NOT_LOADED" in text and "NVIDIA_RUNTIME_MISSING" not in text, res


# -- 5. colons -------------------------------------------------------------------------------------------
def test_the_simulated_brev_copy_splits_on_every_colon(box, tmp_path):
    local = tmp_path / "runs-10:30"
    local.mkdir()
    (local / "f").write_text("x")
    up = brev(box, "copy", str(local / "f"), "box:~/f")
    assert up.returncode == 1 and "exactly one of source or destination" in up.stderr
    assert "invalid instance path format" in brev(box, "copy", "box:~/a:b", str(tmp_path)).stderr


def test_brev_copy_to_a_stopped_instance_starts_it(box, tmp_path):
    """copy.go prepareWorkspace -> startWorkspaceIfStopped."""
    (tmp_path / "f").write_text("x")
    box.sim.set_instance("box", status="STOPPED")
    assert brev(box, "copy", str(tmp_path / "f"), "box:~/f").returncode == 0
    assert box.sim.instance("box")["status"] == "RUNNING"


def test_results_come_home_to_a_state_dir_under_a_path_with_a_colon(box, tmp_path):
    state = tmp_path / "runs-2026-12-01T10:30" / "state"
    state.mkdir(parents=True)
    box.env["TAO_STATE_DIR"] = str(state)
    job = job_of(box, "--ephemeral")
    down = box.run("poll_status.py", job, *WAIT, "--teardown")
    assert down.code == 0, down
    saved = down.json["teardown"]["results_saved_to"]
    assert saved.startswith(str(state)) and os.path.getsize(saved) > 0 and not box.sim.world.instance("box")
    assert all(":" not in a for argv in calls(box, "copy") for a in argv[1:] if not a.startswith("box:"))


# -- 6. the Brev API's own answers ----------------------------------------------------------------------
@pytest.mark.parametrize("message", [api_eof(), api_status_error(), api_status_error("429 Too Many Requests")])
def test_a_transient_api_error_is_retried_and_never_a_login(box, message):
    box.sim.add_brev_fault("ls", message, times=2)
    res = box.run("preflight.py", "--login", BREV_API_TOKEN=TOKEN)
    assert res.code == 0 and res.json["brev_logins"] == 0 and calls(box, "login") == [], res


def test_an_api_that_stays_down_is_unreachable_exit_3(box):
    box.sim.add_brev_fault("ls", api_eof(), times=10)
    res = box.run("preflight.py", "--instance", "box", BREV_API_TOKEN=TOKEN)
    assert res.code == 3 and res.json["error"]["code"] == "BREV_API_UNREACHABLE", res
    assert calls(box, "login") == [] and "EOF" in res.json["error"]["message"]
    again = box.run("preflight.py", "--instance", "box")   # no token to log in with: still the API
    assert again.json["error"]["code"] == "BREV_API_UNREACHABLE", again


def test_a_migrated_account_is_named_with_the_command_to_run_by_hand(box):
    box.sim.set_auth(token=TOKEN, nvidia_migrated=True)
    began = time.monotonic()
    res = box.run("preflight.py", "--instance", "box", BREV_API_TOKEN=TOKEN)
    assert res.code == 3 and res.json["error"]["code"] == "BREV_NVIDIA_LOGIN_REQUIRED", res
    assert "brev login --auth nvidia" in res.json["error"]["fix"] and "BREV_API_KEY" in res.json["error"]["fix"]
    assert time.monotonic() - began < 30 and calls(box, "login") == []


# -- 7. building instances --------------------------------------------------------------------------------
def test_preflight_refuses_an_instance_still_building_at_the_end_of_its_wait(box):
    box.sim.set_instance("box", build_status="BUILDING")
    res = box.run("preflight.py", "--instance", "box", "--exec-timeout", "1")
    assert res.code == 3 and res.json["error"]["code"] == "INSTANCE_BUILDING", res
    assert "BUILDING" in res.json["error"]["message"] and box.sim.exec_count() == 0


def test_preflight_waits_for_the_build_and_reports_the_wait(box):
    box.sim.set_instance("box", build_status="PENDING", build_done_after_ls=3)   # the build ends at the 3rd listing
    res = box.run("preflight.py", "--instance", "box", "--exec-timeout", "60")
    assert res.code == 0, res
    instance = next(c for c in res.json["checks"] if c["name"] == "instance")
    assert instance["data"]["waited_s"] >= 1 and instance["data"]["shell_status"] == "READY"
    assert "building" in res.stderr.lower() or "build PENDING" in res.stderr


def test_a_failed_build_is_refused_at_once(box):
    box.sim.set_instance("box", build_status="CREATE_FAILED")
    res = box.run("preflight.py", "--instance", "box", "--exec-timeout", "60")
    assert res.code == 1 and res.json["error"]["code"] == "INSTANCE_NOT_RUNNING", res
    assert "CREATE_FAILED" in res.json["error"]["message"]


# -- 8. an agent never types a token ------------------------------------------------------------------------
def test_skill_md_logs_brev_in_with_a_script_before_any_plain_brev_command():
    text = (ROOT / "SKILL.md").read_text()
    login = text.find("preflight.py --login")
    # a command to type: a code line, or a backticked one with its arguments (not prose naming `brev exec`)
    first_brev = re.search(r"(?m)^brev [a-z]|`brev (ls|copy|stop|start|delete|refresh|exec [a-z])", text)
    assert login != -1 and first_brev is not None and login < first_brev.start()
    assert not re.search(r"(?m)^brev login", text) and "brev login --api-key" not in text   # nothing to type


# -- 3b. a read that cannot read the status fails closed --------------------------------------------------
# brev ls --json failing in any way (the API's EOF / 5xx / i/o timeout, a brev error that is not JSON)
# leaves the instance's status unknown; brev exec (exec.go runExecCommand -> util/ssh.go
# StartWorkspaceIfStopped) and brev copy (copy.go prepareWorkspace -> startWorkspaceIfStopped) start a
# STOPPED one. So the read-only verb runs neither and answers the API as unreachable, exit 3, next = itself.
LS_FAILURES = [api_eof(), api_status_error("502 Bad Gateway"), api_status_error("504 Gateway Timeout"),
               f'Get "{api_eof()[5:-6]}": dial tcp 10.0.0.1:443: i/o timeout',
               f'Get "{api_eof()[5:-6]}": net/http: TLS handshake timeout',
               f'Get "{api_eof()[5:-6]}": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
               f'Get "{api_eof()[5:-6]}": dial tcp 10.0.0.1:443: connect: connection refused',
               f'Get "{api_eof()[5:-6]}": unexpected EOF',
               "invalid character '<' looking for beginning of value"]


READS = [("poll_status.py", "JOB"), ("poll_status.py", "JOB", "--logs", "50"), ("poll_status.py", "--all"),
         ("teardown.py", "JOB", "--keep-instance"), ("teardown.py", "JOB")]


# each failure once, the read-only verbs in turn (every verb meets several kinds)
@pytest.mark.parametrize("message,argv", [(m, READS[i % len(READS)]) for i, m in enumerate(LS_FAILURES)])
def test_a_read_whose_brev_ls_fails_runs_nothing_and_says_the_api_is_unreachable(box, message, argv):
    job = job_of(box, hang=True)
    assert brev(box, "stop", "box").returncode == 0
    box.sim.add_brev_fault("ls", message, times=50)
    before = box.sim.exec_count()
    args = [job if a == "JOB" else a for a in argv]
    res = box.run(*args)
    assert res.code == 3 and res.json["error"]["code"] == "BREV_API_UNREACHABLE", res
    assert box.sim.exec_count() == before and calls(box, "copy") == [] and calls(box, "login") == []
    assert box.sim.instance("box")["status"] == "STOPPED"
    assert res.json["next"].endswith(" ".join(args[1:])) and f"scripts/{args[0]}" in res.json["next"]
    assert box.run("tao_job_record.py", "show", job).json["terminal_state"] is None   # nothing closed


def test_brev_copy_to_an_instance_listed_stopped_is_refused_before_brev_runs(box, tmp_path):
    """copy.go startWorkspaceIfStopped: the transport refuses a copy as it refuses an exec."""
    from tao_brev import transport

    (tmp_path / "f").write_text("x")
    box.sim.set_instance("box", status="STOPPED")
    b = transport.Brev(env=box.env, log=lambda m: None)
    b.ls()
    for src, dst in ((str(tmp_path / "f"), "box:~/f"), ("box:~/f", str(tmp_path / "g"))):
        with pytest.raises(transport.TaoBrevError) as refused:
            b.copy(src, dst)
        assert refused.value.code == "INSTANCE_STOPPED"
    assert calls(box, "copy") == [] and box.sim.instance("box")["status"] == "STOPPED"
