"""The listing cache behind ``tao_job_record.py list --json`` (tao_brev/record_listing.py): the
answer is byte for byte the one every record read answers, whatever the cache holds."""

import base64
import json
import os
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import run_script
from tao_brev import cli, record_listing, results_now
from tao_brev.secrets import guard as known_secrets
from tao_brev.records import RecordStore

SECRET = 'Sk\\"r\u00e9t-' + "W" * 14   # a quote, a backslash and a non-ASCII letter to escape
FORMS = {"verbatim": SECRET, "url": quote(SECRET, safe=""), "base64": base64.b64encode(SECRET.encode()).decode(),
         "json": json.dumps(SECRET)[1:-1], "hex": SECRET.encode().hex()}
PATTERN_SECRET = "nvapi-" + "Q" * 40   # found by the pattern lint, whatever the environment holds


@pytest.fixture
def later(monkeypatch):
    """The listing runs 10 s after the records were written: they are settled (cacheable)."""
    real = record_listing._clock
    monkeypatch.setattr(record_listing, "_clock", lambda: real() + 10_000_000_000)


@pytest.fixture(autouse=True)
def clean_secrets(monkeypatch):
    for name in list(os.environ):
        if known_secrets.is_credential_env_name(name) or name in ("NGC_KEY", "HF_TOKEN"):
            monkeypatch.delenv(name)
    known_secrets.reset()
    monkeypatch.setattr(cli, "_RUN", {})
    yield
    known_secrets.reset()


def _store(tmp_path):
    """Records of this store (a pattern secret in a message, one with a URL password in its
    results_dir), records written by the bank's tool carrying SECRET in each form in several
    fields, a damaged record, one quarantined before."""
    store = RecordStore(tmp_path / "state")
    ids = []
    for i in range(4):
        ids.append(store.open(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="visual_changenet",
                              action="train", storage_tier="A", results_root="~/tao-results")["id"])
        if i % 2:
            store.mark(ids[-1], "COMPLETE", source="poller", message=f"done after {i} epochs")
    store.mark(ids[0], "RUNNING", message=f"export NGC_KEY={PATTERN_SECRET} was in a log line")
    template = store.load(ids[1])
    for n, (how, form) in enumerate(FORMS.items()):
        job_id = f"bank-{how}-00000{n}"
        record = {**template, "id": job_id, "backend_ref": f"box/{form}", "upload_excludes": [f"x{form}"],
                  "results_dir": f"s3://user:{PATTERN_SECRET[6:]}@host/{job_id}" if n == 0 else f"/lustre/{form}",
                  "transitions": [*template["transitions"], {**template["transitions"][-1], "message": f"got {form}"}]}
        (store.jobs_dir / f"{job_id}.json").write_text(json.dumps(record, indent=2, ensure_ascii=n % 2 == 0))
    store.path(ids[2]).write_text('{"id": "truncated')
    store.path(ids[3]).write_text("{}")
    store.quarantine(ids[3])
    return store


def _tree(root):
    """{relative path: bytes} of the jobs dir (quarantine included; lock and temp files left out)."""
    out = {}
    for folder, _, files in os.walk(root / "jobs"):
        for name in files:
            if not name.startswith("."):
                path = os.path.join(folder, name)
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, root)] = fh.read()
    return out


def _listed(store, capsys, cached: bool) -> str:
    if cached:
        cli.emit_stream_texts({"ok": True}, "jobs", lambda r: record_listing.json_texts(store, r, store.root))
    else:
        cli.emit_stream({"ok": True}, "jobs", (results_now.view(e, store.root) for e in store.iter_list()))
    return capsys.readouterr().out


def _same_as_every_record_read(store, tmp_path, capsys) -> str:
    """The cached listing of ``store`` against the full one of a copy: same answer, same files
    left (the damaged ones quarantined alike)."""
    copy = tmp_path / f"copy{len(list(tmp_path.glob('copy*')))}"
    shutil.copytree(store.root, copy)
    want = _listed(RecordStore(copy), capsys, cached=False).replace(str(copy), str(store.root))
    got = _listed(store, capsys, cached=True)
    assert got == want
    assert _tree(store.root) == _tree(copy)
    return got


