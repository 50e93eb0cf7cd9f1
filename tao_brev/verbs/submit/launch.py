"""submit's launch, once the guards passed: the instance running, the inputs uploaded, the
record opened (PENDING, its sidecar naming the instance and the launch in progress), the
credentials copied (0600 files, ``credentials.push``), then ONE ``brev exec`` of the launch
script, never blindly repeated; its answer (:mod:`.outcome`) marks the record RUNNING, or
closes it as never launched.

An ambiguous launch (the transport failed, so the container may or may not exist) is
settled by ``reconcile.pending_launch``: adopt the container named after the job id, mark
ERROR when there is none, or leave the record PENDING for the next ``poll_status.py``.
"""

from __future__ import annotations

import os

from ... import cost, credentials, eta_seen, nextstep, resume, resume_advice, tao_gpus
from ...context import Context, deferred_interrupts, note_job, note_state, say
from ...errors import CODES, TaoBrevError, TransportError
from ...model.answer_types import ErrorObject, Hint, SubmitAnswer
from ...model.answer_types import RecordDocument
from ...records import now_iso
from ...secrets import proof as env_proof
from ...transport import FIRST_EXEC_TIMEOUT_S
from ...vocabulary import ErrClass, InstanceStatus, JobState, LaunchState, Source
from .. import reconcile, recovery_chain
from ..preflight import PreflightRequest, settle_instance
from .outcome import EtaLeft, LaunchOutcome, parse
from .plan import Plan, SubmitRequest, launch_parts, script

STAGE_TIMEOUT_S = 3600.0     # a launch round trip that first copies the inputs onto the instance

# refusals decided by the submit script's checks BEFORE `docker run` (remote.submit_script): nothing was
# created on the instance, so the refusal closes the job itself (no teardown is left to do)
# (outcome.py's rules: every code they give; the launch outcome's ``before_run`` is the fact used)
REFUSED_BEFORE_RUN = ("INPUT_NOT_FOUND", "IMAGE_NOT_PULLED", "GPUS_BUSY", "DOCKER_NOT_FOUND", "SPEC_NOT_WRITTEN",
                      "DISK_FULL", "INPUT_STAGING_FAILED", "SPEC_PATH_MISSING", "RESUME_CHECKPOINT_MISSING",
                      "GPU_NOT_FOUND", "GPU_DRIVER_NOT_LOADED", "DOCKER_DAEMON_DOWN")
# the caller's own input was wrong: retrying the same call cannot help (the TAO bank's ERR_PROGRAM), never ERR_INFRA
# (a wrong path, no preflight --pull, GPUs the caller's other job holds); DOCKER_NOT_FOUND, DISK_FULL, ...: the instance's
USER_ERRORS = ("INPUT_NOT_FOUND", "IMAGE_NOT_PULLED", "GPUS_BUSY", "SPEC_PATH_MISSING", "RESUME_CHECKPOINT_MISSING")


def prepare(ctx: Context, req: SubmitRequest, plan: Plan) -> env_proof.EnvProof:
    """Everything before the record opens: brev found, the instance running, the inputs in S3
    (a failed upload leaves nothing behind). Returns the ``--env`` values' proof (``env_proof``)."""
    if plan.stage:
        plan.stage.warm()
    ctx.brev.path()       # BREV_NOT_FOUND before anything is recorded
    instance_running(ctx, req)   # before the first exec: brev exec would start a STOPPED instance
    if plan.stage:
        plan.stage.prepare()
    plan.proved_env, values = proved_env(ctx, req, plan)
    return env_proof.proof(ctx.state_root, values, plan.proved_env)   # digests, kept: later verbs prove values


def proved_env(ctx: Context, req: SubmitRequest, plan: Plan) -> tuple[list[str], dict[str, str]]:
    """(the sidecar's ``env_names``, their values): the ``--env`` names and the credentials the
    bundle hands the job's container itself (the stage's); what a later verb must prove."""
    given = {n: v for n, v in (plan.stage.job_credentials() if plan.stage else {}).items()
             if ctx.env.get(n) == v}   # proved under the name this shell holds it by (the legacy aliases repeat it)
    names = list(req.env_names) + [n for n in given if n not in req.env_names]
    return names, {**given, **{n: ctx.env[n] for n in req.env_names if ctx.env.get(n)}}


