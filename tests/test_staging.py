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
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import EXAMPLE_DATA, TAO_IMAGE, validate
from tao_brev import credentials
from tao_brev import s3 as staging, s3 as storage
from tao_brev.s3 import clients, hash_cache, transfer
from tao_brev.errors import TaoBrevError
from tests.s3server import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY

MiB = 2**20
CARRIER = "public.ecr.aws/aws-cli/aws-cli:2.22.35"
SECRETS = (FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY)


class S3World:
    """The simulator world plus a bucket, the S3 settings in the shell env, and output bookkeeping."""

    def __init__(self, world, s3_server, bucket: str):
        self.world, self.sim, self.bucket = world, world.sim, bucket
        self.s3 = s3_server["server"].boto_client()
        world.env.update(s3_server["env"], S3_BUCKET_NAME=bucket)
        self.outputs: list[str] = []

    def run(self, script: str, *args: str, schema: str | None = None):
        before = self.sim.exec_count()
        result = self.world.run(script, *args)
        result.execs = self.sim.exec_count() - before
        self.outputs += [result.stdout, result.stderr]
        if schema:
            assert result.json is not None, result
            validate(schema, result.json)
        return result

    def submit(self, tier: str, dataset: Path, *extra: str, simulate: dict | None = None):
        spec = self.world.spec({"epoch_seconds": 0.02, **(simulate or {})})
        return self.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train", "--spec", str(spec),
                        "--storage-tier", tier, "--inputs", f"{dataset}=levir_cd_tiny", *extra, schema="submit")

    def wait(self, job_id: str):
        return self.run("poll_status.py", job_id, "--wait", "--interval", "0.2", "--timeout", "60",
                        schema="poll_status")

    def keys(self, prefix: str) -> dict[str, int]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"][len(prefix):]: o["Size"] for page in pages for o in page.get("Contents", [])}

    def staged(self, job_id: str) -> Path:
        return self.sim.instance_home("box") / "tao-jobs" / job_id / "inputs" / "levir_cd_tiny"

    def results_dir(self, job_id: str) -> Path:
        return self.sim.instance_home("box") / "tao-results" / job_id

    def assert_no_secret_anywhere(self) -> None:
        audit = self.sim.audit_text()
        for secret in SECRETS:
            assert secret not in audit, "an AWS credential reached an argv"
            for text in self.outputs:
                assert secret not in text, "an AWS credential reached a script's output"


@pytest.fixture
def s3world(world, s3_server):
    world.sim.add_image(CARRIER, size_bytes=130_000_000)
    return S3World(world, s3_server, s3_server["create_bucket"]())


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


# ------------------------------------------------------------------ units
def test_manifest_lines_with_escaped_names_and_unreadable_files():
    text = "\n".join([
        "5 " + "a" * 64 + "  ./train/x y.pth",
        "0 \\" + "b" * 64 + "  ./odd\\nname\\\\x",
        "TAO_UNREADABLE ./locked.bin",
        "stat: noise that is not a manifest line",
    ])
    parsed = staging.parse_manifest(text)
    assert parsed.entries == [{"path": "odd\nname\\x", "size": 0, "sha256": "b" * 64},
                              {"path": "train/x y.pth", "size": 5, "sha256": "a" * 64}]
    assert parsed.unreadable == ["locked.bin"] and parsed.present
    assert not staging.parse_manifest("TAO_NO_RESULTS").present


def test_excludes_become_aws_cli_patterns_that_cover_is_excluded():
    import fnmatch

    patterns = ["*.ckpt", ".git", "runs/tmp/*", "status.json"]
    args = staging.aws_excludes(patterns)
    forms = args[1::2]
    assert args[::2] == ["--exclude"] * len(forms)
    for path in ["a.ckpt", "x/y/b.ckpt", ".git/HEAD", "sub/.git/config", "runs/tmp/t/1", "train/status.json",
                 "status.json", "train/model.pth", "gitx/a", "runs/keep/1"]:
        by_cli = any(fnmatch.fnmatchcase(path, form) for form in forms)   # awscli: fnmatch on the relative path
        assert by_cli == storage.is_excluded(path, patterns), path


