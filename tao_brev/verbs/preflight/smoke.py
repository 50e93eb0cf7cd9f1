"""``preflight.py --gpu-smoke``: ``docker run --rm --gpus all <small image> nvidia-smi -L``
proves the NVIDIA Container Toolkit gives containers the GPUs, as its own round trip
(the small image, ``images.gpu_smoke`` of versions.yaml, may be pulled by docker run)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ... import bank, docker_state, remote
from ...secrets import redact
from ...errors import TaoBrevError, TransportError
from .report import Check, Context, PreflightRequest, Report, code_fix

SMOKE_TIMEOUT_S = 600.0              # small image pull + `nvidia-smi` in a container
GPU_SMOKE_KEY = "images.gpu_smoke"
GPU_SMOKE_DEFAULT = "nvidia/cuda:12.4.1-base-ubuntu22.04"
# `docker run` could not get its image (docker/cli run.go: "Unable to find image ... locally", then the pull error)
PULL_FAILED = re.compile(r"Unable to find image|Error response from daemon: (Get|Head) \"https://", re.I)


def gpu_smoke_image(env: Mapping[str, str]) -> str:
    """``images.gpu_smoke`` from versions.yaml, else GPU_SMOKE_DEFAULT (a bank without the key)."""
    try:
        return bank.resolve_image(GPU_SMOKE_KEY, env)["image"]
    except TaoBrevError:
        return GPU_SMOKE_DEFAULT


def smoke_error_code(exit_code: int, text: str, image: str) -> str:
    """Why ``docker run`` failed: its image could not be had (exit 125, or a pull error), or the GPU."""
    if exit_code == 125 or PULL_FAILED.search(text):
        return docker_state.registry_error_code(text, bank.image_registry(image), default="GPU_NOT_FOUND")
    return docker_state.docker_error_code(text, "GPU_NOT_FOUND")


def check_gpu_smoke(report: Report, ctx: Context, req: PreflightRequest, docker: Check) -> None:
    """``gpu_smoke``: ``docker run --rm --gpus all <small image> nvidia-smi -L``
    proves the NVIDIA Container Toolkit gives containers the GPUs. Its own
    round trip (the small image may be pulled)."""
    image = gpu_smoke_image(ctx.env)
    if not docker.ok:
        report.fail("gpu_smoke", docker.failure_code, "not run: the docker check failed", docker.fix, image=image)
        return
    started = ctx.clock()
    command = remote.gpu_smoke(image)
    try:
        result = report.count("gpu_smoke", ctx.brev.exec, req.instance, command, timeout=SMOKE_TIMEOUT_S,
                              host=req.host)
    except TransportError as exc:
        report.error("gpu_smoke", exc, image=image)
        return
    took = ctx.clock() - started
    gpus = [line.strip() for line in result.stdout.splitlines() if line.startswith("GPU ")]
    if result.ok and gpus:
        report.passed("gpu_smoke", f"a container sees {len(gpus)} GPU(s) ({image})", elapsed_s=took,
                      image=image, gpus=gpus)
        return
    text = redact.tail(result.stdout + "\n" + result.stderr, 400)
    code = smoke_error_code(result.exit_code, text, image)
    report.fail("gpu_smoke", code, f"`{command}` failed (exit {result.exit_code}): {text}",
                code_fix(code, req.instance), elapsed_s=took, image=image)
