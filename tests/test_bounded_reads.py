"""Every read bounded, the state dir ours: random bytes and special files fed to every reader.

Readers: ``fsio.read_text`` (records, indexes), ``safe_read.read_text`` / ``loads``, the sidecar
store, the record store, the hash cache, the env-proof key, the results manifest, the spec
reader of submit, and ``progress.entries``/``summarize`` (status.json lines). Special files: a
directory, a FIFO (an open would block), a link to ``/dev/zero`` (never ends), a socket, a file
over the cap. No reader crashes (INTERNAL_ERROR), none hangs (each call under a 10 s alarm).
Links inside the state dir are refused (UNSAFE_STATE_PATH) and never chmod-ed through.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tao_brev import fsio, progress, statedir
from tao_brev.secrets import guard as known_secrets, proof as env_proof, safe_read
from tao_brev.errors import TaoBrevError
from tao_brev.s3.hash_cache import HashCache
from tao_brev.records import RecordStore
from tao_brev.sidecar import SidecarStore

JOB = "visual_changenet-train-1a2b3c"


@pytest.fixture(autouse=True)
def _alarm():
    def hung(*_):
        raise TimeoutError("a reader hung")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
    statedir.forget()
    known_secrets.reset()


def _special(kind: str, path: Path) -> None:
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero-link":
        path.symlink_to("/dev/zero")
    elif kind == "dangling-link":
        path.symlink_to(path.parent / "nowhere")
    elif kind == "socket":
        sock, here = socket.socket(socket.AF_UNIX), os.getcwd()
        os.chdir(path.parent)   # a relative name: AF_UNIX paths are at most 107 bytes
        try:
            sock.bind(path.name)
        finally:
            os.chdir(here)
            sock.close()
    elif kind == "huge":
        with open(path, "wb") as fh:
            fh.truncate(safe_read.MAX_STATE_FILE_BYTES + 1)


SPECIAL = ["directory", "fifo", "zero-link", "dangling-link", "socket", "huge"]


def _readers(root: Path):
    """(name, the path it reads, call) of every reader over the state dir."""
    records, sidecars = RecordStore(root), SidecarStore(root)
    from tao_brev.verbs import results

    class Ctx:
        state_root = root

    return [
        ("record load", records.path(JOB), lambda: records.load(JOB)),
        ("record list", records.path(JOB), lambda: records.list()),
        ("sidecar load", sidecars.path(JOB), lambda: sidecars.load(JOB)),
        ("sidecar all", sidecars.path(JOB), lambda: sidecars.all()),
        ("saved logs", sidecars.logs_path(JOB), lambda: sidecars.saved_logs(JOB) or ""),
        ("instance", sidecars.instance_path("box"), lambda: sidecars.instance("box")),
        ("hash cache", root / "brev" / "hash-cache.json", lambda: HashCache(root / "brev" / "hash-cache.json")),
        ("proof key", env_proof.key_path(root), lambda: env_proof.load_key(root)),
        ("results manifest", root / "brev" / "manifests" / f"{JOB}.json", lambda: results._load_manifest(Ctx, JOB)),
    ]


def _expected(exc: BaseException) -> bool:
    """A clear answer: a bundle error (never INTERNAL_ERROR) or an OSError the callers handle."""
    return isinstance(exc, (TaoBrevError, OSError)) and not isinstance(exc, TimeoutError)


@pytest.mark.parametrize("kind", SPECIAL)
def test_every_state_reader_answers_a_special_file(tmp_path, kind):
    root = tmp_path / "state"
    for name, path, call in _readers(root):
        path.parent.mkdir(parents=True, exist_ok=True)
        _special(kind, path)
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - the kind of exception is the assertion
            assert _expected(exc), (name, kind, repr(exc))
            if isinstance(exc, TaoBrevError):
                assert exc.code != "INTERNAL_ERROR"
        finally:
            if path.is_dir() and not path.is_symlink():
                os.rmdir(path)
            elif os.path.lexists(path):
                os.unlink(path)
            for moved in (root / "jobs" / "quarantine").glob("*") if (root / "jobs" / "quarantine").exists() else ():
                if moved.is_dir() and not moved.is_symlink():
                    os.rmdir(moved)
                else:
                    os.unlink(moved)


@pytest.mark.parametrize("kind", SPECIAL)
def test_safe_read_refuses_every_special_file_by_name(tmp_path, kind):
    path = tmp_path / "f"
    _special(kind, path)
    with pytest.raises(OSError) as err:
        safe_read.read_bytes(path)
    if kind != "dangling-link":
        assert isinstance(err.value, safe_read.UnsafeFile) and str(path) in safe_read.describe(err.value)


def test_safe_read_follows_a_link_only_when_told_and_caps_growth(tmp_path):
    target = tmp_path / "t"
    target.write_text("abc")
    (tmp_path / "l").symlink_to(target)
    assert safe_read.read_bytes(tmp_path / "l", follow=True) == b"abc"
    with pytest.raises(safe_read.UnsafeFile):
        safe_read.read_bytes(tmp_path / "l")
    with pytest.raises(safe_read.UnsafeFile):
        safe_read.read_bytes(target, cap=2)
    assert safe_read.read_text(target, cap=3) == "abc"
    (tmp_path / "crlf").write_bytes(b"a\r\nb\rc")
    assert safe_read.read_text(tmp_path / "crlf") == "a\nb\nc"
    assert safe_read.describe(OSError(2, "No such file", "x")) == "x: No such file"


def test_loads_bounds_integers_and_depth():
    assert safe_read.loads("[" + "9" * 5000 + ", -" + "9" * 5000 + ", 12]") == [float("inf"), float("-inf"), 12]
    with pytest.raises(ValueError):
        safe_read.loads("[" * 100000 + "]" * 100000)
    assert safe_read.bounded_int("9" * 300) == int("9" * 300)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4096))
def test_random_bytes_in_every_state_file_never_crash(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("rand") / "state"
    for name, path, call in _readers(root):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        try:
            call()
        except BaseException as exc:  # noqa: BLE001
            assert _expected(exc), (name, repr(exc))


_STATUS_LINE = st.one_of(
    st.text(max_size=200),
    st.builds(lambda n: json.dumps({"epoch": n, "max_epoch": n, "time_per_epoch": n, "eta": n, "status": "RUNNING",
                                    "kpi": {"k": n}}), st.one_of(st.integers(), st.floats(allow_nan=True))),
    st.just('{"epoch": ' + "7" * 5000 + ', "max_epoch": 10}'),
    st.just('{"time_per_epoch": "' + "9" * 5000 + ':00:00", "epoch": 1, "max_epoch": 2}'),
    st.just('{"kpi": {"' + "k" * 100 + '": "' + "v" * 100 + '"}, "status": "' + "S" * 50 + '"}'),
    st.just("[" * 5000),
)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_STATUS_LINE, max_size=8), now=st.floats(min_value=0, max_value=1e12))
def test_any_status_json_lines_summarize_without_error(lines, now):
    file = progress.StatusFile("/results/train/status.json", 1_700_000_000, len("\n".join(lines)))
    file.lines = list(lines)
    out = progress.summarize(file, now, "train")
    assert isinstance(out, dict) and "available" in out
    json.dumps(out)


def test_a_5000_digit_epoch_is_no_fact():
    file = progress.StatusFile("/r/status.json", 1_700_000_000, 10)
    file.lines = ['{"epoch": ' + "7" * 5000 + ', "max_epoch": 10, "status": "RUNNING"}']
    out = progress.summarize(file, 1_700_000_100, "train")
    assert out["available"] and out.get("epoch") is None


@pytest.mark.parametrize("kind", ["directory", "fifo", "zero-link", "huge"])
def test_submit_reads_a_spec_only_when_it_is_a_regular_file(tmp_path, kind):
    from tao_brev.verbs.submit import _read_spec

    path = tmp_path / "spec.yaml"
    _special(kind, path)
    with pytest.raises(TaoBrevError) as err:
        _read_spec(str(path))
    assert err.value.code in ("SPEC_NOT_FOUND", "BAD_SPEC")


@pytest.mark.parametrize("inside", ["jobs", "brev", "brev/logs", "brev/jobs", "brev/results"])
def test_a_link_inside_the_state_dir_is_refused_and_never_chmod_ed(tmp_path, inside):
    root = tmp_path / "state"
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o777)
    os.chmod(outside, 0o777)
    link = root / inside
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    statedir.note_root(root)
    sidecars = SidecarStore(root)
    with pytest.raises(TaoBrevError) as err:
        if inside == "jobs":
            RecordStore(root).open(image="i", network_arch="a", action="t", storage_tier="A", results_root="/r")
        elif inside == "brev/logs":
            sidecars.save_logs(JOB, "line\n")
        elif inside == "brev/results":
            fsio.private_dir(root / "brev" / "results" / JOB)
        else:
            sidecars.update(JOB, instance="box")
    assert err.value.code == "UNSAFE_STATE_PATH" and str(link) in err.value.message
    assert stat.S_IMODE(outside.stat().st_mode) == 0o777 and list(outside.iterdir()) == []


def test_a_linked_state_root_is_used_but_never_chmod_ed(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o755)
    os.chmod(real, 0o755)
    root = tmp_path / "root"
    root.symlink_to(real)
    statedir.note_root(root)
    fsio.private_dir(root)
    assert stat.S_IMODE(real.stat().st_mode) == 0o755
    fsio.private_dir(root / "brev")
    assert stat.S_IMODE((real / "brev").stat().st_mode) == 0o700


def test_check_inside_walks_only_below_the_root_and_remembers_clean_dirs(tmp_path):
    root = tmp_path / "s"
    (root / "a" / "b").mkdir(parents=True)
    statedir.check_inside(root, root / "a" / "b" / "c.json")
    assert str(root / "a") in statedir._clean
    statedir.check_inside(root, tmp_path / "elsewhere" / "x")   # outside: nothing to check
    (root / "f").write_text("x")
    with pytest.raises(TaoBrevError) as err:
        statedir.check_inside(root, root / "f" / "g")
    assert "not a directory" in err.value.message
    (root / "l").symlink_to(root / "a")
    statedir.check_inside(root, root / "l", last=False)   # the last component: O_NOFOLLOW's business
    with pytest.raises(TaoBrevError):
        statedir.check_inside(root, root / "l")


def test_state_roots_come_from_the_environment_and_the_stores(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "env-root"))
    assert str(tmp_path / "env-root") in statedir.roots()
    assert statedir.root_of(tmp_path / "env-root" / "jobs" / "x.json") == str(tmp_path / "env-root")
    assert statedir.root_of(tmp_path / "other") is None
    monkeypatch.setenv("TAO_STATE_DIR", "relative")
    assert all(os.path.isabs(r) for r in statedir.roots())
    monkeypatch.delenv("TAO_STATE_DIR")
    assert os.path.abspath(os.path.expanduser("~/.tao")) in statedir.roots()


@pytest.mark.parametrize("kind", ["directory", "fifo", "zero-link"])
def test_a_saved_log_that_is_no_file_is_named_not_read(tmp_path, kind):
    sidecars = SidecarStore(tmp_path / "state")
    path = sidecars.logs_path(JOB)
    path.parent.mkdir(parents=True)
    _special(kind, path)
    assert sidecars.saved_logs(JOB).startswith(f"[tao-brev: the saved log could not be read: {path} is ")


@pytest.mark.parametrize("kind", ["directory", "fifo", "zero-link", "huge"])
def test_versions_yaml_and_the_record_index_are_read_bounded(tmp_path, kind, monkeypatch):
    from tao_brev import bank, record_index

    bank_dir = tmp_path / "bank"
    bank_dir.mkdir()
    _special(kind, bank_dir / "versions.yaml")
    with pytest.raises(TaoBrevError) as err:
        bank.load_versions({"TAO_SKILL_BANK_PATH": str(bank_dir)})
    assert err.value.code == "VERSIONS_FILE"
    index = record_index.index_path(tmp_path / "state")
    index.parent.mkdir(parents=True)
    _special(kind, index)
    assert record_index._load(index) == {}


def test_a_fifo_owner_file_never_blocks_the_credential_sweep(tmp_path):
    from tao_brev import credentials

    box = tmp_path / f"{credentials.LOCAL_PREFIX}x"
    box.mkdir()
    os.mkfifo(box / credentials.OWNER)
    credentials.sweep_local(tmp_path)   # answers (the alarm of this module catches a hang)


def test_a_state_dir_that_is_a_file_or_holds_a_file_for_a_directory_is_named(tmp_path):
    root = tmp_path / "file-root"
    root.write_text("x")
    with pytest.raises(TaoBrevError) as err:
        statedir.check_inside(root, root / "jobs" / "a.json")
    assert err.value.code == "BAD_STATE_DIR"
    statedir.check_inside(tmp_path / "absent", tmp_path / "absent" / "jobs" / "a.json")   # made later
    root = tmp_path / "s"
    root.mkdir()
    (root / "jobs").write_text("x")
    with pytest.raises(TaoBrevError) as err:
        statedir.check_inside(root, root / "jobs" / "a.json", last=False)
    assert err.value.code == "UNSAFE_STATE_PATH" and "jobs is not a directory" in err.value.message
    statedir.check_inside(root, root / "jobs", last=False)
    statedir.check_inside(root, root / "jobs")   # a file as the last component: the opener's business
