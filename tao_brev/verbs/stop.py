"""Stopping an instance instead of deleting it (``teardown.py JOB_ID --stop-instance``,
``teardown.py --orphans --stop``): compute billing ends, the disk (and the results on it) stays.

Whether a type can stop is brev's fact: ``brev search gpu|cpu --json`` ``stoppable``
(tao_brev/prices.py), and brev's own refusal ``instance "NAME" does not support stop.``
(brev-cli pkg/cmd/stop/stop.go validateWorkspaceStoppable) when the list did not know
the type. A type that cannot stop is never stopped: the answer says why and that it bills
until it is deleted, with the command that deletes it.

A stop waits for the results to be safe: no other job on the instance live (the stop
kills its container) and every S3-routed result verified (the upload runs on the
instance). Results that exist only on the instance stay on its disk, which a stop keeps.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypedDict

from .. import cost, prices
from ..context import Context, say, warn
from ..errors import TaoBrevError
from ..model.answer_types import StopFacts, TeardownAnswer
from ..nextstep import command

NOT_STOPPABLE = re.compile(r'instance "[^"]*" does not support stop')


def cannot_stop(instance: str, instance_type: str | None, how: str, delete_cmd: str) -> StopFacts:
    """The answer part for a type brev cannot stop: why, and what bills."""
    return {"stopped": False, "stoppable": False, "still_billing": True,
            "why": (f"{instance} ({instance_type or 'type unknown'}) cannot be stopped: {how}. It bills until it "
                    f"is deleted: {delete_cmd} deletes it (copy what you need from it first)")}


def stop_instance(ctx: Context, instance: str, instance_type: str | None, job_ids: list[str],
                  delete_cmd: str) -> StopFacts:
    """``brev stop`` ``instance`` unless its type cannot stop; returns ``{"stopped", "stoppable",
    "still_billing", "why"?, "stopped_at"?}``. Raises TaoBrevError when brev fails otherwise."""
    can = prices.stoppable(ctx, instance_type)
    if can is False:
        return cannot_stop(instance, instance_type, f"brev search lists its type {instance_type} as not "
                                                    "stoppable", delete_cmd)
    try:
        ctx.brev.stop(instance)
    except TaoBrevError as exc:
        if NOT_STOPPABLE.search(exc.message):
            return cannot_stop(instance, instance_type, "brev refused: it does not support stop", delete_cmd)
        raise
    at = cost.note_stop(ctx, instance, job_ids)
    say(f"teardown: instance {instance} stopped (its disk stays and bills a little; brev start {instance} "
        "brings it back)")
    return {"stopped": True, "stoppable": True, "still_billing": False, "stopped_at": at,
            "note": "stopped: no compute billed; its disk (and what is on it) stays and bills storage until deleted"}


def stop_blockers(live: list[str], unverified: list[str]) -> list[str]:
    """Why a stop must wait: live jobs (it would kill them) and S3 results not verified yet."""
    return list(live) + list(unverified)


STOP_REFUSED_FIX = ("Wait for the other jobs on it to end and the results to be verified ({poll} for each job "
                    "named), then run {again}.")


def instance_type(ctx: Context, job_id: str, instance: str) -> str | None:
    """The job's instance type: remembered in its sidecar, else one ``brev ls`` (remembered then)."""
    known = (ctx.sidecars.load(job_id).cost or {}).get("instance_type")
    if known:
        return known
    try:
        found = (ctx.brev.instance(instance) or {}).get("instance_type")
    except TaoBrevError as exc:
        warn(f"teardown {job_id}: instance type unknown ({exc.message})")
        return None
    cost.remember_instance_type(ctx, job_id, found)
    return found


class UnknownRefusal(TypedDict, total=False):
    """:func:`unknown_refusal`: merged over a refused teardown's answer (empty: no unknown container)."""
    unknown_containers: list[str]
    still_billing: bool
    force: str
    why: str


def unknown_refusal(ctx: Context, job_id: str, instance: str, unknown: list[str], verb: str) -> UnknownRefusal:
    """The refusal's part for live job containers this state dir did not launch: what a ``verb``
    (``stop`` / ``delete``) would cost, and the exact command that does it anyway."""
    kind = instance_type(ctx, job_id, instance)
    price, source, _note = prices.price(ctx, None, kind)
    bills = (f"{instance} ({kind or 'type unknown'}) keeps billing " +
             (f"{price:.2f} USD/h ({source})" if price is not None else "its hourly price (unknown here)"))
    flag = "--stop-instance" if verb == "stop" else "--delete-instance"
    loses = ("kills them: their jobs end, progress since their last checkpoint is lost (their results stay on "
             "its disk)" if verb == "stop" else "kills them and deletes their results on its disk")
    return {"unknown_containers": unknown, "still_billing": True,
            "force": command("teardown.py", job_id, flag, "--force"),
            "why": f"a {verb} {loses}; kept, {bills}. Ask whoever runs them, or to {verb} anyway: "
                   + command("teardown.py", job_id, flag, "--force")}


def after_teardown(ctx: Context, job_id: str, instance: str, answer: TeardownAnswer, blockers: list[str],
                   job_ids: list[str], unknown: Sequence[str] = ()) -> tuple[TeardownAnswer, int]:
    """``teardown.py JOB_ID --stop-instance`` once the container is removed and the results
    handled: refuse while ``blockers`` or ``unknown`` (live containers another state dir launched:
    ``instance_jobs.unknown_containers``) - INSTANCE_STOP_REFUSED - else stop when the type can."""
    if blockers or unknown:
        extra: UnknownRefusal = unknown_refusal(ctx, job_id, instance, list(unknown), "stop") if unknown else {}
        fix = STOP_REFUSED_FIX.format(poll=command("poll_status.py", job_id, "--wait"),
                                      again=command("teardown.py", job_id, "--stop-instance"))
        err = TaoBrevError("INSTANCE_STOP_REFUSED", f"not stopping {instance}: " + "; ".join([*blockers, *unknown]),
                           f"{extra['why']}. {fix}" if extra else fix)
        return {"ok": False, **answer, **extra, "blockers": [*blockers, *unknown], "instance_stopped": False,
                "error": err.to_json()}, 1
    kind = instance_type(ctx, job_id, instance)
    done = stop_instance(ctx, instance, kind, job_ids, command("teardown.py", job_id, "--delete-instance"))
    answer.update({"instance_stopped": done["stopped"], "stop": done})
    if not done["stopped"]:
        answer["warnings"].append(done["why"])
    return {"ok": True, **answer}, 0
