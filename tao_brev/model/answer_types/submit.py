"""The types of references/schemas/submit.schema.json (made by dev/gen_answer_types.py:
do not edit; change the schema and run it again)."""

from __future__ import annotations

from typing import TypedDict

from .common import AnswerCut, ErrorObject, Hint, InputStaged, InstanceStarted, Results, ResumeFrom


class SubmitAnswerSpecCheck(TypedDict, total=False):
    """the spec and overrides against TAO's schema of the image's version ..."""
    checked: bool
    schema: str | None
    reason: str
    left_out: list[str]


class SubmitAnswerFindingsItem(TypedDict, total=False):
    where: str
    key: str
    problem: str
    closest: str | None
    override: int | None


class SubmitAnswerPlanItem(TypedDict, total=False):
    step: str
    what: str
    command: str
    script: str
    gpu_overrides: list[str]
    lines: list[str]
    inputs: list[InputStaged]
    backend_ref: str


class SubmitAnswer(TypedDict, total=False):
    """scripts/submit.py answer"""
    instance_started: InstanceStarted
    next: str | None
    next_note: str
    answer_cut: AnswerCut
    ok: bool
    dry_run: bool
    instance_status: str | None
    instance_note: str
    job_id: str | None
    instance: str
    state: str | None
    backend_ref: str | None
    results_dir: str
    image: str
    container_id: str | None
    adopted: bool
    busy_job: str
    busy_eta_s: int | None
    reconciled: str
    message: str
    terminal_state: str | None
    hint: Hint
    closed_at: str
    warnings: list[str]
    spec_check: SubmitAnswerSpecCheck
    gpu_overrides: list[str]
    findings: list[SubmitAnswerFindingsItem]
    plan: list[SubmitAnswerPlanItem]
    storage_tier: str
    inputs: list[InputStaged]
    results: Results
    resume_from: ResumeFrom
    did_you_mean: dict[str, str]
    error: ErrorObject


__all__ = ['SubmitAnswerSpecCheck', 'SubmitAnswerFindingsItem', 'SubmitAnswerPlanItem', 'SubmitAnswer']
