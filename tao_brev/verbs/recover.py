"""``poll_status.py JOB_ID --wait --recover N``: a train job that survives infrastructure failures.

The loop (one attempt at a time; each attempt is its own job record):

1. wait for the current attempt (``status.poll``; the wait is bounded by ``--timeout`` and by
   what is left of ``--budget-s``);
2. when it ends by an infrastructure failure (:func:`cause_of`: a hint of class ``ERR_INFRA``,
   the instance gone or stopped, the container gone, a stall), make its results safe as a
   teardown does (container removed, S3-routed results uploaded and verified; the instance
   is kept), then choose where the next attempt runs (``recovery_target.choose_instance``: the same
   instance once it is RUNNING and a ``docker run --gpus all ... nvidia-smi -L`` passes within
   ``health_wait_s``, else ``--fallback-instance``);
3. resubmit with the first job's own submit arguments plus ``--resume-from <attempt>``
   (``tao_brev.resume``: only the epochs after its last checkpoint run; another action than
   train runs again, ``--retry-of``), up to N times.

A program error (hint class ``ERR_PROGRAM``: a bad spec, an exception in the job's code), a
cancel, a completed job or a refused resubmit ends the loop: nothing is recovered blindly.

State (crash consistency): the first job's sidecar holds ``recovery``: the ``policy``, the
``chain`` of attempts and, while a resubmit is on its way, its ``intent`` (written before the
launch, as submit writes its record before the launch). Every decision and launch happens under
the chain's lock (``fsio.locked``), so two recovering processes never launch twice; a process
killed after submit opened the new record leaves a record whose ``retry_of`` names the attempt
it resumes - the next run adopts it (``recovery_chain.adopt``) instead of launching another. A rerun of the
same command therefore continues the chain: at most one attempt is ever live.
"""

from __future__ import annotations

import shlex
from typing import Callable, Optional

from .. import nextstep, prices, resume_advice
from ..context import Context, say
from ..model.answer_types import PollAnswer, SubmitAnswer
from ..docker_state import RESET_EITHER, gated
from ..errors import TaoBrevError
from ..fsio import locked
from ..records import check_job_id, is_terminal, now_iso
from ..vocabulary import ErrClass, InstanceStatus, JobState, LaunchState, Source
from . import checkpoint_sync, status
from .recovery_chain import (Cause, ChainEntry, Intent, RecoveryPolicy, adopt, append,  # noqa: F401
                             attempts_view, chain_cost, lock_path, policy, remembered_policy, resume_source,
                             root_of, sync, used_attempts)
from .recovery_chain import chain as _chain
from . import teardown as teardown_mod
from .job_facts import job_instance
from .recovery_target import HEALTH_INTERVAL_S, HEALTH_WAIT_S, choose_instance
from .submit import SubmitRequest, submit

RequestOf = Callable[[list[str]], SubmitRequest]   # submit.py's arguments -> its request

# flags of the first submit that a resubmit does not repeat (the policy lives in the chain)
_POLICY_FLAGS = ("--recover", "--fallback-instance", "--budget-s")


