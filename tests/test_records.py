"""The job-record store and its bank-compatible CLI."""

import json
import multiprocessing
import os

import pytest

from conftest import run_script, validate
from tao_brev.errors import TaoBrevError
from tao_brev.records import RecordStore


def open_args(*extra):
    return ("open", "--platform", "brev", "--image", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt",
            "--network-arch", "visual_changenet", "--action", "train", "--storage-tier", "A",
            "--results-root", "~/tao-results", *extra)


def test_open_prints_the_bare_id_and_writes_a_schema_valid_record(state_env, tmp_path):
    res = run_script("tao_job_record.py", *open_args(), env=state_env)
    assert res.code == 0, res
    job_id = res.stdout.strip()
    assert job_id.startswith("visual_changenet-train-") and len(job_id.rsplit("-", 1)[1]) == 6
    record = json.loads((tmp_path / "state" / "jobs" / f"{job_id}.json").read_text())
    validate("job_record", record)
    assert record["results_dir"] == f"~/tao-results/{job_id}"
    assert record["transitions"][0]["state"] == "PENDING" and record["terminal_state"] is None

    shown = run_script("tao_job_record.py", "show", job_id, env=state_env)
    assert shown.code == 0 and shown.json == record
    listed = run_script("tao_job_record.py", "list", env=state_env)
    assert listed.stdout.strip().split("\t") == [job_id, "brev", "PENDING", f"~/tao-results/{job_id}"]
    listed_json = run_script("tao_job_record.py", "list", "--json", env=state_env)
    assert [j["id"] for j in listed_json.json["jobs"]] == [job_id]


def test_mark_appends_and_terminal_state_is_immutable(state_env):
    job_id = run_script("tao_job_record.py", *open_args(), env=state_env).stdout.strip()
    ok = run_script("tao_job_record.py", "mark", job_id, "--state", "RUNNING", "--backend-ref", f"box/{job_id}",
                    env=state_env)
    assert ok.code == 0 and ok.json["state"] == "RUNNING"
    done = run_script("tao_job_record.py", "mark", job_id, "--state", "COMPLETE", "--source", "poller", env=state_env)
    assert done.json["terminal_state"] == "COMPLETE"
    refused = run_script("tao_job_record.py", "mark", job_id, "--state", "CANCELED", env=state_env)
    assert refused.code == 2 and refused.json["ok"] is False
    assert refused.json["error"]["code"] == "TERMINAL_STATE"
    validate("error", refused.json)
    enrich = run_script("tao_job_record.py", "mark", job_id, "--state", "COMPLETE", "--err-class", "ERR_INFRA",
                        env=state_env)
    assert enrich.code == 0
    record = run_script("tao_job_record.py", "show", job_id, env=state_env).json
    validate("job_record", record)
    assert [t["state"] for t in record["transitions"]] == ["PENDING", "RUNNING", "COMPLETE"]
    assert record["terminal_write_by"] == "poller" and record["err_class"] == "ERR_INFRA"


@pytest.mark.parametrize("bad_id", ["../etc/passwd", ".hidden", "a/b", "", "x" * 300, "id with space"])
def test_malformed_ids_are_refused_before_touching_disk(state_env, tmp_path, bad_id):
    res = run_script("tao_job_record.py", "show", bad_id, env=state_env)
    assert res.code == 2 and res.json["error"]["code"] == "BAD_JOB_ID"
    assert not (tmp_path / "etc").exists()


def test_unknown_and_corrupt_records_are_named(state_env, tmp_path):
    res = run_script("tao_job_record.py", "show", "nope-train-000000", env=state_env)
    assert res.code == 2 and res.json["error"]["code"] == "UNKNOWN_JOB"
    job_id = run_script("tao_job_record.py", *open_args(), env=state_env).stdout.strip()
    path = tmp_path / "state" / "jobs" / f"{job_id}.json"
    damaged = path.read_text()[:40]
    path.write_text(damaged)  # truncated by a crash of some other tool
    res = run_script("tao_job_record.py", "mark", job_id, "--state", "RUNNING", env=state_env)
    assert res.code == 2 and res.json["error"]["code"] == "CORRUPT_RECORD" and res.json["job_id"] == job_id
    quarantined = tmp_path / "state" / "jobs" / "quarantine" / f"{job_id}.json"
    assert not path.exists() and quarantined.read_text() == damaged  # moved aside, bytes intact
    assert str(quarantined) in res.json["error"]["message"] and f"teardown.py {job_id}" in res.json["error"]["fix"]
    listed = run_script("tao_job_record.py", "list", env=state_env)
    assert listed.code == 0 and "<corrupt>" in listed.stderr


