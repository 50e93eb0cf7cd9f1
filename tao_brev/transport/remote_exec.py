"""``brev exec``: one framed remote script, its retries, and the STOPPED / ambiguous instance refused."""

from __future__ import annotations

import subprocess
import uuid
from typing import TYPE_CHECKING, Any, Callable

from ..errors import RemoteCommandError, TaoBrevError, TransportError
from ..secrets import redact
from ..vocabulary import InstanceStatus
from .diagnosis import _auto_started, _no_answer
from .framing import RemoteResult, _last_frame, frame
from .names import check_instance, refuse_secrets
from .settings import BREV_START_WAIT_S, EXEC_TIMEOUT_S, FIRST_EXEC_TIMEOUT_S, READ_RETRIES


class ExecMixin:
    """The exec half of :class:`tao_brev.transport.Brev` (its ``statuses``, ``ready_instances``, ``_with_login``)."""

    if TYPE_CHECKING:   # Brev's fields and LoginMixin's login, which this half uses
        ready_instances: set[str]
        statuses: dict[str, str]
        started: set[str]
        on_ready: Callable[[str], None] | None
        on_started: Callable[[str], None] | None
        backoff_s: tuple[float, ...] | None
        exec_calls: int
        clock: Callable[[], float]
        sleep: Callable[[float], None]
        log: Callable[[str], None]

        def _with_login(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]: ...

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
        if self.statuses.get(instance) == InstanceStatus.STOPPED:
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
                    if self.statuses.get(instance) == InstanceStatus.STOPPED:   # it answered: brev started it (start=True)
                        self.statuses[instance] = InstanceStatus.RUNNING
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
                assert self.backoff_s is not None   # Brev.__post_init__ set it
                wait = self.backoff_s[min(attempt - 1, len(self.backoff_s) - 1)]
                self.log(f"brev exec on {instance}: {last_error.message}; retrying in {wait:g} s "
                         f"(attempt {attempt + 1}/{attempts})")
                self.sleep(wait)
        assert last_error is not None   # the loop ran at least once and did not return
        raise last_error

    def run(self, instance: str, script: str, **kw: Any) -> RemoteResult:
        """Like :meth:`exec` but raises RemoteCommandError on a non-zero exit."""
        result = self.exec(instance, script, **kw)
        if not result.ok:
            raise RemoteCommandError("REMOTE_COMMAND_FAILED",
                                     f"command on {instance} exited {result.exit_code}: "
                                     + redact.tail(result.stderr or result.stdout),
                                     exit_status=result.exit_code)
        return result
