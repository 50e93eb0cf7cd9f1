"""Supervisor of one simulated container: the part of dockerd + containerd-shim we need.

``python container_runner.py CONTAINER_DIR`` (started by ``docker run -d`` in
its own session) runs the entrypoint recorded in ``config.json`` as a real
process in its own process group, records the pid, copies its stdout and
stderr into the json-file log, waits, and writes the final ``.State``
(``Status: exited``, ``ExitCode`` = 128 + signal when killed, ``OOMKilled`` when
the entrypoint left the oom marker before being SIGKILLed) atomically.

``docker run`` without ``-d`` forks a supervisor in its own session (the daemon's side: it runs
the container to its end and removes it with ``--rm`` whoever is still attached, as moby's
AutoRemove does) and passes it pipes, so the output also streams to the attached CLI while it lives.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from containers import ContainerStore, empty_state
from simstate import now_iso as sim_now_iso, world_from_home, write_json_atomic


def supervise(cdir: Path, out=None, err=None) -> int:
    """Run the container's entrypoint to completion; return its Docker exit code. ``out``/``err``:
    binary streams of an attached CLI that get each line too (dropped once the CLI is gone)."""
    cdir = Path(cdir)
    store = ContainerStore(cdir.parent.parent)
    cid = cdir.name
    config = store.config(cid)
    plan = config["_sim"]
    offset = 0.0   # the instance's clock error (simctl add_instance(clock_offset_s=...)): docker's times use it
    try:
        world, instance = world_from_home(str(cdir / "home"))
        world.audit("container", plan["logical_argv"], instance, stdin_is_tty_or_chardev=True,
                    container=config.get("Name", "").lstrip("/"), image=config["Config"]["Image"])
        offset = float((world.instance(instance) or {}).get("clock_offset_s") or 0.0)
    except SystemExit:
        pass

    def now_iso() -> str:
        return sim_now_iso(offset)

    try:
        child = subprocess.Popen(plan["argv"], env=plan["env"], cwd=plan["cwd"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        state = empty_state("exited")
        state.update(ExitCode=126, Error=f"exec: {exc}", FinishedAt=now_iso())
        store.write_state(cid, state)
        return 126
    write_json_atomic(cdir / "proc.json", {
        "supervisor_pid": os.getpid(),
        "supervisor_pgid": os.getpgid(0),
        "pid": child.pid, "pgid": child.pid})
    state = empty_state("running")
    state.update(Pid=child.pid, StartedAt=now_iso())
    store.write_state(cid, state)
    log_lock = threading.Lock()
    log = open(cdir / "container-json.log", "ab")

    # One copy loop per stream, each appending whole lines, as moby's log copier does
    # (daemon/logger/copier.go: one goroutine per source, "Writes are concurrent"): the order of
    # stdout and stderr lines in the log is whichever came first, not the job's.
    def pump(stream, name: str, target) -> None:
        for line in iter(stream.readline, b""):
            record = {"log": line.decode("utf-8", "replace"), "stream": name, "time": now_iso()}
            with log_lock:
                log.write((json.dumps(record) + "\n").encode("utf-8"))
                log.flush()
            if target is not None:
                try:
                    target.write(line)
                    target.flush()
                except OSError:   # the attached CLI went away: the container runs on, logged
                    target = None

    threads = [threading.Thread(target=pump, args=(child.stdout, "stdout", out)),
               threading.Thread(target=pump, args=(child.stderr, "stderr", err))]
    for thread in threads:
        thread.start()
    returncode = child.wait()
    for thread in threads:
        thread.join()
    log.close()
    exit_code = returncode if returncode >= 0 else 128 - returncode
    final = store.state(cid) if cdir.is_dir() else state
    final.update(Status="exited", Running=False, Paused=False, Restarting=False, Pid=0,
                 ExitCode=exit_code, OOMKilled=(cdir / "oom").exists() and exit_code == 137,
                 FinishedAt=now_iso())
    store.write_state(cid, final)
    return exit_code


def remove_if_auto(cdir: Path) -> None:
    """moby's AutoRemove (``--rm``): the daemon deletes the container once it has exited."""
    config = ContainerStore(cdir.parent.parent).config(cdir.name)
    if (config.get("HostConfig") or {}).get("AutoRemove"):
        shutil.rmtree(cdir, ignore_errors=True)


def main(argv: list[str]) -> int:
    cdir = Path(argv[0])
    supervise(cdir)
    remove_if_auto(cdir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
