"""The record store's contract, in process (references/schemas/job_record.schema.json,
the record rules of the TAO contract): a terminal state never changes and a repeated
terminal mark may only ADD err_class / backend_ref; every field is validated before
anything is written; required fields make a record readable; damaged records are
quarantined and named. The script-level checks are in test_records.py."""

import json
from pathlib import Path

import pytest

from conftest import validate
from tao_brev import record_schema, records
from tao_brev.errors import TaoBrevError
from tao_brev.records import RecordStore


def new(store, **kw):
    args = dict(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="visual_changenet",
                action="train", storage_tier="A", results_root="~/tao-results")
    args.update(kw)
    return store.open(**args)


@pytest.fixture
def store(tmp_path):
    return RecordStore(tmp_path / "state")


def raw(store, job_id):
    return store.path(job_id).read_bytes()


def test_open_writes_a_schema_valid_pending_record(store):
    record = new(store)
    job_id = record["id"]
    arch, action, suffix = job_id.rsplit("-", 2)
    assert (arch, action, len(suffix)) == ("visual_changenet", "train", 6) and int(suffix, 16) >= 0
    assert record["results_dir"] == f"~/tao-results/{job_id}"
    assert json.loads(raw(store, job_id)) == record == store.load(job_id)
    validate("job_record", record)
    assert record["platform"] == "brev" and record["backend_ref"] is None and record["terminal_state"] is None
    assert [t["state"] for t in record["transitions"]] == ["PENDING"]
    assert record["transitions"][0]["source"] == "agent" and record["redacted"] is True
    assert "parent_job" not in record and "retry_of" not in record and record["upload_excludes"] == []


def test_open_binds_an_explicit_results_dir_and_the_lineage(store):
    first = new(store)
    record = new(store, results_root=None, results_dir="s3://bucket/run-1", parent_job=first["id"],
                 retry_of=first["id"], upload_excludes=["*.tmp"], platform="slurm")
    assert record["results_dir"] == "s3://bucket/run-1" and record["platform"] == "slurm"
    assert record["parent_job"] == record["retry_of"] == first["id"] and record["upload_excludes"] == ["*.tmp"]
    validate("job_record", record)


@pytest.mark.parametrize("kw, what", [
    ({"results_dir": "/r"}, "exactly one"),                       # both
    ({"results_root": None}, "exactly one"),                      # neither
    ({"image": ""}, "--image"), ({"image": "  "}, "--image"),
    ({"network_arch": ""}, "--network-arch"), ({"network_arch": " "}, "--network-arch"),
    ({"action": ""}, "--action"), ({"action": "\t"}, "--action"),
    ({"storage_tier": "D"}, "storage tier"), ({"storage_tier": "a"}, "storage tier"),
])
def test_open_refuses_bad_arguments_and_writes_nothing(store, kw, what):
    with pytest.raises(TaoBrevError) as failed:
        new(store, **kw)
    assert failed.value.code == "BAD_ARGUMENT" and what in failed.value.message
    assert not store.jobs_dir.exists() or list(store.jobs_dir.glob("*.json")) == []


@pytest.mark.parametrize("field", ["parent_job", "retry_of"])
def test_open_refuses_a_bad_lineage_id(store, field):
    with pytest.raises(TaoBrevError) as failed:
        new(store, **{field: "../x"})
    assert failed.value.code == "BAD_JOB_ID"


@pytest.mark.parametrize("arch, action, prefix", [
    ("visual changenet", "train/eval", "visual-changenet-train-eval-"),
    ("..dino", "-x-", "dino-x-"),
    ("!!!", "???", "job-job-"),
])
def test_ids_are_slugs_of_arch_and_action(store, arch, action, prefix):
    job_id = new(store, network_arch=arch, action=action)["id"]
    assert job_id.startswith(prefix) and records.ID_RE.match(job_id)


@pytest.mark.parametrize("job_id, ok", [
    ("a", True), ("A-b_c.9", True), ("x" * 200, True),
    ("x" * 201, False), ("", False), (".hidden", False), ("-x", False), ("a/b", False), ("a b", False),
    ("job-1\n", False),
    (None, False), (7, False),
])
def test_job_ids(job_id, ok):
    if ok:
        assert records.check_job_id(job_id) == job_id
    else:
        with pytest.raises(TaoBrevError) as failed:
            records.check_job_id(job_id)
        assert failed.value.code == "BAD_JOB_ID"


