"""What the tests of tao_brev/s3 share: the clean-error check, file writing, a local tree,
a fresh bucket (pytest fixtures: a test module imports them by name)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tao_brev import s3 as storage
from tao_brev.errors import CODES, TaoBrevError
from tests.s3server import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY

MiB = 2**20
SECRETS = [FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY]


def assert_clean(err: TaoBrevError, secrets=SECRETS) -> None:
    """The error is registered and mentions no credential value anywhere."""
    assert err.code in CODES
    texts = [str(err), repr(err), err.message, err.fix, json.dumps(err.to_json()),
             json.dumps(err.details, default=str)]
    for secret in secrets:
        for text in texts:
            assert secret not in text, f"credential leaked into {err.code}: {text}"


def raises(code: str, fn, *args, secrets=SECRETS, **kwargs) -> TaoBrevError:
    with pytest.raises(TaoBrevError) as info:
        fn(*args, **kwargs)
    assert info.value.code == code, info.value.to_json()
    assert_clean(info.value, secrets)
    return info.value


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Nested files, one over the 5 MiB multipart threshold, an empty file, spaces."""
    root = tmp_path / "data"
    write(root / "spec.yaml", b"train:\n  epochs: 1\n")
    write(root / "images" / "a" / "0001.jpg", os.urandom(3000))
    write(root / "images" / "b" / "deep" / "0002.jpg", os.urandom(70_000))
    write(root / "big.bin", os.urandom(11 * MiB))
    write(root / "empty.txt", b"")
    write(root / "with space" / "my file 1.txt", b"hello spaces\n")
    write(root / ".git" / "HEAD", b"ref: refs/heads/main\n")
    write(root / "runs" / "x.ckpt", b"checkpoint")
    return root


SMALL_PARTS = dict(multipart_threshold=5 * MiB, multipart_chunksize=5 * MiB)


@pytest.fixture
def s3(s3_server):
    """(settings, bucket) with a fresh bucket."""
    bucket = s3_server["create_bucket"]()
    return storage.s3_settings(s3_server["env"]), bucket