# ---------------------------------------------------------------- why an attempt ended
def cause_of(out: PollAnswer) -> Optional[Cause]:
    """``{"kind", "reason"}`` when the wait's answer is an infrastructure failure that a resume may
    cure; None otherwise (done, a program error, a cancel, a timeout, the backend unreachable).
    Judged by the answer's facts and failure classes (``docker_state``), not by error names:
    ``observed.gone`` (instance / container), ``stalled``, ``hint.err_class``."""
    error = (out.get("error") or {}).get("code")
    hint = out.get("hint") or {}
    gone = (out.get("observed") or {}).get("gone")
    if out.get("state") in (JobState.COMPLETE, JobState.CANCELED) or status.timed_out(out) or \
            hint.get("err_class") == ErrClass.PROGRAM or resume_advice.shm_exhausted(hint):
        # /dev/shm exhausted: the same --shm-size fails the same way (:func:`shm_stop` says what to run)
        return None   # a cancel (a teardown removed the container: gone, yet nobody's fault) is the user's
    if out.get("reconciled") == LaunchState.NEVER_LAUNCHED:   # a launch that never happened (not one that was refused)
        return {"kind": LaunchState.NEVER_LAUNCHED, "reason": out.get("message")} if error == "NEVER_LAUNCHED" else None
    if out.get("stalled") or error == "JOB_STALLED":
        return {"kind": "stalled", "reason": f"no sign of life for {(out.get('stall') or {}).get('idle_s')} s"}
    if gone == "instance" or error in ("INSTANCE_LOST", "INSTANCE_STOPPED"):
        return {"kind": "instance", "reason": out.get("message") or error}
    if gone == "container" or error == "CONTAINER_GONE":
        return {"kind": "container", "reason": out.get("message") or error}
    if out.get("state") == JobState.ERROR and hint.get("err_class") == ErrClass.INFRA:
        return {"kind": "infra", "reason": hint.get("reason") or out.get("message")}
    return None


def shm_stop(ctx: Context, job_id: str, out: PollAnswer) -> Optional["Stop"]:
    """RECOVERY_NOT_POSSIBLE when ``job_id`` ended out of /dev/shm (docker_state's SHM_EXHAUSTED): a
    recovery never repeats the failing settings, and a larger ``--shm-size`` is the user's to choose
    (shared memory is the instance's RAM); the fix is the exact resubmit with twice the size and
    ``--resume-from`` (it joins the chain: ``recovery_chain.joining``). None otherwise."""
    if not resume_advice.shm_exhausted(out.get("hint")):
        return None
    record, side = ctx.records.load(job_id), ctx.sidecars.load(job_id)
    size = resume_advice.shm_size(side.submit_argv or [])
    again = resume_advice.command(record, side, resume_advice.larger_shm(size))
    return Stop("RECOVERY_NOT_POSSIBLE", f"{job_id} ran out of shared memory (/dev/shm, --shm-size {size}): "
                "resubmitting it with the same settings fails the same way, so it was not recovered",
                f"Resubmit with a larger --shm-size (it is the instance's RAM; or lower the data loader's "
                f"num_workers in the spec): {again or 'submit.py with --shm-size ' + resume_advice.larger_shm(size)}"
                f"; then {nextstep.command('poll_status.py', root_of(ctx, job_id), '--wait')} continues the chain.")


# ---------------------------------------------------------------- the resubmit
def resubmit_argv(words: list[str], instance: str, resume_from: str, extra: list[str], moved: bool,
                  link: str = "--resume-from") -> list[str]:
    """The first submit's arguments (``resume_advice.resubmit_words``) for the next attempt: on ``instance``,
    ``--resume-from`` the attempt that holds the checkpoint (``link="--retry-of"`` for an action
    other than train: nothing to resume, it runs again), without the policy flags; a move to
    another instance drops ``--ephemeral`` (the bundle did not create the fallback)."""
    head, tail = (words[:words.index("--")], words[words.index("--"):]) if "--" in words else (list(words), [])
    out, skip = [], False
    drop = _POLICY_FLAGS + ("--instance",) + (("--ephemeral",) if moved else ())
    for word in head:
        if skip:
            skip = False
            continue
        flag = word.split("=", 1)[0]
        if flag in drop:
            skip = "=" not in word and flag != "--ephemeral"
            continue
        out.append(word)
    return ["--instance", instance, *out, *extra, link, resume_from, *tail]


# ---------------------------------------------------------------- one step of the chain
class Stop(Exception):
    """The chain ends here: ``code`` (an errors.CODES name) and why."""

    def __init__(self, code: str, message: str, fix: Optional[str] = None):
        super().__init__(message)
        self.error = TaoBrevError(code, message, fix)