def _reads(monkeypatch):
    reads = []
    monkeypatch.setattr(record_listing, "read_text", lambda p, real=record_listing.read_text: reads.append(p) or real(p))
    return reads


def test_the_cached_listing_is_the_full_one_byte_for_byte_cold_and_warm(tmp_path, capsys, monkeypatch, later):
    store = _store(tmp_path)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    first = _same_as_every_record_read(store, tmp_path, capsys)   # quarantines the damaged record
    assert PATTERN_SECRET not in first and not [h for h, f in FORMS.items() if json.dumps(f)[1:-1] in first]
    reads = _reads(monkeypatch)
    second = _same_as_every_record_read(store, tmp_path, capsys)
    healthy = [[r for r in json.loads(text)["jobs"] if not r.get("corrupt")] for text in (first, second)]
    assert healthy[0] == healthy[1] and len(healthy[0]) == 2 + len(FORMS)
    # only the records holding a form of the secret known now are read again (the full path answers them)
    assert sorted(os.path.basename(p) for p in reads) == sorted(f"bank-{h}-00000{n}.json" for n, h in enumerate(FORMS))
    cache = record_listing.cache_path(store.root).read_bytes()
    assert PATTERN_SECRET.encode() not in cache and PATTERN_SECRET[6:].encode() not in cache
    assert cache.count(b"\n") == 1 + 2   # header, the 2 healthy records of this store (the bank's hold SECRET)


def test_a_record_changed_between_listings_is_read_again(tmp_path, capsys, monkeypatch, later):
    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)
    path = store.jobs_dir / "bank-hex-000004.json"
    text = path.read_text()
    st = os.stat(path)
    with open(path, "r+") as fh:   # rewritten in place: same inode, same size, another mtime
        fh.write(text.replace('"got ', '"Got ', 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert os.stat(path).st_size == st.st_size and os.stat(path).st_ino == st.st_ino
    other = store.jobs_dir / "bank-url-000001.json"   # rewritten by rename, as the bank's tool may
    (store.jobs_dir / "new.tmp").write_text(other.read_text().replace('"got ', '"had '))
    os.replace(store.jobs_dir / "new.tmp", other)
    store.path(store.list()[0]["id"]).write_text('{"damaged": ')   # damaged after it was cached
    (store.jobs_dir / "bank-base64-000002.json").unlink()
    got = _same_as_every_record_read(store, tmp_path, capsys)
    assert '"Got ' in got and '"had ' in got and "bank-base64" not in got
    assert b"bank-base64" not in record_listing.cache_path(store.root).read_bytes()
    _same_as_every_record_read(store, tmp_path, capsys)


def _cache_lines(store):
    return record_listing.cache_path(store.root).read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "older code", "a byte changed", "out of order",
                                    "a line dropped", "empty", "a directory"])
def test_a_damaged_or_foreign_cache_is_never_trusted_and_is_rebuilt(tmp_path, capsys, monkeypatch, later, damage):
    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)
    _same_as_every_record_read(store, tmp_path, capsys)
    cache = record_listing.cache_path(store.root)
    lines = _cache_lines(store)
    good = b"".join(lines)
    # each damage gives records another text than their own, where the cache would be trusted
    poisoned = [line.replace(b"got ", b"GOT ") for line in lines]   # checksums no longer match
    resealed = [  # checksums made anew
        record_listing._line(stem, key, text.replace("got ", "GOT "))
        for stem, key, text in map(record_listing._parse_line, lines[1:])]
    if damage == "garbage":
        cache.write_bytes(b"\x00\xff garbage\n" + good)
    elif damage == "truncated":
        cache.write_bytes(good[:len(good) - 200])
    elif damage == "older code":
        cache.write_bytes(lines[0][:-5] + b"beef\n" + b"".join(resealed))
    elif damage == "a byte changed":
        cache.write_bytes(b"".join(poisoned))
    elif damage == "out of order":
        cache.write_bytes(lines[0] + b"".join(reversed(lines[1:])))
    elif damage == "a line dropped":
        cache.write_bytes(b"".join(lines[:2] + lines[3:]))
    elif damage == "empty":
        cache.write_bytes(b"")
    else:
        cache.unlink()
        cache.mkdir()
    got = _same_as_every_record_read(store, tmp_path, capsys)
    assert "GOT " not in got
    if damage != "a directory":
        assert _cache_lines(store) == lines   # rebuilt, the same as before the damage
        reads = _reads(monkeypatch)
        _same_as_every_record_read(store, tmp_path, capsys)
        assert reads == []   # trusted again


