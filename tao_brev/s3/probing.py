"""The S3 probe: write, read back and delete one tiny object; a named error for each failure."""

from __future__ import annotations

import uuid

from .clients import client
from .error_map import error, map_exception
from .settings import S3Settings
from .uris import location


def probe(settings: S3Settings, prefix: str = "") -> None:
    """Write, read back and delete one tiny object under ``prefix``; raise a named error.

    ``prefix`` is ``s3://bucket/p`` or a prefix in ``settings.bucket``.
    Errors: MISSING_CREDENTIAL, S3_NO_SUCH_BUCKET, S3_AUTH_FAILED,
    S3_ACCESS_DENIED, S3_UNREACHABLE, S3_REQUEST_FAILED.
    """
    bucket, key_prefix = location(settings, prefix)
    s3 = client(settings, max_attempts=2, connect_timeout=5, read_timeout=20)
    key = f"{key_prefix}.tao-brev-probe-{uuid.uuid4().hex[:12]}"
    body = b"tao-brev probe\n"
    where = f"s3://{bucket}/{key}"
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    except Exception as exc:
        raise map_exception(exc, settings, f"probe write {where}")
    try:
        got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as exc:
        _quiet_delete(s3, bucket, key)
        raise map_exception(exc, settings, f"probe read {where}")
    try:
        s3.delete_object(Bucket=bucket, Key=key)
    except Exception as exc:
        raise map_exception(exc, settings, f"probe delete {where}")
    if got != body:
        raise error("S3_REQUEST_FAILED", f"probe read {where}: the store returned different bytes "
                    f"({len(got)} instead of {len(body)})", settings,
                    "The store or a proxy alters objects; check AWS_ENDPOINT_URL.")


def _quiet_delete(s3, bucket: str, key: str) -> None:
    """Best-effort cleanup while another error is already on its way out."""
    try:
        s3.delete_object(Bucket=bucket, Key=key)
    except Exception:
        pass
