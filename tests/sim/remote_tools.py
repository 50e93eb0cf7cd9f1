"""``nvidia-smi`` and ``df`` of a simulated instance (ROOT/remote-bin).

``nvidia-smi`` reports the instance's ``gpus`` (inside a container: the GPUs
that ``--gpus`` granted), supports ``--query-gpu=...`` with
``--format=csv[,noheader][,nounits]``, ``-L`` and the plain table; with no GPU
it fails like a missing driver (exit 9). ``df`` reports the instance's
``disk_free_bytes`` when set (GNU coreutils output formats), and otherwise runs
the host's ``/bin/df``.
"""

from __future__ import annotations

import math
import os
import re
import sys

from containers import ContainerContext
from simstate import world_from_home

NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
             "Make sure that the latest NVIDIA driver is installed and running.")


def _gpu_memory_mib(name: str, override: int | None) -> int:
    if override:
        return int(override)
    match = re.search(r"(\d+)\s*GB", name)
    if match:
        return int(match.group(1)) * 1024
    return {"L40S": 46068, "A10G": 23028, "T4": 15360, "L4": 23034}.get(name.split()[-1], 81920)


def nvidia_smi(argv: list[str]) -> int:
    import hashlib
    world, name = world_from_home()
    world.audit("nvidia-smi", argv, name)
    inst = world.instance(name) or {}
    context = ContainerContext.current()
    gpus = context.gpus() if context else list(inst.get("gpus") or [])
    if not gpus or inst.get("driver_loaded") is False:   # ``driver_loaded: False``: a kernel without its module
        print(NO_DRIVER)
        return 9
    driver = inst.get("driver_version", "550.54.15")
    rows = []
    for index, gpu in enumerate(gpus):
        mem = _gpu_memory_mib(gpu, inst.get("gpu_memory_mib"))
        uuid = hashlib.sha256(f"{inst.get('id')}-{index}".encode()).hexdigest()
        rows.append({"index": str(index), "name": gpu, "driver_version": driver, "count": str(len(gpus)),
                     "uuid": f"GPU-{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:32]}",
                     "memory.total": (mem, "MiB"), "memory.used": (0, "MiB"), "memory.free": (mem, "MiB"),
                     "utilization.gpu": (0, "%"), "temperature.gpu": "34",
                     "pci.bus_id": f"00000000:00:{4 + index:02X}.0"})
    query = next((a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")), None)
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "")
    if "-L" in argv or "--list-gpus" in argv:
        for row in rows:
            print(f"GPU {row['index']}: {row['name']} (UUID: {row['uuid']})")
        return 0
    if query is not None:
        fields = [f.strip() for f in query.split(",")]
        for field in fields:
            if field not in rows[0]:
                print(f'Field "{field}" is not a valid field to query.')
                return 2
        options = fmt.split(",")
        units = "nounits" not in options

        def cell(value):
            if isinstance(value, tuple):
                return f"{value[0]} {value[1]}" if units else str(value[0])
            return value
        if "noheader" not in options:
            print(", ".join(f"{f} [{rows[0][f][1]}]" if isinstance(rows[0][f], tuple) and units else f
                            for f in fields))
        for row in rows:
            print(", ".join(cell(row[f]) for f in fields))
        return 0
    print(f"+{'-' * 91}+")
    print(f"| NVIDIA-SMI 550.54.15              Driver Version: {driver:<12}   CUDA Version: 12.4     |")
    print(f"|{'=' * 91}|")
    for row in rows:
        print(f"|   {row['index']}  {row['name']:<36} On  | {row['pci.bus_id']} Off |  0MiB / "
              f"{row['memory.total'][0]}MiB |")
    return 0


def _human(n: int) -> str:
    for unit in ("", "K", "M", "G", "T", "P"):
        if n < 1024 or unit == "P":
            if unit and n < 10:
                return f"{math.ceil(n * 10) / 10:.1f}{unit}"
            return f"{math.ceil(n)}{unit}"
        n /= 1024
    return str(n)


def df(argv: list[str]) -> int:
    world, name = world_from_home()
    world.audit("df", argv, name)
    inst = world.instance(name) or {}
    free = inst.get("disk_free_bytes")
    if free is None:
        real_df = "/usr/bin/df" if os.path.exists("/usr/bin/df") else "/bin/df"
        os.execv(real_df, ["df", *argv])
    total = max(int(inst.get("disk_total_bytes") or 0), int(free))
    used = total - int(free)
    block, human, output, paths = 1024, False, None, []
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--human-readable"):
            human = True
        elif arg == "-k":
            block = 1024
        elif arg == "-m":
            block = 1024 ** 2
        elif arg.startswith("-B") or arg.startswith("--block-size"):
            value = arg[2:] if arg.startswith("-B") else arg.partition("=")[2]
            value = value or next(args, "1")
            block = int(value.rstrip("KMG") or 1) * {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(value[-1:], 1)
        elif arg.startswith("--output"):
            output = (arg.partition("=")[2] or "source,size,used,avail,pcent,target").split(",")
        elif arg.startswith("-"):
            continue
        else:
            paths.append(arg)
    for path in paths:
        if not os.path.exists(path):
            print(f"df: {path}: No such file or directory", file=sys.stderr)
            return 1
    size_label = "Size" if human else (f"{block}-blocks" if block != 1024 ** 2 else "1M-blocks")
    fmt = _human if human else (lambda n: str(math.ceil(n / block)))
    pcent = f"{math.ceil(used * 100 / total) if total else 0}%"
    values = {"source": ("Filesystem", "/dev/root"), "size": (size_label, fmt(total)),
              "used": ("Used", fmt(used)), "avail": ("Avail" if output else "Available", fmt(free)),
              "pcent": ("Use%" if output else "Capacity", pcent), "target": ("Mounted on", "/")}
    columns = output or ["source", "size", "used", "avail", "pcent", "target"]
    for column in columns:
        if column not in values:
            print(f"df: option --output: field '{column}' unknown", file=sys.stderr)
            return 1
    print(" ".join(f"{values[c][0]:>12}" if c not in ("source", "target") else values[c][0] for c in columns))
    for _ in paths or ["/"]:
        print(" ".join(f"{values[c][1]:>12}" if c not in ("source", "target") else values[c][1] for c in columns))
    return 0


if __name__ == "__main__":
    tool = os.path.basename(sys.argv[0])
    sys.exit(df(sys.argv[1:]) if tool == "df" else nvidia_smi(sys.argv[1:]))
