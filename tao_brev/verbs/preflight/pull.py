"""``preflight.py --pull``: ``docker pull`` of ``--image`` as its own round trip, timed (the
job's cost facts report it as ``image_pull_s``); a refusal mapped to a code by
:func:`tao_brev.docker_state.registry_error_code`."""

from __future__ import annotations

from ... import bank, cost, docker_state, remote
from ...secrets import redact
from ...errors import TransportError
from .report import Context, PreflightRequest, Report, code_fix, say

PULL_TIMEOUT_S = 3600.0              # `docker pull` of a multi-GB image


def pull_image(report: Report, ctx: Context, req: PreflightRequest, image: str, logged_in: bool = False) -> None:
    """``docker pull IMAGE`` as its own brev exec (PULL_TIMEOUT_S); failures mapped to codes
    (:func:`tao_brev.docker_state.registry_error_code`; ``logged_in``: the ngc_auth check
    logged in to this image's registry, so a refusal means not entitled)."""
    say(f"preflight: pulling {image} on {req.instance} (up to {PULL_TIMEOUT_S:.0f} s)")
    started = ctx.clock()
    try:
        result = report.count("pull", ctx.brev.exec, req.instance, remote.pull_image(image),
                              timeout=PULL_TIMEOUT_S, host=req.host)
    except TransportError as exc:
        report.error("image", exc, image=image, present=False, pulled=False)
        return
    took = ctx.clock() - started
    data = {"image": image, "present": result.ok, "pulled": result.ok, "pull_s": round(took, 3)}
    if result.ok:
        cost.note_pull(ctx, req.instance, image, took)   # the job's cost facts report it (image_pull_s)
        report.passed("image", f"{image} pulled in {took:.1f} s", elapsed_s=took, **data)
        return
    text = redact.tail(result.stdout + "\n" + result.stderr, 400)
    code = docker_state.registry_error_code(text, bank.image_registry(image), logged_in=logged_in)
    report.fail("image", code, f"docker pull {image} failed after {took:.1f} s: {text}",
                code_fix(code, req.instance), elapsed_s=took, **data)
