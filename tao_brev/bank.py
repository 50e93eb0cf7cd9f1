"""Where the skill bank is, and how an image argument becomes an image URI.

The bundle root plays the role of ``$BANK`` when ``TAO_SKILL_BANK_PATH`` is
unset; when it points at a full TAO skill bank (NVIDIA-TAO/tao-skill-bank),
versions keys resolve from that bank's ``versions.yaml``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

from .errors import TaoBrevError
from .secrets.safe_read import read_text

BUNDLE_ROOT = Path(__file__).resolve().parent.parent

# A dotted versions key such as ``images.tao_toolkit.pyt``: no '/', no ':'.
_VERSIONS_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+$")
# An image reference as Docker accepts it (registry/repo[:tag][@digest]).
_IMAGE_URI = re.compile(r"^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+"
                        r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$"
                        r"|^[a-z0-9]+([._-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$")


def bank_root(env: Mapping[str, str] = os.environ) -> Path:
    """The skill bank root: ``$TAO_SKILL_BANK_PATH`` if set and non-empty, else the bundle."""
    raw = env.get("TAO_SKILL_BANK_PATH", "").strip()
    return Path(raw).expanduser() if raw else BUNDLE_ROOT


def versions_file(env: Mapping[str, str] = os.environ) -> Path:
    return bank_root(env) / "versions.yaml"


def load_versions(env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Parse ``$BANK/versions.yaml``. Raises VERSIONS_FILE when missing or invalid."""
    import yaml

    path = versions_file(env)
    try:
        data = yaml.safe_load(read_text(path, 4 << 20, follow=True))   # a regular file of at most 4 MiB
    except FileNotFoundError:
        raise TaoBrevError("VERSIONS_FILE", f"versions file not found: {path}") from None
    except (OSError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise TaoBrevError("VERSIONS_FILE", f"cannot read {path}: {exc}") from None
    if not isinstance(data, dict):
        raise TaoBrevError("VERSIONS_FILE", f"{path} is not a YAML mapping")
    return data


def is_versions_key(ref: str) -> bool:
    return bool(_VERSIONS_KEY.match(ref)) and "/" not in ref


class ResolvedImage(TypedDict):
    """An image argument resolved (:func:`resolve_image`)."""
    image: str
    versions_key: str | None
    source: str   # "uri", or the versions file that named it


def resolve_image(ref: str, env: Mapping[str, str] = os.environ) -> ResolvedImage:
    """Resolve an image argument to ``{"image", "versions_key", "source"}``.

    ``ref`` is a full image URI (``nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt``)
    or a dotted versions key (``images.tao_toolkit.pyt``). Raises
    UNKNOWN_VERSIONS_KEY naming the key and the file, or BAD_ARGUMENT for a
    string that is neither.
    """
    ref = (ref or "").strip()
    if not ref:
        raise TaoBrevError("BAD_ARGUMENT", "--image is empty")
    if "/" in ref or ":" in ref or "@" in ref:
        if not _IMAGE_URI.match(ref):
            raise TaoBrevError("BAD_ARGUMENT", f"not a valid image reference: {ref!r}",
                               "Use registry/repository:tag, e.g. nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt.")
        return {"image": ref, "versions_key": None, "source": "uri"}
    if not is_versions_key(ref):
        raise TaoBrevError("BAD_ARGUMENT", f"--image {ref!r} is neither an image URI nor a versions key",
                           "Pass a full image URI or a dotted key such as images.tao_toolkit.pyt.")
    versions = load_versions(env)
    node: Any = versions   # versions.yaml: nested mappings, image URIs at the leaves
    for part in ref.split("."):
        if not isinstance(node, dict) or part not in node:
            raise unknown_key(ref, versions, env, "not found in")
        node = node[part]
    if not isinstance(node, str) or not _IMAGE_URI.match(node):
        raise unknown_key(ref, versions, env, "is not an image URI in")
    return {"image": node, "versions_key": ref, "source": str(versions_file(env))}


KEYS_SHOWN = 20


def image_keys(versions: dict[str, Any], prefix: str = "") -> list[str]:
    """Every dotted key of ``versions`` whose value is an image URI, in file order."""
    keys = []
    for name, value in versions.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict):
            keys += image_keys(value, key + ".")
        elif isinstance(value, str) and _IMAGE_URI.match(value):
            keys.append(key)
    return keys


def unknown_key(ref: str, versions: dict[str, Any], env: Mapping[str, str], why: str) -> TaoBrevError:
    """UNKNOWN_VERSIONS_KEY naming the file actually read (the bundle's own, or the one under
    $TAO_SKILL_BANK_PATH) and the image keys it has (at most :data:`KEYS_SHOWN`)."""
    path = versions_file(env)
    source = "$TAO_SKILL_BANK_PATH" if env.get("TAO_SKILL_BANK_PATH", "").strip() else "this bundle's own"
    keys = image_keys(versions)
    shown = ", ".join(keys[:KEYS_SHOWN]) + (f" (and {len(keys) - KEYS_SHOWN} more)" if len(keys) > KEYS_SHOWN
                                            else "")
    return TaoBrevError("UNKNOWN_VERSIONS_KEY", f"versions key {ref!r} {why} {path} ({source} versions.yaml)",
                        f"Use one of the image keys of {path}: {shown or 'none (it lists no image)'}; "
                        "or a full image URI (registry/repository:tag).")


def image_registry(image: str) -> str:
    """The registry host of an image URI (``docker.io`` when none is named)."""
    first = image.split("/", 1)[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"
