"""Seeded chaos: kill each script at random moments, recover as an agent would, check the invariants.

Each iteration picks (from a seeded ``random.Random``) a script - ``submit.py``,
``poll_status.py JOB --wait``, ``teardown.py JOB`` or ``poll_status.py JOB
--wait --teardown`` -, a signal (SIGKILL, SIGTERM, SIGINT) and a moment (one
time in three within the first 0.2 s, while Python imports; otherwise anywhere
in a span that covers the whole run). The job it works on runs on the
simulator; the submit carries a credential (``--env``), so kill points fall
inside ``brev copy`` too. After the kill, and once every ``brev`` process it
started has ended (a SIGKILLed script leaves them running), the agent's
recovery runs: a killed submit is never repeated - the job is polled, then
``--wait --teardown``; any other killed command is run again as it was (they
are safe to repeat). Then, over every job so far:

* at most one ``docker run`` per job id;
* every record parses and validates; none is PENDING or UNKNOWN; none is damaged;
* no credential file on this machine (``$TMPDIR/tao-cred-*``) or the instance (``~/.tao-cred-*``);
* no container without a record;
* every run not killed by SIGKILL printed exactly one JSON document, with a
  documented exit code; an interrupted submit that opened a record names it.
  (A signal that arrives while the interpreter starts, before the script's
  first line installed its handlers - seen in /proc's ``SigCgt`` as the signal
  is sent - kills it with nothing done: no record, no output.)

One iteration in three runs with flaky ssh (dropped connections, before or
after the remote command ran); the recovery then runs with a healthy transport.

The moments are random, the assertions are not: each holds at every kill point.
CI runs a few iterations; a long soak sets the knobs (also in README.md):

    TAO_CHAOS_ITERATIONS=200 TAO_CHAOS_SEED=7 .venv/bin/python -m pytest -q tests/test_chaos.py
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT, validate
from tao_brev.records import RecordStore, current_state

ITERATIONS = int(os.environ.get("TAO_CHAOS_ITERATIONS", "4"))
SEED = int(os.environ.get("TAO_CHAOS_SEED", "20"))
SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT)
EXIT_CODES = {0, 1, 2, 3, 130}
SCRIPTS = ("submit", "wait", "teardown", "wait_teardown")
# seconds that cover a whole run of each script against the simulator (a kill later than
# the run's end just lets it finish: that run's answer is checked like the others)
SPAN_S = {"submit": 3.0, "wait": 3.0, "teardown": 2.5, "wait_teardown": 4.0}
SECRET = "hf_" + "chaos" * 7


class Chaos:
    def __init__(self, world, tmp_path: Path):
        self.world = world
        self.tmp = tmp_path / "laptop-tmp"
        self.tmp.mkdir()
        self.env = {**world.env, "TMPDIR": str(self.tmp), "HF_TOKEN": SECRET, "TAO_BREV_RETRY_BACKOFF_S": "0"}
        self.store = RecordStore(Path(world.env["TAO_STATE_DIR"]))
        self.data = world.put_dataset("box")
        self.short = world.spec({"epoch_seconds": 0.05})
        self.hang = world.spec({"hang": True, "epoch_seconds": 0.05})

    def argv(self, script: str, *args: str) -> list[str]:
        return [sys.executable, str(ROOT / "scripts" / script), *args]

    def submit_argv(self, spec: Path) -> list[str]:
        return self.argv("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
                         "visual_changenet", "--action", "train", "--spec", str(spec), "--env", "HF_TOKEN",
                         "--inputs", f"{self.data}=levir_cd_tiny")

    def run(self, argv: list[str]) -> tuple[int, str]:
        done = subprocess.run(argv, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=180)
        one_json(done.returncode, done.stdout, argv)
        return done.returncode, done.stdout

    def submitted(self, spec: Path) -> str:
        code, out = self.run(self.submit_argv(spec))
        assert code == 0, out
        return json.loads(out)["job_id"]

    def killed(self, argv: list[str], signum: int, delay: float) -> tuple[int, str, bool]:
        """(exit status, stdout, whether the script's handlers were installed when the signal was sent)."""
        proc = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        time.sleep(delay)
        handled = True   # a run that ended before the signal must have answered
        if proc.poll() is None:
            handled = catches_sigterm(proc.pid)
            proc.send_signal(signum)
        out, _ = proc.communicate(timeout=180)
        return proc.returncode, out, handled

    def wait_for_brev(self) -> None:
        """Every brev process started so far has ended (orphans of a SIGKILLed script included)."""
        pids = {r["pid"] for r in self.world.sim.audit() if r["tool"] == "brev"}
        deadline = time.monotonic() + 120
        while any(alive(pid) for pid in pids):
            assert time.monotonic() < deadline, "an orphaned brev process never ended"
            time.sleep(0.05)


def catches_sigterm(pid: int) -> bool:
    """The process has a SIGTERM handler (``SigCgt`` in /proc): the script's first line
    (scripts/_bootstrap.py) has run. Python installs none of its own for SIGTERM."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
    return bool(caught & (1 << (signal.SIGTERM - 1)))


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def one_json(code: int, stdout: str, what) -> dict:
    """Exactly one JSON document on stdout and a documented exit code."""
    assert code in EXIT_CODES, (what, code, stdout)
    answer = json.loads(stdout)   # raises on none, two, or a torn document
    assert isinstance(answer, dict) and isinstance(answer.get("ok"), bool), (what, stdout)
    return answer


def check_invariants(chaos: Chaos, note: str) -> None:
    world, store = chaos.world, chaos.store
    ids = set()
    for path in sorted(store.jobs_dir.glob("*.json")):
        record = json.loads(path.read_text())
        validate("job_record", record)
        ids.add(record["id"])
        assert current_state(record) not in ("PENDING", "UNKNOWN"), (note, record)
        assert world.sim.docker_run_count("box", record["id"]) <= 1, (note, record["id"])
    assert not store.quarantine_dir.exists() or not list(store.quarantine_dir.glob("*.json")), note
    assert not list(chaos.tmp.glob("tao-cred-*")), (note, "credential file left on this machine")
    assert not list(world.sim.instance_home("box").glob(".tao-cred-*")), (note, "credential file left on the instance")
    for container in world.sim.containers("box"):
        assert container["Name"].lstrip("/") in ids, (note, "container without a record", container["Name"])


def test_killed_at_random_moments_every_script_leaves_recoverable_state(world, tmp_path):
    chaos = Chaos(world, tmp_path)
    rng = random.Random(SEED)
    for i in range(ITERATIONS):
        script = SCRIPTS[i % len(SCRIPTS)] if i < len(SCRIPTS) else rng.choice(SCRIPTS)
        signum = rng.choice(SIGNALS)
        delay = rng.uniform(0, 0.2) if rng.random() < 1 / 3 else rng.uniform(0, SPAN_S[script])
        note = f"seed {SEED} iteration {i}: {script} {signal.Signals(signum).name} after {delay:.3f} s"
        job_id = None
        if script == "submit":
            argv = chaos.submit_argv(chaos.short)
        else:
            job_id = chaos.submitted(chaos.hang if script == "teardown" else chaos.short)
            argv = {"wait": chaos.argv("poll_status.py", job_id, "--wait", "--interval", "0.2"),
                    "teardown": chaos.argv("teardown.py", job_id),
                    "wait_teardown": chaos.argv("poll_status.py", job_id, "--wait", "--teardown",
                                                "--interval", "0.2")}[script]
        before = {p.stem for p in chaos.store.jobs_dir.glob("*.json")} if chaos.store.jobs_dir.exists() else set()
        flaky = rng.random() < 1 / 3
        if flaky:   # ssh drops connections while the script runs (brev retries once; times=2 breaks that too)
            world.sim.add_fault("", rng.choice(("reset_before", "reset_after")), times=rng.choice((1, 2)))
            note += " (flaky ssh)"
        code, out, handled = chaos.killed(argv, signum, delay)
        if flaky:
            with world.sim.world.edit_state() as state:   # recovery runs with a healthy transport
                state["faults"] = []
        if not handled and out == "":
            # signalled while the interpreter started, before the script's first line: nothing ran
            assert {p.stem for p in chaos.store.jobs_dir.glob("*.json")} == before, note
        elif code != -signal.SIGKILL:   # SIGKILL gives no chance to answer; anything else must have
            answer = one_json(code, out, note)
            if script == "submit" and code == 130:
                opened = {p.stem for p in chaos.store.jobs_dir.glob("*.json")} - before
                assert answer.get("job_id") == (opened.pop() if opened else None), (note, answer)
        chaos.wait_for_brev()

        # the agent's recovery
        if script == "submit":
            new = sorted({p.stem for p in chaos.store.jobs_dir.glob("*.json")} - before)
            assert len(new) <= 1, note
            for job in new:
                chaos.run(chaos.argv("poll_status.py", job))
                chaos.run(chaos.argv("poll_status.py", job, "--wait", "--teardown", "--interval", "0.2",
                                     "--timeout", "120"))
        else:
            if script == "wait":
                argv = [*argv, "--timeout", "120"]
            chaos.run(argv)                                   # the killed command, once more
            if script == "wait":
                chaos.run(chaos.argv("teardown.py", job_id))
        chaos.run(chaos.argv("tao_job_record.py", "list", "--json"))   # any later run sweeps local leftovers
        check_invariants(chaos, note)


# -- the recovering script (poll_status.py JOB --wait --recover N), killed at random moments -------
def _attempt_ids(world, store: RecordStore, first: str) -> list[str]:
    """The records linked to ``first`` by retry_of, in chain order. Two attempts may name the same
    job only when one of them never ran a container (a launch a kill left unsettled, closed as never
    launched: the next attempt resumes the same checkpoint); two that ran would be a double launch."""
    by_parent: dict = {}
    for path in store.jobs_dir.glob("*.json"):
        record = json.loads(path.read_text())
        by_parent.setdefault(record.get("retry_of"), []).append(record)
    chain, parent = [first], first
    while by_parent.get(parent):
        children = sorted(by_parent[parent], key=lambda r: r["submitted_at"])
        ran = [r["id"] for r in children if world.sim.docker_run_count("box", r["id"])]
        assert len(ran) <= 1, ("two attempts that ran resume the same job", parent, ran)
        chain += [r["id"] for r in children]
        parent = ran[0] if ran else children[-1]["id"]
    return chain


def _live_containers(world) -> list[str]:
    return [c["Name"] for c in world.sim.containers("box") if (c.get("State") or {}).get("Status") == "running"]


def test_the_recovering_script_killed_at_random_moments_continues_one_chain(world, tmp_path):
    """Two Xids (after epochs 1 and 2 of 3): the chain needs three launched attempts. The recovering
    wait is killed one to three times at random moments (any signal), then run again as it was until it
    answers. Invariants: never two live attempts, at most one ``docker run`` per job, the attempts form
    one line of retry_of links (no fork, no double launch), exactly three attempts ran a container, the
    chain ends COMPLETE with all epochs, and every record is whole and settled."""
    chaos = Chaos(world, tmp_path)
    rng = random.Random(SEED + 1)
    spec = world.spec({"epoch_seconds": 0.05, "xid_after_epochs": [1, 2]}, num_epochs=3)
    for i in range(max(2, ITERATIONS // 2)):
        first = chaos.submitted(spec)
        argv = chaos.argv("poll_status.py", first, "--wait", "--recover", "4", "--interval", "0.2",
                          "--health-wait", "5", "--timeout", "150")
        kills = []
        for _ in range(rng.randint(1, 3)):
            signum, delay = rng.choice(SIGNALS), rng.uniform(0, 3.0)
            kills.append(f"{signal.Signals(signum).name}@{delay:.2f}s")
            code, out, handled = chaos.killed(argv, signum, delay)
            note = f"seed {SEED} recovering iteration {i}: {kills}"
            if code != -signal.SIGKILL and (handled or out):
                one_json(code, out, note)
            chaos.wait_for_brev()
            assert len(_live_containers(world)) <= 1, (note, _live_containers(world))
        code, out = chaos.run(argv)                      # the same command, once more: it continues
        answer = json.loads(out)
        assert code == 0 and answer["state"] == "COMPLETE", (note, answer)
        chain = _attempt_ids(world, chaos.store, first)
        assert sorted(a["job_id"] for a in answer["attempts"]) == sorted(chain), (note, answer["attempts"], chain)
        ran = [job for job in chain if world.sim.docker_run_count("box", job) == 1]
        assert len(ran) == 3 and all(world.sim.docker_run_count("box", j) <= 1 for j in chain), (note, chain)
        assert answer["job_id"] == chain[-1] == ran[-1]
        assert chaos.run(chaos.argv("teardown.py", chain[-1]))[0] == 0
        check_invariants(chaos, note)
