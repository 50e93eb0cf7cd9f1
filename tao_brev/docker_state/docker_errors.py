"""Docker's own error messages -> error codes, and the one registry classification of a pull/login."""

from __future__ import annotations

import re


# Docker CLI / daemon messages -> error codes (Docker CLI reference, moby
# daemon errors, NVIDIA Container Toolkit). Order matters: first match wins.
DOCKER_ERRORS: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"\bdocker: (command )?not found", re.I), "DOCKER_NOT_FOUND"),
    (re.compile(r"Cannot connect to the Docker daemon|Is the docker daemon running", re.I), "DOCKER_DAEMON_DOWN"),
    # nvidia-container-cli: "device error: 3: unknown device" = --gpus named an id the host lacks
    (re.compile(r"nvidia-container-cli: device error: .*unknown device", re.I), "GPU_IDS_UNKNOWN"),
    # After an Xid (e.g. 79, fallen off the bus) NVML reports the GPU lost / an unknown error and the
    # runtime hook refuses every new container; a driver upgraded under a running kernel module says
    # "driver/library version mismatch". Only a reset (stop/start of the VM) helps, not the toolkit.
    # The driver's kernel module is not loaded (nvidia-container-cli's "nvml error: driver not loaded";
    # nvidia-smi's "couldn't communicate with the NVIDIA driver"): a reboot or another instance, not the toolkit.
    (re.compile(r"nvml error: driver not loaded|couldn't communicate with the NVIDIA driver", re.I),
     "GPU_DRIVER_NOT_LOADED"),
    # Inside a container whose device cgroup a host `systemctl daemon-reload` reset (nvidia-container-toolkit
    # #48): the GPU is fine, this container lost it; a new container gets it again.
    (re.compile(r"Failed to initialize NVML: Unknown Error|CUDA error: unknown error", re.I), "GPU_ACCESS_LOST"),
    (re.compile(r"nvml error: (gpu is lost|unknown error)|GPU is lost|fallen off the bus|\bXid\b|"
                r"driver/library version mismatch", re.I), "GPU_UNHEALTHY"),
    (re.compile(r'could not select device driver "" with capabilities: \[\[gpu\]\]|nvidia-container-cli|'
                r"unknown or invalid runtime name: nvidia", re.I), "NVIDIA_RUNTIME_MISSING"),
    (re.compile(r"no space left on device", re.I), "DISK_FULL"),
    # the registry is not reached at all (DNS, TCP, TLS): never "unauthorized", never a GPU fault
    (re.compile(r"dial tcp: lookup \S+.*(no such host|server misbehaving|i/o timeout)|"
                r"dial tcp \S+: (i/o timeout|connect: (connection refused|network is unreachable|no route to host))|"
                r"TLS handshake timeout|request canceled while waiting for connection|"
                r"Client\.Timeout exceeded while awaiting headers", re.I), "REGISTRY_UNREACHABLE"),
    # distribution's error envelope: {"errors": [{"code": "DENIED" | "UNAUTHORIZED", ...}]}
    (re.compile(r"unauthorized|authentication required|\bdenied: |\"code\":\s*\"DENIED\"", re.I),
     "IMAGE_PULL_UNAUTHORIZED"),
    (re.compile(r"manifest unknown|not found: manifest|no such manifest|repository does not exist", re.I),
     "IMAGE_NOT_FOUND"),
)


def docker_error_code(text: str, default: str = "REMOTE_COMMAND_FAILED") -> str:
    """The error code for a docker failure message (``default`` when unknown)."""
    for pattern, code in DOCKER_ERRORS:
        if pattern.search(text or ""):
            return code
    return default


NGC_REGISTRY = "nvcr.io"
_DENIED = re.compile(r"\bdenied: |\"code\":\s*\"DENIED\"", re.I)


def registry_error_code(text: str, registry: str | None, *, logged_in: bool = False,
                        default: str = "REMOTE_COMMAND_FAILED") -> str:
    """The error code for a failed pull, ``docker run`` of a missing image, login or
    ``docker manifest inspect`` against ``registry`` - the one classification used
    wherever an image is pulled or a registry is logged in to.

    On nvcr.io a refusal is split by what the registry said: ``denied`` (its current
    answer for a valid key whose org is not entitled:
    ``denied: {"errors": [{"code": "DENIED", "message": "Access Denied"}]}``) or any
    refusal after a successful login = NGC_NOT_ENTITLED; ``unauthorized`` without a
    login = NGC_NOT_AUTHENTICATED. Elsewhere it stays IMAGE_PULL_UNAUTHORIZED. A
    registry that is not reached at all (``dial tcp: lookup HOST ...: no such host``)
    is REGISTRY_UNREACHABLE, whatever command met it.
    """
    code = docker_error_code(text, default)
    if code != "IMAGE_PULL_UNAUTHORIZED" or registry != NGC_REGISTRY:
        return code
    return "NGC_NOT_ENTITLED" if logged_in or _DENIED.search(text or "") else "NGC_NOT_AUTHENTICATED"
