"""tao_brev/s3/hash_cache.py: a stat-keyed sha256 cache that can make hashing rarer, never wrong.

Clocks are injected (no timing): ``LATER`` puts "now" far after every file's
mtime/ctime, so entries are not racy; ``NOW`` is the real time, so a file
written a moment ago is racy and not cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from pathlib import Path

from tao_brev import s3 as storage
from tao_brev.s3 import hash_cache


def LATER() -> int:
    return time.time_ns() + 3600 * 10**9


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_a_second_manifest_hashes_nothing_and_the_file_is_private(tmp_path, hashed):
    root = tmp_path / "data"
    for i in range(5):
        write(root / f"d{i % 2}" / f"f{i}.bin", os.urandom(100 + i))
    cache_file = hash_cache.default_path(tmp_path / "state")
    first = storage.local_manifest(root, cache=hash_cache.HashCache(cache_file, clock=LATER))
    assert len(hashed) == 5
    assert stat.S_IMODE(cache_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache_file.parent.stat().st_mode) == 0o700
    assert not [p for p in cache_file.parent.iterdir() if p.name.endswith(".tmp")]   # written atomically

    hashed.clear()
    cache = hash_cache.HashCache(cache_file, clock=LATER)
    assert storage.local_manifest(root, cache=cache) == first and hashed == []
    assert (cache.hits, cache.misses) == (5, 0)
    assert first == storage.local_manifest(root)   # the same answer as without any cache


def test_a_change_of_size_mtime_inode_or_content_with_times_put_back_is_hashed_again(tmp_path, hashed):
    root = tmp_path / "data"
    same = write(root / "same.bin", b"a" * 64)
    grown = write(root / "grown.bin", b"b" * 64)
    touched = write(root / "touched.bin", b"c" * 64)
    restored = write(root / "restored.bin", b"d" * 64)
    replaced = write(root / "replaced.bin", b"e" * 64)
    cache_file = tmp_path / "state" / "cache.json"
    storage.local_manifest(root, cache=hash_cache.HashCache(cache_file, clock=LATER))

    grown.write_bytes(b"b" * 65)
    st = touched.stat()
    os.utime(touched, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))          # mtime only, same bytes
    st = restored.stat()
    restored.write_bytes(b"X" * 64)                                          # same size...
    os.utime(restored, ns=(st.st_atime_ns, st.st_mtime_ns))                  # ...and the mtime put back
    assert restored.stat().st_mtime_ns == st.st_mtime_ns and restored.stat().st_size == st.st_size
    st = replaced.stat()
    write(root / "new.tmp", b"E" * 64).replace(replaced)                     # another inode, same size
    os.utime(replaced, ns=(st.st_atime_ns, st.st_mtime_ns))

    hashed.clear()
    manifest = storage.local_manifest(root, cache=hash_cache.HashCache(cache_file, clock=LATER))
    assert sorted(hashed) == ["grown.bin", "replaced.bin", "restored.bin", "touched.bin"]
    by_path = {e["path"]: e["sha256"] for e in manifest}
    assert by_path["restored.bin"] == hashlib.sha256(b"X" * 64).hexdigest()   # caught: ctime moved
    assert by_path["replaced.bin"] == hashlib.sha256(b"E" * 64).hexdigest()
    assert by_path["same.bin"] == hashlib.sha256(b"a" * 64).hexdigest()


def test_a_file_written_a_moment_ago_is_hashed_but_not_cached(tmp_path):
    fresh = write(tmp_path / "data" / "fresh.bin", b"racy")
    cache = hash_cache.HashCache(tmp_path / "cache.json", clock=time.time_ns)   # now: within the racy window
    st = fresh.stat()
    assert not cache.store(fresh, st, st, "0" * 64, started_ns=time.time_ns())
    assert cache.entries == {}
    later = LATER()
    assert cache.store(fresh, st, st, "0" * 64, started_ns=later)
    assert not cache.store(fresh, st, _changed(st), "1" * 64, started_ns=later)   # changed while read
    assert cache.lookup(fresh, st) == "0" * 64


def _changed(st: os.stat_result) -> os.stat_result:
    fields = list(st)
    fields[stat.ST_SIZE] += 1
    return os.stat_result(fields)


def test_a_damaged_cache_is_harmless_and_replaced(tmp_path, hashed):
    root = tmp_path / "data"
    write(root / "a.bin", b"alpha")
    write(root / "b.bin", b"beta")
    cache_file = tmp_path / "state" / "cache.json"
    truth = storage.local_manifest(root)
    st = (root / "a.bin").stat()
    bad_entry = {"format": 1, "entries": {
        str(root / "a.bin"): [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, "not-a-digest"],
        str(root / "b.bin"): "garbage"}}
    for damage in (b"\x00\xff not json", b'{"format": 1, "entries": {"', b"[1, 2]",
                   b'{"format": 99, "entries": {}}', json.dumps(bad_entry).encode()):
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_bytes(damage)
        hashed.clear()
        assert storage.local_manifest(root, cache=hash_cache.HashCache(cache_file, clock=LATER)) == truth
        assert sorted(hashed) == ["a.bin", "b.bin"]
        assert json.loads(cache_file.read_text())["format"] == hash_cache.FORMAT   # rewritten whole
    hashed.clear()
    assert storage.local_manifest(root, cache=hash_cache.HashCache(cache_file, clock=LATER)) == truth
    assert hashed == []


def test_entries_of_deleted_files_are_dropped_and_other_roots_kept(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    write(one / "keep.bin", b"k")
    gone = write(one / "gone.bin", b"g")
    write(two / "other.bin", b"o")
    cache_file = tmp_path / "cache.json"
    storage.local_manifest(one, cache=hash_cache.HashCache(cache_file, clock=LATER))
    storage.local_manifest(two, cache=hash_cache.HashCache(cache_file, clock=LATER))
    gone.unlink()
    storage.local_manifest(one, cache=hash_cache.HashCache(cache_file, clock=LATER))
    names = sorted(Path(p).name for p in json.loads(cache_file.read_text())["entries"])
    assert names == ["keep.bin", "other.bin"]