def test_state_root(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert records.state_root({}) == tmp_path / ".tao"
    assert records.state_root({"TAO_STATE_DIR": "/srv/tao"}) == Path("/srv/tao")
    for bad in ("", "  ", "relative/dir"):
        with pytest.raises(TaoBrevError) as failed:
            records.state_root({"TAO_STATE_DIR": bad})
        assert failed.value.code == "BAD_STATE_DIR"


def test_a_state_dir_that_is_a_file_is_bad_state_dir(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(TaoBrevError) as failed:
        new(RecordStore(tmp_path / "file"))
    assert failed.value.code == "BAD_STATE_DIR"


# -- mark: validation ------------------------------------------------------------
@pytest.mark.parametrize("kw, word", [
    ({"state": "BOGUS"}, "state"), ({"state": "running"}, "state"), ({"state": ""}, "state"),
    ({"state": "RUNNING", "source": "human"}, "source"), ({"state": "RUNNING", "source": ""}, "source"),
    ({"state": "ERROR", "err_class": "ERR_OTHER"}, "err_class"), ({"state": "ERROR", "err_class": ""}, "err_class"),
])
def test_mark_refuses_unknown_values_and_leaves_the_record_as_it_was(store, kw, word):
    job_id = new(store)["id"]
    before = raw(store, job_id)
    with pytest.raises(TaoBrevError) as failed:
        store.mark(job_id, **kw)
    assert failed.value.code == "BAD_ARGUMENT" and word in failed.value.message
    assert raw(store, job_id) == before


def test_every_known_state_source_and_class_is_accepted(store):
    for state in records.STATES[1:]:
        for source in records.SOURCES:
            job_id = new(store)["id"]
            rec = store.mark(job_id, state, source=source, err_class="ERR_PROGRAM" if state == "ERROR" else None)
            assert rec["transitions"][-1]["state"] == state and rec["transitions"][-1]["source"] == source
            validate("job_record", rec)
    job_id = new(store)["id"]
    assert store.mark(job_id, "ERROR", err_class="ERR_INFRA")["err_class"] == "ERR_INFRA"


def test_mark_of_an_unknown_job_is_unknown_job(store):
    new(store)
    with pytest.raises(TaoBrevError) as failed:
        store.mark("nope-train-000000", "RUNNING")
    assert failed.value.code == "UNKNOWN_JOB"


# -- mark: transitions and terminal immutability ---------------------------------
def test_a_transition_is_appended_with_its_fields(store):
    job_id = new(store)["id"]
    rec = store.mark(job_id, "RUNNING", message="started", source="poller", backend_ref="box/c1")
    last = rec["transitions"][-1]
    assert (last["state"], last["message"], last["source"]) == ("RUNNING", "started", "poller")
    assert rec["backend_ref"] == "box/c1" and rec["terminal_state"] is None and "err_class" not in rec
    assert store.load(job_id) == rec and records.current_state(rec) == "RUNNING"
    rec = store.mark(job_id, "UNKNOWN")   # no backend_ref: the known one stays
    assert rec["backend_ref"] == "box/c1" and rec["transitions"][-1]["message"] == ""


def test_a_terminal_mark_records_who_wrote_it(store):
    job_id = new(store)["id"]
    rec = store.mark(job_id, "ERROR", source="poller", err_class="ERR_INFRA", backend_ref="box/c1")
    assert (rec["terminal_state"], rec["terminal_write_by"], rec["err_class"]) == ("ERROR", "poller", "ERR_INFRA")
    assert store.load(job_id) == rec
    validate("job_record", rec)


@pytest.mark.parametrize("terminal", records.TERMINAL_STATES)
def test_a_terminal_state_refuses_every_other_state(store, terminal):
    job_id = new(store)["id"]
    store.mark(job_id, terminal)
    before = raw(store, job_id)
    for state in records.STATES:
        if state == terminal:
            continue
        with pytest.raises(TaoBrevError) as failed:
            store.mark(job_id, state)
        assert failed.value.code == "TERMINAL_STATE" and terminal in failed.value.message
    assert raw(store, job_id) == before


def test_a_repeated_terminal_mark_only_adds_fields(store):
    job_id = new(store)["id"]
    first = store.mark(job_id, "ERROR", source="poller")
    assert "err_class" not in first and first["backend_ref"] is None
    before = raw(store, job_id)
    same = store.mark(job_id, "ERROR", source="agent", message="again")   # adds nothing: nothing written
    assert raw(store, job_id) == before and same == first
    added = store.mark(job_id, "ERROR", err_class="ERR_INFRA", backend_ref="box/c1")
    assert added["err_class"] == "ERR_INFRA" and added["backend_ref"] == "box/c1"
    assert added["transitions"] == first["transitions"] and added["terminal_write_by"] == "poller"
    assert store.load(job_id) == added
    # present fields are never overwritten, and nothing is rewritten
    before = raw(store, job_id)
    kept = store.mark(job_id, "ERROR", err_class="ERR_PROGRAM", backend_ref="other/c2", source="poller")
    assert kept["err_class"] == "ERR_INFRA" and kept["backend_ref"] == "box/c1"
    assert raw(store, job_id) == before


@pytest.mark.parametrize("field, value, other", [("err_class", "ERR_PROGRAM", "ERR_INFRA"),
                                                 ("backend_ref", "box/c1", "box/c2")])
def test_a_repeated_terminal_mark_adds_each_field_on_its_own(store, field, value, other):
    job_id = new(store)["id"]
    store.mark(job_id, "COMPLETE", **{field: value})
    rec = store.mark(job_id, "COMPLETE", **{field: other})
    assert rec[field] == value and store.load(job_id)[field] == value
    missing = "backend_ref" if field == "err_class" else "err_class"
    fill = "box/c9" if missing == "backend_ref" else "ERR_INFRA"
    rec = store.mark(job_id, "COMPLETE", **{missing: fill})
    assert rec[missing] == fill and rec[field] == value and store.load(job_id) == rec


def test_what_mark_returns_and_writes_is_redacted(store):
    job_id = new(store)["id"]
    secret = "nvapi-SECRETsecret0123456789abcd"
    rec = store.mark(job_id, "ERROR", message=f"NGC_KEY={secret} was refused", backend_ref="box/c1")
    assert secret not in json.dumps(rec) and secret not in raw(store, job_id).decode()
    assert "NGC_KEY=<redacted>" in rec["transitions"][-1]["message"] and rec["backend_ref"] == "box/c1"


def test_uri_fields_keep_their_paths_and_lose_their_secrets(store):
    rec = new(store, results_root=None, results_dir="s3://bucket/token=v1/run")
    assert rec["results_dir"] == "s3://bucket/token=v1/run"
    rec = new(store, results_root=None, results_dir="https://user:hunter2hunter2@host/x")
    assert "hunter2hunter2" not in raw(store, rec["id"]).decode()


# -- reading: required fields, damage, quarantine ------------------------------------
@pytest.mark.parametrize("field", records._REQUIRED)
def test_a_record_missing_a_required_field_is_corrupt_and_quarantined(store, field):
    job_id = new(store)["id"]
    record = json.loads(raw(store, job_id))
    del record[field]
    store.path(job_id).write_text(json.dumps(record))
    with pytest.raises(TaoBrevError) as failed:
        store.load(job_id)
    assert failed.value.code == "CORRUPT_RECORD" and field in failed.value.message
    assert not store.path(job_id).exists() and store.quarantined(job_id) is not None


@pytest.mark.parametrize("text", ["", "[]", "{not json", '"x"', "{}"])
def test_damaged_bytes_are_moved_intact_and_named(store, text):
    job_id = new(store)["id"]
    store.path(job_id).write_text(text)
    with pytest.raises(TaoBrevError) as failed:
        store.mark(job_id, "RUNNING")
    where = store.quarantine_dir / f"{job_id}.json"
    assert failed.value.code == "CORRUPT_RECORD" and str(where) in failed.value.message
    assert "quarantined" in failed.value.message and f"teardown.py {job_id}" in failed.value.fix
    assert failed.value.details["answer"] == {"job_id": job_id}
    assert where.read_text() == text and not store.path(job_id).exists()
    with pytest.raises(TaoBrevError) as again:   # later readers get the same answer
        store.load(job_id)
    assert again.value.code == "CORRUPT_RECORD" and str(where) in again.value.message


def test_a_second_damaged_copy_keeps_the_first(store):
    job_id = new(store)["id"]
    store.path(job_id).write_text("first")
    with pytest.raises(TaoBrevError):
        store.load(job_id)
    store.path(job_id).write_text("second")
    with pytest.raises(TaoBrevError):
        store.load(job_id)
    assert (store.quarantine_dir / f"{job_id}.json").read_text() == "first"
    assert [p.read_text() for p in store.quarantine_dir.glob(f"{job_id}.*.damaged")] == ["second"]


def test_quarantine_of_an_intact_record_moves_nothing(store):
    job_id = new(store)["id"]
    assert store.quarantine(job_id) is None and store.load(job_id)["id"] == job_id


def test_closing_a_quarantined_record(store):
    job_id = new(store)["id"]
    assert store.close_quarantined(job_id) is None
    store.path(job_id).write_text("junk")
    with pytest.raises(TaoBrevError):
        store.load(job_id)
    closed = store.close_quarantined(job_id)
    assert closed == store.quarantine_dir / "closed" / f"{job_id}.json" and closed.read_text() == "junk"
    assert store.quarantined(job_id) is None and store.closed_quarantine(job_id) == closed
    assert store.close_quarantined(job_id) == closed   # again: where it is
    with pytest.raises(TaoBrevError) as failed:
        store.load(job_id)
    assert failed.value.code == "CORRUPT_RECORD" and "closed by teardown" in failed.value.message
    assert "Nothing to do" in failed.value.fix and store.list() == []


def test_list_is_sorted_names_damage_and_skips_foreign_files(store):
    ids = sorted(new(store)["id"] for _ in range(3))
    store.path(ids[1]).write_text("{broken")
    (store.jobs_dir / "not an id.json").write_text("junk")   # no job id: not ours, left alone
    listed = store.list()
    assert [r["id"] for r in listed] == ids
    assert [r.get("corrupt", False) for r in listed] == [False, True, False]
    bad = listed[1]
    assert bad["quarantined"] == str(store.quarantine_dir / f"{ids[1]}.json")
    assert bad["error"].startswith(f"the record of {ids[1]} is damaged (")
    assert listed[0] == store.load(ids[0]) and listed[2] == store.load(ids[2])
    assert (store.jobs_dir / "not an id.json").exists()
    again = store.list()   # the quarantined one is still named, once
    assert [r["id"] for r in again] == ids and again[1]["corrupt"] is True
    assert store.quarantined_entries() == [again[1]]


def test_list_of_a_store_never_written_is_empty(tmp_path):
    assert RecordStore(tmp_path / "none").list() == [] and RecordStore(tmp_path / "none").quarantined_entries() == []


def test_current_state_and_terminality():
    assert records.current_state({"transitions": [{"state": "PENDING"}, {"state": "RUNNING"}]}) == "RUNNING"
    assert records.current_state({"transitions": []}) == records.current_state({}) == "UNKNOWN"
    assert [s for s in records.STATES if records.is_terminal(s)] == ["COMPLETE", "ERROR", "CANCELED"]
    assert records.is_terminal(None) is False


# -- what each answer says, and the less travelled paths ------------------------------------------
def test_the_answers_name_the_job_the_file_and_the_fix(store, tmp_path):
    job_id = new(store)["id"]
    with pytest.raises(TaoBrevError) as failed:
        store.load("nope-train-000000")
    assert failed.value.message == f"no job record for 'nope-train-000000' in {store.jobs_dir}"
    with pytest.raises(TaoBrevError) as failed:
        store.mark(job_id, "BOGUS")
    assert failed.value.message == "unknown state 'BOGUS'; one of PENDING, RUNNING, COMPLETE, ERROR, CANCELED, UNKNOWN"
    with pytest.raises(TaoBrevError) as failed:
        store.mark(job_id, "RUNNING", source="me")
    assert failed.value.message == "unknown source 'me'; one of agent, poller, backend-hook"
    with pytest.raises(TaoBrevError) as failed:
        store.mark(job_id, "ERROR", err_class="ERR_X")
    assert failed.value.message == "unknown err_class 'ERR_X'"
    store.mark(job_id, "CANCELED")
    with pytest.raises(TaoBrevError) as failed:
        store.mark(job_id, "RUNNING")
    assert failed.value.message == f"job {job_id} is terminal (CANCELED); refusing transition to RUNNING"
    (tmp_path / "file").write_text("x")
    with pytest.raises(TaoBrevError) as failed:
        new(RecordStore(tmp_path / "file"))
    assert failed.value.message == f"not a directory: {tmp_path / 'file'}"
    assert new(store)["transitions"][0]["message"] == "record opened before launch"


def test_the_damage_answers_in_full(store):
    job_id = new(store)["id"]
    path = store.path(job_id)
    path.write_text("{not json")
    with pytest.raises(TaoBrevError) as failed:
        store.load(job_id)
    where = store.quarantine_dir / f"{job_id}.json"
    assert failed.value.message.startswith(f"the record of {job_id} is damaged ({path} is not valid JSON: ")
    assert failed.value.message.endswith(f"); quarantined so that it blocks no other job: {where}")
    assert failed.value.fix == (f"Run teardown.py {job_id}: it removes any container of the job (its instance is in "
                                "the sidecar) and closes the record; then submit again if the job is still wanted. "
                                f"The damaged bytes are kept in {where}.")
    with pytest.raises(TaoBrevError) as failed:
        store.load(job_id)
    assert failed.value.message == (f"the record of {job_id} is damaged (it was damaged); quarantined so that it "
                                    f"blocks no other job: {where}")
    assert store.quarantined_entries()[0]["error"] == failed.value.message
    closed = store.close_quarantined(job_id)
    with pytest.raises(TaoBrevError) as failed:
        store.load(job_id)
    assert failed.value.message == (f"the record of {job_id} is damaged (it was damaged); closed by teardown: "
                                    f"nothing of this job is left to remove: {closed}")
    assert failed.value.fix == (f"Nothing to do for {job_id}; submit again (--retry-of cannot name it) if the job is "
                                "still wanted.")
    other = new(store)["id"]
    record = json.loads(raw(store, other))
    del record["image"], record["action"]
    store.path(other).write_text(json.dumps(record))
    listed = {r["id"]: r for r in store.list()}
    assert f"{store.path(other)} misses required fields: image, action" in listed[other]["error"]


def test_an_upper_case_arch_keeps_its_case_in_the_id(store):
    assert new(store, network_arch="DINO", action="Train")["id"].startswith("DINO-Train-")


def test_paths_and_uris_keep_their_shape_and_other_fields_are_redacted_whole(store):
    uri = "s3://bucket/run?token=abcdefgh12345678"   # full redaction would cut the query value
    rec = new(store, results_root=None, results_dir=uri, image="registry.example/token=abcdefgh12345678:1",
              upload_excludes=["token=abcdefgh12345678"])
    stored = store.load(rec["id"])
    assert stored["results_dir"] == uri and stored["image"] == "registry.example/token=abcdefgh12345678:1"
    assert stored["upload_excludes"] == ["token=<redacted>"]
    rec = store.mark(rec["id"], "RUNNING", message="token=abcdefgh12345678", backend_ref="box/c?token=abcdefgh12345678")
    assert rec["transitions"][-1]["message"] == "token=<redacted>"
    assert rec["backend_ref"] == "box/c?token=abcdefgh12345678"
    assert store.load(rec["id"]) == rec


def test_a_repeated_terminal_mark_that_adds_nothing_writes_nothing(store):
    job_id = new(store)["id"]
    store.mark(job_id, "COMPLETE", err_class="ERR_INFRA", backend_ref="box/c1")
    inode = store.path(job_id).stat().st_ino
    store.mark(job_id, "COMPLETE", err_class="ERR_PROGRAM", backend_ref="box/c2")
    store.mark(job_id, "COMPLETE")
    assert store.path(job_id).stat().st_ino == inode   # an atomic write would have replaced the file


def test_a_record_repaired_while_it_was_being_quarantined_is_read(store, monkeypatch):
    ids = sorted(new(store)["id"] for _ in range(3))
    real = RecordStore._parse
    failures = {ids[0]: 1}

    def flaky(path, text):   # the first read of ids[0] sees a half-written file (another tool's writer)
        stem = Path(path).stem   # the listing passes a str, load a Path
        if failures.get(stem):
            failures[stem] -= 1
            raise TaoBrevError("CORRUPT_RECORD", "half written")
        return real(path, text)

    monkeypatch.setattr(RecordStore, "_parse", staticmethod(flaky))
    assert [r["id"] for r in store.list()] == ids and not store.quarantine_dir.exists()
    assert all("corrupt" not in r for r in store.list())
    failures[ids[1]] = 1
    assert store.load(ids[1])["id"] == ids[1] and not store.quarantine_dir.exists()


def test_quarantine_of_a_record_already_moved_answers_where_it_is(store):
    job_id = new(store)["id"]
    store.path(job_id).unlink()
    target = store.quarantine_dir / f"{job_id}.json"
    assert store.quarantine(job_id) == target and not target.exists()   # nothing to move
    target.parent.mkdir(parents=True)
    target.write_text("junk")
    assert store.quarantine(job_id) == target
    closed = store.close_quarantined(job_id)
    assert store.quarantine(job_id) == closed


def test_a_second_damaged_copy_gets_a_short_random_suffix(store):
    import re

    job_id = new(store)["id"]
    for text in ("first", "second"):
        store.path(job_id).write_text(text)
        with pytest.raises(TaoBrevError):
            store.load(job_id)
    names = [p.name for p in store.quarantine_dir.iterdir() if p.suffix == ".damaged"]
    assert len(names) == 1 and re.fullmatch(re.escape(job_id) + r"\.[0-9a-f]{6}\.damaged", names[0])


def test_list_sweeps_the_temp_files_of_killed_writers(store):
    job_id = new(store)["id"]
    stale = store.jobs_dir / f".{job_id}.json.999999999.0123abcd.tmp"   # no such process
    stale.write_text("{")
    assert [r["id"] for r in store.list()] == [job_id] and not stale.exists()


def test_the_store_defaults_to_the_state_dir_of_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "st"))
    assert RecordStore().root == tmp_path / "st" and RecordStore().jobs_dir == tmp_path / "st" / "jobs"
    assert RecordStore(tmp_path / "x").root == tmp_path / "x"


