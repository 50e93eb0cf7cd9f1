"""Verification from here: every manifest entry present under the prefix, same size, same sha256."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional, Sequence, TypedDict, Union

from ..errors import TaoBrevError
from ..secrets.file_names import resolve_keys
from .clients import client
from .manifest import HEX64, ManifestEntry, check_manifest
from .meter import Progress, stderr
from .objects import METADATA_KEY, download_sha256, existing_objects, head
from .settings import S3Settings
from .uris import location

# One file that differs: its path, "size" or "sha256", what the manifest says, what S3 holds (for a sha256:
# "from" the object's metadata or its download).
Mismatch = TypedDict("Mismatch", {"path": str, "reason": str, "expected": Union[int, str], "actual": Union[int, str],
                                  "from": str}, total=False)


class VerifyReport(TypedDict):
    """What :func:`verify_against_manifest` found."""
    verified: bool
    uri: str
    files: int
    bytes: int
    ok: int
    hashed_by_download: int
    missing: list[str]
    mismatched: list[Mismatch]


_Outcome = tuple[str, Optional[Mismatch], bool]   # ("ok" | "missing" | "mismatched", the mismatch, downloaded)


def verify_against_manifest(settings: S3Settings, s3_prefix: str, manifest: Sequence[ManifestEntry],
                            deep: bool = False, max_concurrency: int = 10,
                            progress: Optional[Callable[[str], None]] = stderr) -> VerifyReport:
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

    def check(entry: ManifestEntry) -> _Outcome:
        try:
            return _check_entry(s3, settings, bucket, digested.get(entry["path"]) or prefix + entry["path"],
                                entry, listed, deep)
        finally:
            meter.add(nbytes=int(entry["size"]), files=1)

    with ThreadPoolExecutor(max_workers=max_concurrency) as pool:
        outcomes = list(pool.map(check, manifest))
    meter.finish()
    missing = [e["path"] for e, (state, _, _) in zip(manifest, outcomes) if state == "missing"]
    mismatched = [detail for state, detail, _ in outcomes if state == "mismatched" and detail is not None]
    return {"verified": not missing and not mismatched, "uri": f"s3://{bucket}/{prefix}",
            "files": len(manifest), "bytes": sum(int(e["size"]) for e in manifest),
            "ok": sum(1 for state, _, _ in outcomes if state == "ok"),
            "hashed_by_download": sum(1 for _, _, d in outcomes if d),
            "missing": missing, "mismatched": mismatched}


def _check_entry(s3, settings: S3Settings, bucket: str, key: str, entry: ManifestEntry, listed: dict[str, int],
                 deep: bool) -> _Outcome:
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


def require_verified(report: VerifyReport) -> None:
    """Raise S3_VERIFY_FAILED unless ``verify_against_manifest`` said verified."""
    if not report.get("verified"):
        missing, mismatched = report.get("missing", []), report.get("mismatched", [])
        sample = ", ".join([*missing[:3], *(m["path"] for m in mismatched[:3])])
        raise TaoBrevError("S3_VERIFY_FAILED",
                           f"{report.get('uri', 'S3')}: {len(missing)} missing, "
                           f"{len(mismatched)} mismatched of {report.get('files')} files ({sample})",
                           missing=missing, mismatched=mismatched)
