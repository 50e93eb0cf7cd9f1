"""tao_brev/s3/manifest.py: the MANIFEST of local files, excludes, and the checks of a given manifest."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tao_brev import s3 as storage
from tests.s3fixtures import raises, tree  # noqa: F401  (fixtures)


def test_manifest_and_excludes(tree: Path):
    m = storage.local_manifest(tree)
    paths = [e["path"] for e in m]
    assert paths == sorted(paths) and "with space/my file 1.txt" in paths and ".git/HEAD" in paths
    empty = next(e for e in m if e["path"] == "empty.txt")
    assert empty == {"path": "empty.txt", "size": 0, "sha256": hashlib.sha256(b"").hexdigest()}
    big = next(e for e in m if e["path"] == "big.bin")
    assert big["sha256"] == hashlib.sha256((tree / "big.bin").read_bytes()).hexdigest()

    kept = [e["path"] for e in storage.local_manifest(tree, excludes=[".git", "*.ckpt", "images/b/*"])]
    assert ".git/HEAD" not in kept and "runs/x.ckpt" not in kept
    assert "images/b/deep/0002.jpg" not in kept and "images/a/0001.jpg" in kept

    storage.check_manifest(m)
    good = {"path": "a", "size": 1, "sha256": "0" * 64}
    for bad in ("x", [dict(good, path="../a")], [dict(good, path="/a")], [dict(good, path="a//b")],
                [dict(good, size=-1)], [dict(good, sha256="zz")], [good, good], [{"path": "a"}]):
        raises("BAD_ARGUMENT", storage.check_manifest, bad)

    single = storage.local_manifest(tree / "spec.yaml")
    assert [e["path"] for e in single] == ["spec.yaml"]
    raises("BAD_ARGUMENT", storage.local_manifest, tree / "nope")
