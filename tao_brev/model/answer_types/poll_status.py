"""The types of references/schemas/poll_status.schema.json (made by dev/gen_answer_types.py:
do not edit; change the schema and run it again)."""

from __future__ import annotations

from typing import TypedDict

from .common import AnswerCut, ErrorObject, Hint, InstanceStarted, LogsCut, Results
from .cost import CostFacts
from .teardown import TeardownAnswer


class PollAnswerBundleStartedInstance(TypedDict, total=False):
    """an ended job on the user's instance that this bundle started (preflight.py/submit.py ..."""
    instance: str | None
    instance_type: str | None
    stoppable: bool | None


class PollAnswerObserved(TypedDict, total=False):
    state: str
    message: str
    docker_status: str
    exit_code: int
    oom_killed: bool
    started_at: str
    finished_at: str
    docker_error: str
    hint: Hint
    gone: str


class PollAnswerWithheld(TypedDict, total=False):
    """the job's --env names whose value this shell cannot prove (unset, another value, no ..."""
    names: list[str]
    fields: list[str]
    fix: str


class PollAnswerQuarantinedItem(TypedDict, total=False):
    job_id: str
    instance: str | None
    path: str
    message: str
    fix: str


class Progress(TypedDict, total=False):
    """From the job's TAO status.json (references/progress.md); available=false with a note ..."""
    available: bool
    file: str
    note: str
    status: str | None
    last_tao_status: str | None
    message: str
    epoch: int | None
    num_epochs: int | None
    step: int
    max_step: int
    finished: bool
    interrupted: bool
    warnings: list[str]
    resumed_from: str
    percent: float
    eta_s: int | None
    eta_source: str
    eta_note: str
    time_per_epoch_s: float | None
    kpi: dict[str, float | str]
    updated_at: str | None
    since_update_s: int | None
    unreadable_lines: int


class Stall(TypedDict, total=False):
    stalled: bool
    idle_s: int | None
    threshold_s: float
    threshold_source: str
    last_progress_at: str | None
    last_status_at: str | None
    last_log_at: str | None
    last_log_line: str
    evidence: str
    advice: str


class MetricsEpochsItem(TypedDict, total=False):
    epoch: int
    kpi: dict[str, float | str]


class KpiPoint(TypedDict, total=False):
    """a KPI value and the epoch it was seen at (null"""
    value: float
    epoch: int


class MetricsBestValue(TypedDict, total=False):
    goal: str | None
    best: KpiPoint | None
    min: KpiPoint | None
    max: KpiPoint | None
    last: KpiPoint | None


class Metrics(TypedDict, total=False):
    available: bool
    file: str
    epochs_read: int
    truncated: bool
    epochs: list[MetricsEpochsItem]
    best: dict[str, MetricsBestValue]


class PollAnswerStallTeardownResults(TypedDict, total=False):
    """kind, destination, verified"""
    kind: str | None
    destination: str | None
    verified: bool


class PollAnswerStallTeardown(TypedDict, total=False):
    """--wait --teardown --stall-after"""
    state: str | None
    stalled_s: int | None
    stall_after_s: float
    logs_saved_to: str | None
    results: PollAnswerStallTeardownResults | None
    results_saved_to: str | None
    results_dir_on_instance: str | None
    results_destination: str | None


class PollAnswerAttemptsItemCause(TypedDict, total=False):
    """why this attempt was recovered"""
    kind: str
    reason: str | None


class PollAnswerAttemptsItemResumedFrom(TypedDict, total=False):
    job_id: str
    checkpoint: str


class PollAnswerAttemptsItem(TypedDict, total=False):
    job_id: str
    attempt: int
    instance: str | None
    state: str
    cause: PollAnswerAttemptsItemCause | None
    epoch: int | None
    num_epochs: int | None
    resumed_from: PollAnswerAttemptsItemResumedFrom
    error: str
    resume_from: str | None
    by_hand: bool


class PollAnswerRecovery(TypedDict, total=False):
    """--wait --recover N"""
    first_job: str
    attempts_used: int
    max_attempts: int | None
    fallback_instance: str | None
    budget_s: float | None
    stopped: str | None
    note: str


class PollAnswerChainCost(TypedDict, total=False):
    """billed seconds and US dollars summed over the chain (null when a part is unknown)"""
    billed_s: float | None
    estimated_cost_usd: float | None
    attempts: int


class PollAnswerJobsItem(TypedDict, total=False):
    """--all"""
    job_id: str
    ok: bool
    state: str | None
    instance_status: str
    progress: Progress
    stalled: bool
    stall: Stall
    final_kpi: dict[str, float | str]
    hint: Hint
    error: ErrorObject
    instance: str | None
    backend_ref: str | None
    results_dir: str
    message: str
    terminal_state: str | None
    observed: PollAnswerObserved
    logs: str
    logs_cut: LogsCut
    logs_source: str
    reconciled: str
    closed_at: str
    results: Results
    cost: CostFacts
    metrics: Metrics
    bundle_started_instance: PollAnswerBundleStartedInstance
    attempts: list[PollAnswerAttemptsItem]
    next: str | None
    next_note: str


class PollAnswer(TypedDict, total=False):
    """scripts/poll_status.py answer (one job, or --all)"""
    instance_started: InstanceStarted
    next: str | None
    next_note: str
    answer_cut: AnswerCut
    logs_cut: LogsCut
    ok: bool
    job_id: str
    instance: str | None
    bundle_started_instance: PollAnswerBundleStartedInstance
    instance_status: str
    state: str | None
    backend_ref: str | None
    results_dir: str
    message: str
    terminal_state: str | None
    observed: PollAnswerObserved
    hint: Hint
    logs: str
    withheld: PollAnswerWithheld
    logs_source: str
    polls: int
    waited_out: bool
    waited_s: float
    reconciled: str
    closed_at: str
    quarantined: list[PollAnswerQuarantinedItem]
    results: Results
    cost: CostFacts
    teardown: TeardownAnswer
    teardown_skipped: str
    progress: Progress
    stalled: bool
    stall: Stall
    metrics: Metrics
    final_kpi: dict[str, float | str]
    stalled_s: int
    stall_teardown: PollAnswerStallTeardown
    observed_before_teardown: PollAnswerObserved
    attempts: list[PollAnswerAttemptsItem]
    recovery: PollAnswerRecovery
    chain_cost: PollAnswerChainCost
    recovery_note: str
    jobs: list[PollAnswerJobsItem]
    did_you_mean: dict[str, str]
    error: ErrorObject


__all__ = ['PollAnswerBundleStartedInstance', 'PollAnswerObserved', 'PollAnswerWithheld', 'PollAnswerQuarantinedItem', 'Progress', 'Stall', 'MetricsEpochsItem', 'KpiPoint', 'MetricsBestValue', 'Metrics', 'PollAnswerStallTeardownResults', 'PollAnswerStallTeardown', 'PollAnswerAttemptsItemCause', 'PollAnswerAttemptsItemResumedFrom', 'PollAnswerAttemptsItem', 'PollAnswerRecovery', 'PollAnswerChainCost', 'PollAnswerJobsItem', 'PollAnswer']