def test_eight_id_collisions_in_a_row_are_refused(store, monkeypatch):
    class Same:
        hex = "abcdef0123456789"

    calls = []
    from types import SimpleNamespace

    monkeypatch.setattr(records, "uuid", SimpleNamespace(uuid4=lambda: calls.append(1) or Same()))
    first = new(store)
    assert first["id"].endswith("-abcdef") and len(calls) == 1
    with pytest.raises(TaoBrevError) as failed:
        new(store)
    assert (failed.value.code, failed.value.message) == ("BAD_ARGUMENT", "could not reserve a fresh job id")
    assert len(calls) == 1 + 8 and store.load(first["id"]) == first


@pytest.mark.parametrize("kw, message", [
    ({"results_dir": "/r"}, "pass exactly one of results_dir or results_root"),
    ({"image": " "}, "--image must be non-empty"),
    ({"network_arch": ""}, "--network-arch must be non-empty"),
    ({"action": ""}, "--action must be non-empty"),
    ({"storage_tier": "Z"}, "storage tier must be one of A, B, C (got 'Z')"),
])
def test_open_says_which_argument_is_wrong(store, kw, message):
    with pytest.raises(TaoBrevError) as failed:
        new(store, **kw)
    assert failed.value.message == message


def test_state_dir_and_id_answers_in_full():
    for raw_dir, message in (("", "TAO_STATE_DIR is set but empty"),
                             ("rel", "TAO_STATE_DIR must be absolute (got 'rel')")):
        with pytest.raises(TaoBrevError) as failed:
            records.state_root({"TAO_STATE_DIR": raw_dir})
        assert failed.value.message == message
    with pytest.raises(TaoBrevError) as failed:
        records.check_job_id("a b")
    assert failed.value.message == "invalid job id: 'a b'"


