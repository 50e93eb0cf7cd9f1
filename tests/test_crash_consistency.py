"""A script killed at any moment leaves state an agent can recover from.

One deterministic test per kill point: the exact point is reached by a hook
(a patched ``os.link``/``os.replace`` that SIGKILLs its own process, a `brev`
shim that SIGKILLs its caller, a signal sent while it is blocked so that it is
delivered at the first instruction that unblocks it), never by timing. The
seeded random soak over whole runs is ``tests/test_chaos.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, TAO_IMAGE, validate
from tao_brev import credentials, fsio
from tao_brev.docker_state import Observed, from_inspect
from tao_brev.records import RecordStore
from tao_brev.sidecar import SidecarStore
from tao_brev.transport import Brev
from tao_brev.verbs.status import settle_interrupted_cancel


def store(world) -> RecordStore:
    return RecordStore(Path(world.env["TAO_STATE_DIR"]))


def die_at(patch: str, body: str, state_dir: Path) -> subprocess.CompletedProcess:
    """Run ``body`` in a child whose ``os.<patch>`` SIGKILLs it: the exact instant
    before a file would become visible under its final name."""
    code = (f"import os, signal, sys\nsys.path.insert(0, {str(ROOT)!r})\nfrom pathlib import Path\n"
            f"from tao_brev.records import RecordStore\nstore = RecordStore(Path({str(state_dir)!r}))\n"
            f"os.{patch} = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n{body}\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done
    return done


OPEN = ("store.open(image='nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt', network_arch='visual_changenet', "
        "action='train', storage_tier='A', results_root='~/tao-results')")


# -- records: never visible half-written; a damaged one never blocks the others --------
def test_a_record_is_never_visible_before_it_is_complete(tmp_path):
    state = tmp_path / "state"
    die_at("link", OPEN, state)                       # killed at the instant the record would appear
    jobs = state / "jobs"
    assert list(jobs.glob("*.json")) == []             # no empty, no partial record
    assert [p.name for p in jobs.iterdir() if p.name.endswith(".tmp")]   # only the writer's temp file
    assert RecordStore(state).list() == []             # the next reader sweeps the dead writer's temp file
    assert not [p for p in jobs.iterdir() if p.name.endswith(".tmp")]


def test_an_update_killed_before_its_rename_keeps_the_previous_record(tmp_path):
    state = tmp_path / "state"
    job_id = RecordStore(state).open(image=TAO_IMAGE, network_arch="visual_changenet", action="train",
                                     storage_tier="A", results_root="~/tao-results")["id"]
    die_at("replace", f"store.mark({job_id!r}, 'RUNNING', backend_ref='box/{job_id}')", state)
    record = RecordStore(state).load(job_id)
    validate("job_record", record)
    assert [t["state"] for t in record["transitions"]] == ["PENDING"]


def test_create_json_is_exclusive_and_leaves_the_existing_file_alone(tmp_path):
    path = tmp_path / "x.json"
    assert fsio.create_json(path, {"n": 1}) is True
    assert fsio.create_json(path, {"n": 2}) is False
    assert json.loads(path.read_text()) == {"n": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_a_damaged_record_is_quarantined_and_blocks_no_other_job(world):
    """The 0-byte record an older version's SIGKILLed submit left: named with its job id, moved aside
    intact, never failing --all, closed by teardown. Other damage (a cut-off record, one that is no
    object) is read the same way (tests/test_robustness.py test_corrupt_records_are_named_and_kept);
    from there on the quarantine works from the file name alone (tao_brev/record_quarantine.py)."""
    healthy = world.submit(spec=world.spec({"hang": True})).json["job_id"]
    job_id = store(world).open(image=TAO_IMAGE, network_arch="visual_changenet", action="train",
                               storage_tier="A", results_root="~/tao-results")["id"]
    path = store(world).path(job_id)
    path.write_text("")
    res = world.run("poll_status.py", job_id)
    assert res.code == 2 and res.json["error"]["code"] == "CORRUPT_RECORD" and res.json["job_id"] == job_id, res
    validate("poll_status", res.json)
    quarantined = store(world).quarantine_dir / path.name
    assert str(quarantined) in res.json["error"]["message"] and quarantined.read_text() == ""
    assert f"teardown.py {job_id}" in res.json["error"]["fix"]
    for _ in range(2):
        every = world.run("poll_status.py", "--all")
        assert every.code == 0 and [j["job_id"] for j in every.json["jobs"]] == [healthy], every
        assert [q["job_id"] for q in every.json["quarantined"]] == [job_id]
    listed = world.run("tao_job_record.py", "list")
    assert listed.code == 0 and healthy in listed.stdout and job_id in listed.stderr
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and down.json["job_id"] == job_id, down
    validate("teardown", down.json)
    assert "quarantined" not in world.run("poll_status.py", "--all").json
    rerun = world.run("teardown.py", job_id)
    assert rerun.code == 0 and rerun.json["container_removed"] is False, rerun   # safe to repeat
    again = world.run("poll_status.py", job_id)
    assert again.code == 2 and "closed by teardown" in again.json["error"]["message"], again
    assert world.run("poll_status.py", healthy).json["state"] == "RUNNING"


# -- credential files on this machine -------------------------------------------------------
def brev_shim(world, tmp_path: Path, body: str) -> dict:
    """An env whose `brev` runs ``body`` (bash; ``$real`` is the simulator's brev) first."""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    real = shlex.quote(str(world.sim.world.bin_dir / "brev"))
    (shim / "brev").write_text(f"#!/bin/bash\nreal={real}\n{body}\nexec $real \"$@\"\n")
    (shim / "brev").chmod(0o755)
    return {"PATH": f"{shim}{os.pathsep}{world.env['PATH']}"}


def test_a_credential_file_of_a_killed_submit_is_swept_by_the_next_run(world, tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = brev_shim(world, tmp_path, 'if [ "$1" = copy ]; then kill -9 "$PPID"; exit 1; fi')
    res = world.submit("--env", "HF_TOKEN", TMPDIR=str(tmp), HF_TOKEN="hf_" + "x" * 34, **env)
    assert res.code == -signal.SIGKILL and res.stdout == "", res    # killed during `brev copy`
    [left] = list(tmp.glob("tao-cred-*"))
    assert (left / "cred").read_text() == "HF_TOKEN=hf_" + "x" * 34 + "\n"
    helped = world.run("poll_status.py", "--help", TMPDIR=str(tmp))   # only prints: $TMPDIR is not listed
    assert helped.code == 0 and list(tmp.glob("tao-cred-*")) == [left], helped
    after = world.run("poll_status.py", "--all", TMPDIR=str(tmp))   # any script, any verb
    assert after.json is not None and not list(tmp.glob("tao-cred-*")), after


def test_a_live_writers_credential_file_is_never_swept(tmp_path):
    live = tmp_path / "tao-cred-live"
    live.mkdir()
    (live / "cred").write_text("X=1\n")
    fd = os.open(live / credentials.OWNER, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)           # as push() holds it while `brev copy` runs
        dead = tmp_path / "tao-cred-dead"
        dead.mkdir()
        (dead / credentials.OWNER).touch()       # its writer is gone: nobody holds the lock
        (dead / "cred").write_text("X=1\n")
        assert credentials.sweep_local(str(tmp_path)) == [str(dead)]
        assert (live / "cred").exists() and not dead.exists()
    finally:
        os.close(fd)


def test_a_sweep_at_any_step_of_push_leaves_its_credential_alone(tmp_path, monkeypatch):
    """Another script's start sweeps $TMPDIR while push() writes: a sweep run at each
    filesystem step of push (before each open, lock and rename) removes nothing of it."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    swept = []
    real = {"open": os.open, "flock": fcntl.flock, "rename": os.rename}
    sweeping = []

    def sweep_then(name):
        def step(*args, **kwargs):
            if not sweeping:
                sweeping.append(1)
                try:
                    swept.extend(credentials.sweep_local(str(tmp_path)))
                finally:
                    sweeping.clear()
            return real[name](*args, **kwargs)
        return step

    class Copier:
        def copy(self, src, dst):
            assert Path(src).read_text() == "X=1\n"

    monkeypatch.setattr(credentials.os, "open", sweep_then("open"))
    monkeypatch.setattr(credentials.os, "rename", sweep_then("rename"))
    monkeypatch.setattr(fcntl, "flock", sweep_then("flock"))   # credentials imports it where it locks
    credentials.push(Copier(), "box", "job", "X=1\n")
    assert swept == [] and not list(tmp_path.glob("tao-cred-*"))


# -- one JSON answer from the script's first line on -----------------------------------------
SCRIPTS = [("submit.py", "--instance", "box"), ("poll_status.py", "--all"), ("teardown.py", "--orphans"),
           ("poll_status.py", "x-train-000000", "--wait", "--teardown"), ("tao_job_record.py", "list"),
           ("preflight.py", "--instance", "box")]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("argv", SCRIPTS, ids=lambda a: " ".join(a))
def test_a_signal_at_the_first_line_gets_one_json_answer(state_env, argv, signum):
    """The signal is sent while blocked (inherited mask), so it arrives at the exact
    instant the script's first line installs the handler and unblocks it."""
    def block():
        signal.pthread_sigmask(signal.SIG_BLOCK, {signum})

    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / argv[0]), *argv[1:]], env=state_env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=block)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    answer = json.loads(out)
    validate("error", answer)
    assert answer["error"]["code"] == "INTERRUPTED" and "nothing was done" in answer["error"]["message"]
    assert "Traceback" not in err


