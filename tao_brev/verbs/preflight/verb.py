"""The verb: the checks in order (local ones, reaching the instance, the combined round
trip, ``--pull`` and ``--gpu-smoke``), and the one answer they make (module doc of
:mod:`tao_brev.verbs.preflight`)."""

from __future__ import annotations

from ... import remote
from ...errors import CODES, TaoBrevError
from ...model.answer_types import PreflightAnswer
from ...transport import api_key, check_instance
from ...vocabulary import STORAGE_TIERS
from .local import check_image_ref, check_s3
from .on_instance import check_on_instance
from .reach import check_brev_auth, check_brev_cli, check_exec_ready, check_instance_state
from .report import Context, PreflightRequest, Report, Stop


def preflight(ctx: Context, req: PreflightRequest) -> tuple[PreflightAnswer, int]:
    """Run every check for ``req``; return (answer, exit code). Bad flags raise BAD_ARGUMENT/BAD_NAME."""
    _validate(req)
    report = Report(ctx)
    image = check_image_ref(report, ctx, req)
    results_root, s3_target = check_s3(report, ctx, req)
    stopped = False
    try:
        check_brev_cli(report, ctx)
        entry = check_brev_auth(report, ctx, req)
        deadline = ctx.clock() + (req.exec_timeout or ctx.brev.timeout_for(req.instance))
        check_instance_state(report, ctx, req, entry, deadline)
        check_exec_ready(report, ctx, req, deadline)
        check_on_instance(report, ctx, req, image, results_root, s3_target)
    except Stop:
        stopped = True
    return _answer(report, ctx, req, image, stopped)


def login_only(ctx: Context) -> tuple[PreflightAnswer, int]:
    """``preflight.py --login``: ``brev_cli`` and ``brev_auth`` only (``brev ls --json``; the
    transport renews a missing login with BREV_API_TOKEN, or brev reads BREV_API_KEY from its
    environment), so that a plain ``brev`` command typed next finds brev logged in."""
    report = Report(ctx)
    try:
        check_brev_cli(report, ctx)
        started = ctx.clock()
        try:
            listed = ctx.brev.ls()
        except TaoBrevError as exc:
            report.stop("brev_auth", exc, token_set=bool(ctx.env.get("BREV_API_TOKEN", "").strip()))
        how = ("brev reads BREV_API_KEY from its environment" if api_key(ctx.env)
               else "headless login with BREV_API_TOKEN" if ctx.brev.logins else "already logged in")
        report.passed("brev_auth", f"logged in ({how}); brev ls lists {len(listed)} instance(s)",
                      elapsed_s=ctx.clock() - started, headless_login=ctx.brev.logins > 0,
                      api_key=bool(api_key(ctx.env)), instances=len(listed))
        stopped = False
    except Stop:
        stopped = True
    answer, code = _answer(report, ctx, PreflightRequest(instance=""), None, stopped)
    answer.pop("instance", None)
    return answer, code


def _validate(req: PreflightRequest) -> None:
    check_instance(req.instance)
    if req.exec_timeout is not None and not req.exec_timeout > 0:
        raise TaoBrevError("BAD_ARGUMENT", f"--exec-timeout must be a positive number of seconds "
                           f"(got {req.exec_timeout})")
    if req.storage_tier not in STORAGE_TIERS:
        raise TaoBrevError("BAD_ARGUMENT", f"--storage-tier must be A, B or C (got {req.storage_tier!r})")
    if req.results_root:
        remote.rpath(req.results_root)


def _answer(report: Report, ctx: Context, req: PreflightRequest, image: str | None,
            stopped: bool) -> tuple[PreflightAnswer, int]:
    """The JSON answer. The error (and exit code) is the first failed check of
    bad input (exit 2), else the check that stopped the run (its code's class),
    else PREFLIGHT_FAILED (exit 1) naming every failed check."""
    failed = [c for c in report.checks if not c.ok]
    answer: PreflightAnswer = {"ok": not failed, "instance": req.instance, "image": image,
                               "checks": [c.to_json() for c in report.checks],
                               "warnings": [c.name for c in report.checks if c.warning],
                               "exec_calls": ctx.brev.exec_calls, "round_trips": report.round_trips.copy(),
                               "brev_logins": ctx.brev.logins}
    if not failed:
        return answer, 0
    decisive = next((c for c in failed if CODES[c.failure_code].exit_code == 2), None) or (
        failed[-1] if stopped else None)
    if decisive is not None:
        answer["error"] = {"code": decisive.failure_code, "message": f"{decisive.name}: {decisive.detail}",
                           "fix": decisive.fix or CODES[decisive.failure_code].fix}   # fail() gave it one
        return answer, CODES[decisive.failure_code].exit_code
    names = ", ".join(c.name for c in failed)
    answer["error"] = TaoBrevError("PREFLIGHT_FAILED", f"failed checks: {names}").to_json()
    return answer, 1

