"""Storage tiers B and C, laptop half: putting local inputs in S3 so a re-stage sends only what changed.

:func:`prepare_inputs` stages a local input under the STABLE prefix
``s3://<bucket>/inputs/<NAME>/`` (:func:`sync_input`): its files at
``data/<path>``, one MANIFEST object per version at
``manifests/<digest>.sha256`` (``sha256sum`` format; digest = the first 16 hex
digits of the sha256 of the manifest), and ``index.json`` (:mod:`.index`). One
LIST plus the index tell which files are already there, so a re-stage sends
only the changed files, and nothing at all when nothing changed. Each file is
hashed once per submit, and not at all when the local hash cache
(:mod:`.hash_cache`) knows its stat. ``s3://`` inputs are used where they are
(listed once for their file count and size). The instance half is :mod:`.carrier`.
"""

from __future__ import annotations

import hashlib
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from .. import remote
from ..errors import TaoBrevError
from ..model.answer_types import InputStaged
from ..secrets import file_names as names_guard
from .clients import client, prefetch_client as prefetch_any_client
from .hash_cache import HashCache
from .index import INDEX_KEY, IndexEntry, index_copy_path, read_index, write_index
from .manifest import ManifestEntry, manifest_digest, manifest_with_files, sha256sum_text, utf8
from .meter import stderr
from .objects import Listed, delete_keys, list_objects, list_sizes, put_bytes, stored_sha256
from .settings import S3Settings
from .transfer import TransferCounts, transfer_files

INPUTS_PREFIX = "inputs"
DATA_DIR = "data/"             # inputs/<NAME>/data/<path>: the files, one key per path
MANIFESTS_DIR = "manifests/"   # inputs/<NAME>/manifests/<digest>.sha256: one per version, never rewritten
MAX_CONCURRENCY = 10           # concurrent requests of one staging (awscli's default too)


class SyncReport(TransferCounts):
    """What :func:`sync_input` did, and the requests it spared."""
    checked_by_head: int
    deleted: int


_Staged = tuple[ManifestEntry, Path]   # a manifest entry and its local file


@dataclass
class Input:
    """One tier B/C input: where it comes from, where it is in S3, how big it is."""

    name: str
    source: str                 # what the user passed: a local path or an s3:// URI
    uri: str = ""               # the s3://bucket/prefix/ the instance copies from
    files: int = 0
    bytes: int = 0
    upload: Optional[SyncReport] = None  # sync_input's report (local sources that were sent)
    digest: str = ""            # local sources: the version (manifest digest)
    manifest_key: str = ""      # local sources: key of the version's sha256sum manifest
    manifest_sha256: str = ""   # local sources: sha256 of that manifest object's bytes

    @property
    def container_path(self) -> str:
        return f"{remote.CONTAINER_DATA_DIR}/{self.name}"

    def to_json(self) -> InputStaged:
        out: InputStaged = {"name": self.name, "source": self.source, "uri": self.uri,
                            "container_path": self.container_path, "files": self.files, "bytes": self.bytes}
        if self.digest:
            out["version"] = self.digest
        if self.upload:
            out["uploaded"] = self.upload["uploaded"]
            out["skipped"] = self.upload["skipped"]
            out["bytes_uploaded"] = self.upload["bytes_uploaded"]
        return out


def parse_inputs(items: Sequence[str]) -> list[Input]:
    """``SRC[=NAME]`` -> inputs (NAME defaults to the last path component); names unique.

    The last ``=`` splits, and only when what follows is no path
    (``s3://b/year=2024/`` is a source without a name).
    """
    inputs, seen = [], set()
    for item in items:
        source, sep, name = item.rpartition("=")
        if not sep or "/" in name:
            source, name = item, ""
        if not source:
            raise TaoBrevError("BAD_ARGUMENT", f"--inputs {item!r} names no source")
        name = name or Path(source.rstrip("/")).name
        remote.check_name(name, "input name")
        if name in seen:
            raise TaoBrevError("BAD_ARGUMENT", f"two inputs are named {name!r}",
                               "Give each input its own name with SRC=NAME.")
        seen.add(name)
        inputs.append(Input(name=name, source=source))
    return inputs


