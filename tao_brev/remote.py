"""Remote shell commands, built and quoted in one place.

Every string that reaches the instance's shell is assembled here from
validated names (:func:`check_name`) and :func:`shlex.quote`-d values, so an
injection attempt in an instance name, network arch, action, path, env name
or extra argument is rejected or quoted, never executed. Scripts are POSIX sh
(the remote user's login shell parses them, see ``references/brev-exec.md``).

Instance paths are written ``~/rel/path`` or ``/abs/path``; ``~/`` becomes
``"$HOME"/`` so it expands on the instance, not on the laptop.

A script with several answers (one round trip for status + logs of many jobs)
is made of *sections*: each prints its output and exit status between
markers carrying a random token, parsed back by :func:`parse_sections`.
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass

from . import logcap
from .errors import TaoBrevError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
GPUS_RE = re.compile(r"^(all|[0-9]+(,[0-9]+)*)$")
SHM_RE = re.compile(r"^[0-9]+[bkmgBKMG]?$")
_SAFE_PATH = re.compile(r"^[A-Za-z0-9._/@+=:,-]+$")

JOBS_ROOT = "~/tao-jobs"            # per-job scratch on the instance (spec, staged inputs)
RESULTS_ROOT = "~/tao-results"      # default instance results root
CONTAINER_JOB_DIR = "/tao/job"      # the job dir inside the container (spec lives here)
CONTAINER_RESULTS_DIR = "/results"  # the results dir inside the container
CONTAINER_DATA_DIR = "/data"        # inputs inside the container: /data/<NAME>


def check_name(value: str, what: str) -> str:
    """Names that reach a remote shell unquoted-safe: [A-Za-z0-9._-]. Raises BAD_NAME."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise TaoBrevError("BAD_NAME", f"invalid {what}: {value!r} (allowed: letters, digits, '.', '_', '-')")
    return value


def check_env_name(value: str) -> str:
    """An environment variable name (``--env NAME``). ``NAME=value`` is refused
    without repeating the value (it may be a credential). Raises BAD_ARGUMENT / BAD_NAME."""
    if isinstance(value, str) and "=" in value:
        name = value.partition("=")[0]
        raise TaoBrevError("BAD_ARGUMENT", f"--env takes a variable NAME only, got {name}=<value, not shown>",
                           f"Pass only the name and export the value in the shell that runs the script: "
                           f"export {name}=... (never on a command line), then --env {name}.")
    if not isinstance(value, str) or not ENV_NAME_RE.fullmatch(value):
        raise TaoBrevError("BAD_NAME", f"invalid environment variable name: {value!r}")
    return value


def rpath(path: str) -> str:
    """Quote an instance path for the remote shell: ``~/x`` -> ``"$HOME"/'x'``.

    Only ``~/...`` and absolute paths without ``..`` are accepted (a relative
    bind mount is a Docker volume name, not a path). Raises BAD_ARGUMENT.
    """
    if path == "~":
        return '"$HOME"'
    if ".." in path.split("/"):
        raise TaoBrevError("BAD_ARGUMENT", f"instance path must not contain '..' (got {path!r})")
    if path.startswith("~/"):
        rest = path[2:].rstrip("/")
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"'
    if path.startswith("/"):
        return shlex.quote(path)
    raise TaoBrevError("BAD_ARGUMENT", f"instance path must be absolute or start with ~/ (got {path!r})")


def join(*parts: str) -> str:
    """Join instance path parts (``~/a`` + ``b`` -> ``~/a/b``)."""
    return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts))


def job_dir(job_id: str) -> str:
    return join(JOBS_ROOT, job_id)


# -- sections ---------------------------------------------------------------
@dataclass
class Section:
    name: str
    exit_code: int
    output: str


def section(token: str, name: str, command: str) -> str:
    """``command`` with stdout+stderr merged, framed as section ``name``."""
    return (f"printf '%s\\n' '{token}>{name}'; {{ {command}\n}} 2>&1; "
            f"printf '\\n%s %s\\n' '{token}<{name}' \"$?\"")


def new_token() -> str:
    return "S" + uuid.uuid4().hex[:12]


def parse_sections(text: str, token: str) -> dict[str, Section]:
    """Sections of ``text`` by name; a repeated name keeps the last one."""
    out: dict[str, Section] = {}
    pattern = re.compile(rf"^{token}>([^\n]+)\n(.*?)\n{token}<\1 (\d+)$", re.DOTALL | re.MULTILINE)
    for match in pattern.finditer(text):
        out[match.group(1)] = Section(match.group(1), int(match.group(3)), match.group(2))
    return out


