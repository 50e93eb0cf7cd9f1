"""teardown (cancel): remove the job's container, close the record, and delete
an instance this bundle owns so it stops billing.

One round trip reads the container's last state and removes it
(``docker rm -f``). The record is then closed: a job that had already exited
keeps the state the backend reports (COMPLETE/ERROR); one still running (or
gone) becomes CANCELED; a terminal record never changes. The intent to cancel
is written (sidecar ``cancel``) before the round trip, so a teardown killed
half-way leaves a job that the next poll or teardown closes as CANCELED - not
as the exit 137 of ``docker rm -f``'s SIGKILL read as out-of-memory
(``job_facts.settle_interrupted_cancel``). A damaged (quarantined) record is
torn down too: its container, if the sidecar names an instance, is removed and
the record closed (``records.close_quarantined``).

Ownership is per instance: the bundle owns an instance when a job on it was
submitted with ``--ephemeral`` (:func:`owns`); a reused instance is deleted
only when asked by name (``--delete-instance``). An owned instance is deleted
(``brev delete``) by the teardown of its last job, unless ``--keep-instance``:
while another job on it is live it is kept (``instance_kept``, exit 0). Live
jobs (when asked by name) and results not verified in S3 refuse the delete
(INSTANCE_DELETE_REFUSED), unless ``--force``. The answer names exactly what
was deleted (``deleted``); every job on a deleted instance remembers it
(``instance_deleted_at``), so a rerun deletes nothing twice and never reaches
a new instance that took the name. The answer carries the job's ``cost`` facts.

Results routed to S3 are uploaded and verified (``results.finalize``, once)
right after the container is removed - they live in its bind-mounted results
dir on the instance, which ``docker rm`` does not touch, and a stopped job no
longer writes to them. Before ``brev delete``, the destination of every
verified job on the instance is LISTed again (``results.recheck``): an object
lost since its verification blocks the delete and names the file.

The rooms: ``job`` (the plan and the verb), ``container`` (the round trip that removes the
container, the record closed), ``instance`` (stop or delete, the delete remembered, results
copied home first), ``wait`` (``--wait --teardown``); the ownership of an instance and the
jobs on it are ``verbs/instance_jobs.py``'s.
"""

from ..instance_jobs import (created_by_bundle, instance_blockers, jobs_on, live_jobs, owns, unsaved_results,
                             unverified_results)
from .container import NO_SUCH_CONTAINER, SAVED_LOG_LINES, close_record
from .instance import DELETE_REFUSED_FIX, delete_and_record, delete_pending, forget_pending_delete
from .job import teardown
from .wait import wait_and_teardown

__all__ = ["DELETE_REFUSED_FIX", "NO_SUCH_CONTAINER", "SAVED_LOG_LINES", "close_record", "created_by_bundle",
           "delete_and_record",
           "delete_pending", "forget_pending_delete", "instance_blockers", "jobs_on", "live_jobs", "owns",
           "teardown", "unsaved_results", "unverified_results", "wait_and_teardown"]
