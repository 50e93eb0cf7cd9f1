"""The types of references/schemas/teardown.schema.json (made by dev/gen_answer_types.py:
do not edit; change the schema and run it again)."""

from __future__ import annotations

from typing import TypedDict

from .common import AnswerCut, ErrorObject, InstanceStarted, Results
from .cost import CostFacts


class TeardownAnswerBundleStartedInstance(TypedDict, total=False):
    """the job's instance (the user's, kept) was started by this bundle ..."""
    instance: str | None
    instance_type: str | None
    stoppable: bool | None


class TeardownAnswerResultsSavedItem(TypedDict, total=False):
    job_id: str
    path: str | None
    sha256: str | None
    bytes: int
    at: str
    note: str
    names_as_digests: int


class StopFacts(TypedDict, total=False):
    """--stop-instance / --orphans --stop"""
    stopped: bool
    stoppable: bool | None
    still_billing: bool
    why: str
    stopped_at: str
    note: str


class OrphanDeletePending(TypedDict, total=False):
    """a brev delete of this instance failed and no later one succeeded"""
    since: str
    last_attempt_at: str
    error: str
    message: str
    manual_command: str


class Orphan(TypedDict, total=False):
    """--orphans"""
    instance: str
    id: str | None
    status: str | None
    instance_type: str | None
    ours: bool
    owned: bool
    jobs: list[str]
    reason: str
    idle_since: str | None
    idle_s: float | None
    price_per_hour_usd: float | None
    price_source: str | None
    price_note: str | None
    estimated_idle_cost_usd: float | None
    stop: StopFacts
    blockers: list[str]
    advice: str
    results_saved: list[TeardownAnswerResultsSavedItem]
    deleted: bool
    delete_pending: OrphanDeletePending
    error: ErrorObject


class TeardownAnswerKeptItem(TypedDict, total=False):
    instance: str
    reason: str
    bills: str


class TeardownAnswer(TypedDict, total=False):
    """scripts/teardown.py answer (JOB_ID, or --orphans)"""
    instance_started: InstanceStarted
    next: str | None
    next_note: str
    answer_cut: AnswerCut
    ok: bool
    job_id: str
    instance: str | None
    bundle_started_instance: TeardownAnswerBundleStartedInstance
    instance_status: str
    state: str | None
    backend_ref: str | None
    results_dir: str
    message: str
    container_removed: bool
    instance_deleted: bool
    deleted: list[str]
    forced: bool
    warnings: list[str]
    blockers: list[str]
    unknown_containers: list[str]
    force: str
    why: str
    did_you_mean: dict[str, str]
    instance_kept: str
    cleanup_pending: bool
    still_billing: bool
    manual_command: str
    results: Results
    results_saved_to: str | None
    results_saved: list[TeardownAnswerResultsSavedItem]
    results_discarded: list[str]
    cost: CostFacts
    instance_stopped: bool
    stop: StopFacts
    stopped: list[str]
    orphans: list[Orphan]
    kept: list[TeardownAnswerKeptItem]
    error: ErrorObject


__all__ = ['TeardownAnswerBundleStartedInstance', 'TeardownAnswerResultsSavedItem', 'StopFacts', 'OrphanDeletePending', 'Orphan', 'TeardownAnswerKeptItem', 'TeardownAnswer']
