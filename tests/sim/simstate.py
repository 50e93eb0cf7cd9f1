"""Shared state of the brev/docker simulator: layout, locking, atomic JSON, audit.

Invariant: every piece of simulated state lives in files under one directory
ROOT, so any number of simulated processes (local ``brev``, remote ``docker``,
container supervisors) see the same world without a server process.

Layout::

    ROOT/state.json                 brev login state, registry, NGC key, faults, settings
    ROOT/audit.jsonl                one JSON line per invocation of any sim executable
    ROOT/.lock                      flock for read-modify-write of state.json / instance.json
    ROOT/bin/brev                   local executable (generated)
    ROOT/remote-bin/{docker,nvidia-smi,df,cat}   remote executables (generated)
    ROOT/instances/NAME/instance.json        status, gpus, docker_daemon, ... of one instance
    ROOT/instances/NAME/home/                the instance user's $HOME (remote cwd)
    ROOT/instances/NAME/docker/              DockerRootDir: images.json, containers/, volumes/

Local processes find ROOT through ``TAO_BREV_SIM_STATE``; remote processes get
a clean environment (as over ssh) and find their instance from ``$HOME``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import stat
import time
from pathlib import Path
from collections.abc import Iterator

STATE_ENV = "TAO_BREV_SIM_STATE"

# Timing knobs. Real brev waits ~40 x 1 s for ssh and polls a start every 5 s;
# the simulator scales those down so a test suite finishes in seconds.
DEFAULT_SETTINGS: dict[str, object] = {
    "ssh_probe_interval_s": 0.01,   # real: 1 s   (pkg/cmd/util/ssh.go WaitForSSHToBeAvailable)
    "ssh_probe_limit": 40,          # real: 40 probes
    "start_poll_s": 0.02,           # real: 5 s   (PollUntil)
    "start_delay_s": 0.0,           # STOPPED -> RUNNING takes this long after `start`
    "hang_s": 3600.0,               # how long a `hang` fault sleeps
    "brev_error_stream": "stderr",  # "stderr" (reference doc) or "stdout" (cmderrors.go prints with fmt.Println)
    "ssh_user": "ubuntu",
    # brev's ssh config: ControlMaster auto + ControlPersist 10m (brevdev/brev-cli pkg/ssh/sshconfigurer.go).
    # > 0: the first ssh connection to an instance leaves a detached master that lives this long
    # and keeps the pipes named by control_master_holds ("stdout", "stderr", "both", "none") open.
    "control_persist_s": 0.0,
    "control_master_holds": "stderr",
}

DEFAULT_INSTANCE: dict[str, object] = {
    "status": "RUNNING",
    "build_status": "COMPLETED",
    "health_status": "HEALTHY",
    "instance_type": "a2-highgpu-1g",
    "instance_kind": "gpu",
    "gpus": ["NVIDIA A100-SXM4-80GB"],
    "driver_version": "550.54.15",
    "ssh_delay_s": 0.0,     # sshd refuses connections for this long after RUNNING (wall clock: demos)
    "ssh_refusals": 0,      # ... or for this many connection attempts (tests: no timing involved)
    "banner": "",
    "docker_daemon": "up",
    "gpu_runtime": True,
    "disk_free_bytes": None,
    "disk_total_bytes": 500 * 10**9,
    "ssh_key_rejected": False,      # sshd refuses brev's key: "Permission denied (publickey)."
    "docker_on_path": True,         # False: docker only on a login shell's PATH (~/.profile), not on ssh's
    "docker_version": "27.3.1",     # CLI + daemon; < 20.10 changes `docker rm -f` of a missing container
    "registry_reachable": True,     # False: DNS for every registry fails on the instance
}


# ---------------------------------------------------------------------------
# files

def read_json(path: Path, default: object = None) -> object:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def write_json_atomic(path: Path, data: object) -> None:
    """Temp file + fsync + rename: readers never see a half-written file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Exclusive flock on ``lock_path`` for a read-modify-write."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def now_iso(offset_s: float = 0.0) -> str:
    """Docker-style timestamp, UTC: Go's ``time.RFC3339Nano`` layout
    (``2006-01-02T15:04:05.999999999Z07:00``), which TRIMS trailing zeros of the
    fraction (``...:00.5Z``, ``...:00.1234Z``, no dot at all on a whole second), as
    moby marshals ``State.StartedAt`` / ``FinishedAt``. ``offset_s``: the instance's
    clock error (``clock_offset_s`` of an instance)."""
    return rfc3339nano(time.time() + offset_s)


