"""tao_brev/s3/staging.py and index.py against a real S3 server (moto): input names, versions, and what
a re-stage sends over the wire (only the changed files; nothing when nothing changed)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from tao_brev import s3 as staging, s3 as storage
from tao_brev.errors import TaoBrevError
from tao_brev.s3 import hash_cache
from tests.s3world import SECRETS

MiB = 2**20


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


WRITES = {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload", "CopyObject",
          "DeleteObjects", "DeleteObject"}


class Requests:
    """Every S3 call the code under test makes, as (operation, key): botocore's
    ``provide-client-params`` event fires once per API call on each client ``sync_input`` is given."""

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
    seen, real, hooked = Requests(), storage.client, []

    def record(params, model, **_):
        seen.calls.append((model.name, params.get("Key")))

    def counting(*args, **kwargs):
        s3 = real(*args, **kwargs)            # storage keeps clients per process: hook each one once
        if not any(s3 is other for other in hooked):
            s3.meta.events.register("provide-client-params.s3", record)
            hooked.append(s3)
        return s3
    monkeypatch.setattr("tao_brev.s3.staging.client", counting)   # the client sync_input uses
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

    real = storage.transfer_files

    def interrupted(s3, settings, bucket, todo, *args, **kwargs):
        real(s3, settings, bucket, todo[:1], *args, **kwargs)     # one file made it, then the link died
        raise KeyboardInterrupt
    monkeypatch.setattr("tao_brev.s3.staging.transfer_files", interrupted)
    with pytest.raises(KeyboardInterrupt):
        stager.stage(root)
    new_manifest = "manifests/" + staging.manifest_digest(storage.local_manifest(root)) + ".sha256"
    keys = stager.keys()
    assert new_manifest not in keys and before.manifest_key[len("inputs/ds/"):] in keys
    assert stager.get("inputs/ds/index.json") == index_before          # still describes what it did
    assert sum(1 for k in keys if k.startswith("data/images/0/new_")) == 1

    monkeypatch.setattr("tao_brev.s3.staging.transfer_files", real)
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
