"""Reaching the instance: ``brev_cli`` (brev on PATH), ``brev_auth`` (``brev ls --json``
answers), ``instance`` (listed and RUNNING, waited for by :mod:`.instance_wait`) and
``exec_ready`` (the two-word probe). Each failure stops the run: later checks need it.

Facts relied on: brev-cli behaviour in ``references/brev-exec.md`` (read from brevdev/brev-cli):
RUNNING before sshd, the two-word probe, >= 600 s for a first exec.
"""

from __future__ import annotations

from typing import TypedDict

from ... import cost
from ...secrets import redact
from ...errors import TaoBrevError, TransportError
from ...transport import BREV_TIMEOUT_S, BrevInstance
from .instance_wait import poll_interval, settle_instance
from .report import Context, PreflightRequest, Report

PROBE_INTERVAL_S = 5.0               # between readiness probes (each brev exec also waits for ssh itself)
MIN_ATTEMPT_TIMEOUT_S = 5.0          # an attempt in flight gets at least this long
MAX_PROBE_TIMEOUT_S = 120.0          # one probe attempt never waits longer than this
KEY_REJECTED_ATTEMPTS = 2            # probes refused with `Permission denied (publickey)` before giving up


class InstanceFacts(TypedDict, total=False):
    """The ``instance`` check's ``data`` from the ``brev ls --json`` entry (None: brev omits the field)."""
    status: str | None
    shell_status: str | None
    health_status: str | None
    build_status: str | None
    gpu: str | None
    instance_type: str | None


def check_brev_cli(report: Report, ctx: Context) -> None:
    """``brev_cli``: brev is on PATH and ``brev --version`` answers (no login needed).

    The transport has no public call that needs no login, hence its process
    helper (stdin from /dev/null, timeout kills the process group).
    """
    try:
        path = ctx.brev.path()
        done = ctx.brev._spawn(["--version"], BREV_TIMEOUT_S)
    except TaoBrevError as exc:
        report.stop("brev_cli", exc)
    lines = (done.stdout or done.stderr or "").strip().splitlines()
    if done.returncode != 0:
        report.stop("brev_cli", TaoBrevError("BREV_FAILED", f"`brev --version` exited {done.returncode}: "
                                             + redact.tail(" ".join(lines), 300)), path=path)
    version = lines[-1] if lines else None
    report.passed("brev_cli", f"brev at {path} ({version or 'version unknown'})", path=path, version=version)


def check_brev_auth(report: Report, ctx: Context, req: PreflightRequest) -> BrevInstance | None:
    """``brev_auth``: ``brev ls --json`` answers. The transport logs in headlessly
    with BREV_API_TOKEN once when brev reports 401/unauthorized or a prompt
    without a terminal; this check says whether that happened."""
    try:
        entry = ctx.brev.instance(req.instance)
    except TaoBrevError as exc:
        report.stop("brev_auth", exc, token_set=bool(ctx.env.get("BREV_API_TOKEN", "").strip()))
    relogged = ctx.brev.logins > 0
    report.passed("brev_auth", "logged in" + (" (headless re-login with BREV_API_TOKEN)" if relogged else ""),
                  headless_login=relogged)
    return entry


def check_instance_state(report: Report, ctx: Context, req: PreflightRequest, entry: BrevInstance | None,
                         deadline: float) -> None:
    """``instance``: listed and RUNNING; STARTING/DEPLOYING/STOPPING are waited
    for (``brev ls --json`` polls) until ``deadline``; STOPPED is started only
    with ``--start``; FAILURE/UNHEALTHY/DELETING fail with the reason."""
    started_at = ctx.clock()
    try:
        entry, started = settle_instance(ctx, req, entry, deadline)
    except TaoBrevError as exc:
        near = {"did_you_mean": exc.details["did_you_mean"]} if exc.details.get("did_you_mean") else {}
        report.stop("instance", exc, **_instance_facts(exc.details.get("entry")), **near)
    waited = ctx.clock() - started_at
    cost.note_instance_type(ctx, req.instance, entry, price_lookup=True)   # the jobs on it are priced from it
    facts = _instance_facts(entry)
    how = (" after `brev start`" if started else "") + (f", waited {waited:.0f} s" if waited >= 1 else "")
    report.passed("instance", f"{req.instance} RUNNING{how}; shell {facts['shell_status']}, gpu {facts['gpu']}",
                  started=started, waited_s=round(waited, 3), **facts)


def _instance_facts(entry: BrevInstance | None) -> InstanceFacts:
    if not entry:
        return {}
    return {"status": entry.get("status"), "shell_status": entry.get("shell_status"),
            "health_status": entry.get("health_status"), "build_status": entry.get("build_status"),
            "gpu": entry.get("gpu"), "instance_type": entry.get("instance_type")}


def check_exec_ready(report: Report, ctx: Context, req: PreflightRequest, deadline: float) -> None:
    """``exec_ready``: the two-word probe ``echo ok`` printed exactly ``ok``.

    A fresh instance reports RUNNING before sshd accepts connections, and a
    single token such as ``true`` lands in brev's command slot even when a
    real command is misquoted, so the probe is two words and its output is
    checked (references/brev-exec.md, fact 8). Polled until ``deadline``.
    """
    started = ctx.clock()
    try:
        attempts = report.count("probe", _probe_until_ready, ctx, req, deadline)
    except TaoBrevError as exc:
        report.stop("exec_ready", exc, attempts=report.round_trips["probe"])
    took = ctx.clock() - started
    report.passed("exec_ready", f"`echo ok` answered after {took:.1f} s ({attempts} attempt(s))",
                  elapsed_s=took, attempts=attempts, seconds=round(took, 3))


def _probe_until_ready(ctx: Context, req: PreflightRequest, deadline: float) -> int:
    """Return the number of attempts; raise NOT_EXEC_READY at ``deadline``.

    ``Permission denied (publickey)`` is not a boot delay (brev's own wait for ssh
    stops on it): the probe gives up with SSH_KEY_REJECTED after
    KEY_REJECTED_ATTEMPTS such answers, whatever budget is left."""
    interval = poll_interval(deadline - ctx.clock(), PROBE_INTERVAL_S)
    attempt, last, rejected = 0, "no attempt", 0
    while True:
        attempt += 1
        remaining = deadline - ctx.clock()
        timeout = min(max(remaining, MIN_ATTEMPT_TIMEOUT_S), MAX_PROBE_TIMEOUT_S)
        try:
            result = ctx.brev.exec(req.instance, "echo ok", timeout=timeout, host=req.host)
            if result.ok and result.stdout.strip() == "ok":
                return attempt
            last = f"the probe printed {result.stdout.strip()[:80]!r} (exit {result.exit_code})"
        except TransportError as exc:
            last = exc.message
            rejected = rejected + 1 if exc.code == "SSH_KEY_REJECTED" else 0
            if rejected >= KEY_REJECTED_ATTEMPTS:
                raise TransportError(exc.code, f"{exc.message} ({attempt} attempts)", exc.fix) from None
        if ctx.clock() + interval > deadline:
            raise TaoBrevError("NOT_EXEC_READY", f"{req.instance} did not run `echo ok` within the "
                               f"--exec-timeout budget ({attempt} attempts); last: {last}")
        ctx.sleep(interval)
