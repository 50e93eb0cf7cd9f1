"""``docker`` and ``gpu``: Docker answers (server version, runtimes; where docker is when the
ssh shell's PATH lacks it) and nvidia-smi lists the GPUs, read from the combined round trip.
Docker CLI messages are classified by :func:`tao_brev.docker_state.docker_error_code`."""

from __future__ import annotations

import json
from typing import TypedDict

from ... import docker_state, remote
from ...errors import CODES
from .report import Check, Report, code_fix, section_tail
from .units import Answers, Plan, RemoteCheck, Snippet

# Where docker is when the non-interactive ssh shell cannot find it: usual places, and the
# PATH of a login shell (which reads ~/.profile; `ssh HOST 'command'` does not).
DOCKER_WHERE = (
    "if command -v docker >/dev/null 2>&1; then command -v docker; else echo TAO_DOCKER_NOT_ON_PATH; "
    'for __tb_d in /usr/bin/docker /usr/local/bin/docker /snap/bin/docker /opt/bin/docker "$HOME/bin/docker" '
    '"$HOME/.local/bin/docker"; do [ -x "$__tb_d" ] && echo "found $__tb_d"; done; '
    "__tb_l=$(\"${SHELL:-sh}\" -lc 'command -v docker' </dev/null 2>/dev/null | tail -n 1); "
    'case "$__tb_l" in /*) echo "login $__tb_l";; esac; fi')

DOCKER = Snippet("docker", lambda plan: "docker info --format '{{json .}}'")
DOCKER_PATH = Snippet("docker_path", lambda plan: DOCKER_WHERE)
GPU = Snippet("gpu", lambda plan: "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader")


def docker_elsewhere(section: remote.Section | None) -> str | None:
    """The path of a docker that a login shell or a usual place has, when the
    non-interactive PATH has none (the ``docker_path`` section); else None."""
    if section is None or "TAO_DOCKER_NOT_ON_PATH" not in section.output:
        return None
    lines = section.output.splitlines()
    found = [line.split(" ", 1)[1].strip() for prefix in ("login /", "found /")   # the login shell's first
             for line in lines if line.startswith(prefix)]
    return found[0] if found else None


class GpuData(TypedDict):
    """The ``gpu`` check's ``data`` (nvidia-smi's first GPU gives memory and driver)."""
    count: int
    models: list[str]
    memory: str
    driver_version: str


def _json_line(text: str) -> object:
    """The last line of ``text`` that parses as JSON (docker prints warnings around it)."""
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


def check_docker(report: Report, answers: Answers) -> Check:
    """``docker``: ``docker info`` answers; its server version and runtimes."""
    sec = answers.get("docker")
    t = answers.elapsed_s
    if sec is not None and sec.exit_code == 127:
        where = docker_elsewhere(answers.get("docker_path"))
        if where:
            fix = CODES["DOCKER_NOT_ON_PATH"].fix.replace("NAME", answers.instance).replace("DOCKER_PATH", where)
            return report.fail("docker", "DOCKER_NOT_ON_PATH", f"docker is installed at {where} but not on the "
                               "PATH of non-interactive ssh shells, which brev exec uses (`docker`: command not "
                               "found)", fix, elapsed_s=t, docker_path=where)
        return report.fail("docker", "DOCKER_NOT_FOUND", f"docker: command not found ({section_tail(sec)})",
                           elapsed_s=t)
    info = _json_line(sec.output) if sec is not None else None
    info = info if isinstance(info, dict) else {}
    if sec is None or sec.exit_code != 0 or info.get("ServerErrors"):
        why = "; ".join(map(str, info.get("ServerErrors") or [])) or section_tail(sec)
        code = docker_state.docker_error_code(why, "DOCKER_DAEMON_DOWN")
        return report.fail("docker", code, f"the Docker daemon does not answer: {why}", elapsed_s=t)
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    return report.passed("docker", f"Docker {info.get('ServerVersion', '?')}", elapsed_s=t,
                         server_version=info.get("ServerVersion"), docker_root_dir=info.get("DockerRootDir"),
                         runtimes=runtimes)


def check_gpu(report: Report, answers: Answers) -> None:
    """``gpu``: nvidia-smi on the host lists the GPUs (count, model, memory, driver).
    Warns when Docker lists no ``nvidia`` runtime (``--gpu-smoke`` proves it)."""
    sec, t = answers.get("gpu"), answers.elapsed_s
    lines = sec.output.strip().splitlines() if sec and sec.exit_code == 0 else []
    rows = [[cell.strip() for cell in line.split(",")] for line in lines if line.count(",") >= 2]
    if not rows:
        # e.g. "couldn't communicate with the driver"
        code = docker_state.docker_error_code(section_tail(sec), "GPU_NOT_FOUND")
        code = code if code in ("GPU_DRIVER_NOT_LOADED", "GPU_UNHEALTHY") else "GPU_NOT_FOUND"
        report.fail("gpu", code, f"nvidia-smi lists no GPU: {section_tail(sec)}", code_fix(code, answers.instance),
                    elapsed_s=t)
        return
    models = [r[0] for r in rows]
    data: GpuData = {"count": len(rows), "models": models, "memory": rows[0][1], "driver_version": rows[0][2]}
    detail = f"{len(rows)} x {models[0]} ({rows[0][1]}), driver {rows[0][2]}"
    docker = answers.get("docker")
    info = _json_line(docker.output) if docker and docker.exit_code == 0 else None
    if isinstance(info, dict) and "nvidia" not in (info.get("Runtimes") or {}):
        report.warn("gpu", detail + "; Docker lists no 'nvidia' runtime",
                    "Run preflight.py with --gpu-smoke to prove containers get the GPU; if it fails: "
                    + CODES["NVIDIA_RUNTIME_MISSING"].fix, elapsed_s=t, **data)
        return
    report.passed("gpu", detail, elapsed_s=t, **data)


def _read_docker(report: Report, answers: Answers, plan: Plan) -> Check:
    return check_docker(report, answers)


def _read_gpu(report: Report, answers: Answers, plan: Plan) -> None:
    check_gpu(report, answers)


DOCKER_CHECK = RemoteCheck("docker", ("docker", "docker_path"), _read_docker)
GPU_CHECK = RemoteCheck("gpu", ("gpu", "docker"), _read_gpu)
