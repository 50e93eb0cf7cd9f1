"""scripts/preflight.py against the simulator, the checks of the combined round trip and
their own round trips (tao_brev/verbs/preflight/ docker_gpu, disk, ngc, image, pull, carrier_pull, smoke,
s3_reach, on_instance, units): each failure with its exact fix and code."""

from __future__ import annotations

import base64
import json
import os
import socket
from pathlib import Path

import pytest

from conftest import ROOT, TAO_IMAGE
from preflight_world import (GOOD_NGC_KEY, PRE, TAO_KEY, WRONG_NGC_KEY, box, check, cred_files,  # noqa: F401
                             fresh, names, preflight)
from tao_brev import remote
from tao_brev.answers import absolute_scripts
from tao_brev.errors import CODES
from tao_brev.verbs import preflight as pf


# -- docker, GPU, disk -------------------------------------------------------------------------------
def test_docker_daemon_down_fails_docker_and_still_reports_the_rest(box):
    box.sim.set_instance("box", docker_daemon="down")
    res = preflight(box)
    assert res.code == 1 and res.json["error"]["code"] == "PREFLIGHT_FAILED"
    assert names(res) == ["brev_cli", "brev_auth", "instance", "exec_ready", "docker", "gpu", "disk"]
    docker = check(res, "docker")
    assert docker["code"] == "DOCKER_DAEMON_DOWN" and "Cannot connect to the Docker daemon" in docker["detail"]
    assert docker["fix"] == ('On the instance: sudo systemctl restart docker (brev exec box "sudo systemctl '
                             'restart docker"), then retry.')   # the real instance, not the placeholder
    assert check(res, "gpu")["ok"] is True and res.json["error"]["message"] == "failed checks: docker"


def test_missing_gpu_runtime_is_caught_by_the_gpu_smoke_test(box):
    box.sim.set_instance("box", gpu_runtime=False)
    warned = preflight(box)                               # a warning whose fix preflight runs: next runs it
    assert warned.code == 0 and warned.json["warnings"] == ["gpu"], warned
    assert warned.json["next"] == f"{PRE} --instance box --gpu-smoke"
    res = preflight(box, "--gpu-smoke")
    assert res.code == 1
    gpu, smoke = check(res, "gpu"), check(res, "gpu_smoke")
    assert gpu["ok"] is True and gpu["warning"] is True and res.json["warnings"] == ["gpu"]
    assert smoke["code"] == "NVIDIA_RUNTIME_MISSING"
    assert 'could not select device driver "" with capabilities: [[gpu]]' in smoke["detail"]
    assert smoke["fix"] == ("Install/configure the NVIDIA Container Toolkit on the instance (sudo nvidia-ctk runtime "
                            "configure --runtime=docker && sudo systemctl restart docker), or use a Brev GPU instance "
                            "image that ships it.")
    assert res.json["round_trips"]["gpu_smoke"] == 1


def test_gpu_smoke_passes_with_the_pinned_image(box):
    res = preflight(box, "--gpu-smoke")
    assert res.code == 0, res
    smoke = check(res, "gpu_smoke")
    assert smoke["data"]["image"] == "nvidia/cuda:12.4.1-base-ubuntu22.04"
    assert smoke["data"]["gpus"][0].startswith("GPU 0: NVIDIA A100-SXM4-80GB")