def test_input_names_and_content_addressed_prefixes(tmp_path):
    inputs = staging.parse_inputs(["./data/levir/", "s3://b/p/=ptm", "s3://b/year=2024/=yr"])
    assert [(i.name, i.source) for i in inputs] == [("levir", "./data/levir/"), ("ptm", "s3://b/p/"),
                                                    ("yr", "s3://b/year=2024/")]
    for bad in (["a=x", "b=x"], ["./d=bad name"], ["=x"], ["s3://b/year=2024/"]):  # the last: no usable name
        with pytest.raises(TaoBrevError):
            staging.parse_inputs(bad)
    one = [{"path": "a", "size": 1, "sha256": "0" * 64}]
    assert staging.manifest_digest(one) == staging.manifest_digest([dict(one[0])])
    assert staging.manifest_digest(one) != staging.manifest_digest([dict(one[0], size=2)])
    assert staging.locations(inputs[:2], "s3://b/results/j/") == {
        "TAO_INPUT_URI_LEVIR": "", "TAO_INPUT_URI_PTM": "", "TAO_RESULTS_URI": "s3://b/results/j/"}


def test_carrier_pin_falls_back_to_the_bundle_when_a_bank_lacks_it(tmp_path):
    (tmp_path / "versions.yaml").write_text("images:\n  tao_toolkit:\n    pyt: nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt\n")
    assert staging.carrier_image({"TAO_SKILL_BANK_PATH": str(tmp_path)}) == CARRIER
    (tmp_path / "versions.yaml").write_text("images:\n  s3_transfer: amazon/aws-cli:2.22.0\n")
    assert staging.carrier_image({"TAO_SKILL_BANK_PATH": str(tmp_path)}) == "amazon/aws-cli:2.22.0"


def test_carrier_command_shape():
    plain = staging.Carrier(CARRIER, "~/.tao-cred-j-s3-ab12", "j")
    cmd = plain.run("~/tao-jobs/j/inputs", "/inputs", ["s3", "sync", "s3://b/p q/", "/inputs/x"])
    assert cmd.startswith("docker run --rm --network host --env-file \"$HOME\"/.tao-cred-j-s3-ab12 ")
    assert "AWS_CONFIG_FILE" not in cmd and plain.prepare() == ""
    assert cmd.endswith(f"{CARRIER} s3 sync 's3://b/p q/' /inputs/x")
    path_style = staging.Carrier(CARRIER, "~/.tao-cred-j-s3-ab12", "j", path_style=True)
    assert "-e AWS_CONFIG_FILE=/tao-aws/config" in path_style.run("~/r", "/results", ["s3", "ls"], read_only=True)
    assert "addressing_style = path" in path_style.prepare()


# ------------------------------------------------------------------ re-staging: what goes over the wire
WRITES = {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "CopyObject",
          "DeleteObjects", "DeleteObject"}


class Requests:
    """Every S3 call the code under test makes, as (operation, key): botocore's
    ``provide-client-params`` event fires once per API call on each client ``storage.client`` builds."""

    def __init__(self):
        self.calls: list[tuple[str, str | None]] = []

    def clear(self) -> None:
        self.calls.clear()

    def count(self) -> Counter:
        return Counter(op for op, _ in self.calls)

    def written(self) -> set:
        return {key for op, key in self.calls if op in WRITES and key}


@pytest.fixture
def requests_seen(monkeypatch):
    seen, real, hooked = Requests(), clients.client, []

    def record(params, model, **_):
        seen.calls.append((model.name, params.get("Key")))

    def counting(*args, **kwargs):
        s3 = real(*args, **kwargs)            # storage keeps clients per process: hook each one once
        if not any(s3 is other for other in hooked):
            s3.meta.events.register("provide-client-params.s3", record)
            hooked.append(s3)
        return s3
    monkeypatch.setattr(clients, "client", counting)
    yield seen
    for s3 in hooked:
        s3.meta.events.unregister("provide-client-params.s3", record)


