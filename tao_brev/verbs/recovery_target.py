"""Where the next attempt of a recovering job runs (``tao_brev.verbs.recover``): the same
instance once ``brev ls`` says RUNNING and its GPUs answer (a STOPPED one is started by the
resubmit), else the fallback instance."""

from __future__ import annotations

from typing import Optional

from .. import remote
from ..context import Context, say
from ..docker_state import docker_error_code
from ..errors import TaoBrevError
from ..vocabulary import InstanceStatus

HEALTH_WAIT_S = 600.0      # how long the same instance may take to be RUNNING with working GPUs again
HEALTH_INTERVAL_S = 30.0   # between two health checks


def gpu_check(ctx: Context, instance: str, image: str) -> Optional[str]:
    """None when ``docker run --rm --gpus all IMAGE nvidia-smi -L`` lists a GPU on ``instance`` (the
    NVIDIA Container Toolkit's NVML path, which an Xid or a lost GPU breaks), else why not."""
    token = remote.new_token()
    check = remote.section(token, "gpu", remote.gpu_smoke(image))
    try:
        sec = remote.parse_sections(ctx.brev.exec(instance, check, idempotent=True).stdout, token).get("gpu")
    except TaoBrevError as exc:
        return f"{exc.code}: {exc.message}"
    if sec is not None and remote.lists_gpu(sec.exit_code, sec.output):
        return None
    text = sec.output if sec is not None else "no answer"
    return f"{docker_error_code(text, default='GPU_UNHEALTHY')}: {text.strip()[-300:]}"


def choose_instance(ctx: Context, instance: str, image: str, fallback: Optional[str], wait_s: float,
                    interval: float) -> tuple[Optional[str], list[str], str]:
    """(instance, extra submit flags, what was found) for the next attempt: ``instance`` once
    ``brev ls`` says RUNNING and :func:`gpu_check` passes (a STOPPED one is started by the resubmit:
    ``--start``, billing resumes), within ``wait_s`` seconds; else ``fallback``; else (None, [], why)."""
    deadline = ctx.clock() + wait_s
    why = ""
    while True:
        entry = ctx.brev.instance(instance)
        found = str((entry or {}).get("status") or "").upper()
        if entry is None:
            why = f"brev ls lists no instance {instance} (deleted)"
            break
        if found == InstanceStatus.STOPPED:
            return instance, ["--start"], f"{instance} is STOPPED: the resubmit starts it (billing resumes)"
        if found == InstanceStatus.RUNNING:
            problem = gpu_check(ctx, instance, image)
            if problem is None:
                return instance, [], f"{instance} is RUNNING and its GPUs answer"
            why = f"the GPUs of {instance} do not answer ({problem})"
        else:
            why = f"{instance} is {found or 'in an unknown state'}"
        if ctx.clock() + interval > deadline:
            break
        say(f"recover: {why}; checking again in {interval:.0f} s")
        ctx.sleep(interval)
    if fallback and fallback != instance:
        return fallback, [], f"{why}: moving to the fallback instance {fallback}"
    return None, [], why