@pytest.mark.parametrize("arch, start", [("._x", "x-"), ("dino..", "dino-"), ("x-", "x-train"), ("Dino", "Dino-")])
def test_slugs_lose_leading_and_trailing_punctuation_only(store, arch, start):
    assert new(store, network_arch=arch)["id"].startswith(start)


def test_the_current_state_is_the_last_of_many():
    assert records.current_state({"transitions": [{"state": "PENDING"}, {"state": "RUNNING"},
                                                  {"state": "COMPLETE"}]}) == "COMPLETE"


# -- a record that is JSON but not a record: wrong types and values, unknown fields ---------------------
WRONG = [   # (field, value): every one breaks the record schema
    ("transitions", "garbage"), ("transitions", []), ("transitions", [{}]), ("transitions", ["PENDING"]),
    ("transitions", [{"ts": "2026-11-30T00:00:00+00:00", "state": "DONE", "message": "", "source": "agent"}]),
    ("transitions", [{"ts": 5, "state": "PENDING", "message": "", "source": "agent"}]),
    ("transitions", [{"ts": "yesterday", "state": "PENDING", "message": "", "source": "agent"}]),
    ("transitions", [{"ts": "2026-11-30T00:00:00Z", "state": "PENDING", "message": None, "source": "agent"}]),
    ("transitions", [{"ts": "2026-11-30T00:00:00Z", "state": "PENDING", "message": "", "source": "me"}]),
    ("transitions", [{"ts": "2026-11-30T00:00:00Z", "state": "PENDING", "message": "", "source": "agent", "x": 1}]),
    ("transitions", {"0": "PENDING"}), ("transitions", None),
    ("status", 5), ("created", []), ("state", "RUNNING"),                      # fields no record has
    ("schema_version", 2), ("schema_version", "1"), ("schema_version", True),
    ("id", 7), ("id", "../etc/passwd"), ("platform", "Brev Cloud"), ("platform", None),
    ("backend_ref", 3), ("backend_ref", ["box"]), ("image", ""), ("image", {"name": "x"}), ("network_arch", 1.5),
    ("action", None), ("results_dir", ""), ("results_dir", 0), ("storage_tier", "D"), ("storage_tier", ["A"]),
    ("upload_excludes", "*.tmp"), ("upload_excludes", [1]), ("submitted_at", 1732924800), ("submitted_at", "now"),
    ("terminal_state", "RUNNING"), ("terminal_state", True), ("terminal_write_by", "me"), ("err_class", 1),
    ("retry_of", "../x"), ("parent_job", 5), ("redacted", False), ("redacted", "true"),
]


