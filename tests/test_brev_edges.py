"""What the real tools do when things go half wrong (brev, ssh, Docker, registries),
through the scripts on the simulator, each behaviour taught to the simulator first:
an ssh master holding brev's pipes, a refused ssh key, an older Docker's
``rm -f``, ``brev delete`` failing after a fresh login, nvcr.io's DENIED answer, a
registry the instance cannot resolve, an NGC key file that arrives empty, docker
only on a login shell's PATH. Answers are asserted exactly, never by wall-clock time."""

from __future__ import annotations

import subprocess

import pytest

from conftest import TAO_IMAGE, validate
from tao_brev import docker_state
from tests.sim.simstate import master_alive

GOOD_NGC_KEY = "nvapi-GOODgood0000000000000000000"
TOKEN = "brevtok-Edge0123456789abcdefghijklmn"
DENIED = 'denied: {"errors": [{"code": "DENIED", "message": "Access Denied"}]}'
UNREACHABLE = ('Get "https://nvcr.io/v2/": dial tcp: lookup nvcr.io on 127.0.0.53:53: no such host')
FAST = {"TAO_BREV_RETRY_BACKOFF_S": "0"}


@pytest.fixture
def box(world):
    world.sim.set_instance("box", disk_free_bytes=500 * 10**9)
    world.sim.set_timing(ssh_probe_interval_s=0.02, ssh_probe_limit=2)
    world.env.update(FAST)
    return world


def run(world, script, *args, schema=None, **env):
    res = world.run(script, *args, **env)
    assert res.json is not None, res
    validate(schema or script.replace(".py", ""), res.json)
    return res


def check(res, name) -> dict:
    found = [c for c in res.json["checks"] if c["name"] == name]
    assert len(found) == 1, res
    return found[0]


def fresh(world, name="fresh", **opts):
    opts.setdefault("disk_free_bytes", 500 * 10**9)
    world.sim.add_instance(name, **opts)
    return name


