"""Which ``nvidia-tao-core`` holds the schemas of an image's TAO version, and where.

NVIDIA publishes TAO's config schemas on PyPI as ``nvidia-tao-core`` (one release per TAO
version; 7.3.0 carries ``nvidia_tao_core/config/<network>/default_config.py`` for 41 networks).
Its declared dependencies are TAO's whole service stack (Flask, kubernetes, ngcsdk, torchao,
...); the config modules need only ``omegaconf`` (pinned in pyproject.toml), so it is always
installed with ``--no-deps``:

- the default image's version (versions.yaml ``images.tao_toolkit.pyt``) by ``install.sh``,
  into the bundle's environment;
- any other version on demand, into ``$TAO_STATE_DIR/brev/tao-schemas/<version>/`` (``pip
  install --no-deps --target``, at most :data:`INSTALL_TIMEOUT_S` seconds); a version that is
  not published, or an index that cannot be reached, leaves the spec unchecked (a warning).
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path

from . import tao_schema


PACKAGE = "nvidia-tao-core"
INSTALL_TIMEOUT_S = 180.0     # one pip run of a ~2 MB wheel, no dependencies
_TAG_VERSION = re.compile(r"^v?([0-9]+\.[0-9]+\.[0-9]+)(?:[-.]|$)")


# The package index settings pip / uv read from the environment (a mirror, a proxy, an offline wheel dir).
_PIP_ENV = ("PATH", "HOME", "LANG", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
            "PIP_CONFIG_FILE", "PIP_CERT", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS", "UV_NO_INDEX",
            "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy", "XDG_CONFIG_HOME",
            "SSL_CERT_FILE")


class Unavailable(Exception):
    """No schema package for this version here (the message says why, for a warning)."""


def image_version(image: str) -> str | None:
    """``7.3.0`` of ``nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt``; None for an image that is not a
    TAO toolkit PyTorch image of a numbered release (a custom image, a digest only, ``-deploy``)."""
    name = image.split("@", 1)[0]
    repo, _, tag = name.rpartition(":") if ":" in name.rsplit("/", 1)[-1] else (name, "", "")
    if "tao-toolkit" not in repo.rsplit("/", 1)[-1] or not tag.endswith("-pyt"):
        return None
    match = _TAG_VERSION.match(tag)
    return match.group(1) if match else None


def installed_version() -> str | None:
    """The ``nvidia-tao-core`` of this environment (read from its metadata, not imported), or None."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return None


def cache_dir(state_root: Path, version: str) -> Path:
    return Path(state_root) / "brev" / "tao-schemas" / version


def _install(target: Path, version: str, env: Mapping[str, str]) -> None:
    """``pip install --no-deps --target`` (uv when this environment has no pip). Raises Unavailable."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    spec = f"{PACKAGE}=={version}"
    has_pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0
    uv = shutil.which("uv", path=env.get("PATH"))
    if has_pip:
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--no-input", "--target", str(tmp), spec]
    elif uv:
        cmd = [uv, "pip", "install", "--quiet", "--no-deps", "--target", str(tmp), "--python", sys.executable, spec]
    else:
        raise Unavailable(f"neither pip nor uv is available to install {spec}")
    clean = {k: v for k, v in env.items() if k in _PIP_ENV}   # no credential of the bundle reaches pip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, env=clean,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        raise Unavailable(f"installing {spec} took longer than {INSTALL_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0 or not (tmp / "nvidia_tao_core" / "config").is_dir():
        shutil.rmtree(tmp, ignore_errors=True)
        last = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["no message"]
        raise Unavailable(f"{spec} could not be installed (not published, or the package index is "
                          f"unreachable): {last[0][:200]}")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp.rename(target)
    except OSError:   # another submit installed it first
        shutil.rmtree(tmp, ignore_errors=True)


def locate(version: str, state_root: Path, env: Mapping[str, str], install: bool = True) -> str | None:
    """The directory to put first on ``sys.path`` for ``nvidia_tao_core`` of ``version``: None when
    this environment's own is that version; else the per-version cache (installed when missing and
    ``install``). Raises Unavailable."""
    if installed_version() == version:
        return None
    target = cache_dir(state_root, version)
    if not (target / "nvidia_tao_core" / "config").is_dir():
        if not install:
            raise Unavailable(f"{PACKAGE}=={version} is not in {target}")
        _install(target, version, env)
    return str(target)


def import_schema(network_arch: str, version: str, where: str | None) -> tuple[type, str]:
    """(the schema dataclass, its dotted name) of ``network_arch`` in nvidia-tao-core ``version``.
    Raises Unavailable (no omegaconf, or no schema for the network in that version)."""
    if where is not None and where not in sys.path:
        sys.path.insert(0, where)
    loaded = sys.modules.get("nvidia_tao_core")
    if loaded is not None and where is not None and not str(getattr(loaded, "__file__", "")).startswith(where):
        for name in [m for m in sys.modules if m == "nvidia_tao_core" or m.startswith("nvidia_tao_core.")]:
            del sys.modules[name]   # another version was imported first (one process, one check)
    try:
        importlib.import_module("omegaconf")
    except ImportError:
        raise Unavailable("omegaconf is not installed here (rerun install.sh)") from None
    if not re.fullmatch(r"[a-z][a-z0-9_]*", network_arch):
        raise Unavailable(f"{PACKAGE} {version} has no schema module for {network_arch!r}")
    module_name = f"nvidia_tao_core.config.{network_arch}.default_config"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("nvidia_tao_core.config"):
            raise Unavailable(f"{PACKAGE} {version} has no schema for {network_arch}") from None
        if exc.name == "nvidia_tao_core":
            raise Unavailable(f"{PACKAGE} {version} is not installed here (rerun install.sh)") from None
        raise Unavailable(f"{module_name} needs {exc.name}, not installed here") from None
    except Exception as exc:   # a release written for another Python: no check, never a crash
        raise Unavailable(f"{module_name} cannot be imported on Python {sys.version_info[0]}.{sys.version_info[1]} "
                          f"({type(exc).__name__})") from None
    found = tao_schema.schema_class(module)
    if found is None:
        raise Unavailable(f"{module_name} names no ExperimentConfig")
    return found, f"{module_name}.{found.__name__}"


def networks(version: str, where: str | None) -> list[str]:
    """The networks with a ``default_config`` in nvidia-tao-core ``version`` (directory names, not imported)."""
    if where is not None:
        base = Path(where) / "nvidia_tao_core" / "config"
    else:
        spec = find_spec("nvidia_tao_core")
        if spec is None or not spec.submodule_search_locations:
            return []
        base = Path(list(spec.submodule_search_locations)[0]) / "config"
    return sorted(p.name for p in base.iterdir() if (p / "default_config.py").is_file()) if base.is_dir() else []
