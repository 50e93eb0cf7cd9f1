"""The brev transport: the only code in the bundle that runs the ``brev`` CLI.

Facts it is built on (brevdev/brev-cli ``pkg/cmd/exec/exec.go``, ``ls.go``,
``delete.go``, ``login.go``, ``stop/stop.go``,
``gpusearch/gpusearch.go``; summarised in ``references/brev-exec.md``):

* ``brev exec [instance...] <command>``: the LAST positional is the command, so
  the remote command is always ONE argument; ``--`` does not group words.
* brev reads extra instance names from stdin when stdin is not a character
  device, so brev always runs with stdin from ``/dev/null``.
* With stdout captured, brev prints the instance name on its own line after a
  successful run; login banners may precede the output.
* brev retries on ANY non-zero ssh exit, including the remote command's own,
  and then runs the command a second time; a transport failure and a failing
  command both end as exit 1.

So every remote script is wrapped to exit 0 once it ran, with its stdout,
stderr and real exit status framed between markers carrying a fresh random
nonce; only the last complete frame is parsed, and everything outside it
(banners, the echoed name, a partial first run) is ignored. No frame means the
transport failed (:class:`TransportError`); a frame with a non-zero status is a
remote failure (:class:`RemoteCommandError`, raised by :meth:`Brev.run`).

Retries: only ``idempotent`` reads are repeated after a transport failure,
READ_RETRIES times, waiting BACKOFF_S between attempts; the environment
variable ``TAO_BREV_RETRY_BACKOFF_S`` (comma-separated seconds, e.g. ``0`` in
tests) overrides the waits. A launch is never repeated here: its caller
reconciles (``verbs/reconcile.py``).

brev starts a STOPPED instance by itself when an exec fails on it and then
runs the command; :attr:`RemoteResult.instance_started` says so, because the
containers that ran before the stop were killed by it, and ``on_started`` is
told, so the script's answer says the instance bills again (``cli.run``).

brev's ssh config keeps a detached master connection (ControlPersist) that can
hold brev's stdout/stderr open after brev exited: a call ends when brev's
PROCESS ends (:func:`run_until_exit`), and every wait is bounded.
``Permission denied (publickey)`` is not a boot delay: SSH_KEY_REJECTED, never
retried here.

Auth: an answer that mentions 401/unauthorized, a prompt without a terminal
(EOF, no tty), or brev's ``You are currently logged out`` prompt (printed on
stdout when the token is gone and an ssh failure made ``brev exec`` need the
API; its stderr then names only "could not look up instance"), triggers one
headless ``brev login --token`` with
``BREV_API_TOKEN`` and one repeat of the call. brev's only headless login takes
the token as a flag, so it is used only after such a failure (the one residual
argv exposure; see ``references/redaction.md``). A Brev API key (``BREV_API_KEY``,
or a ``bak-`` value in ``BREV_API_TOKEN``) reaches brev only in its environment
(brev-cli PR #464): no login runs with one (BREV_API_KEY_REJECTED).

Today's brev (``references/brev-exec.md`` facts 19-24): brev runs with a
non-empty ``SSH_AUTH_SOCK`` so that its exec starts no ssh-agent
(:data:`NO_AGENT_SOCKET`); the Brev API's own failures (EOF, reset, 5xx, 429)
are retried, then BREV_API_UNREACHABLE, never a login (:func:`api_unreachable`);
a migrated account's browser login is stopped at once (BREV_NVIDIA_LOGIN_REQUIRED);
an instance the last ``brev ls`` listed STOPPED is never exec'd unless the caller
may start it (INSTANCE_STOPPED; BREV_START_WAIT_S added to the deadline), one
that shares its name is refused (INSTANCE_AMBIGUOUS); ``brev copy`` gets only
colon-free local paths (:func:`safe_copy`).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from typing import Callable

from .secrets import guard as known_secrets, redact
from .errors import CODES, RemoteCommandError, TaoBrevError, TransportError

FIRST_EXEC_TIMEOUT_S = 600.0   # a fresh instance: sshd start + first contact (seed: ">= 600 s")
EXEC_TIMEOUT_S = 180.0         # an instance already proven exec-ready
BREV_TIMEOUT_S = 60.0          # ls, login, start/stop/delete requests
READ_RETRIES = 2               # extra attempts for idempotent commands after a transport failure
BACKOFF_S = (2.0, 5.0)         # waits before those attempts
BACKOFF_ENV = "TAO_BREV_RETRY_BACKOFF_S"   # overrides BACKOFF_S: "2,5", or "0" in tests

# brev's own words when its token is missing/expired or it tries to prompt
# without a terminal (login.go); must not match ordinary remote output, which
# is never searched (only brev's stderr when no frame came back).
_AUTH_FAILURE = re.compile(r"\b401\b|unauthori[sz]ed|\bEOF\b|no tty|not a tty|"
                           r"not logged in|inappropriate ioctl|"
                           # auth.go shouldLogin's prompt (stdout): with the token gone and ssh failing,
                           # brev exec's error names only the failed lookup ("could not look up instance")
                           r"you are currently logged out", re.IGNORECASE)
# A Go HTTP client's transport error against the Brev API (`Get "https://brevapi.../workspaces": EOF`,
# `... read: connection reset by peer`, timeouts), or brev's HTTPResponseError text `URL STATUS BODY`
# (brev-cli pkg/store/http.go HTTPResponseError.Error) for a 5xx or 429: the API, not the login.
_API_TRANSIENT = re.compile(
    r'\b(?:Get|Post|Put|Patch|Delete|Head) "https?://[^"\s]+": (?:EOF|unexpected EOF|.*\bconnection reset\b|'
    r'.*\bi/o timeout\b|.*\bconnection refused\b|.*\bno such host\b|.*TLS handshake timeout|'
    r'.*context deadline exceeded|.*Client\.Timeout exceeded|http2: )'
    r'|\bhttps?://\S+ (?:429|50[0-9]) [A-Z]', re.IGNORECASE)
# brev-cli pkg/cmd/cmderrors/cmderrors.go DisplayAndHandleError: a NvidiaMigrationError makes brev run
# `brev login --auth nvidia` itself (stdin attached), which waits for a browser.
_NVIDIA_MIGRATION = re.compile(r"migrated to NVIDIA Auth|brev login --auth nvidia", re.IGNORECASE)
API_KEY_PREFIX = "bak-"   # brev-cli pkg/auth/auth.go BrevAPIKeyPrefix (PR #369)
API_RETRIES = 2           # extra attempts of a brev call the Brev API answered with a transient error
# brev-cli pkg/cmd/exec/exec.go runSSHWithTimeout runs `if [ -z "$SSH_AUTH_SOCK" ]; then eval $(ssh-agent -s)`
# before each ssh and never kills that agent. Any NON-EMPTY value skips it; brev's ssh config names its
# key file (pkg/ssh/ssh.go: IdentityFile, IdentitiesOnly yes), so no agent is needed. A path that cannot
# exist (a child of /dev/null): ssh's agent lookup fails quietly (debug level) and no agent is ever started.
NO_AGENT_SOCKET = "/dev/null/tao-brev-no-ssh-agent"
# brev-cli pkg/cmd/exec/exec.go runExecCommand on a STOPPED instance: util.StartWorkspaceIfStopped
# (PollUntil RUNNING, pollTimeout 10 min), PollUntil RUNNING again (10 min), then
# util.WaitForSSHToBeAvailable (up to 41 probes of `ssh -o ConnectTimeout=10`, 1 s apart): brev's own
# start wait before it runs the command.
BREV_START_WAIT_S = 2 * 600.0 + 41 * (10.0 + 1.0)
# ssh's words when sshd refuses brev's key: not a boot delay (brev's own wait for ssh,
# pkg/store/ssh.go SatisfactorySSHErrMessage, stops on it at once), so never retried.
_KEY_REJECTED = re.compile(r"Permission denied \(publickey[^)]*\)")
# Instance names as brev accepts them; anything else never reaches a command line.
INSTANCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass
class RemoteResult:
    """What a remote command did: its real exit status, stdout, stderr (str)."""

    exit_code: int
    stdout: str
    stderr: str
    elapsed_s: float
    attempts: int = 1
    instance_started: bool = False   # brev started the STOPPED instance to run this command

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def frame(script: str, nonce: str) -> str:
    """Wrap ``script`` so the remote shell always exits 0 and reports the
    script's stdout, stderr and exit status between ``nonce`` markers (POSIX sh).

    The captures live in /dev/shm when it is writable (RAM), so a full disk
    on the instance does not silently empty the answer."""
    return (
        '__tb_t=/dev/shm; [ -d "$__tb_t" ] && [ -w "$__tb_t" ] || __tb_t="${TMPDIR:-/tmp}"; '
        '__tb_o=$(mktemp "$__tb_t/taobrev.XXXXXX") && __tb_e=$(mktemp "$__tb_t/taobrev.XXXXXX") '
        '|| { echo "mktemp failed" >&2; exit 0; }; '
        f"( {script}\n) </dev/null >\"$__tb_o\" 2>\"$__tb_e\"; __tb_rc=$?; "
        f"printf '%s\\n' '{nonce}:out'; cat \"$__tb_o\"; "
        f"printf '\\n%s\\n' '{nonce}:err'; cat \"$__tb_e\"; "
        f"printf '\\n%s %s\\n' '{nonce}:rc' \"$__tb_rc\"; "
        'rm -f "$__tb_o" "$__tb_e"; exit 0'
    )


def _last_frame(stdout: str, nonce: str) -> tuple[int, tuple[int, str, str]] | None:
    """(offset, (status, out, err)) of the LAST complete frame of ``nonce``.

    brev may run a command twice (its retry), so stdout can hold a partial
    or complete first run before the second; each run's frame is parsed on
    its own and the last complete one wins."""
    marker = f"{nonce}:out\n"
    tail = re.compile(rf"(.*)\n{nonce}:err\n(.*)\n{nonce}:rc (\d+)\n", re.DOTALL)
    starts = [m.start() for m in re.finditer(re.escape(marker), stdout)]
    for i in reversed(range(len(starts))):
        end = starts[i + 1] if i + 1 < len(starts) else len(stdout)
        match = tail.match(stdout, starts[i] + len(marker), end)
        if match:
            return starts[i], (int(match.group(3)), match.group(1), match.group(2))
    return None


def unframe(stdout: str, nonce: str) -> tuple[int, str, str] | None:
    """Parse the LAST complete frame of ``nonce`` in brev's stdout, or None."""
    found = _last_frame(stdout, nonce)
    return found[1] if found else None


