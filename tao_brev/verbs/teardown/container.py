"""The teardown's round trip: the container's last state read, its last log lines kept here,
the container removed, its results handed to the instance user and archived when asked; then
the record closed from that state."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TypedDict

from ... import cost, logcap, remote
from ...secrets import redact
from ...context import Context, warn
from ...docker_state import DockerState, after_instance_start, docker_error_code, from_inspect
from ...errors import TaoBrevError, TransportError
from ...records import is_terminal
from ...vocabulary import JobState, Source
from .. import keep
from .instance import forget_pending_delete
from ..job_facts import job_instance, settle_interrupted_cancel
from ...model import JobSidecar
from ...model.answer_types import TeardownAnswer
from ...model.answer_types import RecordDocument
from ...model.sidecar_parts import Cancel

SAVED_LOG_LINES = 500   # kept in $TAO_STATE_DIR/brev/logs/<id>.log when the container is removed
# `docker rm -f` of a container that is already gone: Docker CLI >= 20.10 prints this and exits 0,
# older CLIs exit 1 (docker/cli cli/command/container/rm.go): either way, already removed.
OTHERS = "others"   # the section listing the job containers left on the instance after the rm
NO_SUCH_CONTAINER = re.compile(r"No such container", re.IGNORECASE)


def _script(token: str, job_id: str, owner: tuple[str, str] | None, saves: Sequence[JobSidecar],
            others: bool = False) -> str:
    """The sections of the teardown's one exec (``state``, ``logs``, ``rm``, ``others``, ``own``, ``save:<id>``)."""
    parts = [remote.abandon_launch(job_id),   # a launch still on its way now refuses
             remote.discard_job_credentials(job_id),   # none outlives the job
             remote.section(token, "state", remote.inspect_state(job_id)),
             remote.section(token, "logs", logcap.remote_command(remote.logs_tail(job_id, SAVED_LOG_LINES), token,
                                                                 total_bytes=logcap.SAVED_LOG_BYTES)),
             remote.section(token, "rm", remote.remove_container(job_id))]
    if others:   # a stop or delete follows: which job containers (of any state dir) still run on it
        parts.append(remote.section(token, OTHERS, remote.list_job_containers()))
    if owner:
        parts.append(remote.section(token, "own", remote.own_results(*owner)))
    parts += keep.sections(token, list(saves))
    return "\n".join(parts)


class LastState(DockerState, total=False):
    """The removed container's last docker ``.State``; ``TaoInstanceStarted``: brev had to start the
    STOPPED instance to reach it (the stop killed the container)."""
    TaoInstanceStarted: bool


