"""The types of references/schemas/cost.schema.json (made by dev/gen_answer_types.py:
do not edit; change the schema and run it again)."""

from __future__ import annotations

from typing import TypedDict


class CostFactsBilledParts(TypedDict, total=False):
    """billed_s part by part"""
    start_s: float | None
    image_pull_s: float | None
    job_s: float | None
    idle_s: float | None
    until: str


class CostFacts(TypedDict, total=False):
    """A job's cost facts (the 'cost' of poll_status.py once the job ended, and of teardown.py ..."""
    submitted_at: str | None
    running_at: str | None
    ended_at: str | None
    instance_deleted_at: str | None
    submit_to_running_s: float | None
    image_pull_s: float | None
    run_s: float | None
    idle_billed_s: float | None
    billed_s: float | None
    owned: bool
    still_billing: bool | None
    instance_type: str | None
    price_per_hour_usd: float | None
    price_source: str | None
    price_note: str | None
    instance_stopped_at: str | None
    billed_parts: CostFactsBilledParts
    estimated_cost_usd: float | None
    stalled_s: float | None
    clock_skew_s: float | None


__all__ = ['CostFactsBilledParts', 'CostFacts']