@pytest.mark.parametrize("field, value", WRONG, ids=[f"{f}={json.dumps(v)[:30]}" for f, v in WRONG])
def test_a_wrongly_typed_record_is_corrupt_quarantined_and_named_like_bad_json(store, field, value):
    job_id = new(store)["id"]
    record = {**json.loads(raw(store, job_id)), field: value}
    text = json.dumps(record)
    store.path(job_id).write_text(text)
    with pytest.raises(Exception) as schema_says:   # the schema itself refuses it: the checks agree with it
        validate("job_record", record)
    assert type(schema_says.value).__name__ == "ValidationError"
    with pytest.raises(TaoBrevError) as failed:
        store.mark(job_id, "RUNNING")
    where = store.quarantine_dir / f"{job_id}.json"
    assert failed.value.code == "CORRUPT_RECORD" and field in failed.value.message, failed.value.message
    assert str(where) in failed.value.message and where.read_text() == text and not store.path(job_id).exists()
    with pytest.raises(TaoBrevError) as again:
        store.load(job_id)
    assert again.value.code == "CORRUPT_RECORD"
    assert [e["id"] for e in store.list() if e.get("corrupt")] == [job_id]


@pytest.mark.parametrize("field", sorted(record_schema.schema()["properties"]))
def test_the_explicit_checks_agree_with_the_schema_on_every_field(store, field):
    """For each field of the schema, a handful of values of every JSON type: the store reads the
    record exactly when the schema says it is valid (the store reads it with jsonschema)."""
    import jsonschema

    base = new(store, parent_job="p-1", retry_of="r-1")
    base.update(terminal_write_by="agent", err_class="ERR_INFRA")
    good = json.loads(json.dumps(base))
    samples = [None, True, False, 0, 1, 1.0, 2, -1, "", "x", "A", "COMPLETE", "agent", "ERR_INFRA", "brev",
               "2026-11-30T00:00:00+00:00", "job-1", [], ["x"], [1], {}, {"a": 1}, good["transitions"],
               good["transitions"] + [{"ts": "2026-11-30T01:00:00Z", "state": "RUNNING", "message": "m",
                                       "source": "poller"}]]
    for value in samples:
        record = {**good, field: value}
        try:
            validate("job_record", record)
            schema_ok = True
        except jsonschema.ValidationError:
            schema_ok = False
        assert (records.record_problem(record) is None) == schema_ok, (field, value)
    assert records.record_problem(good) is None


