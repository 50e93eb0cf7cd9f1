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

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

from ..errors import TaoBrevError, TransportError
from ..secrets import redact
from ..secrets import guard as known_secrets
from ..vocabulary import InstanceStatus
from .auth import API_KEY_PREFIX, NO_AGENT_SOCKET, LoginMixin, api_key, brev_environment
from .commands import BrevPrice, BrevSearchRow, CommandsMixin
from .copying import STAGED_NAME, colon_free_tmp, safe_copy
from .diagnosis import (_API_TRANSIENT, _AUTH_FAILURE, _KEY_REJECTED, _NVIDIA_MIGRATION, _auth_failed, _auto_started,
                        _no_answer, api_unreachable)
from .framing import RemoteResult, frame, unframe
from .names import INSTANCE_RE, BrevInstance, check_instance, pick_instance, refuse_secrets
from .process import _kill_group, _read_available, _text, _text_of, run_until_exit
from .remote_exec import ExecMixin
from .settings import (API_RETRIES, BACKOFF_ENV, BACKOFF_S, BREV_START_WAIT_S, BREV_TIMEOUT_S, EXEC_TIMEOUT_S,
                       FIRST_EXEC_TIMEOUT_S, READ_RETRIES, backoff_from_env)


@dataclass
class Brev(LoginMixin, ExecMixin, CommandsMixin):
    """Runs ``brev``. ``sleep``/``clock`` are injectable so waits are testable.

    ``exec_calls`` counts ``brev exec`` invocations (round trips), ``log``
    receives progress lines (stderr by default); every message is redacted.
    """

    binary: str = "brev"
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    log: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr, flush=True)
    ready_instances: set[str] = field(default_factory=set)   # answered before: the shorter exec timeout applies
    on_ready: Callable[[str], None] | None = None       # told once when an instance first answers
    on_deleted: Callable[[str], None] | None = None     # told after `brev delete` (a new one may reuse the name)
    on_started: Callable[[str], None] | None = None     # told when brev started a STOPPED instance by itself
    backoff_s: tuple[float, ...] | None = None   # None: from the environment (backoff_from_env)
    exec_calls: int = 0
    logins: int = 0
    statuses: dict[str, str] = field(default_factory=dict)   # instance -> status from the last `brev ls --json`
    started: set[str] = field(default_factory=set)      # instances brev started (STOPPED before) in this process

    def __post_init__(self) -> None:
        if self.backoff_s is None:
            self.backoff_s = backoff_from_env(self.env)

    # -- process plumbing --------------------------------------------------
    def path(self) -> str:
        found = shutil.which(self.binary, path=self.env.get("PATH"))
        if not found:
            raise TaoBrevError("BREV_NOT_FOUND", f"`{self.binary}` is not on PATH")
        return found

    def _spawn(self, args: list[str], timeout: float, allow: str | None = None) -> subprocess.CompletedProcess[str]:
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
        if name and (args[0] == "start" or _auto_started(name, partial) or self.statuses.get(name) == InstanceStatus.STOPPED):
            self.started.add(name)
            if self.on_started:
                self.on_started(name)
            message += (f"; brev was starting the STOPPED instance {name} (it may be RUNNING now, and it BILLS "
                        "from its start): poll again, or stop or delete it if nothing needs it")
        return TransportError("TRANSPORT_TIMEOUT", message, timeout_s=timeout)

    def _call(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """:meth:`_with_login`, repeated API_RETRIES times with backoff while the Brev API
        answers a transient error (:func:`api_unreachable`); BREV_API_UNREACHABLE after that."""
        for attempt in range(1, API_RETRIES + 2):
            done = self._with_login(args, timeout)
            problem = api_unreachable(done)
            if problem is None:
                return done
            if attempt <= API_RETRIES:
                assert self.backoff_s is not None   # __post_init__ set it
                wait = self.backoff_s[min(attempt - 1, len(self.backoff_s) - 1)]
                self.log(f"brev {args[0]}: the Brev API did not answer ({redact.tail(problem, 160)}); "
                         f"retrying in {wait:g} s (attempt {attempt + 1}/{API_RETRIES + 1})")
                self.sleep(wait)
        raise TaoBrevError("BREV_API_UNREACHABLE", f"`brev {args[0]}`: the Brev API did not answer after "
                           f"{API_RETRIES + 1} attempts: " + redact.tail(problem, 300))