def prepare_inputs(settings: S3Settings, bucket: str, inputs: list[Input], upload: bool = True,
                   progress: Optional[Callable[[str], None]] = stderr,
                   cache: Optional[HashCache] = None,
                   index_copies: Optional[Path] = None) -> list[Input]:
    """Make every input available in S3 and fill in ``uri``, ``files``, ``bytes``.

    A local file or directory is staged under ``s3://<bucket>/inputs/<NAME>/``
    (:func:`sync_input`; ``uri`` is its ``data/`` prefix, a file lands as
    ``data/<file name>``): only files not already there are sent. An ``s3://``
    source is used in place and must hold at least one object. With
    ``upload=False`` (a dry run) nothing is written. ``cache`` spares hashing
    files whose stat did not change; ``index_copies`` (:func:`index_copies_dir`)
    spares the GET of an index the LIST shows unchanged. Upload progress goes to ``progress``
    (stderr by default, None for silence). The S3 client is built in the
    background while the files are hashed (:func:`clients.prefetch_client`).
    """
    if upload and inputs:
        prefetch_client(settings)
    for inp in inputs:
        if inp.source.startswith("s3://"):
            inp.uri = inp.source if inp.source.endswith("/") else inp.source + "/"
            sizes = list_sizes(settings, inp.uri)
            if not sizes:
                raise TaoBrevError("BAD_ARGUMENT", f"input {inp.name}: no objects under {inp.uri}",
                                   "Pass the S3 prefix that holds the input's files (s3://BUCKET/PREFIX/).")
            inp.files, inp.bytes = len(sizes), sum(sizes.values())
            continue
        _stage_local(settings, bucket, inp, upload, progress, cache, index_copies)
    return inputs


def _stage_local(settings: S3Settings, bucket: str, inp: Input, upload: bool,
                 progress: Optional[Callable[[str], None]], cache: Optional[HashCache],
                 index_copies: Optional[Path]) -> None:
    """A local source: its manifest (names refused before any upload), its version, then :func:`sync_input`."""
    local = Path(inp.source).expanduser()
    entries = manifest_with_files(local, cache=cache)
    manifest = [entry for entry, _ in entries]
    names_guard.refuse_names([e["path"] for e in manifest], f"input {inp.name}")   # before any upload
    if not manifest:
        raise TaoBrevError("BAD_ARGUMENT", f"input {inp.name}: {inp.source!r} holds no files")
    base = f"{INPUTS_PREFIX}/{inp.name}/"
    text = sha256sum_text(manifest)
    inp.digest = manifest_digest(manifest)
    inp.uri = f"s3://{bucket}/{base}{DATA_DIR}"
    inp.manifest_key = f"{base}{MANIFESTS_DIR}{inp.digest}.sha256"
    inp.manifest_sha256 = hashlib.sha256(utf8(text)).hexdigest()
    inp.files, inp.bytes = len(manifest), sum(e["size"] for e in manifest)
    if upload:
        inp.upload = sync_input(settings, bucket, base, entries, inp.manifest_key, text,
                                progress=progress, index_copies=index_copies)


def prefetch_client(settings: S3Settings) -> None:
    """Start building, in the background, the S3 client :func:`prepare_inputs` will use
    (:func:`clients.prefetch_client`: no request; its failure is raised by the staging itself)."""
    prefetch_any_client(settings, max_pool_connections=_pool_size(MAX_CONCURRENCY))


def _pool_size(max_concurrency: int) -> int:
    """HTTP connections of the client for ``max_concurrency`` transfers (32 at the default: the
    same client as ``clients.client``'s default, which :func:`list_sizes` uses)."""
    return max(32, max_concurrency * 2)