def test_a_record_that_is_not_utf8_or_nests_too_deep_is_corrupt_not_an_internal_error(store):
    first, second = new(store)["id"], new(store)["id"]
    store.path(first).write_bytes(raw(store, first).replace(b'"train"', b'"tr\xe4in"'))
    store.path(second).write_text("[" * 100_000 + "]" * 100_000)
    for job_id in (first, second):
        with pytest.raises(TaoBrevError) as failed:
            store.load(job_id)
        assert failed.value.code == "CORRUPT_RECORD" and store.quarantined(job_id) is not None


# -- what the store returns is what it wrote: redacted ----------------------------------------------------
def test_open_and_every_mark_return_the_record_redacted(store, monkeypatch):
    value = "Pq7/Lm+Zx3Vb8Nw2Kc"
    monkeypatch.setenv("MYAPP_API_KEY", value)
    opened = new(store, results_root=f"~/runs/{value}", upload_excludes=[f"*{value}*"])
    assert value not in json.dumps(opened) and opened == json.loads(raw(store, opened["id"]))
    running = store.mark(opened["id"], "RUNNING", message=f"token {value}", backend_ref=f"box/{value}")
    done = store.mark(opened["id"], "COMPLETE", message=f"done {value}")
    again = store.mark(opened["id"], "COMPLETE", err_class="ERR_PROGRAM")   # terminal: only enriches
    for record in (running, done, again, store.load(opened["id"])):
        assert value not in json.dumps(record) and "<redacted>" in json.dumps(record)


