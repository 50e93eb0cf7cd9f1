"""Waiting for an instance to start: ``brev ls --json`` polled until the instance is RUNNING
with its build done; STOPPED started only when asked (``brev start``); a broken instance
refused with the reason. Used by preflight's ``instance`` check and by submit before its
first exec (brev exec would start a STOPPED instance by itself).

Facts relied on (references/brev-exec.md, read from brevdev/brev-cli): ``ls --json`` shape and
statuses (:class:`tao_brev.vocabulary.InstanceStatus`), RUNNING before the build is done.
"""

from __future__ import annotations

from ... import cost
from ...errors import TaoBrevError
from ...instance_names import closest, unknown_message
from ...transport import BREV_TIMEOUT_S, BrevInstance
from ...vocabulary import InstanceStatus
from .report import Context, PreflightRequest, say

INSTANCE_POLL_S = 10.0               # between `brev ls --json` polls while an instance starts

BROKEN_STATES = {
    InstanceStatus.FAILURE: "The instance failed to deploy or start: read its error in the Brev console, then "
                            "replace it with the official Brev agent skill (this bundle never provisions).",
    InstanceStatus.UNHEALTHY: "The instance runs but Brev reports it unhealthy: restart it (brev stop {name} && "
                              "brev start {name}) if its type can stop; if brev answers `does not support stop`, "
                              "replace it with the official Brev agent skill (brev delete {name} once its results "
                              "are safe: it bills until deleted).",
    InstanceStatus.DELETING: "The instance is being deleted: use another instance (the official Brev agent skill "
                             "provisions one).",
}
STOPPED_FIX = ("Start it: rerun preflight.py --instance {name} --start (runs `brev start {name}` and waits), "
               "or run `brev start {name}` yourself.")


def settle_instance(ctx: Context, req: PreflightRequest, entry: BrevInstance | None,
                    deadline: float) -> tuple[BrevInstance, bool]:
    """Poll until ``entry`` (the instance's ``brev ls --json`` entry, None when not listed) is
    RUNNING and built, until ``deadline`` (a ``ctx.clock()`` time, seconds); return (entry,
    whether this call started it: only with ``req.start``). Raises UNKNOWN_INSTANCE (details:
    ``did_you_mean``), INSTANCE_NOT_RUNNING (broken, or STOPPED without ``req.start``), and at the
    deadline INSTANCE_BUILDING / NOT_EXEC_READY; all but the first carry ``entry`` in details."""
    name, start_at = req.instance, None
    interval = poll_interval(deadline - ctx.clock(), INSTANCE_POLL_S)
    while True:
        if entry is None:
            listed = [str(w.get("name") or "") for w in ctx.brev.ls()]
            near = closest(name, listed)   # one close name: every verb's next is the corrected call
            raise TaoBrevError("UNKNOWN_INSTANCE", unknown_message(name, listed), did_you_mean=near,
                               answer={"did_you_mean": {name: near[0]}} if len(near) == 1 else {})
        status = str(entry.get("status") or "").upper()
        kind = InstanceStatus.parse(status)
        build = building(entry) if kind is InstanceStatus.RUNNING else None
        if kind is InstanceStatus.RUNNING and build is None:
            if start_at is not None:   # the bundle's own start bills from here: the next job's billed_parts.start_s
                cost.note_start(ctx, name, ctx.clock() - start_at)
            return entry, start_at is not None
        _refuse_broken(name, entry, kind, build)
        if kind is InstanceStatus.STOPPED and start_at is None:
            start_at = _start(ctx, req, entry, deadline)
        elif ctx.clock() + interval > deadline:
            raise _out_of_time(name, entry, status, build)
        else:
            what = f"RUNNING, build {build}, shell {entry.get('shell_status') or '?'}" if build else status
            say(f"preflight: {name} is {what}; waiting {interval:g} s")
            ctx.sleep(interval)
        entry = ctx.brev.instance(name)


def _refuse_broken(name: str, entry: BrevInstance, kind: InstanceStatus | None, build: str | None) -> None:
    """INSTANCE_NOT_RUNNING for a failed build or a broken status (its fix: BROKEN_STATES)."""
    if build == "CREATE_FAILED":
        raise TaoBrevError("INSTANCE_NOT_RUNNING", f"{name} is RUNNING but its build failed{_reason(entry)}",
                           BROKEN_STATES[InstanceStatus.FAILURE], entry=entry)
    if kind is not None and kind.is_broken():
        raise TaoBrevError("INSTANCE_NOT_RUNNING", f"{name} is {kind}{_reason(entry)}",
                           BROKEN_STATES[kind].format(name=name), entry=entry)


def _start(ctx: Context, req: PreflightRequest, entry: BrevInstance, deadline: float) -> float:
    """``brev start`` a STOPPED instance (only with ``req.start``); return when it began."""
    name = req.instance
    if not req.start:
        raise TaoBrevError("INSTANCE_NOT_RUNNING", f"{name} is STOPPED", STOPPED_FIX.format(name=name),
                           entry=entry)
    say(f"preflight: starting {name} (brev start {name})")
    start_at = ctx.clock()
    ctx.brev.start(name, timeout=max(deadline - ctx.clock(), BREV_TIMEOUT_S))
    return start_at


def _out_of_time(name: str, entry: BrevInstance, status: str, build: str | None) -> TaoBrevError:
    if build is not None:
        return TaoBrevError("INSTANCE_BUILDING", f"{name} is RUNNING but still building (build {build}, shell "
                            f"{entry.get('shell_status') or '?'}) at the end of the --exec-timeout budget",
                            entry=entry)
    return TaoBrevError("NOT_EXEC_READY", f"{name} is still {status or 'in an unknown state'} "
                        "at the end of the --exec-timeout budget", entry=entry)


def building(entry: BrevInstance) -> str | None:
    """The build status of a RUNNING instance that is not ready for a shell yet, else None.
    brev-cli pkg/cmd/ls/ls.go getShellDisplayStatus: shell READY only when RUNNING and the build
    (VerbBuildStatus: PENDING, BUILDING, CREATE_FAILED, COMPLETED) is COMPLETED; an entry without
    the field (older brev) is not held back."""
    build = str(entry.get("build_status") or "").upper()
    shell = str(entry.get("shell_status") or "").upper()
    if build in ("", "COMPLETED") and shell in ("", "READY"):
        return None
    return build or "?"


def _reason(entry: BrevInstance) -> str:
    parts = [f"{k} {v}" for k, v in (("build_status", entry.get("build_status")),
                                      ("health_status", entry.get("health_status"))) if v]
    return f" ({', '.join(parts)})" if parts else ""


def poll_interval(budget: float, cap: float) -> float:
    """Poll at ``cap`` seconds, or ten times within a small budget (seconds)."""
    return max(min(cap, budget / 10), 0.05)
