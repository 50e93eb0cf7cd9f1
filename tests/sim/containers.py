"""Simulated Docker containers of one instance: on-disk store, processes, views.

A container is a directory ``DOCKER_DIR/containers/<64-hex id>/`` holding

- ``config.json``  what ``docker run`` decided (Name, Config, HostConfig, Mounts)
  plus a private ``_sim`` block (the host argv, env and cwd to execute);
- ``state.json``   Docker's ``.State`` (written atomically by the supervisor);
- ``proc.json``    supervisor pid and the entrypoint's pid / process group;
- ``container-json.log``  Docker's json-file log driver format, one
  ``{"log","stream","time"}`` object per line;
- ``home/``        the container's ``$HOME`` (how remote tools find the container);
- ``rootfs/``      container paths not covered by a mount (lost on ``rm``);
- ``oom``          marker written by an entrypoint that "gets OOM-killed".

Views follow the Docker Engine API (``docker inspect`` JSON, ``docker ps``
format fields) as documented in the Docker CLI reference.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from simstate import locked, now_iso, parse_iso, pid_alive, read_json, write_json_atomic

ZERO_TIME = "0001-01-01T00:00:00Z"

_ADJECTIVES = ["brave", "calm", "eager", "focused", "gallant", "happy", "keen", "nifty", "quirky", "sharp"]
_SURNAMES = ["turing", "hopper", "lovelace", "curie", "noether", "shannon", "ritchie", "knuth", "dijkstra"]


def empty_state(status: str = "created") -> dict:
    return {"Status": status, "Running": status == "running", "Paused": status == "paused",
            "Restarting": status == "restarting", "OOMKilled": False, "Dead": status == "dead",
            "Pid": 0, "ExitCode": 0, "Error": "", "StartedAt": ZERO_TIME, "FinishedAt": ZERO_TIME}


class ContainerStore:
    """All containers of one instance's Docker root dir."""

    def __init__(self, docker_dir: Path):
        self.docker_dir = Path(docker_dir)
        self.containers_dir = self.docker_dir / "containers"
        self.lock_file = self.docker_dir / ".lock"

    # lookup ------------------------------------------------------------
    def ids(self) -> list[str]:
        if not self.containers_dir.is_dir():
            return []
        found = [p.name for p in self.containers_dir.iterdir() if (p / "config.json").is_file()]
        return sorted(found, key=lambda cid: self.config(cid).get("Created", ""), reverse=True)

    def dir(self, cid: str) -> Path:
        return self.containers_dir / cid

    def config(self, cid: str) -> dict:
        return read_json(self.dir(cid) / "config.json", {}) or {}

    def find(self, ref: str) -> str | None:
        """Name (with or without '/'), full id or unique id prefix, as the daemon resolves them."""
        if not ref:
            return None
        ids = self.ids()
        if ref in ids:
            return ref
        name = "/" + ref.lstrip("/")
        for cid in ids:
            if self.config(cid).get("Name") == name:
                return cid
        prefixed = [cid for cid in ids if cid.startswith(ref)]
        return prefixed[0] if len(prefixed) == 1 else None

    def name_in_use(self, name: str) -> str | None:
        for cid in self.ids():
            if self.config(cid).get("Name") == "/" + name:
                return cid
        return None

    def free_random_name(self) -> str:
        """A generated name no container holds (caller holds ``self.lock_file``), drawn as moby's
        daemon/names.go generateAndReserveName does: six tries of namesgenerator.GetRandomName(i), which
        appends a random digit from the second try on, then the container's short id (here a random
        12-hex-digit one: the id is made after the name)."""
        import secrets
        for attempt in range(6):
            name = f"{secrets.choice(_ADJECTIVES)}_{secrets.choice(_SURNAMES)}"
            if attempt:
                name += str(secrets.randbelow(10))
            if self.name_in_use(name) is None:
                return name
        return secrets.token_hex(6)

    # state ---------------------------------------------------------------
    def proc(self, cid: str) -> dict:
        return read_json(self.dir(cid) / "proc.json", {}) or {}

    def state(self, cid: str) -> dict:
        """The container's ``.State``, reconciled with the processes that really exist."""
        state = read_json(self.dir(cid) / "state.json") or empty_state()
        if state.get("Status") == "running":
            proc = self.proc(cid)
            if proc and not pid_alive(proc.get("pid")) and not pid_alive(proc.get("supervisor_pid")):
                # The supervisor died before recording the exit (killed with the VM, say).
                state = read_json(self.dir(cid) / "state.json") or state
                if state.get("Status") == "running":
                    state.update(Status="exited", Running=False, Pid=0, ExitCode=137,
                                 FinishedAt=now_iso(), Error="")
                    self.write_state(cid, state)
        return state

    def write_state(self, cid: str, state: dict) -> None:
        if self.dir(cid).is_dir():
            try:
                write_json_atomic(self.dir(cid) / "state.json", state)
            except FileNotFoundError:
                pass  # removed concurrently (docker rm -f)

    def create(self, config: dict) -> str:
        """Reserve a directory for a new container (caller holds ``self.lock_file``)."""
        import secrets
        cid = secrets.token_hex(32)
        cdir = self.dir(cid)
        (cdir / "home").mkdir(parents=True)
        (cdir / "rootfs").mkdir()
        config = dict(config, Id=cid, Created=now_iso())
        config.setdefault("Config", {})["Hostname"] = cid[:12]
        write_json_atomic(cdir / "config.json", config)
        write_json_atomic(cdir / "mounts.json", config.get("Mounts", []))
        write_json_atomic(cdir / "state.json", empty_state())
        return cid

    # processes -----------------------------------------------------------
    def signal(self, cid: str, sig: int) -> bool:
        """Send ``sig`` to the container's PID 1; False if nothing runs.

        The entrypoint is PID 1 of the container's pid namespace, and the
        kernel drops a signal sent to such an init process unless it installed
        a handler (signal(7), pid_namespaces(7)); SIGKILL from the parent
        namespace always lands. So ``docker stop`` of a python or ``sleep``
        entrypoint waits out its timeout and ends 137, not 143 (seen on a real
        engine; moby daemon/stop.go sends the stop signal, then SIGKILL).
        """
        proc = self.proc(cid)
        pgid = proc.get("pgid")
        if not pgid or not self.state(cid).get("Running"):
            return False
        if sig != signal.SIGKILL and not catches(proc.get("pid") or pgid, sig):
            return True   # delivered and ignored, as by a real init process
        try:
            os.killpg(pgid, sig)
            return True
        except ProcessLookupError:
            return False

    def wait_exit(self, cid: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.dir(cid).is_dir() or self.state(cid).get("Status") != "running":
                return True
            time.sleep(0.01)
        return False

    def kill_hard(self, cid: str) -> None:
        """SIGKILL the entrypoint and let its supervisor record ExitCode 137."""
        if self.signal(cid, signal.SIGKILL):
            if not self.wait_exit(cid, 3.0):
                state = self.state(cid)
                state.update(Status="exited", Running=False, Pid=0, ExitCode=137, FinishedAt=now_iso())
                self.write_state(cid, state)

    def remove(self, cid: str) -> None:
        """``docker rm -f``: kill supervisor and entrypoint, then delete everything."""
        import shutil
        proc = self.proc(cid)
        for pgid in (proc.get("pgid"), proc.get("supervisor_pgid")):
            if pgid:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        shutil.rmtree(self.dir(cid), ignore_errors=True)

    def kill_processes(self) -> None:
        """SIGKILL every entrypoint process group, whatever the recorded state says."""
        for cid in self.ids():
            pgid = self.proc(cid).get("pgid")
            if pgid and pid_alive(pgid):
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            self.wait_exit(cid, 2.0)

    def kill_all(self, remove: bool = False) -> None:
        """VM shutdown (brev stop) or deletion (brev delete) takes every container down."""
        with locked(self.lock_file):
            for cid in self.ids():
                if remove:
                    self.remove(cid)
                else:
                    self.kill_hard(cid)

    # views ---------------------------------------------------------------
    def inspect(self, cid: str) -> dict:
        """``docker inspect`` JSON of one container (Docker Engine API ContainerJSON)."""
        cfg = self.config(cid)
        doc = {"Id": cfg.get("Id", cid), "Created": cfg.get("Created"), "Path": cfg.get("Path", ""),
               "Args": cfg.get("Args", []), "State": self.state(cid), "Image": cfg.get("Image"),
               "LogPath": str(self.dir(cid) / "container-json.log"), "Name": cfg.get("Name"),
               "RestartCount": 0, "Driver": "overlay2", "Platform": "linux"}
        doc.update((k, v) for k, v in cfg.items() if not k.startswith("_") and k not in doc)
        doc["NetworkSettings"] = {"Networks": {doc.get("HostConfig", {}).get("NetworkMode") or "bridge": {}}}
        return doc

    def ps_row(self, cid: str) -> dict:
        """The fields ``docker ps --format`` knows (Docker CLI formatter/container.go)."""
        info = self.inspect(cid)
        state = info["State"]
        cfg = info.get("Config", {})
        labels = cfg.get("Labels") or {}
        args = [*(info.get("Path") and [info["Path"]] or []), *info.get("Args", [])]
        command = " ".join(args)
        if len(command) > 20:
            command = command[:19] + "…"
        created = parse_iso(info.get("Created", ""))
        mounts = ",".join(m.get("Name") or m.get("Source", "") for m in info.get("Mounts", []))
        return {
            "ID": cid[:12],
            "Image": cfg.get("Image", ""),
            "Command": f'"{command}"',
            "CreatedAt": time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(created)),
            "RunningFor": human_duration(time.time() - created) + " ago",
            "Ports": "",
            "State": state.get("Status", ""),
            "Status": status_text(state),
            "Size": "0B",
            "Names": info.get("Name", "").lstrip("/"),
            "Labels": ",".join(f"{k}={v}" for k, v in sorted(labels.items())),
            "Mounts": mounts,
            "Networks": (info.get("HostConfig") or {}).get("NetworkMode", "bridge") or "bridge",
            "LocalVolumes": "0",
            "Label": lambda key: labels.get(key, ""),
        }


