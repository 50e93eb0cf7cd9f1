"""The bundle's state as types: each JSON document it keeps is a dataclass here, read from JSON in
one place (``from_json``) and written to JSON in one place (``to_json``); the JSON Schemas in
``references/schemas/`` say the same fields (tests/test_state_model.py keeps them agreeing)."""

from __future__ import annotations

from .base import JsonObject
from .record import JobRecord, Transition
from .sidecars import InstanceSidecar, JobSidecar

__all__ = ["InstanceSidecar", "JobRecord", "JobSidecar", "JsonObject", "Transition"]
