"""The paths a spec names under an input mount, checked on the instance before ``docker run``.

A TAO container reads its dataset (and, for evaluate / inference, its checkpoint) at the
container paths the spec names; the bundle mounts each input at ``/data/<NAME>``. A path
that is not there fails on the GPU, after the instance time, the pull and the start were
paid for. So every absolute string of the spec (and of the ``-- KEY=VALUE`` overrides,
which win) under ``/data/<NAME>/`` is:

* refused here (``SPEC_INPUT_UNKNOWN``, exit 2) when no input is mounted at ``/data/<NAME>``;
* checked on the instance, in the launch round trip after the inputs are staged
  (:func:`check_lines`: ``test -e`` of the host path); a missing one prints
  ``TAO_SPEC_PATH_MISSING <n>`` and exits MISSING_EXIT before ``docker run``
  (``SPEC_PATH_MISSING``, naming the spec key and the path; :func:`describe`).

Paths a network derives from one key are checked too where TAO's source says how
(:data:`DERIVED`). An OmegaConf interpolation (``${...}``) is checked as the string it resolves
to in the merged spec (``tao_schema_values.resolved_strings``), else left to TAO; a glob pattern
is left to TAO. ``--no-spec-check`` skips all of this.
"""

from __future__ import annotations

import posixpath
import re
from typing import Optional, Sequence

from . import remote
from .errors import TaoBrevError

MARKER = "TAO_SPEC_PATH_MISSING"
MISSING_EXIT = 12    # the submit script's exit status when a path the spec names is missing (11: no GPUs, 13: resume)
LISTED = 5

# visual_changenet's segmentation data module reads <root_dir>/<folder> for its image, change image and
# label folders and <root_dir>/<list folder>/<split>.txt per split (tao-pytorch
# cv/visual_changenet/segmentation/dataloader/pl_changenet_data_module.py:43-50,62-130, cn_dataset.py:69;
# folder defaults: cv/visual_changenet/config/default_config.py:189-192). Splits by action: train reads
# train and validation, evaluate the test split, inference the predict split (no labels).
_CN_FOLDERS = {"image_folder_name": "A", "change_image_folder_name": "B", "annotation_folder_name": "label"}
_CN_SPLITS = {"train": ("train_split", "validation_split"), "evaluate": ("test_split",),
              "inference": ("predict_split",)}
DERIVED = {("visual_changenet", "dataset.segment.root_dir")}