def test_the_tsv_listing_redacts_a_value_known_only_after_the_record_was_written(state_env, tmp_path):
    from conftest import run_script

    value = "Pq7/Lm+Zx3Vb8Nw2Kc-later"
    store = RecordStore(tmp_path / "state")
    record = new(store, results_root=f"~/runs/{value}")       # written while nothing knew the value
    assert value in raw(store, record["id"]).decode()
    listed = run_script("tao_job_record.py", "list", env={**state_env, "MYAPP_API_KEY": value})
    assert listed.code == 0 and record["id"] in listed.stdout and value not in listed.stdout + listed.stderr
    assert "<redacted>" in listed.stdout


@pytest.mark.parametrize("text, says", [
    (b'{"id": "\xff"}', "is not UTF-8 text"),
    ("[" * 100000 + "]" * 100000, "is not JSON this store can read (RecursionError)"),
    ("1" * 5000, "is not JSON this store can read (ValueError)"),
    ("{not json", "is not valid JSON: "),
])
def test_what_makes_bytes_no_record_is_named_with_the_path(text, says):
    with pytest.raises(TaoBrevError) as failed:
        RecordStore._parse("/s/jobs/x.json", text)
    assert failed.value.code == "CORRUPT_RECORD" and failed.value.message.startswith("/s/jobs/x.json " + says)


