"""Storage tiers B and C end to end: the simulated Brev instance plus a real S3 server (moto).

Inputs go laptop -> S3 -> instance disk (the AWS CLI carrier container), the
job runs, its results go instance -> S3 and are verified from the laptop;
teardown refuses to delete an instance whose results are not (or no longer)
verified. No AWS key value may reach any argv or any output.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLE_DATA, TAO_IMAGE
from tao_brev import credentials
from tao_brev import s3 as staging, s3 as storage
from tests.s3server import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY
from tests.s3world import CARRIER, S3World, s3world  # noqa: F401  (fixture)

MiB = 2**20


@pytest.fixture
def dataset(tmp_path) -> Path:
    """The tiny LEVIR-CD tree plus a file over the multipart threshold, an empty file, spaces, depth."""
    root = tmp_path / "levir_cd_tiny"
    shutil.copytree(EXAMPLE_DATA, root)
    (root / "big.bin").write_bytes(os.urandom(9 * MiB))       # > 8 MiB: multipart both ways
    (root / "empty.txt").write_bytes(b"")
    (root / "with space").mkdir()
    (root / "with space" / "my file 1.txt").write_bytes(b"hello spaces\n")
    (root / "deep" / "a" / "b").mkdir(parents=True)
    (root / "deep" / "a" / "b" / "c.txt").write_bytes(b"nested\n")
    return root


def env_seen(s3world: S3World, job_id: str) -> dict:
    return json.loads((s3world.results_dir(job_id) / "env_seen.json").read_text())


def test_tier_b_stages_inputs_verifies_results_and_guards_the_instance(s3world, dataset):
    sub = s3world.submit("B", dataset, "--upload-exclude", "status.json",
                         simulate={"write_env_hashes": ["AWS_ACCESS_KEY_ID"]})
    assert sub.code == 0, sub
    job = sub.json["job_id"]
    assert sub.execs == 1                                    # staging + launch in one round trip
    [staged_input] = sub.json["inputs"]
    assert staged_input["uploaded"] == staged_input["files"] == len(storage.local_manifest(dataset))
    assert staged_input["uri"].startswith(f"s3://{s3world.bucket}/inputs/levir_cd_tiny/")
    assert staged_input["container_path"] == "/data/levir_cd_tiny"
    assert storage.local_manifest(s3world.staged(job)) == storage.local_manifest(dataset)  # byte-identical

    wait = s3world.wait(job)
    assert wait.code == 0 and wait.json["state"] == "COMPLETE", wait
    results = wait.json["results"]
    assert results["kind"] == "s3" and results["uploaded"] and results["verified"], results
    assert results["excluded"] == 1 and results["missing"] == [] and results["files"] >= 4
    assert wait.execs == wait.json["polls"] + 1              # one more round trip: manifest + upload
    uploaded = s3world.keys(f"results/{job}/")
    assert "train/model_epoch_002_step_00075.pth" in uploaded and "train/status.json" not in uploaded
    assert env_seen(s3world, job) == {"AWS_ACCESS_KEY_ID": None}   # tier B keeps the keys from the job

    again = s3world.run("poll_status.py", job, schema="poll_status")
    assert again.execs == 1 and again.json["results"]["verified"]  # verified results: not uploaded twice

    # The same inputs again: nothing is uploaded twice.
    resub = s3world.submit("B", dataset, simulate={"hang": True})
    assert resub.code == 0, resub
    assert resub.json["inputs"][0]["uri"] == staged_input["uri"]
    assert (resub.json["inputs"][0]["uploaded"], resub.json["inputs"][0]["bytes_uploaded"]) == (0, 0)
    cancel = s3world.run("teardown.py", resub.json["job_id"], schema="teardown")
    assert cancel.code == 0 and cancel.json["state"] == "CANCELED" and cancel.json["results"]["verified"], cancel

    # A result lost in S3 after its verification (and cleaned up on the instance, so no upload can
    # bring it back) blocks the delete and is named; --force deletes anyway.
    s3world.s3.delete_object(Bucket=s3world.bucket, Key=f"results/{job}/train/model_epoch_001_step_00050.pth")
    (s3world.results_dir(job) / "train" / "model_epoch_001_step_00050.pth").unlink()
    refused = s3world.run("teardown.py", job, "--delete-instance", schema="teardown")
    assert refused.code == 1 and refused.json["error"]["code"] == "INSTANCE_DELETE_REFUSED", refused
    assert any("train/model_epoch_001_step_00050.pth" in b for b in refused.json["blockers"])
    assert "--force" in refused.json["error"]["fix"]
    assert refused.json["results"]["verified"] is False
    assert s3world.sim.world.instance("box") is not None
    forced = s3world.run("teardown.py", job, "--delete-instance", "--force", schema="teardown")
    assert forced.code == 0 and forced.json["instance_deleted"] and forced.json["forced"], forced
    assert forced.json["results"]["missing"] == ["train/model_epoch_001_step_00050.pth"]
    assert s3world.sim.world.instance("box") is None
    s3world.assert_no_secret_anywhere()


def test_tier_c_gives_the_container_its_credentials_and_repairs_a_loss(s3world, dataset):
    names = ["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "TAO_RESULTS_URI", "TAO_INPUT_URI_LEVIR_CD_TINY"]
    sub = s3world.submit("C", dataset, simulate={"write_env_hashes": names})
    assert sub.code == 0 and sub.execs == 1, sub
    job = sub.json["job_id"]
    assert storage.local_manifest(s3world.staged(job)) == storage.local_manifest(dataset)

    wait = s3world.wait(job)
    assert wait.code == 0 and wait.json["results"]["verified"], wait
    seen = env_seen(s3world, job)                             # hashes only: the values never leave the container
    expected = {"AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
                "TAO_RESULTS_URI": f"s3://{s3world.bucket}/results/{job}/",
                "TAO_INPUT_URI_LEVIR_CD_TINY": sub.json["inputs"][0]["uri"]}
    assert seen == {k: hashlib.sha256(v.encode()).hexdigest() for k, v in expected.items()}
    assert "env_seen.json" in s3world.keys(f"results/{job}/")

    # A loss is caught before the delete; the next teardown uploads it again from the instance.
    s3world.s3.delete_object(Bucket=s3world.bucket, Key=f"results/{job}/train/model_epoch_000_step_00025.pth")
    refused = s3world.run("teardown.py", job, "--delete-instance", schema="teardown")
    assert refused.code == 1 and any("train/model_epoch_000_step_00025.pth" in b for b in refused.json["blockers"]), refused
    repaired = s3world.run("teardown.py", job, "--delete-instance", schema="teardown")
    assert repaired.code == 0 and repaired.json["instance_deleted"], repaired
    assert repaired.json["results"]["verified"] and "forced" in repaired.json and not repaired.json["forced"]
    assert "train/model_epoch_000_step_00025.pth" in s3world.keys(f"results/{job}/")
    s3world.assert_no_secret_anywhere()


def test_s3_inputs_dry_run_and_refusals(s3world, dataset):
    s3world.s3.put_object(Bucket=s3world.bucket, Key="shared/levir/A/x.png", Body=b"png")
    common = ["--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
              "--action", "train", "--spec", str(s3world.world.spec({"epoch_seconds": 0.01}))]

    dry = s3world.run("submit.py", *common, "--storage-tier", "B", "--inputs", str(dataset), "--dry-run",
                      schema="submit")
    assert dry.code == 0 and dry.execs == 0 and s3world.keys("inputs/") == {}, dry
    assert [s["step"] for s in dry.json["plan"]][:3] == ["open_record", "upload_inputs", "copy_s3_credentials"]
    assert "s3 sync" in dry.json["plan"][-2]["script"]

    empty = s3world.run("submit.py", *common, "--storage-tier", "B", "--inputs",
                        f"s3://{s3world.bucket}/nothing/=levir_cd_tiny", schema="submit")
    assert empty.code == 2 and empty.json["error"]["code"] == "BAD_ARGUMENT" and empty.execs == 0
    assert s3world.run("tao_job_record.py", "list").stdout == ""    # bad input opens no record

    # The carrier cannot be pulled: the copy fails before the launch, which never happens.
    s3world.sim.add_image(CARRIER, size_bytes=130_000_000, pull_fails="toomanyrequests: rate limit")
    failed = s3world.run("submit.py", *common, "--storage-tier", "B", "--inputs",
                         f"s3://{s3world.bucket}/shared/levir=levir_cd_tiny", schema="submit")
    assert failed.code == 1 and failed.json["error"]["code"] == "INPUT_STAGING_FAILED", failed
    assert "toomanyrequests" in failed.json["error"]["message"]
    assert s3world.sim.container("box", failed.json["job_id"]) is None
    status = s3world.run("poll_status.py", failed.json["job_id"], schema="poll_status")
    # the refusal came before `docker run` of the job, so it closed the job itself: nothing left to read
    assert status.execs == 0 and status.json["results"]["verified"] and status.json.get("closed_at"), status
    assert "never launched" in status.json["results"]["note"]
    assert status.code == 1 and status.json["error"]["code"] == "INPUT_STAGING_FAILED"   # the submit's answer again
    s3world.assert_no_secret_anywhere()


def test_the_instance_copies_only_the_staged_version_and_refuses_any_other(s3world, dataset):
    """The fetch script on the (simulated) instance: one carrier sync, the manifest checked against the
    sha256 the laptop computed, every file checked with sha256sum -c, the count checked."""
    settings = storage.s3_settings(s3world.world.env)
    home = s3world.sim.instance_home("box")
    (home / ".tao-cred-t-s3").write_text(credentials.env_file_text(settings.container_env()))
    carrier = staging.Carrier(CARRIER, "~/.tao-cred-t-s3", "", path_style=True)

    def fetch(job: str, inp: staging.Input) -> subprocess.CompletedProcess:
        script = staging.fetch_script(staging.Carrier(CARRIER, carrier.env_file, job, path_style=True), [inp],
                                      TAO_IMAGE)
        return subprocess.run(["brev", "exec", "box", script], env=s3world.world.env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=300)

    (dataset / "odd \\ name.txt").write_bytes(b"backslash in a name\n")   # escaped in the sha256sum manifest
    [inp] = staging.prepare_inputs(settings, s3world.bucket, staging.parse_inputs([f"{dataset}=levir_cd_tiny"]))
    ok = fetch("j1", inp)
    assert ok.returncode == 0, ok
    assert storage.local_manifest(s3world.staged("j1")) == storage.local_manifest(dataset)

    # Another version staged meanwhile (same name, one file changed): this job's copy refuses it.
    key = "inputs/levir_cd_tiny/data/A/" + sorted(p.name for p in (dataset / "A").iterdir())[0]
    original = s3world.s3.get_object(Bucket=s3world.bucket, Key=key)["Body"].read()
    s3world.s3.put_object(Bucket=s3world.bucket, Key=key, Body=bytes(len(original)))
    changed = fetch("j2", inp)
    assert changed.returncode != 0 and "exit status 8" in changed.stderr, changed   # brev exec's own report
    assert "TAO_STAGE_FAILED levir_cd_tiny: not the staged content" in changed.stdout and "FAILED" in changed.stdout

    # An extra file in data/ (not in this version) is refused by the count.
    s3world.s3.put_object(Bucket=s3world.bucket, Key=key, Body=original)
    s3world.s3.put_object(Bucket=s3world.bucket, Key="inputs/levir_cd_tiny/data/extra.bin", Body=b"stale")
    extra = fetch("j3", inp)
    assert extra.returncode != 0 and f"TAO_STAGE_FAILED levir_cd_tiny: {inp.files + 1} of {inp.files} files" in extra.stdout, extra

    # A manifest altered in S3 is refused before any file is trusted.
    s3world.s3.delete_object(Bucket=s3world.bucket, Key="inputs/levir_cd_tiny/data/extra.bin")
    body = s3world.s3.get_object(Bucket=s3world.bucket, Key=inp.manifest_key)["Body"].read()
    s3world.s3.put_object(Bucket=s3world.bucket, Key=inp.manifest_key, Body=body + b"0" * 64 + b"  x\n")
    forged = fetch("j4", inp)
    assert forged.returncode != 0 and "differs from the one staged" in forged.stdout, forged
    s3world.assert_no_secret_anywhere()


def test_tier_c_credentials_a_job_prints_are_withheld_in_a_shell_without_them(s3world, dataset):
    """The S3 keys tier C hands the job's container are proved like --env values (the job's
    sidecar lists them): polled or torn down from a shell without AWS_*, the job's output is
    withheld, never printed or stored; from the submitting shell it is shown redacted."""
    secret = s3world.world.env["AWS_SECRET_ACCESS_KEY"]
    sub = s3world.submit("C", dataset, simulate={"print_env": ["AWS_SECRET_ACCESS_KEY"]})
    assert sub.code == 0, sub
    job = sub.json["job_id"]
    s3world.sim.wait_container("box", job)
    same = s3world.run("poll_status.py", job, "--logs", "100")
    assert secret not in same.stdout + same.stderr and "<redacted>" in json.dumps(same.json), same
    bare = {k: v for k, v in s3world.world.env.items() if not k.startswith("AWS_")}
    from conftest import run_script, tree_leaks

    polled = run_script("poll_status.py", job, "--logs", "100", env=bare, timeout=180)
    assert secret not in polled.stdout + polled.stderr and "withheld" in polled.stdout, polled
    down = run_script("teardown.py", job, "--keep-instance", env=bare, timeout=180)
    stored = tree_leaks(Path(bare["TAO_STATE_DIR"]), lambda t: ["aws-secret"] if secret in t else [])
    assert not stored and secret not in down.stdout + down.stderr, stored
