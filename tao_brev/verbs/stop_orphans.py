"""``teardown.py --orphans --stop [--instance NAME ...]``: stop (``brev stop``), not delete, the
idle RUNNING orphans this bundle created (``owned``, as a delete without names takes) - or exactly
the named ones it ran jobs on - whose type can stop (``verbs/stop.py``): a user's own instance is
stopped only by name. Never an instance this bundle never ran a job on (``ours: false``), never
past a live job or unverified S3 results; a type that cannot stop is left as it is, its orphan
saying why and what bills. The answer is the ``--orphans`` one plus ``stopped`` (names).
"""

from __future__ import annotations

from ..context import Context
from ..errors import TaoBrevError
from ..model.answer_types import TeardownAnswer
from ..nextstep import command
from ..transport import check_instance
from . import orphans as orphans_mod
from . import stop
from . import teardown as teardown_mod


def stop_orphans(ctx: Context, names: list[str] | None = None,
                 price_per_hour: float | None = None) -> tuple[TeardownAnswer, int]:
    names = [check_instance(n) for n in names or []]
    found, kept = orphans_mod.survey(ctx, price_per_hour)
    listed = {o["instance"]: o for o in found}
    refused = [orphans_mod.not_listed(name, kept, found) for name in names if name not in listed]
    running = [o for o in found if str(o.get("status") or "").upper() in orphans_mod.RUNNING_STATUSES]
    targets = [listed[n] for n in names if n in listed] if names else [o for o in running if o["ours"] and o.get("owned")]
    stopped: list[str] = []
    for orphan in targets:
        name = orphan["instance"]
        if not orphan["ours"]:
            refused.append(("NOT_AN_ORPHAN", f"{name}: never used by this bundle (ours: false): {orphans_mod.RULE}"))
            continue
        blockers = teardown_mod.instance_blockers(ctx, name, None)
        if blockers:
            orphan["blockers"] = blockers
            refused.append(("INSTANCE_STOP_REFUSED", f"{name}: " + "; ".join(blockers)))
            continue
        if str(orphan.get("status") or "").upper() not in orphans_mod.RUNNING_STATUSES:
            orphan["stop"] = {"stopped": False, "stoppable": None, "still_billing": True,
                              "why": f"{name} is {orphan.get('status')}: nothing to stop (its disk bills until deleted)"}
            continue
        try:
            orphan["stop"] = stop.stop_instance(ctx, name, orphan.get("instance_type"), orphan["jobs"],
                                                command("teardown.py", "--orphans", "--delete", "--instance", name))
        except TaoBrevError as exc:
            orphan["error"] = exc.to_json()
            refused.append((exc.code, f"{name}: {exc.message}"))
            continue
        if orphan["stop"]["stopped"]:
            stopped.append(name)
            orphan["advice"] = f"stopped by this run: {orphan['stop']['note']} (brev start {name} brings it back)"
        else:
            orphan["advice"] = orphan["stop"]["why"]
    answer: TeardownAnswer = {"orphans": found, "kept": kept, "deleted": [], "stopped": stopped}
    if orphans_mod.near_names(names, found, kept):
        answer["did_you_mean"] = orphans_mod.near_names(names, found, kept)
    if refused:
        code = refused[0][0]
        err = TaoBrevError(code, "not stopped: " + "; ".join(m for _c, m in refused),
                           orphans_mod.refusal_fix(code, names))
        return {"ok": False, **answer, "error": err.to_json()}, err.exit_code
    return {"ok": True, **answer}, 0