def test_disk_too_small_for_the_image_fails_and_blocks_the_pull(box):
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    name = fresh(box, disk_free_bytes=10 * 10**9)
    res = preflight(box, "--image", TAO_KEY, "--pull", instance=name, NGC_KEY=GOOD_NGC_KEY)
    assert res.code == 1
    disk = check(res, "disk")
    assert disk["code"] == "DISK_FULL" and disk["data"]["image_size_source"] == "registry"
    assert disk["data"]["need_bytes"] == 2 * (18_000_000_000 // 3 * 3)
    assert disk["fix"] == "Free space (docker image prune -a, old results) or use an instance with a larger disk."
    image = check(res, "image")
    assert image["code"] == "DISK_FULL" and "not pulled because the disk check failed" in image["detail"]
    assert res.json["round_trips"]["pull"] == 0
    assert not any(r["argv"][:1] == ["pull"] for r in box.sim.audit() if r["tool"] == "docker")


def test_low_headroom_is_a_warning_not_a_failure(box):
    box.sim.set_instance("box", disk_free_bytes=5 * 10**9)   # the image is already there
    res = preflight(box, "--image", TAO_KEY, "--results-root", "~/runs")
    disk = check(res, "disk")
    assert disk["ok"] is True and disk["warning"] is True and "disk" in res.json["warnings"]
    assert "for results (~/runs)" in disk["detail"] and disk["data"]["results_root"]["root"] == "~/runs"
    assert disk["fix"].startswith("Keep at least 20.0 GiB free for results and checkpoints: ")


# -- NGC ------------------------------------------------------------------------------------------------
def test_wrong_ngc_key_is_not_authenticated(box):
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    name = fresh(box)
    res = preflight(box, "--image", TAO_KEY, instance=name, NGC_KEY=WRONG_NGC_KEY)
    assert res.code == 1
    ngc = check(res, "ngc_auth")
    assert ngc["code"] == "NGC_NOT_AUTHENTICATED" and ngc["data"]["status"] == "NOT_AUTHENTICATED"
    assert ngc["fix"] == "Export a valid NGC_KEY (an NGC API key, nvapi-...) in the shell that runs the script."
    assert check(res, "image")["code"] == "IMAGE_NOT_PULLED"
    assert WRONG_NGC_KEY not in box.sim.audit_text() and cred_files(box, name) == []


def test_ngc_org_not_entitled(box):
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    box.sim.add_image(TAO_IMAGE, size_bytes=18_000_000_000, requires_auth=True, entitled=False)
    name = fresh(box)
    res = preflight(box, "--image", TAO_KEY, "--pull", instance=name, NGC_KEY=GOOD_NGC_KEY)
    assert res.code == 1
    ngc = check(res, "ngc_auth")
    assert ngc["code"] == "NGC_NOT_ENTITLED" and ngc["data"] == {
        "status": "NOT_ENTITLED", "registry": "nvcr.io", "key_from_env": True, "logged_in_now": True}
    assert ngc["fix"] == ("Use a key from an NGC org entitled to TAO, or accept the image's terms on ngc.nvidia.com.")
    assert check(res, "image")["code"] == "NGC_NOT_ENTITLED" and res.json["round_trips"]["pull"] == 0


def test_key_file_used_by_brevs_own_second_run_still_ends_auth_ok(box):
    """The combined script runs twice when its ssh connection drops after the
    run (brev retries by itself): the first run logged in and removed the key
    file, the second finds no file and uses that login."""
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    name = fresh(box)
    box.sim.add_fault("docker manifest inspect", "reset_after")
    res = preflight(box, "--image", TAO_KEY, "--pull", instance=name, NGC_KEY=GOOD_NGC_KEY)
    assert res.code == 0, res
    ngc = check(res, "ngc_auth")
    assert ngc["detail"] == ("AUTH_OK: the NGC key file was not found where docker runs (an earlier run of this "
                             "command used it); docker manifest inspect answers")
    assert res.json["round_trips"]["checks"] == 1 and cred_files(box, name) == []
    assert len([c for c in box.sim.remote_commands(name) if "docker manifest inspect" in c]) == 2


def test_no_key_but_already_logged_in_is_auth_ok(box):
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    name = fresh(box)
    config = box.sim.instance_home(name) / ".docker" / "config.json"
    config.parent.mkdir()
    auth = base64.b64encode(f"$oauthtoken:{GOOD_NGC_KEY}".encode()).decode()
    config.write_text(json.dumps({"auths": {"nvcr.io": {"auth": auth}}}))
    res = preflight(box, "--image", TAO_KEY, instance=name)
    ngc = check(res, "ngc_auth")
    assert ngc["ok"] is True and ngc["data"]["status"] == "AUTH_OK" and ngc["data"]["key_from_env"] is False
    assert ngc["detail"] == ("AUTH_OK: no NGC_KEY set; using the instance's earlier login; "
                             "docker manifest inspect answers")
    assert res.json["round_trips"]["copy"] == 0


def test_no_key_and_no_login_is_only_a_warning_when_the_image_is_there(box):
    res = preflight(box, "--image", TAO_KEY)
    assert res.code == 0, res
    ngc = check(res, "ngc_auth")
    assert ngc["ok"] is True and ngc["warning"] is True and ngc["code"] == "NGC_NOT_AUTHENTICATED"
    assert res.json["warnings"] == ["ngc_auth"]


# -- image and pull ---------------------------------------------------------------------------------------
def test_missing_image_is_reported_then_pulled_with_pull(box):
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    name = fresh(box)
    res = preflight(box, "--image", TAO_KEY, instance=name, NGC_KEY=GOOD_NGC_KEY)
    assert res.code == 1
    image = check(res, "image")
    assert image["code"] == "IMAGE_NOT_PULLED" and image["detail"] == f"{TAO_IMAGE} is not on the instance"
    assert image["fix"] == f"Pull it before the GPU run: {PRE} --instance {name} --image {TAO_KEY} --pull"

    res = preflight(box, "--image", TAO_KEY, "--pull", instance=name, NGC_KEY=GOOD_NGC_KEY)
    assert res.code == 0, res
    image = check(res, "image")
    assert image["data"]["pulled"] is True and image["detail"].startswith(f"{TAO_IMAGE} pulled in ")
    assert res.json["round_trips"] == {"probe": 1, "checks": 1, "pull": 1, "gpu_smoke": 0, "copy": 1}
    images = json.loads((box.sim.world.docker_dir(name) / "images.json").read_text())
    assert TAO_IMAGE in images
    memory = json.loads((Path(box.env["TAO_STATE_DIR"]) / "brev" / "instances" / f"{name}.json").read_text())
    assert memory["last_pull_image"] == TAO_IMAGE and memory["last_pull_s"] == image["data"]["pull_s"]


@pytest.mark.parametrize("image, pull_fails, code", [
    ("ubuntu:22.04", "write /var/lib/docker/tmp/GetImageBlob1: no space left on device", "DISK_FULL"),
    ("ubuntu:22.04", "pull access denied for ubuntu, repository does not exist or may require 'docker login': "
                     "denied: requested access to the resource is denied", "IMAGE_PULL_UNAUTHORIZED"),
    ("ubuntu:99.99", None, "IMAGE_NOT_FOUND"),
])
def test_pull_failures_are_mapped_to_codes(box, image, pull_fails, code):
    if pull_fails:
        box.sim.add_image(image, size_bytes=77_000_000, pull_fails=pull_fails)
    name = fresh(box)
    res = preflight(box, "--image", image, "--pull", instance=name)
    assert res.code == 1
    failed = check(res, "image")
    assert failed["code"] == code and failed["fix"] == absolute_scripts(CODES[code].fix)
    assert "ngc_auth" not in names(res)       # not an nvcr.io image


# -- S3 -------------------------------------------------------------------------------------------------
def test_s3_probe_passes_with_legacy_names_and_leaves_nothing(box, s3_server):
    bucket = s3_server["create_bucket"]()
    env = s3_server["env"]
    res = preflight(box, "--storage-tier", "B", ACCESS_KEY=env["AWS_ACCESS_KEY_ID"],
                    SECRET_KEY=env["AWS_SECRET_ACCESS_KEY"], S3_ENDPOINT_URL=env["AWS_ENDPOINT_URL"],
                    S3_BUCKET_NAME=bucket)
    assert res.code == 0, res
    s3 = check(res, "s3")
    assert s3["data"]["bucket"] == bucket and s3["data"]["credential_sources"]["access_key_id"] == "ACCESS_KEY"
    assert s3_server["server"].boto_client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0


def test_s3_bucket_missing(box, s3_server):
    res = preflight(box, "--bucket", "tao-no-such-bucket", **s3_server["env"])
    assert res.code == 1 and res.json["error"]["code"] == "PREFLIGHT_FAILED"
    s3 = check(res, "s3")
    assert s3["code"] == "S3_NO_SUCH_BUCKET" and "NoSuchBucket" in s3["detail"]
    assert s3["fix"] == ("Check S3_BUCKET_NAME / --bucket and AWS_ENDPOINT_URL (a bucket lives on one store); "
                         "create the bucket first.")
    assert check(res, "docker")["ok"] is True     # the rest of the truth is still told


def test_s3_is_checked_from_the_instance_in_the_same_round_trip(box, s3_server):
    """The transfers run on the instance: preflight asks it to reach the endpoint and looks for
    the carrier image there, inside the one combined script (no extra round trip)."""
    from tao_brev.s3 import carrier_image

    bucket = s3_server["create_bucket"]()
    name = fresh(box, "s3box")
    res = preflight(box, "--bucket", bucket, instance=name, **s3_server["env"])
    assert res.code == 0 and res.json["round_trips"]["checks"] == 1, res
    carrier = carrier_image(os.environ)
    reach = check(res, "s3_from_instance")
    port = s3_server["endpoint_url"].rsplit(":", 1)[1]
    assert reach["data"] == {"endpoint": f"127.0.0.1:{port}", "carrier_image": carrier, "carrier_present": False}
    assert reach["warning"] and "s3_from_instance" in res.json["warnings"]
    assert "(from public.ecr.aws)" in reach["detail"] and "Docker Hub" not in reach["detail"]
    assert reach["fix"].startswith("Pull it now: /") and reach["fix"].endswith(f"--bucket {bucket} --pull")
    assert res.json["next"].endswith("--pull")      # a warning with a fix the bundle runs: next is that fix
    box.sim.preload_image(name, carrier)
    res = preflight(box, "--bucket", bucket, instance=name, **s3_server["env"])
    reach = check(res, "s3_from_instance")
    assert reach["ok"] and not reach.get("warning") and reach["data"]["carrier_present"] is True, reach


def test_an_endpoint_the_instance_cannot_reach_fails_the_check(box, s3_server):
    with socket.socket() as sock:   # a port nobody listens on (bound, never listening)
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
        env = dict(s3_server["env"], AWS_ENDPOINT_URL=f"http://127.0.0.1:{closed}")
        res = preflight(box, "--bucket", "any-bucket", instance=fresh(box, "cut"), **env)
    assert res.code == 1 and res.json["error"]["code"] == "PREFLIGHT_FAILED"
    reach = check(res, "s3_from_instance")
    assert not reach["ok"] and reach["code"] == "S3_UNREACHABLE" and f"127.0.0.1:{closed}" in reach["detail"]
    assert "cut" in reach["fix"]


@pytest.mark.parametrize("endpoint, region, target", [
    (None, "eu-west-1", ("s3.eu-west-1.amazonaws.com", 443)),
    (None, None, ("s3.us-east-1.amazonaws.com", 443)),
    ("http://minio.lan", None, ("minio.lan", 80)),
    ("https://r2.example.com", None, ("r2.example.com", 443)),
    ("http://10.0.0.5:9000/", None, ("10.0.0.5", 9000)),
])
def test_the_instance_reaches_the_endpoint_the_transfers_use(endpoint, region, target):
    found = pf.S3Target.of(endpoint, region, "amazon/aws-cli:2")
    assert (found.host, found.port) == target
    assert found.reach_command() == f"timeout 10 bash -c 'exec 3<>/dev/tcp/{target[0]}/{target[1]}' && echo reached"


@pytest.fixture
def iam_s3(s3_server):
    """The shared moto server with IAM authentication on for one test (then off again)."""
    server = s3_server["server"]
    bucket = server.create_bucket()
    key_id, secret = server.iam_user(allow_s3=True)
    server.set_iam_auth(True)
    try:
        yield {"env": dict(server.env, AWS_ACCESS_KEY_ID=key_id), "bucket": bucket, "secret": secret}
    finally:
        server.set_iam_auth(False)


def test_s3_wrong_credentials_fail_for_real(box, iam_s3):
    res = preflight(box, "--bucket", iam_s3["bucket"], **iam_s3["env"])   # right key id, wrong secret
    assert res.code == 1
    s3 = check(res, "s3")
    assert s3["code"] == "S3_AUTH_FAILED" and "SignatureDoesNotMatch" in s3["detail"]
    assert s3["fix"] == ("Export the AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN if temporary) "
                         "that belong to this endpoint; never put them on the command line.")
    assert iam_s3["env"]["AWS_SECRET_ACCESS_KEY"] not in res.stdout + res.stderr

    right = dict(iam_s3["env"], AWS_SECRET_ACCESS_KEY=iam_s3["secret"])
    res = preflight(box, "--bucket", iam_s3["bucket"], **right)
    assert check(res, "s3")["ok"] is True, res


# -- pure pieces -------------------------------------------------------------------------------------------------
def test_registry_bytes_reads_plain_and_verbose_manifests_but_not_indexes():
    layers = {"layers": [{"size": 10}, {"size": 32}]}
    assert pf.registry_bytes(json.dumps(layers)) == 42
    assert pf.registry_bytes("WARNING: x\n" + json.dumps({"Ref": "r", "SchemaV2Manifest": layers})) == 42
    assert pf.registry_bytes(json.dumps({"manifests": [{"digest": "sha256:x"}]})) is None
    assert pf.registry_bytes("not json") is None


def section(output, code=0):
    return remote.Section("x", code, output)


@pytest.mark.parametrize("login, manifest, key_set, expected", [
    (section("Login Succeeded"), section("{}"), True, ("AUTH_OK", None)),
    (section("unauthorized: authentication required", 1), section("unauthorized", 1), True,
     ("NOT_AUTHENTICATED", "NGC_NOT_AUTHENTICATED")),
    (section("Login Succeeded"), section("errors:\nunauthorized: authentication required", 1), True,
     ("NOT_ENTITLED", "NGC_NOT_ENTITLED")),
    (None, section("errors:\nunauthorized: authentication required", 1), False,
     ("NOT_AUTHENTICATED", "NGC_NOT_AUTHENTICATED")),
    (None, section("errors:\ndenied: requested access to the resource is denied", 1), False,
     ("NOT_ENTITLED", "NGC_NOT_ENTITLED")),
    (None, section("{}"), False, ("AUTH_OK", None)),
    (None, section("errors:\nunauthorized: authentication required", 1), True,     # the key file never arrived
     ("NOT_AUTHENTICATED", "NGC_NOT_AUTHENTICATED")),
    (section("TAO_NGC_KEY_FILE_MISSING", 1), section("{}"), True, ("AUTH_OK", None)),
    (section("Cannot connect to the Docker daemon at unix:///var/run/docker.sock.", 1), None, True,
     ("UNKNOWN", "DOCKER_DAEMON_DOWN")),
])
def test_classify_ngc(login, manifest, key_set, expected):
    status, code, _detail = pf.classify_ngc(login, manifest, key_set=key_set)
    assert (status, code) == expected


def test_combined_script_quotes_oauthtoken_and_removes_the_key_file_first():
    from tao_brev.credentials import RemoteSecretFile

    script = pf.combined_script("TOK", TAO_IMAGE, "~/tao-results", RemoteSecretFile("~/.tao-cred-ngc-abc"))
    lines = script.splitlines()
    assert lines[0] == "trap 'rm -f \"$HOME\"/.tao-cred-ngc-abc' EXIT"
    assert "docker login nvcr.io -u '$oauthtoken' --password-stdin < \"$HOME\"/.tao-cred-ngc-abc" in script
    assert script.index("docker login") < script.index("docker manifest inspect")
    assert os.environ.get("NGC_KEY", "\0") not in script


def test_pull_pulls_the_carrier_too_when_the_tier_moves_data_through_s3(box, s3_server):
    """--pull leaves nothing for a hand-typed docker pull: the TAO image and the S3 carrier."""
    from tao_brev.s3 import carrier_image

    bucket = s3_server["create_bucket"]()
    name = fresh(box, "pullboth")
    box.sim.set_ngc_key(GOOD_NGC_KEY)
    res = preflight(box, "--image", TAO_KEY, "--storage-tier", "B", "--bucket", bucket, "--pull",
                    instance=name, **s3_server["env"], NGC_KEY=GOOD_NGC_KEY)
    carrier = carrier_image(os.environ)
    reach = check(res, "s3_from_instance")
    assert reach["ok"] and not reach.get("warning") and reach["data"]["carrier_pulled"] is True, res
    assert "pulled from public.ecr.aws" in reach["detail"]
    assert check(res, "image")["data"]["pulled"] is True and res.json["warnings"] == [], res
    assert res.json["round_trips"]["pull"] == 2
    assert sum(f"docker pull {carrier}" in c for c in box.sim.remote_commands(name)) == 1
    again = preflight(box, "--bucket", bucket, "--pull", instance=name, **s3_server["env"])
    assert check(again, "s3_from_instance")["data"]["carrier_present"] is True and again.json["round_trips"].get("pull", 0) == 0


def test_every_registered_section_is_read_and_every_check_is_a_schema_name():
    """The registry walked by the combined round trip: each section a check needs exists, each
    section is needed by some check, names are unique, and each check name is one of the schema's."""
    from tao_brev.verbs.preflight.on_instance import CHECKS, SNIPPETS

    snippets = [s.name for s in SNIPPETS]
    needed = {name for c in CHECKS for name in c.needs}
    assert len(set(snippets)) == len(snippets) and set(snippets) == needed
    schema = json.loads((ROOT / "references/schemas/preflight.schema.json").read_text())
    assert {c.name for c in CHECKS} <= set(schema["$defs"]["check_name"]["enum"])
    assert [c.name for c in CHECKS] == ["docker", "gpu", "disk", "ngc_auth", "s3_from_instance", "image"]


def test_the_script_holds_only_what_applicable_checks_need():
    """No image: no image/manifest/ngc_login section; no S3 target: no s3_reach/carrier."""
    bare = pf.combined_script("TOK", None, "~/tao-results", None)
    for absent in ("TOK>image", "TOK>manifest", "TOK>ngc_login", "TOK>s3_reach", "TOK>carrier"):
        assert absent not in bare
    for present in ("TOK>docker'", "TOK>docker_path", "TOK>gpu", "TOK>disk_docker", "TOK>disk_results"):
        assert present in bare
    plain = pf.combined_script("TOK", "ubuntu:22.04", "~/tao-results", None, pf.S3Target("h", 1, "c:1"))
    assert [s for s in ("image", "manifest", "s3_reach", "carrier") if f"TOK>{s}'" in plain] == [
        "image", "manifest", "s3_reach", "carrier"] and "TOK>ngc_login" not in plain