def remote(world, command, instance="box"):
    return subprocess.run(["brev", "exec", instance, command], env=world.env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


# -- ssh ------------------------------------------------------------------------------------
def test_preflight_answers_at_once_while_the_ssh_master_holds_brevs_pipes(box):
    box.sim.set_timing(control_persist_s=3600, control_master_holds="both")
    res = run(box, "preflight.py", "--instance", "box", "--exec-timeout", "10")
    assert res.code == 0 and res.json["ok"] is True, res
    assert check(res, "exec_ready")["data"]["attempts"] == 1 and res.json["round_trips"]["probe"] == 1
    assert master_alive(box.sim.ssh_master_pid("box"), box.sim.root)


def test_a_refused_ssh_key_fails_preflight_fast_with_a_fix_about_brevs_key(box):
    fresh(box, "keyless", ssh_key_rejected=True)
    res = run(box, "preflight.py", "--instance", "keyless", "--exec-timeout", "60")
    assert res.code == 3 and res.json["error"]["code"] == "SSH_KEY_REJECTED", res
    ready = check(res, "exec_ready")
    assert res.json["round_trips"]["probe"] == 2 and ready["data"]["attempts"] == 2
    assert "Permission denied (publickey)" in ready["detail"]
    fix = res.json["error"]["fix"]
    assert "brev refresh" in fix and "preflight.py --login" in fix and 'brev exec keyless "echo ok"' in fix
    assert "boot" not in fix and "--exec-timeout" not in fix


def test_the_simulated_brev_stops_waiting_for_ssh_on_a_refused_key(box):
    """pkg/store/ssh.go: only refused/timed-out connections are waited for."""
    box.sim.set_timing(ssh_probe_limit=40, ssh_probe_interval_s=0.02)
    fresh(box, "keyless", ssh_key_rejected=True)
    done = remote(box, "echo ok", "keyless")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("Permission denied (publickey).") == 2   # the first ssh, then one probe
    assert 'could not connect to instance "keyless"' in done.stderr


def test_a_logged_out_brev_with_a_failing_ssh_is_logged_in_once_by_a_poll(box):
    """poll_status starts with brev exec (no brev ls first): the prompt is the only sign."""
    box.sim.set_auth(token=TOKEN)
    job = box.submit().json["job_id"]
    box.sim.set_auth(token=TOKEN, logged_in=False)
    box.sim.add_fault(job, "reset_before", times=3)   # every attempt of the read would fail logged out
    res = run(box, "poll_status.py", job, BREV_API_TOKEN=TOKEN)
    assert res.code in (0, 1) and res.json["state"] in ("RUNNING", "COMPLETE"), res
    assert "logging in headlessly" in res.stderr and TOKEN not in res.stdout + res.stderr
    assert len([r for r in box.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["login"]]) == 1


# -- teardown -------------------------------------------------------------------------------
def test_older_dockers_rm_f_of_a_missing_container_is_already_removed(box):
    sub = box.submit()
    job = sub.json["job_id"]
    box.sim.wait_container("box", job)
    first = run(box, "teardown.py", job)
    assert first.code == 0 and first.json["container_removed"] is True, first
    box.sim.set_instance("box", docker_version="19.03.15")
    done = remote(box, f"docker rm -f {job}")
    # the old CLI's answer (exit 1, so brev ran it a second time)
    assert done.returncode == 1 and done.stderr.startswith(f"Error: No such container: {job}\nConnection failed")
    again = run(box, "teardown.py", job)
    assert again.code == 0 and again.json["ok"] is True, again
    assert (again.json["container_removed"], again.json["state"]) == (False, "COMPLETE")


def test_current_dockers_rm_f_of_a_missing_container_prints_and_succeeds(box):
    done = remote(box, "docker rm -f no-such-job")
    assert (done.returncode, done.stderr) == (0, "Error response from daemon: No such container: no-such-job\n")


@pytest.mark.parametrize("message", ["Error: 401 Unauthorized: token expired, run brev login",
                                     "Error: 500 Internal Server Error: failed to delete workspace"])
def test_brev_delete_failing_after_a_fresh_login_leaves_a_visible_pending_cleanup(box, message):
    box.sim.set_auth(token=TOKEN)
    job = box.submit("--ephemeral").json["job_id"]
    box.sim.wait_container("box", job)
    box.sim.add_brev_fault("delete", "Error: 401 Unauthorized: token expired, run brev login")   # -> one login
    box.sim.add_brev_fault("delete", message)               # the delete after the login fails too
    res = run(box, "teardown.py", job, BREV_API_TOKEN=TOKEN)
    assert res.code == 3 and res.json["error"]["code"] == "INSTANCE_DELETE_PENDING", res
    assert (res.json["cleanup_pending"], res.json["still_billing"], res.json["manual_command"]) == \
        (True, True, "brev delete box")
    assert res.json["container_removed"] is True and res.json["state"] == "COMPLETE" and res.json["deleted"] == []
    err = res.json["error"]
    assert "still bills" in err["message"] and "`brev delete box`" in err["fix"]
    assert box.sim.world.instance("box") is not None
    assert len([r for r in box.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["login"]]) == 1
    assert TOKEN not in res.stdout + res.stderr

    listed = run(box, "teardown.py", "--orphans", schema="teardown", BREV_API_TOKEN=TOKEN)
    orphan = {o["instance"]: o for o in listed.json["orphans"]}["box"]
    assert orphan["delete_pending"]["manual_command"] == "brev delete box"
    assert orphan["delete_pending"]["error"] in ("BREV_NOT_LOGGED_IN", "BREV_FAILED")
    assert "brev delete box" in orphan["advice"]

    later = run(box, "teardown.py", job, BREV_API_TOKEN=TOKEN)   # brev answers again
    assert later.code == 0 and later.json["deleted"] == ["box"], later
    assert box.sim.world.instance("box") is None
    assert "delete_pending" not in run(box, "teardown.py", "--orphans", schema="teardown").stdout


def test_a_pending_delete_done_by_hand_is_forgotten(box):
    job = box.submit("--ephemeral").json["job_id"]
    box.sim.wait_container("box", job)
    box.sim.add_brev_fault("delete", "Error: 500 Internal Server Error", times=1)
    assert run(box, "teardown.py", job).json["error"]["code"] == "INSTANCE_DELETE_PENDING"
    assert subprocess.run(["brev", "delete", "box"], env=box.env, stdin=subprocess.DEVNULL,
                          capture_output=True).returncode == 0
    listed = run(box, "teardown.py", "--orphans", schema="teardown")
    assert listed.code == 0 and listed.json["orphans"] == [], listed
    from tao_brev.sidecar import SidecarStore
    from pathlib import Path

    assert not SidecarStore(Path(box.env["TAO_STATE_DIR"])).instance("box").delete_pending


# -- registries -----------------------------------------------------------------------------
def test_nvcr_denied_answer_is_not_entitled_in_the_ngc_check(box):
    name = fresh(box)
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    box.sim.add_image(TAO_IMAGE, size_bytes=18_000_000_000, requires_auth=True, entitled=False)
    res = run(box, "preflight.py", "--instance", name, "--image", TAO_IMAGE, "--pull", NGC_KEY=GOOD_NGC_KEY)
    ngc = check(res, "ngc_auth")
    assert (res.code, ngc["code"], ngc["data"]["status"]) == (1, "NGC_NOT_ENTITLED", "NOT_ENTITLED"), res
    assert DENIED in ngc["detail"]


def test_nvcr_denied_answer_at_pull_is_not_entitled(box):
    """The instance is logged in already (no NGC_KEY here): the pull itself meets DENIED."""
    name = fresh(box)
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    box.sim.add_image("nvcr.io/nvidia/other:1.0", requires_auth=True, entitled=True)
    res = run(box, "preflight.py", "--instance", name, "--image", "nvcr.io/nvidia/other:1.0", NGC_KEY=GOOD_NGC_KEY)
    assert check(res, "ngc_auth")["ok"] is True
    box.sim.add_image("nvcr.io/nvidia/other:1.0", requires_auth=True, entitled=False)   # entitlement withdrawn
    done = remote(box, "docker pull nvcr.io/nvidia/other:1.0", name)
    assert DENIED in done.stderr
    assert docker_state.registry_error_code(done.stderr, "nvcr.io") == "NGC_NOT_ENTITLED"
    assert docker_state.registry_error_code("Error response from daemon: unauthorized: authentication required",
                                            "nvcr.io") == "NGC_NOT_AUTHENTICATED"
    assert docker_state.registry_error_code("unauthorized: authentication required", "nvcr.io",
                                            logged_in=True) == "NGC_NOT_ENTITLED"
    assert docker_state.registry_error_code(DENIED, "ghcr.io") == "IMAGE_PULL_UNAUTHORIZED"


def test_an_unreachable_registry_is_its_own_code_in_every_registry_step(box):
    name = fresh(box, registry_reachable=False)
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    res = run(box, "preflight.py", "--instance", name, "--image", TAO_IMAGE, "--pull", "--gpu-smoke",
              NGC_KEY=GOOD_NGC_KEY)
    assert res.code == 1, res
    ngc, image, smoke = check(res, "ngc_auth"), check(res, "image"), check(res, "gpu_smoke")
    assert (ngc["code"], ngc["data"]["status"]) == ("REGISTRY_UNREACHABLE", "UNKNOWN")
    assert UNREACHABLE in ngc["detail"]
    assert image["code"] == "REGISTRY_UNREACHABLE"
    assert smoke["code"] == "REGISTRY_UNREACHABLE" and "(exit 125)" in smoke["detail"]
    assert "no such host" in smoke["detail"] and name in smoke["fix"]


def test_an_unreachable_public_registry_at_pull(box):
    name = fresh(box, registry_reachable=False)
    res = run(box, "preflight.py", "--instance", name, "--image", "ubuntu:22.04", "--pull")
    image = check(res, "image")
    assert (res.code, image["code"]) == (1, "REGISTRY_UNREACHABLE"), res
    assert "dial tcp: lookup registry-1.docker.io" in image["detail"]


@pytest.mark.parametrize("text, registry, code", [
    ("Error response from daemon: manifest for x:1 not found: manifest unknown: manifest unknown", "docker.io",
     "IMAGE_NOT_FOUND"),
    ("docker: Error response from daemon: Get \"https://registry-1.docker.io/v2/\": net/http: request canceled "
     "while waiting for connection (Client.Timeout exceeded while awaiting headers).", "docker.io",
     "REGISTRY_UNREACHABLE"),
    ("Error response from daemon: Get \"https://nvcr.io/v2/\": dial tcp 1.2.3.4:443: i/o timeout", "nvcr.io",
     "REGISTRY_UNREACHABLE"),
    ("errors:\n" + DENIED, "nvcr.io", "NGC_NOT_ENTITLED"),
    ("Error response from daemon: unauthorized: authentication required", "ghcr.io", "IMAGE_PULL_UNAUTHORIZED"),
])
def test_registry_messages_map_to_codes(text, registry, code):
    assert docker_state.registry_error_code(text, registry) == code


def test_an_ngc_key_file_that_arrives_empty_names_the_real_cause(box):
    name = fresh(box)
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    box.sim.add_copy_fault(".tao-cred-ngc-", "empty")
    res = run(box, "preflight.py", "--instance", name, "--image", TAO_IMAGE, NGC_KEY=GOOD_NGC_KEY)
    ngc = check(res, "ngc_auth")
    assert (ngc["code"], ngc["data"]["status"]) == ("NGC_KEY_NOT_DELIVERED", "UNKNOWN"), res
    assert "reached the instance empty" in ngc["detail"] and "export" not in ngc["fix"].lower()
    assert not [r for r in box.sim.audit() if r["tool"] == "docker" and r["argv"][:1] == ["login"]]
    assert list(box.sim.instance_home(name).glob(".tao-cred-*")) == []


def test_dockers_own_answer_to_an_empty_key_is_also_not_delivered():
    from tao_brev import remote
    from tao_brev.verbs import preflight as pf

    login = remote.Section("ngc_login", 1, "Error: Cannot perform an interactive login from a non TTY device")
    assert pf.classify_ngc(login, None, key_set=True)[:2] == ("UNKNOWN", "NGC_KEY_NOT_DELIVERED")


# -- docker on a login shell's PATH only ----------------------------------------------------
def test_docker_only_on_a_login_shells_path_is_named_with_its_fix(box):
    name = fresh(box, docker_on_path=False)
    res = run(box, "preflight.py", "--instance", name)
    docker = check(res, "docker")
    where = str(box.sim.world.remote_bin / "docker")
    assert (docker["code"], docker["data"]["docker_path"]) == ("DOCKER_NOT_ON_PATH", where), res
    assert "non-interactive" in docker["detail"] and "install" not in docker["fix"].lower()
    assert f'brev exec {name} "sudo ln -s {where} /usr/local/bin/docker"' in docker["fix"]


def test_submit_without_docker_names_the_command_that_failed(box):
    box.sim.set_instance("box", docker_on_path=False)
    res = box.submit()
    assert res.code == 1 and res.json["error"]["code"] == "DOCKER_NOT_FOUND", res
    validate("submit", res.json)
    assert "`docker image inspect` failed" in res.json["error"]["message"]
    assert "docker run" not in res.json["error"]["message"] and "preflight.py --instance box" in res.json["error"]["fix"]
