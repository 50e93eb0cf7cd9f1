"""The launch: ``docker run`` of one TAO job (:class:`RunSpec`), the submit script around it, the
GPU guard, and the launch lock its reconciliation shares."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..errors import TaoBrevError
from .containers import inspect_state
from .files import heredoc_file, verify_file
from .quoting import (CONTAINER_JOB_DIR, CONTAINER_RESULTS_DIR, GPUS_RE, JOBS_ROOT, SHM_RE, check_name,
                      join, job_dir, rpath)

GPUS_BUSY_EXIT = 10     # ... when a live tao-job container holds GPUs this job asks for (see gpus_free)


def gpus_flag(gpus: str) -> list[str]:
    """``--gpus all`` or ``--gpus '"device=0,1"'`` (by id, for a shared host)."""
    if not GPUS_RE.fullmatch(gpus or ""):
        raise TaoBrevError("BAD_ARGUMENT", f"--gpus must be 'all' or GPU ids like 0,1 (got {gpus!r})")
    return ["--gpus", "all" if gpus == "all" else shlex.quote(f'"device={gpus}"')]


@dataclass
class RunSpec:
    """What ``docker run -d`` needs for one TAO job (all names pre-validated)."""

    job_id: str
    image: str
    network_arch: str
    action: str
    results_dir: str            # instance path
    gpus: str = "all"
    shm_size: str = "16g"
    env_file: str | None = None  # instance path of the 0600 credential file, removed after run
    mounts: tuple = ()          # (instance path, container path, read_only)
    overrides: tuple = ()       # extra TAO args, e.g. train.num_epochs=5
    share_gpus: bool = False    # launch even when a live tao-job container holds the same GPUs
    shell_args: tuple = ()      # words appended as they are: already quoted for the remote shell by their
                                # builder (resume.ResumePlan.override: a word naming a variable the script set)
    gpu_count_keys: tuple = ()  # --gpus all: TAO keys set from the instance's GPU count (count_gpus)

    def docker_run(self) -> str:
        check_name(self.job_id, "job id")
        check_name(self.network_arch, "network arch")
        check_name(self.action, "action")
        if not SHM_RE.fullmatch(self.shm_size):
            raise TaoBrevError("BAD_ARGUMENT", f"--shm-size must look like 16g or 512m (got {self.shm_size!r})")
        words = ["docker", "run", "-d", "--name", self.job_id, "--label", f"tao-job={self.job_id}",
                 "--label", f"{GPUS_LABEL}={self.gpus}", *gpus_flag(self.gpus), "--shm-size", self.shm_size]
        if self.env_file:
            words += ["--env-file", rpath(self.env_file)]
        words += ["-v", f"{rpath(join(job_dir(self.job_id), 'spec'))}:{CONTAINER_JOB_DIR}:ro",
                  "-v", f"{rpath(self.results_dir)}:{CONTAINER_RESULTS_DIR}"]
        for host, container, read_only in self.mounts:
            words += ["-v", f"{rpath(host)}:{shlex.quote(container + (':ro' if read_only else ''))}"]
        words += [shlex.quote(self.image), self.network_arch, self.action,
                  "-e", f"{CONTAINER_JOB_DIR}/spec.yaml", f"results_dir={CONTAINER_RESULTS_DIR}"]
        # GPU keys first: TAO's entrypoint reads the FIRST num_gpus=/gpu_ids= of all args (entrypoint.py:163-178)
        if self.gpus == "all":   # set by count_gpus in the same script; keys checked, so only the variable expands
            words += [f'"{check_gpu_key(k)}=' + ('[$__tb_gids]"' if k.endswith("gpu_ids") else '$__tb_ngpus"')
                      for k in self.gpu_count_keys]
        words += [shlex.quote(arg) for arg in self.overrides]
        words += list(self.shell_args)
        return " ".join(words)


NO_GPUS_EXIT = 11   # a launch script's exit status when `--gpus all` finds no GPU on the instance (count_gpus)
_GPU_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\.(num_gpus|gpu_ids)")


def check_gpu_key(key: str) -> str:
    if not _GPU_KEY.fullmatch(key):
        raise TaoBrevError("BAD_ARGUMENT", f"not a TAO GPU key: {key!r}")
    return key


def count_gpus() -> str:
    """Shell lines: ``__tb_ngpus`` = the instance's GPUs (``nvidia-smi -L`` lines ``GPU N: ...``, the
    set ``docker run --gpus all`` hands a container) and ``__tb_gids`` = ``0,1,...``, said as
    ``TAO_GPU_COUNT N``; none: exit
    NO_GPUS_EXIT with ``TAO_NO_GPUS`` (nvidia-smi's own words on stderr: a driver not loaded is named)."""
    return ("__tb_ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)\n"
            f'if [ "${{__tb_ngpus:-0}}" -lt 1 ]; then echo TAO_NO_GPUS; nvidia-smi -L 2>&1 | head -n 2 >&2; '
            f'exit {NO_GPUS_EXIT}; fi\n'
            "__tb_gids=$(seq -s, 0 $((__tb_ngpus - 1)))\n"
            f'echo "{GPU_COUNT} $__tb_ngpus"')   # the answer's gpu_overrides then name the real count


GPU_COUNT = "TAO_GPU_COUNT"   # + the GPUs count_gpus found (a line before docker run's container id)


DOCKER_MISSING = "TAO_DOCKER_MISSING"   # + the command that found no docker (exit 127)


def submit_script(run: RunSpec, spec_text: str, checks: str = "") -> str:
    """The whole submit in one round trip: write the spec, guard, launch.

    Every step stops the launch when it fails (``set -e``, and each step
    checked with its own exit status and marker): nothing reaches ``docker
    run`` after a failed step.

    Idempotent: if a container named after the job id exists, print
    ``TAO_ALREADY_SUBMITTED`` and its ``.State`` JSON, and launch nothing. Refuses (``TAO_IMAGE_MISSING``,
    exit 4) when the image is not on the instance: pulling inside ``docker
    run`` is billed GPU-idle time; preflight.py --pull pulls it first. The
    credential file, if any, is removed on every path (trap on EXIT).
    ``checks`` (shell lines that exit non-zero to refuse) run after the trap.
    The spec is written, then checked on the instance (byte size and sha256,
    :func:`verify_file`; exit 9 ``TAO_WRITE_FAILED`` / ``TAO_SPEC_UNVERIFIED``).
    The guard and the launch hold the job's launch lock, and a launch that
    reconciliation already declared never launched refuses
    (``TAO_LAUNCH_ABANDONED``, exit 6): see :func:`reconcile_launch`. Unless
    ``run.share_gpus``, a live tao-job container holding any GPU this job asks
    for refuses the launch (``TAO_GPUS_BUSY``, exit 10): see :func:`gpus_free`.
    """
    job = job_dir(run.job_id)
    spec = join(job, "spec", "spec.yaml")
    lines = []
    if run.env_file:
        lines.append(f"trap 'rm -f {rpath(run.env_file)}' EXIT")
    lines.append("set -e")
    if checks:
        lines.append(checks)
    lines += [
        f"mkdir -p {rpath(join(job, 'spec'))} {rpath(run.results_dir)} || exit 3",
        heredoc_file(spec, spec_text).rstrip("\n"),
        verify_file(spec, spec_text),
        launch_lock(run.job_id),
        f"if [ -e {rpath(join(job, ABANDONED))} ]; then echo TAO_LAUNCH_ABANDONED; exit 6; fi",
        f"if __tb_s=$({inspect_state(run.job_id)} 2>/dev/null); then "
        "echo TAO_ALREADY_SUBMITTED; printf '%s\\n' \"$__tb_s\"; exit 0; fi",
        f"docker image inspect {shlex.quote(run.image)} >/dev/null || {{ __tb_rc=$?; "
        f"[ \"$__tb_rc\" = 127 ] && {{ echo {DOCKER_MISSING} docker image inspect; exit 127; }}; "
        "echo TAO_IMAGE_MISSING; exit 4; }",
    ]
    if not run.share_gpus:
        lines.append(gpus_free(run.job_id, run.gpus))
    if run.gpus == "all" and run.gpu_count_keys:
        lines.append(count_gpus())
    lines.append(run.docker_run())
    return "\n".join(lines)


GPUS_LABEL = "tao-gpus"   # on every job container: the --gpus it was launched with ("all" or ids)


def gpus_free(job_id: str, gpus: str) -> str:
    """Refuse (``TAO_GPUS_BUSY NAME=GPUS`` per holder, exit GPUS_BUSY_EXIT) when a
    live (running, paused, restarting) tao-job container other than ``job_id``
    holds a GPU that ``gpus`` asks for. A container's GPUs are its GPUS_LABEL
    (set by :meth:`RunSpec.docker_run`); one without the label counts as all.
    The check and the ``docker run`` after it hold the instance's GPU lock
    (``~/tao-jobs/.gpus.lock``, flock on fd 8), so two launches never both pass it."""
    check_name(job_id, "job id")
    gpus_flag(gpus)   # validates
    if gpus == "all":
        overlaps = "true"
    else:
        ids = "|".join(f"*,{i},*" for i in gpus.split(","))
        overlaps = f'case ",$__tb_g," in ,,|,all,|{ids}) true;; *) false;; esac'
    lock = rpath(join(JOBS_ROOT, ".gpus.lock"))
    return "\n".join([
        f"mkdir -p {rpath(JOBS_ROOT)} || exit 3",
        f"if command -v flock >/dev/null 2>&1; then exec 8>{lock} && flock -w {LAUNCH_LOCK_WAIT_S} 8 || "
        "{ echo TAO_LAUNCH_BUSY; exit 7; }; fi",
        f"__tb_live=$(docker ps --filter label=tao-job --format '{{{{.Names}}}}={{{{.Label \"{GPUS_LABEL}\"}}}}') || "
        "{ echo TAO_DOCKER_PS_FAILED; exit 2; }",
        "__tb_busy=",
        "for __tb_c in $__tb_live; do",
        f'  case "$__tb_c" in {job_id}=*) continue;; esac',
        "  __tb_g=${__tb_c#*=}",
        f'  if {overlaps}; then __tb_busy="$__tb_busy $__tb_c"; fi',
        "done",
        'if [ -n "$__tb_busy" ]; then for __tb_c in $__tb_busy; do echo "TAO_GPUS_BUSY $__tb_c"; done; '
        f"exit {GPUS_BUSY_EXIT}; fi",
    ])


# -- launch lock and reconciliation -----------------------------------------
ABANDONED = "abandoned"        # in the job dir: reconciliation found no container; no launch may follow
LAUNCH_LOCK_WAIT_S = 60


def launch_lock(job_id: str) -> str:
    """Hold ``<job dir>/.launch.lock`` (flock on fd 9) until the script ends, so a
    launch and its reconciliation never interleave. Exit 7 ``TAO_LAUNCH_BUSY``
    when another holder keeps it longer than LAUNCH_LOCK_WAIT_S; without
    ``flock`` on the instance the script runs unlocked."""
    job = job_dir(check_name(job_id, "job id"))
    return (f"mkdir -p {rpath(job)} || exit 3\n"
            f"if command -v flock >/dev/null 2>&1; then exec 9>{rpath(join(job, '.launch.lock'))} && "
            f"flock -w {LAUNCH_LOCK_WAIT_S} 9 || {{ echo TAO_LAUNCH_BUSY; exit 7; }}; fi")


def abandon_launch(job_id: str) -> str:
    """Under the launch lock, leave the ``abandoned`` tombstone: no launch of
    this job may start a container any more (teardown: the job is over)."""
    return f"{launch_lock(job_id)}\ntouch {rpath(join(job_dir(job_id), ABANDONED))} || exit 3"


def reconcile_launch(job_id: str) -> str:
    """Settle a launch of unknown outcome under the launch lock (one round trip).

    exit 0: the container exists (its ``.State`` JSON printed); exit 5
    ``TAO_NEVER_LAUNCHED``: none, and the ``abandoned`` tombstone now makes a
    late launch of this id refuse; exit 2: docker failed (its message printed);
    exit 7: the lock stayed busy. A credential file left for the launch
    (``credentials.push`` names it ``~/.tao-cred-<job_id>-*``) is removed: the
    launch is settled either way.
    """
    job = job_dir(check_name(job_id, "job id"))
    return "\n".join([
        launch_lock(job_id),
        discard_job_credentials(job_id),
        f"if __tb_state=$({inspect_state(job_id)} 2>&1); then printf '%s\\n' \"$__tb_state\"; exit 0; fi",
        'case "$__tb_state" in *"No such"*) ;; *) printf \'%s\\n\' "$__tb_state"; exit 2;; esac',
        f"touch {rpath(join(job, ABANDONED))} || exit 3",
        "echo TAO_NEVER_LAUNCHED; exit 5",
    ])


def discard_job_credentials(job_id: str) -> str:
    """``rm -f`` every credential file left for this job on the instance
    (``credentials.push`` names them ``~/.tao-cred-<job_id>-*``): its launch or
    upload is settled, so none may outlive it."""
    return f'rm -f "$HOME"/.tao-cred-{check_name(job_id, "job id")}-*'

