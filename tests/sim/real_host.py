"""An instance backed by this machine's real Docker engine (the ``real_docker`` test tier).

``Simulator.add_instance(name, remote_user="ubuntu", home="/home/ubuntu/x")``
makes the simulated ``brev`` run that instance's remote commands ("ssh") as
the non-root ``remote_user`` (in the ``docker`` group, as on Brev), in
``home`` (its ``$HOME``), with the real ``docker`` CLI on ``PATH`` and a
stand-in ``nvidia-smi`` (``tests/real_docker/nvidia-smi``) in ``home/../bin``.
brev's own behaviour (retry after a failed ssh, faults, the echoed name)
stays the simulator's; what runs on the instance is real.

Facts kept from the real tools:
- ``ssh`` logs in as the instance user with its groups (``initgroups``), so
  the command reaches ``/var/run/docker.sock`` through the ``docker`` group.
- ``brev copy`` is ``scp`` as that user: copied files belong to it.
- ``brev delete`` / ``brev stop`` end the VM: its containers go with it. Here
  the containers of the instance are the ones bind-mounting a path under its
  home, removed (``docker rm -f``) or killed (``docker kill``).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

STANDIN_NVIDIA_SMI = Path(__file__).resolve().parents[1] / "real_docker" / "nvidia-smi"


def account(user: str) -> pwd.struct_passwd:
    return pwd.getpwnam(user)


def bin_dir(inst: dict) -> Path:
    """The instance's own tools (stand-in nvidia-smi), beside its home."""
    return Path(inst["home"]).parent / "bin"


def prepare(inst: dict) -> None:
    """Create the home and tool dir, owned by the user (run as root)."""
    user = account(inst["remote_user"])
    home, tools = Path(inst["home"]), bin_dir(inst)
    for directory in (home, tools):
        directory.mkdir(parents=True, exist_ok=True)
        os.chown(directory, user.pw_uid, user.pw_gid)
    shutil.copy2(STANDIN_NVIDIA_SMI, tools / "nvidia-smi")
    (tools / "nvidia-smi").chmod(0o755)


def env(inst: dict) -> dict[str, str]:
    """The clean environment of an ssh session as the instance user."""
    return {"HOME": str(inst["home"]), "USER": inst["remote_user"], "LOGNAME": inst["remote_user"],
            "PATH": f"{bin_dir(inst)}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}


def run_as(inst: dict) -> dict:
    """``subprocess`` keywords that drop to the instance user and its groups (caller is root)."""
    user = account(inst["remote_user"])
    return {"user": user.pw_uid, "group": user.pw_gid,
            "extra_groups": os.getgrouplist(user.pw_name, user.pw_gid), "umask": 0o022}


def chown_tree(inst: dict, path: Path) -> None:
    """scp writes as the remote user: hand what a root-run copy wrote to it."""
    user = account(inst["remote_user"])
    paths = [path] + (list(path.rglob("*")) if path.is_dir() else [])
    for item in paths:
        os.chown(item, user.pw_uid, user.pw_gid, follow_symlinks=False)


def _docker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)


def containers(inst: dict) -> list[str]:
    """Ids of the containers bind-mounting a path under the instance's home."""
    ids = _docker("ps", "-aq", "--no-trunc").stdout.split()
    if not ids:
        return []
    home = str(Path(inst["home"]).parent)
    found = []
    for item in json.loads(_docker("inspect", "--type", "container", *ids).stdout or "[]"):
        sources = [m.get("Source", "") for m in item.get("Mounts") or []]
        if any(s == home or s.startswith(home + "/") for s in sources):
            found.append(item["Id"])
    return found


def end_vm(inst: dict, remove: bool) -> None:
    """What deleting (``remove``) or stopping the VM does to its containers."""
    ids = containers(inst)
    if ids:
        _docker("rm", "-f", *ids) if remove else _docker("kill", *ids)
    if remove:
        shutil.rmtree(Path(inst["home"]).parent, ignore_errors=True)
