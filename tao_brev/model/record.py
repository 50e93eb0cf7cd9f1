"""The job record in the TAO skill bank's format (``references/schemas/job_record.schema.json``):
``records.RecordStore`` reads and writes it; this is its shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, cast

from ..vocabulary import ErrClass, JobState, Source, StorageTier
from .base import JsonObject

if TYPE_CHECKING:   # type hints only: the answer types cost ~10 ms to import, and a record needs none
    from .answer_types import RecordDocument


@dataclass
class Transition(JsonObject):
    """One entry of ``transitions``: when, which state, why, who wrote it."""

    ts: str
    state: JobState
    message: str
    source: Source

    def __post_init__(self) -> None:
        self.state, self.source = JobState(self.state), Source(self.source)


@dataclass
class JobRecord(JsonObject):
    """A job's record: what was submitted, where the results live, how it ended. Fields in the
    order this store writes a new record (``parent_job``, ``retry_of``, then what ``mark`` adds)."""

    schema_version: int
    id: str
    platform: str
    backend_ref: Optional[str]
    image: str
    network_arch: str
    action: str
    results_dir: str
    storage_tier: StorageTier
    upload_excludes: list[str] = field(default_factory=list)
    submitted_at: Optional[str] = None
    transitions: list[Transition] = field(default_factory=list)
    terminal_state: Optional[JobState] = None
    redacted: bool = True
    parent_job: Optional[str] = None
    retry_of: Optional[str] = None
    err_class: Optional[ErrClass] = None
    terminal_write_by: Optional[Source] = None

    KEEP_NULL = frozenset({"backend_ref", "terminal_state"})

    def __post_init__(self) -> None:
        self.storage_tier = StorageTier(self.storage_tier)
        self.transitions = [t if isinstance(t, Transition) else Transition.from_json(t) for t in self.transitions]
        for name, kind in (("terminal_state", JobState), ("err_class", ErrClass), ("terminal_write_by", Source)):
            if getattr(self, name) is not None:
                setattr(self, name, kind(getattr(self, name)))

    def to_json(self) -> RecordDocument:
        """The record document (its fields are the schema's: tests/test_state_model.py checks them)."""
        return cast("RecordDocument", super().to_json())

    @property
    def state(self) -> JobState:
        """The last transition's state (the record's view, not the backend's)."""
        return self.transitions[-1].state if self.transitions else JobState.UNKNOWN