def advance(ctx: Context, root: str, current: str, cause: Cause, pol: RecoveryPolicy, request_of: RequestOf,
            health_wait_s: float, interval: float) -> str:
    """After ``current`` ended by ``cause``: the next attempt's job id (launched here, adopted, or
    launched by another process meanwhile). Raises :class:`Stop`. Runs under the chain's lock."""
    lock = lock_path(ctx, root)
    with locked(lock):
        before = _chain(ctx, root)
        chain = sync(ctx, root)   # attempts launched meanwhile: by another process, a killed run, by hand
        if chain[-1]["job_id"] != current:
            if chain[-1]["job_id"] not in {entry["job_id"] for entry in before}:
                say(f"recover: adopting {chain[-1]['job_id']} (it resumes {chain[-1].get('resume_from')}; launched "
                    "outside this run)")
            return chain[-1]["job_id"]
        chain[-1]["cause"] = cause
        ctx.sidecars.update(root, recovery={"chain": chain})
        _check_limits(ctx, root, chain, pol, cause)
        _make_safe(ctx, current)
        return _launch_next(ctx, root, chain, pol, request_of, health_wait_s, interval)


def _check_limits(ctx: Context, root: str, chain: list[ChainEntry], pol: RecoveryPolicy, cause: Cause) -> None:
    used = used_attempts(ctx, chain)   # not those launched by hand or killed before launching
    if used >= pol["attempts"]:
        raise Stop("RECOVERY_LIMIT", f"attempt {len(chain)} ({chain[-1]['job_id']}) ended by an infrastructure "
                   f"failure ({cause['reason']}) and all {pol['attempts']} recovery attempt(s) of --recover "
                   f"{pol['attempts']} are used: not resubmitted")
    budget = pol.get("budget_s")
    billed = chain_cost(ctx, root)["billed_s"]
    if budget is not None and billed is not None and billed >= budget:
        raise Stop("RECOVERY_BUDGET_EXHAUSTED", f"the chain has billed {billed:.0f} s of --budget-s {budget:g}: "
                   "not resubmitted")


def _make_safe(ctx: Context, job_id: str) -> None:
    """As a teardown does, keeping the instance: the container removed (a stalled one stops billing
    GPU time), the record closed, S3-routed results uploaded and verified (``teardown.teardown``).
    When the teardown cannot close the record, the attempt counts as ended only where nothing can
    run: its instance deleted or STOPPED (``brev ls``); else :class:`Stop` with the teardown's error
    (rerun later): two live attempts are never risked."""
    failure = None
    try:
        down, _code = teardown_mod.teardown(ctx, job_id, delete_instance=False)
        failure = down.get("error")
        say(f"recover: {job_id} torn down (results: {(down.get('results') or {}).get('verified', 'not in S3')})")
    except TaoBrevError as exc:
        failure = exc.to_json()
    if is_terminal(ctx.records.load(job_id).get("terminal_state")):
        return
    instance = job_instance(ctx.records.load(job_id), ctx.sidecars.load(job_id))
    entry = ctx.brev.instance(instance) if instance else None
    found = str((entry or {}).get("status") or "").upper()
    if entry is not None and found != InstanceStatus.STOPPED:
        failure = failure or {"code": "TRANSPORT_FAILED", "message": "the teardown did not close the record"}
        raise Stop(failure["code"], f"{job_id} could not be stopped on {instance} ({found}): {failure['message']}; "
                   "nothing was resubmitted", failure.get("fix"))
    say(f"recover: {job_id}: its instance {instance} is {found or 'gone'}: nothing runs there")
    ctx.records.mark(job_id, JobState.CANCELED, message=f"recovery: its instance {instance} is {found or 'gone'}",
                     source=Source.AGENT)