def rfc3339nano(t: float) -> str:
    base = _dt.datetime.fromtimestamp(int(t), _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{int(round((t % 1) * 1e9)) % 1_000_000_000:09d}".rstrip("0")
    return f"{base}.{frac}Z" if frac else f"{base}Z"


def parse_iso(ts: str) -> float:
    if not ts or ts.startswith("0001"):
        return 0.0
    head, _, frac = ts.rstrip("Z").partition(".")
    base = _dt.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=_dt.timezone.utc)
    return base.timestamp() + (float("0." + frac) if frac else 0.0)


def is_char_device(fd: int) -> bool:
    """What Go's ``stat.Mode() & os.ModeCharDevice`` tests (brev exec.go isPiped)."""
    try:
        return stat.S_ISCHR(os.fstat(fd).st_mode)
    except OSError:
        return True  # closed fd: nothing to read, nothing piped


def pid_alive(pid: int | None) -> bool:
    """True if ``pid`` runs and is not a zombie (PID 1 here may never reap)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return fields[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


MASTER_MARK = "sim-ssh-master"   # in the argv of a simulated ControlPersist master


def master_alive(pid: int | None, root: Path | str) -> bool:
    """``pid`` is a live simulated ssh master of the world at ``root`` (not a reused pid)."""
    if not pid_alive(pid):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return MASTER_MARK.encode() in argv and str(root).encode() in argv


# ---------------------------------------------------------------------------
# the world

class World:
    """Paths and state access for one simulator ROOT."""

    def __init__(self, root: Path | str):
        self.root = Path(root).resolve()

    # paths --------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def audit_file(self) -> Path:
        return self.root / "audit.jsonl"

    @property
    def lock_file(self) -> Path:
        return self.root / ".lock"

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def remote_bin(self) -> Path:
        return self.root / "remote-bin"

    @property
    def remote_bin_nodocker(self) -> Path:
        """The remote tools but docker: the non-interactive PATH of an instance whose
        docker is only on a login shell's PATH (``docker_on_path: False``)."""
        return self.root / "remote-bin-nodocker"

    @property
    def remote_sysbin(self) -> Path:
        """The system's executables without docker (see ``simctl._system_tools_without_docker``)."""
        return self.root / "remote-sysbin"

    @property
    def instances_dir(self) -> Path:
        return self.root / "instances"

    def instance_dir(self, name: str) -> Path:
        return self.instances_dir / name

    def instance_home(self, name: str) -> Path:
        """The remote ``$HOME``: ROOT/instances/NAME/home, or the ``home`` of an
        instance on the real Docker engine (``real_host``)."""
        home = (read_json(self.instance_dir(name) / "instance.json") or {}).get("home")
        return Path(home) if home else self.instance_dir(name) / "home"

    def docker_dir(self, name: str) -> Path:
        return self.instance_dir(name) / "docker"

    # state.json -----------------------------------------------------------
    def state(self) -> dict:
        data = read_json(self.state_file, {}) or {}
        data.setdefault("auth", {"token": "tok-valid", "logged_in": True, "expired": False,
                                 "expires_after_calls": None, "calls": 0})
        data.setdefault("registry", {})
        data.setdefault("ngc_key", None)
        data.setdefault("faults", [])
        data.setdefault("brev_faults", [])
        data.setdefault("copy_faults", [])
        data.setdefault("ssh_masters", {})
        settings = dict(DEFAULT_SETTINGS)
        settings.update(data.get("settings") or {})
        data["settings"] = settings
        return data

    @contextlib.contextmanager
    def edit_state(self) -> Iterator[dict]:
        with locked(self.lock_file):
            data = self.state()
            yield data
            write_json_atomic(self.state_file, data)

    def settings(self) -> dict:
        return self.state()["settings"]

    # instances ------------------------------------------------------------
    def instance_names(self) -> list[str]:
        if not self.instances_dir.is_dir():
            return []
        return sorted(p.name for p in self.instances_dir.iterdir()
                      if (p / "instance.json").is_file())

    def instance(self, name: str) -> dict | None:
        data = read_json(self.instance_dir(name) / "instance.json")
        if data is None:
            return None
        merged = dict(DEFAULT_INSTANCE)
        merged.update(_settle(data))
        return merged

    def create_instance(self, name: str, **fields: object) -> dict:
        """Write a new instance record and its empty home / docker dirs."""
        import hashlib
        data = dict(DEFAULT_INSTANCE)
        data.update(fields)
        data["name"] = name
        data.setdefault("id", hashlib.sha256(f"{name}{time.time()}".encode()).hexdigest()[:9])
        data.setdefault("created_at", time.time())
        status = data.pop("status", "RUNNING")
        data["status"] = None
        self.set_status(data, status)
        with locked(self.lock_file):
            if data.get("remote_user"):
                import real_host
                real_host.prepare(data)
            else:
                self.instance_home(name).mkdir(parents=True, exist_ok=True)
            (self.docker_dir(name) / "containers").mkdir(parents=True, exist_ok=True)
            self.write_instance(name, data)
        return data

    def find_instance(self, name_or_id: str) -> dict | None:
        """Lookup by name or id, like brev's GetWorkspaceByNameOrID."""
        if name_or_id and "/" not in name_or_id and name_or_id not in (".", ".."):
            inst = self.instance(name_or_id)
            if inst is not None:
                return inst
        for name in self.instance_names():
            inst = self.instance(name)
            if inst and inst.get("id") == name_or_id:
                return inst
        return None

    def write_instance(self, name: str, data: dict) -> None:
        self.instance_dir(name).mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.instance_dir(name) / "instance.json", data)

    @contextlib.contextmanager
    def edit_instance(self, name: str) -> Iterator[dict]:
        with locked(self.lock_file):
            data = read_json(self.instance_dir(name) / "instance.json")
            if data is None:
                raise KeyError(name)
            data = _settle(data)
            yield data
            self.write_instance(name, data)

    def set_status(self, data: dict, status: str) -> None:
        """Change an instance's status; entering RUNNING restarts the ssh-delay clock."""
        if status == "RUNNING" and data.get("status") != "RUNNING":
            data["running_since"] = time.time()
        data["status"] = status

    # audit ----------------------------------------------------------------
    def audit(self, tool: str, argv: list[str], instance: str | None = None, **extra: object) -> None:
        """Append one JSON line (O_APPEND + flock), recording argv faithfully."""
        record = {"tool": tool, "argv": list(argv), "instance": instance,
                  "stdin_is_tty_or_chardev": is_char_device(0), "ts": time.time(), "pid": os.getpid()}
        record.update(extra)
        line = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.audit_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def audit_records(self) -> list[dict]:
        if not self.audit_file.is_file():
            return []
        out = []
        with open(self.audit_file, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    out.append(json.loads(line))
        return out

    # the remote side ------------------------------------------------------
    def remote_env(self, name: str) -> dict[str, str]:
        """The clean environment of a command run over ssh: nothing local is forwarded."""
        inst = self.instance(name) or {}
        if inst.get("remote_user"):
            import real_host
            return real_host.env(inst)
        user = self.settings().get("ssh_user", "ubuntu")
        inst = self.instance(name) or {}
        path = (f"{self.remote_bin}:/usr/local/bin:/usr/bin:/bin" if inst.get("docker_on_path", True)
                else f"{self.remote_bin_nodocker}:{self.remote_sysbin}")
        return {
            "HOME": str(self.instance_home(name)),
            "USER": user,
            "PATH": path,
            "LANG": "C.UTF-8",
        }


def _settle(data: dict) -> dict:
    """A started instance turns RUNNING once its start delay has passed (no daemon needed)."""
    if data.get("status") == "STARTING" and data.get("ready_at") is not None and time.time() >= data["ready_at"]:
        data = dict(data, status="RUNNING", running_since=data.pop("ready_at"))
    return data


def world_from_home(home: str | None = None) -> tuple[World, str]:
    """Find (world, instance name) from a remote ``$HOME``.

    Works for the instance user's home (ROOT/instances/NAME/home) and for a
    container's home (ROOT/instances/NAME/docker/containers/ID/home): the
    remote side never needs an environment variable of its own.
    """
    path = Path(home if home is not None else os.environ.get("HOME", "")).resolve()
    for parent in [path, *path.parents]:
        if parent.parent.name == "instances" and (parent.parent.parent / "state.json").is_file():
            return World(parent.parent.parent), parent.name
    raise SystemExit(f"sim: cannot find the simulated instance from HOME={path}")
