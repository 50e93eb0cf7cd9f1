"""``--gpus`` and the spec's ``num_gpus`` / ``gpu_ids`` agree: no job bills GPUs it cannot use.

TAO's launcher (tao-pytorch ``nvidia_tao_pytorch/core/entrypoint.py:163-204``) reads
``<task>.num_gpus`` and ``<task>.gpu_ids`` for train, evaluate, inference and distill (distill
reads train's), command-line overrides first, else the spec, else 1 GPU ``[0]``; a count that
differs from ``len(gpu_ids)`` becomes the larger of the two. Every other action runs on one GPU.
Inside the container the GPUs that ``docker run --gpus`` hands it are numbered from 0.

The rule (``references/submit-guards.md``, "GPUs"):
- ``--gpus 0,1`` (N ids): submit adds ``<task>.num_gpus=N <task>.gpu_ids=[0..N-1]`` (shown in
  the plan), replacing the spec's values (a warning names them); an override of this command
  that asks for another count, or names a ``gpu_ids`` entry >= N, is refused (BAD_ARGUMENT)
  with the exact command for each way out;
- ``--gpus all`` (the default) means every GPU of the instance: the launch round trip counts
  them (``nvidia-smi -L`` on the instance) and passes that count and ids, replacing the spec's
  values (a warning names them); an override of them with ``--gpus all`` is refused (it would
  bill every GPU and use fewer): name the GPUs with ``--gpus``;
- an id named twice (``--gpus 0,0``, also ``0,00``) is refused (BAD_ARGUMENT): docker's
  ``--gpus '"device=0,0"'`` hands the container ONE GPU, so TAO would start a rank on a GPU that
  is not there;
- the schema could not be read (``--no-spec-check``, or a version without one) and the spec
  writes neither key: ``--gpus all`` and ``--gpus 0,1`` still add both keys (the launcher reads
  them from the command line for every network, entrypoint.py:165-178), so a job never trains on
  1 of N billed GPUs; a warning says so. One named GPU adds nothing (TAO's default is ``[0]``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, TypedDict

from .errors import TaoBrevError
from .tao_schema import override_value

GPU_TASKS = {"train": "train", "distill": "train", "evaluate": "evaluate", "inference": "inference"}
KEYS = ("num_gpus", "gpu_ids")
Rerun = Callable[..., str]   # SubmitRequest.rerun: the submit's command line, changed (set_flags=, to_overrides=)


class GpuOverrides(TypedDict):
    """:meth:`GpuPlan.to_json`: the overrides submit adds (the answer's ``gpu_overrides``)."""
    overrides: list[str]


@dataclass
class GpuPlan:
    """Overrides to add: ``overrides`` (fixed) and ``host_keys`` (set on the instance from its GPU count)."""

    overrides: list[str] = field(default_factory=list)
    host_keys: tuple[str, ...] = ()
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> GpuOverrides:
        """``{"overrides": [...]}``: the fixed ones as given, the host keys with what the instance sets."""
        host = [f"{key}={HOST_VALUE[key.rsplit('.', 1)[-1]]}" for key in self.host_keys]
        return {"overrides": list(self.overrides) + host}


# what the instance puts in a host key (remote/launch.py: its GPU count N, ids 0..N-1)
HOST_VALUE = {"num_gpus": "<the instance's GPU count N>", "gpu_ids": "<[0,...,N-1] for its N GPUs>"}


def filled(overrides: list[str], count: int) -> list[str]:
    """``overrides`` (:meth:`GpuPlan.to_json`'s) with the host keys' placeholders replaced by what the
    launch set for ``count`` GPUs (the count the launch script said: ``remote.launch.GPU_COUNT``)."""
    real = {"num_gpus": str(count), "gpu_ids": _ids(count)}
    out = []
    for item in overrides:
        key, _, value = item.partition("=")
        name = key.rsplit(".", 1)[-1]
        out.append(f"{key}={real[name]}" if HOST_VALUE.get(name) == value else item)
    return out


def _ids(count: int) -> str:
    return "[" + ",".join(str(i) for i in range(count)) + "]"


def _count(key: str, value: object) -> int | None:
    """The GPU count a num_gpus / gpu_ids value asks for (None when not a plain int / list). A num_gpus of
    digits as a string (``'1'``, or any value read without hydra-core) is that int: omegaconf's IntegerNode
    converts it so when merged into the schema's int field."""
    if key == "num_gpus":
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return len(value) if isinstance(value, (list, tuple)) else None


def _user_overrides(overrides: list[str], section: str) -> dict[str, tuple[str, object]]:
    """{num_gpus / gpu_ids: (the override word, its value as Hydra reads it)} of ``section``'s GPU overrides."""
    found: dict[str, tuple[str, object]] = {}
    for item in overrides:
        key, eq, value = item.partition("=")
        name = key.lstrip("+")
        if eq and name in (f"{section}.{k}" for k in KEYS):
            found[name.split(".", 1)[1]] = (item, override_value(value))
    return found


def _schema_keys(config: object, spec_data: dict[str, Any], section: str) -> list[str]:
    """The GPU keys of the task: those of the merged schema, else (unchecked) those the spec writes."""
    if config is not None:
        node = config.get(section) if hasattr(config, "get") else None
        return [k for k in KEYS if node is not None and hasattr(node, "keys") and k in node]
    node = spec_data.get(section) if isinstance(spec_data, dict) else None
    return [k for k in KEYS if isinstance(node, dict) and k in node]


def refuse_repeated_ids(gpus: str, rerun: Rerun) -> None:
    """BAD_ARGUMENT when ``--gpus`` names one GPU id twice (``0,0``, ``1,01``): docker counts
    distinct device ids, so the container would get fewer GPUs than the ids TAO is told to use."""
    ids = gpus.split(",")
    if gpus == "all" or not all(i.isdigit() for i in ids):
        return                                  # not ids: remote.gpus_flag refuses the form
    values = [int(i) for i in ids]
    distinct = list(dict.fromkeys(values))
    if len(distinct) == len(values):
        return
    twice = sorted({v for v in values if values.count(v) > 1})
    unique = ",".join(map(str, distinct))
    raise TaoBrevError("BAD_ARGUMENT", f"--gpus {gpus} names GPU id(s) {', '.join(map(str, twice))} more than "
                       f"once: docker hands the container one GPU per distinct id ({len(distinct)}), not {len(ids)}",
                       f"Name each GPU once: {rerun(set_flags={'--gpus': unique})}")


def _unchecked_note(gpus: str, section: str) -> str:
    return (f"the schema could not be read and the spec sets no {section}.num_gpus / gpu_ids: submit passes "
            f"both for --gpus {gpus} (tao-pytorch core/entrypoint.py:165-178 reads them from the command line "
            "for every network); an image whose schema lacks them refuses the override: then use --gpus 0")


def plan(*, gpus: str, action: str, config: object, spec_data: dict[str, Any], overrides: list[str],
         rerun: Rerun) -> GpuPlan:
    """The GPU overrides for this submit, or BAD_ARGUMENT (an id named twice, or an override that
    disagrees). ``rerun(set_flags=..., to_overrides=...)`` builds the fix commands (``SubmitRequest.rerun``)."""
    refuse_repeated_ids(gpus, rerun)
    section = GPU_TASKS.get(action)
    if section is None:
        return GpuPlan()
    keys = _schema_keys(config, spec_data, section)
    many = gpus == "all" or "," in gpus
    if not keys and config is None and many:     # unchecked: never 1 of N billed GPUs
        found = _planned(gpus, section, list(KEYS), spec_data, overrides, rerun)
        found.warnings.append(_unchecked_note(gpus, section))
        return found
    if not keys:
        return GpuPlan(warnings=[f"the spec sets no {section}.num_gpus and the schema could not be read: TAO "
                                 "uses 1 GPU (tao-pytorch core/entrypoint.py:165-166)"] if many else [])
    return _planned(gpus, section, keys, spec_data, overrides, rerun)


def _planned(gpus: str, section: str, keys: list[str], spec_data: dict[str, Any], overrides: list[str],
             rerun: Rerun) -> GpuPlan:
    """The overrides for ``keys`` of ``section`` (present in the schema, or both when unchecked)."""
    given = _user_overrides(overrides, section)
    spec_section = spec_data.get(section) if isinstance(spec_data, dict) else None
    spec_section = spec_section if isinstance(spec_section, dict) else {}
    if gpus == "all":
        for key, (item, value) in given.items():
            wanted = _count(key, value)
            fix = (f"Name the GPUs to use: {rerun(set_flags={'--gpus': ','.join(map(str, range(wanted)))})}"
                   if wanted else f"Drop the override {item} (--gpus all sets it from the instance).")
            raise TaoBrevError("BAD_ARGUMENT", f"--gpus all hands the container every GPU of the instance (all "
                               f"billed), but the override {section}.{key} asks for {wanted or 'another'} GPU(s)", fix)
        set_in_spec = [f"{section}.{k}" for k in keys if k in spec_section]
        warnings = ([f"{', '.join(set_in_spec)} of the spec: not used, the instance's GPU count is (--gpus all: "
                     "every GPU is billed, so every GPU is used; gpu_overrides says the count); to use fewer, name "
                     "them: --gpus 0 (or 0,1, ...)"]
                    if set_in_spec else [])
        return GpuPlan(host_keys=tuple(f"{section}.{k}" for k in keys), warnings=warnings)
    count = len(gpus.split(","))
    for key, (item, value) in given.items():
        wanted = _count(key, value)
        outside = key == "gpu_ids" and isinstance(value, list) and any(
            not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < count for i in value)
        if wanted == count and not outside:
            continue
        why = (f"the override {item} names GPU ids outside 0..{count - 1}: inside the container the {count} "
               f"GPU(s) of --gpus {gpus} are numbered from 0" if wanted == count else
               f"--gpus {gpus} hands the container {count} GPU(s) but the override {item} asks for "
               f"{wanted if wanted is not None else 'a value that is no GPU count'}")
        fixes = [f"use {count} GPU(s) ({gpus}): drop the override {item} and run the same command"]
        if wanted and wanted != count:
            fixes.insert(0, f"use {wanted} GPU(s): {rerun(set_flags={'--gpus': ','.join(map(str, range(wanted)))})}")
        raise TaoBrevError("BAD_ARGUMENT", why, "Make them agree: " + "; or ".join(fixes))
    ours = {"num_gpus": count, "gpu_ids": list(range(count))}
    replaced = [f"{section}.{k}" for k in keys if k in spec_section and k not in given and spec_section[k] != ours[k]]
    warnings = ([f"{', '.join(replaced)} of the spec replaced by the {count} GPU(s) of --gpus {gpus}"]
                if replaced else [])
    added = [f"{section}.num_gpus={count}" if k == "num_gpus" else f"{section}.gpu_ids={_ids(count)}"
             for k in keys if k not in given]
    return GpuPlan(overrides=added, warnings=warnings)
