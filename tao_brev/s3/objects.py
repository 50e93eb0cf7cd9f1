"""Single S3 requests on objects: LIST, small GET / PUT, HEAD, DeleteObjects, a streamed sha256.

Every failure is mapped by :func:`error_map.map_exception` (scrubbed); a missing
object answers None where the caller asks "is it there".
"""

from __future__ import annotations

import hashlib
from typing import Optional, Sequence, TypedDict

from .clients import client
from .error_map import NOT_FOUND_CODES, error, map_exception
from .manifest import CHUNK, HEX64
from .settings import S3Settings
from .uris import parse_s3_uri

METADATA_KEY = "sha256"       # stored as x-amz-meta-sha256


class Listed(TypedDict):
    """An object of a LIST: its size and ETag ("" when the store gave none)."""
    size: int
    etag: str


class ObjectHead(TypedDict, total=False):
    """A HeadObject answer (botocore's): the keys the bundle reads."""
    Metadata: dict[str, str]
    ContentLength: int
    ETag: str


def list_objects(s3, settings: S3Settings, bucket: str, prefix: str) -> dict[str, Listed]:
    """key -> ``{"size", "etag"}`` of every object under the prefix (one paginated ListObjectsV2)."""
    found: dict[str, Listed] = {}
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []) or []:
                found[obj["Key"]] = {"size": obj["Size"], "etag": obj.get("ETag", "")}
    except Exception as exc:
        raise map_exception(exc, settings, f"listing s3://{bucket}/{prefix}")
    return found


def existing_objects(s3, settings: S3Settings, bucket: str, prefix: str) -> dict[str, int]:
    """key -> size of every object under the prefix (one paginated LIST)."""
    return {key: obj["size"] for key, obj in list_objects(s3, settings, bucket, prefix).items()}


def put_bytes(s3, settings: S3Settings, bucket: str, key: str, body: bytes, content_type: str) -> str:
    """One small object in one PutObject; its ETag as the store answered ("" when it sent none)."""
    try:
        return s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type).get("ETag") or ""
    except Exception as exc:
        raise map_exception(exc, settings, f"writing s3://{bucket}/{key}")


def get_bytes(s3, settings: S3Settings, bucket: str, key: str) -> Optional[bytes]:
    """A small object's content, or None when it does not exist."""
    found = get_object(s3, settings, bucket, key)
    return None if found is None else found[0]


def get_object(s3, settings: S3Settings, bucket: str, key: str) -> Optional[tuple[bytes, str]]:
    """A small object's (content, ETag as the store answered, "" when none), or None when it does not exist."""
    import botocore.exceptions as bce

    try:
        answer = s3.get_object(Bucket=bucket, Key=key)
        return answer["Body"].read(), answer.get("ETag") or ""
    except bce.ClientError as exc:
        if str(exc.response.get("Error", {}).get("Code")) in NOT_FOUND_CODES:
            return None
        raise map_exception(exc, settings, f"reading s3://{bucket}/{key}")
    except Exception as exc:
        raise map_exception(exc, settings, f"reading s3://{bucket}/{key}")


def delete_keys(s3, settings: S3Settings, bucket: str, keys: Sequence[str]) -> None:
    """Delete objects, up to 1000 per DeleteObjects request; any key that fails raises."""
    for i in range(0, len(keys), 1000):
        batch = keys[i:i + 1000]
        try:
            answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch],
                                                              "Quiet": True})
        except Exception as exc:
            raise map_exception(exc, settings, f"deleting {len(batch)} objects in s3://{bucket}")
        errors = answer.get("Errors") or []
        if errors:
            first = errors[0]
            raise error("S3_REQUEST_FAILED", f"deleting s3://{bucket}/{first.get('Key')}: "
                        f"{first.get('Code')}: {first.get('Message', '')}", settings)


def head(s3, settings: S3Settings, bucket: str, key: str) -> Optional[ObjectHead]:
    """head_object, or None when the object does not exist."""
    import botocore.exceptions as bce

    try:
        return s3.head_object(Bucket=bucket, Key=key)
    except bce.ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code"))
        if code in NOT_FOUND_CODES:
            return None
        raise map_exception(exc, settings, f"reading s3://{bucket}/{key}")
    except Exception as exc:
        raise map_exception(exc, settings, f"reading s3://{bucket}/{key}")


def stored_sha256(s3, settings: S3Settings, bucket: str, key: str) -> Optional[str]:
    found = head(s3, settings, bucket, key)
    if found is None:
        return None
    value = (found.get("Metadata") or {}).get(METADATA_KEY, "").lower()
    return value if HEX64.match(value) else None


def download_sha256(s3, settings: S3Settings, bucket: str, key: str) -> str:
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        digest = hashlib.sha256()
        for block in body.iter_chunks(CHUNK):
            digest.update(block)
        return digest.hexdigest()
    except Exception as exc:
        raise map_exception(exc, settings, f"downloading s3://{bucket}/{key}")


def list_sizes(settings: S3Settings, uri: str) -> dict[str, int]:
    """``{relative key: size}`` of every file object under the ``s3://`` prefix ``uri`` (one paginated LIST)."""
    bucket, prefix = parse_s3_uri(uri)
    prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    s3 = client(settings)
    sizes: dict[str, int] = {}
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []) or []:
                rel = obj["Key"][len(prefix):]
                if rel and not rel.endswith("/"):   # "folder/" markers are no files; sync skips them
                    sizes[rel] = obj["Size"]
    except Exception as exc:
        raise map_exception(exc, settings, f"listing {uri}") from None
    return sizes

