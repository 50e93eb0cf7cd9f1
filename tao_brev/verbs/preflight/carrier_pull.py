"""``preflight.py --pull``: the S3 carrier image too, when the storage tier moves data through S3.

The transfers of tiers B/C and the results upload run the pinned AWS CLI image on the instance
(``images.s3_transfer`` of versions.yaml; its registry is the image's own, e.g.
``public.ecr.aws``). preflight looks for it in its one combined round trip; with ``--pull``
a missing carrier is pulled in one more ``brev exec`` (like the TAO image), so the first
transfer does not pull it in the middle of a job. Without ``--pull`` the warning's fix is
this preflight again with ``--pull`` (and ``next`` names it).
"""

from __future__ import annotations

from typing import TypedDict

from ... import bank, cost, docker_state, remote
from ...secrets import redact
from ...errors import TransportError
from ...nextstep import command
from .report import Context, PreflightRequest, Report

PULL_TIMEOUT_S = 900.0   # the AWS CLI image is ~150 MB compressed


class _Reach(TypedDict):
    endpoint: str        # host:port
    carrier_image: str
    carrier_present: bool


class CarrierFacts(_Reach, total=False):
    """The ``s3_from_instance`` check's ``data`` (``carrier_pulled`` added by a ``--pull``)."""
    carrier_pulled: bool


def pull_fix(instance: str, argv_hint: list[str]) -> str:
    """The complete preflight command that pulls what is missing."""
    return "Pull it now: " + command("preflight.py", "--instance", instance, *argv_hint, "--pull")


def registry_of(image: str) -> str:
    """The registry a pull of ``image`` reaches, named for an answer."""
    return bank.image_registry(image)


def pull_carrier(report: Report, ctx: Context, req: PreflightRequest, carrier: str, elapsed_s: float,
                 data: CarrierFacts) -> None:
    """Pull ``carrier`` on ``req.instance`` (PULL_TIMEOUT_S) and record the ``s3_from_instance`` check's
    outcome (``elapsed_s``: the combined round trip's; ``data``: the check's facts so far)."""
    started = ctx.clock()
    try:
        result = report.count("pull", ctx.brev.exec, req.instance, remote.pull_image(carrier),
                              timeout=PULL_TIMEOUT_S, host=req.host)
    except TransportError as exc:
        report.error("s3_from_instance", exc, elapsed_s=elapsed_s, **data)
        return
    took = ctx.clock() - started
    if result.ok:
        cost.note_pull(ctx, req.instance, carrier, took)
        pulled: CarrierFacts = {**data, "carrier_present": True, "carrier_pulled": True}
        report.passed("s3_from_instance", f"{data['endpoint']} is reachable from the instance; {carrier} pulled "
                      f"from {registry_of(carrier)} in {took:.1f} s", elapsed_s=elapsed_s, **pulled)
        return
    text = redact.tail(result.stdout + "\n" + result.stderr, 400)
    code = docker_state.registry_error_code(text, registry_of(carrier))
    not_pulled: CarrierFacts = {**data, "carrier_pulled": False}
    report.fail("s3_from_instance", code, f"docker pull {carrier} (from {registry_of(carrier)}) failed after "
                f"{took:.1f} s: {text}", elapsed_s=elapsed_s, **not_pulled)
