"""What the poll and the teardown verbs both read of one job: its instance, its results dir
on the instance, and the CANCELED that an interrupted teardown leaves behind."""

from __future__ import annotations

from ..docker_state import Observed
from ..vocabulary import JobState
from ..model import JobSidecar
from ..model.answer_types import RecordDocument
from ..model.sidecar_parts import Cancel


def job_instance(record: RecordDocument, sidecar: JobSidecar) -> str | None:
    """The instance of a job: the sidecar's, else the backend ref's ``<instance>/<id>``."""
    if sidecar.instance:
        return sidecar.instance
    ref = record.get("backend_ref") or ""
    return ref.split("/", 1)[0] if "/" in ref else None


def results_instance_dir(record: RecordDocument, sidecar: JobSidecar) -> str | None:
    """The job's results dir on the instance (the sidecar's, else a record's instance path)."""
    known = (sidecar.results or {}).get("instance_dir")
    if known:
        return known
    recorded = record.get("results_dir") or ""
    return recorded if recorded.startswith(("~/", "/")) else None


def settle_interrupted_cancel(observed: Observed, cancel: Cancel | None) -> None:
    """Turn ``observed`` into CANCELED (in place) when it is what a teardown that recorded
    its intent (sidecar ``cancel``) and was then interrupted leaves: the container removed
    (``gone == "container"``), or killed by ``docker rm -f`` before its removal (exit 137
    without ``OOMKilled``: SIGKILL, not the OOM killer). Anything else is the job's own state."""
    if not cancel or observed.state not in (JobState.UNKNOWN, JobState.ERROR):
        return
    killed = observed.state == JobState.ERROR and observed.exit_code == 137 and not observed.oom_killed
    if observed.gone != "container" and not killed:
        return
    what = "its container is gone" if observed.gone == "container" else "its container was killed (exit 137)"
    observed.state, observed.hint = JobState.CANCELED, None
    observed.message = (f"canceled: a teardown requested at {cancel.get('requested_at')} was interrupted before "
                        f"it closed the record; {what}")
