"""Images on the instance: present (and its size), in its registry, pulled, and a GPU smoke run."""

from __future__ import annotations

import shlex


def image_size(image: str) -> str:
    """Prints the image's local size in bytes (``docker image inspect``); non-zero when it is absent."""
    return f"docker image inspect --format '{{{{.Size}}}}' {shlex.quote(image)}"


def manifest_inspect(image: str) -> str:
    """The image's manifest from its registry (the size a pull needs; the registry's refusal)."""
    return f"docker manifest inspect {shlex.quote(image)}"


def pull_image(image: str) -> str:
    return f"docker pull {shlex.quote(image)}"


def gpu_smoke(image: str) -> str:
    """``docker run --rm --gpus all IMAGE nvidia-smi -L``: the NVIDIA Container Toolkit hands containers
    the GPUs (``GPU N: ...`` lines); an Xid or a lost GPU breaks it. Read by :func:`lists_gpu`."""
    return f"docker run --rm --gpus all {shlex.quote(image)} nvidia-smi -L"


def lists_gpu(exit_code: int, output: str) -> bool:
    """Whether :func:`gpu_smoke` answered with a GPU."""
    return exit_code == 0 and "GPU " in output