def later() -> int:
    """An injected clock past every file's mtime: nothing is racy, so the cache keeps every hash."""
    return time.time_ns() + 3600 * 10**9


class Stager:
    """prepare_inputs of one local input named ``ds`` into a fresh bucket, with a hash cache."""

    def __init__(self, s3_server, tmp_path: Path):
        self.bucket = s3_server["create_bucket"]()
        self.settings = storage.s3_settings(s3_server["env"])
        self.s3 = s3_server["server"].boto_client()
        self.cache_file = tmp_path / "state" / "brev" / "hash-cache.json"
        self.copies = staging.index_copies_dir(tmp_path / "state")

    def stage(self, source: Path) -> staging.Input:
        [inp] = staging.prepare_inputs(self.settings, self.bucket, staging.parse_inputs([f"{source}=ds"]),
                                       cache=hash_cache.HashCache(self.cache_file, clock=later),
                                       index_copies=self.copies)
        return inp

    def keys(self, prefix: str = "inputs/ds/") -> dict[str, int]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"][len(prefix):]: o["Size"] for page in pages for o in page.get("Contents", [])}

    def etags(self, prefix: str) -> dict[str, str]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix="inputs/ds/" + prefix)
        return {o["Key"][len("inputs/ds/"):]: o["ETag"] for page in pages for o in page.get("Contents", [])}

    def get(self, key: str) -> bytes:
        return self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()


def shards(root: Path, small: int = 12, big: int = 3, big_bytes: int = 9 * MiB) -> Path:
    """Small files plus ``big`` shards over the 8 MiB multipart threshold."""
    for i in range(small):
        path = root / "images" / f"{i % 3}" / f"img_{i:03d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(1000 + 37 * i))
    (root / "shards").mkdir(parents=True, exist_ok=True)
    for i in range(big):
        (root / "shards" / f"shard_{i}.tar").write_bytes(os.urandom(big_bytes))
    return root


def test_a_restage_sends_only_the_changed_file_and_nothing_when_nothing_changed(s3_server, tmp_path, capsys,
                                                                                requests_seen, hashed):
    stager, root = Stager(s3_server, tmp_path), shards(tmp_path / "ds")
    first = stager.stage(root)
    assert "[upload] 15/15 files" in capsys.readouterr().err          # progress on stderr by default
    assert (first.upload["uploaded"], first.upload["skipped"]) == (15, 0) and len(hashed) == 15
    assert first.uri == f"s3://{stager.bucket}/inputs/ds/data/"
    manifest = storage.local_manifest(root)
    keys = stager.keys()
    assert {k for k in keys if k.startswith("data/")} == {"data/" + e["path"] for e in manifest}
    assert stager.get(first.manifest_key).decode() == staging.sha256sum_text(manifest)
    assert hashlib.sha256(stager.get(first.manifest_key)).hexdigest() == first.manifest_sha256

    # Nothing changed: one LIST (the index's local copy has the ETag it shows), no hashing, no HEAD,
    # no write of any kind.
    index = json.loads(stager.get("inputs/ds/index.json"))["files"]
    assert {p: v[2] for p, v in index.items()} == {k[len("data/"):]: v for k, v in stager.etags("data/").items()}
    requests_seen.clear(), hashed.clear()
    again = stager.stage(root)
    assert requests_seen.count() == Counter({"ListObjectsV2": 1}), requests_seen.calls
    assert hashed == [] and (again.upload["uploaded"], again.upload["bytes_uploaded"]) == (0, 0)
    assert (again.uri, again.manifest_key) == (first.uri, first.manifest_key)

    # One byte appended to one shard: that shard alone is hashed and sent (multipart), then the
    # version's manifest and the index; no HEAD.
    with open(root / "shards" / "shard_1.tar", "ab") as handle:
        handle.write(b"x")
    requests_seen.clear(), hashed.clear()
    grown = stager.stage(root)
    assert hashed == ["shard_1.tar"]
    assert (grown.upload["uploaded"], grown.upload["bytes_uploaded"]) == (1, 9 * MiB + 1)
    assert requests_seen.written() == {"inputs/ds/data/shards/shard_1.tar", grown.manifest_key,
                                       "inputs/ds/index.json"}
    assert requests_seen.count()["HeadObject"] == 0 and requests_seen.count()["CreateMultipartUpload"] == 1
    assert requests_seen.count()["ListObjectsV2"] == 1          # the ETag came with the upload's answer
    assert grown.manifest_key != first.manifest_key and first.manifest_key[len("inputs/ds/"):] in stager.keys()
    assert stager.keys()["data/shards/shard_1.tar"] == 9 * MiB + 1
    requests_seen.clear()                                         # the ETags the index learned are right:
    assert stager.stage(root).upload["uploaded"] == 0 and requests_seen.count() == Counter(
        {"ListObjectsV2": 1})                                     # the next run is a no-change run again

    # A file deleted here is deleted from data/ (after the manifest and the index), nothing is sent.
    (root / "images" / "0" / "img_000.jpg").unlink()
    requests_seen.clear()
    fewer = stager.stage(root)
    assert fewer.upload["deleted"] == 1 and fewer.upload["uploaded"] == 0
    assert "data/images/0/img_000.jpg" not in stager.keys()
    ops = [op for op, _ in requests_seen.calls]
    assert ops.index("DeleteObjects") > ops.index("PutObject")   # the manifest and index first
    assert fewer.files == 14


