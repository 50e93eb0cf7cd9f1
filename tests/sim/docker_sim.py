"""Simulated ``docker`` CLI + daemon on a Brev instance (lives in ROOT/remote-bin).

Behaviour follows the Docker CLI reference (docs.docker.com/reference/cli/docker/)
and docker/cli sources for messages and exit codes: flag errors and ``run``
failures exit 125, a missing command 127, other errors 1. The instance is
found from ``$HOME`` (the remote shell's environment is clean), per-instance
switches come from ``instance.json``:

- ``docker_daemon: "down"``  -> ``Cannot connect to the Docker daemon ...``
- ``gpu_runtime: false``      -> ``run --gpus`` fails (no nvidia runtime)
- ``gpu_lost: true``          -> ``run --gpus`` fails in the NVIDIA hook (NVML "unknown error",
  as after an Xid 79 "fallen off the bus"; only a reset of the VM clears it)

Failures of the daemon while *starting* a created container (device driver,
NVIDIA hook, missing executable) leave the container ``created`` with
``State.Error`` set and ``ExitCode`` 128 (127 / 126 for a missing / not
executable command) and the CLI exits 125 (moby ``daemon/start.go``: the
deferred ``container.SetError(err)`` and ``SetExitCode(exitUnknown)`` when it
was 0; docker/cli ``container/run.go`` returns status 125 for a start error).
With ``--rm`` the container is removed instead (``AutoRemove``).
- ``disk_free_bytes: N``      -> pulls larger than N fail with "no space left on device"
- ``registry_reachable: false`` -> every registry request fails in DNS (``dial tcp: lookup HOST
  on 127.0.0.53:53: no such host``; ``docker run`` then exits 125)
- ``docker_version: "19.03.15"`` -> ``rm -f`` of a missing container exits 1 (docker/cli
  ``cli/command/container/rm.go``: before 20.10 a not-found error failed the command even with
  ``--force``; since 20.10 it is printed on stderr and the exit status is 0)

nvcr.io refuses a valid key whose org is not entitled with
``denied: {"errors": [{"code": "DENIED", "message": "Access Denied"}]}`` (the distribution
registry's error envelope, ``registry/api/errcode``; older answers said ``unauthorized``), a
missing tag with ``manifest unknown``.

Containers are real processes supervised by ``container_runner.py``; images
come from the simulated registry in ``state.json`` (see ``simctl.add_image``).
Credentials live where docker keeps them: ``$DOCKER_CONFIG`` or
``$HOME/.docker/config.json`` (base64 ``user:password``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from pathlib import Path

import gotemplate
from containers import ContainerContext, ContainerStore, load_json_lines
from pflag import FlagError, FlagSpec, parse
from simstate import locked, now_iso, world_from_home, write_json_atomic, read_json

SIM_DIR = Path(__file__).resolve().parent
RUNNER = SIM_DIR / "container_runner.py"
STANDIN = SIM_DIR / "tao_standin.py"

SERVER_VERSION = "27.3.1"
DAEMON_DOWN = ("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
               "Is the docker daemon running?")
NGC_REGISTRY = "nvcr.io"
NGC_USER = "$oauthtoken"
TAO_REPO = "nvcr.io/nvidia/tao/tao-toolkit"
NGC_DENIED = 'denied: {"errors": [{"code": "DENIED", "message": "Access Denied"}]}'   # not entitled

# Container volume names (daemon/names.go RestrictedNamePattern).
VOLUME_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
CONTAINER_NAME = re.compile(r"^/?[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
# go-units RAMInBytes: "64m", "2g", "1.5GB", "1024".
RAM_SIZE = re.compile(r"^(\d+(?:\.\d+)?) ?([kKmMgGtTpP])?[iI]?[bB]?$")


def copy_fd(fd: int, target) -> None:
    """Copy what arrives on ``fd`` to the binary stream ``target`` until end of file."""
    with open(fd, "rb", 0) as source:
        for chunk in iter(lambda: source.read(65536), b""):
            try:
                target.write(chunk)
                target.flush()
            except OSError:
                return


class StartError(Exception):
    """The daemon failed to start a created container (its ``State.Error``)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class DockerExit(Exception):
    """End the command: ``message`` on stderr, exit ``code``."""

    def __init__(self, code: int, message: str = ""):
        super().__init__(message)
        self.code = code
        self.message = message


# ---------------------------------------------------------------------------
# image references

def normalize_ref(ref: str) -> str:
    """Add the implicit ``:latest`` tag (distribution/reference ParseNormalizedNamed)."""
    if "@" in ref:
        return ref
    if ":" not in ref.rsplit("/", 1)[-1]:
        return ref + ":latest"
    return ref


def registry_of(ref: str) -> str:
    first = ref.split("/", 1)[0]
    if "/" in ref and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def repo_of(ref: str) -> str:
    ref = ref.split("@", 1)[0]
    head, _, last = ref.rpartition("/")
    return (head + "/" if head else "") + last.split(":", 1)[0]


def tag_of(ref: str) -> str:
    last = ref.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "<none>"


def digest(text: str) -> str:
    import hashlib
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def ram_in_bytes(text: str) -> int:
    match = RAM_SIZE.match(text.strip())
    if not match:
        raise ValueError(f"invalid size: '{text}'")
    scale = {None: 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}
    return int(float(match.group(1)) * scale[(match.group(2) or "").lower() or None])


def human_size(n: int) -> str:
    """go-units HumanSize (decimal units, 3 significant digits)."""
    value = float(n)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if value < 1000:
            return f"{value:.3g}{unit}"
        value /= 1000
    return f"{value:.3g}PB"


