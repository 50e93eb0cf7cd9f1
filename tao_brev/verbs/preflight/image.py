"""``image``: ``--image`` on the instance (``docker image inspect``), its size as the
registry states it (``docker manifest inspect``), and with ``--pull`` the pull
(:mod:`.pull`) when nothing blocks it."""

from __future__ import annotations

import json

from ... import docker_state, remote
from .ngc import NgcStatus
from .pull import pull_image
from .report import Check, Context, PreflightRequest, Report, section_tail
from .units import NO_MANIFEST, Answers, ImageFacts, Plan, RemoteCheck, Snippet

EXTRACT_FACTOR = 2                   # registry layers are compressed; extracted takes ~2x (estimate)

IMAGE = Snippet("image", lambda plan: remote.image_size(plan.image) if plan.image else None)
MANIFEST = Snippet("manifest", lambda plan: remote.manifest_inspect(plan.image) if plan.image else None)


def image_facts(answers: Answers, image: str) -> ImageFacts:
    """Presence and local size (``docker image inspect``); the size a pull needs:
    registry layers (compressed) x EXTRACT_FACTOR, else the local size, else
    DEFAULT_IMAGE_BYTES."""
    facts = ImageFacts(image)
    sec = answers.get("image")
    if sec is not None and sec.exit_code == 0:
        facts.present = True
        last = (sec.output.strip().splitlines() or [""])[-1]
        facts.local_bytes = int(last) if last.isdigit() else None
    manifest = answers.get("manifest")
    registry = registry_bytes(manifest.output) if manifest and manifest.exit_code == 0 else None
    if registry:
        facts.size_bytes, facts.size_source = registry * EXTRACT_FACTOR, "registry"
    elif facts.local_bytes:
        facts.size_bytes, facts.size_source = facts.local_bytes, "local"
    return facts


def registry_bytes(manifest_text: str) -> int | None:
    """Sum of the layer sizes in ``docker manifest inspect`` output (a schema-2
    or OCI image manifest lists ``layers``; verbose output nests it under
    ``SchemaV2Manifest``/``OCIManifest``); None for a manifest list/index."""
    text = manifest_text.strip()
    try:
        data = json.loads(text[text.index("{"):] if "{" in text else text)
    except (ValueError, json.JSONDecodeError):
        return None
    for key in ("SchemaV2Manifest", "OCIManifest"):
        if isinstance(data, dict) and isinstance(data.get(key), dict):
            data = data[key]
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        return None
    return sum(int(layer.get("size") or 0) for layer in layers if isinstance(layer, dict)) or None


def _not_in_registry(manifest: remote.Section | None) -> bool:
    """``docker manifest inspect`` failed because the registry has no such image."""
    return manifest is not None and manifest.exit_code != 0 and (
        NO_MANIFEST in section_tail(manifest).lower()
        or docker_state.docker_error_code(section_tail(manifest)) == "IMAGE_NOT_FOUND")


def check_image(report: Report, ctx: Context, req: PreflightRequest, answers: Answers, facts: ImageFacts,
                blocker: Check | None, logged_in: bool = False) -> None:
    """``image``: on the instance (``docker image inspect``); with ``--pull`` and
    no failed docker/disk/ngc_auth check (``blocker``), pulled in its own round trip."""
    t, image = answers.elapsed_s, facts.image
    if facts.present:
        report.passed("image", f"{image} is on the instance", elapsed_s=t, image=image, present=True,
                      size_bytes=facts.local_bytes, pulled=False)
        return
    if blocker is not None and blocker.name == "docker":
        report.fail("image", blocker.failure_code, f"cannot look for {image}: the docker check failed", blocker.fix,
                    elapsed_s=t, image=image)
        return
    manifest = answers.get("manifest")
    if _not_in_registry(manifest):
        report.fail("image", "IMAGE_NOT_FOUND", f"{image} is not on the instance and the registry has no such "
                    f"image: {section_tail(manifest)}", elapsed_s=t, image=image, present=False)
        return
    if not req.pull:
        report.fail("image", "IMAGE_NOT_PULLED", f"{image} is not on the instance",
                    f"Pull it before the GPU run: preflight.py --instance {req.instance} --image {req.image} --pull",
                    elapsed_s=t, image=image, present=False)
        return
    if blocker is not None:
        report.fail("image", blocker.failure_code, f"{image} is not on the instance; not pulled because the "
                    f"{blocker.name} check failed", blocker.fix, elapsed_s=t, image=image, present=False)
        return
    pull_image(report, ctx, req, image, logged_in)


def _read(report: Report, answers: Answers, plan: Plan) -> None:
    """The first failed docker / disk / ngc_auth check blocks the pull; an AUTH_OK ngc_auth
    means a refused pull is not entitled."""
    ngc = plan.done.get("ngc_auth")
    blocker = next((c for c in (plan.done["docker"], plan.done["disk"], ngc) if c is not None and not c.ok), None)
    authed = ngc is not None and ngc.data.get("status") == NgcStatus.AUTH_OK
    assert plan.ctx is not None and plan.req is not None and plan.facts is not None   # a live plan with --image
    check_image(report, plan.ctx, plan.req, answers, plan.facts, blocker, logged_in=authed)


IMAGE_CHECK = RemoteCheck("image", ("image", "manifest"), _read, applies=lambda plan: bool(plan.image))