def test_a_secret_known_only_now_is_redacted_from_a_cache_written_without_it(tmp_path, capsys, monkeypatch, later):
    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)   # no secret known: every form cached as it is
    assert FORMS["hex"].encode() in record_listing.cache_path(store.root).read_bytes()
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    got = _same_as_every_record_read(store, tmp_path, capsys)
    assert not [h for h, f in FORMS.items() if json.dumps(f)[1:-1] in got] and got.count("<redacted>") >= 3 * len(FORMS)
    monkeypatch.delenv("MY_SERVICE_TOKEN")
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Z" * 30)   # another value: the records holding SECRET are cached again
    assert _same_as_every_record_read(store, tmp_path, capsys).count(FORMS["hex"]) == 4   # backend_ref, results_dir, upload_excludes, message


def _no_form_in_cache(store):
    """No form of SECRET (each as it is and as it reads inside JSON text) in the cache file's bytes."""
    from json.encoder import encode_basestring_ascii

    cache = record_listing.cache_path(store.root).read_bytes()
    spelled = {s for f in FORMS.values() for s in (f, encode_basestring_ascii(f)[1:-1], json.dumps(f, ensure_ascii=False)[1:-1])}
    assert not [s for s in spelled if s.encode() in cache]
    return cache


def test_no_form_of_a_value_known_now_is_ever_written_to_or_kept_in_the_cache(tmp_path, capsys, monkeypatch, later):
    store = _store(tmp_path)
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    _same_as_every_record_read(store, tmp_path, capsys)   # cold
    cold = _no_form_in_cache(store)
    _same_as_every_record_read(store, tmp_path, capsys)   # warm
    assert _no_form_in_cache(store) == cold
    monkeypatch.delenv("MY_SERVICE_TOKEN")
    _same_as_every_record_read(store, tmp_path, capsys)   # no value known: the bank's records are cached
    assert FORMS["hex"].encode() in record_listing.cache_path(store.root).read_bytes()
    before = os.stat(record_listing.cache_path(store.root)).st_ino
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)        # known only at this call: their kept lines are dropped
    _same_as_every_record_read(store, tmp_path, capsys)
    assert os.stat(record_listing.cache_path(store.root)).st_ino != before   # the file rewritten
    assert _no_form_in_cache(store) == cold


def test_a_value_in_a_message_written_before_it_was_set_never_reaches_the_cache(tmp_path, capsys, monkeypatch, later):
    """``wandb login $S ok`` in a record, then ``list --json`` with WANDB_API_KEY=$S: redacted in the
    answer, and absent from the cache file, cold and warm."""
    value = "3f9c1a7e5b2d4c6e8a0b1d3f5e7a9c2b4d6e8f0a"
    store = RecordStore(tmp_path / "state")
    for i in range(2):
        job_id = store.open(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="visual_changenet",
                            action="train", storage_tier="A", results_root="~/tao-results")["id"]
    store.mark(job_id, "RUNNING", message=f"wandb login {value} ok")
    monkeypatch.setenv("WANDB_API_KEY", value)
    for _ in range(2):
        got = _same_as_every_record_read(store, tmp_path, capsys)
        assert value not in got and "wandb login <redacted> ok" in got
        cache = record_listing.cache_path(store.root).read_bytes()
        assert value.encode() not in cache and cache.count(b"\n") == 2   # the header, the other record


def _tampered(store, spell):
    """Each cached line of a bank record with its text's ``got `` made ``got `` + ``spell(FORMS['hex'])``,
    resealed with the module's own line format and checksum."""
    lines = _cache_lines(store)
    out = [lines[0]]
    for stem, key, text in map(record_listing._parse_line, lines[1:]):
        if stem.startswith("bank-"):
            text = text.replace('"got ', '"got ' + spell(FORMS["hex"]) + " ", 1)
        out.append(record_listing._line(stem, key, text))
    record_listing.cache_path(store.root).write_bytes(b"".join(out))


