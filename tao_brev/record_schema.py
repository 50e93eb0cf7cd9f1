"""The record schema (``references/schemas/job_record.schema.json``) checked by jsonschema at every
read of a record: what makes a JSON object no record of schema_version 1, named by field, never by value.

Two words are read as the bank's tool reads them, not as Python's ``re.search`` would: a pattern's
``$`` ends the text (no newline after it), and ``date-time`` is RFC 3339's form (the regex below).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Mapping

from .errors import TaoBrevError
from .vocabulary import JobState

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "references" / "schemas" / "job_record.schema.json"
# What a reader requires; the schema's other required fields may be missing (an older writer).
REQUIRED = ("schema_version", "id", "platform", "image", "network_arch", "action",
            "results_dir", "storage_tier", "transitions")
DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")
# In the schema for the answers of list and show (``results_now``), never in a record file.
VIEW_ONLY = frozenset({"instance_copy"})
# The bank's id pattern; also the path-traversal guard (no '/', no leading '.').
ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# What each field must be, as a problem names it.
MUST_BE = {
    "schema_version": "1", "id": "a job id", "platform": "a kebab-case platform name",
    "backend_ref": "a string or null", "image": "a non-empty string", "network_arch": "a non-empty string",
    "action": "a non-empty string", "results_dir": "a non-empty string", "storage_tier": "A, B or C",
    "upload_excludes": "a list of strings", "submitted_at": "an ISO 8601 date-time",
    "transitions": "a non-empty list of {ts, state, message, source}",
    "terminal_state": "null or " + ", ".join(s.value for s in JobState if s.is_terminal()),
    "terminal_write_by": "agent, poller or backend-hook", "err_class": "ERR_INFRA or ERR_PROGRAM",
    "retry_of": "a job id", "parent_job": "a job id", "redacted": "true",
}


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not ID_RE.fullmatch(job_id) or len(job_id) > 200:
        raise TaoBrevError("BAD_JOB_ID", f"invalid job id: {job_id!r}")
    return job_id


@functools.lru_cache(maxsize=None)
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def _validator():
    import jsonschema   # the lazy boundary: a script that reads no record does not load it
    from jsonschema import validators

    def pattern(validator, patrn, instance, node):
        if validator.is_type(instance, "string") and not _anchored(patrn).search(instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    checker = jsonschema.FormatChecker(())
    checker.checks("date-time")(lambda value: not isinstance(value, str) or bool(DATE_TIME.fullmatch(value)))
    kind = validators.extend(jsonschema.Draft202012Validator, {"pattern": pattern})
    return kind(schema(), format_checker=checker)


@functools.lru_cache(maxsize=None)
def _anchored(patrn: str) -> re.Pattern:
    """``patrn`` with a final ``$`` that ends the text, as ECMA 262 reads it (``re``'s ``$`` also matches before a final newline)."""
    return re.compile(patrn[:-1] + r"\Z" if patrn.endswith("$") and not patrn.endswith(r"\$") else patrn)


def problem(record: Mapping[str, object]) -> str | None:
    """What makes ``record`` (a JSON object) no record, or None: fields the schema does not have
    (``additionalProperties: false``), else the fields of a wrong type or value (schema order)."""
    known = schema()["properties"]
    unknown = sorted(str(k) for k in record if k not in known or k in VIEW_ONLY)
    if unknown:
        shown = ", ".join(k if ID_RE.fullmatch(k) and len(k) <= 40 else "(a field with an odd name)"
                          for k in unknown[:5])
        return f"fields the record schema does not have: {shown}"
    bad = {error.absolute_path[0] for error in _validator().iter_errors(record) if error.absolute_path}
    wrong = [f"{k} (must be {MUST_BE[k]})" for k in known if k in bad]
    return f"wrongly typed fields: {'; '.join(wrong)}" if wrong else None