def test_a_signal_during_the_reexec_into_the_bundle_environment_is_answered(state_env, tmp_path):
    """With a bundle .venv, a script started by another interpreter re-executes itself.
    Here the "venv python" signals itself before it runs the script: the signal mask
    crosses execve, so the signal waits for the new process's handler (else exit -15)."""
    bundle = tmp_path / "bundle"
    (bundle / "scripts").mkdir(parents=True)
    (bundle / "scripts" / "_bootstrap.py").write_text((ROOT / "scripts" / "_bootstrap.py").read_text())
    probe = bundle / "scripts" / "probe.py"
    probe.write_text("import _bootstrap\n_bootstrap.setup()\nprint('not interrupted')\n")
    marker = tmp_path / "reexec"
    venv_python = bundle / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.write_text(f"#!{sys.executable}\nimport os, signal, sys\nopen({str(marker)!r}, 'w').close()\n"
                           "os.kill(os.getpid(), signal.SIGTERM)\n"
                           "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n")
    venv_python.chmod(0o755)
    env = {k: v for k, v in state_env.items() if k != "TAO_BREV_NO_REEXEC"}
    done = subprocess.run([sys.executable, str(probe)], env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert marker.exists(), done                         # it did re-exec
    assert done.returncode == 130 and json.loads(done.stdout)["error"]["code"] == "INTERRUPTED", done


def test_a_tool_importing_a_script_keeps_its_own_signal_handlers():
    """Whatever they were: Python's defaults, or SIGINT ignored (a shell's `&` without job control)."""
    code = (f"import signal, sys\nsys.path.insert(0, {str(ROOT / 'scripts')!r})\n"
            "before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)\nimport _bootstrap\n"
            "print(signal.getsignal(signal.SIGTERM) == before[0], signal.getsignal(signal.SIGINT) == before[1])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "True"], done


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "Ctrl-C to the process group"])
def test_an_interrupted_wait_names_its_job_its_state_and_the_command_that_resumes_it(world, tmp_path, how):
    """A tool timeout (SIGTERM), a SIGINT, or a terminal's Ctrl-C (SIGINT to every process of the
    foreground group: brev too, mid-poll) all answer INTERRUPTED with the job, its last known state and
    the exact poll command that resumes the wait - never advice about submit."""
    job_id = world.submit(spec=world.spec({"hang": True})).json["job_id"]
    log = tmp_path / "wait.err"
    argv = [job_id, "--wait", "--interval", "0.1"]
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "poll_status.py"), *argv], env=world.env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, text=True,
                                start_new_session=True)
        deadline = time.monotonic() + 90
        while "next poll in" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "gave up waiting for the first poll"
            time.sleep(0.05)
        if how == "SIGTERM":
            proc.send_signal(signal.SIGTERM)
        elif how == "SIGINT":
            proc.send_signal(signal.SIGINT)
        else:
            os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    answer = json.loads(out)
    validate("poll_status", answer)
    assert answer["job_id"] == job_id and answer["error"]["code"] == "INTERRUPTED", answer
    assert answer["state"] == "RUNNING", answer
    resume = shlex.join([str(ROOT / "scripts" / "poll_status.py"), *argv])
    assert answer["next"] == resume and resume in answer["error"]["fix"], answer
    assert "submit" not in answer["error"]["fix"].lower(), answer