def test_an_id_is_the_stores_own_only_under_its_own_name(store, monkeypatch):
    from tao_brev.secrets.values import DEFAULT as known_secrets   # the registry holds the minted ids

    monkeypatch.setattr(known_secrets, "_minted", set())
    record = new(store)
    assert known_secrets._minted == {record["id"]}            # open minted it
    known_secrets._minted.clear()
    text = json.dumps(record)
    RecordStore._parse(f"/elsewhere/{record['id']}x.json", text)
    RecordStore._parse(f"/elsewhere/{record['id']}", text)
    assert known_secrets._minted == set()                     # another name: the id is not the store's
    RecordStore._parse(f"/elsewhere/{record['id']}.json", text)
    assert known_secrets._minted == {record["id"]}


def test_hidden_json_files_are_no_records(store):
    job_id = new(store)["id"]
    for hidden in (".tmp-partial.json", ".json", f".{job_id}.json"):
        (store.jobs_dir / hidden).write_text("{}")
    assert records._json_stems(store.jobs_dir) == {job_id}


@pytest.mark.parametrize("value, slug", [
    ("visual_changenet.", "visual_changenet"), ("-dino-", "dino"), ("a..", "a"), ("x.-.-", "x"),
    ("..a.b-", "a.b"), ("XX", "XX"), ("X.X", "X.X"),
])
def test_a_slug_has_no_leading_or_trailing_dots_or_dashes(value, slug):
    assert records._slug(value) == slug


def test_a_record_problem_names_fields_never_values(store):
    record = new(store)
    odd = "k" * 41
    extra = dict(record, **{"zeta": 1, "alpha": 2, odd: 3, "has space": 4, "b1": 5, "c2": 6, "d3": 7})
    assert records.record_problem(extra) == ("fields the record schema does not have: alpha, b1, c2, d3, "
                                             "(a field with an odd name)")
    assert records.record_problem(dict(record, **{"k" * 40: 1})) == \
        "fields the record schema does not have: " + "k" * 40
    wrong = dict(record, transitions="garbage", image=5)
    problem = records.record_problem(wrong)
    assert problem.startswith("wrongly typed fields: ") and "; " in problem
    assert {part.split(" ")[0] for part in problem[len("wrongly typed fields: "):].split("; ")} == \
        {"image", "transitions"}
    assert "garbage" not in problem and records.record_problem(record) is None


def test_a_listing_tells_known_secrets_the_ids_the_store_holds(store, monkeypatch):
    from tao_brev.secrets.values import DEFAULT as known_secrets   # the registry holds the minted ids

    ids = [new(store)["id"] for _ in range(2)]
    broken = new(store)["id"]
    store.path(broken).write_text("{not json")
    with pytest.raises(TaoBrevError):
        store.load(broken)                        # quarantined: no longer in jobs/
    monkeypatch.setattr(known_secrets, "_minted", set())
    (store.jobs_dir / "notes.txt").write_text("x")
    store.note_held_ids()
    assert known_secrets._minted == set(ids)
