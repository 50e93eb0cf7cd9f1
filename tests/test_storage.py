"""tao_brev.storage end to end against a real S3 HTTP server (moto, subprocess).

Invariant checked in every failure case: no credential value appears in an
error's message, fix, details or JSON, nor in progress output.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import pytest

from tao_brev import s3 as storage
from tao_brev.errors import CODES, TaoBrevError
from tao_brev.s3 import clients, error_map
from tests.s3server import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY, MotoS3Server, _free_port

MiB = 2**20
SECRETS = [FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY]


def assert_clean(err: TaoBrevError, secrets=SECRETS) -> None:
    """The error is registered and mentions no credential value anywhere."""
    assert err.code in CODES
    texts = [str(err), repr(err), err.message, err.fix, json.dumps(err.to_json()),
             json.dumps(err.details, default=str)]
    for secret in secrets:
        for text in texts:
            assert secret not in text, f"credential leaked into {err.code}: {text}"


def raises(code: str, fn, *args, secrets=SECRETS, **kwargs) -> TaoBrevError:
    with pytest.raises(TaoBrevError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, info.value.to_json()
    assert_clean(info.value, secrets)
    return info.value


# ------------------------------------------------------------------ helpers
def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Nested files, one over the 5 MiB multipart threshold, an empty file, spaces."""
    root = tmp_path / "data"
    write(root / "spec.yaml", b"train:\n  epochs: 1\n")
    write(root / "images" / "a" / "0001.jpg", os.urandom(3000))
    write(root / "images" / "b" / "deep" / "0002.jpg", os.urandom(70_000))
    write(root / "big.bin", os.urandom(11 * MiB))
    write(root / "empty.txt", b"")
    write(root / "with space" / "my file 1.txt", b"hello spaces\n")
    write(root / ".git" / "HEAD", b"ref: refs/heads/main\n")
    write(root / "runs" / "x.ckpt", b"checkpoint")
    return root


SMALL_PARTS = dict(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)


@pytest.fixture
def s3(s3_server):
    """(settings, bucket) with a fresh bucket."""
    bucket = s3_server["create_bucket"]()
    return storage.s3_settings(s3_server["env"]), bucket


# ------------------------------------------------------------------ settings
def test_aws_names_and_legacy_mapping():
    legacy = {"ACCESS_KEY": "AKIALEGACY", "SECRET_KEY": "legacy-secret-value",
              "S3_ENDPOINT_URL": "http://minio:9000", "CLOUD_REGION": "eu-west-1",
              "S3_BUCKET_NAME": "tao-data"}
    s = storage.s3_settings(legacy)
    assert (s.access_key_id, s.secret_access_key, s.endpoint_url, s.region, s.bucket) == (
        "AKIALEGACY", "legacy-secret-value", "http://minio:9000", "eu-west-1", "tao-data")
    assert s.sources["access_key_id"] == "ACCESS_KEY" and s.missing() == []

    both = dict(legacy, AWS_ACCESS_KEY_ID="AKIAAWSNAME", AWS_SECRET_ACCESS_KEY="aws-secret-value",
                AWS_ENDPOINT_URL="http://s3.local:9000", AWS_DEFAULT_REGION="us-west-2")
    s = storage.s3_settings(both, bucket="from-flag")
    assert (s.access_key_id, s.secret_access_key, s.endpoint_url, s.region, s.bucket) == (
        "AKIAAWSNAME", "aws-secret-value", "http://s3.local:9000", "us-west-2", "from-flag")
    assert s.sources["bucket"] == "--bucket"

    env = s.container_env()
    assert env["AWS_ACCESS_KEY_ID"] == "AKIAAWSNAME" and env["AWS_SECRET_ACCESS_KEY"] == "aws-secret-value"
    assert env["AWS_ENDPOINT_URL"] == "http://s3.local:9000" and env["AWS_DEFAULT_REGION"] == "us-west-2"
    assert env["AWS_REQUEST_CHECKSUM_CALCULATION"] == "when_required"
    assert "ACCESS_KEY" not in env and s.container_env(legacy=True)["SECRET_KEY"] == "aws-secret-value"
    assert "AWS_REQUEST_CHECKSUM_CALCULATION" not in storage.s3_settings(
        {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}).container_env()

    for text in (repr(s), str(s)):
        assert "aws-secret-value" not in text and "AKIAAWSNAME" not in text