# -- codes from facts ------------------------------------------------------------------------
def test_a_removed_container_is_container_gone_and_wait_teardown_closes_it(world):
    job_id = world.submit(spec=world.spec({"hang": True})).json["job_id"]
    Brev(env=world.env).run("box", f"docker rm -f {job_id}")       # "no such container on the instance"
    wait = world.run("poll_status.py", job_id, "--wait", "--interval", "0.1")
    assert wait.code == 1 and wait.json["error"]["code"] == "CONTAINER_GONE", wait
    assert wait.json["observed"]["gone"] == "container"
    validate("poll_status", wait.json)
    for _ in range(2):   # every rerun carries the job to its end, never skipped
        both = world.run("poll_status.py", job_id, "--wait", "--teardown", "--interval", "0.1")
        assert "teardown" in both.json and "teardown_skipped" not in both.json, both
        validate("poll_status", both.json)
    assert store(world).load(job_id)["terminal_state"] == "CANCELED"


# -- submit: every answer after the record opened names it -----------------------------------
def test_a_failed_credential_copy_answers_with_the_job_id(world, tmp_path):
    env = brev_shim(world, tmp_path, 'if [ "$1" = copy ]; then echo "scp: connection closed" >&2; exit 1; fi')
    res = world.submit("--env", "HF_TOKEN", HF_TOKEN="hf_" + "y" * 34, **env)
    validate("submit", res.json)
    job_id = res.json["job_id"]
    assert res.code == 3 and res.json["error"]["code"] == "BREV_FAILED" and res.json["state"] == "ERROR", res
    assert f"--retry-of {job_id}" in res.json["error"]["fix"]
    assert store(world).load(job_id)["terminal_state"] == "ERROR"
    assert world.sim.docker_run_count("box", job_id) == 0