@pytest.mark.parametrize("spell", [
    lambda v: "".join("\\u%04x" % ord(c) for c in v),          # printable ASCII as \u escapes
    lambda v: "".join("\\u%04X" % ord(c) for c in v),          # upper-case hex digits
    lambda v: v[:3] + "\\u%04x" % ord(v[3]) + v[4:],            # one character of it
    lambda v: v[:3] + "\\\\\\u%04X" % ord(v[3]) + v[4:],        # after an escaped backslash
    lambda v: v[:3] + "\\/" + v[3:],                            # an escaped solidus
], ids=["lower", "upper", "one", "after-backslash", "solidus"])
def test_a_cached_text_spelling_a_value_in_escapes_json_never_writes_is_not_trusted(
        tmp_path, capsys, monkeypatch, later, spell):
    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)
    _tampered(store, spell)
    monkeypatch.setenv("MY_SERVICE_TOKEN", FORMS["hex"])   # the value the tampered lines spell
    reads = _reads(monkeypatch)
    got = _same_as_every_record_read(store, tmp_path, capsys)
    assert FORMS["hex"] not in json.dumps(json.loads(got))   # decoded: the value nowhere
    assert len(reads) == len(FORMS)                          # the tampered lines fell back to the records
    assert all(record_listing._canonical(t) for _, _, t in map(record_listing._parse_line, _cache_lines(store)[1:]))


def test_an_escaped_backslash_before_u_is_text_not_an_escape():
    assert record_listing._canonical('"a\\\\u0030b"')          # \\ then u0030: text
    assert not record_listing._canonical('"a\\\\\\u0030b"')    # \\ then \u0030: an escape of "0"


def test_the_canonical_escapes_are_exactly_those_json_writes():
    from json.encoder import encode_basestring_ascii

    for cp in range(0x10000):
        written = encode_basestring_ascii(chr(cp))[1:-1]
        assert record_listing._canonical(written)
        for spelled in ("\\u%04x" % cp, "\\u%04X" % cp):
            assert record_listing._canonical(spelled) == (spelled == written), spelled
    for c in "\\\"/bfnrtuxa0'":
        assert record_listing._canonical("\\" + c) == (c in '\\"bfnrt'), c


def test_a_record_written_moments_ago_is_not_cached(tmp_path, capsys):
    """A write within one tick of the filesystem's clock may keep a file's key: a record is cached
    only when its mtime and ctime are SETTLED_NS old (here the listing runs at once)."""
    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)
    assert _cache_lines(store)[1:] == []


def test_an_unchanged_store_leaves_the_cache_file_as_it_is(tmp_path, capsys, monkeypatch, later):
    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)
    cache = record_listing.cache_path(store.root)
    before = os.stat(cache)
    _same_as_every_record_read(store, tmp_path, capsys)
    after = os.stat(cache)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert not [n for n in os.listdir(cache.parent) if n.endswith(".tmp")]
    (store.jobs_dir / "bank-json-000003.json").unlink()   # gone: the cache is rewritten without it
    _same_as_every_record_read(store, tmp_path, capsys)
    assert os.stat(cache).st_ino != before.st_ino and b"bank-json" not in cache.read_bytes()


def test_list_json_from_the_script_is_the_same_answer_twice(state_env, tmp_path):
    store = _store(tmp_path)
    env = {**state_env, "MY_SERVICE_TOKEN": SECRET}
    first = run_script("tao_job_record.py", "list", "--json", env=env)
    second = run_script("tao_job_record.py", "list", "--json", env=env)
    assert first.code == second.code == 0 and first.json["jobs"][0] == second.json["jobs"][0]
    assert record_listing.cache_path(store.root).exists()


def test_a_cache_another_listing_replaced_meanwhile_is_not_spliced_into_this_one(tmp_path, capsys, monkeypatch, later):
    """A listing that rewrites the cache copies the unchanged first part from the file IT read, not
    from the one another listing put in its place since (that one may hold other lines)."""
    from tao_brev.secrets import redact

    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)
    _same_as_every_record_read(store, tmp_path, capsys)
    names = sorted(p.name for p in store.jobs_dir.glob("*.json"))
    first = record_listing.json_texts(store, redact.obj_redactor(), store.root)
    next(first), next(first)                              # this listing has passed the first two records
    (store.jobs_dir / names[0]).unlink()                  # another listing sees the first one gone ...
    changed = store.jobs_dir / names[4]
    changed.write_text(changed.read_text().replace('"got ', '"Got '))   # ... and this one changed
    os.utime(changed, ns=(0, os.stat(changed).st_mtime_ns - 5_000_000_000))
    _listed(store, capsys, cached=True)                  # it rewrites the cache
    rest = list(first)                                    # this one rewrites it again, from what it read
    assert any('"Got ' in text for text in rest)
    reads = _reads(monkeypatch)
    _same_as_every_record_read(store, tmp_path, capsys)
    assert reads == []                                    # every line of it trusted


