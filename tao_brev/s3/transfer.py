"""Uploads with boto3's managed transfers (multipart, concurrent), the sha256 in object metadata.

boto3 and s3transfer are imported only when there is something to send.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Optional, Sequence, TypedDict

from .clients import client
from .error_map import map_exception
from .manifest import ManifestEntry, manifest_with_files
from .meter import Progress, stderr
from .objects import METADATA_KEY, existing_objects, stored_sha256
from .settings import S3Settings
from .uris import location


class UploadedFile(ManifestEntry):
    """A manifest entry and what :func:`upload_tree` did with it."""
    action: str   # "uploaded" | "skipped"


class TransferCounts(TypedDict):
    """Where a transfer went, how many files it sent and kept (bytes), how long it took (seconds)."""
    bucket: str
    prefix: str
    uri: str
    uploaded: int
    skipped: int
    bytes_uploaded: int
    bytes_total: int
    seconds: float


class UploadReport(TransferCounts):
    """What :func:`upload_tree` did, and each file it saw."""
    files: list[UploadedFile]


def upload_tree(settings: S3Settings, local_path: str | os.PathLike, s3_prefix: str,
                progress: Optional[Callable[[str], None]] = stderr, excludes: Sequence[str] = (),
                multipart_threshold: int = 8 * 2**20, multipart_chunksize: int = 8 * 2**20,
                max_concurrency: int = 10) -> UploadReport:
    """Upload a file or directory under ``s3_prefix`` (``s3://b/p`` or a prefix in the settings' bucket).

    A file lands at ``<prefix><name>``, a directory's files at
    ``<prefix><relative path>``. Every object carries its sha256 as
    ``x-amz-meta-sha256``; an object already present with the same size and
    sha256 metadata is skipped. Files must not change while this runs.
    Progress goes to ``progress`` (stderr by default; None for silence).
    """
    started = time.monotonic()
    bucket, prefix = location(settings, s3_prefix)
    s3 = client(settings, max_pool_connections=max(32, max_concurrency * 2))
    entries = manifest_with_files(Path(local_path), excludes)
    existing = existing_objects(s3, settings, bucket, prefix)

    # Same key and size: read the stored sha256 to decide.
    def matches(entry: ManifestEntry) -> bool:
        key = prefix + entry["path"]
        if existing.get(key) != entry["size"]:
            return False
        return stored_sha256(s3, settings, bucket, key) == entry["sha256"]

    with ThreadPoolExecutor(max_workers=max_concurrency) as pool:
        skip = list(pool.map(lambda e: matches(e[0]), entries))

    todo = [(entry, full) for (entry, full), skipped in zip(entries, skip) if not skipped]
    transfer_files(s3, settings, bucket, [(prefix + entry["path"], full, entry) for entry, full in todo],
                   progress, multipart_threshold=multipart_threshold,
                   multipart_chunksize=multipart_chunksize, max_concurrency=max_concurrency)

    files: list[UploadedFile] = [{**entry, "action": "skipped" if skipped else "uploaded"}
                                 for (entry, _), skipped in zip(entries, skip)]
    return {"bucket": bucket, "prefix": prefix, "uri": f"s3://{bucket}/{prefix}",
            "uploaded": len(todo), "skipped": len(entries) - len(todo),
            "bytes_uploaded": sum(e["size"] for e, _ in todo),
            "bytes_total": sum(e["size"] for e, _ in entries),
            "seconds": round(time.monotonic() - started, 3), "files": files}


def transfer_files(s3, settings: S3Settings, bucket: str, todo: Sequence[tuple[str, Path, ManifestEntry]],
                   progress: Optional[Callable[[str], None]] = stderr,
                   multipart_threshold: int = 8 * 2**20, multipart_chunksize: int = 8 * 2**20,
                   max_concurrency: int = 10) -> dict[str, str]:
    """Upload ``(key, local file, manifest entry)`` items with boto3's managed transfers.

    Multipart above ``multipart_threshold``, ``max_concurrency`` requests across
    files and parts, the entry's sha256 as ``x-amz-meta-sha256``; progress lines
    (``[upload] files, MiB``) to ``progress``. Raises the mapped storage error of
    the first failure (the manager cancels the rest). Returns key -> ETag as the
    store answered the PutObject / CompleteMultipartUpload (botocore events:
    ``provide-client-params`` and ``after-call`` share the request context), so
    a caller needs no LIST to learn them; a key the store answered without one
    is absent. Nothing to send: no request, and boto3 / s3transfer are not imported.
    """
    meter = Progress(progress, "upload", len(todo), sum(int(e["size"]) for _, _, e in todo))
    if not todo:
        meter.finish()
        return {}
    from boto3.s3.transfer import BaseSubscriber, TransferConfig, create_transfer_manager   # s3transfer's, as boto3 hands it on

    class Meter(BaseSubscriber):
        def on_progress(self, future, bytes_transferred, **kwargs):
            meter.add(nbytes=bytes_transferred)

        def on_done(self, future, **kwargs):
            meter.add(files=1)

    config = TransferConfig(multipart_threshold=multipart_threshold,
                            multipart_chunksize=multipart_chunksize,
                            max_concurrency=max_concurrency, use_threads=True)
    config.preferred_transfer_client = "classic"  # never the CRT client, whatever is installed
    etags: dict[str, str] = {}
    hooks = _etag_hooks(bucket, {key for key, _, _ in todo}, etags)
    for event, handler in hooks:
        s3.meta.events.register(event, handler)
    try:
        with create_transfer_manager(s3, config) as manager:
            futures = [manager.upload(str(full), bucket, key,
                                      extra_args={"Metadata": {METADATA_KEY: entry["sha256"]}},
                                      subscribers=[Meter()])
                       for key, full, entry in todo]
            for (key, _, _), future in zip(todo, futures):
                try:
                    future.result()
                except Exception as exc:  # the manager cancels the rest on the way out
                    raise map_exception(exc, settings, f"upload of s3://{bucket}/{key}")
    finally:
        for event, handler in hooks:
            s3.meta.events.unregister(event, handler)
        meter.finish()
    return etags


def _etag_hooks(bucket: str, wanted: set[str], etags: dict[str, str]) -> list[tuple[str, Callable]]:
    """(botocore event, handler) pairs that put into ``etags`` the ETag the store answered for each
    PutObject / CompleteMultipartUpload of a ``wanted`` key in ``bucket``."""
    def note_key(params, context, **_):
        if params.get("Bucket") == bucket and params.get("Key") in wanted:
            context["tao_brev_key"] = params["Key"]

    def note_etag(parsed, context, **_):
        if context.get("tao_brev_key") and parsed.get("ETag"):
            etags[context["tao_brev_key"]] = parsed["ETag"]

    return [(f"{event}.s3.{op}", handler) for op in ("PutObject", "CompleteMultipartUpload")
            for event, handler in (("provide-client-params", note_key), ("after-call", note_etag))]