def test_bad_state_dir_is_a_json_error(state_env):
    state_env["TAO_STATE_DIR"] = "relative/path"
    res = run_script("tao_job_record.py", "list", env=state_env)
    assert res.code == 2 and res.json["error"]["code"] == "BAD_STATE_DIR"


def test_secrets_never_reach_a_record(state_env, tmp_path):
    store = RecordStore(tmp_path / "state")
    record = store.open(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="a", action="b",
                        storage_tier="A", results_root="~/r")
    store.mark(record["id"], "ERROR", message="docker login -p nvapi-SECRETsecret0123456789 failed; "
               "token=hf_abcdefghijklmnopqrstuvwxyz0123")
    text = (tmp_path / "state" / "jobs" / f"{record['id']}.json").read_text()
    assert "nvapi-SECRET" not in text and "hf_abcdefghij" not in text
    assert json.loads(text)["redacted"] is True


def _marker(root, job_id, source, count, barrier):
    store = RecordStore(root)
    barrier.wait()
    done = 0
    for i in range(count):
        state = "RUNNING" if i % 2 else "UNKNOWN"
        if source == "agent" and i == count - 1:
            state = "COMPLETE"
        try:
            store.mark(job_id, state, message=f"{source} {i}", source=source)
            done += 1
        except TaoBrevError as exc:
            assert exc.code == "TERMINAL_STATE"
    return done


def test_concurrent_marks_lose_nothing_and_terminal_is_written_once(tmp_path):
    root = tmp_path / "state"
    job_id = RecordStore(root).open(image="img:1", network_arch="a", action="b", storage_tier="A",
                                    results_root="~/r")["id"]
    ctx = multiprocessing.get_context("spawn")   # fork from a threaded pytest worker is deprecated (3.12+)
    barrier = ctx.Manager().Barrier(3)
    with ctx.Pool(3) as pool:
        results = [pool.apply_async(_marker, (root, job_id, src, 25, barrier))
                   for src in ("agent", "poller", "poller")]
        written = sum(r.get(timeout=60) for r in results)
    record = RecordStore(root).load(job_id)
    validate("job_record", record)
    assert written >= 25
    assert len(record["transitions"]) == 1 + written           # no transition lost
    terminal = [i for i, t in enumerate(record["transitions"]) if t["state"] == "COMPLETE"]
    assert terminal == [len(record["transitions"]) - 1]         # written once, and last
    assert record["terminal_state"] == "COMPLETE"
    leftovers = [p for p in os.listdir(root / "jobs") if p.endswith(".tmp")]
    assert leftovers == []


# -- the scan behind poll_status.py --all (tao_brev/record_index.py) ------------------
def test_all_scan_reads_only_changed_records_and_names_every_corrupt_one(tmp_path, monkeypatch):
    import json as _json

    from tao_brev import record_index
    from tao_brev.records import RecordStore

    store = RecordStore(tmp_path)
    ids = []
    for i in range(12):
        rec = store.open(image="img", network_arch="arch", action="train", storage_tier="A", results_root="~/r")
        ids.append(rec["id"])
        if i:
            store.mark(rec["id"], "COMPLETE", source="poller")
    foreign = store.open(image="img", network_arch="arch", action="train", storage_tier="A", results_root="/r",
                         platform="slurm")
    reads = []
    real_parse = RecordStore._parse
    monkeypatch.setattr(RecordStore, "_parse", staticmethod(lambda path, text: reads.append(path.name)
                                                            or real_parse(path, text)))

    def scan():
        reads.clear()
        live, corrupt = record_index.live_records(store, tmp_path)
        return [r["id"] for r in live], [c["id"] for c in corrupt], sorted(reads)

    assert scan() == ([ids[0]], [], sorted(f"{x}.json" for x in [*ids, foreign["id"]]))   # cold: reads all
    assert scan() == ([ids[0]], [], [f"{ids[0]}.json"])          # warm: only the live record
    # the bank's own tool writes a record (a new file) and finishes the live one
    bank = {**store.load(ids[1]), "id": "bank-made-abc123", "terminal_state": None,
            "transitions": [{"ts": "2026-11-30T00:00:00+00:00", "state": "RUNNING", "message": "", "source": "agent"}]}
    (store.jobs_dir / "bank-made-abc123.json").write_text(_json.dumps(bank))
    store.mark(ids[0], "ERROR", source="agent")
    assert scan() == (["bank-made-abc123"], [], sorted([f"{ids[0]}.json", "bank-made-abc123.json"]))
    # a terminal record corrupted by hand is named, on this scan and every later one
    (store.jobs_dir / f"{ids[5]}.json").write_text("garbage{")
    for _ in range(2):
        live, corrupt, _reads = scan()
        assert live == ["bank-made-abc123"] and corrupt == [ids[5]]
    # a lost or garbled index is rebuilt from the files
    record_index.index_path(tmp_path).write_text("{not json")
    live, corrupt, reads_now = scan()
    assert live == ["bank-made-abc123"] and corrupt == [ids[5]] and len(reads_now) == 14


