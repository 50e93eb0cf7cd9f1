"""A job's results manifest here: ``$TAO_STATE_DIR/brev/manifests/<id>.json``, ``{"files":
[{path, size, sha256}], "links": [{path, target, dangling}]}`` as the instance reported them
(``verbs/results`` writes it after an upload, ``verbs/checkpoint_sync`` merges a checkpoint in,
``resume`` reads it to pick the checkpoint). Below the verbs and ``resume``: no verb imported."""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, TypedDict, cast

from .context import Context
from .fsio import atomic_write_json, private_dir, read_text
from .model.answer_types import ResultsLinksItem
from .secrets.file_names import stored_names
from .secrets.safe_read import loads

ManifestLink = ResultsLinksItem   # a symbolic link of the results dir: path, target (None: unknown), dangling


class ManifestFile(TypedDict):
    """A file of the results dir as the instance reported it (relative path, bytes, sha256)."""
    path: str
    size: int
    sha256: str


class Manifest(TypedDict):
    """The saved manifest: the files and the symbolic links."""
    files: list[ManifestFile]
    links: list[ManifestLink]


def manifest_path(ctx: Context, job_id: str) -> Path:
    return ctx.state_root / "brev" / "manifests" / f"{job_id}.json"


def save_manifest(ctx: Context, job_id: str, manifest: Sequence[ManifestFile],
                  links: Optional[Sequence[ManifestLink]] = None) -> None:
    """``{"files": [...], "links": [...]}``: the files (path, size, sha256) and the symbolic links
    (path, target, dangling) the instance reported, so ``*_latest.pth`` keeps its target. A name
    holding a known value is stored as its digest only (names_guard.stored_names)."""
    path = manifest_path(ctx, job_id)
    private_dir(path.parent)   # 0700, the file 0600
    links = list(links or [])
    files: list[ManifestFile] = [{**e, "path": n} for e, n in zip(manifest, stored_names([e["path"] for e in manifest]))]
    targets = stored_names([str(x.get("target") or "") for x in links])
    kept_links: list[ManifestLink] = [{**link, "path": n, "target": t if link.get("target") is not None else None}
                  for link, n, t in zip(links, stored_names([x["path"] for x in links]), targets)]
    atomic_write_json(path, {"files": files, "links": kept_links})


def load_manifest(ctx: Context, job_id: str) -> Optional[list[ManifestFile]]:
    """The job's results manifest as last merged (path, size, sha256 of each file), or None."""
    data = read_manifest(ctx, job_id)
    return None if data is None else list(data.get("files") or [])


def load_links(ctx: Context, job_id: str) -> list[ManifestLink]:
    """The symbolic links recorded with the job's manifest (path, target, dangling)."""
    data = read_manifest(ctx, job_id)
    return [] if data is None else list(data.get("links") or [])


def read_manifest(ctx: Context, job_id: str) -> Optional[Manifest]:
    """The saved manifest as ``{"files", "links"}`` (a bare list of files: one saved before links
    were), read only as a regular file, bounded; None when absent or damaged."""
    try:
        data = loads(read_text(manifest_path(ctx, job_id)))
    except (OSError, ValueError):
        return None
    if isinstance(data, list):
        return {"files": data, "links": []}
    return cast(Manifest, data) if isinstance(data, dict) else None   # the file is save_manifest's
