"""The simulated account's instance types: what ``brev search [gpu|cpu] --json`` lists and
whether ``brev stop`` may stop an instance of a type.

From brev-cli pkg/cmd/gpusearch/gpusearch.go: ``--json`` prints a JSON array of
GPUInstanceInfo (``type``, ``gpu_name``, ``gpu_count``, ``price_per_hour`` - a float
parsed from the API's ``base_price.amount`` in ProcessInstances -, ``stoppable``, ...);
``[]`` when nothing matches (displayEmptyResults); ``gpu`` (the default) lists types with
GPUs, ``cpu`` those without (``gpu_name`` "-", ``gpu_count`` 0). One row per supported
GPU of a type. brev-cli pkg/cmd/stop/stop.go validateWorkspaceStoppable: an instance
whose type info is missing or not ``Stoppable`` is refused with
``instance "NAME" does not support stop.`` (the Go %q quoting).

The world's state may replace the table (``Simulator.set_instance_types``).
"""

from __future__ import annotations

# type -> (gpu name or None, gpu count, VRAM per GPU GB, vcpus, USD per hour, stoppable, provider)
DEFAULT_TYPES: dict[str, dict] = {
    "a2-highgpu-1g": {"gpu_name": "A100", "gpu_count": 1, "vram_per_gpu_gb": 40, "vcpus": 12,
                      "price_per_hour": 4.09, "stoppable": True, "provider": "gcp"},
    "a2-ultragpu-1g": {"gpu_name": "A100", "gpu_count": 1, "vram_per_gpu_gb": 80, "vcpus": 12,
                       "price_per_hour": 5.64, "stoppable": True, "provider": "gcp"},
    "p4d.24xlarge": {"gpu_name": "A100", "gpu_count": 8, "vram_per_gpu_gb": 40, "vcpus": 96,
                     "price_per_hour": 39.32, "stoppable": True, "provider": "aws"},
    "hyperstack_H100": {"gpu_name": "H100", "gpu_count": 1, "vram_per_gpu_gb": 80, "vcpus": 28,
                        "price_per_hour": 2.28, "stoppable": False, "provider": "shadeform"},
    "hyperstack_A100x8": {"gpu_name": "A100", "gpu_count": 8, "vram_per_gpu_gb": 80, "vcpus": 192,
                          "price_per_hour": 14.4, "stoppable": False, "provider": "shadeform"},
    "n2-standard-8": {"gpu_name": None, "gpu_count": 0, "vram_per_gpu_gb": 0, "vcpus": 8,
                      "price_per_hour": 0.46, "stoppable": True, "provider": "gcp"},
}


def types(state: dict) -> dict[str, dict]:
    """The account's instance types (the world's own table, else DEFAULT_TYPES)."""
    table = state.get("instance_types")
    return DEFAULT_TYPES if table is None else table


def rows(state: dict, kind: str, stoppable_only: bool = False) -> list[dict]:
    """``brev search KIND --json`` rows (GPUInstanceInfo's JSON names), cheapest first."""
    out = []
    for name, t in types(state).items():
        if (kind == "cpu") != (not t.get("gpu_name")):
            continue
        if stoppable_only and not t.get("stoppable"):
            continue
        count, vram = int(t.get("gpu_count") or 0), float(t.get("vram_per_gpu_gb") or 0)
        out.append({"type": name, "cloud": t.get("provider", ""), "provider": t.get("provider", ""),
                    "gpu_name": t.get("gpu_name") or "-", "gpu_count": count, "vram_per_gpu_gb": vram,
                    "total_vram_gb": vram * count, "capability": 8.0 if count else 0, "vcpus": t.get("vcpus", 0),
                    "memory": "", "ram_gb": 0, "arch": "x86_64", "disk_min_gb": 100, "disk_max_gb": 100,
                    "boot_time_seconds": 300, "stoppable": bool(t.get("stoppable")), "rebootable": True,
                    "flex_ports": False, "target_disk_gb": 100, "price_per_hour": t.get("price_per_hour", 0)})
    return sorted(out, key=lambda r: r["price_per_hour"])


def stoppable(state: dict, inst: dict) -> bool:
    """stop.go validateWorkspaceStoppable: the instance's own ``stoppable`` if set, else its type's;
    a type the account does not know has no type info: not stoppable."""
    if inst.get("stoppable") is not None:
        return bool(inst["stoppable"])
    return bool((types(state).get(inst.get("instance_type") or "") or {}).get("stoppable"))