def instance_running(ctx: Context, req: SubmitRequest) -> None:
    """Know the instance's status (``brev ls --json``) before the first exec: brev
    exec would start a STOPPED instance by itself (billing resumes). STOPPED is
    refused (INSTANCE_NOT_RUNNING) unless ``--start``, exactly like
    preflight.py; a starting instance is waited for; a broken one is refused."""
    entry = ctx.brev.instance(req.instance)
    cost.note_instance_type(ctx, req.instance, entry)   # every later answer of the job is priced from it
    if entry is not None and str(entry.get("status") or "").upper() == InstanceStatus.RUNNING:
        return
    try:
        settle_instance(ctx, PreflightRequest(instance=req.instance, start=req.start), entry,
                        ctx.clock() + FIRST_EXEC_TIMEOUT_S)
    except TaoBrevError as exc:
        exc.details.pop("entry", None)
        if exc.code == "INSTANCE_NOT_RUNNING" and InstanceStatus.STOPPED in exc.message:
            exc.message = f"{req.instance} is STOPPED: nothing was recorded or launched"
            exc.fix = (f"Start it (billing resumes; or run brev start {req.instance} yourself first) and launch "
                       f"in one step: {req.rerun(add=('--start',))}")
        raise


def dry_run_status(ctx: Context, req: SubmitRequest) -> SubmitAnswer:
    """What a dry run adds about the instance (one ``brev ls --json``, read only): ``instance_status``
    (null when brev could not say) and, when the submit would be refused or would start the instance,
    ``instance_note`` (also a warning). A STOPPED instance without ``--start``: the submit that works
    is the one with ``--start`` (the INSTANCE_NOT_RUNNING fix of :func:`instance_running`)."""
    try:
        entry = ctx.brev.instance(req.instance)
    except TaoBrevError as exc:
        return {"instance_status": None, "instance_note": f"the status of {req.instance} was not read "
                f"({exc.code}: {exc.message}); the submit reads it first"}
    if entry is None:
        return {"instance_status": None, "instance_note": f"brev ls --json does not list {req.instance}: the "
                "submit would be refused (UNKNOWN_INSTANCE)"}
    status = str(entry.get("status") or "").upper() or None
    if status == InstanceStatus.STOPPED and not req.start:
        note = (f"{req.instance} is STOPPED: this submit would be refused (INSTANCE_NOT_RUNNING); with --start "
                "it starts the instance (billing resumes) and launches (next: that submit)")
    elif status == InstanceStatus.STOPPED:
        note = f"{req.instance} is STOPPED: --start starts it (billing resumes), then the launch follows"
    else:
        return {"instance_status": status}
    return {"instance_status": status, "instance_note": note}


def open_record(ctx: Context, req: SubmitRequest, plan: Plan, proof: env_proof.EnvProof) -> tuple[RecordDocument, SubmitAnswer]:
    """Mint the job id (PENDING) and write its sidecar; returns (record, the answer so far)."""
    routing, stage, resumed = plan.routing, plan.stage, plan.resumed
    parent = req.retry_of or req.resume_from   # a later attempt of parent's chain, chained as it opens
    with deferred_interrupts(), recovery_chain.joining(ctx, parent) as join:
        # the record, its sidecar (the instance: a recovery continues from it) and the note that names it
        # in every answer appear together: a SIGTERM between them left a chained attempt with no instance
        record = ctx.records.open(image=plan.image, network_arch=req.network_arch, action=req.action,
                                  storage_tier=req.storage_tier, results_dir=None,
                                  results_root=routing.record_root, upload_excludes=req.upload_excludes,
                                  retry_of=parent)
        job_id = record["id"]
        join(job_id)
        ctx.sidecars.update(job_id, instance=req.instance, ephemeral=req.ephemeral, env_names=plan.proved_env,
                            env_proof=proof,
                            results={"instance_dir": routing.instance_dir(job_id), "kind": routing.kind,
                                     "destination": routing.destination(job_id)},
                            inputs=stage.answer()["inputs"] if stage else [],
                            launch={"state": LaunchState.LAUNCHING, "pid": os.getpid(), "started_at": now_iso()},
                            **({"submit_argv": resume_advice.resubmit_words(req.argv)} if req.argv is not None
                               else {}),
                            **({"resume_from": resumed.to_json()} if resumed else {}),
                            **({"recovery_policy": req.recover} if req.recover else {}))
        note_job(job_id, interrupted_fix=interrupted_fix(job_id))
        note_state(JobState.PENDING)
    cost.note_submit(ctx, job_id, req.price_per_hour)
    answer: SubmitAnswer = {"job_id": job_id, "instance": req.instance, "backend_ref": None, "image": plan.image,
              "results_dir": record["results_dir"], "storage_tier": req.storage_tier,
              **(stage.answer() if stage else {}),
              "results": {"kind": routing.kind, "destination": routing.destination(job_id),
                          "instance_dir": routing.instance_dir(job_id)},
              "spec_check": plan.checked.to_json(), "gpu_overrides": plan.gpu_plan.to_json()["overrides"],
              **({"resume_from": resumed.to_json()} if resumed else {}), "warnings": plan.warnings}
    say(f"submit: record {job_id} opened (PENDING); launching on {req.instance}")
    return record, answer