def test_submits_staging_in_a_fresh_process_loads_no_upload_machinery_when_nothing_changed(s3_server, tmp_path):
    """bench/stage_fresh.py runs what submit.py runs up to its upload, as a fresh process (the
    benchmark times it beside aws s3 sync): the first run sends every file, the re-run none, and
    the re-run imports neither boto3 nor s3transfer (only an upload needs them). The imports are
    read from PYTHONPROFILEIMPORTTIME's report, which also shows the first run loading them."""
    import sys

    root = shards(tmp_path / "ds", small=6, big=1, big_bytes=MiB)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(s3_server["env"], S3_BUCKET_NAME=s3_server["create_bucket"](), TAO_STATE_DIR=str(tmp_path / "state"),
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, PYTHONPROFILEIMPORTTIME="1")
    script = Path(__file__).resolve().parent.parent / "bench" / "stage_fresh.py"

    def run():
        done = subprocess.run([sys.executable, str(script), f"{root}=ds"], env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        assert not [secret for secret in SECRETS if secret in done.stdout + done.stderr]
        imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
                    if line.startswith("import time:")}
        return done.stdout, imported

    first, imported = run()
    assert first == "7\n" and {"boto3", "s3transfer"} <= imported
    again, imported = run()
    assert again == "0\n" and "botocore.session" in imported
    assert not {"boto3", "s3transfer"} & imported


