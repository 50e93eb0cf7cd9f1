"""tao_brev/s3/probing.py: write, read back, delete; a named error for a missing bucket, an unreachable endpoint, bad keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from tao_brev import s3 as storage
from tests.s3fixtures import SECRETS, raises, s3  # noqa: F401  (fixtures)
from tests.s3server import MotoS3Server, _free_port


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