def push_credentials(ctx: Context, req: SubmitRequest, plan: Plan,
                     answer: SubmitAnswer) -> tuple[str | None, str | None]:
    """Copy the credential files (the --env values; tiers B/C: the S3 settings; --resume-from's
    copies). Returns (the job container's env file, the carrier's); a failure closes the record."""
    job_id, stage = _job_of(answer), plan.stage
    env_file: str | None = None
    carrier_file: str | None = None
    try:
        if stage:
            env_file, carrier_file = stage.push_credentials(ctx, req.instance, job_id, plan.secret_values,
                                                            plan.routing.destination(job_id))
        elif plan.secret_values:
            env_file = credentials.push(ctx.brev, req.instance, job_id,
                                        credentials.env_file_text(plan.secret_values)).path
        carrier_file = resume.push(ctx, plan.resumed, req.instance, job_id, carrier_file)   # --resume-from's copies
    except TaoBrevError as exc:   # nothing was launched: the record is closed, the answer names it
        fix = f"{exc.fix} Then submit again with --retry-of {job_id}; nothing runs under {job_id}."
        mark_never_launched(ctx, job_id, f"credential copy failed: {exc.message}", exc.code, fix, before_run=True)
        _say_refused(job_id, req.instance, exc.code, "copying the credentials failed")
        raise TaoBrevError(exc.code, f"submit of {job_id}: copying the credentials to {req.instance} failed, "
                           f"nothing was launched (the record is closed as ERROR): {exc.message}", fix,
                           answer={**answer, "state": JobState.ERROR, "backend_ref": None}) from None
    except KeyboardInterrupt:
        raise _interrupted(answer) from None
    return env_file, carrier_file


def run_once(ctx: Context, req: SubmitRequest, plan: Plan, record: RecordDocument, answer: SubmitAnswer,
             env_file: str | None, carrier_file: str | None) -> tuple[SubmitAnswer, int]:
    """The one launch round trip and what its answer means: (answer, exit code), or TaoBrevError."""
    job_id = record["id"]
    docker_run, checks = launch_parts(req, plan, job_id, env_file, carrier_file, ctx.env)
    try:
        result = ctx.brev.exec(req.instance, script(docker_run, plan.spec_text, checks),
                               timeout=STAGE_TIMEOUT_S if plan.stage else None)
    except TransportError as exc:
        say(f"submit: launch of {job_id} is ambiguous ({exc.message}); asking the instance")
        settled = reconcile.pending_launch(ctx, record, req.instance, source=Source.AGENT, cause=exc)
        return {**answer, **settled["answer"]}, settled["exit_code"]
    except TaoBrevError as exc:   # e.g. BREV_NOT_LOGGED_IN: the record stays PENDING, poll_status reconciles it
        exc.details.setdefault("answer", {**answer, "state": JobState.PENDING})
        raise
    except KeyboardInterrupt:     # Ctrl-C / SIGTERM (cli.run): the launch may go on without us
        raise _interrupted(answer) from None
    found = parse(result, req, job_id, plan.image, plan.named, plan.resumed, eta_of=lambda name: _eta_left(ctx, name))
    if not found.ok:
        assert found.code is not None, "a refused launch names its code"
        mark_never_launched(ctx, job_id, found.why, found.code, found.fix, before_run=found.before_run)
        _say_refused(job_id, req.instance, found.code, found.why if found.before_run else None)
        raise TaoBrevError(found.code, f"submit refused: {found.why}", found.fix,
                           answer={**answer, "state": JobState.ERROR, "backend_ref": None, **(found.fields or {})})
    if found.failed_start is not None:   # brev's own retry found the container a first run created, not started
        settled = reconcile.start_failed(ctx, job_id, req.instance, Source.AGENT, found.failed_start)
        return {**answer, **settled["answer"]}, settled["exit_code"]
    return _launched(ctx, req, answer, found), 0