@pytest.mark.parametrize("kind", ["fifo", "a link to /dev/zero", "a link to a good cache", "a socket"])
def test_a_cache_name_that_is_no_regular_file_is_never_waited_on_or_followed_and_is_replaced(
        tmp_path, capsys, later, kind):
    """A FIFO (open would wait for a writer forever) or a link to /dev/zero (an endless line) in the
    cache's place: the listing answers at once, the same as every record read, and puts a cache there."""
    import signal
    import socket

    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)
    cache = record_listing.cache_path(store.root)
    lines = _cache_lines(store)
    cache.rename(tmp_path / "good.cache")
    if kind == "fifo":
        os.mkfifo(cache)
    elif kind == "a socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(cache))
    else:
        cache.symlink_to("/dev/zero" if "zero" in kind else tmp_path / "good.cache")
    copy = tmp_path / "copy"
    shutil.copytree(store.root, copy, ignore=shutil.ignore_patterns("record-listing.cache"))
    want = _listed(RecordStore(copy), capsys, cached=False).replace(str(copy), str(store.root))

    def hung(*_):
        raise AssertionError(f"the listing hangs on {kind} as its cache")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    try:
        got = _listed(store, capsys, cached=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert got == want
    assert not cache.is_symlink() and cache.is_file() and _cache_lines(store) == lines   # rebuilt in its place


def test_the_cache_header_is_read_bounded(tmp_path, capsys, later, monkeypatch):
    store = _store(tmp_path)
    _same_as_every_record_read(store, tmp_path, capsys)
    cache = record_listing.cache_path(store.root)
    lines = _cache_lines(store)
    cache.write_bytes(b"x" * (8 << 20))   # one 8 MiB line where the header belongs
    asked = []
    real = record_listing._open_regular

    def spy(path):
        fh = real(path)
        readline = fh.readline
        fh = type("F", (), {"readline": lambda self, n=-1: asked.append(n) or readline(n),
                            "fileno": fh.fileno, "close": fh.close, "raw": fh})()
        return fh
    monkeypatch.setattr(record_listing, "_open_regular", spy)
    assert _listed(store, capsys, cached=True)
    assert asked and 0 < asked[0] < 200 and _cache_lines(store) == lines


def test_a_sidecar_that_says_the_instance_was_deleted_changes_the_cached_text(tmp_path, capsys, monkeypatch, later):
    """The view reads the job's sidecar: a delete noted there after the text was cached is answered
    (the sidecar's key is part of the cache's), byte for byte the full path's answer."""
    store = _store(tmp_path)
    job = sorted(p.stem for p in store.jobs_dir.glob("*.json")   # one of this store's whole records (the ids
                 if not p.stem.startswith("bank-") and '"truncated' not in p.read_text())[0]   # are random)
    _same_as_every_record_read(store, tmp_path, capsys)
    side = store.root / "brev" / "jobs" / f"{job}.json"
    side.parent.mkdir(parents=True, exist_ok=True)
    home = str(store.root / "brev" / "results" / f"{job}.tar.gz")
    facts = {"job_id": job, "instance": "box", "instance_deleted_at": "2026-01-02T03:04:05.678Z",
             "results": {"kind": "ephemeral", "instance_dir": f"~/tao-results/{job}", "saved": {"path": home}}}
    for results, want in ((facts["results"], "copied_here"), ({**facts["results"], "saved": None}, "lost"),
                          ({"kind": "s3", "verified": True, "instance_dir": "~/x"}, "s3"),
                          ({"kind": "ephemeral", "saved": {"path": None}}, "none")):
        side.write_text(json.dumps({**facts, "results": results}))
        got = json.loads(_same_as_every_record_read(store, tmp_path, capsys))["jobs"]
        entry = next(e for e in got if e["id"] == job)
        assert entry["instance_copy"]["results"] == want and entry["instance_copy"]["instance"] == "box"
        assert (entry["results_dir"] == home) == (want == "copied_here"), entry
        assert all("instance_copy" not in e for e in got if e["id"] != job)
    assert record_listing.cache_path(store.root).read_bytes().count(b"instance_copy") == 1   # cached as it is now


def test_a_record_file_holding_the_view_only_field_is_no_record(tmp_path):
    from tao_brev import records

    store = RecordStore(tmp_path / "state")
    record = store.open(image="i", network_arch="a", action="train", storage_tier="A", results_root="~/r")
    copy = {"deleted_at": "2026-01-02T03:04:05Z", "instance": "box", "path": "~/r/x", "results": "lost"}
    assert "instance_copy" in records.record_problem({**record, "instance_copy": copy})


def _listed_job(guard, job: str) -> tuple[dict, list[str], dict]:
    """(the job's ``list --json`` entry, its ``list`` TSV line's fields, its ``show``), by the script."""
    listed = guard.run("tao_job_record.py", "list", "--json")
    entry = next(e for e in listed.json["jobs"] if e["id"] == job)
    tsv = run_script("tao_job_record.py", "list", env=guard.world.env).stdout
    line = next(ln.split("\t") for ln in tsv.splitlines() if ln.startswith(job + "\t"))
    return entry, line, guard.run("tao_job_record.py", "show", job, schema="job_record").json


def test_after_the_instance_is_deleted_list_and_show_point_at_the_copy_saved_here(world):
    """A job whose results lived only on its ephemeral instance: once the teardown copied them home and
    deleted the instance, list (TSV and JSON) and show name the copy here, not the dir
    that went with the instance, and say the instance's copy is gone."""
    from test_cost_guard import WAIT, Guard

    guard = Guard(world)
    job = guard.submit("--ephemeral")
    before, line, _ = _listed_job(guard, job)
    assert before["results_dir"] == line[3] == f"~/tao-results/{job}" and "instance_copy" not in before
    assert guard.run("poll_status.py", job, *WAIT).code == 0
    down = guard.wait_teardown(job)
    saved = down.json["teardown"]["results_saved_to"]
    assert down.code == 0 and not guard.exists("box") and os.path.isfile(saved), down
    for _ in range(2):   # twice: the listing cache (when the files have settled) answers the same
        entry, line, shown = _listed_job(guard, job)
        for view in (entry, shown):
            assert view["results_dir"] == saved, view
            assert view["instance_copy"] == {"deleted_at": view["instance_copy"]["deleted_at"], "instance": "box",
                                             "path": f"~/tao-results/{job}", "results": "copied_here"}, view
        assert line[3:] == [saved, "instance copy deleted"], line
    record = json.loads((Path(world.env["TAO_STATE_DIR"]) / "jobs" / f"{job}.json").read_text())
    assert record["results_dir"] == f"~/tao-results/{job}" and "instance_copy" not in record   # the file: as bound


def test_after_the_orphan_clean_up_deleted_the_instance_list_points_at_the_copy_saved_here(world):
    """The same once ``teardown.py --orphans --delete`` saved the results and deleted the instance."""
    from test_cost_guard import WAIT, Guard

    guard = Guard(world)
    job = guard.submit("--ephemeral")
    assert guard.run("poll_status.py", job, *WAIT).code == 0
    assert guard.run("teardown.py", job, "--keep-instance").code == 0   # an owned orphan holding the results
    assert _listed_job(guard, job)[0]["results_dir"] == f"~/tao-results/{job}"
    deleted = guard.run("teardown.py", "--orphans", "--delete", schema="teardown")
    assert deleted.code == 0 and deleted.json["deleted"] == ["box"], deleted
    saved = deleted.json["orphans"][0]["results_saved"][0]["path"]
    entry, line, shown = _listed_job(guard, job)
    assert entry["results_dir"] == shown["results_dir"] == line[3] == saved and os.path.isfile(saved)
    assert entry["instance_copy"]["results"] == "copied_here" and line[4] == "instance copy deleted"