def test_an_interrupted_staging_names_no_unsent_file_and_the_rerun_sends_the_rest(s3_server, tmp_path,
                                                                                  requests_seen, monkeypatch):
    stager, root = Stager(s3_server, tmp_path), shards(tmp_path / "ds", small=6, big=0)
    before = stager.stage(root)
    index_before = stager.get("inputs/ds/index.json")
    for i in range(3):
        (root / "images" / "0" / f"new_{i}.jpg").write_bytes(os.urandom(500 + i))

    real = transfer.transfer_files

    def interrupted(s3, settings, bucket, todo, *args, **kwargs):
        real(s3, settings, bucket, todo[:1], *args, **kwargs)     # one file made it, then the link died
        raise KeyboardInterrupt
    monkeypatch.setattr(transfer, "transfer_files", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stager.stage(root)
    new_manifest = "manifests/" + staging.manifest_digest(storage.local_manifest(root)) + ".sha256"
    keys = stager.keys()
    assert new_manifest not in keys and before.manifest_key[len("inputs/ds/"):] in keys
    assert stager.get("inputs/ds/index.json") == index_before          # still describes what it did
    assert sum(1 for k in keys if k.startswith("data/images/0/new_")) == 1

    monkeypatch.setattr(transfer, "transfer_files", real)
    requests_seen.clear()
    done = stager.stage(root)
    assert done.upload["uploaded"] == 2 and done.upload["checked_by_head"] == 1   # the one sent: by its metadata
    assert new_manifest in stager.keys()


def test_a_lost_index_costs_heads_not_uploads_and_a_foreign_rewrite_is_sent_again(s3_server, tmp_path,
                                                                                  requests_seen):
    stager, root = Stager(s3_server, tmp_path), shards(tmp_path / "ds", small=5, big=0)
    stager.stage(root)
    stager.s3.delete_object(Bucket=stager.bucket, Key="inputs/ds/index.json")      # e.g. another laptop's first run
    requests_seen.clear()
    again = stager.stage(root)
    assert again.upload["uploaded"] == 0 and requests_seen.count()["HeadObject"] == 5
    assert requests_seen.written() == {"inputs/ds/index.json"}

    # Another writer replaces a file with other bytes of the same size (no sha256 metadata): its ETag no
    # longer matches the index, its metadata cannot vouch for it, so it is sent again.
    victim = "inputs/ds/data/images/1/img_001.jpg"
    stager.s3.put_object(Bucket=stager.bucket, Key=victim, Body=os.urandom(len(stager.get(victim))))
    requests_seen.clear()
    repaired = stager.stage(root)
    assert repaired.upload["uploaded"] == 1 and requests_seen.count()["HeadObject"] == 1
    assert stager.get(victim) == (root / "images" / "1" / "img_001.jpg").read_bytes()


def test_the_index_copy_answers_only_for_the_etag_the_listing_shows(s3_server, tmp_path, requests_seen):
    """index.json's local copy spares its GET only while the LIST shows the ETag it was saved with:
    another writer's index is read (and acted on), a damaged or missing copy costs a GET, never an error."""
    stager, root = Stager(s3_server, tmp_path), shards(tmp_path / "ds", small=5, big=0)
    stager.stage(root)
    [copy] = list(stager.copies.iterdir())
    assert oct(copy.stat().st_mode & 0o777) == "0o600" and stager.bucket not in copy.name

    # Another writer (another laptop) rewrites the index: it now says one file has other content.
    # The ETag the LIST shows is not the copy's, so the index is read, and that file is sent again.
    index = json.loads(stager.get("inputs/ds/index.json"))
    victim = "images/1/img_001.jpg"
    index["files"][victim][1] = "0" * 64
    stager.s3.put_object(Bucket=stager.bucket, Key="inputs/ds/index.json", Body=json.dumps(index).encode())
    requests_seen.clear()
    again = stager.stage(root)
    assert requests_seen.count()["GetObject"] == 1 and again.upload["uploaded"] == 1
    assert requests_seen.written() == {"inputs/ds/data/" + victim, "inputs/ds/index.json"}
    requests_seen.clear()
    assert stager.stage(root).upload["uploaded"] == 0 and requests_seen.count() == Counter({"ListObjectsV2": 1})

    # A damaged copy, then no copy at all: one GET each, nothing sent, the copy made again.
    for damage in (lambda: copy.write_text("{not json"), copy.unlink):
        damage()
        requests_seen.clear()
        assert stager.stage(root).upload["uploaded"] == 0
        assert requests_seen.count() == Counter({"ListObjectsV2": 1, "GetObject": 1})
        assert json.loads(copy.read_text())["etag"] == stager.etags("index.json")["index.json"]

    # The copy of the same bytes under another ETag (a store that changed it) is not trusted either.
    saved = json.loads(copy.read_text())
    copy.write_text(json.dumps(dict(saved, etag='"0123456789abcdef0123456789abcdef"')))
    requests_seen.clear()
    stager.stage(root)
    assert requests_seen.count()["GetObject"] == 1


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