def tabulate(rows: list[list[str]]) -> str:
    """text/tabwriter with padding 3, as docker's table output."""
    if not rows:
        return ""
    widths = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(max(map(len, rows)))]
    lines = []
    for row in rows:
        cells = [cell.ljust(widths[i] + 3) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append("".join(cells))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------

class Docker:
    """One invocation of the docker CLI against the simulated daemon of one instance."""

    def __init__(self, world, instance: str):
        self.world = world
        self.instance_name = instance
        self.instance = world.instance(instance) or {}
        self.docker_dir = world.docker_dir(instance)
        self.store = ContainerStore(self.docker_dir)
        self.config_dir = Path(os.environ.get("DOCKER_CONFIG") or Path(os.environ.get("HOME", "/")) / ".docker")
        self.cwd = Path.cwd()
        self.version = str(self.instance.get("docker_version") or SERVER_VERSION)

    # helpers -------------------------------------------------------------
    @staticmethod
    def out(text: str = "", end: str = "\n") -> None:
        sys.stdout.write(text + end)
        sys.stdout.flush()

    @staticmethod
    def err(text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def require_daemon(self, code: int = 1, prefix: str = "") -> None:
        if self.instance.get("docker_daemon", "up") in ("down", False):
            raise DockerExit(code, prefix + DAEMON_DOWN)

    def images(self) -> dict:
        return read_json(self.docker_dir / "images.json", {}) or {}

    def find_image(self, ref: str) -> str | None:
        images = self.images()
        norm = normalize_ref(ref)
        if norm in images:
            return norm
        bare = ref.removeprefix("sha256:")
        for key, meta in images.items():
            if len(bare) >= 4 and meta["Id"].removeprefix("sha256:").startswith(bare):
                return key
        return None

    def container_path(self) -> str:
        return f"{self.world.remote_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    # registry / auth -----------------------------------------------------
    def stored_auth(self, registry: str) -> tuple[str, str] | None:
        import base64
        auths = (read_json(self.config_dir / "config.json", {}) or {}).get("auths", {})
        for key in (registry, f"https://{registry}", f"https://{registry}/v1/",
                    "https://index.docker.io/v1/" if registry == "docker.io" else registry):
            entry = auths.get(key)
            if entry and entry.get("auth"):
                user, _, password = base64.b64decode(entry["auth"]).decode("utf-8", "replace").partition(":")
                return user, password
        return None

    def credentials_valid(self, registry: str, user: str, password: str) -> bool:
        if registry == NGC_REGISTRY:
            key = self.world.state().get("ngc_key")
            return user == NGC_USER and key is not None and password == key
        return bool(user and password)

    def authenticated(self, ref: str) -> bool:
        registry = registry_of(ref)
        creds = self.stored_auth(registry)
        return creds is not None and self.credentials_valid(registry, *creds)

    def registry_entry(self, ref: str) -> dict | None:
        return self.world.state()["registry"].get(normalize_ref(ref))

    def reach_registry(self, ref_or_registry: str, prefix: str = "Error response from daemon: ") -> None:
        """DNS on the instance fails for every registry (``registry_reachable: false``)."""
        if self.instance.get("registry_reachable", True):
            return
        host = ref_or_registry if "/" not in ref_or_registry and ":" not in ref_or_registry \
            else registry_of(ref_or_registry)
        host = "registry-1.docker.io" if host == "docker.io" else host
        raise DockerExit(1, f'{prefix}Get "https://{host}/v2/": dial tcp: lookup {host} on 127.0.0.53:53: '
                            "no such host")

    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in re.findall(r"\d+", self.version)[:2])

    def pull(self, ref: str, progress) -> None:
        """Pull ``ref`` into the local image store; raise DockerExit(1, reason) on failure."""
        ref = normalize_ref(ref)
        self.reach_registry(ref)
        entry = self.registry_entry(ref)
        if entry is None:
            raise DockerExit(1, f"Error response from daemon: manifest for {ref} not found: manifest unknown: "
                                f"manifest unknown")
        if entry.get("requires_auth") and not self.authenticated(ref):
            raise DockerExit(1, "Error response from daemon: unauthorized: authentication required")
        if entry.get("requires_auth") and not entry.get("entitled", True):
            raise DockerExit(1, f"Error response from daemon: {NGC_DENIED}")
        if entry.get("pull_fails"):
            raise DockerExit(1, f"Error response from daemon: {entry['pull_fails']}")
        tag = tag_of(ref)
        repo_path = repo_of(ref).split("/", 1)[1] if registry_of(ref) != "docker.io" else repo_of(ref)
        layers = [digest(ref + str(i))[7:19] for i in range(3)]
        if self.find_image(ref):
            progress(f"{tag}: Pulling from {repo_path}")
            progress(f"Digest: {entry['digest']}")
            progress(f"Status: Image is up to date for {ref}")
            return
        progress(f"{tag}: Pulling from {repo_path}")
        for layer in layers:
            progress(f"{layer}: Pulling fs layer")
        size = int(entry.get("size_bytes", 0))
        with locked(self.world.lock_file):
            inst = read_json(self.world.instance_dir(self.instance_name) / "instance.json", {})
            free = inst.get("disk_free_bytes")
            if free is not None and size > free:
                raise DockerExit(1, f"failed to register layer: write /var/lib/docker/overlay2/"
                                    f"{layers[-1]}/diff/usr/lib/libcudnn.so: no space left on device")
            if free is not None:
                inst["disk_free_bytes"] = free - size
                self.world.write_instance(self.instance_name, inst)
        for layer in layers:
            progress(f"{layer}: Pull complete")
        progress(f"Digest: {entry['digest']}")
        progress(f"Status: Downloaded newer image for {ref}")
        with locked(self.store.lock_file):
            images = self.images()
            images[ref] = {"Id": entry["image_id"], "Size": size, "Created": now_iso(),
                           "RepoTags": [ref], "RepoDigests": [f"{repo_of(ref)}@{entry['digest']}"]}
            self.docker_dir.mkdir(parents=True, exist_ok=True)
            write_json_atomic(self.docker_dir / "images.json", images)

    # dispatch ------------------------------------------------------------
    GLOBAL = FlagSpec.make(bools="debug tls tlsverify version help",
                           values="config host context log-level tlscacert tlscert tlskey",
                           short="D=debug H=host l=log-level v=version h=help")

    def dispatch(self, argv: list[str]) -> int:
        try:
            flags, rest = parse(argv, self.GLOBAL, interspersed=False)
        except FlagError as exc:
            raise DockerExit(125, f"{exc}\nSee 'docker --help'.")
        if flags.get("config"):
            self.config_dir = Path(flags["config"])
        if flags.get("version"):
            self.out(f"Docker version {SERVER_VERSION}, build ce12230")
            return 0
        if not rest:
            self.out("Usage:  docker [OPTIONS] COMMAND\n\nA self-sufficient runtime for containers")
            return 0
        command, args = rest[0], rest[1:]
        if command in ("container", "image", "manifest") and args:
            group, command, args = command, args[0], args[1:]
            command = {("container", "ls"): "ps", ("container", "list"): "ps", ("image", "ls"): "images",
                       ("image", "list"): "images", ("image", "rm"): "rmi", ("image", "inspect"): "image-inspect",
                       ("container", "inspect"): "container-inspect", ("image", "pull"): "pull",
                       ("manifest", "inspect"): "manifest-inspect"}.get((group, command), command)
            if group == "manifest" and command != "manifest-inspect":
                raise DockerExit(1, f"docker: 'manifest {command}' is not supported by the simulator")
        handler = getattr(self, "cmd_" + command.replace("-", "_"), None)
        if handler is None:
            raise DockerExit(1, f"docker: '{command}' is not a docker command.\nSee 'docker --help'")
        return handler(args)

    def flags(self, args: list[str], spec: FlagSpec, command: str, interspersed: bool = True):
        try:
            return parse(args, spec, interspersed)
        except FlagError as exc:
            raise DockerExit(125, f"{exc}\nSee 'docker {command} --help'.")

    # run -----------------------------------------------------------------
    RUN = FlagSpec.make(
        bools="detach rm init interactive tty privileged read-only publish-all quiet help sig-proxy",
        values=("name gpus shm-size ipc network workdir entrypoint user pull platform restart runtime hostname "
                "memory cpus log-driver memory-swap cgroupns pid uts stop-signal stop-timeout"),
        multi=("env env-file volume label publish mount add-host cap-add cap-drop device ulimit security-opt "
               "group-add label-file tmpfs log-opt dns expose link"),
        short="d=detach e=env v=volume l=label w=workdir u=user p=publish i=interactive t=tty m=memory "
              "h=hostname q=quiet P=publish-all")

    def cmd_run(self, args: list[str]) -> int:
        try:
            flags, positionals = parse(args, self.RUN, interspersed=False)
        except FlagError as exc:
            raise DockerExit(125, f"docker: {exc}\n\nRun 'docker run --help' for more information")
        if "net" in flags:
            flags["network"] = flags.pop("net")
        if not positionals:
            raise DockerExit(125, "docker: 'docker run' requires at least 1 argument\n\n"
                                  "Usage:  docker run [OPTIONS] IMAGE [COMMAND] [ARG...]")
        image, cmd = positionals[0], positionals[1:]
        if flags.get("interactive") and flags.get("tty") and not os.isatty(0):
            raise DockerExit(1, "the input device is not a TTY")
        self.require_daemon(125, "docker: ")
        fail = lambda msg: DockerExit(125, f"docker: {msg}")  # noqa: E731

        env = self.run_env(flags, fail)
        gpu_request = self.parse_gpus(flags.get("gpus"), fail) if flags.get("gpus") is not None else None
        mounts, binds = self.run_mounts(flags, fail)
        labels = dict(self.split_kv(item) for item in flags["label"])
        shm = 64 * 1024**2
        if flags.get("shm-size"):
            try:
                shm = ram_in_bytes(flags["shm-size"])
            except ValueError as exc:
                raise fail(f'invalid argument "{flags["shm-size"]}" for "--shm-size" flag: {exc}')
        ipc = flags.get("ipc", "private")
        if not (ipc in ("", "none", "private", "shareable", "host") or ipc.startswith("container:")):
            raise fail(f"Error response from daemon: invalid IPC mode: {ipc}")
        name = flags.get("name")
        if name is not None and not CONTAINER_NAME.match(name):
            raise fail(f"Error response from daemon: Invalid container name ({name}), "
                       f"only [a-zA-Z0-9][a-zA-Z0-9_.-] are allowed.")

        ref = normalize_ref(image)
        pull_policy = flags.get("pull", "missing")
        if pull_policy == "always" or (pull_policy == "missing" and not self.find_image(ref)):
            if pull_policy == "missing":
                self.err(f"Unable to find image '{ref}' locally")
            try:
                self.pull(ref, self.err)
            except DockerExit as exc:
                raise fail(exc.message)
        elif not self.find_image(ref):
            raise fail(f"Error response from daemon: No such image: {ref}.")

        device_requests = None
        if gpu_request is not None:
            count, device_ids = gpu_request
            device_requests = [{"Driver": "", "Count": count if count is not None else (0 if device_ids else -1),
                                "DeviceIDs": device_ids, "Capabilities": [["gpu"]], "Options": {}}]
        config = {
            "Name": "",
            "Image": self.images()[self.find_image(ref)]["Id"],
            "Config": {"Image": image, "Env": [f"PATH={self.container_path()}"] + [f"{k}={v}" for k, v in env.items()],
                       "Cmd": cmd or None, "Entrypoint": [flags["entrypoint"]] if flags.get("entrypoint") else None,
                       "WorkingDir": flags.get("workdir", ""), "User": flags.get("user", ""),
                       "Labels": labels, "AttachStdout": not flags.get("detach"), "Tty": bool(flags.get("tty"))},
            "HostConfig": {"Binds": binds or None, "AutoRemove": bool(flags.get("rm")), "ShmSize": shm,
                           "IpcMode": ipc, "NetworkMode": flags.get("network", "bridge"),
                           "Init": bool(flags.get("init")),
                           "DeviceRequests": device_requests, "Runtime": "runc"},
            "Mounts": mounts,
        }
        with locked(self.store.lock_file):
            if name is None:
                name = self.store.free_random_name()
            holder = self.store.name_in_use(name)
            if holder:
                raise fail(f'Error response from daemon: Conflict. The container name "/{name}" is already in use '
                           f'by container "{holder}". You have to remove (or rename) that container to be able to '
                           f"reuse that name.")
            config["Name"] = "/" + name
            cid = self.store.create(config)
        try:   # daemon side, at start (moby daemon/start.go): the container exists from here on
            gpus = self.select_gpus(*gpu_request) if gpu_request is not None else []
        except StartError as exc:
            self.fail_start(cid, flags, exc.message, 128)
        return self.start_container(cid, image, cmd, env, flags, gpus)

    def fail_start(self, cid: str, flags: dict, message: str, exit_code: int, cli_code: int = 125) -> None:
        """A start that failed: the container stays ``created`` with ``State.Error`` and ``ExitCode``
        (moby daemon/start.go), or is removed with ``--rm``; the CLI exits ``cli_code``."""
        if flags.get("rm"):
            self.store.remove(cid)
        else:
            state = self.store.state(cid)
            state.update(ExitCode=exit_code, Error=message)
            self.store.write_state(cid, state)
        raise DockerExit(cli_code, f"docker: Error response from daemon: {message}.")

    def run_env(self, flags: dict, fail) -> dict[str, str]:
        """--env-file entries first, then -e, as docker/cli opts.ReadKVEnvStrings does."""
        env: dict[str, str] = {}
        for env_file in flags["env-file"]:
            path = Path(env_file) if os.path.isabs(env_file) else self.cwd / env_file
            try:
                text = path.read_bytes().decode("utf-8").lstrip("\ufeff")
            except FileNotFoundError:
                raise fail(f"open {env_file}: no such file or directory")
            except UnicodeDecodeError:
                raise fail(f"env file {env_file} contains invalid utf8 bytes")
            for line in text.splitlines():
                line = line.lstrip()
                if not line or line.startswith("#"):
                    continue
                key, has_value, value = line.partition("=")
                if any(ch.isspace() for ch in key):
                    raise fail(f"variable '{key}' contains whitespaces")
                if not key:
                    raise fail(f"no variable name on line '{line}'")
                if has_value:
                    env[key] = value
                elif key in os.environ:
                    env[key] = os.environ[key]
        for item in flags["env"]:
            key, has_value, value = item.partition("=")
            if not key:
                raise fail(f'invalid argument "{item}" for "-e, --env" flag: invalid environment variable: {item}')
            if has_value:
                env[key] = value
            elif key in os.environ:
                env[key] = os.environ[key]
        return env

    def parse_gpus(self, value: str, fail) -> tuple[int | None, list[str] | None]:
        """docker/cli opts.GpuOpts.Set (client side, before anything is created): (count, device ids)."""
        import csv
        try:
            fields = next(csv.reader([value]))
        except (csv.Error, StopIteration):
            fields = [value]
        count, device_ids, seen = None, None, set()
        for item in fields:
            key, has_value, val = item.partition("=")
            if key in seen:
                raise fail(f'invalid argument "{value}" for "--gpus" flag: gpu request key \'{key}\' '
                           f'can be specified only once')
            seen.add(key)
            if not has_value or key == "count":
                seen.add("count")
                text = val if has_value else key
                if text == "all":
                    count = -1
                elif text.isdigit():
                    count = int(text)
                else:
                    raise fail(f'invalid argument "{value}" for "--gpus" flag: count must be an integer: '
                               f'strconv.Atoi: parsing "{text}": invalid syntax')
            elif key in ("device", "devices"):
                device_ids = val.split(",")
            elif key not in ("driver", "capabilities", "options"):
                raise fail(f'invalid argument "{value}" for "--gpus" flag: unexpected key \'{key}\' in \'{item}\'')
        if count is not None and device_ids is not None:
            raise fail("Error response from daemon: cannot set both Count and DeviceIDs on device request.")
        return count, device_ids

    HOOK_FAILED = ("failed to create task for container: failed to create shim task: OCI runtime create failed: "
                   "runc create failed: unable to start container process: error during container init: error "
                   "running hook #0: error running hook: exit status 1, stdout: , stderr: ")

    def select_gpus(self, count: int | None, device_ids: list[str] | None) -> list[str]:
        """The daemon picking devices at start (moby daemon/devices.go, the nvidia hook); raises StartError."""
        if not self.instance.get("gpu_runtime", True):
            # moby registers the nvidia driver only with nvidia-container-runtime-hook on its PATH
            raise StartError('could not select device driver "" with capabilities: [[gpu]]')
        if self.instance.get("gpu_lost"):
            raise StartError(self.HOOK_FAILED + "Auto-detected mode as 'legacy'\nnvidia-container-cli: "
                             "initialization error: nvml error: unknown error: unknown")
        available = list(self.instance.get("gpus") or [])
        if not available or self.instance.get("driver_loaded") is False:
            raise StartError(self.HOOK_FAILED + "Auto-detected mode as 'legacy'\nnvidia-container-cli: "
                             "initialization error: nvml error: driver not loaded: unknown")
        if device_ids is not None:
            chosen = []
            for dev in device_ids:
                if not dev.isdigit() or int(dev) >= len(available):
                    raise StartError(self.HOOK_FAILED + f"nvidia-container-cli: device error: {dev}: "
                                     "unknown device: unknown")
                chosen.append(available[int(dev)])
            return chosen
        if count is None or count < 0:
            return available
        return available[:count]

    def run_mounts(self, flags: dict, fail) -> tuple[list[dict], list[str]]:
        """-v HOST:CONT[:ro] (absolute HOST = bind, created if missing; otherwise a named volume) and --mount."""
        import csv
        import hashlib
        mounts, binds = [], []
        for spec in flags["volume"]:
            parts = spec.split(":")
            if len(parts) == 1:
                source, dest, mode = "", parts[0], ""
            elif len(parts) in (2, 3):
                source, dest = parts[0], parts[1]
                mode = parts[2] if len(parts) == 3 else ""
            else:
                raise fail(f"Error response from daemon: invalid volume specification: '{spec}'")
            if not dest.startswith("/"):
                raise fail(f"Error response from daemon: invalid volume specification: '{spec}': invalid mount "
                           f"config for type \"volume\": invalid mount path: '{dest}' mount path must be absolute")
            modes = set(filter(None, mode.split(",")))
            if modes - {"ro", "rw", "z", "Z", "rshared", "rslave", "rprivate", "shared", "slave", "private", "nocopy"}:
                raise fail(f"Error response from daemon: invalid mode: {mode}")
            read_write = "ro" not in modes
            if source.startswith("/"):
                Path(source).mkdir(parents=True, exist_ok=True)
                mounts.append({"Type": "bind", "Source": source, "Destination": dest, "Mode": mode,
                               "RW": read_write, "Propagation": "rprivate"})
                binds.append(spec)
                continue
            if source and not VOLUME_NAME.match(source):
                raise fail(f'Error response from daemon: create {source}: "{source}" includes invalid characters for '
                           f'a local volume name, only "[a-zA-Z0-9][a-zA-Z0-9_.-]" are allowed. If you intended to '
                           f"pass a host directory, use absolute path")
            vol_name = source or hashlib.sha256(os.urandom(16)).hexdigest()
            data = self.docker_dir / "volumes" / vol_name / "_data"
            data.mkdir(parents=True, exist_ok=True)
            mounts.append({"Type": "volume", "Name": vol_name, "Source": str(data), "Destination": dest,
                           "Driver": "local", "Mode": mode or "z", "RW": read_write, "Propagation": ""})
            if source:
                binds.append(spec)
        for spec in flags["mount"]:
            opts = dict(self.split_kv(part) for part in next(csv.reader([spec])))
            source = opts.get("source") or opts.get("src", "")
            dest = opts.get("target") or opts.get("destination") or opts.get("dst", "")
            read_only = "readonly" in opts or "ro" in opts
            if opts.get("type", "volume") == "bind":
                if not Path(source).exists():
                    raise fail(f'Error response from daemon: invalid mount config for type "bind": '
                               f"bind source path does not exist: {source}")
                mounts.append({"Type": "bind", "Source": source, "Destination": dest, "Mode": "",
                               "RW": not read_only, "Propagation": "rprivate"})
            else:
                data = self.docker_dir / "volumes" / (source or os.urandom(8).hex()) / "_data"
                data.mkdir(parents=True, exist_ok=True)
                mounts.append({"Type": "volume", "Name": data.parent.name, "Source": str(data),
                               "Destination": dest, "Driver": "local", "Mode": "z", "RW": not read_only})
        return mounts, binds

    @staticmethod
    def split_kv(item: str) -> tuple[str, str]:
        key, _, value = item.partition("=")
        return key, value

    def plan(self, cdir: Path, image: str, cmd: list[str], entrypoint: str | None, workdir: str,
             env: dict[str, str]) -> tuple[list[str] | None, list[str], str]:
        """Map (image, entrypoint, cmd) to a host argv, per the images this simulator knows.

        Returns (host argv or None when the executable is missing, logical argv, cwd).
        """
        path = self.container_path()
        context = ContainerContext(cdir)
        repo = repo_of(normalize_ref(image))
        if entrypoint:
            logical = [entrypoint, *cmd]
        elif repo == TAO_REPO:
            logical = cmd or ["/bin/bash"]
        elif "aws-cli" in repo:
            logical = ["aws", *cmd]
        else:
            logical = cmd or ["bash"]

        def resolve(word: str) -> str | None:
            import shutil
            if "/" in word:
                host = word if Path(word).exists() else str(context.host_path(word))
                return host if os.access(host, os.X_OK) and Path(host).is_file() else None
            return shutil.which(word, path=path)

        def host_args(words: list[str]) -> list[str]:
            # Arguments naming files under a mount reach the host tool as host paths.
            return [str(context.host_path(w)) if w.startswith("/") and context._mount_for(w)[0] else w
                    for w in words]

        if not entrypoint and repo == TAO_REPO and not resolve(logical[0]):
            argv = [sys.executable, str(STANDIN), *logical]
        elif not entrypoint and "aws-cli" in repo:
            argv = [sys.executable, "-m", "awscli", *host_args(cmd)]
        else:
            exe = resolve(logical[0])
            argv = [exe, *host_args(logical[1:])] if exe else None
        cwd = context.host_path(workdir or "/")
        cwd.mkdir(parents=True, exist_ok=True)
        return argv, logical, str(cwd)

    def start_container(self, cid: str, image: str, cmd: list[str], env: dict, flags: dict,
                        gpus: list[str]) -> int:
        import subprocess
        cdir = self.store.dir(cid)
        argv, logical, cwd = self.plan(cdir, image, cmd, flags.get("entrypoint"), flags.get("workdir", ""), env)
        config = self.store.config(cid)
        config["Path"], config["Args"] = logical[0], logical[1:]
        run_env = {"PATH": self.container_path(), "HOME": str(cdir / "home"), **env}
        config["_sim"] = {"argv": argv, "logical_argv": logical, "env": run_env, "cwd": cwd, "gpus": gpus}
        write_json_atomic(cdir / "config.json", config)
        if argv is None:   # docker/cli run.go: 127 for a command not found (moby sets ExitCode 127 too)
            self.fail_start(cid, flags, "failed to create task for container: failed to create shim task: OCI runtime "
                            "create failed: runc create failed: unable to start container process: exec: "
                            f'"{logical[0]}": executable file not found in $PATH: unknown', 127, cli_code=127)
        if flags.get("detach"):
            subprocess.Popen([sys.executable, str(RUNNER), str(cdir)], start_new_session=True, cwd="/",
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             close_fds=True)
            deadline = time.monotonic() + 10
            while self.store.state(cid).get("Status") == "created" and time.monotonic() < deadline:
                time.sleep(0.005)
            self.out(cid)
            return 0
        return self.attached(cdir)

    # docker/cli cli/command/container/signals.go ForwardAllSignals: all but these reach the container
    # (SIGWINCH resizes a tty; SIGKILL and SIGSTOP cannot be caught)
    UNPROXIED = {signal.SIGCHLD, signal.SIGPIPE, signal.SIGURG, signal.SIGWINCH, signal.SIGKILL, signal.SIGSTOP}

    def attached(self, cdir: Path) -> int:
        """``docker run`` without ``-d``. The daemon runs the container: a supervisor forked into its
        own session, which removes it at its end with ``--rm`` (moby AutoRemove) even when this CLI is
        gone. The CLI copies the output while it lives, proxies the signals it receives to the
        container (``--sig-proxy``, on by default) and exits with the container's status."""
        import threading
        import container_runner
        (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:   # the daemon's side
            code = 125
            try:
                os.setsid()
                os.close(out_r)
                os.close(err_r)
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                code = container_runner.supervise(cdir, open(out_w, "wb", 0), open(err_w, "wb", 0))
                container_runner.remove_if_auto(cdir)
            finally:
                os._exit(code & 0xFF)
        os.close(out_w)
        os.close(err_w)
        for sig in set(signal.Signals) - self.UNPROXIED:
            signal.signal(sig, lambda signum, _frame: self.store.signal(cdir.name, signum))
        copies = [threading.Thread(target=copy_fd, args=(out_r, sys.stdout.buffer)),
                  threading.Thread(target=copy_fd, args=(err_r, sys.stderr.buffer))]
        for copy in copies:
            copy.start()
        for copy in copies:
            copy.join()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        return code if code >= 0 else 128 - code

    # inspect / ps / logs ---------------------------------------------------
    INSPECT = FlagSpec.make(bools="size help", values="format type", short="f=format s=size")

    def cmd_inspect(self, args: list[str], kind: str | None = None) -> int:
        flags, names = self.flags(args, self.INSPECT, "inspect")
        kind = kind or flags.get("type")
        if not names:
            raise DockerExit(1, '"docker inspect" requires at least 1 argument.')
        self.require_daemon()
        found, missing = [], []
        for name in names:
            cid = self.store.find(name) if kind in (None, "container") else None
            if cid:
                found.append(self.store.inspect(cid))
                continue
            image = self.find_image(name) if kind in (None, "image") else None
            if image:
                found.append(self.image_inspect(image))
            else:
                missing.append(name)
        self.emit_objects(found, flags.get("format"))
        noun = {"container": "container", "image": "image"}.get(kind or "", "object")
        for name in missing:
            self.err(f"Error: No such {noun}: {name}")
        return 1 if missing else 0

    def cmd_container_inspect(self, args: list[str]) -> int:
        return self.cmd_inspect(args, "container")

    def cmd_image_inspect(self, args: list[str]) -> int:
        return self.cmd_inspect(args, "image")

    def emit_objects(self, objects: list[dict], template: str | None) -> None:
        if template is None:
            self.out(json.dumps(objects, indent=4))
            return
        for obj in objects:
            try:
                self.out(gotemplate.render(template, obj))
            except gotemplate.TemplateError as exc:
                raise DockerExit(1, str(exc))

    def image_inspect(self, ref: str) -> dict:
        meta = self.images()[ref]
        return {"Id": meta["Id"], "RepoTags": meta.get("RepoTags", [ref]), "RepoDigests": meta.get("RepoDigests", []),
                "Created": meta.get("Created"), "Size": meta.get("Size", 0), "Architecture": "amd64", "Os": "linux",
                "Config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                           "Cmd": ["/bin/bash"], "Entrypoint": None, "WorkingDir": "/workspace", "Labels": {}}}

    PS = FlagSpec.make(bools="all quiet no-trunc latest size help", values="format last", multi="filter",
                       short="a=all q=quiet l=latest s=size n=last f=filter")
    PS_HEADERS = {"ID": "CONTAINER ID", "Image": "IMAGE", "Command": "COMMAND", "CreatedAt": "CREATED AT",
                  "RunningFor": "CREATED", "Ports": "PORTS", "State": "STATE", "Status": "STATUS", "Size": "SIZE",
                  "Names": "NAMES", "Labels": "LABELS", "Mounts": "MOUNTS", "Networks": "NETWORKS",
                  "LocalVolumes": "LOCAL VOLUMES", "Label": lambda *_: "LABEL"}

    def cmd_ps(self, args: list[str]) -> int:
        flags, _ = self.flags(args, self.PS, "ps")
        self.require_daemon()
        rows = []
        for cid in self.store.ids():
            row = self.store.ps_row(cid)
            state = row["State"]
            if not flags.get("all") and state not in ("running", "paused", "restarting"):
                continue
            if all(self.ps_filter(f, cid, row) for f in flags["filter"]):
                rows.append((cid, row))
        if flags.get("latest"):
            rows = rows[:1]
        if flags.get("quiet"):
            for cid, _ in rows:
                self.out(cid if flags.get("no-trunc") else cid[:12])
            return 0
        template = flags.get("format") or ("table {{.ID}}\t{{.Image}}\t{{.Command}}\t{{.RunningFor}}\t"
                                           "{{.Status}}\t{{.Ports}}\t{{.Names}}")
        self.emit_table(template, [row for _, row in rows], self.PS_HEADERS)
        return 0

    def ps_filter(self, spec: str, cid: str, row: dict) -> bool:
        key, _, value = spec.partition("=")
        info = self.store.inspect(cid)
        if key == "label":
            lkey, has_value, lvalue = value.partition("=")
            labels = info["Config"].get("Labels") or {}
            return lkey in labels and (not has_value or labels[lkey] == lvalue)
        if key == "name":
            try:
                return re.search(value, row["Names"]) is not None
            except re.error:
                return value in row["Names"]
        if key == "id":
            return cid.startswith(value)
        if key == "status":
            return row["State"] == value
        if key == "ancestor":
            return normalize_ref(info["Config"]["Image"]) == normalize_ref(value)
        if key == "exited":
            return row["State"] == "exited" and str(info["State"]["ExitCode"]) == value
        raise DockerExit(1, f"Error response from daemon: invalid filter '{key}'")

    def emit_table(self, template: str, rows: list[dict], headers: dict) -> None:
        """docker/cli formatter: a ``table`` prefix adds a header; \\t and \\n are unescaped."""
        table = template.startswith("table")
        template = template[len("table"):].strip() if table else template
        template = template.replace("\\t", "\t").replace("\\n", "\n")
        try:
            lines = [gotemplate.render(template, row) for row in rows]
            if table:
                header = gotemplate.render(template, headers)
                cells = [line.split("\t") for line in [header, *lines]]
                sys.stdout.write(tabulate(cells))
            else:
                for line in lines:
                    self.out(line)
        except gotemplate.TemplateError as exc:
            raise DockerExit(1, str(exc))
        sys.stdout.flush()

    LOGS = FlagSpec.make(bools="follow timestamps details help", values="tail since until",
                         short="f=follow t=timestamps n=tail")

    def cmd_logs(self, args: list[str]) -> int:
        flags, names = self.flags(args, self.LOGS, "logs")
        if len(names) != 1:
            raise DockerExit(1, '"docker logs" requires exactly 1 argument.')
        self.require_daemon()
        cid = self.store.find(names[0])
        if cid is None:
            raise DockerExit(1, f"Error response from daemon: No such container: {names[0]}")
        log_path = self.store.dir(cid) / "container-json.log"
        entries = load_json_lines(log_path)
        tail = flags.get("tail", "all")
        if tail != "all":
            try:
                count = int(tail)
            except ValueError:
                raise DockerExit(1, f'Error response from daemon: invalid value for "tail": "{tail}"')
            if count >= 0:
                entries = entries[max(0, len(entries) - count):]
        self.write_log_entries(entries, flags.get("timestamps"))
        if flags.get("follow"):
            seen = len(load_json_lines(log_path))
            while True:
                running = self.store.dir(cid).is_dir() and self.store.state(cid).get("Running")
                fresh = load_json_lines(log_path)
                self.write_log_entries(fresh[seen:], flags.get("timestamps"))
                seen = len(fresh)
                if not running:
                    break
                time.sleep(0.02)
        return 0

    @staticmethod
    def write_log_entries(entries: list[dict], timestamps: bool) -> None:
        for entry in entries:
            stream = sys.stderr if entry.get("stream") == "stderr" else sys.stdout
            stream.write((entry["time"] + " " if timestamps else "") + entry.get("log", ""))
            stream.flush()

    # lifecycle -------------------------------------------------------------
    def find_containers(self, names: list[str], report_missing: bool = True) -> tuple[list[tuple[str, str]], int]:
        """([(name, id)] of the containers that exist, exit status so far): a missing
        one is reported as the daemon does ("No such container") and fails the command."""
        found, status = [], 0
        for name in names:
            cid = self.store.find(name)
            if cid is not None:
                found.append((name, cid))
            elif report_missing:
                old = self.version_tuple() < (20, 10)   # older CLIs: "Error: No such container: X"
                self.err(f"{'Error' if old else 'Error response from daemon'}: No such container: {name}")
                status = 1
        return found, status

    RM = FlagSpec.make(bools="force volumes link help", short="f=force v=volumes l=link")

    def cmd_rm(self, args: list[str]) -> int:
        flags, names = self.flags(args, self.RM, "rm")
        if not names:
            raise DockerExit(1, '"docker rm" requires at least 1 argument.')
        self.require_daemon()
        with locked(self.store.lock_file):
            found, status = self.find_containers(names)
            if flags.get("force") and self.version_tuple() >= (20, 10):
                status = 0   # the not-found error is printed, the command succeeds
            for name, cid in found:
                if self.store.state(cid).get("Running") and not flags.get("force"):
                    self.err(f'Error response from daemon: cannot remove container "/{name.lstrip("/")}": container '
                             f"is running: stop the container before removing or force remove")
                    status = 1
                    continue
                self.store.remove(cid)
                self.out(name)
        return status

    STOP = FlagSpec.make(bools="help", values="time signal timeout", short="t=time s=signal")

    def cmd_stop(self, args: list[str]) -> int:
        flags, names = self.flags(args, self.STOP, "stop")
        self.require_daemon()
        grace = float(flags.get("time") or flags.get("timeout") or 10)
        found, status = self.find_containers(names)
        for name, cid in found:
            if self.store.signal(cid, signal.SIGTERM) and not self.store.wait_exit(cid, grace):
                self.store.kill_hard(cid)
            self.out(name)
        return status

    KILL = FlagSpec.make(bools="help", values="signal", short="s=signal")

    def cmd_kill(self, args: list[str]) -> int:
        flags, names = self.flags(args, self.KILL, "kill")
        self.require_daemon()
        sig_name = flags.get("signal", "KILL").upper().removeprefix("SIG")
        sig = int(sig_name) if sig_name.isdigit() else getattr(signal, "SIG" + sig_name, None)
        if sig is None:
            raise DockerExit(1, f"Error response from daemon: Invalid signal: {flags['signal']}")
        found, status = self.find_containers(names)
        for name, cid in found:
            if not self.store.signal(cid, sig):
                self.err(f"Error response from daemon: cannot kill container: {name}: "
                         f"container {cid} is not running")
                status = 1
            else:
                self.store.wait_exit(cid, 3.0)
                self.out(name)
        return status

    def cmd_wait(self, args: list[str]) -> int:
        _, names = self.flags(args, FlagSpec.make(bools="help"), "wait")
        self.require_daemon()
        found, status = self.find_containers(names)
        for name, cid in found:
            while self.store.dir(cid).is_dir() and self.store.state(cid).get("Status") in ("running", "paused",
                                                                                           "restarting"):
                time.sleep(0.02)
            self.out(str(self.store.state(cid).get("ExitCode", 0)))
        return status

    # images ------------------------------------------------------------------
    def cmd_pull(self, args: list[str]) -> int:
        flags, refs = self.flags(args, FlagSpec.make(bools="all-tags quiet help", values="platform",
                                                     short="a=all-tags q=quiet"), "pull")
        if len(refs) != 1:
            raise DockerExit(1, '"docker pull" requires exactly 1 argument.')
        self.require_daemon()
        quiet = flags.get("quiet")
        self.pull(refs[0], (lambda line: None) if quiet else self.out)
        self.out(normalize_ref(refs[0]))
        return 0

    IMAGES = FlagSpec.make(bools="all quiet no-trunc digests help", values="format", multi="filter",
                           short="a=all q=quiet f=filter")

    def cmd_images(self, args: list[str]) -> int:
        flags, _ = self.flags(args, self.IMAGES, "images")
        self.require_daemon()
        rows = []
        for ref, meta in sorted(self.images().items()):
            rows.append({"Repository": repo_of(ref), "Tag": tag_of(ref), "ID": meta["Id"][7:19],
                         "CreatedSince": "2 weeks ago", "CreatedAt": meta.get("Created", ""),
                         "Size": human_size(meta.get("Size", 0)), "Digest": "<none>"})
        if flags.get("quiet"):
            for row in rows:
                self.out(row["ID"])
            return 0
        headers = {"Repository": "REPOSITORY", "Tag": "TAG", "ID": "IMAGE ID", "CreatedSince": "CREATED",
                   "CreatedAt": "CREATED AT", "Size": "SIZE", "Digest": "DIGEST"}
        template = flags.get("format") or "table {{.Repository}}\t{{.Tag}}\t{{.ID}}\t{{.CreatedSince}}\t{{.Size}}"
        self.emit_table(template, rows, headers)
        return 0

    def cmd_rmi(self, args: list[str]) -> int:
        _, refs = self.flags(args, FlagSpec.make(bools="force no-prune help", short="f=force"), "rmi")
        self.require_daemon()
        status = 0
        with locked(self.store.lock_file):
            images = self.images()
            for ref in refs:
                key = self.find_image(ref)
                if key is None:
                    self.err(f"Error response from daemon: No such image: {ref}")
                    status = 1
                    continue
                images.pop(key)
                self.out(f"Untagged: {key}")
            write_json_atomic(self.docker_dir / "images.json", images)
        return status

    def cmd_manifest_inspect(self, args: list[str]) -> int:
        """Talks to the registry directly with the stored credentials (no daemon needed)."""
        _, refs = self.flags(args, FlagSpec.make(bools="insecure verbose help", short="v=verbose"), "manifest inspect")
        if len(refs) != 1:
            raise DockerExit(1, '"docker manifest inspect" requires at least 1 and at most 2 arguments.')
        ref = normalize_ref(refs[0])
        self.reach_registry(ref, prefix="")
        entry = self.registry_entry(ref)
        if entry is None:
            raise DockerExit(1, f"no such manifest: {ref}")
        if entry.get("requires_auth"):
            if not self.authenticated(ref):
                raise DockerExit(1, "errors:\nunauthorized: authentication required")
            if not entry.get("entitled", True):
                raise DockerExit(1, f"errors:\n{NGC_DENIED}")
        size = int(entry.get("size_bytes", 0))
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                    "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 7023,
                               "digest": entry["image_id"]},
                    "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                                "size": size // 3, "digest": digest(ref + str(i))} for i in range(3)]}
        self.out(json.dumps(manifest, indent="\t"))
        return 0

    # login -------------------------------------------------------------------
    def cmd_login(self, args: list[str]) -> int:
        import base64
        flags, servers = self.flags(args, FlagSpec.make(bools="password-stdin help", values="username password",
                                                        short="u=username p=password"), "login")
        server = servers[0] if servers else "https://index.docker.io/v1/"
        registry = server.removeprefix("https://").removeprefix("http://").rstrip("/")
        user = flags.get("username", "")
        password = flags.get("password")
        if flags.get("password-stdin"):
            if password is not None:
                raise DockerExit(1, "--password and --password-stdin are mutually exclusive")
            if not user:
                raise DockerExit(1, "Must provide --username with --password-stdin")
            password = sys.stdin.read().removesuffix("\n").removesuffix("\r")
        elif password is not None:
            self.err("WARNING! Using --password via the CLI is insecure. Use --password-stdin.")
        if not user or not password:
            raise DockerExit(1, "Error: Cannot perform an interactive login from a non TTY device")
        self.require_daemon()
        self.reach_registry(registry)
        if not self.credentials_valid(registry, user, password):
            raise DockerExit(1, f'Error response from daemon: Get "https://{registry}/v2/": unauthorized: '
                                f"authentication required")
        config_file = self.config_dir / "config.json"
        config = read_json(config_file, {}) or {}
        config.setdefault("auths", {})[server] = {
            "auth": base64.b64encode(f"{user}:{password}".encode()).decode()}
        self.config_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(config_file, config)
        os.chmod(config_file, 0o600)
        self.err(f"WARNING! Your password will be stored unencrypted in {config_file}.\n"
                 "Configure a credential helper to remove this warning. See\n"
                 "https://docs.docker.com/go/credential-store/\n")
        self.out("Login Succeeded")
        return 0

    def cmd_logout(self, args: list[str]) -> int:
        _, servers = self.flags(args, FlagSpec.make(bools="help"), "logout")
        server = servers[0] if servers else "https://index.docker.io/v1/"
        config_file = self.config_dir / "config.json"
        config = read_json(config_file, {}) or {}
        if (config.get("auths") or {}).pop(server, None) is None:
            self.out(f"Not logged in to {server}")
            return 0
        write_json_atomic(config_file, config)
        self.out(f"Removing login credentials for {server}")
        return 0

    # system ------------------------------------------------------------------
    def info(self) -> dict:
        ids = self.store.ids()
        states = [self.store.state(cid).get("Status") for cid in ids]
        runtimes = {"runc": {"path": "runc"}, "io.containerd.runc.v2": {"path": "runc"}}
        if self.instance.get("gpu_runtime", True):
            runtimes["nvidia"] = {"path": "nvidia-container-runtime"}
        return {"ID": digest(self.instance_name)[7:43], "Containers": len(ids),
                "ContainersRunning": states.count("running"), "ContainersPaused": states.count("paused"),
                "ContainersStopped": states.count("exited"), "Images": len(self.images()),
                "Driver": "overlay2", "DockerRootDir": str(self.docker_dir), "ServerVersion": self.version,
                "Runtimes": runtimes, "DefaultRuntime": "runc", "OperatingSystem": "Ubuntu 22.04.4 LTS",
                "OSType": "linux", "Architecture": "x86_64", "NCPU": 12, "MemTotal": 89_000_000_000,
                "Name": self.instance_name, "KernelVersion": "5.15.0-105-generic"}

    def cmd_info(self, args: list[str]) -> int:
        flags, _ = self.flags(args, FlagSpec.make(bools="help", values="format", short="f=format"), "info")
        self.require_daemon()
        info = self.info()
        if flags.get("format"):
            self.emit_objects([info], flags["format"])
            return 0
        self.out("Client: Docker Engine - Community\n Version:    " + SERVER_VERSION + "\n\nServer:")
        self.out(f" Containers: {info['Containers']}\n  Running: {info['ContainersRunning']}\n"
                 f"  Stopped: {info['ContainersStopped']}\n Images: {info['Images']}\n"
                 f" Server Version: {SERVER_VERSION}\n Storage Driver: overlay2\n"
                 f" Runtimes: {' '.join(sorted(info['Runtimes']))}\n Default Runtime: runc\n"
                 f" Operating System: {info['OperatingSystem']}\n Docker Root Dir: {info['DockerRootDir']}")
        return 0

    def cmd_version(self, args: list[str]) -> int:
        flags, _ = self.flags(args, FlagSpec.make(bools="help", values="format", short="f=format"), "version")
        client = {"Version": SERVER_VERSION, "ApiVersion": "1.47", "Os": "linux", "Arch": "amd64"}
        up = self.instance.get("docker_daemon", "up") not in ("down", False)
        data = {"Client": client, "Server": {"Version": SERVER_VERSION, "ApiVersion": "1.47"} if up else None}
        if flags.get("format"):
            self.emit_objects([data], flags["format"])
        else:
            self.out(f"Client: Docker Engine - Community\n Version:           {SERVER_VERSION}\n"
                     " API version:       1.47")
            if up:
                self.out(f"\nServer: Docker Engine - Community\n Engine:\n  Version:          {SERVER_VERSION}")
        self.require_daemon()
        return 0


def main(argv: list[str]) -> int:
    world, instance = world_from_home()
    world.audit("docker", argv, instance, cwd=os.getcwd())
    try:
        return Docker(world, instance).dispatch(argv)
    except DockerExit as exc:
        if exc.message:
            sys.stderr.write(exc.message.rstrip("\n") + "\n")
        return exc.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
