"""``disk``: free space where Docker stores images and under the results root
(``df -P -B1`` of the nearest existing directory), against the size a pull of
``--image`` needs."""

from __future__ import annotations

from typing import TypedDict

from ... import remote
from ...errors import CODES
from .report import Check, Report, section_tail
from .units import GIB, Answers, ImageFacts, Plan, RemoteCheck, Snippet

DISK_HEADROOM_BYTES = 20 * GIB       # warn when less stays free for results and checkpoints


class FreeSpace(TypedDict):
    """``df -P -B1`` of the nearest existing directory of a path."""
    path: str
    free_bytes: int
    filesystem: str
    mount: str


class ResultsFreeSpace(FreeSpace):
    root: str   # the results root asked about (``path`` is its nearest existing directory)


class DiskData(TypedDict):
    """The ``disk`` check's ``data``."""
    docker_root: FreeSpace | None
    results_root: ResultsFreeSpace | None
    image_bytes: int | None
    image_size_source: str | None
    need_bytes: int


def _free_space(path_expr: str) -> str:
    """Print the nearest existing directory of ``path_expr``, then ``df -P -B1`` of it."""
    return (f'__tb_p={path_expr}; while [ ! -e "$__tb_p" ] && [ "$__tb_p" != / ]; do '
            '__tb_p=$(dirname "$__tb_p"); done; printf \'%s\\n\' "$__tb_p"; df -P -B1 "$__tb_p"')


DISK_DOCKER = Snippet("disk_docker", lambda plan: _free_space(
    "$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || echo /var/lib/docker)"))
DISK_RESULTS = Snippet("disk_results", lambda plan: _free_space(remote.rpath(plan.results_root)))


def _df(sec: remote.Section | None) -> FreeSpace | None:
    """``{"path", "free_bytes", "filesystem", "mount"}`` from a _free_space section."""
    if sec is None or sec.exit_code != 0:
        return None
    lines = sec.output.strip().splitlines()
    cols = lines[-1].split() if len(lines) >= 3 else []
    if len(cols) < 6 or not cols[3].isdigit():
        return None
    return {"path": lines[0], "free_bytes": int(cols[3]), "filesystem": cols[0], "mount": " ".join(cols[5:])}


def check_disk(report: Report, answers: Answers, facts: ImageFacts | None, results_root: str) -> Check:
    """``disk``: free space where Docker stores images and under the results
    root. Fails when a missing image will not fit; warns when less than
    DISK_HEADROOM_BYTES would stay free for results."""
    t = answers.elapsed_s
    docker, results = _df(answers.get("disk_docker")), _df(answers.get("disk_results"))
    need = facts.size_bytes if facts and not facts.present else 0
    data: DiskData = {"docker_root": docker,
                      "results_root": {**results, "root": results_root} if results is not None else None,
                      "image_bytes": facts.size_bytes if facts else None,
                      "image_size_source": facts.size_source if facts else None, "need_bytes": need}
    if docker is None or results is None:
        sec = answers.get("disk_docker") if docker is None else answers.get("disk_results")
        return report.warn("disk", f"could not read free space: {section_tail(sec)}",
                           "Check the disk by hand: brev exec NAME \"df -h\".", elapsed_s=t, **data)
    if facts is not None and docker["free_bytes"] < need:   # need is 0 without facts
        return report.fail("disk", "DISK_FULL", f"{_gib(docker['free_bytes'])} free at {docker['path']} "
                           f"(Docker images) but {facts.image} needs ~{_gib(need)} ({facts.size_source} size)",
                           elapsed_s=t, **data)
    same_fs = (docker["filesystem"], docker["mount"]) == (results["filesystem"], results["mount"])
    left = results["free_bytes"] - (need if same_fs else 0)
    detail = (f"{_gib(docker['free_bytes'])} free for Docker images, {_gib(results['free_bytes'])} for "
              f"results ({results_root})" + (f"; the image needs ~{_gib(need)}" if need else ""))
    if left < DISK_HEADROOM_BYTES:
        return report.warn("disk", f"{detail}; only {_gib(left)} would stay free for results",
                           f"Keep at least {_gib(DISK_HEADROOM_BYTES)} free for results and checkpoints: "
                           + CODES["DISK_FULL"].fix, elapsed_s=t, **data)
    return report.passed("disk", detail, elapsed_s=t, **data)


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def _read(report: Report, answers: Answers, plan: Plan) -> Check:
    return check_disk(report, answers, plan.facts, plan.results_root)


DISK_CHECK = RemoteCheck("disk", ("disk_docker", "disk_results", "image", "manifest"), _read)