# -- docker ----------------------------------------------------------------
WRITE_FAILED_EXIT = 9   # a launch script's exit status when a file it writes did not arrive intact
GPUS_BUSY_EXIT = 10     # ... when a live tao-job container holds GPUs this job asks for (see gpus_free)


def heredoc_file(target: str, content: str) -> str:
    """Write ``content`` verbatim to instance path ``target`` (quoted heredoc: no
    expansion). A failed write (a full disk: ``cannot create temp file for
    here-document: No space left on device``, leaving an empty file) prints
    ``TAO_WRITE_FAILED`` and exits WRITE_FAILED_EXIT."""
    delim = "TAO_EOF_" + uuid.uuid4().hex[:12]
    return (f"cat > {rpath(target)} <<'{delim}' || {{ echo TAO_WRITE_FAILED {rpath(target)}; "
            f"exit {WRITE_FAILED_EXIT}; }}\n{_heredoc_text(content)}{delim}\n")


_HEREDOC_START = re.compile(r"<<'(TAO_EOF_[0-9a-f]+)'")
_DOCKER_RUN_BREAK = re.compile(r" (?=--?[a-z])")
READABLE_WIDTH = 120


def readable_lines(script: str) -> list[str]:
    """A remote script as lines a person (or an agent) reads: one command per line, the body of
    each file the script writes (a heredoc) summed up in one line, and a long ``docker run``
    broken before each flag (``\\`` continuations). For plans (``--dry-run``); the script
    itself is what runs."""
    out: list[str] = []
    lines = script.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        start = _HEREDOC_START.search(line)
        if start:
            out.append(line)
            body = 0
            i += 1
            while i < len(lines) and lines[i] != start.group(1):
                body, i = body + 1, i + 1
            out.append(f"    ... {body} line(s) of the file's content (as sent, byte for byte) ...")
            out.append(start.group(1))
        elif line.startswith("docker run ") and len(line) > READABLE_WIDTH:
            parts = _DOCKER_RUN_BREAK.split(line)
            out += [part + " \\" for part in parts[:-1]] + [parts[-1]]
            out[-len(parts) + 1:] = ["    " + part for part in out[-len(parts) + 1:]]
        else:
            out.append(line)
        i += 1
    return out


def _heredoc_text(content: str) -> str:
    return content if content.endswith("\n") else content + "\n"


