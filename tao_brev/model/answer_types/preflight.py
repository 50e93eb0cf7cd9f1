"""The types of references/schemas/preflight.schema.json (made by dev/gen_answer_types.py:
do not edit; change the schema and run it again)."""

from __future__ import annotations

from typing import Any, TypedDict

from .common import AnswerCut, ErrorObject, InstanceStarted


class Check(TypedDict, total=False):
    name: str
    ok: bool
    detail: str
    fix: str | None
    elapsed_s: float
    code: str
    warning: bool
    data: dict[str, Any]


class PreflightAnswerRoundTrips(TypedDict, total=False):
    probe: int
    checks: int
    pull: int
    gpu_smoke: int
    copy: int


class PreflightAnswer(TypedDict, total=False):
    """scripts/preflight.py answer"""
    instance_started: InstanceStarted
    next: str | None
    next_note: str
    answer_cut: AnswerCut
    ok: bool
    instance: str
    image: str | None
    checks: list[Check]
    warnings: list[str]
    exec_calls: int
    round_trips: PreflightAnswerRoundTrips
    brev_logins: int
    did_you_mean: dict[str, str]
    error: ErrorObject


__all__ = ['Check', 'PreflightAnswerRoundTrips', 'PreflightAnswer']