def test_all_scan_names_a_quarantined_record_until_teardown_closes_it(tmp_path):
    """A reader moves a damaged record to jobs/quarantine/: the --all scan still names it
    (its job may still bill), once per id, until close_quarantined (teardown) closes it."""
    from tao_brev import record_index

    store = RecordStore(tmp_path)
    opened = [store.open(image="img", network_arch="arch", action="train", storage_tier="A",
                         results_root="~/r")["id"] for _ in range(2)]
    healthy, bad = sorted(opened)
    store.path(bad).write_text("")   # the 0-byte record a killed writer of an older version left
    with pytest.raises(TaoBrevError) as exc:
        store.load(bad)
    assert exc.value.code == "CORRUPT_RECORD" and not store.path(bad).exists()
    where = str(store.quarantine_dir / f"{bad}.json")

    def scan():
        live, corrupt = record_index.live_records(store, tmp_path)
        return [r["id"] for r in live], [(c["id"], c.get("quarantined")) for c in corrupt]

    for _ in range(2):   # named on this scan and every later one
        assert scan() == ([healthy], [(bad, where)])
    store.path(bad).write_text("{")   # damaged again under the same id: named once, the jobs dir's copy
    assert scan() == ([healthy], [(bad, None)])
    store.path(bad).unlink()
    assert store.close_quarantined(bad) is not None
    assert scan() == ([healthy], [])


# -- listing: streamed, in the bank's formats ---------------------------------------------------
def _store_with_every_kind_of_entry(tmp_path):
    """Records of every state, a secret in a message, a damaged record (quarantined by the
    listing) and one quarantined before: what a long history holds."""
    store = RecordStore(tmp_path / "state")
    ids = []
    for i in range(6):
        record = store.open(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="visual_changenet",
                            action="train", storage_tier="A", results_root="~/tao-results")
        ids.append(record["id"])
        if i % 2:
            store.mark(record["id"], "COMPLETE", source="poller", message=f"done after {i} epochs, loss 0.{i}")
    store.mark(ids[0], "RUNNING", message="export NGC_KEY=nvapi-" + "Q" * 40 + " was in a log line")
    store.path(ids[2]).write_text('{"id": "truncated')              # damaged: the listing quarantines it
    store.path(ids[4]).write_text("{}")
    store.quarantine(ids[4])                                         # quarantined before the listing
    (store.jobs_dir / "bank-written-000001.json").write_text(json.dumps(   # written by the bank's own tool
        {**store.load(ids[1]), "id": "bank-written-000001", "results_dir": "/lustre/exp/token=v1/run"}, indent=2))
    return store


def test_list_json_streams_exactly_the_answer_it_printed_whole(state_env, tmp_path):
    store = _store_with_every_kind_of_entry(tmp_path)
    store.list()                     # quarantines the damaged record: both listings below see the same store
    expected_rows = store.list()
    res = run_script("tao_job_record.py", "list", "--json", env=state_env)
    from tao_brev.secrets import redact

    whole = json.dumps(redact.redact_obj({"ok": True, "jobs": expected_rows}), indent=2, default=str) + "\n"
    assert res.code == 0 and res.stdout == whole
    assert "Q" * 40 not in res.stdout and "<redacted>" in res.stdout
    assert [r["id"] for r in res.json["jobs"]] == sorted(r["id"] for r in expected_rows)
    assert sum(1 for r in res.json["jobs"] if r.get("corrupt")) == 2
    assert store.list() == expected_rows


