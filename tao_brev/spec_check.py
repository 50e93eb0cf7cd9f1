"""submit's spec check: the spec and its overrides merged with TAO's schema of the image's version.

:func:`check` answers a :class:`~tao_brev.tao_schema.SpecCheck` (the answer's ``spec_check``) or
raises BAD_SPEC (exit 2) before anything is recorded or sent; a spec that cannot be checked (no
schema package for that version, a custom image, an action with another schema) is a warning.
The merge itself: :mod:`tao_brev.tao_schema`; the package: :mod:`tao_brev.tao_schema_pkg`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from . import tao_schema, tao_schema_pkg, tao_schema_values
from .remote import CONTAINER_RESULTS_DIR

BUNDLE_OVERRIDE = f"results_dir={CONTAINER_RESULTS_DIR}"   # remote.RunSpec.docker_run passes it first
# Top-level spec keys a launch wrapper removes before TAO reads the spec (comma-separated; the
# test simulator's `simulate:` block): left out of the check, and named in the answer's spec_check.
LEAVE_OUT_ENV = "TAO_BREV_SPEC_LEAVE_OUT"


def _omegaconf():
    import omegaconf
    from omegaconf import errors  # noqa: F401  (omegaconf.errors)

    return omegaconf


def _structured(omegaconf, cls):
    """``OmegaConf.structured(cls)``; a schema this omegaconf cannot build is Unavailable, not a crash."""
    try:
        return omegaconf.OmegaConf.structured(cls)
    except Exception as exc:
        raise tao_schema_pkg.Unavailable(f"omegaconf cannot build {cls.__name__} ({type(exc).__name__})") from None


def not_checked(reason: str) -> tao_schema.SpecCheck:
    return tao_schema.SpecCheck(False, reason=reason)


def bare_overrides(overrides: Sequence[str]) -> list[tao_schema.Finding]:
    """Findings for overrides that Hydra's grammar refuses whatever the schema (no ``=``, no key)."""
    found: list[tao_schema.Finding] = []
    for number, item in enumerate(overrides, 1):
        key, eq, _ = item.partition("=")
        if not eq and not key.startswith("~"):
            found.append(tao_schema.Finding(f"override {number}", key.strip()[:60] or "(empty)",
                                            "has no '=VALUE' (Hydra reads KEY=VALUE; the container refuses a bare key)",
                                            override=number))
    return found


def check(*, network_arch: str, action: str, image: str, spec_path: str, spec_text: str, spec_data: dict[str, Any],
          overrides: list[str], state_root: Path, env: dict[str, str], skip: bool, fix: str) -> tao_schema.SpecCheck:
    """Merge as the container will; raise BAD_SPEC (``fix``: the exact command after fixing) or answer.

    ``skip`` (--no-spec-check) answers ``checked: false`` at once. Installs the schema package of
    another TAO version on demand (at most ``tao_schema_pkg.INSTALL_TIMEOUT_S`` seconds)."""
    if skip:
        return not_checked("--no-spec-check: the spec and overrides were not checked against TAO's schema")
    bare = bare_overrides(overrides)
    if bare:
        raise tao_schema.refuse(bare, spec_path, "Hydra's override grammar", fix)
    if not tao_schema.hydra_available():   # the one reading of an override is hydra-core's (no second one here)
        return not_checked("hydra-core is not installed here, and the overrides are read only with its grammar: "
                           "bash install.sh --local installs it")
    version = tao_schema_pkg.image_version(image)
    if version is None:
        return not_checked(f"image {image} is not a numbered TAO toolkit -pyt image, so its schema is unknown here "
                           "(pass --no-spec-check for a custom image)")
    if action in tao_schema.OTHER_SCHEMA_ACTIONS:
        return not_checked(f"`{network_arch} {action}` takes another schema than ExperimentConfig; not checked")
    try:
        where = tao_schema_pkg.locate(version, state_root, env)
        cls, name = tao_schema_pkg.import_schema(network_arch, version, where)
        omegaconf = _omegaconf()
        schema = _structured(omegaconf, cls)
    except tao_schema_pkg.Unavailable as exc:
        return not_checked(f"the spec could not be checked against TAO {version}'s schema: {exc}")
    label = f"nvidia-tao-core {version} {name}"
    left_out = [k for k in env.get(LEAVE_OUT_ENV, "").split(",") if k.strip() and k.strip() in spec_data]
    data = {k: v for k, v in spec_data.items() if k not in left_out}
    merged, findings = tao_schema.merge_spec(omegaconf, schema, data, spec_path, spec_text)
    if merged is not None:
        def label_of(number: int) -> str:
            return f"the bundle's own {BUNDLE_OVERRIDE}" if number == 1 else f"override {number - 1}"
        findings += tao_schema.apply_overrides(omegaconf, merged, [BUNDLE_OVERRIDE, *overrides], label_of,
                                               lambda number: number - 1 or None)
    warnings: list[str] = []
    if merged is not None and not findings:   # the values the action reads: a ??? still missing, a ${...} dangling
        positions = tao_schema.key_positions(spec_text)
        def where_of(path: tuple[str, ...]) -> str:
            return tao_schema._where(spec_path, positions, path)
        findings += tao_schema_values.missing_values(omegaconf, merged, action, where_of)
        dangling, warnings = tao_schema_values.dangling(omegaconf, merged, action, where_of)
        findings += dangling
    if findings:
        raise tao_schema.refuse(findings[:tao_schema.MAX_FINDINGS], spec_path, label, fix)
    return tao_schema.SpecCheck(True, schema=label, config=merged, left_out=left_out, warnings=warnings,
                                resolved=tao_schema_values.resolved_strings(omegaconf, merged, action))