def _launch_next(ctx: Context, root: str, chain: list[ChainEntry], pol: RecoveryPolicy, request_of: RequestOf,
                 health_wait_s: float, interval: float) -> str:
    current = chain[-1]["job_id"]
    side, record = ctx.sidecars.load(current), ctx.records.load(current)
    words = side.submit_argv or ctx.sidecars.load(root).submit_argv   # its settings (a larger --shm-size)
    if not words:
        raise Stop("RECOVERY_NOT_POSSIBLE", f"the submit arguments of {root} were not kept (an older bundle): "
                   "the resubmit cannot be built")
    here = _chain_instance(ctx, chain)
    target, extra, found = choose_instance(ctx, here, record.get("image") or "", pol.get("fallback_instance"),
                                           health_wait_s, min(interval, HEALTH_INTERVAL_S))
    if target is None:
        can_stop = prices.stoppable(ctx, (side.cost or {}).get("instance_type"), lookup=False)
        reset = gated(RESET_EITHER, can_stop).replace("INSTANCE", here).replace("JOB_ID", current)
        raise Stop("RECOVERY_NOT_POSSIBLE", f"no instance for attempt {len(chain) + 1}: {found}",
                   f"Pass --fallback-instance NAME (a RUNNING instance with the image pulled) and rerun, or fix "
                   f"{here} (an Xid needs a reset: {reset}) and rerun.")
    source = resume_source(ctx, chain)
    train = record.get("action") == "train"
    if train:   # another action has no checkpoint to carry
        _refuse_out_of_reach(ctx, source, here, target, found, words)
    argv = resubmit_argv(list(words), target, source, extra, moved=target != here,
                         link="--resume-from" if train else "--retry-of")
    intent: Intent = {"attempt": len(chain) + 1, "after": current, "resume_from": source, "instance": target,
              "at": now_iso(), "argv": argv}
    ctx.sidecars.update(root, recovery={"intent": intent})   # before the launch: a rerun adopts, never repeats
    say(f"recover: {found}; attempt {intent['attempt']} on {target}, resuming {source}")
    try:
        answer, code = _submit(ctx, request_of, argv)
    except TaoBrevError as exc:
        answer, code = {"ok": False, **(exc.details.get("answer") or {}), "error": exc.to_json()}, exc.exit_code
        if exc.code == "INTERRUPTED":   # Ctrl-C / SIGTERM during the launch: chain what opened, then answer
            opened = answer.get("job_id")
            if opened:
                append(ctx, root, chain, opened, intent)
            raise
    job_id = answer.get("job_id")
    if not job_id:   # refused before a record opened: nothing runs, the chain ends with the refusal's reason
        ctx.sidecars.update(root, recovery={"intent": None})
        error = answer.get("error") or {}
        raise Stop("RECOVERY_NOT_POSSIBLE", f"the resubmit of attempt {intent['attempt']} on {target} was refused "
                   f"({error.get('code')}): {error.get('message')}", error.get("fix"))
    append(ctx, root, chain, job_id, intent)
    return job_id


def _chain_instance(ctx: Context, chain: list[ChainEntry]) -> str:
    """The instance the chain is on: the last attempt's (its sidecar), else the latest earlier one's (an
    attempt SIGKILLed as its record opened has no sidecar; the root's always names it)."""
    for item in reversed(chain):
        instance = ctx.sidecars.load(item["job_id"]).instance
        if instance:
            return instance
    return ""


def _refuse_out_of_reach(ctx: Context, source: str, here: str, target: str, found: str, words: list[str]) -> None:
    """A move to another instance resumes only from results verified in S3 (storage tier B/C, or
    results routed to a bucket): with the checkpoints only on the lost instance, say so."""
    results = ctx.sidecars.load(source).results or {}
    reached = results.get("verified") or (results.get("checkpoint_sync") or {}).get("latest_checkpoint")
    if target == here or (results.get("kind") == "s3" and reached):
        return
    where = "were not verified in S3 before it was lost" if results.get("kind") == "s3" else \
        f"were only on {here} (results kind {results.get('kind')}: storage tier A without a bucket)"
    fresh = ["--retry-of" if word == "--resume-from" else word
             for word in resubmit_argv(words, target, source, [], True)]
    raise Stop("RECOVERY_NOT_POSSIBLE", f"{found}, but the checkpoints of {source} {where}: nothing to resume "
               f"from on {target}", f"Train from the start on {target} (a link, not a resume): "
               f"{nextstep.command('submit.py', *fresh)}; route results to S3 (--bucket, storage tier B) so that a "
               "later loss can resume.")


