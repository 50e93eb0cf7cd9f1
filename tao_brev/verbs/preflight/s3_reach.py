"""``s3_from_instance``: the S3 transfers run ON the instance (staging's carrier image), so
the combined round trip asks it to open a TCP connection to the endpoint and looks for the
carrier image there; with ``--pull`` a missing carrier is pulled (:mod:`.carrier_pull`)."""

from __future__ import annotations

from ... import remote
from .carrier_pull import CarrierFacts, pull_carrier, pull_fix, registry_of
from .report import Context, PreflightRequest, Report, section_tail
from .units import Answers, Plan, RemoteCheck, S3Target, Snippet

S3_REACH = Snippet("s3_reach", lambda plan: plan.s3.reach_command() if plan.s3 is not None else None)
CARRIER = Snippet("carrier", lambda plan: (remote.image_size(plan.s3.carrier) if plan.s3 is not None
                                           else None))


def check_s3_from_instance(report: Report, answers: Answers, target: S3Target, ctx: Context | None = None,
                           req: PreflightRequest | None = None) -> None:
    """``s3_from_instance``: the transfers run ON the instance (staging.py's carrier), so the
    instance must reach the endpoint (a failure: S3_UNREACHABLE, nothing would be staged or
    uploaded) and should hold the carrier image (a warning: the first transfer pulls it)."""
    t = answers.elapsed_s
    where = f"{target.host}:{target.port}"
    reach, carrier = answers.get("s3_reach"), answers.get("carrier")
    data: CarrierFacts = {"endpoint": where, "carrier_image": target.carrier,
                          "carrier_present": carrier is not None and carrier.exit_code == 0}
    if reach is None or reach.exit_code != 0 or "reached" not in reach.output.split():
        report.fail("s3_from_instance", "S3_UNREACHABLE",
                    f"the instance cannot open a connection to the S3 endpoint {where}: {section_tail(reach)}",
                    f"Make {where} reachable from {answers.instance} (a public endpoint, or one on its network; "
                    "127.0.0.1 on this machine is not the instance's), or choose --storage-tier A without a bucket",
                    elapsed_s=t, **data)
        return
    if not data["carrier_present"]:
        if req is not None and req.pull and ctx is not None:
            pull_carrier(report, ctx, req, target.carrier, t, data)
            return
        hint = [*(["--image", req.image] if req and req.image else []),
                *(["--storage-tier", req.storage_tier] if req else []),
                *(["--bucket", req.bucket] if req and req.bucket else [])]
        report.warn("s3_from_instance", f"{where} is reachable from the instance; the AWS CLI image "
                    f"{target.carrier} is not on it: the first transfer pulls it "
                    f"(from {registry_of(target.carrier)})",
                    pull_fix(answers.instance, hint), elapsed_s=t, **data)
        return
    report.passed("s3_from_instance", f"{where} is reachable from the instance and {target.carrier} is on it",
                  elapsed_s=t, **data)


def _read(report: Report, answers: Answers, plan: Plan) -> None:
    assert plan.s3 is not None   # s3_from_instance applies only to a plan with an S3 target
    check_s3_from_instance(report, answers, plan.s3, plan.ctx, plan.req)


S3_CHECK = RemoteCheck("s3_from_instance", ("s3_reach", "carrier"), _read, applies=lambda plan: plan.s3 is not None)
