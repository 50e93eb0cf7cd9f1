"""Laptop-side S3: settings from the environment, uploads, manifests, verification.

Invariant: a credential value never leaves this module except through
:meth:`S3Settings.container_env` (which the caller carries safely, never on
argv); every message this module builds passes :func:`_scrub` first, and
``repr(S3Settings)`` shows no value.

What it does:
  * ``s3_settings(env)``: AWS names first, the legacy TAO names mapped onto them.
  * ``client(settings)``: a botocore S3 client built from those settings only
    (path-style addressing and "when_required" checksums when an endpoint is
    set, so third-party S3-compatible stores accept it), one per process;
    ``prefetch_client`` builds it in the background.
  * ``results_destination(job_id)``: the bank's output routing.
  * ``local_manifest`` / ``file_checksum``: the MANIFEST, a list of
    ``{"path", "size", "sha256"}`` (relative posix paths, sorted).
  * ``upload_tree``: managed transfers (multipart, concurrent), the sha256 in
    object metadata, objects that already match are skipped.
  * ``verify_against_manifest``: size and sha256 of every object, from here.
  * ``probe``: write/read/delete one tiny object; names the failure.

Out of scope: anything run on the instance (tier B copies, tier C container
transfers); those live in the submit/teardown verbs.

botocore is imported inside functions so scripts that never touch S3 start
fast, and boto3 (with s3transfer) only when there is something to upload.
"""

from __future__ import annotations

import fnmatch
import functools
import gc
import hashlib
import json
import os
import re
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from . import lazy_re
from .errors import TaoBrevError

# Environment names: the first set, non-empty one wins. AWS names first, then
# the legacy TAO names. AWS_ENDPOINT_URL_S3 is the service-specific AWS name
# and, as in the SDKs, beats the global AWS_ENDPOINT_URL.
ENV_NAMES: dict[str, tuple[str, ...]] = {
    "access_key_id": ("AWS_ACCESS_KEY_ID", "ACCESS_KEY"),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY", "SECRET_KEY"),
    "session_token": ("AWS_SESSION_TOKEN",),
    "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL"),
    "region": ("AWS_DEFAULT_REGION", "AWS_REGION", "CLOUD_REGION"),
    "bucket": ("S3_BUCKET_NAME",),
}
DEFAULT_REGION = "us-east-1"  # S3 signs with a region; most compatible stores accept this one.
METADATA_KEY = "sha256"       # stored as x-amz-meta-sha256
CHUNK = 1024 * 1024           # streaming read size for hashing

# Job ids, as in the job record (also the path-traversal guard).
_JOB_ID = lazy_re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# A bucket as S3-compatible stores accept it: no slash, no whitespace. Stricter
# DNS rules are the store's business (legacy buckets hold '_' and capitals).
_BUCKET = lazy_re.compile(r"^[^/\s]+$")
_HEX64 = lazy_re.compile(r"^[0-9a-f]{64}$")

# botocore / store error codes, grouped by what the user has to fix.
_AUTH_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
               "InvalidClientTokenId", "TokenRefreshRequired", "AuthorizationHeaderMalformed",
               "InvalidSecurity", "UnrecognizedClientException"}