def backoff_from_env(env: dict) -> tuple[float, ...]:
    """The waits between read retries: ``$TAO_BREV_RETRY_BACKOFF_S`` or BACKOFF_S."""
    raw = (env.get(BACKOFF_ENV) or "").strip()
    if not raw:
        return BACKOFF_S
    try:
        waits = tuple(float(part) for part in raw.split(","))
    except ValueError:
        waits = ()
    if not waits or not all(0 <= w <= 3600 for w in waits):
        raise TaoBrevError("BAD_ARGUMENT", f"{BACKOFF_ENV} must be seconds between 0 and 3600, comma-separated "
                           f"(e.g. 2,5); got {raw!r}", f"Unset {BACKOFF_ENV} or set it like 2,5.")
    return waits


@dataclass
class Brev:
    """Runs ``brev``. ``sleep``/``clock`` are injectable so waits are testable.

    ``exec_calls`` counts ``brev exec`` invocations (round trips), ``log``
    receives progress lines (stderr by default); every message is redacted.
    """

    binary: str = "brev"
    env: dict = field(default_factory=lambda: dict(os.environ))
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)
    ready_instances: set = field(default_factory=set)   # answered before: the shorter exec timeout applies
    on_ready: Callable[[str], None] | None = None       # told once when an instance first answers
    on_deleted: Callable[[str], None] | None = None     # told after `brev delete` (a new one may reuse the name)
    on_started: Callable[[str], None] | None = None     # told when brev started a STOPPED instance by itself
    backoff_s: tuple | None = None   # None: from the environment (backoff_from_env)
    exec_calls: int = 0
    logins: int = 0
    statuses: dict = field(default_factory=dict)   # instance -> status from the last `brev ls --json`
    started: set = field(default_factory=set)      # instances brev started (STOPPED before) in this process

    def __post_init__(self):
        if self.backoff_s is None:
            self.backoff_s = backoff_from_env(self.env)

    # -- process plumbing --------------------------------------------------
    def path(self) -> str:
        found = shutil.which(self.binary, path=self.env.get("PATH"))
        if not found:
            raise TaoBrevError("BREV_NOT_FOUND", f"`{self.binary}` is not on PATH")
        return found

    def _spawn(self, args: list[str], timeout: float, allow: str | None = None) -> subprocess.CompletedProcess:
        """Run brev with stdin from /dev/null (a character device, so brev reads
        no instance names from it), stdout/stderr captured, in its own process
        group so a timeout kills ssh too. The call ends when brev's process
        ends (:func:`run_until_exit`), even if a child still holds its pipes.
        No argument may hold a known secret value (SECRET_IN_COMMAND), except
        ``allow`` (``brev login --token``)."""
        known_secrets.refuse_argv(args, f"`brev {args[0]}` command line", self.env, allow=allow)
        argv = [self.path(), *args]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=brev_environment(self.env), start_new_session=True)
        try:
            code, out, err = run_until_exit(proc, timeout, stop_on=_NVIDIA_MIGRATION)
        except subprocess.TimeoutExpired as exc:
            raise self._timed_out(args, timeout, _text_of(exc.output) + _text_of(exc.stderr)) from None
        if _NVIDIA_MIGRATION.search(err or ""):
            raise TaoBrevError("BREV_NVIDIA_LOGIN_REQUIRED", f"`brev {args[0]}`: the Brev account was migrated to "
                               "NVIDIA sign-in and brev began a browser login (`brev login --auth nvidia`), "
                               "which cannot finish headlessly; it was stopped")
        return subprocess.CompletedProcess(argv, code, out, err)

    def _timed_out(self, args: list[str], timeout: float, partial: str) -> TransportError:
        """TRANSPORT_TIMEOUT for ``brev ARGS``; when brev was starting a STOPPED instance
        (its words "Instance NAME is starting.", or ``exec --start`` on one known STOPPED),
        the message says it did and that the instance bills, and ``on_started`` is told."""
        name = args[-2] if args[0] == "exec" else args[-1] if args[0] == "start" else None   # exec [--host] NAME S
        message = f"`brev {args[0]}` did not answer within {timeout:.0f} s"
        if name and (args[0] == "start" or _auto_started(name, partial) or self.statuses.get(name) == "STOPPED"):
            self.started.add(name)
            if self.on_started:
                self.on_started(name)
            message += (f"; brev was starting the STOPPED instance {name} (it may be RUNNING now, and it BILLS "
                        "from its start): poll again, or stop or delete it if nothing needs it")
        return TransportError("TRANSPORT_TIMEOUT", message, timeout_s=timeout)

    def _call(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        """:meth:`_with_login`, repeated API_RETRIES times with backoff while the Brev API
        answers a transient error (:func:`api_unreachable`); BREV_API_UNREACHABLE after that."""
        for attempt in range(1, API_RETRIES + 2):
            done = self._with_login(args, timeout)
            problem = api_unreachable(done)
            if problem is None:
                return done
            if attempt <= API_RETRIES:
                wait = self.backoff_s[min(attempt - 1, len(self.backoff_s) - 1)]
                self.log(f"brev {args[0]}: the Brev API did not answer ({redact.tail(problem, 160)}); "
                         f"retrying in {wait:g} s (attempt {attempt + 1}/{API_RETRIES + 1})")
                self.sleep(wait)
        raise TaoBrevError("BREV_API_UNREACHABLE", f"`brev {args[0]}`: the Brev API did not answer after "
                           f"{API_RETRIES + 1} attempts: " + redact.tail(problem, 300))

    def _with_login(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        """Run brev; on an auth failure log in once with BREV_API_TOKEN and repeat once.
        With an API key (:func:`api_key`: brev reads it from its environment, PR #464)
        there is nothing to log in with: BREV_API_KEY_REJECTED."""
        done = self._spawn(args, timeout)
        if _auth_failed(done):
            if api_key(self.env):
                raise TaoBrevError("BREV_API_KEY_REJECTED", f"`brev {args[0]}` reports an auth failure with the "
                                   "Brev API key in its environment: " + redact.tail(done.stderr or done.stdout))
            self.login()
            done = self._spawn(args, timeout)
            if _auth_failed(done):
                raise TaoBrevError("BREV_NOT_LOGGED_IN", "brev still reports an auth failure after a fresh login: "
                                   + redact.tail(done.stderr or done.stdout))
        return done

    def login(self) -> None:
        """``brev login --token $BREV_API_TOKEN`` (headless). Raises
        BREV_NOT_LOGGED_IN without a token, BREV_LOGIN_FAILED when refused."""
        token = self.env.get("BREV_API_TOKEN", "").strip()
        if api_key(self.env):   # never `brev login --token bak-...` (LoginWithToken saves it as a refresh token)
            raise TaoBrevError("BREV_API_KEY_REJECTED", "brev reports an auth failure with the Brev API key in "
                               "its environment (BREV_API_KEY; a bak- key is never passed to --token)")
        if not token:
            raise TaoBrevError("BREV_NOT_LOGGED_IN", "brev is not logged in (or its token expired) "
                               "and BREV_API_TOKEN is not set")
        self.log("brev: logging in headlessly with BREV_API_TOKEN")
        self.logins += 1
        done = self._spawn(["login", "--token", token], BREV_TIMEOUT_S, allow=token)
        if done.returncode != 0:
            raise TaoBrevError("BREV_LOGIN_FAILED", "`brev login` with BREV_API_TOKEN failed: " + redact.tail(done.stderr, 600, token))

    # -- exec ----------------------------------------------------------------
    def timeout_for(self, instance: str) -> float:
        return EXEC_TIMEOUT_S if instance in self.ready_instances else FIRST_EXEC_TIMEOUT_S

    def exec(self, instance: str, script: str, *, timeout: float | None = None,
             idempotent: bool = False, host: bool = False, start: bool = False) -> RemoteResult:
        """Run ``script`` (one POSIX sh string) on ``instance``; return its result.

        Never raises for a non-zero remote exit (see :meth:`run`). Raises
        TransportError (TRANSPORT_FAILED / TRANSPORT_TIMEOUT, BREV_API_UNREACHABLE)
        when no complete answer came back; ``idempotent`` scripts are retried
        READ_RETRIES times with backoff first. Timeout in seconds; default 600 s
        until the instance has answered once in this process, then 180 s.

        brev starts a STOPPED instance to run a command (exec.go runExecCommand).
        An instance the last ``brev ls`` of this process listed STOPPED is
        refused (INSTANCE_STOPPED) unless ``start``; with ``start`` the timeout
        grows by BREV_START_WAIT_S, brev's own start wait.
        """
        check_instance(instance)
        refuse_secrets(script, f"remote command for {instance}")
        timeout = timeout or self.timeout_for(instance)
        if self.statuses.get(instance) == "AMBIGUOUS":   # brev would pick one by name: maybe a teammate's
            raise TaoBrevError("INSTANCE_AMBIGUOUS", f"several instances are named {instance} in `brev ls --json`; "
                               "not run on any", instance=instance)
        if self.statuses.get(instance) == "STOPPED":
            if not start:
                raise TaoBrevError("INSTANCE_STOPPED", f"{instance} is STOPPED (brev ls); not started: brev exec "
                                   "would start it", instance=instance)
            timeout += BREV_START_WAIT_S
        attempts = 1 + (READ_RETRIES if idempotent else 0)
        started = self.clock()
        last_error: TransportError | None = None
        for attempt in range(1, attempts + 1):
            nonce = "TAOBREV" + uuid.uuid4().hex[:20]
            args = ["exec", *(["--host"] if host else []), instance, frame(script, nonce)]
            self.exec_calls += 1
            try:
                done = self._with_login(args, timeout)
            except TransportError as exc:
                last_error = exc
            else:
                stdout = done.stdout or ""
                found = _last_frame(stdout, nonce)
                if found is not None:
                    if instance not in self.ready_instances and self.on_ready:
                        self.on_ready(instance)
                    self.ready_instances.add(instance)
                    if self.statuses.get(instance) == "STOPPED":   # it answered: brev started it (start=True)
                        self.statuses[instance] = "RUNNING"
                    offset, (code, out, err) = found
                    restarted = _auto_started(instance, stdout[:offset] + (done.stderr or ""))
                    if restarted:
                        self.started.add(instance)
                        if self.on_started:
                            self.on_started(instance)   # it bills again: every answer says so (cli.run)
                    restarted = restarted or instance in self.started   # woken by an earlier call (--start)
                    return RemoteResult(code, out, err, self.clock() - started, attempt, restarted)
                last_error = _no_answer(instance, done)
                if last_error.code == "SSH_KEY_REJECTED":
                    break   # a repeat gets the same refusal: fail fast with the fix
            if attempt < attempts:
                wait = self.backoff_s[min(attempt - 1, len(self.backoff_s) - 1)]
                self.log(f"brev exec on {instance}: {last_error.message}; retrying in {wait:g} s "
                         f"(attempt {attempt + 1}/{attempts})")
                self.sleep(wait)
        raise last_error

    def run(self, instance: str, script: str, **kw) -> RemoteResult:
        """Like :meth:`exec` but raises RemoteCommandError on a non-zero exit."""
        result = self.exec(instance, script, **kw)
        if not result.ok:
            raise RemoteCommandError("REMOTE_COMMAND_FAILED",
                                     f"command on {instance} exited {result.exit_code}: "
                                     + redact.tail(result.stderr or result.stdout),
                                     exit_status=result.exit_code)
        return result

    # -- other brev commands ----------------------------------------------
    def ls(self) -> list[dict]:
        """Instances from ``brev ls --json`` (an object with ``workspaces``,
        which is null when there are none; older releases printed a bare list)."""
        done = self._call(["ls", "--json"], BREV_TIMEOUT_S)
        if done.returncode != 0:
            raise TaoBrevError("BREV_FAILED", "brev ls --json failed: " + redact.tail(done.stderr))
        try:
            data = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise TaoBrevError("BREV_FAILED", "brev ls --json did not print JSON: " + redact.tail(done.stdout)) from None
        if isinstance(data, dict):
            data = data.get("workspaces") or []
        if not isinstance(data, list):
            raise TaoBrevError("BREV_FAILED", "brev ls --json printed an unexpected shape")
        listed = [w for w in data if isinstance(w, dict)]
        names = [str(w.get("name")) for w in listed]
        self.statuses = {str(w.get("name")): ("AMBIGUOUS" if names.count(str(w.get("name"))) > 1
                                              else str(w.get("status") or "").upper()) for w in listed}
        return listed

    def instance(self, name: str) -> dict | None:
        """The ``brev ls --json`` entry named ``name``, or None. Raises INSTANCE_AMBIGUOUS
        (naming every id) when several carry the name: with an API key brev lists the
        whole org (brev-cli pkg/cmd/ls/ls.go RunWorkspaces), teammates' instances included."""
        check_instance(name)
        return pick_instance(self.ls(), name)

    def _simple(self, args: list[str], what: str, timeout: float = BREV_TIMEOUT_S) -> str:
        done = self._call(args, timeout)
        if done.returncode != 0:
            raise TaoBrevError("BREV_FAILED", f"{what} failed: " + redact.tail(done.stderr))
        return done.stdout

    def delete(self, name: str) -> None:
        """``brev delete NAME`` (it has no --yes flag; the name is echoed when piped)."""
        self._simple(["delete", check_instance(name)], f"brev delete {name}")
        self.ready_instances.discard(name)
        if self.on_deleted:
            self.on_deleted(name)

    def start(self, name: str, timeout: float = FIRST_EXEC_TIMEOUT_S) -> None:
        self._simple(["start", check_instance(name)], f"brev start {name}", timeout)

    def stop(self, name: str) -> None:
        """``brev stop NAME``. Raises BREV_FAILED with brev's message; a type that cannot stop is
        refused by brev itself: ``instance "NAME" does not support stop.`` (brev-cli
        pkg/cmd/stop/stop.go validateWorkspaceStoppable)."""
        self._simple(["stop", check_instance(name)], f"brev stop {name}")
        self.ready_instances.discard(name)

    def search(self, kind: str) -> list[dict]:
        """The rows of ``brev search gpu|cpu --json``: a JSON array of brev-cli's GPUInstanceInfo
        (pkg/cmd/gpusearch/gpusearch.go: ``type``, ``price_per_hour`` USD, ``stoppable``, ...).
        Raises BREV_FAILED when brev fails or prints no array."""
        if kind not in ("gpu", "cpu"):
            raise ValueError(kind)
        text = self._simple(["search", kind, "--json"], f"brev search {kind} --json")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if not isinstance(data, list):
            raise TaoBrevError("BREV_FAILED", f"brev search {kind} --json did not print a JSON array: "
                               + redact.tail(text))
        return [row for row in data if isinstance(row, dict)]

    def copy(self, src: str, dst: str, timeout: float | None = None) -> None:
        """``brev copy SRC DST`` (scp), one side written ``NAME:path``, the other a local path.

        brev splits EVERY argument on ':' (brev-cli pkg/cmd/copy/copy.go parseWorkspacePath),
        so a local path with a colon (``runs-10:30/``) would be taken for an instance path:
        such a side is copied through a colon-free temporary path, then moved (:func:`safe_copy`).
        A remote path with a colon cannot be copied at all (BAD_NAME)."""
        safe_copy(lambda a, b: self._simple(["copy", a, b], "brev copy", timeout or FIRST_EXEC_TIMEOUT_S),
                  src, dst)


KILL_WAIT_S = 5.0       # after SIGKILL of brev's group: how long to wait for it to be reaped
EXIT_POLL_S = 0.05      # without pidfd (macOS, Linux < 5.3): how often brev's exit is checked


def run_until_exit(proc: subprocess.Popen, timeout: float, stop_on=None) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``proc``, read until the PROCESS exits.

    brev's ssh config keeps a background master connection (``ControlMaster
    auto`` + ``ControlPersist 10m``, brevdev/brev-cli ``pkg/ssh/sshconfigurer.go``);
    the master is forked from the ssh that brev ran and can keep brev's stdout
    or stderr open long after brev exited. Waiting for end-of-file
    (``communicate()``) would wait for that child. So the pipes are read while
    brev runs; once brev has exited, everything it wrote is in the pipes: that
    is read without blocking, and the call ends. Every wait is bounded: past
    ``timeout`` seconds the process group is killed (:func:`_kill_group`) and
    ``subprocess.TimeoutExpired`` (with what was read as ``output`` / ``stderr``)
    is raised; an interrupt kills it too. ``stop_on``: a pattern that, once it
    appears in stderr, ends the call at once (the group is killed): brev waiting
    for something that never comes (a browser login).
    """
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    pipes = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    selector = selectors.DefaultSelector()
    exit_fd = None
    try:
        for fd in pipes:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        try:   # readable when the process exits: no polling needed
            exit_fd = os.pidfd_open(proc.pid)
            selector.register(exit_fd, selectors.EVENT_READ)
        except (AttributeError, OSError):
            exit_fd = None
        while proc.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill_group(proc)
                raise subprocess.TimeoutExpired(proc.args, timeout, output=bytes(out), stderr=bytes(err))
            if stop_on is not None and stop_on.search(_text(err)):
                _kill_group(proc)
                break
            wait = remaining if exit_fd is not None else min(remaining, EXIT_POLL_S)
            for key, _events in selector.select(wait):
                if key.fd in pipes and not _read_available(key.fd, pipes[key.fd]):
                    selector.unregister(key.fd)   # end-of-file: nothing more from this pipe
        for fd, buf in pipes.items():   # brev has exited: what it wrote is in the pipes
            _read_available(fd, buf)
    except KeyboardInterrupt:   # Ctrl-C / SIGTERM: brev (and its ssh) must not outlive us
        _kill_group(proc)
        raise
    finally:
        selector.close()
        if exit_fd is not None:
            os.close(exit_fd)
        proc.stdout.close()
        proc.stderr.close()
    return proc.returncode, _text(out), _text(err)


def _read_available(fd: int, buf: bytearray) -> bool:
    """Append what can be read from ``fd`` now; False at end-of-file."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        buf.extend(chunk)


def _text(data: bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def _text_of(data) -> str:
    """Text of what a timed-out call had read (bytes, str or None)."""
    if data is None:
        return ""
    return data if isinstance(data, str) else _text(bytearray(data))


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL brev's process group (it runs in its own session) and reap brev,
    waiting at most KILL_WAIT_S: never for its pipes, which a detached child may hold."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        pass


def brev_environment(env: dict) -> dict:
    """The environment ``brev`` runs with: ours minus every credential variable
    (NGC, AWS, HF, W&B keys and the Brev token itself, which reaches brev only
    through ``brev login --token``), plus two facts of brev:

    * ``BREV_API_KEY`` = :func:`api_key` when one is known: brev reads it from its
      environment (brev-cli PR #464), so an API key never needs a command line;
    * ``SSH_AUTH_SOCK`` = NO_AGENT_SOCKET when ours is unset or empty: brev's exec
      starts (and leaks) one ssh-agent per call otherwise (exec.go runSSHWithTimeout).
    """
    secret = set(known_secrets.values(env).values())
    out = {name: value for name, value in env.items()
           if name not in secret and not known_secrets.is_credential_env_name(name)}
    key = api_key(env)
    if key:
        out["BREV_API_KEY"] = key
    if not (env.get("SSH_AUTH_SOCK") or "").strip():
        out["SSH_AUTH_SOCK"] = NO_AGENT_SOCKET
    return out


def api_key(env: dict) -> str | None:
    """The Brev API key: ``BREV_API_KEY``, else a ``bak-`` value in ``BREV_API_TOKEN``
    (brev-cli pkg/auth/auth.go IsBrevAPIKey: the prefix after trimming), else None."""
    for name in ("BREV_API_KEY", "BREV_API_TOKEN"):
        value = (env.get(name) or "").strip()
        if value and (name == "BREV_API_KEY" or value.startswith(API_KEY_PREFIX)):
            return value
    return None


def pick_instance(listed: list[dict], name: str) -> dict | None:
    """The one entry of ``listed`` named ``name`` (None: none); INSTANCE_AMBIGUOUS naming
    each one's id and status when there are several."""
    found = [w for w in listed if w.get("name") == name]
    if len(found) > 1:
        ids = ", ".join(f"{w.get('id') or '?'} ({w.get('status') or '?'})" for w in found)
        raise TaoBrevError("INSTANCE_AMBIGUOUS", f"{len(found)} instances are named {name} in `brev ls --json`: "
                           f"ids {ids}", ids=[w.get("id") for w in found])
    return found[0] if found else None


def safe_copy(copy: Callable[[str, str], object], src: str, dst: str) -> None:
    """``copy(src, dst)`` (one side ``NAME:path``) with a local side free of ':' (brev-cli
    copy.go parseWorkspacePath splits on every colon): a local path holding one is replaced by
    a file in a fresh colon-free temporary directory, copied from (upload) or moved to
    (download) the real path. Raises BAD_ARGUMENT unless exactly one side names an instance,
    BAD_NAME for a colon in the remote path."""
    sides = [_remote_side(src), _remote_side(dst)]
    if (sides[0] is None) == (sides[1] is None):
        raise TaoBrevError("BAD_ARGUMENT", f"brev copy needs exactly one NAME:path side (got {src!r}, {dst!r})")
    remote_path = (sides[0] or sides[1])[1]
    if ":" in remote_path:
        raise TaoBrevError("BAD_NAME", f"a remote path with ':' cannot be copied (brev splits on it): {remote_path!r}")
    local = dst if sides[0] is not None else src
    if ":" not in local:
        copy(src, dst)
        return
    with tempfile.TemporaryDirectory(dir=colon_free_tmp()) as tmp:
        staged = os.path.join(tmp, STAGED_NAME)
        if sides[0] is not None:   # download: into the temporary path, then moved
            copy(src, staged)
            target = os.path.join(local, os.path.basename(remote_path.rstrip("/"))) if os.path.isdir(local) else local
            shutil.move(staged, target)
        else:
            (shutil.copytree if os.path.isdir(local) else shutil.copy2)(local, staged)
            copy(staged, dst)


STAGED_NAME = "staged"   # the colon-free file or directory of safe_copy's temporary directory


def _remote_side(arg: str) -> tuple[str, str] | None:
    """(instance, path) of a ``NAME:path`` argument the bundle built, else None (a local path)."""
    head, sep, tail = arg.partition(":")
    return (head, tail) if sep and INSTANCE_RE.fullmatch(head) else None   # a name has no '/': "/x/a:b" is local


def colon_free_tmp() -> str:
    """A writable temporary directory whose path holds no ':' ($TMPDIR, else /tmp, /var/tmp)."""
    for candidate in (tempfile.gettempdir(), "/tmp", "/var/tmp"):
        if ":" not in candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK):
            return candidate
    raise TaoBrevError("BAD_STATE_DIR", "no temporary directory without ':' in its path ($TMPDIR, /tmp, /var/tmp)")


def _no_answer(instance: str, done: subprocess.CompletedProcess) -> TransportError:
    """The error for a ``brev exec`` that returned no frame: SSH_KEY_REJECTED when ssh
    said ``Permission denied (publickey)``, else TRANSPORT_FAILED with brev's stderr tail."""
    text = (done.stderr or "") + "\n" + (done.stdout or "")
    api = api_unreachable(done)
    if api is not None:
        return TransportError("BREV_API_UNREACHABLE", f"brev exec on {instance!r}: ssh failed and the Brev API did "
                              "not answer brev's instance lookup: " + redact.tail(api, 300), brev_exit=done.returncode)
    if _KEY_REJECTED.search(text):
        return TransportError("SSH_KEY_REJECTED", f"{instance}'s sshd refuses brev's ssh key: "
                              + redact.tail(done.stderr or done.stdout, 300),
                              CODES["SSH_KEY_REJECTED"].fix.replace("NAME", instance), brev_exit=done.returncode)
    return TransportError("TRANSPORT_FAILED", f"brev exec on {instance!r} returned no complete answer "
                          f"(exit {done.returncode}): " + redact.tail(done.stderr), brev_exit=done.returncode)


def _auth_failed(done: subprocess.CompletedProcess) -> bool:
    """brev failed for auth. Its errors go to stderr, or to stdout in some
    releases (cmderrors uses fmt.Println), so both are searched - but only
    when brev failed, and never stdout that holds a frame: a command that ran
    is not an auth failure and must not be repeated."""
    stdout = done.stdout or ""
    text = (done.stderr or "") + ("" if "TAOBREV" in stdout else stdout)
    return done.returncode != 0 and api_unreachable(done) is None and bool(_AUTH_FAILURE.search(text))


def api_unreachable(done: subprocess.CompletedProcess) -> str | None:
    """The line of a failed brev call that shows the Brev API itself did not answer (a Go
    transport error such as ``Get "https://.../workspaces": EOF``, a 5xx or 429), else None.
    Never an auth failure: brev's login prompt (``You are currently logged out``) wins."""
    if done.returncode == 0:
        return None
    stdout = done.stdout or ""
    text = (done.stderr or "") + "\n" + ("" if "TAOBREV" in stdout else stdout)
    if "currently logged out" in text.lower():
        return None
    return next((line.strip() for line in text.splitlines() if _API_TRANSIENT.search(line)), None)


def _auto_started(instance: str, brev_text: str) -> bool:
    """brev's own words (outside the frame) say it started the STOPPED instance
    (util.StartWorkspaceIfStopped: "Instance NAME is starting.")."""
    return bool(re.search(rf"\b{re.escape(instance)} is starting\b", brev_text, re.IGNORECASE))


def refuse_secrets(text: str, what: str, env: dict | None = None) -> None:
    """Check ``text`` before it is sent; raise SECRET_IN_COMMAND naming where
    (variable/flag and line), never the value: first every secret value this
    process knows, in any encoding (the guarantee, ``known_secrets``), then
    the lint's literal credentials (advice)."""
    known_secrets.refuse(text, what, env)
    findings = redact.lint(text)
    if findings:
        raise TaoBrevError("SECRET_IN_COMMAND", f"{what} holds a literal credential: "
                           + "; ".join(str(f) for f in findings),
                           findings=[f.to_json() for f in findings])


def check_instance(name: str) -> str:
    """Reject instance names that are not plain brev names (BAD_NAME)."""
    if not isinstance(name, str) or not INSTANCE_RE.fullmatch(name):
        raise TaoBrevError("BAD_NAME", f"invalid instance name: {name!r}")
    return name