# -- teardown: the intent to cancel is recorded before acting --------------------------------
def test_a_teardown_killed_after_the_removal_is_closed_canceled(world, tmp_path):
    job_id = world.submit(spec=world.spec({"hang": True})).json["job_id"]
    env = brev_shim(world, tmp_path, f'if [[ "$*" == *"docker rm -f"* ]]; then $real "$@"; kill -9 "$PPID"; exit; fi')
    killed = world.run("teardown.py", job_id, **env)
    assert killed.code == -signal.SIGKILL and world.sim.container("box", job_id) is None
    assert SidecarStore(Path(world.env["TAO_STATE_DIR"])).load(job_id).cancel["by"] == "teardown"
    res = world.run("poll_status.py", job_id, "--wait", "--teardown", "--interval", "0.1")
    validate("poll_status", res.json)
    assert res.json["state"] == "CANCELED" and res.json["teardown"]["ok"], res
    assert store(world).load(job_id)["terminal_state"] == "CANCELED"


@pytest.mark.parametrize("recovery", ["poll_status.py", "teardown.py"])
def test_a_container_killed_by_an_interrupted_cancel_is_canceled_not_oom(world, tmp_path, recovery):
    job_id = world.submit(spec=world.spec({"hang": True})).json["job_id"]
    env = brev_shim(world, tmp_path, 'if [ "$1" = exec ]; then kill -9 "$PPID"; exit 1; fi')
    assert world.run("teardown.py", job_id, **env).code == -signal.SIGKILL   # intent written, nothing done
    Brev(env=world.env).run("box", f"docker kill {job_id}")      # `docker rm -f` killed it, removal cut short
    world.sim.wait_container("box", job_id)
    assert world.sim.container("box", job_id)["State"]["ExitCode"] == 137
    res = world.run(recovery, job_id)
    record = store(world).load(job_id)
    assert record["terminal_state"] == "CANCELED" and "err_class" not in record, (res, record)
    assert "hint" not in res.json and res.json["state"] == "CANCELED"