def sync_input(settings: S3Settings, bucket: str, base: str, entries: Sequence[_Staged],
               manifest_key: str, manifest_text: str,
               progress: Optional[Callable[[str], None]] = stderr,
               max_concurrency: int = MAX_CONCURRENCY, index_copies: Optional[Path] = None) -> SyncReport:
    """Make ``s3://<bucket>/<base>data/`` hold exactly the files of ``entries``; send only what differs.

    Requests: one paginated LIST of ``<base>``, one GET of ``index.json``
    unless ``index_copies`` (:func:`index_copies_dir`) holds the copy of it
    this bundle last read or wrote and the LIST shows that copy's ETag and
    size (a changed ETag means GET it; a copy the LIST does not confirm is
    never used); an object whose key, size and ETag match the index entry of the same
    sha256 is kept with no further request. Only an object the index cannot
    answer for (no index, an ETag changed by another writer) costs a HEAD
    (its ``x-amz-meta-sha256``). Then, in this order, so an interruption
    never leaves a manifest naming a file that is not in ``data/``: the
    changed files (boto3 managed transfers, sha256 in metadata; their ETags
    from the answers), the version's manifest object (when absent), the
    index (when it changed), and last the deletion of ``data/`` objects no
    longer in the input. Nothing changed: zero PUTs, zero HEADs.
    """
    started = time.monotonic()
    s3 = client(settings, max_pool_connections=_pool_size(max_concurrency))
    data = base + DATA_DIR
    listed = list_objects(s3, settings, bucket, base)
    index_key = base + INDEX_KEY
    copy = index_copy_path(index_copies, settings, bucket, index_key)
    index = read_index(s3, settings, bucket, index_key, listed[index_key], copy) if index_key in listed else {}

    todo, unknown = _changed(entries, listed, index, data)
    if unknown:   # no index, or another writer changed the object: its metadata decides
        def stored(item: _Staged) -> Optional[str]:
            return stored_sha256(s3, settings, bucket, data + item[0]["path"])
        with ThreadPoolExecutor(max_workers=max_concurrency) as pool:
            todo += [item for item, sha in zip(unknown, pool.map(stored, unknown)) if sha != item[0]["sha256"]]

    etags = transfer_files(s3, settings, bucket, [(data + e["path"], full, e) for e, full in todo],
                           progress, max_concurrency=max_concurrency)
    now = dict(listed)
    for entry, _ in todo:
        now[data + entry["path"]] = {"size": entry["size"], "etag": etags.get(data + entry["path"], "")}
    if any(not now[data + e["path"]]["etag"] for e, _ in todo):   # a store that answered without one
        now = list_objects(s3, settings, bucket, data)
    body = utf8(manifest_text)
    manifest_object = listed.get(manifest_key)
    if manifest_object is None or manifest_object["size"] != len(body):   # absent (or not the one written here)
        put_bytes(s3, settings, bucket, manifest_key, body, "text/plain; charset=utf-8")
    new_index = {e["path"]: (e["size"], e["sha256"], _etag(now.get(data + e["path"])))
                 for e, _ in entries}
    if new_index != index:
        write_index(s3, settings, bucket, index_key, new_index, copy)
    stale = sorted(key for key in now if key.startswith(data) and key[len(data):] not in new_index)
    delete_keys(s3, settings, bucket, stale)
    return {"bucket": bucket, "prefix": base, "uri": f"s3://{bucket}/{data}",
            "uploaded": len(todo), "skipped": len(entries) - len(todo),
            "bytes_uploaded": sum(e["size"] for e, _ in todo),
            "bytes_total": sum(e["size"] for e, _ in entries),
            "checked_by_head": len(unknown), "deleted": len(stale),
            "seconds": round(time.monotonic() - started, 3)}


def _etag(obj: Optional[Listed]) -> str:
    return obj.get("etag", "") if obj is not None else ""


def _changed(entries: Sequence[_Staged], listed: dict[str, Listed], index: dict[str, IndexEntry], data: str
             ) -> tuple[list[_Staged], list[_Staged]]:
    """(to send, to ask by HEAD): absent or another size, or the index's sha256 for the same size and
    ETag differs, is sent; an object the index cannot answer for (no entry, another ETag) is asked."""
    todo: list[_Staged] = []
    unknown: list[_Staged] = []
    for entry, full in entries:
        obj = listed.get(data + entry["path"])
        if obj is None or obj["size"] != entry["size"]:
            todo.append((entry, full))
            continue
        known = index.get(entry["path"])
        if known and known[0] == obj["size"] and known[2] and known[2] == obj["etag"]:
            if known[1] != entry["sha256"]:
                todo.append((entry, full))
        else:
            unknown.append((entry, full))
    return todo, unknown


def locations(inputs: Sequence[Input], destination: Optional[str]) -> dict[str, str]:
    """Tier C: where the job container finds its inputs and puts its results (not secret).

    ``TAO_RESULTS_URI`` and ``TAO_INPUT_URI_<NAME>`` (NAME upper-cased,
    other characters as ``_``), e.g. ``TAO_INPUT_URI_LEVIR_CD_TINY``.
    """
    out = {f"TAO_INPUT_URI_{re.sub(r'[^A-Z0-9]', '_', inp.name.upper())}": inp.uri for inp in inputs}
    if destination:
        out["TAO_RESULTS_URI"] = destination
    return out