def human_duration(seconds: float) -> str:
    """github.com/docker/go-units HumanDuration."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    minutes = s // 60
    if minutes == 1:
        return "About a minute"
    if minutes < 60:
        return f"{minutes} minutes"
    hours = round(s / 3600)
    if hours == 1:
        return "About an hour"
    if hours < 48:
        return f"{hours} hours"
    return f"{hours // 24} days"


def status_text(state: dict) -> str:
    """``docker ps`` STATUS column (Docker daemon container/state.go String)."""
    status = state.get("Status")
    if status in ("running", "paused"):
        text = "Up " + human_duration(time.time() - parse_iso(state.get("StartedAt", "")))
        return text + " (Paused)" if status == "paused" else text
    if status == "restarting":
        return f"Restarting ({state.get('ExitCode', 0)}) " + \
            human_duration(time.time() - parse_iso(state.get("FinishedAt", ""))) + " ago"
    if status == "exited":
        return f"Exited ({state.get('ExitCode', 0)}) " + \
            human_duration(time.time() - parse_iso(state.get("FinishedAt", ""))) + " ago"
    if status == "dead":
        return "Dead"
    return "Created"


class ContainerContext:
    """Seen from inside a running container: mounts, GPUs, the OOM marker.

    The container "filesystem" is the host filesystem seen through the bind
    mounts; paths outside every mount land in the container's private rootfs.
    """

    def __init__(self, cdir: Path):
        self.dir = Path(cdir)
        self.config = read_json(self.dir / "config.json", {}) or {}
        self.mounts = sorted(read_json(self.dir / "mounts.json", []) or [],
                             key=lambda m: len(m["Destination"]), reverse=True)

    @classmethod
    def current(cls, home: str | None = None) -> "ContainerContext | None":
        path = Path(home if home is not None else os.environ.get("HOME", "/")).resolve()
        if path.name == "home" and path.parent.parent.name == "containers" \
                and (path.parent / "config.json").is_file():
            return cls(path.parent)
        return None

    def _mount_for(self, cpath: str) -> tuple[dict | None, str]:
        cpath = os.path.normpath(cpath if cpath.startswith("/") else "/" + cpath)
        for mount in self.mounts:
            dest = mount["Destination"].rstrip("/") or "/"
            if cpath == dest or cpath.startswith(dest + "/") or dest == "/":
                return mount, os.path.relpath(cpath, dest)
        return None, cpath.lstrip("/")

    def host_path(self, cpath: str, cwd: str = "/") -> Path:
        """Map a container path to the host path that backs it."""
        if not cpath.startswith("/"):
            cpath = os.path.join(cwd, cpath)
        mount, rel = self._mount_for(cpath)
        base = Path(mount["Source"]) if mount else self.dir / "rootfs"
        return base if rel in (".", "") else base / rel

    def writable(self, cpath: str) -> bool:
        mount, _ = self._mount_for(cpath)
        return mount is None or bool(mount.get("RW", True))

    def gpus(self) -> list[str]:
        return list((self.config.get("_sim") or {}).get("gpus") or [])

    @property
    def oom_marker(self) -> Path:
        return self.dir / "oom"


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (``SigCgt`` in /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def load_json_lines(path: Path) -> list[dict]:
    """Read a json-file log, skipping a half-written last line."""
    out = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    except FileNotFoundError:
        pass
    return out