_DENIED_CODES = {"AccessDenied", "Forbidden", "403", "AllAccessDisabled", "AccountProblem"}
_NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound"}


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- settings
@dataclass(frozen=True)
class S3Settings:
    """S3 settings read from the environment. ``repr`` never shows a credential."""

    access_key_id: Optional[str] = field(default=None, repr=False)
    secret_access_key: Optional[str] = field(default=None, repr=False)
    session_token: Optional[str] = field(default=None, repr=False)
    endpoint_url: Optional[str] = None
    region: Optional[str] = None
    bucket: Optional[str] = None
    # field -> the environment name it came from (names only, never values)
    sources: dict = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        def state(value):
            return "<set>" if value else None
        return (f"S3Settings(access_key_id={state(self.access_key_id)}, "
                f"secret_access_key={state(self.secret_access_key)}, "
                f"session_token={state(self.session_token)}, "
                f"endpoint_url={_safe_endpoint(self.endpoint_url)!r}, region={self.region!r}, "
                f"bucket={self.bucket!r}, sources={self.sources!r})")

    __str__ = __repr__

    def missing(self, need_bucket: bool = False) -> list[str]:
        """Names of the required variables that are absent (AWS names)."""
        absent = []
        if not self.access_key_id:
            absent.append("AWS_ACCESS_KEY_ID")
        if not self.secret_access_key:
            absent.append("AWS_SECRET_ACCESS_KEY")
        if need_bucket and not self.bucket:
            absent.append("S3_BUCKET_NAME")
        return absent

    def secrets(self) -> list[str]:
        """The credential values, for scrubbing messages (never print these)."""
        return [v for v in (self.access_key_id, self.secret_access_key, self.session_token) if v]

    def container_env(self, legacy: bool = False) -> dict[str, str]:
        """The variables a container or carrier needs, with their values.

        AWS names; with an endpoint also the checksum settings botocore >= 1.36
        and awscli v2 honour, so the container's own SDK stays compatible with
        the store. ``legacy=True`` adds the old TAO names for old containers.
        The caller must carry these without argv (see credentials.py).
        """
        out: dict[str, str] = {}
        pairs = [("AWS_ACCESS_KEY_ID", self.access_key_id),
                 ("AWS_SECRET_ACCESS_KEY", self.secret_access_key),
                 ("AWS_SESSION_TOKEN", self.session_token),
                 ("AWS_ENDPOINT_URL", self.endpoint_url),
                 ("AWS_DEFAULT_REGION", self.region),
                 ("S3_BUCKET_NAME", self.bucket)]
        for name, value in pairs:
            if value:
                out[name] = value
        if self.endpoint_url:
            out["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
            out["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"
        if legacy:
            for legacy_name, name in (("ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
                                      ("SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
                                      ("S3_ENDPOINT_URL", "AWS_ENDPOINT_URL"),
                                      ("CLOUD_REGION", "AWS_DEFAULT_REGION")):
                if name in out:
                    out[legacy_name] = out[name]
        return out


def s3_settings(env: Optional[Mapping[str, str]] = None, bucket: Optional[str] = None) -> S3Settings:
    """Read S3 settings from ``env`` (default ``os.environ``); ``bucket`` (--bucket) wins."""
    env = os.environ if env is None else env
    values: dict[str, Optional[str]] = {}
    sources: dict[str, str] = {}
    for attr, names in ENV_NAMES.items():
        values[attr] = None
        for name in names:
            value = (env.get(name) or "").strip()
            if value:
                values[attr], sources[attr] = value, name
                break
    if bucket:
        values["bucket"], sources["bucket"] = bucket.strip(), "--bucket"
    return S3Settings(sources=sources, **values)


# ---------------------------------------------------------------- messages
def _safe_endpoint(url: Optional[str]) -> Optional[str]:
    """The endpoint without any user:password@ part."""
    if not url:
        return url
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", url)


def _scrub(text: str, settings: Optional[S3Settings]) -> str:
    text = str(text)
    if settings is not None:
        for secret in sorted(settings.secrets(), key=len, reverse=True):
            text = text.replace(secret, "***")
        if settings.endpoint_url:
            text = text.replace(settings.endpoint_url, _safe_endpoint(settings.endpoint_url) or "")
    return text


def _error(code: str, message: str, settings: Optional[S3Settings], fix: Optional[str] = None,
           **details) -> TaoBrevError:
    return TaoBrevError(code, _scrub(message, settings),
                        _scrub(fix, settings) if fix else None, **details)


def _where(settings: S3Settings) -> str:
    return _safe_endpoint(settings.endpoint_url) or "AWS S3"


def _map_exception(exc: BaseException, settings: S3Settings, doing: str) -> TaoBrevError:
    """One place that turns a boto3 / botocore failure into a storage code."""
    import botocore.exceptions as bce

    if isinstance(exc, TaoBrevError):
        return exc
    if isinstance(exc, (bce.NoCredentialsError, bce.PartialCredentialsError)):
        return _error("MISSING_CREDENTIAL",
                      f"{doing}: S3 credentials are missing ({', '.join(settings.missing()) or 'incomplete'}).",
                      settings)
    if isinstance(exc, (bce.ConnectionError, bce.HTTPClientError)):
        return _error("S3_UNREACHABLE",
                      f"{doing}: the S3 endpoint {_where(settings)} could not be reached: {type(exc).__name__}: {exc}",
                      settings)
    if isinstance(exc, bce.ClientError):
        err = exc.response.get("Error", {}) or {}
        code = str(err.get("Code") or "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        text = f"{doing}: {code or status}: {err.get('Message') or ''}".rstrip(": ")
        if code == "NoSuchBucket":
            return _error("S3_NO_SUCH_BUCKET", f"{text} (endpoint {_where(settings)})", settings)
        if code in _AUTH_CODES:
            return _error("S3_AUTH_FAILED", f"{text} (endpoint {_where(settings)})", settings)
        if code in _DENIED_CODES or status == 403:
            hint = "" if code and code != "403" else "; a HEAD answers a bare 403 for a wrong key too"
            return _error("S3_ACCESS_DENIED", f"{text} (endpoint {_where(settings)}{hint})", settings)
        return _error("S3_REQUEST_FAILED", text, settings)
    if isinstance(exc, bce.BotoCoreError):
        return _error("S3_REQUEST_FAILED", f"{doing}: {type(exc).__name__}: {exc}", settings)
    if isinstance(exc, OSError):
        return _error("BAD_ARGUMENT", f"{doing}: {exc}", settings,
                      "Check that the local path exists and is readable.")
    return _error("S3_REQUEST_FAILED", f"{doing}: {type(exc).__name__}: {exc}", settings)


# ---------------------------------------------------------------- client
def client(settings: S3Settings, max_attempts: int = 5, connect_timeout: float = 10,
           read_timeout: float = 60, max_pool_connections: int = 32):
    """A botocore S3 client built from ``settings`` only.

    The settings are the single source: credentials are passed explicitly
    (no provider chain runs, so nothing waits on instance metadata) and,
    without an endpoint, configured endpoint variables are ignored, so the
    client never mixes the caller's ``env`` with ``os.environ``.

    Clients are kept per process (the last 8 distinct settings and options;
    botocore clients are thread-safe): a submit staging several inputs, or a
    benchmark staging again, builds one. Building one costs importing
    botocore and reading its S3 models (:func:`_new_client`);
    :func:`prefetch_client` starts that in the background.
    """
    absent = settings.missing()
    if absent:
        raise _error("MISSING_CREDENTIAL",
                     f"S3 credentials are not set: {', '.join(absent)} "
                     "(legacy names ACCESS_KEY / SECRET_KEY are accepted too).", settings)
    key = (settings.access_key_id, settings.secret_access_key, settings.session_token, settings.endpoint_url,
           settings.region, max_attempts, connect_timeout, read_timeout, max_pool_connections)
    with _CLIENTS_LOCK:   # one build per key, also when a prefetch is under way
        return _cached_client(*key)


_client = client   # for prefetch_client: a wrapper a caller (a test) puts on storage.client sees its own calls only
_CLIENTS_LOCK = threading.Lock()


def prefetch_client(settings: S3Settings, **options) -> None:
    """Start building ``client(settings, **options)`` in a daemon thread and return at once.

    For a caller that has other work first (hashing the inputs, asking brev
    about the instance): the later ``client`` call gets the finished client,
    or waits for the build. Makes no request. A build that fails (missing
    credentials, a bad endpoint) is left for that later call to raise again;
    the thread never delays the process's exit.
    """
    if settings.missing():
        return

    def build():
        try:
            _client(settings, **options)
        except Exception:   # raised again, mapped, by the caller's own client() call
            pass
    threading.Thread(target=build, name="s3-client", daemon=True).start()


@functools.lru_cache(maxsize=8)
def _cached_client(access_key_id, secret_access_key, session_token, endpoint_url, region, max_attempts,
                   connect_timeout, read_timeout, max_pool_connections):
    settings = S3Settings(access_key_id=access_key_id, secret_access_key=secret_access_key,
                          session_token=session_token, endpoint_url=endpoint_url, region=region)
    options: dict[str, Any] = dict(
        region_name=settings.region or DEFAULT_REGION,
        signature_version="s3v4",
        retries={"mode": "standard", "max_attempts": max_attempts},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_pool_connections=max_pool_connections,
        # boto3 >= 1.36 adds CRC checksums to every upload and validates them
        # on download; several S3-compatible stores reject or mangle those.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    if settings.endpoint_url:
        options["s3"] = {"addressing_style": "path"}
    else:
        options["ignore_configured_endpoint_urls"] = True
    collecting = gc.isenabled()
    gc.disable()
    try:
        built = _new_client(settings, options)
        gc.freeze()
        return built
    except ValueError as exc:  # botocore: "Invalid endpoint: ..."
        raise _error("BAD_ARGUMENT",
                     f"AWS_ENDPOINT_URL is not a valid URL ({_safe_endpoint(settings.endpoint_url)!r}): {exc}",
                     settings, "Set AWS_ENDPOINT_URL to a full URL such as https://s3.example.com:9000.")
    finally:
        if collecting:
            gc.enable()


def _new_client(settings: S3Settings, options: dict):
    """``botocore.session.Session().create_client("s3", ...)`` with the credentials set, minus three costs
    that buy this module nothing (each measured in a fresh process; botocore 1.3x-1.4x):

    * the data loader checks that "s3" is a known service by listing every
      service directory botocore ships (about 450, for each model type
      loaded): ours looks in the ``s3`` directories only (same search path,
      ``AWS_DATA_PATH`` included; ~60 ms);
    * timestamps are left as the text the store sent, as the AWS CLI v1 does
      by default (aws-cli ``awscli/customizations/scalarparse.py``,
      ``cli_timestamp_format = wire``): nothing here reads ``LastModified``,
      and parsing it with dateutil took longer than the rest of parsing a
      listing (~40 ms per 200 objects);
    * the data files (the S3 model, ``endpoints.json``: ~2.5 MB of JSON) are
      parsed into plain dicts instead of ``OrderedDict`` (botocore
      ``loaders.JSONFileLoader._load_file``: ``object_pairs_hook=OrderedDict``),
      half the parsing time (~15 ms). Plain dicts keep the file's key order
      too, and botocore, boto3 and s3transfer never use what only an
      ``OrderedDict`` has (``move_to_end``, ``popitem(last=)``, an order-
      sensitive ``==``, an ``isinstance`` check): checked for the pinned
      versions by tests/test_storage.py;
    * ``defaults_mode = auto`` (``AWS_DEFAULTS_MODE`` or the config file) asks
      the instance metadata service for the region (botocore
      ``configprovider.SmartDefaultsConfigStoreFactory.resolve_auto_mode``), a
      connection that waits for its timeout off EC2. Its modes differ only in
      the connect timeout (botocore ``data/sdk-default-configuration.json``),
      which this client sets itself, so "auto" is used as "standard".

    boto3 is not imported: its import loads s3transfer too, needed only to upload.
    """
    import botocore.session
    from botocore.config import Config

    session = botocore.session.Session()
    session.set_credentials(settings.access_key_id, settings.secret_access_key, settings.session_token)
    session.register_component("data_loader", _data_loader(session))
    session.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=_wire_timestamp)
    if str(session.get_config_variable("defaults_mode") or "").lower() == "auto":
        options = dict(options, defaults_mode="standard")
    # Options older botocore lacks (checksums: 1.36; endpoint env: 1.31) are
    # dropped: those versions never send the default checksums anyway.
    options = {k: v for k, v in options.items() if k in Config.OPTION_DEFAULTS}
    return session.create_client("s3", region_name=settings.region or DEFAULT_REGION,
                                 endpoint_url=settings.endpoint_url or None, config=Config(**options))


def _data_loader(session):
    """The session's data loader as :func:`_new_client` uses it: botocore's search path
    (``AWS_DATA_PATH`` included), the ``s3`` directories only, plain-dict JSON."""
    import botocore.loaders

    class PlainJSONFileLoader(botocore.loaders.JSONFileLoader):
        def _load_file(self, full_path, open_method):   # botocore 1.3x-1.4x: same signature, same reads
            if not os.path.isfile(full_path):
                return None
            with open_method(full_path, "rb") as fp:
                return json.loads(fp.read().decode("utf-8"))

    class S3Loader(botocore.loaders.Loader):
        @botocore.loaders.instance_cache
        def list_available_services(self, type_name):
            for root in self.search_paths:
                folder = os.path.join(root, "s3")
                if os.path.isdir(folder) and any(self.file_loader.exists(os.path.join(folder, version, type_name))
                                                 for version in os.listdir(folder)):
                    return ["s3"]
            return []

    default_loader = botocore.loaders.create_loader(session.get_config_variable("data_path"))
    return S3Loader(extra_search_paths=list(default_loader.search_paths), include_default_search_paths=False,
                    file_loader=PlainJSONFileLoader())


def _wire_timestamp(text: str) -> str:
    return text


# ---------------------------------------------------------------- uris
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


def _location(settings: S3Settings, s3_prefix: str) -> tuple[str, str]:
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


def results_destination(job_id: str, env: Optional[Mapping[str, str]] = None,
                        bucket: Optional[str] = None, ephemeral_root: str = "/results") -> dict:
    """Where a job's results live, by the bank's routing.

    ``TAO_RESULTS_ROOT`` set -> ``<root>/<job_id>/`` (kind ``local``); else a
    bucket (``bucket`` = --bucket, then ``S3_BUCKET_NAME``) ->
    ``s3://<bucket>/results/<job_id>/`` (kind ``s3``); else kind ``ephemeral``
    with a loud ``warning``: the results live only on the instance disk.
    """
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id):
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


# ---------------------------------------------------------------- manifests
def file_checksum(path: str | os.PathLike) -> str:
    """sha256 hex of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def is_excluded(relpath: str, excludes: Iterable[str]) -> bool:
    """True when a glob matches the relative path, its name, or one of its parent dirs.

    So ``*.ckpt`` drops checkpoints at any depth, ``.git`` or ``__pycache__``
    drop those directories wherever they are, ``runs/tmp/*`` drops one subtree.
    """
    parts = relpath.split("/")
    candidates = {relpath, parts[-1]}
    candidates.update("/".join(parts[:i]) for i in range(1, len(parts)))
    candidates.update(parts[:-1])
    return any(fnmatch.fnmatchcase(c, pattern.rstrip("/")) for pattern in excludes for c in candidates)


def _list_local(source: Path, excludes: Sequence[str]) -> list[tuple[str, Path]]:
    """(relative posix path, absolute path) of every regular file, sorted."""
    if source.is_file():
        return [(source.name, source)]
    if not source.is_dir():
        raise TaoBrevError("BAD_ARGUMENT", f"no such file or directory: {str(source)!r}",
                           "Pass an existing local file or directory.")
    found = []
    for dirpath, dirnames, filenames in os.walk(source):
        rel_dir = Path(dirpath).relative_to(source).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if not is_excluded(rel_dir + d, excludes))
        for name in filenames:
            rel = rel_dir + name
            full = Path(dirpath) / name
            if full.is_file() and not is_excluded(rel, excludes):  # skips dangling links, sockets
                found.append((rel, full))
    return sorted(found)


def local_manifest(path: str | os.PathLike, excludes: Sequence[str] = (),
                   workers: Optional[int] = None, cache=None) -> list[dict]:
    """The MANIFEST of a file or directory: ``[{"path", "size", "sha256"}]``, sorted by path.

    ``cache`` (a ``hash_cache.HashCache``) answers for files whose stat is
    unchanged since they were hashed; the others are hashed and remembered.
    """
    return [entry for entry, _ in manifest_with_files(Path(path), excludes, workers, cache)]


def manifest_with_files(source: Path, excludes: Sequence[str] = (), workers: Optional[int] = None,
                        cache=None) -> list[tuple[dict, Path]]:
    """(manifest entry, local file) pairs, sorted by path; each file hashed at most once
    (not at all when ``cache`` knows it). The cache is saved before returning."""
    source = Path(source)
    files = _list_local(source, list(excludes))

    def one(item):
        rel, full = item
        try:
            before = full.stat()
            digest = cache.lookup(full, before) if cache is not None else None
            if digest is None:
                started = cache.now() if cache is not None else 0
                digest = file_checksum(full)
                if cache is not None:
                    cache.store(full, before, full.stat(), digest, started)
            return ({"path": rel, "size": before.st_size, "sha256": digest}, full)
        except OSError as exc:
            raise TaoBrevError("BAD_ARGUMENT", f"cannot read {str(full)!r}: {exc.strerror or exc}",
                               "Check that the local files are readable.")

    with ThreadPoolExecutor(max_workers=workers or min(8, (os.cpu_count() or 2))) as pool:
        out = list(pool.map(one, files))  # hashlib releases the GIL on large reads
    if cache is not None:
        if source.is_dir():
            cache.forget_missing_under(source)
        cache.save()
    return out


def check_manifest(manifest: Any) -> None:
    """Raise BAD_ARGUMENT unless ``manifest`` is a list of well-formed, unique entries."""
    def bad(why: str) -> TaoBrevError:
        return TaoBrevError("BAD_ARGUMENT", f"invalid manifest: {why}",
                            'A manifest is a JSON list of {"path", "size", "sha256"} (see references/storage.md).')

    if not isinstance(manifest, (list, tuple)):
        raise bad("not a list")
    seen = set()
    for entry in manifest:
        if not isinstance(entry, Mapping) or not {"path", "size", "sha256"} <= set(entry):
            raise bad(f"entry without path/size/sha256: {entry!r:.120}")
        path = entry["path"]
        if (not isinstance(path, str) or not path or path.startswith("/")
                or any(part in ("", ".", "..") for part in path.split("/"))):
            raise bad(f"path must be relative posix without '.', '..' or '//': {path!r}")
        if not isinstance(entry["size"], int) or isinstance(entry["size"], bool) or entry["size"] < 0:
            raise bad(f"size of {path!r} is not a byte count")
        if not isinstance(entry["sha256"], str) or not _HEX64.match(entry["sha256"].lower()):
            raise bad(f"sha256 of {path!r} is not 64 hex digits")
        if path in seen:
            raise bad(f"duplicate path {path!r}")
        seen.add(path)


# ---------------------------------------------------------------- progress
class _Progress:
    """Throttled progress lines (at most one a second, plus the last)."""

    def __init__(self, emit: Optional[Callable[[str], None]], verb: str, files: int, total: int):
        self.emit, self.verb, self.files, self.total = emit, verb, files, total
        self.done_files = 0
        self.done_bytes = 0
        self.lock = threading.Lock()
        self.last = 0.0

    def add(self, nbytes: int = 0, files: int = 0) -> None:
        if self.emit is None:
            return
        with self.lock:
            self.done_bytes += nbytes
            self.done_files += files
            now = time.monotonic()
            if now - self.last >= 1.0:
                self.last = now
                self._line()

    def finish(self) -> None:
        if self.emit is not None:
            self._line()

    def _line(self) -> None:
        self.emit(f"[{self.verb}] {self.done_files}/{self.files} files, "
                  f"{self.done_bytes / 2**20:.1f}/{self.total / 2**20:.1f} MiB")


# ---------------------------------------------------------------- upload
def upload_tree(settings: S3Settings, local_path: str | os.PathLike, s3_prefix: str,
                progress: Optional[Callable[[str], None]] = _stderr, excludes: Sequence[str] = (),
                multipart_threshold: int = 8 * 2**20, multipart_chunksize: int = 8 * 2**20,
                max_concurrency: int = 10) -> dict:
    """Upload a file or directory under ``s3_prefix`` (``s3://b/p`` or a prefix in the settings' bucket).

    A file lands at ``<prefix><name>``, a directory's files at
    ``<prefix><relative path>``. Every object carries its sha256 as
    ``x-amz-meta-sha256``; an object already present with the same size and
    sha256 metadata is skipped. Files must not change while this runs.
    Progress goes to ``progress`` (stderr by default; None for silence).
    """
    started = time.monotonic()
    bucket, prefix = _location(settings, s3_prefix)
    s3 = client(settings, max_pool_connections=max(32, max_concurrency * 2))
    entries = manifest_with_files(Path(local_path), excludes)
    existing = _existing_objects(s3, settings, bucket, prefix)

    # Same key and size: read the stored sha256 to decide.
    def matches(entry: dict) -> bool:
        key = prefix + entry["path"]
        if existing.get(key) != entry["size"]:
            return False
        return _stored_sha256(s3, settings, bucket, key) == entry["sha256"]

    with ThreadPoolExecutor(max_workers=max_concurrency) as pool:
        skip = list(pool.map(lambda e: matches(e[0]), entries))

    todo = [(entry, full) for (entry, full), skipped in zip(entries, skip) if not skipped]
    transfer_files(s3, settings, bucket, [(prefix + entry["path"], full, entry) for entry, full in todo],
                   progress, multipart_threshold=multipart_threshold,
                   multipart_chunksize=multipart_chunksize, max_concurrency=max_concurrency)

    files = [dict(entry, action="skipped" if skipped else "uploaded")
             for (entry, _), skipped in zip(entries, skip)]
    return {"bucket": bucket, "prefix": prefix, "uri": f"s3://{bucket}/{prefix}",
            "uploaded": len(todo), "skipped": len(entries) - len(todo),
            "bytes_uploaded": sum(e["size"] for e, _ in todo),
            "bytes_total": sum(e["size"] for e, _ in entries),
            "seconds": round(time.monotonic() - started, 3), "files": files}


def transfer_files(s3, settings: S3Settings, bucket: str, todo: Sequence[tuple[str, Path, Mapping]],
                   progress: Optional[Callable[[str], None]] = _stderr,
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
    meter = _Progress(progress, "upload", len(todo), sum(int(e["size"]) for _, _, e in todo))
    if not todo:
        meter.finish()
        return {}
    from boto3.s3.transfer import TransferConfig, create_transfer_manager
    from s3transfer.subscribers import BaseSubscriber


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
    wanted = {key for key, _, _ in todo}

    def note_key(params, context, **_):
        if params.get("Bucket") == bucket and params.get("Key") in wanted:
            context["tao_brev_key"] = params["Key"]

    def note_etag(parsed, context, **_):
        if context.get("tao_brev_key") and parsed.get("ETag"):
            etags[context["tao_brev_key"]] = parsed["ETag"]

    hooks = [(f"{event}.s3.{op}", handler) for op in ("PutObject", "CompleteMultipartUpload")
             for event, handler in (("provide-client-params", note_key), ("after-call", note_etag))]
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
                    raise _map_exception(exc, settings, f"upload of s3://{bucket}/{key}")
    finally:
        for event, handler in hooks:
            s3.meta.events.unregister(event, handler)
        meter.finish()
    return etags


def list_objects(s3, settings: S3Settings, bucket: str, prefix: str) -> dict[str, dict]:
    """key -> ``{"size", "etag"}`` of every object under the prefix (one paginated ListObjectsV2)."""
    found: dict[str, dict] = {}
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []) or []:
                found[obj["Key"]] = {"size": obj["Size"], "etag": obj.get("ETag", "")}
    except Exception as exc:
        raise _map_exception(exc, settings, f"listing s3://{bucket}/{prefix}")
    return found


def _existing_objects(s3, settings: S3Settings, bucket: str, prefix: str) -> dict[str, int]:
    """key -> size of every object under the prefix (one paginated LIST)."""
    return {key: obj["size"] for key, obj in list_objects(s3, settings, bucket, prefix).items()}


def put_bytes(s3, settings: S3Settings, bucket: str, key: str, body: bytes, content_type: str) -> str:
    """One small object in one PutObject; its ETag as the store answered ("" when it sent none)."""
    try:
        return s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType=content_type).get("ETag") or ""
    except Exception as exc:
        raise _map_exception(exc, settings, f"writing s3://{bucket}/{key}")


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
        if str(exc.response.get("Error", {}).get("Code")) in _NOT_FOUND_CODES:
            return None
        raise _map_exception(exc, settings, f"reading s3://{bucket}/{key}")
    except Exception as exc:
        raise _map_exception(exc, settings, f"reading s3://{bucket}/{key}")


def delete_keys(s3, settings: S3Settings, bucket: str, keys: Sequence[str]) -> None:
    """Delete objects, up to 1000 per DeleteObjects request; any key that fails raises."""
    for i in range(0, len(keys), 1000):
        batch = keys[i:i + 1000]
        try:
            answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch],
                                                              "Quiet": True})
        except Exception as exc:
            raise _map_exception(exc, settings, f"deleting {len(batch)} objects in s3://{bucket}")
        errors = answer.get("Errors") or []
        if errors:
            first = errors[0]
            raise _error("S3_REQUEST_FAILED", f"deleting s3://{bucket}/{first.get('Key')}: "
                         f"{first.get('Code')}: {first.get('Message', '')}", settings)


def _head(s3, settings: S3Settings, bucket: str, key: str) -> Optional[dict]:
    """head_object, or None when the object does not exist."""
    import botocore.exceptions as bce

    try:
        return s3.head_object(Bucket=bucket, Key=key)
    except bce.ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code"))
        if code in _NOT_FOUND_CODES:
            return None
        raise _map_exception(exc, settings, f"reading s3://{bucket}/{key}")
    except Exception as exc:
        raise _map_exception(exc, settings, f"reading s3://{bucket}/{key}")


def _stored_sha256(s3, settings: S3Settings, bucket: str, key: str) -> Optional[str]:
    head = _head(s3, settings, bucket, key)
    if head is None:
        return None
    value = (head.get("Metadata") or {}).get(METADATA_KEY, "").lower()
    return value if _HEX64.match(value) else None


def _download_sha256(s3, settings: S3Settings, bucket: str, key: str) -> str:
    try:
        body = s3.get_object(Bucket=bucket, Key=key)["Body"]
        digest = hashlib.sha256()
        for block in body.iter_chunks(CHUNK):
            digest.update(block)
        return digest.hexdigest()
    except Exception as exc:
        raise _map_exception(exc, settings, f"downloading s3://{bucket}/{key}")


# ---------------------------------------------------------------- verify
def verify_against_manifest(settings: S3Settings, s3_prefix: str, manifest: Sequence[Mapping],
                            deep: bool = False, max_concurrency: int = 10,
                            progress: Optional[Callable[[str], None]] = _stderr) -> dict:
    """Check every manifest entry under ``s3_prefix``: present, same size, same sha256.

    The sha256 comes from the object's ``x-amz-meta-sha256`` when it holds a
    valid digest; otherwise (objects written by other tools) the object is
    downloaded and hashed, streaming. ``deep=True`` always downloads.
    """
    check_manifest(manifest)
    bucket, prefix = _location(settings, s3_prefix)
    s3 = client(settings, max_pool_connections=max(32, max_concurrency * 2))
    meter = _Progress(progress, "verify", len(manifest), sum(int(e["size"]) for e in manifest))

    listed = _existing_objects(s3, settings, bucket, prefix)  # also: NoSuchBucket, auth
    from .secrets.file_names import resolve_keys

    digested = resolve_keys((e["path"] for e in manifest), listed, prefix)   # names kept as digests

    def check(entry: Mapping) -> tuple[str, Optional[dict], bool]:
        key = digested.get(entry["path"]) or prefix + entry["path"]
        try:
            if key not in listed:
                return "missing", None, False
            if listed[key] != int(entry["size"]):
                return "mismatched", {"path": entry["path"], "reason": "size",
                                      "expected": int(entry["size"]), "actual": listed[key]}, False
            head = _head(s3, settings, bucket, key)
            if head is None:  # deleted since the listing
                return "missing", None, False
            stored = (head.get("Metadata") or {}).get(METADATA_KEY, "").lower()
            downloaded = deep or not _HEX64.match(stored)
            actual = _download_sha256(s3, settings, bucket, key) if downloaded else stored
            if actual != str(entry["sha256"]).lower():
                return "mismatched", {"path": entry["path"], "reason": "sha256",
                                      "expected": entry["sha256"], "actual": actual,
                                      "from": "download" if downloaded else "metadata"}, downloaded
            return "ok", None, downloaded
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


def require_verified(report: Mapping) -> None:
    """Raise S3_VERIFY_FAILED unless ``verify_against_manifest`` said verified."""
    if not report.get("verified"):
        missing, mismatched = report.get("missing", []), report.get("mismatched", [])
        sample = ", ".join([*missing[:3], *(m["path"] for m in mismatched[:3])])
        raise TaoBrevError("S3_VERIFY_FAILED",
                           f"{report.get('uri', 'S3')}: {len(missing)} missing, "
                           f"{len(mismatched)} mismatched of {report.get('files')} files ({sample})",
                           missing=missing, mismatched=mismatched)


# ---------------------------------------------------------------- probe
def probe(settings: S3Settings, prefix: str = "") -> None:
    """Write, read back and delete one tiny object under ``prefix``; raise a named error.

    ``prefix`` is ``s3://bucket/p`` or a prefix in ``settings.bucket``.
    Errors: MISSING_CREDENTIAL, S3_NO_SUCH_BUCKET, S3_AUTH_FAILED,
    S3_ACCESS_DENIED, S3_UNREACHABLE, S3_REQUEST_FAILED.
    """
    bucket, key_prefix = _location(settings, prefix)
    s3 = client(settings, max_attempts=2, connect_timeout=5, read_timeout=20)
    key = f"{key_prefix}.tao-brev-probe-{uuid.uuid4().hex[:12]}"
    body = b"tao-brev probe\n"
    where = f"s3://{bucket}/{key}"
    try:
        s3.put_object(Bucket=bucket, Key=key, Body=body)
    except Exception as exc:
        raise _map_exception(exc, settings, f"probe write {where}")
    try:
        got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    except Exception as exc:
        _quiet_delete(s3, bucket, key)
        raise _map_exception(exc, settings, f"probe read {where}")
    try:
        s3.delete_object(Bucket=bucket, Key=key)
    except Exception as exc:
        raise _map_exception(exc, settings, f"probe delete {where}")
    if got != body:
        raise _error("S3_REQUEST_FAILED", f"probe read {where}: the store returned different bytes "
                     f"({len(got)} instead of {len(body)})", settings,
                     "The store or a proxy alters objects; check AWS_ENDPOINT_URL.")


def _quiet_delete(s3, bucket: str, key: str) -> None:
    """Best-effort cleanup while another error is already on its way out."""
    try:
        s3.delete_object(Bucket=bucket, Key=key)
    except Exception:
        pass
