"""Brev-specific state beside the bank's record (``sidecar.SidecarStore`` reads and writes them):
the job sidecar ``$TAO_STATE_DIR/brev/jobs/<id>.json`` and the instance sidecar
``brev/instances/<name>.json`` (``references/schemas/{job,instance}_sidecar.schema.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..vocabulary import LaunchState
from .base import JsonObject
from .sidecar_parts import (Cancel, DeletePending, EnvProof, FinalProgress, JobCost, JobResults, LastEta, Launch,
                            Recovery, RecoveryPolicy, ResumeFrom, Teardown)


@dataclass
class JobSidecar(JsonObject):
    """What only this platform keeps of a job. The sub-documents (``launch``, ``results``, ``cost``,
    ``teardown``, ``cancel``, ``recovery``, ...) are objects merged key by key on update."""

    job_id: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    instance: Optional[str] = None              # the brev instance the job runs on
    ephemeral: Optional[bool] = None            # the instance is the job's own (deleted at teardown)
    env_names: Optional[list[str]] = None       # the job's --env names (never their values)
    env_proof: Optional[EnvProof] = None        # secrets.proof: digests of the --env values
    results: Optional[JobResults] = None        # where the results are, their sync to the destination
    inputs: Optional[list] = None               # the inputs staged through S3 (tiers B/C)
    launch: Optional[Launch] = None             # the launch's state: launching, launched, refused, ...
    submit_argv: Optional[list[str]] = None     # the submit's words (resume advice repeats them)
    resume_from: Optional[ResumeFrom] = None    # the checkpoint the job resumed from
    recovery_policy: Optional[RecoveryPolicy] = None   # submit --recover
    recovery: Optional[Recovery] = None         # a recovery chain's root: chain, intent, policy
    recovery_root: Optional[str] = None         # an attempt: the chain's root job
    attempt: Optional[int] = None
    previous_attempt: Optional[str] = None
    final_progress: Optional[FinalProgress] = None   # the job's status.json read back at its end
    last_eta: Optional[LastEta] = None          # the last poll's ETA of the running job: eta_s, seen_at (eta_seen)
    cancel: Optional[Cancel] = None             # a teardown's cancel request
    teardown: Optional[Teardown] = None         # what teardown did
    cost: Optional[JobCost] = None              # cost facts (cost.py)
    delete_pending: Optional[DeletePending] = None   # the instance's delete not yet confirmed
    instance_deleted_at: Optional[str] = None
    instance_stopped_at: Optional[str] = None
    extra: dict = field(default_factory=dict, metadata={"json": False})   # keys of another version, kept

    def __bool__(self) -> bool:   # an empty sidecar (none written: a bank-made record) is falsy, like {}
        return bool(self.to_json())

    @property
    def never_ran(self) -> bool:
        """The job never ran: its launch was refused, never happened, or docker could not start it
        (it wrote nothing and bills nothing)."""
        state = (self.launch or {}).get("state")
        return state in LaunchState.values() and LaunchState(state).never_ran()


@dataclass
class InstanceSidecar(JsonObject):
    """What the bundle remembers of an instance across runs."""

    updated_at: Optional[str] = None
    exec_ready_at: Optional[str] = None         # last proven exec-ready (later execs get the short timeout)
    delete_pending: Optional[DeletePending] = None   # a delete asked for and not yet confirmed
    deleted_at: Optional[str] = None
    stopped_at: Optional[str] = None
    last_pull_s: Optional[float] = None
    last_pull_image: Optional[str] = None
    last_pull_at: Optional[str] = None
    last_start_s: Optional[float] = None
    last_start_at: Optional[str] = None
    instance_type: Optional[str] = None         # brev ls's type, seen by preflight / submit (prices every answer)
    extra: dict = field(default_factory=dict, metadata={"json": False})

    def __bool__(self) -> bool:
        return bool(self.to_json())
