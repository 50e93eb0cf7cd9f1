"""Read-only verbs never start an instance: the status is read before any exec.

brev starts a STOPPED instance by itself when an exec fails on it (brev-cli
``pkg/cmd/exec/exec.go`` runExecCommand -> ``pkg/cmd/util/ssh.go``
StartWorkspaceIfStopped), and a copy does too (``pkg/cmd/copy/copy.go``
startWorkspaceIfStopped): reading a stopped instance would resume its billing.
So ``poll_status.py`` and ``teardown.py`` (when it deletes nothing) read
``brev ls --json`` first (one call for all instances of an ``--all``) and answer
INSTANCE_STOPPED without exec; only ``--start`` wakes the instance, through one
``echo ok`` exec whose deadline covers brev's own start wait
(``transport.BREV_START_WAIT_S``).

When ``brev ls`` itself cannot answer (the Brev API unreachable, a timeout, output that is
not its JSON), a read-only verb FAILS CLOSED: it does not exec (nor copy) on an instance whose
status it could not read, and answers BREV_API_UNREACHABLE (exit 3: ``next`` is the same command
again); an auth failure keeps its own code. A verb allowed to start the instance (``--start``,
a teardown that deletes it) goes on.
"""

from __future__ import annotations

from typing import TypedDict

from ..context import Context, say
from ..errors import TaoBrevError
from ..model.answer_types import ErrorObject
from ..nextstep import command
from ..transport import BREV_START_WAIT_S
from ..vocabulary import InstanceStatus, JobState

# brev ls failed: the instance's status is unknown, so a read-only verb runs nothing on it
NO_API = ("BREV_API_UNREACHABLE", "BREV_NOT_LOGGED_IN", "BREV_LOGIN_FAILED", "BREV_API_KEY_REJECTED",
          "BREV_NVIDIA_LOGIN_REQUIRED", "BREV_FAILED", "TRANSPORT_TIMEOUT", "TRANSPORT_FAILED")
AUTH = ("BREV_NOT_LOGGED_IN", "BREV_LOGIN_FAILED", "BREV_API_KEY_REJECTED", "BREV_NVIDIA_LOGIN_REQUIRED")
STOPPED_MEANS = ("nothing runs on it and it bills no GPU time; its disk is kept, so the job's results dir and "
                 "checkpoints on it are safe while it stays stopped")


def unread(exc: TaoBrevError, instance: str | None = None) -> TaoBrevError:
    """The error of a read-only verb whose ``brev ls --json`` failed with ``exc``: its auth code
    as it is, else BREV_API_UNREACHABLE (exit 3) saying that nothing ran on the instance (brev exec
    and brev copy start a STOPPED one: exec.go StartWorkspaceIfStopped, copy.go startWorkspaceIfStopped)."""
    if exc.code in AUTH:
        return exc
    what = f"instance {instance}" if instance else "the instances"
    return TaoBrevError("BREV_API_UNREACHABLE",
                        f"brev ls --json did not answer ({exc.code}: {exc.message}); the status of {what} is unknown, "
                        "so nothing was run on it (brev exec or copy would start a STOPPED instance, and bill)",
                        "Wait a minute and rerun the same command (read-only, safe to repeat); do not log in again.",
                        instance=instance)


def read_all(ctx: Context) -> bool:
    """One ``brev ls --json`` for every instance (``poll_status.py --all``). When brev ls cannot
    answer, nothing is exec'd: :func:`unread` is raised (the module doc)."""
    try:
        ctx.brev.ls()
    except TaoBrevError as exc:
        if exc.code not in NO_API:
            raise
        ctx.brev.statuses = {}
        raise unread(exc) from None
    return True


def status_of(ctx: Context, instance: str, fresh: bool = True, may_start: bool = False) -> str | None:
    """The instance's ``brev ls --json`` status: read now (``fresh``), else the one the last
    ``brev ls`` of this process listed (:func:`read_all`). None when it is not listed. When brev ls
    cannot answer, :func:`unread` is raised unless the verb ``may_start`` the instance (then None).
    Raises INSTANCE_AMBIGUOUS when several carry the name."""
    if fresh:
        try:
            ctx.brev.instance(instance)
        except TaoBrevError as exc:
            if exc.code not in NO_API:
                raise
            ctx.brev.statuses.pop(instance, None)
            if not may_start:
                raise unread(exc, instance) from None
            say(f"brev ls did not answer ({exc.code}); going on: this verb may start {instance}")
            return None
    return ctx.brev.statuses.get(instance)


def stopped(ctx: Context, instance: str, start: bool = False, fresh: bool = True) -> bool:
    """True when ``instance`` is STOPPED and may not be started (``start`` False). With
    ``start``, a STOPPED instance is woken here (brev starts it; its start wait is covered)."""
    if status_of(ctx, instance, fresh, may_start=start) != InstanceStatus.STOPPED:
        return False
    if not start:
        return True
    say(f"starting the STOPPED instance {instance} (--start): brev starts it and waits for ssh, up to "
        f"{BREV_START_WAIT_S:.0f} s; billing resumes")
    ctx.brev.exec(instance, "echo ok", start=True)
    return False


def stopped_error(instance: str, script: str, job_id: str) -> TaoBrevError:
    """INSTANCE_STOPPED for ``script JOB_ID`` on ``instance``: what it means, the command
    that starts it (``--start``), that the results on it are safe."""
    return TaoBrevError("INSTANCE_STOPPED",
                        f"instance {instance} is STOPPED (brev ls --json): {STOPPED_MEANS}. It was not started "
                        f"(brev exec would have started it)",
                        f"To read it, start it: {command(script, job_id, '--start')} (billing resumes; brev's "
                        f"start can take up to {BREV_START_WAIT_S:.0f} s). Until then the results on it are safe.",
                        instance=instance)


class Stopped(TypedDict):
    """What a job's answer (poll or teardown) says when its instance is STOPPED: :func:`stopped_fields`."""
    state: str
    instance_status: str
    message: str
    error: ErrorObject
    next: str | None
    next_note: str


def stopped_fields(instance: str, script: str, job_id: str, terminal: str | None = None) -> Stopped:
    """What a job's answer without exec because its instance is STOPPED carries (merged over the
    answer); ``state``: the record's terminal state, else UNKNOWN (the stop killed any running
    container). ``next`` is null: starting resumes billing, a person decides; ``next_note`` names
    the --start command."""
    exc = stopped_error(instance, script, job_id)
    return {"state": terminal or JobState.UNKNOWN, "instance_status": InstanceStatus.STOPPED,
            "message": exc.message, "error": exc.to_json(), "next": None,
            "next_note": stopped_note(instance, script, job_id)}


def stopped_note(instance: str, script: str, job_id: str) -> str:
    """``next_note`` of a STOPPED answer: ask before starting (it bills), then the exact command."""
    return (f"instance {instance} is STOPPED and was left so (its results are safe); starting it resumes billing, "
            f"so ask first - then: {command(script, job_id, '--start')}")
