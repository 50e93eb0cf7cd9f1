"""teardown (cancel): remove the job's container, close the record, and delete
an ephemeral instance so it stops billing.

One round trip reads the container's last state and removes it
(``docker rm -f``). The record is then closed: a job that had already exited
keeps the state the backend reports (COMPLETE/ERROR); one still running (or
gone) becomes CANCELED; a terminal record never changes.

The instance is deleted (``brev delete``) only when asked (``--delete-instance``)
or when the sidecar says this job owns it (``submit --ephemeral``) and
``--keep-instance`` is not given - and never while another job on it is not
terminal or has results not yet verified in S3, unless ``--force``. The answer
names exactly what was deleted.

Results routed to S3 are uploaded and verified (``results.finalize``, once)
right after the container is removed - they live in its bind-mounted results
dir on the instance, which ``docker rm`` does not touch, and a stopped job no
longer writes to them. Before ``brev delete``, the destination of every
verified job on the instance is LISTed again (``results.recheck``): an object
lost since its verification blocks the delete and names the file.
"""

from __future__ import annotations

import json

from .. import remote
from ..cli import Context, say
from ..docker_state import after_instance_start, from_inspect
from ..errors import TaoBrevError, TransportError
from ..records import current_state, is_terminal, now_iso
from . import results as results_mod
from .status import job_instance

DELETE_REFUSED_FIX = ("Run teardown.py {job_id} --delete-instance again once the jobs ended: it uploads unverified "
                      "results again from the instance and verifies them; or pass --force to delete anyway and "
                      "lose what is listed.")


def _observe_and_remove(ctx: Context, instance: str, job_id: str) -> tuple[dict | None, bool]:
    """(last docker .State or None, container was present) in one round trip.
    When brev had to start the STOPPED instance for it, the state carries
    ``"TaoInstanceStarted": true`` (the stop killed the container, see close_record)."""
    token = remote.new_token()
    script = "\n".join([remote.abandon_launch(job_id),   # a launch still on its way now refuses
                        remote.section(token, "state", remote.inspect_state(job_id)),
                        remote.section(token, "rm", remote.remove_container(job_id))])
    result = ctx.brev.exec(instance, script, idempotent=True)
    sections = remote.parse_sections(result.stdout, token)
    if "state" not in sections or "rm" not in sections:
        raise TransportError("TRANSPORT_FAILED", f"incomplete answer from {instance} for teardown of {job_id}")
    if sections["rm"].exit_code != 0:
        from ..docker_state import docker_error_code

        raise TaoBrevError(docker_error_code(sections["rm"].output),
                           f"docker rm -f {job_id} failed: {sections['rm'].output.strip()[-400:]}")
    state_sec = sections["state"]
    if state_sec.exit_code != 0:
        return None, False
    try:
        state = json.loads(state_sec.output.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        return None, True
    return ({**state, "TaoInstanceStarted": True} if result.instance_started else state), True


def close_record(ctx: Context, record: dict, docker_state: dict | None, why: str) -> dict:
    """Close a non-terminal record from the container's last state."""
    if is_terminal(record.get("terminal_state")):
        return record
    observed = from_inspect(docker_state)
    if (docker_state or {}).get("TaoInstanceStarted"):
        observed = after_instance_start(observed, job_instance(record, ctx.sidecars.load(record["id"])) or "?")
    if observed.state in ("COMPLETE", "ERROR"):
        return ctx.records.mark(record["id"], observed.state, message=observed.message, source="agent")
    return ctx.records.mark(record["id"], "CANCELED", message=why, source="agent")


def instance_blockers(ctx: Context, instance: str, except_job: str) -> list[str]:
    """Why ``instance`` must not be deleted: live jobs and unverified results on it."""
    blockers = []
    for side in ctx.sidecars.all():
        job_id = side.get("job_id")
        if side.get("instance") != instance or not job_id:
            continue
        try:
            record = ctx.records.load(job_id)
        except TaoBrevError:
            continue
        if job_id != except_job and not is_terminal(record.get("terminal_state")):
            blockers.append(f"job {job_id} on {instance} is {current_state(record)}")
        results = side.get("results") or {}
        if results.get("kind") == "s3" and not results.get("verified"):
            blockers.append(f"job {job_id}: results not verified in {results.get('destination')}: "
                            + results_mod.describe_loss(results))
    return blockers


def _finalize_results(ctx: Context, job_id: str, sidecar: dict, instance_gone: bool, answer: dict) -> None:
    """Upload and verify S3-routed results (after the rm: the job no longer writes); ``answer["results"]``."""
    if not sidecar.get("results"):
        return
    if not instance_gone:
        answer["results"] = results_mod.finalize(ctx, job_id)
        return
    answer["results"] = results_mod.summary(sidecar["results"])
    if answer["results"].get("kind") == "s3" and not answer["results"].get("verified"):
        answer["warnings"].append(f"results of {job_id} were not verified in S3 before {sidecar.get('instance')} "
                                  "was deleted: what was not uploaded is lost")


def teardown(ctx: Context, job_id: str, delete_instance: bool | None = None, force: bool = False) -> tuple[dict, int]:
    record = ctx.records.load(job_id)
    sidecar = ctx.sidecars.load(job_id)
    instance = job_instance(record, sidecar)
    answer = {"job_id": job_id, "instance": instance, "backend_ref": record.get("backend_ref"),
              "results_dir": record["results_dir"], "container_removed": False,
              "instance_deleted": False, "deleted": [], "warnings": []}
    if instance is None:
        record = close_record(ctx, record, None, "canceled before launch (no instance recorded)")
        return {"ok": True, **answer, "state": record.get("terminal_state")}, 0

    instance_gone = False
    try:
        docker_state, present = _observe_and_remove(ctx, instance, job_id)
        answer["container_removed"] = present
    except TransportError:
        entry = ctx.brev.instance(instance)
        if entry is not None:
            raise
        docker_state, present = None, False
        answer["warnings"].append(f"instance {instance} no longer exists; nothing to remove")
        delete_instance, instance_gone = False, True
    record = close_record(ctx, record, docker_state, "canceled by teardown" if present
                          else "container not found at teardown")
    ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": present})
    answer["state"] = record.get("terminal_state")
    say(f"teardown {job_id}: container {'removed' if present else 'absent'}; record {answer['state']}")
    _finalize_results(ctx, job_id, sidecar, instance_gone, answer)

    wants_delete = delete_instance is True or (delete_instance is None and bool(sidecar.get("ephemeral")))
    results = sidecar.get("results") or {}
    if results.get("kind") in ("local", "ephemeral") and wants_delete:
        answer["warnings"].append(f"results of {job_id} live only on {instance} ({results.get('instance_dir')}); "
                                  "deleting the instance deletes them")
    if not wants_delete:
        return {"ok": True, **answer}, 0
    blockers = results_mod.recheck_instance(ctx, instance)   # a LIST per verified job: nothing lost since?
    if "results" in answer:
        answer["results"] = results_mod.summary(ctx.sidecars.load(job_id)["results"])
    blockers += instance_blockers(ctx, instance, job_id)
    if blockers and not force:
        err = TaoBrevError("INSTANCE_DELETE_REFUSED", f"not deleting {instance}: " + "; ".join(blockers),
                           DELETE_REFUSED_FIX.format(job_id=job_id))
        return {"ok": False, **answer, "blockers": blockers, "error": err.to_json()}, 1
    ctx.brev.delete(instance)
    ctx.sidecars.update(job_id, instance_deleted_at=now_iso())
    answer.update(instance_deleted=True, deleted=[instance], forced=bool(blockers))
    return {"ok": True, **answer}, 0
