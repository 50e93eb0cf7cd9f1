"""tao_brev/s3/settings.py: the AWS names first, the legacy TAO names mapped onto them, no value in repr."""

from __future__ import annotations

from tao_brev import s3 as storage
from tao_brev.s3 import clients
from tests.s3fixtures import raises


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
