"""status and logs: read the job's state from the instance, in one round trip.

The record says what was submitted; what runs now is read from the backend:
``docker inspect --format '{{json .State}}' <id>`` (never the container's
environment) mapped by ``docker_state.from_inspect``, plus the last N log
lines when asked, and the last 200 lines of an exited container for the
failure hint - all sections of ONE ``brev exec``. A state that differs from
the record's last transition is marked with source ``poller``; a terminal
state is written once and never changes.

Several jobs on one instance are polled with one round trip for all of them
(:func:`poll_many`), instances concurrently.

A job whose results are routed to S3 has them uploaded and verified
(``results.finalize``: one more round trip, once) when a poll finds it
terminal; the answer's ``results`` says how that went. Once terminal, the
answer carries the job's ``cost`` facts (``cost.facts``; the price when already
known - a poll adds no ``brev ls`` for the instance type, teardown does); docker's
StartedAt / FinishedAt are noted in the sidecar by every poll that reads them.

An instance that a teardown deleted is not asked again (no round trip): the
job's answer comes from its record.

The rooms: ``probe`` (the remote sections and what they answer), ``observe`` (one
job's answer), ``wait`` (``--wait`` and its errors), ``all_jobs`` (``--all``).
"""

from ..job_facts import job_instance, results_instance_dir, settle_interrupted_cancel
from .all_jobs import observe_safely, poll_all, poll_many
from .observe import apply, observe, watch_fields
from .probe import CLASSIFY_TAIL_LINES, Probe, job_sections, read_job
from .wait import check_watch, failed_fix, poll, progress_note, timed_out

__all__ = ["CLASSIFY_TAIL_LINES", "Probe", "apply", "check_watch", "failed_fix", "job_instance", "job_sections",
           "observe", "observe_safely", "poll", "poll_all", "poll_many", "progress_note", "read_job",
           "results_instance_dir", "settle_interrupted_cancel", "timed_out", "watch_fields"]