def test_list_json_redacts_a_credentials_value_in_a_record_written_by_another_tool(state_env, tmp_path):
    """Records hold what the bank's tool (or a hand) wrote, unredacted: the listing redacts every
    value this process holds, in every form a record string can carry it, whatever escapes its
    JSON text needs (a quote, a backslash, non-ASCII letters), in any field and at any depth."""
    import base64
    from urllib.parse import quote

    secret = 'Sk\\"r\u00e9t-' + "W" * 14
    store = _store_with_every_kind_of_entry(tmp_path)
    template = next(r for r in store.list() if not r.get("corrupt"))
    forms = {"verbatim": secret, "url": quote(secret, safe=""), "base64": base64.b64encode(secret.encode()).decode(),
             "json": json.dumps(secret)[1:-1]}
    for n, (how, form) in enumerate(forms.items()):
        record = {**template, "id": f"bank-{how}-00000{n}", "backend_ref": f"box/{form}",
                  "transitions": [*template["transitions"], {**template["transitions"][-1], "message": f"got {form}"}]}
        (store.jobs_dir / f"bank-{how}-00000{n}.json").write_text(json.dumps(record, indent=2, ensure_ascii=n % 2 == 0))
    store.list()
    env = {**state_env, "MY_SERVICE_TOKEN": secret}
    res = run_script("tao_job_record.py", "list", "--json", env=env)
    from tao_brev.secrets import redact

    whole = json.dumps(redact.redact_obj({"ok": True, "jobs": store.list()}, env), indent=2, default=str) + "\n"
    assert res.code == 0 and res.stdout == whole
    escaped = {how: json.dumps(form)[1:-1] for how, form in forms.items()}
    assert [how for how, form in escaped.items() if form in res.stdout] == []
    assert res.stdout.count("<redacted>") >= 2 * len(forms)


def test_list_json_of_an_empty_store_is_the_same_document(state_env, tmp_path):
    res = run_script("tao_job_record.py", "list", "--json", env=state_env)
    assert res.code == 0 and res.stdout == json.dumps({"ok": True, "jobs": []}, indent=2) + "\n"


def test_list_prints_the_banks_line_format(state_env, tmp_path):
    store = _store_with_every_kind_of_entry(tmp_path)
    store.list()
    rows = store.list()
    res = run_script("tao_job_record.py", "list", env=state_env)
    from tao_brev.records import current_state

    assert res.code == 0
    assert res.stdout == "".join(f"{r['id']}\tbrev\t{current_state(r)}\t{r['results_dir']}\n"
                                 for r in rows if not r.get("corrupt"))
    assert res.stderr.count("<corrupt>") == 2


def test_the_listing_reads_one_record_at_a_time(tmp_path, monkeypatch):
    """Memory stays flat: iter_list holds file names, and reads a record only when asked for it."""
    store = _store_with_every_kind_of_entry(tmp_path)
    list(store.iter_list())   # quarantine the damaged record first
    reads = []
    from tao_brev import records

    monkeypatch.setattr(records, "read_text", lambda path, real=records.read_text: reads.append(path) or real(path))
    listing = store.iter_list()
    assert reads == []
    for count, entry in enumerate(listing, start=1):
        assert len(reads) <= count                       # never a record read ahead of the one given
        if not entry.get("corrupt"):
            assert os.path.basename(reads[-1]) == f"{entry['id']}.json"
    assert len(reads) == len([e for e in store.list() if not e.get("corrupt")]) == 5


@pytest.mark.parametrize("change", [{"transitions": "garbage"}, {"status": 5}, {"created": []},
                                    {"terminal_state": 7}, {"upload_excludes": {"a": 1}}, {"schema_version": "1"}],
                         ids=lambda c: next(iter(c)))
