"""The project's vocabularies as enums with behaviour: a job's state (the TAO skill
bank's record format, ``references/schemas/job_record.schema.json``), transition
sources, launch states, storage tiers, error classes, the status lines TAO writes, and the
instance statuses brev reports.

Each member is a ``str`` (``JobState.COMPLETE == "COMPLETE"``), so JSON, records
and answers carry the bare word; code compares and branches on the members.
No imports but ``enum``, so ``tao_job_record.py --help`` lists the choices without
loading the record store.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A vocabulary word: formats and prints as its value on every Python (3.11
    changed ``format()`` of mixed-in enums)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(member.value for member in cls)

    @classmethod
    def parse(cls, word: object):
        """The member named by ``word``, or None (an unknown word, None, a non-string)."""
        try:
            return cls(word)
        except ValueError:
            return None


class JobState(Word):
    """A job's state in its record (tao-contract: the status vocabulary)."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETE = "COMPLETE"
    ERROR = "ERROR"
    CANCELED = "CANCELED"
    UNKNOWN = "UNKNOWN"

    def is_terminal(self) -> bool:
        """COMPLETE, ERROR and CANCELED end a job: its record never changes state again."""
        return self in (JobState.COMPLETE, JobState.ERROR, JobState.CANCELED)

    def is_settled(self) -> bool:
        """Terminal, or UNKNOWN: nothing more is learnt by waiting (the verbs stop polling)."""
        return self.is_terminal() or self is JobState.UNKNOWN

    def may_become(self, other: JobState) -> bool:
        """The record's rule (records.RecordStore.mark): a terminal state accepts only
        itself again (which fills an unset err_class/backend_ref); any other state may
        become any state."""
        return other is self if self.is_terminal() else True


class LaunchState(Word):
    """A launch's state in the job sidecar (``launch.state``): submit writes LAUNCHING before its one
    ``brev exec``, then LAUNCHED or REFUSED; ``verbs/reconcile`` settles a launch whose submit died
    (LAUNCHED, START_FAILED or NEVER_LAUNCHED)."""

    LAUNCHING = "launching"
    LAUNCHED = "launched"
    REFUSED = "refused"
    START_FAILED = "start_failed"
    NEVER_LAUNCHED = "never_launched"

    def never_ran(self) -> bool:
        """Refused, never launched or failed to start: the job wrote nothing (one answer from then on)."""
        return self in (LaunchState.REFUSED, LaunchState.NEVER_LAUNCHED, LaunchState.START_FAILED)


class Source(Word):
    """Who wrote a transition."""

    AGENT = "agent"
    POLLER = "poller"
    BACKEND_HOOK = "backend-hook"


class StorageTier(Word):
    """Where results go: A (S3-compatible object store), B (instance disk, copied
    down), C (instance disk only)."""

    A = "A"
    B = "B"
    C = "C"


class ErrClass(Word):
    """Why an ERROR happened: the infrastructure, or the program (spec, data, code)."""

    INFRA = "ERR_INFRA"
    PROGRAM = "ERR_PROGRAM"


class TaoStatus(Word):
    """The ``status`` of a line of TAO's status.json (nvidia_tao_core's status logger).
    TAO 7 writes FAILURE for every ERROR-level log call while training goes on, and
    ends a success with RUNNING plus "<Action> finished successfully." (SUCCESS only
    in older images): no single line's status is the job's end."""

    STARTED = "STARTED"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    FAILURE = "FAILURE"
    SKIPPED = "SKIPPED"


class InstanceStatus(Word):
    """An instance's ``status`` in ``brev ls --json``: brev-cli pkg/entity/entity.go's
    workspace statuses, and UNHEALTHY, which ls.go getWorkspaceDisplayStatus shows for a
    RUNNING instance whose health status is UNHEALTHY."""

    RUNNING = "RUNNING"
    STARTING = "STARTING"
    STOPPING = "STOPPING"
    DEPLOYING = "DEPLOYING"
    STOPPED = "STOPPED"
    DELETING = "DELETING"
    FAILURE = "FAILURE"
    UNHEALTHY = "UNHEALTHY"

    def is_broken(self) -> bool:
        """Failed, unhealthy or going away: no job can run there (preflight refuses it)."""
        return self in (InstanceStatus.FAILURE, InstanceStatus.UNHEALTHY, InstanceStatus.DELETING)


STATES = JobState.values()
TERMINAL_STATES = tuple(s.value for s in JobState if s.is_terminal())
SOURCES = Source.values()
STORAGE_TIERS = StorageTier.values()
ERR_CLASSES = ErrClass.values()
