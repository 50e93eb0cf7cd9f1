"""scripts/preflight.py against the simulator, the verb and reaching the instance
(tao_brev/verbs/preflight/ verb, reach, instance_wait, local): every failure it must catch
before GPU money is spent, with its exact fix, a schema-valid answer and the documented
exit code. The on-instance checks: tests/test_preflight_checks.py."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, TAO_IMAGE, validate
from preflight_world import (ALL_ON_INSTANCE, BREV_TOKEN, GOOD_NGC_KEY, PRE, TAO_KEY, box, check,  # noqa: F401
                             cred_files, fresh, names, preflight)
from tao_brev import nextstep
from tao_brev.bank import BUNDLE_ROOT, KEYS_SHOWN
from tao_brev.context import Context
from tao_brev.errors import CODES
from tao_brev.verbs import preflight as pf


# -- happy path, round trips, secrets ---------------------------------------------------
def test_every_check_passes_in_two_exec_round_trips_with_a_safe_ngc_login(box):
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    res = preflight(box, "--image", TAO_KEY, NGC_KEY=GOOD_NGC_KEY)
    assert res.code == 0, res
    assert res.json["ok"] is True and "error" not in res.json and res.json["warnings"] == []
    assert names(res) == ["image_ref", "brev_cli", "brev_auth", "instance", "exec_ready", *ALL_ON_INSTANCE]
    assert res.json["image"] == TAO_IMAGE
    assert check(res, "ngc_auth")["data"]["status"] == "AUTH_OK"
    assert check(res, "ngc_auth")["data"]["logged_in_now"] is True
    assert check(res, "gpu")["data"]["count"] == 1 and check(res, "docker")["data"]["server_version"]

    # Once exec-ready: the probe + ONE combined script (the bound is 3); the key file goes by brev copy.
    assert box.sim.exec_count() == res.json["exec_calls"] == 2 <= 3
    assert res.json["round_trips"] == {"probe": 1, "checks": 1, "pull": 0, "gpu_smoke": 0, "copy": 1}

    # The key never reached an argv (nor stdin of brev); '$oauthtoken' reached docker literally.
    audit = box.sim.audit_text()
    assert GOOD_NGC_KEY not in audit
    logins = [r["argv"] for r in box.sim.audit() if r["tool"] == "docker" and r["argv"][:1] == ["login"]]
    assert logins == [["login", "nvcr.io", "-u", "$oauthtoken", "--password-stdin"]]
    assert not any(r.get("stdin_text") for r in box.sim.audit() if r["tool"] == "brev")
    assert GOOD_NGC_KEY not in res.stdout + res.stderr
    assert cred_files(box, "box") == []   # removed by the remote command itself


def test_help_names_every_check_flag_and_exit_code(box):
    res = box.run("preflight.py", "--help")
    assert res.code == 0
    for word in ("--start", "--pull", "--gpu-smoke", "--storage-tier", "--bucket", "--results-root",
                 "--exec-timeout", "--host", "Exit codes", "seconds", "bytes"):
        assert word in res.stdout, word
    schema = json.loads((BUNDLE_ROOT / "references/schemas/preflight.schema.json").read_text())
    for name in schema["$defs"]["check_name"]["enum"]:
        assert f"  {name} " in res.stdout, name


# -- brev: missing, login ------------------------------------------------------------------
def test_brev_missing_stops_with_exit_3(box, tmp_path):
    (tmp_path / "nobin").mkdir()
    res = preflight(box, PATH=str(tmp_path / "nobin"))
    assert res.code == 3
    assert names(res) == ["brev_cli"]
    assert res.json["error"]["code"] == check(res, "brev_cli")["code"] == "BREV_NOT_FOUND"
    assert check(res, "brev_cli")["fix"] == ("Install the Brev CLI (https://docs.nvidia.com/brev) and make sure "
                                             "`brev` is on PATH.")


def test_not_logged_in_without_a_token_stops_with_exit_3(box):
    box.sim.set_auth(token=BREV_TOKEN, logged_in=False)
    res = preflight(box)
    assert res.code == 3
    assert names(res) == ["brev_cli", "brev_auth"]
    auth = check(res, "brev_auth")
    assert auth["code"] == res.json["error"]["code"] == "BREV_NOT_LOGGED_IN"
    assert auth["fix"] == ("Export BREV_API_KEY (a Brev API key, bak-...) or BREV_API_TOKEN (headless) in the shell "
                           f"that runs the scripts, then run {ROOT / 'scripts' / 'preflight.py'} --login; never type a "
                           "token into a command.")
    assert auth["data"]["token_set"] is False


def test_expired_token_is_renewed_headlessly_and_never_printed(box):
    box.sim.set_auth(token=BREV_TOKEN, expired=True)
    res = preflight(box, BREV_API_TOKEN=BREV_TOKEN)
    assert res.code == 0, res
    auth = check(res, "brev_auth")
    assert auth["detail"] == "logged in (headless re-login with BREV_API_TOKEN)"
    assert auth["data"]["headless_login"] is True and res.json["brev_logins"] == 1
    assert BREV_TOKEN not in res.stdout + res.stderr


def test_token_expiring_mid_run_is_renewed_once(box):
    box.sim.set_auth(token=BREV_TOKEN, expires_after_calls=4)   # --version needs none; ls, the price search (gpu, cpu) and the probe pass
    res = preflight(box, BREV_API_TOKEN=BREV_TOKEN)
    assert res.code == 0, res
    assert check(res, "brev_auth")["detail"] == "logged in" and res.json["brev_logins"] == 1
    assert BREV_TOKEN not in res.stdout + res.stderr


# -- the instance ------------------------------------------------------------------------------
def test_unknown_instance_stops_with_the_instance_check(box):
    res = preflight(box, instance="nope")
    assert res.code == 1
    assert names(res) == ["brev_cli", "brev_auth", "instance"]
    assert res.json["error"]["code"] == "UNKNOWN_INSTANCE"
    assert check(res, "instance")["fix"] == ("Check the name with `brev ls`; provision it with the official Brev "
                                             "agent skill.")
    assert check(res, "instance")["detail"] == "nope is not in `brev ls --json` (the account's instances: box)"


def test_a_misspelled_instance_gets_did_you_mean_and_next_is_the_corrected_call(box):
    box.sim.add_instance("my-a100")
    res = preflight(box, "--image", TAO_KEY, instance="my-a10O")
    inst = check(res, "instance")
    assert inst["code"] == "UNKNOWN_INSTANCE" and "did you mean 'my-a100'?" in inst["detail"], res
    assert inst["data"]["did_you_mean"] == ["my-a100"]
    assert res.json["next"] == f"{PRE} --image {TAO_KEY} --instance my-a100"


def test_closest_instance_names():
    from tao_brev.instance_names import closest, unknown_message

    assert closest("gpu-box", ["gpu-box2", "alice-dev", "", None]) == ["gpu-box2"]
    assert closest("zzz", ["gpu-box2"]) == []
    assert unknown_message("zzz", []) == "zzz is not in `brev ls --json` (the account's instances: none)"
    assert "did you mean 'gpu-c' or 'gpu-b'?" in unknown_message("gpu-a", ["gpu-b", "gpu-c"])   # difflib's order


def test_stopped_instance_is_reported_and_started_only_with_start(box):
    box.sim.set_instance("box", status="STOPPED")
    res = preflight(box)
    assert res.code == 1 and res.json["error"]["code"] == "INSTANCE_NOT_RUNNING"
    inst = check(res, "instance")
    assert inst["detail"] == "box is STOPPED" and inst["data"]["status"] == "STOPPED"
    assert inst["fix"] == (f"Start it: rerun {PRE} --instance box --start (runs `brev start box` and waits), "
                           "or run `brev start box` yourself.")
    assert box.sim.instance("box")["status"] == "STOPPED" and box.sim.exec_count() == 0

    res = preflight(box, "--start")
    assert res.code == 0, res
    assert check(res, "instance")["data"]["started"] is True
    assert box.sim.instance("box")["status"] == "RUNNING"


class FakeTime:
    """ctx.clock/ctx.sleep: sleeping advances the clock; ``on_sleep(n)`` runs after the n-th sleep."""

    def __init__(self, on_sleep=lambda n: None):
        self.now, self.sleeps, self.on_sleep = 1000.0, 0, on_sleep

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.on_sleep(self.sleeps)


def run_inprocess(world, **req):
    fake = req.pop("fake")
    answer, code = pf.preflight(Context(env=world.env, sleep=fake.sleep, clock=fake.clock),
                                pf.PreflightRequest("box", **req))
    nextstep.preflight(answer, code, ["--instance", "box"])   # what preflight.py adds (cli.run)
    validate("preflight", answer)
    return answer, code


def test_deploying_instance_is_waited_for_within_the_budget(box):
    box.sim.set_instance("box", status="DEPLOYING")

    def deployed_after_three_polls(sleeps: int) -> None:
        if sleeps == 3:
            box.sim.set_instance("box", status="RUNNING")

    fake = FakeTime(deployed_after_three_polls)
    answer, code = run_inprocess(box, fake=fake, exec_timeout=600)
    assert code == 0, answer
    inst = next(c for c in answer["checks"] if c["name"] == "instance")
    assert inst["data"]["waited_s"] == 3 * pf.INSTANCE_POLL_S and inst["data"]["started"] is False


def test_instance_still_starting_at_the_end_of_the_budget_is_not_exec_ready(box):
    box.sim.set_instance("box", status="STARTING")
    answer, code = run_inprocess(box, fake=FakeTime(), exec_timeout=60)
    assert code == 3 and answer["error"]["code"] == "NOT_EXEC_READY"
    assert answer["checks"][-1]["detail"] == "box is still STARTING at the end of the --exec-timeout budget"
    assert answer["checks"][-1]["fix"] == CODES["NOT_EXEC_READY"].fix   # in-process: before cli.concrete


@pytest.mark.parametrize("status", ["FAILURE", "DELETING"])
def test_broken_instance_fails_with_its_reason(box, status):
    box.sim.set_instance("box", status=status)
    answer, code = run_inprocess(box, fake=FakeTime())
    inst = answer["checks"][-1]
    assert code == 1 and inst["code"] == "INSTANCE_NOT_RUNNING"
    assert inst["detail"] == f"box is {status} (build_status COMPLETED, health_status HEALTHY)"
    assert inst["fix"] == pf.BROKEN_STATES[status].format(name="box")


def test_unhealthy_instance_fails_with_its_reason(box):
    box.sim.set_instance("box", health_status="UNHEALTHY")
    answer, code = run_inprocess(box, fake=FakeTime())
    inst = answer["checks"][-1]
    assert code == 1 and inst["detail"] == "box is UNHEALTHY (build_status COMPLETED, health_status UNHEALTHY)"
    assert inst["fix"] == ("The instance runs but Brev reports it unhealthy: restart it (brev stop box && brev start "
                           "box) if its type can stop; if brev answers `does not support stop`, replace it with the "
                           "official Brev agent skill (brev delete box once its results are safe: it bills until "
                           "deleted).")


# -- exec readiness ------------------------------------------------------------------------------
def test_probe_waits_for_sshd_after_running(box):
    # sshd refuses all of brev's first exec (its ssh, then its wait: 1 + ssh_probe_limit=2 probes),
    # counted, so the same on any machine's load
    fresh(box, "booting", ssh_refusals=4)
    res = preflight(box, "--exec-timeout", "600", instance="booting")
    assert res.code == 0, res
    ready = check(res, "exec_ready")
    assert ready["data"]["attempts"] == 2 and res.json["round_trips"]["probe"] == 2
    assert ready["detail"].startswith("`echo ok` answered after ")
    assert res.json["round_trips"]["checks"] == 1


def test_probe_gives_up_after_the_budget_with_exit_3(box):
    fresh(box, "dead-sshd", ssh_delay_s=3600)
    res = preflight(box, "--exec-timeout", "1", instance="dead-sshd")
    assert res.code == 3
    assert names(res)[-1] == "exec_ready" and res.json["error"]["code"] == "NOT_EXEC_READY"
    assert check(res, "exec_ready")["fix"] == (f"Wait for the instance to finish booting, then rerun {PRE} with "
                                               "a larger --exec-timeout.")
    assert "Connection refused" in check(res, "exec_ready")["detail"]


# -- bad input ------------------------------------------------------------------------------------------------
def test_unknown_versions_key_is_bad_input_and_the_rest_still_runs(box):
    res = preflight(box, "--image", "images.nope.pyt")
    assert res.code == 2
    ref = check(res, "image_ref")
    assert ref["code"] == res.json["error"]["code"] == "UNKNOWN_VERSIONS_KEY"
    own = BUNDLE_ROOT / "versions.yaml"
    assert ref["detail"] == f"versions key 'images.nope.pyt' not found in {own} (this bundle's own versions.yaml)"
    assert ref["fix"] == (f"Use one of the image keys of {own}: images.tao_toolkit.pyt, images.gpu_smoke, "
                          "images.s3_transfer; or a full image URI (registry/repository:tag).")
    assert "TAO_SKILL_BANK_PATH" not in ref["fix"]   # the file actually read, not one that was not
    assert names(res) == ["image_ref", "brev_cli", "brev_auth", "instance", "exec_ready", "docker", "gpu", "disk"]
    assert res.json["image"] is None


def test_unknown_versions_key_names_the_bank_file_read_and_a_bounded_list_of_its_keys(box, tmp_path):
    bank = tmp_path / "bank"
    bank.mkdir()
    pins = "\n".join(f"    v{n}: nvcr.io/nvidia/tao/tao-toolkit:{n}.0-pyt" for n in range(30))
    (bank / "versions.yaml").write_text(f"images:\n  tao_toolkit:\n{pins}\n  note: not an image\n")
    res = preflight(box, "--image", "images.tao_toolkit.pytorch", TAO_SKILL_BANK_PATH=str(bank))
    ref = check(res, "image_ref")
    assert res.code == 2 and ref["code"] == "UNKNOWN_VERSIONS_KEY"
    assert f"{bank / 'versions.yaml'} ($TAO_SKILL_BANK_PATH versions.yaml)" in ref["detail"]
    shown = [f"images.tao_toolkit.v{n}" for n in range(KEYS_SHOWN)]
    assert ref["fix"] == (f"Use one of the image keys of {bank / 'versions.yaml'}: {', '.join(shown)} (and "
                          f"{30 - KEYS_SHOWN} more); or a full image URI (registry/repository:tag).")
    assert str(BUNDLE_ROOT / "versions.yaml") not in ref["fix"]


def test_tier_b_without_a_bucket_is_bad_input_even_when_the_instance_is_unknown(box):
    res = preflight(box, "--storage-tier", "C", instance="nope")
    assert res.code == 2 and res.json["error"]["code"] == "BAD_ARGUMENT"
    assert check(res, "s3")["fix"] == "Pass --bucket NAME or export S3_BUCKET_NAME (and the AWS_* credentials)."
    assert check(res, "instance")["code"] == "UNKNOWN_INSTANCE"


def test_bad_flags_are_exit_2(box):
    for args in (["--exec-timeout", "0"], ["--results-root", "relative/dir"], ["--storage-tier", "D"]):
        res = preflight(box, *args)
        assert res.code == 2 and res.json["error"]["code"] == "BAD_ARGUMENT", args