def _walk(node: object, path: str, out: dict[str, str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            _walk(value, f"{path}.{key}" if path else str(key), out)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _walk(value, f"{path}[{i}]", out)
    elif isinstance(node, str):
        out[path] = node


def _override_values(overrides: Sequence[str]) -> dict[str, str]:
    out = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep:
            out[key.lstrip("+~").strip()] = value.strip().strip("'\"")
    return out


def _under_data(value: str) -> Optional[tuple[str, str]]:
    """(NAME, rest) of ``/data/NAME[/rest]`` once spelled plainly (``//``, ``/./`` and ``..`` resolved
    as the container's open() resolves them: ``/data/x/../y`` is ``/data/y``); None for other strings,
    interpolations, and glob patterns (``*``, ``?``, ``[``: a loader expands them, no single path has to
    exist)."""
    prefix = remote.CONTAINER_DATA_DIR + "/"
    if not value.startswith("/") or "${" in value or "\n" in value or any(c in value for c in "*?["):
        return None
    plain = posixpath.normpath(value)
    if not plain.startswith(prefix):
        return None
    parts = plain[len(prefix):].split("/")
    return parts[0], "/".join(parts[1:])


def _derived(spec: dict, strings: dict[str, str], network_arch: str, action: str) -> dict[str, str]:
    if network_arch != "visual_changenet":
        return {}
    root = strings.get("dataset.segment.root_dir")
    segment = (spec.get("dataset") or {}).get("segment") if isinstance(spec.get("dataset"), dict) else None
    if not root or not isinstance(segment, dict):
        return {}
    key = lambda name: strings.get(f"dataset.segment.{name}") or segment.get(name)   # noqa: E731
    folders = dict(_CN_FOLDERS)
    if action == "inference":
        folders.pop("annotation_folder_name")
    out = {f"dataset.segment.root_dir + {name}": posixpath.join(root, str(key(name) or default))
           for name, default in folders.items()}
    for split in _CN_SPLITS.get(action, ()):
        if key(split):
            out[f"dataset.segment.{split}"] = posixpath.join(root, str(key("list_folder_name") or "list"),
                                                             f"{key(split)}.txt")
    return out


def named(spec: dict, overrides: Sequence[str], mounts: Sequence[tuple], network_arch: str = "",
          action: str = "", resolved: Optional[dict[str, str]] = None) -> list[tuple[str, str]]:
    """[(spec key, container path)] of every path under ``/data/`` the spec and overrides name
    (overrides win; ``resolved``: the interpolations the spec check resolved, ``{key: string}``, as
    the container will read them), with the paths :data:`DERIVED` from them. Raises SPEC_INPUT_UNKNOWN
    when a path's ``/data/<NAME>`` is no input mount (never showing any other string of the spec)."""
    strings: dict[str, str] = {}
    _walk(spec, "", strings)
    strings.update(_override_values(overrides))
    strings.update(resolved or {})
    strings.update(_derived(spec, strings, network_arch, action))
    mounted = {container for _host, container, _ro in mounts}
    found = []
    for key, value in strings.items():
        parsed = _under_data(value)
        if parsed is None:
            continue
        name, _rest = parsed
        if f"{remote.CONTAINER_DATA_DIR}/{name}" not in mounted:
            inputs = ", ".join(sorted(c.rsplit("/", 1)[-1] for c in mounted if c.startswith("/data/"))) or "none"
            raise TaoBrevError("SPEC_INPUT_UNKNOWN", f"spec key {key} names {value}, but no input is mounted at "
                               f"{remote.CONTAINER_DATA_DIR}/{name} (inputs: {inputs})",
                               f"Add it: --inputs SRC={name} (or point {key} at /data/<one of the inputs>/...); "
                               "--no-spec-check skips this check.", key=key)
        found.append((key, value))
    return found


def host_paths(mounts: Sequence[tuple]) -> dict[str, str]:
    """container mount path -> instance path."""
    return {container: host for host, container, _ro in mounts}


def check_lines(found: Sequence[tuple[str, str]], hosts: dict[str, str]) -> str:
    """``test -e`` of each named path's instance path, numbered (``MARKER <n>``, exit MISSING_EXIT)."""
    lines = []
    for number, (_key, value) in enumerate(found):
        parsed = _under_data(value)
        assert parsed is not None   # ``found`` holds /data/ paths only (named_paths)
        name, rest = parsed
        host = hosts[f"{remote.CONTAINER_DATA_DIR}/{name}"]
        target = remote.rpath(remote.join(host, rest) if rest else host)
        lines.append(f"test -e {target} || {{ echo '{MARKER} {number}'; exit {MISSING_EXIT}; }}")
    return "\n".join(lines)


_MISSING = re.compile(rf"^{MARKER} (\d+)$", re.MULTILINE)


def describe(found: Sequence[tuple[str, str]], out: str) -> str:
    """The refusal's message: the spec key and container path the instance did not find."""
    hit = _MISSING.search(out)
    number = int(hit.group(1)) if hit else -1
    if not 0 <= number < len(found):
        return "a path the spec names under an input mount is missing in the staged inputs (nothing was launched)"
    key, value = found[number]
    return (f"spec key {key} names {value}, which is not in the staged inputs on the instance "
            "(nothing was launched)")


def fix(req) -> str:
    return ("Point the key at a path the input holds (or stage the missing files: for tier A copy them to the "
            f"instance, for B/C add them to the local input), then submit again; --no-spec-check skips this check: "
            f"{req.rerun(add=('--no-spec-check',))}")