def observe_and_remove(ctx: Context, instance: str, job_id: str, owner: tuple[str, str] | None = None,
                       saves: Sequence[JobSidecar] = (),
                       others: bool = False) -> tuple[LastState | None, bool, dict[str, remote.Section]]:
    """(last docker .State or None, container was present, archive sections) in one round trip;
    the last SAVED_LOG_LINES log lines are kept locally (``poll_status --logs`` reads them).
    When brev had to start the STOPPED instance for it, the state carries
    ``"TaoInstanceStarted": true`` (the stop killed the container, see close_record).
    ``owner`` = (image, results instance dir): once the container is gone, its
    results are handed to the instance user (:func:`remote.own_results`); a
    failure there is reported on stderr, never a failed teardown. ``saves``: sidecars of jobs whose
    results exist only on the instance: each results dir is archived after the rm
    (``keep.sections``; their ``save:<job_id>`` sections are returned for ``keep.fetch``). ``others``: a stop
    or delete follows, so the job containers left on the instance are listed too (returned as ``others``)."""
    token = remote.new_token()
    # archiving a whole results dir can outlast the default exec budget (180 s)
    result = ctx.brev.exec(instance, _script(token, job_id, owner, saves, others), idempotent=True,
                           timeout=keep.ARCHIVE_TIMEOUT_S if saves else None)
    sections = remote.parse_sections(result.stdout, token)
    archived = {name: sec for name, sec in sections.items() if name.startswith("save:") or name == OTHERS}
    own = sections.get("own")
    if own is not None and own.exit_code != 0:
        warn(f"teardown {job_id}: could not hand the results to the instance user: {redact.tail(own.output, 300)}")
    if "state" not in sections or "rm" not in sections:
        raise TransportError("TRANSPORT_FAILED", f"incomplete answer from {instance} for teardown of {job_id}")
    if sections["rm"].exit_code != 0 and not NO_SUCH_CONTAINER.search(sections["rm"].output):
        raise TaoBrevError(docker_error_code(sections["rm"].output),
                           f"docker rm -f {job_id} failed: {redact.tail(sections['rm'].output, 400)}")
    logs = sections.get("logs")
    if logs is not None and logs.exit_code == 0 and logs.output.strip():   # `docker logs` dies with the container
        kept, _cut = logcap.bound(logs.output, token=token, total_bytes=logcap.SAVED_LOG_BYTES)
        ctx.sidecars.save_logs(job_id, (kept or "") + "\n")   # a text given: never None
    state_sec = sections["state"]
    if state_sec.exit_code != 0:
        return None, False, archived
    try:
        state = json.loads(state_sec.output.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None, True, archived
    return ({**state, "TaoInstanceStarted": True} if result.instance_started else state), True, archived


def remove_container(ctx: Context, instance: str, job_id: str, sidecar: JobSidecar, answer: TeardownAnswer,
                     image: str | None = None, saves: Sequence[JobSidecar] = (),
                     others: bool = False) -> tuple[LastState | None, bool, dict[str, remote.Section]]:
    """(the container's last docker .State or None, the instance is gone, archive sections).
    No round trip once a teardown deleted the instance: a rerun reaches nothing (and never a
    new instance of that name)."""
    if sidecar.instance_deleted_at:
        answer["warnings"].append(f"instance {instance} was deleted by teardown at "
                                  f"{sidecar.instance_deleted_at}; nothing left to remove")
        return None, True, {}
    try:
        results = sidecar.results or {}
        owner = (image, results["instance_dir"]) if image and results.get("instance_dir") else None
        docker_state, answer["container_removed"], archived = observe_and_remove(ctx, instance, job_id, owner,
                                                                                 saves, others)
    except TransportError:
        if ctx.brev.instance(instance) is not None:
            raise
        answer["warnings"].append(f"instance {instance} no longer exists; nothing to remove")
        forget_pending_delete(ctx, instance)
        return None, True, {}
    return docker_state, False, archived


def close_record(ctx: Context, record: RecordDocument, docker_state: LastState | None, why: str,
                 earlier_cancel: Cancel | None = None) -> RecordDocument:
    """Close a non-terminal record from the container's last state (``earlier_cancel``:
    the intent of an earlier teardown, interrupted, whose SIGKILL that state may show)."""
    if is_terminal(record.get("terminal_state")):
        return record
    observed = from_inspect(docker_state)
    if (docker_state or {}).get("TaoInstanceStarted"):
        observed = after_instance_start(observed, job_instance(record, ctx.sidecars.load(record["id"])) or "?")
    settle_interrupted_cancel(observed, earlier_cancel)
    if observed.state in (JobState.COMPLETE, JobState.ERROR):
        return ctx.records.mark(record["id"], observed.state, message=observed.message, source=Source.AGENT)
    return ctx.records.mark(record["id"], JobState.CANCELED, message=observed.message
                            if observed.state == JobState.CANCELED else why, source=Source.AGENT)


def note_times(ctx: Context, job_id: str, docker_state: LastState | None) -> None:
    """docker's StartedAt / FinishedAt of the removed container, for the cost facts."""
    if docker_state:
        seen = from_inspect(docker_state)
        cost.note_container_times(ctx, job_id, seen.started_at, seen.finished_at)
