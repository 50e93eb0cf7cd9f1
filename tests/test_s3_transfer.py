"""tao_brev/s3/transfer.py and verify.py against a real S3 HTTP server (moto): uploads, re-uploads, verification, damage."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from tao_brev import s3 as storage
from tests.s3fixtures import SECRETS, MiB, SMALL_PARTS, raises, s3, tree, write  # noqa: F401  (fixtures)


def test_upload_reupload_verify_and_damage(s3, s3_server, tree: Path, capsys):
    settings, bucket = s3
    prefix = f"s3://{bucket}/datasets/run1"
    raw = s3_server["server"].boto_client()

    first = storage.upload_tree(settings, tree, prefix, excludes=[".git"], **SMALL_PARTS)
    manifest = storage.local_manifest(tree, excludes=[".git"])
    assert first["uploaded"] == len(manifest) == 7 and first["skipped"] == 0
    assert first["bytes_uploaded"] == sum(e["size"] for e in manifest)
    assert [{k: f[k] for k in ("path", "size", "sha256")} for f in first["files"]] == manifest

    out = capsys.readouterr()
    assert out.out == "" and "[upload] 7/7 files" in out.err
    assert all(s not in out.err for s in SECRETS)

    head = raw.head_object(Bucket=bucket, Key="datasets/run1/big.bin")
    assert head["ETag"].strip('"').endswith("-3")  # 11 MiB in 5 MiB parts: multipart
    assert head["Metadata"]["sha256"] == next(e["sha256"] for e in manifest if e["path"] == "big.bin")
    assert raw.head_object(Bucket=bucket, Key="datasets/run1/empty.txt")["ContentLength"] == 0
    assert raw.get_object(Bucket=bucket, Key="datasets/run1/with space/my file 1.txt")["Body"].read() \
        == b"hello spaces\n"

    again = storage.upload_tree(settings, tree, prefix, excludes=[".git"], progress=None, **SMALL_PARTS)
    assert (again["uploaded"], again["skipped"], again["bytes_uploaded"]) == (0, 7, 0)

    report = storage.verify_against_manifest(settings, prefix, manifest)
    assert report["verified"] and report["files"] == 7 and report["hashed_by_download"] == 0
    assert report["bytes"] == sum(e["size"] for e in manifest)
    storage.require_verified(report)

    # A changed local file is uploaded again, alone.
    write(tree / "spec.yaml", b"train:\n  epochs: 2\n")
    changed = storage.upload_tree(settings, tree, prefix, excludes=[".git"], progress=None, **SMALL_PARTS)
    assert (changed["uploaded"], changed["skipped"]) == (1, 6)
    manifest = storage.local_manifest(tree, excludes=[".git"])

    # Damage: one deleted, one rewritten by another tool (same size, no sha256 metadata),
    # one truncated, one rewritten with metadata that lies.
    raw.delete_object(Bucket=bucket, Key="datasets/run1/images/a/0001.jpg")
    raw.put_object(Bucket=bucket, Key="datasets/run1/with space/my file 1.txt", Body=b"HELLO SPACES\n")
    raw.put_object(Bucket=bucket, Key="datasets/run1/spec.yaml", Body=b"train:\n")
    lying = next(e for e in manifest if e["path"] == "images/b/deep/0002.jpg")
    raw.put_object(Bucket=bucket, Key="datasets/run1/images/b/deep/0002.jpg",
                   Body=os.urandom(lying["size"]), Metadata={"sha256": lying["sha256"]})

    report = storage.verify_against_manifest(settings, prefix, manifest)
    assert not report["verified"]
    assert report["missing"] == ["images/a/0001.jpg"]
    by_path = {m["path"]: m for m in report["mismatched"]}
    assert set(by_path) == {"with space/my file 1.txt", "spec.yaml"}
    assert by_path["with space/my file 1.txt"]["reason"] == "sha256"
    assert by_path["with space/my file 1.txt"]["from"] == "download"
    assert by_path["spec.yaml"]["reason"] == "size"
    err = raises("S3_VERIFY_FAILED", storage.require_verified, report)
    assert "1 missing, 2 mismatched" in err.message

    deep = storage.verify_against_manifest(settings, prefix, manifest, deep=True)
    assert "images/b/deep/0002.jpg" in {m["path"] for m in deep["mismatched"]}

    # The upload repairs all of it (the lying object differs in neither size nor metadata:
    # only a deep verify catches it, as documented).
    repaired = storage.upload_tree(settings, tree, prefix, excludes=[".git"], progress=None, **SMALL_PARTS)
    assert repaired["uploaded"] == 3
    assert storage.verify_against_manifest(settings, prefix, manifest)["verified"]


def test_no_default_checksums_reach_the_store(s3, tmp_path: Path, monkeypatch):
    """PutObject and UploadPart carry no x-amz-checksum-* / aws-chunked (boto3 >= 1.36 default)."""
    settings, bucket = s3
    seen = []
    real_client = storage.client

    def spying_client(*args, **kwargs):
        c = real_client(*args, **kwargs)
        c.meta.events.register("before-send.s3", lambda request, **_: seen.append(dict(request.headers)))
        return c

    monkeypatch.setattr("tao_brev.s3.transfer.client", spying_client)   # the client upload_tree uses
    write(tmp_path / "d" / "six.bin", os.urandom(6 * MiB))
    write(tmp_path / "d" / "small.txt", b"x" * 100)
    storage.upload_tree(settings, tmp_path / "d", f"s3://{bucket}/c/", progress=None, **SMALL_PARTS)
    uploads = [h for h in seen if "Content-Length" in h and int(h["Content-Length"]) >= 100]
    assert len(uploads) >= 3  # one PutObject, two UploadPart
    for headers in seen:
        names = {k.lower(): str(v) for k, v in headers.items()}
        assert not [k for k in names if k.startswith("x-amz-checksum") or k == "x-amz-sdk-checksum-algorithm"]
        assert "aws-chunked" not in names.get("content-encoding", "")


def test_single_file_and_bare_prefix(s3, tmp_path: Path):
    settings, bucket = s3
    f = write(tmp_path / "model 1.pth", os.urandom(1234))
    with_bucket = dataclasses.replace(settings, bucket=bucket)
    r = storage.upload_tree(with_bucket, f, "models/", progress=None)
    assert r["uri"] == f"s3://{bucket}/models/" and r["uploaded"] == 1
    assert storage.verify_against_manifest(settings, f"s3://{bucket}/models",
                                           storage.local_manifest(f))["verified"]
    raises("MISSING_CREDENTIAL", storage.upload_tree, settings, f, "models/", progress=None)


def test_upload_to_missing_bucket(s3_server, tree: Path):
    settings = storage.s3_settings(s3_server["env"])
    raises("S3_NO_SUCH_BUCKET", storage.upload_tree, settings, tree, "s3://no-such-bucket-x/p",
           progress=None)
    raises("S3_NO_SUCH_BUCKET", storage.verify_against_manifest, settings, "s3://no-such-bucket-x/p",
           [{"path": "a", "size": 1, "sha256": "0" * 64}])