def _submit(ctx: Context, request_of: RequestOf, argv: list[str]) -> tuple[SubmitAnswer, int]:
    try:
        req = request_of(argv)
    except SystemExit:   # argparse: the stored arguments no longer parse
        raise TaoBrevError("BAD_ARGUMENT", f"the stored submit arguments do not parse: {shlex.join(argv)}") from None
    return submit(ctx, req)


# ---------------------------------------------------------------- the loop
def recover(ctx: Context, job_id: str, request_of: RequestOf, pol: Optional[RecoveryPolicy] = None, log_lines: int = 0,
            interval: float = 30.0, timeout: Optional[float] = None, price_per_hour: Optional[float] = None,
            metrics: Optional[int] = None, stall_after: Optional[float] = None,
            health_wait_s: float = HEALTH_WAIT_S,
            sync_every_s: float = checkpoint_sync.SYNC_EVERY_S) -> tuple[PollAnswer, int]:
    """Wait for ``job_id``'s chain and recover it (module doc). ``pol``: :func:`policy` (None: the
    remembered one). ``request_of(argv)``: submit.py's arguments -> SubmitRequest. Returns the last
    attempt's wait answer with ``attempts``, ``recovery`` and ``chain_cost``; its exit code, or 1
    with RECOVERY_LIMIT / RECOVERY_BUDGET_EXHAUSTED / RECOVERY_NOT_POSSIBLE when the chain stops."""
    check_job_id(job_id)
    root = root_of(ctx, job_id)
    pol = pol or remembered_policy(ctx, root) or {"attempts": 0, "fallback_instance": None, "budget_s": None}
    ctx.sidecars.update(root, recovery={"policy": pol})
    with locked(lock_path(ctx, root)):
        current = sync(ctx, root)[-1]["job_id"]   # a resume launched by hand is the attempt waited for
    started = ctx.clock()
    while True:
        left = None if timeout is None else timeout - (ctx.clock() - started)
        budget_left = _budget_left(ctx, root, pol)
        if budget_left is not None:   # one poll interval kept for the teardown that stops the attempt
            budget_left -= interval
        bound = min(x for x in (left, budget_left, float("inf")) if x is not None)
        out, code = _wait(ctx, current, bound, sync_every_s, log_lines=log_lines, interval=interval,
                          price_per_hour=price_per_hour, metrics=metrics, stall_after=stall_after)
        if status.timed_out(out) and budget_left is not None and \
                budget_left <= (left if left is not None else float("inf")):
            _make_safe(ctx, current)
            ended = ctx.records.load(current).get("terminal_state")
            out = {**out, "state": ended, "terminal_state": ended, "message": f"stopped by the recovery: "
                   f"--budget-s {pol['budget_s']:g} reached"}
            return _final(ctx, root, out, Stop("RECOVERY_BUDGET_EXHAUSTED", f"--budget-s {pol['budget_s']:g} "
                          f"reached while {current} ran: it was stopped (results kept)"))
        cause = cause_of(out) or _decided(ctx, root, current, out)
        if cause is not None and cause["kind"] == "stalled" and stall_after is None:
            out["recovery_note"] = ("a stall is a heuristic: it is recovered only with an explicit --stall-after S "
                                    "(the request to act); nothing was removed")
            cause = None
        if cause is None:
            return _final(ctx, root, out, shm_stop(ctx, current, out), code)
        say(f"recover: {current} ended by an infrastructure failure ({cause['kind']}: {cause['reason']})")
        try:
            current = advance(ctx, root, current, cause, pol, request_of, health_wait_s, interval)
        except Stop as stop:
            return _final(ctx, root, out, stop)


