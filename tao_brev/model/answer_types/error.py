"""The types of references/schemas/error.schema.json (made by dev/gen_answer_types.py:
do not edit; change the schema and run it again)."""

from __future__ import annotations

from typing import Any, TypedDict

from .common import AnswerCut, ErrorObject, InstanceStarted


class ErrorAnswer(TypedDict, total=False):
    """Any script's failure answer"""
    instance_started: InstanceStarted
    next: str | None
    next_note: str
    answer_cut: AnswerCut
    ok: bool
    did_you_mean: dict[str, str]
    error: ErrorObject


__all__ = ['ErrorAnswer']