def _say_refused(job_id: str, instance: str, code: str | None, why: str | None) -> None:
    """stderr's answer to its own "launching" line: the launch was refused (``why``: before ``docker run``,
    so nothing was launched and the record is closed; None: docker run itself failed)."""
    if why is not None:
        say(f"submit: {job_id} refused on {instance} ({code}): nothing was launched, the record is closed "
            f"(ERROR, billed 0 s): {why}")
    else:
        say(f"submit: {job_id} refused on {instance} ({code}): docker run failed, the record is closed (ERROR); "
            f"a created container may remain: {nextstep.command('teardown.py', job_id)}")


def _eta_left(ctx: Context, name: str) -> EtaLeft:
    """What is left of the ETA the last poll of job ``name`` saw (``eta_seen.left``); None when no
    poll saw one, or ``name`` is no job of this state dir (another tool's container)."""
    try:
        return eta_seen.left(ctx.sidecars.load(name).last_eta)
    except TaoBrevError:
        return None


def _launched(ctx: Context, req: SubmitRequest, answer: SubmitAnswer, found: LaunchOutcome) -> SubmitAnswer:
    """The container runs (or existed already: adopted): the record RUNNING with its backend ref."""
    job_id = _job_of(answer)
    backend_ref = f"{req.instance}/{job_id}"
    ctx.records.mark(job_id, JobState.RUNNING, message="container started" if not found.adopted else
                     "container already existed; adopted", source=Source.AGENT, backend_ref=backend_ref)
    ctx.sidecars.update(job_id, launch={"state": LaunchState.LAUNCHED, "finished_at": now_iso(),
                                        "container_id": found.container_id})
    if found.gpu_count is not None:   # --gpus all: the count the instance gave the host keys
        answer["gpu_overrides"] = tao_gpus.filled(answer.get("gpu_overrides") or [], found.gpu_count)
    if found.resume_chosen:   # the instance chose the checkpoint: record it
        answer["resume_from"] = found.resume_chosen
        ctx.sidecars.update(job_id, resume_from=found.resume_chosen)
    launched: SubmitAnswer = {"ok": True, **answer, "state": JobState.RUNNING, "backend_ref": backend_ref,
                              "container_id": found.container_id, "adopted": found.adopted}
    return launched


def _job_of(answer: SubmitAnswer) -> str:
    """The job id of a launch's answer (``open_record`` minted it)."""
    job_id = answer["job_id"]
    assert job_id is not None, "the answer of an opened record names its job"
    return job_id


def interrupted_fix(job_id: str) -> str:
    """Never resubmit an interrupted submit: poll the job (absolute command, ``nextstep``)."""
    return nextstep.resume_fix("submit.py", [], job_id, JobState.PENDING)


def _interrupted(answer: SubmitAnswer) -> TaoBrevError:
    job_id = _job_of(answer)
    return TaoBrevError("INTERRUPTED", f"submit of {job_id} was interrupted while launching: the container may "
                        "or may not start", interrupted_fix(job_id),
                        answer={**answer, "state": JobState.PENDING})


def mark_never_launched(ctx: Context, job_id: str, why: str, code: str | None = None,
                        fix: str | None = None, before_run: bool = False) -> None:
    """Close a launch that was refused (``code``: the answer's error code; later polls repeat it
    and its fix, with its class: ERR_PROGRAM for the caller's own mistake, else ERR_INFRA). A refusal
    before ``docker run`` (``before_run``: nothing was created on the instance) is closed here too."""
    err_class = ErrClass.PROGRAM if code in USER_ERRORS or (code in CODES and CODES[code].exit_code == 2) \
        else ErrClass.INFRA
    ctx.records.mark(job_id, JobState.ERROR, message=f"never launched: {why}", source=Source.AGENT,
                     err_class=err_class)
    advice = fix or CODES[code if code in CODES else "NEVER_LAUNCHED"].fix
    hint: Hint = {"err_class": err_class, "reason": f"refused before launch ({code or 'NEVER_LAUNCHED'}): nothing ran",
            "advice": advice, "evidence": [why]}
    error: ErrorObject = {"code": code or "NEVER_LAUNCHED", "message": f"job {job_id} never ran: {why}", "fix": advice}
    ctx.sidecars.update(job_id, launch={"state": LaunchState.REFUSED, "finished_at": now_iso(), "hint": hint,
                                        "error": error, **({"code": code} if code else {})})
    if before_run or code in REFUSED_BEFORE_RUN:
        ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": False,
                                              "closed_by": "the submit's refusal (nothing was launched)"})
