"""preflight in process: every check over one script of brev calls."""

from __future__ import annotations

import json
import re

from tao_brev.verbs.preflight import PreflightRequest, login_only, preflight
from tests.unit.fake_brev import sections
from tests.unit.jobs import expect_catalog

BOX = {"name": "box", "id": "ws-1", "status": "RUNNING", "build_status": "COMPLETED", "shell_status": "READY",
       "health_status": "HEALTHY", "instance_type": "g5.xlarge"}
DF = "{path}\nFilesystem 1B-blocks Used Available Capacity Mounted on\n/dev/root 500000000000 1000 {free} 1% /\n"
DOCKER_INFO = json.dumps({"ServerVersion": "27.1.1", "DockerRootDir": "/var/lib/docker",
                          "Runtimes": {"nvidia": {}, "runc": {}}})


def healthy(free: int = 400 * 10**9) -> dict:
    return {"docker": DOCKER_INFO, "docker_path": "/usr/bin/docker",
            "gpu": "NVIDIA A10G, 23028 MiB, 550.54.15",
            "disk_docker": DF.format(path="/var/lib/docker", free=free),
            "disk_results": DF.format(path="/home/ubuntu", free=free)}


def expect_reach(fake_brev):
    fake_brev.expect("--version", stdout="brev version v0.6.310\n")
    fake_brev.expect_ls(BOX)
    expect_catalog(fake_brev)   # the instance type's price, for the jobs' answers (cached a day)
    fake_brev.expect_exec("box", re.compile(r"^echo ok$"), stdout="ok\n")


def test_a_healthy_instance_passes_every_check_in_two_round_trips(ctx, fake_brev):
    fake_brev.ordered = True   # the version, the listing, the probe, then the checks: in this order
    expect_reach(fake_brev)
    fake_brev.expect_exec("box", "docker info --format", answer=sections(healthy()))
    answer, code = preflight(ctx, PreflightRequest(instance="box"))
    assert code == 0 and answer["ok"] is True, answer
    assert [c["name"] for c in answer["checks"]] == ["brev_cli", "brev_auth", "instance", "exec_ready", "docker",
                                                     "gpu", "disk"]
    gpu = next(c for c in answer["checks"] if c["name"] == "gpu")
    assert gpu["data"]["count"] == 1 and gpu["data"]["models"] == ["NVIDIA A10G"]
    assert answer["exec_calls"] == 2 and answer["round_trips"]["probe"] == 1 and answer["brev_logins"] == 0


def test_no_gpu_fails_the_gpu_check_with_its_code(ctx, fake_brev):
    expect_reach(fake_brev)
    facts = {**healthy(), "gpu": (127, "sh: 1: nvidia-smi: not found")}
    fake_brev.expect_exec("box", "nvidia-smi --query-gpu", answer=sections(facts))
    answer, code = preflight(ctx, PreflightRequest(instance="box"))
    assert code == 1 and answer["ok"] is False
    gpu = next(c for c in answer["checks"] if c["name"] == "gpu")
    assert gpu["ok"] is False and gpu["code"] == "GPU_NOT_FOUND"
    assert answer["error"]["code"] == "PREFLIGHT_FAILED" and "gpu" in answer["error"]["message"]


def test_an_instance_brev_does_not_list_stops_after_the_listing(ctx, fake_brev):
    fake_brev.expect("--version", stdout="brev version v0.6.310\n")
    fake_brev.expect_ls({**BOX, "name": "boxx"}, times=2)   # the lookup, then the names for "did you mean"
    answer, code = preflight(ctx, PreflightRequest(instance="box"))
    assert code == 1 and answer["ok"] is False and answer["error"]["code"] == "UNKNOWN_INSTANCE", answer
    last = answer["checks"][-1]
    assert last["name"] == "instance" and last["data"]["did_you_mean"] == ["boxx"] and answer["exec_calls"] == 0


