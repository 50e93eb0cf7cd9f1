"""S3 locations: ``s3://`` URIs, a prefix in the settings' bucket, and the bank's results routing."""

from __future__ import annotations

import os
import re
from typing import Mapping, Optional, TypedDict

from .. import records
from ..errors import TaoBrevError
from .settings import S3Settings, s3_settings

# A bucket as S3-compatible stores accept it: no slash, no whitespace. Stricter
# DNS rules are the store's business (legacy buckets hold '_' and capitals).
_BUCKET = re.compile(r"^[^/\s]+$")


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key/part`` -> ``("bucket", "key/part")``; the key may be empty."""
    if not isinstance(uri, str) or not uri.startswith("s3://"):
        raise TaoBrevError("BAD_ARGUMENT", f"not an s3:// URI: {uri!r}",
                           "Write S3 locations as s3://BUCKET/PREFIX.")
    bucket, _, key = uri[len("s3://"):].partition("/")
    if not bucket or not _BUCKET.match(bucket):
        raise TaoBrevError("BAD_ARGUMENT", f"the S3 URI {uri!r} names no valid bucket",
                           "Write S3 locations as s3://BUCKET/PREFIX.")
    return bucket, key


def s3_uri(uri: Optional[str]) -> str:
    """``uri`` itself once :func:`parse_s3_uri` takes it (BAD_ARGUMENT otherwise, None too: a sidecar's
    results of kind s3 hold their ``destination``)."""
    if uri is None:
        raise TaoBrevError("BAD_ARGUMENT", f"not an s3:// URI: {uri!r}", "Write S3 locations as s3://BUCKET/PREFIX.")
    parse_s3_uri(uri)
    return uri


def location(settings: S3Settings, s3_prefix: str) -> tuple[str, str]:
    """``s3://b/p`` or a bare prefix in ``settings.bucket`` -> (bucket, 'p/' or '')."""
    if s3_prefix.startswith("s3://"):
        bucket, prefix = parse_s3_uri(s3_prefix)
    else:
        if not settings.bucket:
            raise TaoBrevError("MISSING_CREDENTIAL",
                               f"no bucket for the prefix {s3_prefix!r}: S3_BUCKET_NAME is not set",
                               "Pass a full s3://BUCKET/PREFIX, or --bucket, or export S3_BUCKET_NAME.")
        bucket, prefix = settings.bucket, s3_prefix
    prefix = prefix.lstrip("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return bucket, prefix


class ResultsDestination(TypedDict):
    """Where a job's results live by the bank's routing: kind local / s3 / ephemeral, and why."""
    kind: str
    uri: str
    bucket: Optional[str]
    prefix: Optional[str]
    source: Optional[str]
    warning: Optional[str]


def results_destination(job_id: str, env: Optional[Mapping[str, str]] = None,
                        bucket: Optional[str] = None, ephemeral_root: str = "/results") -> ResultsDestination:
    """Where a job's results live, by the bank's routing.

    ``TAO_RESULTS_ROOT`` set -> ``<root>/<job_id>/`` (kind ``local``); else a
    bucket (``bucket`` = --bucket, then ``S3_BUCKET_NAME``) ->
    ``s3://<bucket>/results/<job_id>/`` (kind ``s3``); else kind ``ephemeral``
    with a loud ``warning``: the results live only on the instance disk.
    """
    if not isinstance(job_id, str) or not records.ID_RE.fullmatch(job_id):
        raise TaoBrevError("BAD_JOB_ID", f"invalid job id {job_id!r}")
    env = os.environ if env is None else env
    root = (env.get("TAO_RESULTS_ROOT") or "").strip()
    if root:
        if not root.startswith("/"):
            raise TaoBrevError("BAD_ARGUMENT", f"TAO_RESULTS_ROOT must be an absolute path, got {root!r}",
                               "Unset TAO_RESULTS_ROOT or set it to an absolute directory path.")
        path = f"{root.rstrip('/') or ''}/{job_id}/"
        return {"kind": "local", "uri": path, "bucket": None, "prefix": None,
                "source": "TAO_RESULTS_ROOT", "warning": None}
    settings = s3_settings(env, bucket=bucket)
    if settings.bucket:
        if not _BUCKET.match(settings.bucket):
            raise TaoBrevError("BAD_ARGUMENT", f"invalid bucket name {settings.bucket!r}")
        prefix = f"results/{job_id}/"
        return {"kind": "s3", "uri": f"s3://{settings.bucket}/{prefix}", "bucket": settings.bucket,
                "prefix": prefix, "source": settings.sources["bucket"], "warning": None}
    return {"kind": "ephemeral", "uri": f"{ephemeral_root.rstrip('/')}/{job_id}/", "bucket": None,
            "prefix": None, "source": None,
            "warning": ("WARNING: RESULTS ARE EPHEMERAL. Neither TAO_RESULTS_ROOT nor a bucket "
                        "(--bucket / S3_BUCKET_NAME) is set, so the results stay only on the "
                        "instance disk and are LOST when the instance is deleted. Set "
                        "S3_BUCKET_NAME (or pass --bucket) to keep them.")}