def test_only_an_interrupted_cancels_leftovers_become_canceled():
    cancel = {"requested_at": "2026-01-01T00:00:00+00:00", "by": "teardown"}

    def settled(state, intent=cancel):
        observed = from_inspect(state)
        settle_interrupted_cancel(observed, intent)
        return observed.state

    killed = {"Status": "exited", "ExitCode": 137}
    assert settled(killed) == "CANCELED" and settled(None) == "CANCELED"
    assert settled(killed, None) == "ERROR" and settled(None, None) == "UNKNOWN"
    assert settled({**killed, "OOMKilled": True}) == "ERROR"            # the OOM killer, a fact
    assert settled({"Status": "exited", "ExitCode": 1}) == "ERROR"      # the job's own failure
    assert settled({"Status": "exited", "ExitCode": 0}) == "COMPLETE"
    assert settled({"Status": "running"}) == "RUNNING"
    lost = Observed("UNKNOWN", "instance deleted", gone="instance")
    settle_interrupted_cancel(lost, cancel)
    assert lost.state == "UNKNOWN"


@pytest.mark.parametrize("kind", ["fifo", "fifo with a reader", "directory", "link to /dev/zero", "link to a file"])
def test_a_lock_file_that_is_no_regular_file_is_refused_at_once(tmp_path, kind):
    """fsio.locked on a planted FIFO (open would wait for a reader), a directory or a link: UNSAFE_STATE_PATH
    naming the lock, never a hang, never an OSError (INTERNAL_ERROR) and never written through."""
    from tao_brev.errors import TaoBrevError

    target = tmp_path / "record.json"
    lock = tmp_path / ".record.json.lock"
    reader = None
    if kind.startswith("fifo"):
        os.mkfifo(lock)
        if kind == "fifo with a reader":
            reader = os.open(lock, os.O_RDONLY | os.O_NONBLOCK)
    elif kind == "directory":
        lock.mkdir()
    else:
        (tmp_path / "elsewhere").write_text("kept")
        lock.symlink_to("/dev/zero" if "zero" in kind else tmp_path / "elsewhere")

    def hung(*_):
        raise AssertionError(f"fsio.locked waits on {kind}")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    try:
        with pytest.raises(TaoBrevError) as info:
            with fsio.locked(target):
                pass
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        if reader is not None:
            os.close(reader)
    assert info.value.code == "UNSAFE_STATE_PATH" and str(lock) in info.value.message
    assert "move" in info.value.fix
    if kind == "link to a file":
        assert (tmp_path / "elsewhere").read_text() == "kept"


def test_a_regular_lock_file_still_locks_and_is_private(tmp_path):
    target = tmp_path / "record.json"
    with fsio.locked(target):
        lock = tmp_path / ".record.json.lock"
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
        with fsio.locked(target):   # re-entrant in one thread
            pass
        probe = os.open(lock, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    with fsio.locked(target):   # an existing lock file is reused
        pass


def test_a_poll_and_a_teardown_answer_when_the_job_lock_is_a_fifo(world):
    """The breaker's case: the record's sidecar .lock made a FIFO hung poll_status and teardown."""
    res = world.submit(spec=world.spec({"epoch_seconds": 0.02}))
    assert res.code == 0, res
    job = res.json["job_id"]
    jobs = Path(world.env["TAO_STATE_DIR"]) / "brev" / "jobs"
    lock = jobs / f".{job}.json.lock"
    with contextlib.suppress(FileNotFoundError):
        lock.unlink()
    os.mkfifo(lock)
    for argv in (("poll_status.py", job), ("teardown.py", job, "--keep-instance")):
        answer = world.run(*argv, timeout=60)
        assert answer.code == 2 and answer.json["error"]["code"] == "UNSAFE_STATE_PATH", answer
        assert str(lock) in answer.json["error"]["message"]
        validate("error", answer.json)
