"""The sub-documents of the sidecars (``sidecars.JobSidecar`` / ``InstanceSidecar``): one TypedDict
per field (total=False), with the keys the code writes (a key may be absent: a sidecar of an older
version, or a part merged key by key over several updates). A part stored as an answer gives it
(``final_progress``: Progress; ``delete_pending``: OrphanDeletePending) uses the answer's type."""

from __future__ import annotations

from typing import Optional, TypedDict

from .answer_types import (Checkpoint, CostFacts, ErrorObject, Hint, OrphanDeletePending, PollAnswerAttemptsItemCause,
                           Progress, ResultsLinksItem, ResumeFrom, TeardownAnswerResultsSavedItem)

__all__ = ["Cancel", "ChainEntry", "CheckpointSync", "DeletePending", "EnvProof", "FinalProgress", "Intent",
           "JobCost", "JobResults", "LastEta", "Launch", "Recovery", "RecoveryPolicy", "ResumeFrom", "Teardown"]


class EnvProof(TypedDict, total=False):
    """``env_proof`` (secrets.proof): the MAC of the ``--env`` name list and each set value's digest."""
    alg: str
    names: str
    digests: dict[str, str]


class CheckpointSync(TypedDict, total=False):
    """``results.checkpoint_sync`` (verbs.checkpoint_sync): when, the verified checkpoint, the links beside it."""
    at: str
    latest_checkpoint: Checkpoint
    links: list[ResultsLinksItem]


class JobResults(TypedDict, total=False):
    """``results``: where they are (submit writes ``kind``, ``instance_dir``, ``destination``), their
    upload and verification (what an answer's ``Results`` summarizes, verbs.results.summary) and
    what only the sidecar keeps: the upload attempts, the copy saved at teardown, the checkpoint sync."""
    kind: str
    destination: Optional[str]   # None unless kind s3
    instance_dir: str
    uploaded: bool
    verified: bool
    files: int
    bytes: int
    excluded: int
    verified_at: str
    note: Optional[str]
    missing: list[str]
    mismatched: list[str]
    unreadable: list[str]
    links: list[ResultsLinksItem]
    latest_checkpoint: Optional[Checkpoint]
    error: Optional[ErrorObject]
    upload_error: Optional[ErrorObject]
    attempts: int
    checked_at: str
    saved: TeardownAnswerResultsSavedItem
    discarded_at: str
    checkpoint_sync: CheckpointSync


class Launch(TypedDict, total=False):
    """``launch``: its state (vocabulary.LaunchState's words) and the facts of the launch's end."""
    state: str
    pid: int
    started_at: str
    finished_at: str
    container_id: Optional[str]
    reconciled: bool
    error: ErrorObject
    hint: Optional[Hint]
    code: str
    instance_missing: bool


class RecoveryPolicy(TypedDict, total=False):
    """``--recover N [--fallback-instance NAME] [--budget-s S]`` (``recovery_policy``, the chain's
    ``recovery.policy``)."""
    attempts: int
    fallback_instance: Optional[str]
    budget_s: Optional[float]


class ChainEntry(TypedDict, total=False):
    """One attempt of the chain (``recovery.chain``): its job, number, the job it resumes, why it ended."""
    job_id: str
    attempt: int
    resume_from: Optional[str]
    by_hand: bool
    cause: PollAnswerAttemptsItemCause


class Intent(TypedDict, total=False):
    """A resubmit on its way (``recovery.intent``), or an attempt adopted (recovery_chain.append's)."""
    attempt: int
    after: str
    resume_from: str
    instance: str
    at: str
    argv: list[str]
    by_hand: bool


class Recovery(TypedDict, total=False):
    """``recovery`` of a chain's root: its attempts, the resubmit on its way (None: none), its policy."""
    chain: list[ChainEntry]
    intent: Optional[Intent]
    policy: RecoveryPolicy


FinalProgress = Progress   # ``final_progress``: the job's status.json read back at its end, as poll_status gives it


class LastEta(TypedDict, total=False):
    """``last_eta`` (eta_seen): a poll's ETA and when it saw it."""
    eta_s: int
    seen_at: str


class Cancel(TypedDict, total=False):
    """``cancel``: a teardown's cancel request."""
    requested_at: str
    by: str


class Teardown(TypedDict, total=False):
    """``teardown``: what teardown (or a submit's refusal) did."""
    at: str
    container_removed: bool
    record_closed: str
    closed_by: str


class JobCost(CostFacts, total=False):
    """``cost``: the cost facts last computed (cost.py) and what they are computed from: docker's
    StartedAt / FinishedAt, an explicit ``--price-per-hour``."""
    started_at: str
    finished_at: str
    price_flag_usd: float


DeletePending = OrphanDeletePending   # ``delete_pending``: the instance's delete asked for, not yet confirmed
