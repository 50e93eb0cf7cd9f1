"""Storage tiers B and C: putting inputs in S3, and the instance-side transfer commands.

Laptop half (boto3, through ``storage``): :func:`prepare_inputs` stages a
local input under the STABLE prefix ``s3://<bucket>/inputs/<NAME>/``
(:func:`sync_input`): its files at ``data/<path>``, one MANIFEST object per
version at ``manifests/<digest>.sha256`` (``sha256sum`` format; digest = the
first 16 hex digits of the sha256 of the manifest), and ``index.json``, what
this bundle last wrote to ``data/`` (path -> size, sha256, ETag), kept
locally too (read again only when the LIST shows another ETag). One LIST
plus the index tell which files are already there, so a re-stage sends only
the changed files, and nothing at all when nothing changed. Each file is
hashed once per submit, and not at all when the local hash cache
(``hash_cache``) knows its stat. ``s3://`` inputs are used where they are
(listed once for their file count and size).

Instance half (shell strings for ``brev exec``): a stock Brev instance has
Docker and the NVIDIA toolkit but neither the ``aws`` CLI nor Python packages
on the host, so every transfer runs in a CARRIER container, the official AWS
CLI v2 image pinned in ``versions.yaml`` (``images.s3_transfer``,
``public.ecr.aws/aws-cli/aws-cli``; its entrypoint is ``aws``, see
https://docs.aws.amazon.com/cli/latest/userguide/getting-started-docker.html):

* ``--env-file F``: the credentials (``S3Settings.container_env``: ``AWS_*``,
  and with an endpoint the ``when_required`` checksum settings) come from the
  0600 file of ``credentials.push``, never from argv;
* ``--network host``: an endpoint on the instance's loopback (a MinIO on
  127.0.0.1:9000, an SSH tunnel) is reachable, as it would be for a host tool;
* with an endpoint, ``AWS_CONFIG_FILE`` names a small config with
  ``s3.addressing_style = path`` (the AWS CLI has no environment variable for
  it, and virtual-hosted names such as ``bucket.minio.local`` rarely resolve).

:func:`fetch_script` copies every input to ``~/tao-jobs/<id>/inputs/<NAME>``
(``aws s3 sync``), checks a local input's files against its version's
manifest (``sha256sum -c``), and its file count and byte total, before the
job may start; :func:`results_script` makes the results MANIFEST with ``find``,
``stat`` and ``sha256sum`` on the host and uploads the results dir (``aws s3
sync``, ``upload_excludes`` as ``--exclude``) in one round trip;
:func:`parse_manifest` reads that manifest back.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from . import bank, fsio, hash_cache, lazy_re, logcap, remote, storage
from .errors import TaoBrevError

CARRIER_KEY = "images.s3_transfer"
INPUTS_PREFIX = "inputs"
DATA_DIR = "data/"             # inputs/<NAME>/data/<path>: the files, one key per path
MANIFESTS_DIR = "manifests/"   # inputs/<NAME>/manifests/<digest>.sha256: one per version, never rewritten
INDEX_KEY = "index.json"       # inputs/<NAME>/index.json: what this bundle last wrote to data/
INDEX_FORMAT = 1
INDEX_COPIES_DIR = "s3-index"  # <state>/brev/s3-index/: the local copies of index.json (index_copies_dir)
MAX_CONCURRENCY = 10           # concurrent requests of one staging (awscli's default too)
STAGE_FAILED_EXIT = 8          # the submit script's exit status when staging failed (6, 7: remote.py)
CARRIER_CONFIG_DIR = "/tao-aws"  # where the carrier sees its AWS config (read-only mount)
_CARRIER_CONFIG = "[default]\ns3 =\n    addressing_style = path\n"
_MANIFEST_LINE = lazy_re.compile(r"^(\d+) (\\?)([0-9a-f]{64}) [ *](.*)$")  # text or binary mode


def carrier_image(env) -> str:
    """The pinned AWS CLI image: ``images.s3_transfer`` of the bank's versions.yaml, else of this bundle's
    (a full TAO skill bank pins TAO images, not this bundle's carrier)."""
    try:
        return bank.resolve_image(CARRIER_KEY, env)["image"]
    except TaoBrevError as exc:
        if exc.code != "UNKNOWN_VERSIONS_KEY":
            raise
        return bank.resolve_image(CARRIER_KEY, {k: v for k, v in env.items() if k != "TAO_SKILL_BANK_PATH"})["image"]


# ---------------------------------------------------------------- inputs
@dataclass
class Input:
    """One tier B/C input: where it comes from, where it is in S3, how big it is."""

    name: str
    source: str                 # what the user passed: a local path or an s3:// URI
    uri: str = ""               # the s3://bucket/prefix/ the instance copies from
    files: int = 0
    bytes: int = 0
    upload: dict = field(default_factory=dict)  # sync_input's report (local sources)
    digest: str = ""            # local sources: the version (manifest digest)
    manifest_key: str = ""      # local sources: key of the version's sha256sum manifest
    manifest_sha256: str = ""   # local sources: sha256 of that manifest object's bytes

    @property
    def container_path(self) -> str:
        return f"{remote.CONTAINER_DATA_DIR}/{self.name}"

    def to_json(self) -> dict:
        out = {"name": self.name, "source": self.source, "uri": self.uri,
               "container_path": self.container_path, "files": self.files, "bytes": self.bytes}
        if self.digest:
            out["version"] = self.digest
        if self.upload:
            out.update(uploaded=self.upload["uploaded"], skipped=self.upload["skipped"],
                       bytes_uploaded=self.upload["bytes_uploaded"])
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


def manifest_digest(manifest: Sequence[dict]) -> str:
    """16 hex digits identifying a manifest's content (paths, sizes, sha256s)."""
    canonical = json.dumps([[e["path"], e["size"], e["sha256"]] for e in manifest], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def sha256sum_text(manifest: Sequence[dict]) -> str:
    """The manifest as ``sha256sum -c`` reads it: ``<sha256>  <path>`` per line.

    A path holding a backslash or newline is escaped as GNU coreutils does
    (``\\\\``, ``\\n``) and its line starts with a backslash; coreutils 8.x
    and 9.x both read that back.
    """
    lines = []
    for entry in manifest:
        path = entry["path"]
        if "\\" in path or "\n" in path:
            lines.append("\\" + entry["sha256"] + "  " + path.replace("\\", "\\\\").replace("\n", "\\n"))
        else:
            lines.append(entry["sha256"] + "  " + path)
    return "".join(line + "\n" for line in lines)


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")   # file names that are not UTF-8 keep their bytes


def prepare_inputs(settings: storage.S3Settings, bucket: str, inputs: list[Input], upload: bool = True,
                   progress: Optional[Callable[[str], None]] = storage._stderr,
                   cache: Optional[hash_cache.HashCache] = None,
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
    background while the files are hashed (``storage.prefetch_client``).
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
        local = Path(inp.source).expanduser()
        entries = storage.manifest_with_files(local, cache=cache)
        manifest = [entry for entry, _ in entries]
        from .secrets import file_names as names_guard

        names_guard.refuse_names([e["path"] for e in manifest], f"input {inp.name}")   # before any upload
        if not manifest:
            raise TaoBrevError("BAD_ARGUMENT", f"input {inp.name}: {inp.source!r} holds no files")
        base = f"{INPUTS_PREFIX}/{inp.name}/"
        text = sha256sum_text(manifest)
        inp.digest = manifest_digest(manifest)
        inp.uri = f"s3://{bucket}/{base}{DATA_DIR}"
        inp.manifest_key = f"{base}{MANIFESTS_DIR}{inp.digest}.sha256"
        inp.manifest_sha256 = hashlib.sha256(_utf8(text)).hexdigest()
        inp.files, inp.bytes = len(manifest), sum(e["size"] for e in manifest)
        if upload:
            inp.upload = sync_input(settings, bucket, base, entries, inp.manifest_key, text,
                                    progress=progress, index_copies=index_copies)
    return inputs


def prefetch_client(settings: storage.S3Settings) -> None:
    """Start building, in the background, the S3 client :func:`prepare_inputs` will use
    (``storage.prefetch_client``: no request; its failure is raised by the staging itself)."""
    storage.prefetch_client(settings, max_pool_connections=_pool_size(MAX_CONCURRENCY))


def _pool_size(max_concurrency: int) -> int:
    """HTTP connections of the client for ``max_concurrency`` transfers (32 at the default: the
    same client as ``storage.client``'s default, which :func:`list_sizes` uses)."""
    return max(32, max_concurrency * 2)


def index_copies_dir(state_root: Path) -> Path:
    """Where stagings keep their copies of the inputs' ``index.json``: ``<state_root>/brev/s3-index/``."""
    return Path(state_root) / "brev" / INDEX_COPIES_DIR


def _index_copy_path(copies: Optional[Path], settings: storage.S3Settings, bucket: str, key: str) -> Optional[Path]:
    """The local copy's file: named by the sha256 of the endpoint, bucket and key (none of them in clear)."""
    if copies is None:
        return None
    name = hashlib.sha256(f"{settings.endpoint_url or ''}\0{bucket}\0{key}".encode("utf-8", "surrogateescape"))
    return Path(copies) / f"{name.hexdigest()[:32]}.json"


def _load_index_copy(path: Optional[Path], bucket: str, key: str, listed: dict) -> Optional[bytes]:
    """The copy's bytes when the LIST just showed the object with the ETag and size the copy was saved
    with; else None (no copy, a damaged one, another writer's index, a store listing no ETag)."""
    if path is None or not listed.get("etag"):
        return None
    try:
        copy = json.loads(fsio.read_text(path))
        body = copy["body"].encode("utf-8")
        if (copy.get("format") == INDEX_FORMAT and copy.get("bucket") == bucket and copy.get("key") == key
                and copy.get("etag") == listed["etag"] and len(body) == listed.get("size")):
            return body
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UnicodeError):
        pass
    return None


def _save_index_copy(path: Optional[Path], bucket: str, key: str, body: bytes, etag: str) -> None:
    """Keep ``body`` as the local copy of the object whose ETag is ``etag`` (a failure costs a GET next time)."""
    if path is None or not etag:
        return
    try:
        text = json.dumps({"format": INDEX_FORMAT, "bucket": bucket, "key": key, "etag": etag,
                           "body": body.decode("utf-8")}, separators=(",", ":"))
        fsio.private_dir(path.parent)
        fsio.atomic_write_text(path, text + "\n")
    except (OSError, UnicodeError):
        pass


def _read_index(s3, settings: storage.S3Settings, bucket: str, key: str, listed: dict,
                copy: Optional[Path] = None) -> dict[str, tuple]:
    """path -> (size, sha256, etag) from ``index.json`` (``listed``: its LIST entry); {} when damaged
    (then HEADs decide). The local copy ``copy`` answers instead of a GET only when the LIST confirms
    it (:func:`_load_index_copy`); a GET refreshes the copy."""
    body = _load_index_copy(copy, bucket, key, listed)
    if body is None:
        got = storage.get_object(s3, settings, bucket, key)
        if got is None:   # deleted since the listing
            return {}
        body, etag = got
        _save_index_copy(copy, bucket, key, body, etag)
    try:
        data = json.loads(body)
        files = data.get("files") if isinstance(data, dict) and data.get("format") == INDEX_FORMAT else None
        if not isinstance(files, dict):
            return {}
        return {path: tuple(v) for path, v in files.items()
                if isinstance(v, list) and len(v) == 3 and all(isinstance(x, (int, str)) for x in v)}
    except ValueError:
        return {}


def sync_input(settings: storage.S3Settings, bucket: str, base: str, entries: Sequence[tuple[dict, Path]],
               manifest_key: str, manifest_text: str,
               progress: Optional[Callable[[str], None]] = storage._stderr,
               max_concurrency: int = MAX_CONCURRENCY, index_copies: Optional[Path] = None) -> dict:
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
    s3 = storage.client(settings, max_pool_connections=_pool_size(max_concurrency))
    data = base + DATA_DIR
    listed = storage.list_objects(s3, settings, bucket, base)
    index_key = base + INDEX_KEY
    copy = _index_copy_path(index_copies, settings, bucket, index_key)
    index = _read_index(s3, settings, bucket, index_key, listed[index_key], copy) if index_key in listed else {}

    todo, unknown = [], []
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
    if unknown:   # no index, or another writer changed the object: its metadata decides
        def stored(item):
            return storage._stored_sha256(s3, settings, bucket, data + item[0]["path"])
        with ThreadPoolExecutor(max_workers=max_concurrency) as pool:
            todo += [item for item, sha in zip(unknown, pool.map(stored, unknown)) if sha != item[0]["sha256"]]

    etags = storage.transfer_files(s3, settings, bucket, [(data + e["path"], full, e) for e, full in todo],
                                   progress, max_concurrency=max_concurrency)
    now = dict(listed)
    for entry, _ in todo:
        now[data + entry["path"]] = {"size": entry["size"], "etag": etags.get(data + entry["path"], "")}
    if any(not now[data + e["path"]]["etag"] for e, _ in todo):   # a store that answered without one
        now = storage.list_objects(s3, settings, bucket, data)
    body = _utf8(manifest_text)
    if listed.get(manifest_key, {}).get("size") != len(body):   # absent (or not the one written here)
        storage.put_bytes(s3, settings, bucket, manifest_key, body, "text/plain; charset=utf-8")
    new_index = {e["path"]: (e["size"], e["sha256"], now.get(data + e["path"], {}).get("etag", ""))
                 for e, _ in entries}
    if new_index != index:
        index_body = _utf8(json.dumps({"format": INDEX_FORMAT, "files": new_index}, separators=(",", ":")))
        etag = storage.put_bytes(s3, settings, bucket, index_key, index_body, "application/json")
        _save_index_copy(copy, bucket, index_key, index_body, etag)
    stale = sorted(key for key in now if key.startswith(data) and key[len(data):] not in new_index)
    storage.delete_keys(s3, settings, bucket, stale)
    return {"bucket": bucket, "prefix": base, "uri": f"s3://{bucket}/{data}",
            "uploaded": len(todo), "skipped": len(entries) - len(todo),
            "bytes_uploaded": sum(e["size"] for e, _ in todo),
            "bytes_total": sum(e["size"] for e, _ in entries),
            "checked_by_head": len(unknown), "deleted": len(stale),
            "seconds": round(time.monotonic() - started, 3)}


def locations(inputs: Sequence[Input], destination: Optional[str]) -> dict[str, str]:
    """Tier C: where the job container finds its inputs and puts its results (not secret).

    ``TAO_RESULTS_URI`` and ``TAO_INPUT_URI_<NAME>`` (NAME upper-cased,
    other characters as ``_``), e.g. ``TAO_INPUT_URI_LEVIR_CD_TINY``.
    """
    out = {f"TAO_INPUT_URI_{re.sub(r'[^A-Z0-9]', '_', inp.name.upper())}": inp.uri for inp in inputs}
    if destination:
        out["TAO_RESULTS_URI"] = destination
    return out


def list_sizes(settings: storage.S3Settings, uri: str) -> dict[str, int]:
    """``{relative key: size}`` of every file object under the ``s3://`` prefix ``uri`` (one paginated LIST)."""
    bucket, prefix = storage.parse_s3_uri(uri)
    prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    s3 = storage.client(settings)
    sizes: dict[str, int] = {}
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []) or []:
                rel = obj["Key"][len(prefix):]
                if rel and not rel.endswith("/"):   # "folder/" markers are no files; sync skips them
                    sizes[rel] = obj["Size"]
    except Exception as exc:
        # storage's single mapping of boto3 failures to error codes (scrubbed messages)
        raise storage._map_exception(exc, settings, f"listing {uri}") from None
    return sizes


# ---------------------------------------------------------------- carrier
@dataclass(frozen=True)
class Carrier:
    """How to run the AWS CLI image on one instance for one job."""

    image: str
    env_file: str               # instance path of the 0600 credential file
    job_id: str
    path_style: bool = False    # an endpoint is set: write and use the path-style config

    @property
    def config_dir(self) -> str:
        return remote.join(remote.job_dir(self.job_id), "aws")

    def prepare(self) -> str:
        """Shell lines that write the carrier's AWS config (only with an endpoint)."""
        if not self.path_style:
            return ""
        return (f"mkdir -p {remote.rpath(self.config_dir)} || exit 3\n"
                + remote.heredoc_file(remote.join(self.config_dir, "config"), _CARRIER_CONFIG))

    def run(self, host_dir: str, mount: str, aws_args: Sequence[str], read_only: bool = False) -> str:
        """``docker run --rm`` of the carrier with ``host_dir`` at ``mount``, running ``aws ARGS``."""
        words = ["docker", "run", "--rm", "--network", "host", "--env-file", remote.rpath(self.env_file)]
        if self.path_style:
            words += ["-v", f"{remote.rpath(self.config_dir)}:{CARRIER_CONFIG_DIR}:ro",
                      "-e", f"AWS_CONFIG_FILE={CARRIER_CONFIG_DIR}/config"]
        words += ["-v", f"{remote.rpath(host_dir)}:{mount}{':ro' if read_only else ''}", shlex.quote(self.image)]
        return " ".join(words + [shlex.quote(arg) for arg in aws_args])


def remove_on_exit(paths: Sequence[str]) -> str:
    """``trap 'rm -f F...' EXIT``: the credential files go on every path (replaces an earlier trap)."""
    return f"trap {shlex.quote('rm -f ' + ' '.join(remote.rpath(p) for p in paths))} EXIT"


def inputs_dir(job_id: str) -> str:
    """Instance directory holding the staged inputs of a job (``<dir>/<NAME>``)."""
    return remote.join(remote.job_dir(job_id), "inputs")


def input_mounts(job_id: str, inputs: Sequence[Input]) -> list[tuple[str, str, bool]]:
    """Read-only mounts of the staged inputs at ``/data/<NAME>``."""
    return [(remote.join(inputs_dir(job_id), inp.name), inp.container_path, True) for inp in inputs]


def fetch_script(carrier: Carrier, inputs: Sequence[Input], image: str, remove: Sequence[str] = ()) -> str:
    """Shell lines run before the launch: copy every input from S3 onto the instance disk.

    Guarded like the launch: when the job's container already exists
    (``submit`` sent again), nothing is copied. The job image is checked first
    (no copy for a launch that will be refused). Each input is then synced
    (a local input's files checked against its version's manifest with
    ``sha256sum -c``) and its file count and byte total compared with what
    was staged or listed; a failure
    prints ``TAO_STAGE_FAILED <name> ...`` and exits 8. ``remove`` are files
    (the credential files) deleted on every path (``trap ... EXIT``).
    """
    job = carrier.job_id
    lines = [remove_on_exit(remove)] if remove else []
    lines += [f"if ! docker inspect --type container {shlex.quote(job)} >/dev/null 2>&1; then",
              f"docker image inspect {shlex.quote(image)} >/dev/null 2>&1 || {{ echo TAO_IMAGE_MISSING; exit 4; }}",
              f"mkdir -p {remote.rpath(inputs_dir(job))} || exit 3"]
    if carrier.path_style:
        lines.append(carrier.prepare().rstrip("\n"))
    for inp in inputs:
        lines += _fetch_local(carrier, inp) if inp.manifest_key else _fetch_s3(carrier, inp)
        staged = remote.rpath(remote.join(inputs_dir(job), inp.name))
        lines += [
            f"set -- $(find {staged} -type f -printf '%s\\n' | awk '{{n++; b+=$1}} END {{printf \"%d %.0f\", n, b}}')",
            f"if [ \"$1\" != {inp.files} ] || [ \"$2\" != {inp.bytes} ]; then "
            f"echo \"TAO_STAGE_FAILED {inp.name}: $1 of {inp.files} files, $2 of {inp.bytes} bytes on the instance\"; "
            f"exit {STAGE_FAILED_EXIT}; fi",
        ]
    lines.append("fi")
    return "\n".join(lines)


def _stage_failed(name: str, why: str = "") -> str:
    message = f"TAO_STAGE_FAILED {name}" + (f": {why}" if why else "")
    return f"{{ echo {shlex.quote(message)}; exit {STAGE_FAILED_EXIT}; }}"


def _fetch_s3(carrier: Carrier, inp: Input) -> list[str]:
    """An ``s3://`` input: ``aws s3 sync`` of its prefix (the count check follows)."""
    return [carrier.run(inputs_dir(carrier.job_id), "/inputs",
                        ["s3", "sync", "--only-show-errors", "--no-progress", inp.uri, f"/inputs/{inp.name}"])
            + f" || {_stage_failed(inp.name)}"]


def _fetch_local(carrier: Carrier, inp: Input) -> list[str]:
    """A staged local input: ONE ``aws s3 sync`` of ``inputs/<NAME>/`` limited to ``data/*`` and this
    version's manifest, into ``.stage-<NAME>``; the manifest must hash to what the laptop made
    (so it is this version's, unaltered); ``data`` becomes ``<NAME>``; ``sha256sum -c`` checks every
    file against the manifest (a file of another version, e.g. staged meanwhile by another
    submit, fails here instead of reaching the job); the count check that follows catches extra files."""
    job_inputs = inputs_dir(carrier.job_id)
    stage_name = f".stage-{inp.name}"
    base = f"s3://{storage.parse_s3_uri(inp.uri)[0]}/{INPUTS_PREFIX}/{inp.name}/"
    manifest_rel = inp.manifest_key.rsplit("/", 2)[-2] + "/" + inp.manifest_key.rsplit("/", 1)[-1]
    stage = remote.rpath(remote.join(job_inputs, stage_name))
    manifest = remote.rpath(remote.join(job_inputs, stage_name, manifest_rel))
    staged = remote.rpath(remote.join(job_inputs, inp.name))
    check = remote.rpath(remote.join(job_inputs, stage_name, "check.txt"))
    sync = carrier.run(job_inputs, "/inputs", ["s3", "sync", "--only-show-errors", "--no-progress",
                                               "--exclude", "*", "--include", DATA_DIR + "*",
                                               "--include", manifest_rel, base, f"/inputs/{stage_name}"])
    return [
        f"{sync} || {_stage_failed(inp.name)}",
        f"[ \"$(sha256sum < {manifest} 2>/dev/null | cut -c1-64)\" = {inp.manifest_sha256} ] || "
        + _stage_failed(inp.name, f"the manifest {inp.manifest_key} is missing or differs from the one staged"),
        f"rm -rf {staged} && mkdir -p {stage}/data && mv {stage}/data {staged} || {_stage_failed(inp.name)}",
        f"( cd {staged} && sha256sum -c --quiet --strict {manifest} ) > {check} 2>&1 || "
        f"{{ echo \"TAO_STAGE_FAILED {inp.name}: not the staged content: $({logcap.remote_head_bytes(300)} < {check} | tr '\\n' ' ')\"; "
        f"exit {STAGE_FAILED_EXIT}; }}",
    ]


# ---------------------------------------------------------------- results
def aws_excludes(patterns: Sequence[str]) -> list[str]:
    """``aws s3 sync --exclude`` arguments covering ``storage.is_excluded`` semantics.

    The AWS CLI matches each pattern against the path relative to the source
    with fnmatch (``*`` also matches ``/``); ``is_excluded`` matches the
    relative path, the file name and every parent directory. Pattern P
    becomes P (the path), ``*/P`` (a name at any depth), ``P/*`` and ``*/P/*``
    (a directory). Any over-reach is harmless: a manifest file that was not
    uploaded shows up as missing in the verification.
    """
    args: list[str] = []
    for pattern in patterns:
        pattern = pattern.strip().rstrip("/")
        if not pattern:
            continue
        for form in (pattern, f"*/{pattern}", f"{pattern}/*", f"*/{pattern}/*"):
            args += ["--exclude", form]
    return args


def results_script(carrier: Carrier, results_dir: str, destination: str, excludes: Sequence[str],
                   token: str) -> str:
    """One round trip: the results handed to the instance user (section ``own``,
    :func:`remote.own_results`), their MANIFEST (``manifest``), then the upload (``upload``).

    The manifest is made on the instance: one line per regular file,
    ``<size> <sha256sum output>`` (sha256sum escapes names holding a backslash,
    newline or CR and marks the line with a leading backslash); an unreadable
    file prints ``TAO_UNREADABLE <path>``; no results dir prints
    ``TAO_NO_RESULTS``. The credential file is removed on every path.

    Symbolic links (TAO writes ``*_latest.pth`` beside its checkpoints; a link
    can dangle) are recorded as links, never uploaded: ``TAO_LINK <1|0 target
    exists> <path>`` then ``TAO_LINK_TO <target>``. ``find -type f`` does not
    follow them, and ``aws s3 sync --no-follow-symlinks`` skips them before its
    existence check (aws-cli ``filegenerator.should_ignore_file``), so a dangling
    link no longer makes sync exit 2 ("File does not exist") and the manifest and
    the upload hold the same files. A link's target inside the results dir is a
    regular file of the manifest, uploaded and verified under its own name.
    """
    quoted = remote.rpath(results_dir)
    hash_files = ('for f; do s=$(stat -c %s -- "$f") && h=$(sha256sum -- "$f") '
                  '|| { printf "TAO_UNREADABLE %s\\n" "$f"; continue; }; printf "%s %s\\n" "$s" "$h"; done')
    list_links = ('for f; do if [ -e "$f" ]; then e=1; else e=0; fi; printf "TAO_LINK %s %s\\n" "$e" "$f"; '
                  'printf "TAO_LINK_TO %s\\n" "$(readlink -- "$f")"; done')
    manifest = (f"if [ -d {quoted} ]; then cd {quoted} && "
                f"find . -type f -exec sh -c {shlex.quote(hash_files)} sh {{}} + && "
                f"find . -type l -exec sh -c {shlex.quote(list_links)} sh {{}} +; else echo TAO_NO_RESULTS; fi")
    upload = carrier.run(results_dir, "/results", ["s3", "sync", "--only-show-errors", "--no-progress",
                                                   "--no-follow-symlinks", *aws_excludes(excludes), "/results",
                                                   destination],
                         read_only=True)
    upload = f"if [ -d {quoted} ]; then {upload}; fi"
    lines = [remove_on_exit([carrier.env_file])]
    if carrier.path_style:
        lines.append(carrier.prepare().rstrip("\n"))
    # the job wrote the results as root: hand them to the instance user first, or
    # a 0600 file is TAO_UNREADABLE to the manifest (the carrier image has chown)
    lines += [remote.section(token, "own", remote.own_results(carrier.image, results_dir)),
              remote.section(token, "manifest", manifest), remote.section(token, "upload", upload)]
    return "\n".join(lines)


@dataclass
class InstanceManifest:
    """What the instance reported: the files (a MANIFEST), unreadable paths, whether the dir exists."""

    entries: list[dict]
    unreadable: list[str]
    present: bool
    links: list[dict] = field(default_factory=list)   # {"path", "target", "dangling"}


def parse_manifest(text: str) -> InstanceManifest:
    """Read the ``manifest`` section of :func:`results_script` (paths made relative, sorted)."""
    entries, unreadable, present, links = [], [], True, []
    for line in text.splitlines():
        if line == "TAO_NO_RESULTS":
            present = False
        elif line.startswith("TAO_UNREADABLE "):
            unreadable.append(_relative(line[len("TAO_UNREADABLE "):]))
        elif line.startswith(("TAO_LINK 0 ", "TAO_LINK 1 ")):
            links.append({"path": _relative(line[len("TAO_LINK 0 "):]), "target": None,
                          "dangling": line[len("TAO_LINK ")] == "0"})
        elif line.startswith("TAO_LINK_TO ") and links and links[-1]["target"] is None:
            links[-1]["target"] = line[len("TAO_LINK_TO "):]
        else:
            match = _MANIFEST_LINE.match(line)
            if match:
                size, escaped, digest, path = match.groups()
                if escaped:
                    path = _unescape(path)
                entries.append({"path": _relative(path), "size": int(size), "sha256": digest})
    return InstanceManifest(sorted(entries, key=lambda e: e["path"]), sorted(unreadable), present,
                            sorted(links, key=lambda e: e["path"]))


def _relative(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _unescape(path: str) -> str:
    """Undo sha256sum's escaping (GNU coreutils): ``\\\\``, ``\\n``, ``\\r``."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), path)
