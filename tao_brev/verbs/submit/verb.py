"""``submit.py``: the guards, then the dry run's plan or the launch (record-then-launch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...model.answer_types import SubmitAnswer
from .launch import dry_run_status, open_record, prepare, push_credentials, run_once
from .guards import GUARDS
from .plan import Plan, SubmitRequest, dry_run

if TYPE_CHECKING:   # type hints only: the CLI runner is the scripts' layer
    from ...context import Context


def submit(ctx: Context, req: SubmitRequest) -> tuple[SubmitAnswer, int]:
    """Submit one TAO job: (answer, exit code 0) or TaoBrevError (bad input: exit 2, before
    any record opens; a refused or failed launch: exit 1, its record closed as ERROR).
    An ambiguous launch answers what ``reconcile.pending_launch`` found."""
    plan = Plan()
    for guard in GUARDS:   # bad input never opens a record
        guard(ctx, req, plan)
    if req.dry_run:   # the plan, and the instance's status (one brev ls): a stopped one needs --start
        answer = dry_run(req, plan)
        answer.update(dry_run_status(ctx, req))
        if answer.get("instance_note"):
            answer["warnings"] = [*answer["warnings"], answer["instance_note"]]
        return answer, 0
    proof = prepare(ctx, req, plan)
    record, answer = open_record(ctx, req, plan, proof)
    env_file, carrier_file = push_credentials(ctx, req, plan, answer)
    return run_once(ctx, req, plan, record, answer, env_file, carrier_file)
