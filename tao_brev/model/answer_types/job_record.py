"""The types of references/schemas/job_record.schema.json (made by dev/gen_answer_types.py:
do not edit; change the schema and run it again)."""

from __future__ import annotations

from typing import TypedDict


class RecordDocumentTransitionsItem(TypedDict, total=False):
    ts: str
    state: str
    message: str
    source: str


class RecordDocumentInstanceCopy(TypedDict, total=False):
    """Never in the record file"""
    deleted_at: str
    instance: str | None
    path: str
    results: str


class RecordDocument(TypedDict, total=False):
    """TAO job record (TAO skill bank format, schema_version 1)"""
    schema_version: int
    id: str
    platform: str
    backend_ref: str | None
    image: str
    network_arch: str
    action: str
    results_dir: str
    storage_tier: str
    upload_excludes: list[str]
    submitted_at: str
    transitions: list[RecordDocumentTransitionsItem]
    terminal_state: str | None
    terminal_write_by: str
    err_class: str
    retry_of: str
    parent_job: str
    redacted: bool
    instance_copy: RecordDocumentInstanceCopy


__all__ = ['RecordDocumentTransitionsItem', 'RecordDocumentInstanceCopy', 'RecordDocument']