def test_missing_and_blank_values():
    s = storage.s3_settings({"AWS_ACCESS_KEY_ID": "  ", "SECRET_KEY": "legacy-secret-77\n"})
    assert s.access_key_id is None and s.secret_access_key == "legacy-secret-77"
    assert s.missing() == ["AWS_ACCESS_KEY_ID"]
    assert s.missing(need_bucket=True) == ["AWS_ACCESS_KEY_ID", "S3_BUCKET_NAME"]
    err = raises("MISSING_CREDENTIAL", clients.client, s, secrets=["legacy-secret-77"])
    assert "AWS_ACCESS_KEY_ID" in err.message


def test_client_config_and_env_isolation(monkeypatch):
    s = storage.s3_settings({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b",
                             "AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    c = storage.client(s)
    assert c.meta.endpoint_url == "http://127.0.0.1:9"
    assert c.meta.config.s3["addressing_style"] == "path"
    assert c.meta.config.request_checksum_calculation == "when_required"
    assert c.meta.config.response_checksum_validation == "when_required"
    assert c.meta.config.retries["mode"] == "standard"
    # Without an endpoint in the settings, one in os.environ is not picked up.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://bogus.invalid:1")
    c = storage.client(storage.s3_settings({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}))
    assert "amazonaws.com" in c.meta.endpoint_url


def test_prefetch_builds_once_and_leaves_every_error_to_the_caller(monkeypatch):
    built = []
    real = clients._new_client
    monkeypatch.setattr(clients, "_new_client", lambda *a: built.append(a) or real(*a))
    # settings no other test uses (the region), so this build is not one of the process's cached clients
    s = storage.s3_settings({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b",
                             "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_DEFAULT_REGION": "ap-south-2"})
    assert clients.prefetch_client(s) is None               # returns at once, no request
    first = storage.client(s)                               # the prefetched one (or waits for it)
    assert storage.client(s) is first and len(built) == 1 and first.meta.region_name == "ap-south-2"
    # A failing build is only raised by the caller's own client() call, mapped and scrubbed.
    bad = storage.s3_settings({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "secret-in-a-bad-url-8",
                               "AWS_ENDPOINT_URL": "http://[::1"})
    assert clients.prefetch_client(bad) is None
    raises("BAD_ARGUMENT", storage.client, bad, secrets=["secret-in-a-bad-url-8"])
    missing = storage.s3_settings({"AWS_SECRET_ACCESS_KEY": "b"})
    assert clients.prefetch_client(missing) is None
    raises("MISSING_CREDENTIAL", storage.client, missing)


def _types_in(value, found=None) -> set:
    found = set() if found is None else found
    found.add(type(value))
    for item in (value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()):
        _types_in(item, found)
    return found


def test_the_data_files_load_as_plain_dicts_with_botocores_content_and_key_order():
    """Every data file an S3 client reads, through storage's loader and through botocore's own
    (OrderedDict): the same content in the same key order, and no OrderedDict left."""
    import collections

    import botocore.loaders
    import botocore.session

    session = botocore.session.Session()
    ours = clients._data_loader(session)
    theirs = botocore.loaders.create_loader(session.get_config_variable("data_path"))
    loaded = []
    real_load = ours.file_loader.load_file
    ours.file_loader.load_file = lambda path: loaded.append(path) or real_load(path)
    session.register_component("data_loader", ours)
    session.create_client("s3", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b",
                          endpoint_url="http://127.0.0.1:9")
    loaded = list(dict.fromkeys(loaded))   # what the client read, each once (the loop below reads too)
    names = {os.path.basename(path) for path in loaded}
    assert {"endpoints", "partitions", "service-2", "endpoint-rule-set-1"} <= names, names
    for path in loaded:
        plain, ordered = real_load(path), theirs.file_loader.load_file(path)
        if ordered is None:
            assert plain is None
            continue
        assert json.dumps(plain) == json.dumps(ordered), path        # same keys, same order, same values
        assert collections.OrderedDict not in _types_in(plain) and collections.OrderedDict in _types_in(ordered)


def test_botocore_boto3_and_s3transfer_use_nothing_only_an_ordereddict_has():
    """Why plain dicts may stand in for the OrderedDicts botocore's loader makes: the installed
    (pinned) botocore, boto3 and s3transfer never call move_to_end / popitem, nor test for the type."""
    import re

    import boto3
    import botocore
    import s3transfer

    used = re.compile(r"move_to_end|popitem|isinstance\([^)]*OrderedDict|type\([^)]*\) (?:is|==) OrderedDict")
    hits = []
    for package in (botocore, boto3, s3transfer):
        for path in Path(package.__file__).parent.rglob("*.py"):
            hits += [f"{path}: {m.group(0)}" for m in used.finditer(path.read_text(encoding="utf-8"))]
    assert hits == []


class _SilentService:
    """A TCP port that counts the connections made to it and closes each at once: an instance
    metadata service that never answers (as off EC2, where the SDK waits for its timeout)."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.connections = 0
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


_STAGE_LIKE_A_SCRIPT = """
import sys
from tao_brev import s3 as storage
settings = storage.s3_settings()
s3 = storage.client(settings)
print(len(storage.list_objects(s3, settings, sys.argv[1], "")))
"""
_PLAIN_BOTOCORE = """
import os, botocore.session
botocore.session.Session().create_client("s3", region_name="us-east-1",
    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
"""


def test_a_fresh_process_never_asks_the_instance_metadata_service(s3, s3_server):
    """``defaults_mode = auto`` makes botocore ask instance metadata for the region even when the
    client names one; the control shows plain botocore connecting to the stand-in service with this
    environment, and the bundle's client (credentials and region given) not."""
    import subprocess
    import sys

    settings, bucket = s3
    imds = _SilentService()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(s3_server["env"], AWS_DEFAULTS_MODE="auto", AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.url,
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
               PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    ours = subprocess.run([sys.executable, "-c", _STAGE_LIKE_A_SCRIPT, bucket], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert ours.returncode == 0 and ours.stdout == "0\n", ours.stderr
    assert imds.connections == 0
    control = subprocess.run([sys.executable, "-c", _PLAIN_BOTOCORE], env=env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=120)
    assert control.returncode == 0, control.stderr
    assert imds.connections >= 1
    for text in (ours.stdout, ours.stderr):
        assert not [secret for secret in SECRETS if secret in text]


def test_parse_s3_uri():
    assert storage.parse_s3_uri("s3://b/k/x y.txt") == ("b", "k/x y.txt")
    assert storage.parse_s3_uri("s3://b") == ("b", "")
    assert storage.parse_s3_uri("s3://b/") == ("b", "")
    for bad in ("http://b/k", "s3:///k", "b/k", "s3://bad bucket/k", ""):
        raises("BAD_ARGUMENT", storage.parse_s3_uri, bad)


# ------------------------------------------------------------------ routing
def test_results_routing():
    job = "visual_changenet-train-1a2b3c"
    r = storage.results_destination(job, {"TAO_RESULTS_ROOT": "/mnt/results/", "S3_BUCKET_NAME": "b"})
    assert (r["kind"], r["uri"], r["warning"]) == ("local", f"/mnt/results/{job}/", None)

    r = storage.results_destination(job, {"S3_BUCKET_NAME": "tao-bucket"})
    assert (r["kind"], r["uri"], r["bucket"], r["prefix"]) == (
        "s3", f"s3://tao-bucket/results/{job}/", "tao-bucket", f"results/{job}/")
    r = storage.results_destination(job, {"S3_BUCKET_NAME": "env-bucket"}, bucket="flag-bucket")
    assert r["uri"] == f"s3://flag-bucket/results/{job}/" and r["source"] == "--bucket"

    r = storage.results_destination(job, {})
    assert r["kind"] == "ephemeral" and "LOST" in r["warning"] and "S3_BUCKET_NAME" in r["warning"]

    raises("BAD_JOB_ID", storage.results_destination, "../etc", {})
    raises("BAD_ARGUMENT", storage.results_destination, job, {"TAO_RESULTS_ROOT": "rel/dir"})


# ------------------------------------------------------------------ manifests
def test_manifest_and_excludes(tree: Path):
    m = storage.local_manifest(tree)
    paths = [e["path"] for e in m]
    assert paths == sorted(paths) and "with space/my file 1.txt" in paths and ".git/HEAD" in paths
    empty = next(e for e in m if e["path"] == "empty.txt")
    assert empty == {"path": "empty.txt", "size": 0, "sha256": hashlib.sha256(b"").hexdigest()}
    big = next(e for e in m if e["path"] == "big.bin")
    assert big["sha256"] == hashlib.sha256((tree / "big.bin").read_bytes()).hexdigest()

    kept = [e["path"] for e in storage.local_manifest(tree, excludes=[".git", "*.ckpt", "images/b/*"])]
    assert ".git/HEAD" not in kept and "runs/x.ckpt" not in kept
    assert "images/b/deep/0002.jpg" not in kept and "images/a/0001.jpg" in kept

    storage.check_manifest(m)
    good = {"path": "a", "size": 1, "sha256": "0" * 64}
    for bad in ("x", [dict(good, path="../a")], [dict(good, path="/a")], [dict(good, path="a//b")],
                [dict(good, size=-1)], [dict(good, sha256="zz")], [good, good], [{"path": "a"}]):
        raises("BAD_ARGUMENT", storage.check_manifest, bad)

    single = storage.local_manifest(tree / "spec.yaml")
    assert [e["path"] for e in single] == ["spec.yaml"]
    raises("BAD_ARGUMENT", storage.local_manifest, tree / "nope")


# ------------------------------------------------------------------ end to end
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
    real_client = clients.client

    def spying_client(*args, **kwargs):
        c = real_client(*args, **kwargs)
        c.meta.events.register("before-send.s3", lambda request, **_: seen.append(dict(request.headers)))
        return c

    monkeypatch.setattr(clients, "client", spying_client)
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


# ------------------------------------------------------------------ probe
def test_probe_ok_and_cleans_up(s3, s3_server):
    settings, bucket = s3
    storage.probe(settings, f"s3://{bucket}/results/")
    listed = s3_server["server"].boto_client().list_objects_v2(Bucket=bucket)
    assert listed.get("KeyCount", 0) == 0


def test_probe_missing_bucket(s3_server):
    settings = storage.s3_settings(s3_server["env"])
    err = raises("S3_NO_SUCH_BUCKET", storage.probe, settings, "s3://tao-no-such-bucket/x/")
    assert "NoSuchBucket" in err.message and err.exit_code == 1


def test_probe_endpoint_unreachable(s3_server):
    env = dict(s3_server["env"], AWS_ENDPOINT_URL=f"http://127.0.0.1:{_free_port()}")
    err = raises("S3_UNREACHABLE", storage.probe, storage.s3_settings(env), "s3://b/x/")
    assert err.exit_code == 3


@pytest.fixture(scope="module")
def iam_server():
    """A private moto server with IAM authentication on (every request's signature checked)."""
    with MotoS3Server() as server:
        bucket = server.create_bucket()
        allowed = server.iam_user(allow_s3=True)
        denied = server.iam_user(allow_s3=False)
        server.set_iam_auth(True)
        yield {"server": server, "bucket": bucket, "allowed": allowed, "denied": denied}


def test_probe_credentials_checked_for_real(iam_server):
    server, bucket = iam_server["server"], iam_server["bucket"]
    key_id, secret = iam_server["allowed"]
    every_secret = SECRETS + [key_id, secret, *iam_server["denied"]]
    where = f"s3://{bucket}/probe/"

    storage.probe(storage.s3_settings(dict(server.env, AWS_ACCESS_KEY_ID=key_id,
                                           AWS_SECRET_ACCESS_KEY=secret)), where)

    err = raises("S3_AUTH_FAILED", storage.probe, storage.s3_settings(server.env), where,
                 secrets=every_secret)
    assert "InvalidAccessKeyId" in err.message and err.exit_code == 3

    wrong_secret = dict(server.env, AWS_ACCESS_KEY_ID=key_id)  # right key id, wrong secret
    err = raises("S3_AUTH_FAILED", storage.probe, storage.s3_settings(wrong_secret), where,
                 secrets=every_secret)
    assert "SignatureDoesNotMatch" in err.message

    no_rights = dict(server.env, AWS_ACCESS_KEY_ID=iam_server["denied"][0],
                     AWS_SECRET_ACCESS_KEY=iam_server["denied"][1])
    err = raises("S3_ACCESS_DENIED", storage.probe, storage.s3_settings(no_rights), where,
                 secrets=every_secret)
    assert "AccessDenied" in err.message

    # Wrong credentials fail an upload the same way, with no value in the message.
    raises("S3_AUTH_FAILED", storage.upload_tree, storage.s3_settings(wrong_secret),
           Path(__file__), where, progress=None, secrets=every_secret)


def test_scrub_removes_values_that_a_store_echoes():
    s = storage.s3_settings({"AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID,
                             "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
                             "AWS_ENDPOINT_URL": "https://user:pw@s3.example.com"})
    text = error_map.scrub(f"key {FAKE_ACCESS_KEY_ID} secret {FAKE_SECRET_ACCESS_KEY} at "
                          "https://user:pw@s3.example.com/b", s)
    assert FAKE_ACCESS_KEY_ID not in text and FAKE_SECRET_ACCESS_KEY not in text and "pw@" not in text
    assert "pw@" not in repr(s)