def test_a_stopped_instance_is_not_started_without_start(ctx, fake_brev):
    fake_brev.expect("--version", stdout="brev version v0.6.310\n")
    fake_brev.expect_ls({**BOX, "status": "STOPPED"})
    answer, code = preflight(ctx, PreflightRequest(instance="box"))
    assert code == 1 and answer["exec_calls"] == 0
    assert answer["error"]["code"] == "INSTANCE_NOT_RUNNING", answer
    assert "preflight.py --instance box --start" in answer["error"]["fix"]


def test_login_only_renews_an_expired_login_with_the_token(ctx, fake_brev):
    ctx.env["BREV_API_TOKEN"] = "brev-token-Zx81kQmV2pL7rT0w"
    fake_brev.expect("--version", stdout="brev version v0.6.310\n")
    fake_brev.expect("ls", "--json", stderr="Error: 401 unauthorized\n", exit=1)
    login = fake_brev.expect("login", "--token", re.compile(".+"))
    fake_brev.expect_ls(BOX)
    answer, code = login_only(ctx)
    assert code == 0 and answer["ok"] is True and answer["brev_logins"] == 1, answer
    assert "instance" not in answer
    auth = answer["checks"][-1]
    assert auth["name"] == "brev_auth" and auth["data"]["headless_login"] is True
    assert "BREV_API_TOKEN" not in login.calls[0].env   # the token reaches brev only as the login's flag
    assert "brev-token-Zx81kQmV2pL7rT0w" not in json.dumps(answer)


def test_bad_input_raises_before_any_brev_call(ctx, fake_brev):
    import pytest

    from tao_brev.errors import TaoBrevError

    with pytest.raises(TaoBrevError) as raised:
        preflight(ctx, PreflightRequest(instance="box", storage_tier="Z"))
    assert raised.value.code == "BAD_ARGUMENT" and raised.value.exit_code == 2
    assert fake_brev.calls == []


NGC = "nvapi-Zq7vT3mN9pL2xR8wK4bY6cH1dF5gJ0sAbCdEfGh"


def test_an_image_check_logs_in_with_the_key_file_and_finds_the_image(ctx, fake_brev):
    ctx.env["NGC_KEY"] = NGC
    expect_reach(fake_brev)
    sent = []

    def copy(call):
        sent.append(open(call.args[1], encoding="utf-8").read())
        return "", "", 0
    fake_brev.expect("copy", re.compile(r"/.+/cred"), re.compile(r"box:\.tao-cred-ngc-[0-9a-f]{10}"), answer=copy)
    checks = fake_brev.expect_exec("box", "docker manifest inspect", answer=sections(
        {**healthy(), "image": "25000000000", "ngc_login": "Login Succeeded", "manifest": "{}"}))
    answer, code = preflight(ctx, PreflightRequest(instance="box", image="images.tao_toolkit.pyt"))
    assert code == 0 and answer["ok"] is True, answer
    assert answer["image"] == "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt"
    by_name = {c["name"]: c for c in answer["checks"]}
    assert by_name["ngc_auth"]["data"]["status"] == "AUTH_OK" and by_name["ngc_auth"]["data"]["logged_in_now"]
    assert by_name["image"]["data"]["present"] is True and answer["round_trips"]["copy"] == 1
    assert sent and NGC in sent[0] and NGC not in checks.calls[0].command   # the key travels in the file only
    assert "trap 'rm -f" in checks.calls[0].command                          # ... which the checks remove


def test_a_missing_image_without_pull_names_the_pull_command(ctx, fake_brev):
    expect_reach(fake_brev)
    fake_brev.expect_exec("box", "docker image inspect", answer=sections(
        {**healthy(), "image": (1, "Error: No such image: nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt"),
         "manifest": "{}"}))
    answer, code = preflight(ctx, PreflightRequest(instance="box", image="images.tao_toolkit.pyt"))
    assert code == 1 and answer["ok"] is False, answer
    image = next(c for c in answer["checks"] if c["name"] == "image")
    assert image["code"] == "IMAGE_NOT_PULLED" and "--pull" in image["fix"]
