"""Verification from here: every manifest entry present under the prefix, same size, same sha256."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Mapping, Optional, Sequence

from ..errors import TaoBrevError
from ..secrets.file_names import resolve_keys
from .clients import client
from .manifest import HEX64, check_manifest
from .meter import Progress, stderr
from .objects import METADATA_KEY, download_sha256, existing_objects, head
from .settings import S3Settings
from .uris import location


def verify_against_manifest(settings: S3Settings, s3_prefix: str, manifest: Sequence[Mapping],
                            deep: bool = False, max_concurrency: int = 10,
                            progress: Optional[Callable[[str], None]] = stderr) -> dict:
    """Check every manifest entry under ``s3_prefix``: present, same size, same sha256.

    The sha256 comes from the object's ``x-amz-meta-sha256`` when it holds a
    valid digest; otherwise (objects written by other tools) the object is
    downloaded and hashed, streaming. ``deep=True`` always downloads.
    """
    check_manifest(manifest)
    bucket, prefix = location(settings, s3_prefix)
    s3 = client(settings, max_pool_connections=max(32, max_concurrency * 2))
    meter = Progress(progress, "verify", len(manifest), sum(int(e["size"]) for e in manifest))

    listed = existing_objects(s3, settings, bucket, prefix)  # also: NoSuchBucket, auth
    digested = resolve_keys((e["path"] for e in manifest), listed, prefix)   # names kept as digests

    def check(entry: Mapping) -> tuple[str, Optional[dict], bool]:
        try:
            return _check_entry(s3, settings, bucket, digested.get(entry["path"]) or prefix + entry["path"],
                                entry, listed, deep)
        finally:
            meter.add(nbytes=int(entry["size"]), files=1)

    with ThreadPoolExecutor(max_workers=max_concurrency) as pool:
        outcomes = list(pool.map(check, manifest))
    meter.finish()
    missing = [e["path"] for e, (state, _, _) in zip(manifest, outcomes) if state == "missing"]
    mismatched = [detail for state, detail, _ in outcomes if state == "mismatched"]
    return {"verified": not missing and not mismatched, "uri": f"s3://{bucket}/{prefix}",
            "files": len(manifest), "bytes": sum(int(e["size"]) for e in manifest),
            "ok": sum(1 for state, _, _ in outcomes if state == "ok"),
            "hashed_by_download": sum(1 for _, _, d in outcomes if d),
            "missing": missing, "mismatched": mismatched}


def _check_entry(s3, settings: S3Settings, bucket: str, key: str, entry: Mapping, listed: dict[str, int],
                 deep: bool) -> tuple[str, Optional[dict], bool]:
    """One entry against its object ``key``: ("ok" | "missing" | "mismatched", the mismatch, downloaded)."""
    if key not in listed:
        return "missing", None, False
    if listed[key] != int(entry["size"]):
        return "mismatched", {"path": entry["path"], "reason": "size",
                              "expected": int(entry["size"]), "actual": listed[key]}, False
    found = head(s3, settings, bucket, key)
    if found is None:  # deleted since the listing
        return "missing", None, False
    stored = (found.get("Metadata") or {}).get(METADATA_KEY, "").lower()
    downloaded = deep or not HEX64.match(stored)
    actual = download_sha256(s3, settings, bucket, key) if downloaded else stored
    if actual != str(entry["sha256"]).lower():
        return "mismatched", {"path": entry["path"], "reason": "sha256",
                              "expected": entry["sha256"], "actual": actual,
                              "from": "download" if downloaded else "metadata"}, downloaded
    return "ok", None, downloaded


def require_verified(report: Mapping) -> None:
    """Raise S3_VERIFY_FAILED unless ``verify_against_manifest`` said verified."""
    if not report.get("verified"):
        missing, mismatched = report.get("missing", []), report.get("mismatched", [])
        sample = ", ".join([*missing[:3], *(m["path"] for m in mismatched[:3])])
        raise TaoBrevError("S3_VERIFY_FAILED",
                           f"{report.get('uri', 'S3')}: {len(missing)} missing, "
                           f"{len(mismatched)} mismatched of {report.get('files')} files ({sample})",
                           missing=missing, mismatched=mismatched)