def test_a_wrongly_typed_record_answers_corrupt_record_in_every_script(state_env, tmp_path, change):
    """Valid JSON, wrong types: CORRUPT_RECORD (exit 2, no traceback), moved to quarantine with
    its bytes intact, and named by poll_status.py --all and tao_job_record.py list."""
    job_id = run_script("tao_job_record.py", *open_args(), env=state_env).stdout.strip()
    path = tmp_path / "state" / "jobs" / f"{job_id}.json"
    text = json.dumps({**json.loads(path.read_text()), **change})
    path.write_text(text)
    res = run_script("tao_job_record.py", "show", job_id, env=state_env)
    assert res.code == 2 and res.json["error"]["code"] == "CORRUPT_RECORD", res
    assert next(iter(change)) in res.json["error"]["message"] and "Traceback" not in res.stderr
    quarantined = tmp_path / "state" / "jobs" / "quarantine" / f"{job_id}.json"
    assert quarantined.read_text() == text and not path.exists()
    polled = run_script("poll_status.py", "--all", env=state_env)
    assert "Traceback" not in polled.stderr and [q["job_id"] for q in polled.json["quarantined"]] == [job_id], polled
    listed = run_script("tao_job_record.py", "list", "--json", env=state_env)
    assert listed.code == 0 and [r["id"] for r in listed.json["jobs"] if r.get("corrupt")] == [job_id]


def test_a_wrongly_typed_record_is_named_by_the_all_scan_before_any_reader_moved_it(state_env, tmp_path):
    job_id = run_script("tao_job_record.py", *open_args(), env=state_env).stdout.strip()
    path = tmp_path / "state" / "jobs" / f"{job_id}.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "transitions": [{"state": 5}]}))
    polled = run_script("poll_status.py", "--all", env=state_env)
    assert "Traceback" not in polled.stderr and [q["job_id"] for q in polled.json["quarantined"]] == [job_id], polled


@pytest.mark.parametrize("data", [b'{"a": "\xc3\xa9"}\n', b'{\r\n  "a": 1\r\n}\r\n', b'{\r"a": 1\r}', b"",
                                  b"\xef\xbb\xbf{}", b"\xff\xfe not UTF-8"])
def test_the_listing_reads_a_file_as_path_read_text_does(tmp_path, data):
    """fsio.read_text (the listing's reader, bytes decoded at once) answers as Path.read_text:
    the same text (universal newlines, a BOM kept) or the same error."""
    from tao_brev import fsio

    path = tmp_path / "r.json"
    path.write_bytes(data)
    try:
        want = path.read_text()
    except UnicodeDecodeError:
        with pytest.raises(UnicodeDecodeError):
            fsio.read_text(str(path))
    else:
        assert fsio.read_text(str(path)) == want and fsio.read_text(path) == want
    with pytest.raises(FileNotFoundError):
        fsio.read_text(str(tmp_path / "missing.json"))


@pytest.mark.parametrize("kind", ["directory", "fifo", "link-to-dev-zero"])
def test_a_record_that_is_no_regular_file_is_quarantined_never_read(tmp_path, kind):
    """A directory, a FIFO (an open would wait for a writer) or a link to /dev/zero (never ends)
    where a record should be: CORRUPT_RECORD naming why, the thing moved to quarantine, the
    listing goes on; nothing hangs or crashes."""
    store = RecordStore(tmp_path / "state")
    good = store.open(image="i", network_arch="a", action="t", storage_tier="A", results_root="/r")
    path = store.path("a-t-0badf0")
    {"directory": path.mkdir, "fifo": lambda: os.mkfifo(path),
     "link-to-dev-zero": lambda: path.symlink_to("/dev/zero")}[kind]()
    with pytest.raises(TaoBrevError) as err:
        store.load("a-t-0badf0")
    assert err.value.code == "CORRUPT_RECORD" and "quarantine" in err.value.message
    assert not os.path.lexists(path) and os.path.lexists(store.quarantine_dir / "a-t-0badf0.json")
    listed = {r["id"]: r for r in store.list()}
    assert "corrupt" not in listed[good["id"]] and listed["a-t-0badf0"]["corrupt"] is True
    with pytest.raises(TaoBrevError) as parsed:
        RecordStore._parse("x.json", OSError(21, "Is a directory"))
    assert parsed.value.message == "x.json is no record: Is a directory"
