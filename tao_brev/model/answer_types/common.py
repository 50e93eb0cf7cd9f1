"""The types of references/schemas/common.schema.json (made by dev/gen_answer_types.py:
do not edit; change the schema and run it again)."""

from __future__ import annotations

from typing import TypedDict


class ErrorObject(TypedDict, total=False):
    code: str
    message: str
    fix: str


class Hint(TypedDict, total=False):
    err_class: str | None
    reason: str
    advice: str
    evidence: list[str]
    code: str


class ResultsLinksItem(TypedDict, total=False):
    path: str
    target: str | None
    dangling: bool


class Checkpoint(TypedDict, total=False):
    """A checkpoint under a results dir"""
    path: str
    size: int
    sha256: str
    link: str | None
    archive: str


class Results(TypedDict, total=False):
    """Where a job's results live and, for kind s3, the upload and its verification (size + ..."""
    kind: str | None
    destination: str | None
    instance_dir: str | None
    uploaded: bool
    verified: bool
    files: int
    bytes: int
    excluded: int
    verified_at: str
    note: str
    missing: list[str]
    mismatched: list[str]
    unreadable: list[str]
    links: list[ResultsLinksItem]
    latest_checkpoint: Checkpoint | None
    error: ErrorObject
    upload_error: ErrorObject


class ResumeFrom(TypedDict, total=False):
    """submit.py --resume-from"""
    job_id: str
    source: str
    override_key: str
    container_dir: str
    container_path: str
    checkpoint: Checkpoint


class InputStaged(TypedDict, total=False):
    """A tier B/C input"""
    name: str
    source: str
    uri: str
    container_path: str
    files: int
    bytes: int
    uploaded: int
    skipped: int
    bytes_uploaded: int
    version: str


class InstanceStarted(TypedDict, total=False):
    """Present in any script's answer when brev started a STOPPED instance by itself to run a ..."""
    instances: list[str]
    billing: bool
    message: str
    fix: str


class LogsCut(TypedDict, total=False):
    """Present when the answer's logs are not the whole log (tao_brev/logcap.py)"""
    lines: int
    lines_dropped: int
    lines_cut: int
    bytes_cut: int
    line_bytes: int
    full_log: str | None


class AnswerCut(TypedDict, total=False):
    """Present when the whole answer would have exceeded its cap (64 KiB of JSON)"""
    bytes_before: int
    limit: int
    strings_cut: int
    items_dropped: int


__all__ = ['ErrorObject', 'Hint', 'ResultsLinksItem', 'Checkpoint', 'Results', 'ResumeFrom', 'InputStaged', 'InstanceStarted', 'LogsCut', 'AnswerCut']