def verify_file(target: str, content: str) -> str:
    """Shell lines that check instance file ``target`` holds exactly what
    :func:`heredoc_file` wrote (byte size and sha256), else print
    ``TAO_SPEC_UNVERIFIED`` with the size found and exit WRITE_FAILED_EXIT."""
    import hashlib

    data = _heredoc_text(content).encode("utf-8")
    path, size, digest = rpath(target), len(data), hashlib.sha256(data).hexdigest()
    fail = (f'{{ echo "TAO_SPEC_UNVERIFIED {target}: $(wc -c < {path} 2>/dev/null || echo ?) bytes on the '
            f'instance, {size} sent"; exit {WRITE_FAILED_EXIT}; }}')
    return (f"__tb_sum=$( (sha256sum || shasum -a 256) < {path}) || {fail}\n"
            f'[ "$(wc -c < {path})" -eq {size} ] && [ "${{__tb_sum%% *}}" = {digest} ] || {fail}')


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
    set ``docker run --gpus all`` hands a container) and ``__tb_gids`` = ``0,1,...``; none: exit
    NO_GPUS_EXIT with ``TAO_NO_GPUS`` (nvidia-smi's own words on stderr: a driver not loaded is named)."""
    return ("__tb_ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)\n"
            f'if [ "${{__tb_ngpus:-0}}" -lt 1 ]; then echo TAO_NO_GPUS; nvidia-smi -L 2>&1 | head -n 2 >&2; '
            f'exit {NO_GPUS_EXIT}; fi\n'
            "__tb_gids=$(seq -s, 0 $((__tb_ngpus - 1)))")


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
    sudo needed. Nothing to do (exit 0) when the dir is absent."""
    quoted = rpath(results_dir)
    return (f"if [ -d {quoted} ]; then docker run --rm --network none --entrypoint chown "
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


def list_job_containers() -> str:
    """Every container carrying a ``tao-job`` label: name and state, tab-separated."""
    return "docker ps -a --filter label=tao-job --format '{{.Names}}\t{{.State}}'"


# -- progress (TAO's status.json) and all jobs of an instance ------------------
STATUS_FILE = "status.json"          # TAO writes <results_dir>/<action>/status.json (older archs: <results_dir>/)
MAX_STATUS_LINE = 16384              # longer status lines are replaced by "<token>:LONG <length>"
PROGRESS_LINES = 12                  # lines read per status file for a status answer
PROGRESS_BYTES = PROGRESS_LINES * MAX_STATUS_LINE
METRICS_BYTES = 4 * 1024 * 1024      # --metrics reads up to the last 4 MiB of the file
TAIL_LINES, TAIL_BYTES = 200, 32768  # log tail of a container that exited non-zero (failure hint)


def progress_functions(token: str) -> str:
    """Shell functions for the status scripts (defined once per script).

    ``__tb_progress DIR LINES BYTES`` prints, for each ``DIR/*/status.json``
    and ``DIR/status.json``: ``<token>:F <mtime epoch s> <size> <path under DIR>``
    then its last LINES lines within the last BYTES bytes (a longer line becomes
    ``<token>:LONG <length>``; the byte cut lands on a UTF-8 character boundary,
    :func:`logcap.remote_tail_bytes`). ``__tb_jobs LINES BYTES`` finds every container
    labelled ``tao-job`` (one ``docker ps``, one ``docker inspect`` for all of
    them: the script does not grow with the number of jobs) and prints per
    container ``<token>:J<TAB><tao-job label><TAB><.State JSON>``, then the
    progress of its ``/results`` bind mount, and for a container that exited
    non-zero ``<token>:T`` and its last TAIL_LINES log lines (at most
    TAIL_BYTES, starting on a character) for the failure hint. Never ``.Config.Env``.
    """
    fmt = (f'{token}:J\t{{{{index .Config.Labels "tao-job"}}}}\t{{{{json .State}}}}\t{{{{.Id}}}}\t'
           f'{{{{range .Mounts}}}}{{{{if eq .Destination "{CONTAINER_RESULTS_DIR}"}}}}{{{{.Source}}}}'
           '{{end}}{{end}}')
    status_tail = logcap.remote_tail_bytes('"$3"')
    return "\n".join([
        "__tb_progress() {",
        f'  for __tb_f in "$1"/*/{STATUS_FILE} "$1"/{STATUS_FILE}; do',
        '    [ -f "$__tb_f" ] || continue',
        f"    printf '%s %s %s\\n' '{token}:F' \"$(stat -c '%Y %s' \"$__tb_f\" 2>/dev/null || echo '0 0')\" "
        '"${__tb_f#"$1"/}"',
        f'    < "$__tb_f" {status_tail} | tail -n "$2" | awk -v m={MAX_STATUS_LINE} -v t=\'{token}:LONG\' '
        "'length($0) > m {print t, length($0); next} {print}'",
        "  done",
        "}",
        "__tb_jobs() {",
        "  __tb_ids=$(docker ps -aq --filter label=tao-job) || return $?",
        '  [ -n "$__tb_ids" ] || return 0',
        f"  __tb_rows=$(docker inspect --type container --format {shlex.quote(fmt)} $__tb_ids)",
        "  __tb_rc=$?",
        "  printf '%s\\n' \"$__tb_rows\" | while IFS='\t' read -r __tb_m __tb_job __tb_state __tb_id __tb_src; do",
        f'    [ "$__tb_m" = \'{token}:J\' ] || continue',
        "    printf '%s\\t%s\\t%s\\n' \"$__tb_m\" \"$__tb_job\" \"$__tb_state\"",
        '    [ -z "$__tb_src" ] || __tb_progress "$__tb_src" "$1" "$2"',
        "    case \"$__tb_state\" in *'\"ExitCode\":0,'*|*'\"ExitCode\":0}'*) ;; *'\"Status\":\"exited\"'*)",
        f"      printf '%s\\n' '{token}:T'; docker logs --tail {TAIL_LINES} \"$__tb_id\" 2>&1 | "
        f"{logcap.remote_tail_bytes(TAIL_BYTES)};;",
        "    esac",
        "  done",
        "  return $__tb_rc",
        "}",
    ])


def read_progress(results_dir: str, lines: int = PROGRESS_LINES, max_bytes: int = PROGRESS_BYTES) -> str:
    """The status file(s) of one job, by its instance results dir (needs :func:`progress_functions`)."""
    return f"__tb_progress {rpath(results_dir)} {int(lines)} {int(max_bytes)}"


def read_all_jobs(lines: int = 4, max_bytes: int = 4 * MAX_STATUS_LINE) -> str:
    """State and progress of every ``tao-job`` container (needs :func:`progress_functions`)."""
    return f"__tb_jobs {int(lines)} {int(max_bytes)}"


def instance_now() -> str:
    """The instance's clock (epoch seconds): file times are compared with it, never with ours."""
    return "date +%s"


def last_log_line(job_id: str) -> str:
    """The container's last log line with docker's timestamp (RFC 3339), for stall evidence."""
    return f"docker logs --timestamps --tail 1 {shlex.quote(check_name(job_id, 'job id'))}"
