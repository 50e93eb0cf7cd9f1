"""One container's (or every job container's) state, logs, removal and results, as shell commands.
Never ``.Config.Env``: an answer must not hold the environment."""

from __future__ import annotations

import hashlib
import shlex

from .quoting import CONTAINER_RESULTS_DIR, check_name, rpath


def inspect_state(job_id: str) -> str:
    """Only ``.State`` (never ``.Config.Env``: the output must not hold the environment)."""
    return f"docker inspect --type container --format '{{{{json .State}}}}' {shlex.quote(check_name(job_id, 'job id'))}"


def logs_tail(job_id: str, lines: int) -> str:
    return f"docker logs --tail {int(lines)} {shlex.quote(check_name(job_id, 'job id'))}"


def logs_if_exited(job_id: str, lines: int) -> str:
    """The log tail of an exited container only (for the failure hint), else nothing."""
    quoted = shlex.quote(check_name(job_id, "job id"))
    return (f"if [ \"$(docker inspect --type container --format '{{{{.State.Status}}}}' {quoted} 2>/dev/null)\" "
            f"= exited ]; then {logs_tail(job_id, lines)}; fi")


def remove_container(job_id: str) -> str:
    return f"docker rm -f {shlex.quote(check_name(job_id, 'job id'))}"


def own_results(image: str, results_dir: str) -> str:
    """Hand a results dir written by a container (as root) to the instance user.

    The instance user (``ubuntu`` on Brev) is in the ``docker`` group, not
    root: files a job wrote can be unreadable (0600) or undeletable by it.
    A short container of ``image`` (already on the instance; its entrypoint
    bypassed, so no NGC banner) runs ``chown -R UID:GID`` of the user - no
    sudo needed. Nothing to do (exit 0) when the dir is absent.

    The helper has a name made from the dir (``tao-own-<12 hex>``), and one left by an earlier run is
    removed first: a docker CLI killed between the create and the start of ``docker run --rm`` leaves
    a ``created`` container that AutoRemove never removes (moby removes a --rm container when it exits,
    and this one never started; a chaos test killed a teardown there)."""
    quoted = rpath(results_dir)
    name = "tao-own-" + hashlib.sha256(results_dir.encode()).hexdigest()[:12]
    return (f"if [ -d {quoted} ]; then docker rm -f {name} >/dev/null 2>&1; "
            f"docker run --rm --name {name} --network none --entrypoint chown "
            f"-v {quoted}:{CONTAINER_RESULTS_DIR} {shlex.quote(image)} "
            f"-R \"$(id -u):$(id -g)\" {CONTAINER_RESULTS_DIR}; fi")


def archive_results(results_dir: str, archive: str) -> str:
    """One gzip tar of ``results_dir`` (its last component as the top directory) at
    instance path ``archive``, then ``TAO_ARCHIVE <sha256> <bytes>`` of that file;
    ``TAO_NO_RESULTS`` (exit 0) when the dir is absent. A failed ``tar`` (a full
    disk, an unreadable file) exits non-zero and prints no TAO_ARCHIVE line."""
    parent, name = results_dir.rstrip("/").rsplit("/", 1)
    quoted, arch = rpath(results_dir), rpath(archive)
    return (f"if [ ! -d {quoted} ]; then echo TAO_NO_RESULTS; else "
            f"mkdir -p {rpath(archive.rsplit('/', 1)[0])} && "
            f"tar -czf {arch} -C {rpath(parent or '/')} {shlex.quote(name)} && "
            f"sum=$(sha256sum < {arch}) && size=$(wc -c < {arch}) && "
            f"printf 'TAO_ARCHIVE %s %s\\n' \"${{sum%% *}}\" $size; fi")


LIVE_CONTAINER_STATES = ("running", "paused", "restarting", "created")   # a container that holds or may hold GPUs


def list_job_containers() -> str:
    """Every container carrying a ``tao-job`` label (the launch of any state dir sets it:
    :meth:`RunSpec.docker_run`): name and state, tab-separated. Read by :func:`live_job_containers`."""
    return "docker ps -a --filter label=tao-job --format '{{.Names}}\t{{.State}}'"


def live_job_containers(output: str) -> list[str]:
    """The names of the live (LIVE_CONTAINER_STATES) containers in :func:`list_job_containers`' answer."""
    rows = [line.split("\t") for line in output.splitlines() if "\t" in line]
    return sorted(name.strip() for name, state, *_ in rows if state.strip() in LIVE_CONTAINER_STATES)


def instance_now() -> str:
    """The instance's clock (epoch seconds): file times are compared with it, never with ours."""
    return "date +%s"


def last_log_line(job_id: str) -> str:
    """The container's last log line with docker's timestamp (RFC 3339), for stall evidence."""
    return f"docker logs --timestamps --tail 1 {shlex.quote(check_name(job_id, 'job id'))}"
