"""``inputs/<NAME>/index.json``: what this bundle last wrote to an input's ``data/``
(path -> size, sha256, ETag), and its local copies, read instead of a GET while the LIST
shows the ETag they were saved with.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Optional

from .. import fsio
from .manifest import utf8
from .objects import Listed, get_object, put_bytes
from .settings import S3Settings

INDEX_KEY = "index.json"       # inputs/<NAME>/index.json: what this bundle last wrote to data/
INDEX_FORMAT = 1
INDEX_COPIES_DIR = "s3-index"  # <state>/brev/s3-index/: the local copies of index.json (index_copies_dir)
IndexEntry = tuple[int, str, str]   # an index.json entry: (size, sha256, ETag) of a data/ object


def index_copies_dir(state_root: Path) -> Path:
    """Where stagings keep their copies of the inputs' ``index.json``: ``<state_root>/brev/s3-index/``."""
    return Path(state_root) / "brev" / INDEX_COPIES_DIR


def index_copy_path(copies: Optional[Path], settings: S3Settings, bucket: str, key: str) -> Optional[Path]:
    """The local copy's file: named by the sha256 of the endpoint, bucket and key (none of them in clear)."""
    if copies is None:
        return None
    name = hashlib.sha256(f"{settings.endpoint_url or ''}\0{bucket}\0{key}".encode("utf-8", "surrogateescape"))
    return Path(copies) / f"{name.hexdigest()[:32]}.json"


def load_index_copy(path: Optional[Path], bucket: str, key: str, listed: Listed) -> Optional[bytes]:
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


def save_index_copy(path: Optional[Path], bucket: str, key: str, body: bytes, etag: str) -> None:
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


def read_index(s3, settings: S3Settings, bucket: str, key: str, listed: Listed,
               copy: Optional[Path] = None) -> dict[str, IndexEntry]:
    """path -> (size, sha256, etag) from ``index.json`` (``listed``: its LIST entry); {} when damaged
    (then HEADs decide). The local copy ``copy`` answers instead of a GET only when the LIST confirms
    it (:func:`load_index_copy`); a GET refreshes the copy."""
    body = load_index_copy(copy, bucket, key, listed)
    if body is None:
        got = get_object(s3, settings, bucket, key)
        if got is None:   # deleted since the listing
            return {}
        body, etag = got
        save_index_copy(copy, bucket, key, body, etag)
    try:
        data = json.loads(body)
        files = data.get("files") if isinstance(data, dict) and data.get("format") == INDEX_FORMAT else None
        if not isinstance(files, dict):
            return {}
        return {path: tuple(v) for path, v in files.items()
                if isinstance(v, list) and len(v) == 3 and all(isinstance(x, (int, str)) for x in v)}
    except ValueError:
        return {}


def write_index(s3, settings: S3Settings, bucket: str, key: str, files: dict[str, IndexEntry],
                copy: Optional[Path] = None) -> None:
    """PUT ``index.json`` (``files``: path -> (size, sha256, etag)) and keep its local copy ``copy``."""
    body = utf8(json.dumps({"format": INDEX_FORMAT, "files": files}, separators=(",", ":")))
    etag = put_bytes(s3, settings, bucket, key, body, "application/json")
    save_index_copy(copy, bucket, key, body, etag)