def _decided(ctx: Context, root: str, current: str, out: PollAnswer) -> Optional[Cause]:
    """The cause an earlier run recorded for ``current`` before it made it safe (it then reads
    CANCELED) and was killed before the next attempt was chained: the decision stands."""
    last = _chain(ctx, root)[-1]
    return last.get("cause") if last["job_id"] == current and out.get("state") == JobState.CANCELED else None


def _wait(ctx: Context, job_id: str, bound: float, sync_every_s: float, **poll) -> tuple[PollAnswer, int]:
    """``status.poll(wait=True)`` for at most ``bound`` seconds; a live S3-routed train job is waited
    for in slices of ``sync_every_s``, its newest checkpoint uploaded between them (``checkpoint_sync``)."""
    deadline = ctx.clock() + bound
    while True:
        left = deadline - ctx.clock()
        syncing = checkpoint_sync.wanted(ctx, job_id)
        piece = min(left, sync_every_s) if syncing else left
        out, code = status.poll(ctx, job_id, wait=True, timeout=None if piece == float("inf") else max(piece, 0.0),
                                **poll)
        if not (status.timed_out(out) and syncing and piece < left):
            return out, code
        checkpoint_sync.sync(ctx, job_id)


def _budget_left(ctx: Context, root: str, pol: RecoveryPolicy) -> Optional[float]:
    budget = pol.get("budget_s")
    if budget is None:
        return None
    billed = chain_cost(ctx, root)["billed_s"]
    return budget - (billed or 0.0)


def _final(ctx: Context, root: str, out: PollAnswer, stop: Optional[Stop], code: int = 1) -> tuple[PollAnswer, int]:
    """The last attempt's answer with the whole chain; a :class:`Stop` becomes its error."""
    chain = _chain(ctx, root)
    pol = (ctx.sidecars.load(root).recovery or {}).get("policy") or {}
    out = {**out, "attempts": attempts_view(ctx, root), "chain_cost": chain_cost(ctx, root),
           "recovery": {"first_job": root, "attempts_used": used_attempts(ctx, chain),
                        "max_attempts": pol.get("attempts"),
                        "fallback_instance": pol.get("fallback_instance"), "budget_s": pol.get("budget_s"),
                        "stopped": None}}
    if stop is not None:
        out["recovery"]["stopped"] = stop.error.code
        out["ok"], out["error"] = False, stop.error.to_json()
        return out, stop.error.exit_code
    hint = out.get("hint") or {}
    if out.get("state") == JobState.ERROR and hint.get("err_class") == ErrClass.PROGRAM:
        out["recovery"]["stopped"] = ErrClass.PROGRAM
        out["recovery"]["note"] = "a program error (bad spec, exception in the job's code) is never recovered"
    return out, code


def then_teardown(ctx: Context, out: PollAnswer, code: int) -> tuple[PollAnswer, int]:
    """``--wait --recover N --teardown``: the last attempt torn down once it ended (its answer under
    ``teardown``; a teardown failure wins the exit code), a live one left alone."""
    if not is_terminal(out.get("state")):
        out["teardown_skipped"] = f"job {out.get('job_id')} is {out.get('state')}: nothing was removed"
        return out, code
    stopped = (out.get("recovery") or {}).get("stopped") or ""
    if stopped.startswith("RECOVERY_"):   # the user decides first: more attempts, a budget, a fallback
        out["teardown_skipped"] = (f"the recovery stopped ({stopped}): nothing was removed or deleted, so that a "
                                   f"rerun can continue the chain; teardown.py {out.get('job_id')} cleans up")
        return out, code
    try:
        down, down_code = teardown_mod.teardown(ctx, out["job_id"], price_per_hour=None)
    except TaoBrevError as exc:
        down, down_code = {"ok": False, "job_id": out["job_id"], "error": exc.to_json()}, exc.exit_code
    down.pop("cost", None)
    out["teardown"] = down
    if down_code != 0:
        out.update({"ok": False, "error": down["error"]})
        code = down_code
    return out, code
