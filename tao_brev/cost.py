"""Cost facts of a job: where its instance time went, and an estimate of what it cost.

Timestamps (ISO 8601, UTC): the submit (sidecar ``cost.submitted_at``, to the
millisecond, :func:`note_submit`; else the record's, whole seconds), the
record's RUNNING and terminal transitions, docker's ``.State.StartedAt`` /
``FinishedAt`` (noted in the sidecar by every poll and teardown that reads
them, :func:`note_container_times`), the deletion (sidecar
``instance_deleted_at``, written by teardown) and the last image pull
(instance memory ``last_pull_s`` / ``last_pull_at``, :func:`note_pull`).

Two clocks: docker's times are the INSTANCE's clock, all others THIS
machine's. No difference ever mixes the two: ``run_s`` is FinishedAt -
StartedAt (instance) or the terminal mark - the RUNNING mark (here); every
other duration is taken on this machine's clock, the job's end there being
the earlier of its terminal mark and (the launch's RUNNING mark + ``run_s``).
When docker's times fall outside the window this machine saw them in (a start
before the submit or after the first mark that saw the container; an end
after the terminal mark), the clocks disagree: ``clock_skew_s`` is the least
skew that explains it (instance minus this machine, seconds; null when none
is seen), a bound rather than a measurement.

The ``cost`` object (in the answers of poll_status once the job ended and of
teardown, and in the sidecar under ``cost``), every value null when unknown:

``submit_to_running_s``  record opened -> the RUNNING mark (this machine's clock)
``image_pull_s``         the last pull recorded on the instance before the submit (preflight --pull)
``run_s``                container started -> ended (docker's StartedAt -> FinishedAt, else the marks)
``clock_skew_s``         instance clock minus this machine's, when docker's times prove a skew (a bound)
``idle_billed_s``        job ended -> instance deleted by teardown, or -> now while it still bills
                         (``still_billing``); null for a reused instance this bundle does not own
``owned``                this bundle created the instance (an ``--ephemeral`` job on it) and may delete it;
                         a delete never changes it (an orphan's ``owned``, ``teardown.py --orphans``)
``still_billing``        owned instance: the job ended, the instance is not deleted yet (tear it down);
                         null for a reused one (it bills its owner: ``teardown.py --orphans`` lists it idle)
``billed_s``             the instance time this job caused: submit -> deletion (owned instance,
                         plus ``image_pull_s``), or submit -> end (reused instance)
``stalled_s``            only for a job torn down as stalled: its seconds without a status line or log
                         output before the teardown (billed, no progress)
``estimated_cost_usd``   ``billed_s`` x the hourly price, when known: ``--price-per-hour`` (kept in
                         the sidecar as ``price_flag_usd``), else brev's price of the
                         ``instance_type`` (``prices``: brev search, ``references/prices.yaml`` as
                         a named fallback); the type from one ``brev ls``, once, by teardown (polls
                         add no brev call, and ls forgets a deleted instance)

The sidecar's ``cost`` holds the same object plus its inputs (``started_at``,
``finished_at``: docker's; ``price_flag_usd``).

Computing the facts never fails a verb: what cannot be known stays null.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Callable, Optional, TypedDict

from . import prices
from .context import Context
from .errors import TaoBrevError
from .isotime import parse_ts
from .model import InstanceSidecar, JobSidecar
from .model.answer_types import CostFacts, CostFactsBilledParts, PollAnswerChainCost
from .model.answer_types import RecordDocument, RecordDocumentTransitionsItem
from .run_state import warn
from .transport import BrevInstance
from .vocabulary import TERMINAL_STATES, JobState, Source


# -- prices ---------------------------------------------------------------------
def check_price(value: Optional[float]) -> Optional[float]:
    """A ``--price-per-hour`` value: None, or USD per hour >= 0 (BAD_ARGUMENT otherwise)."""
    if value is not None and not (0 <= value < 10_000):
        raise TaoBrevError("BAD_ARGUMENT", f"--price-per-hour must be USD per hour, 0 to 10000 (got {value})")
    return value


# -- recording ------------------------------------------------------------------
def note_container_times(ctx: Context, job_id: str, started_at: Optional[str], finished_at: Optional[str]) -> None:
    """Keep docker's StartedAt / FinishedAt in the sidecar's ``cost`` (written only when they change)."""
    cost = ctx.sidecars.load(job_id).cost or {}
    update = {k: v for k, v in (("started_at", started_at), ("finished_at", finished_at)) if v and cost.get(k) != v}
    if update:
        ctx.sidecars.update(job_id, cost=update)


def now_precise() -> str:
    """UTC now with milliseconds (the record's timestamps have whole seconds)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def note_submit(ctx: Context, job_id: str, price_per_hour: Optional[float]) -> None:
    """At submit, once the record is open: the precise submit time, and an explicit price."""
    ctx.sidecars.update(job_id, cost={"submitted_at": now_precise()})
    note_price(ctx, job_id, price_per_hour)


def note_price(ctx: Context, job_id: str, price_per_hour: Optional[float]) -> None:
    """Remember an explicit ``--price-per-hour`` for the job (later answers use it too)."""
    if price_per_hour is not None:
        ctx.sidecars.update(job_id, cost={"price_flag_usd": price_per_hour})


def note_pull(ctx: Context, instance: str, image: str, took_s: float) -> None:
    """Remember a finished image pull on ``instance`` (for ``image_pull_s``); for preflight --pull."""
    ctx.sidecars.note_instance(instance, last_pull_s=round(took_s, 3), last_pull_image=image,
                               last_pull_at=now_precise())


def note_instance_type(ctx: Context, instance: Optional[str], entry: Optional[BrevInstance], price_lookup: bool = False) -> None:
    """Remember the ``brev ls`` type of ``instance``: its jobs are priced from it with no brev call of
    their own. ``price_lookup`` (preflight): also fill brev's price cache (``prices.catalog``)."""
    kind = (entry or {}).get("instance_type") if isinstance(entry, dict) else None
    if instance and isinstance(kind, str) and kind and ctx.sidecars.instance(instance).instance_type != kind:
        ctx.sidecars.note_instance(instance, instance_type=kind)
    if price_lookup and isinstance(kind, str) and kind:
        prices.type_facts(ctx, kind, lookup=True)   # a failed search is a warning (prices.catalog)


def known_instance_type(ctx: Context, job_id: str) -> Optional[str]:
    """The job's instance type: its own (sidecar ``cost.instance_type``), else the one preflight /
    submit saw for its instance."""
    side = ctx.sidecars.load(job_id)
    stored = side.cost or {}
    if stored.get("instance_type") or not side.instance:
        return stored.get("instance_type")
    return ctx.sidecars.instance(side.instance).instance_type


def remember_instance_type(ctx: Context, job_id: str, instance_type: Optional[str]) -> None:
    """Keep brev's ``instance_type`` of the job's instance in its sidecar (for the price)."""
    if instance_type and (ctx.sidecars.load(job_id).cost or {}).get("instance_type") != instance_type:
        ctx.sidecars.update(job_id, cost={"instance_type": instance_type})


def learn_instance_type(ctx: Context, job_id: str) -> None:
    """One ``brev ls`` for the instance type - only when no price was given (:func:`note_price`),
    the type is not recorded yet and the instance was not deleted (ls forgets it); never raises."""
    sidecar = ctx.sidecars.load(job_id)
    stored = sidecar.cost or {}
    if (stored.get("price_flag_usd") is not None or stored.get("instance_type")
            or sidecar.instance_deleted_at or not sidecar.instance):
        return
    try:
        entry = ctx.brev.instance(sidecar.instance)
    except TaoBrevError as exc:
        warn(f"cost {job_id}: instance type unknown ({exc.message})")
        return
    remember_instance_type(ctx, job_id, (entry or {}).get("instance_type"))


# -- the facts --------------------------------------------------------------------
def seconds(start: Optional[datetime], end: Optional[datetime]) -> Optional[float]:
    """``end - start`` in seconds (>= 0), or None. Both must come from the same clock."""
    if start is None or end is None:
        return None
    return round(max(0.0, (end - start).total_seconds()), 3)


def _transition_ts(record: RecordDocument, states) -> Optional[datetime]:
    """The first transition into one of ``states``."""
    return next((parse_ts(t.get("ts")) for t in record.get("transitions") or [] if t.get("state") in states), None)


def _first_transition(record: RecordDocument, states) -> Optional[RecordDocumentTransitionsItem]:
    return next((t for t in record.get("transitions") or [] if t.get("state") in states), None)


def ended_at(record: RecordDocument, sidecar: JobSidecar) -> Optional[datetime]:
    """When the job ended, for display: docker's FinishedAt (the instance's clock), else its terminal
    mark (this machine's); None while it runs. Never subtract it from a time of the other clock."""
    return parse_ts((sidecar.cost or {}).get("finished_at")) or _transition_ts(record, TERMINAL_STATES)


MARK_SLACK_S = 2.0   # record marks have whole seconds; submit and a poll add a round trip


def clock_skew(submitted: Optional[datetime], record: RecordDocument, started: Optional[datetime],
               finished: Optional[datetime]) -> Optional[float]:
    """The least skew (instance minus this machine, s) that explains docker's times, or None.

    The container started after the submit and before the first mark that saw it (RUNNING or
    terminal); it finished before the terminal mark. A docker time outside that window, by more
    than MARK_SLACK_S, proves the clocks disagree by at least that much."""
    first_ts = parse_ts((_first_transition(record, (JobState.RUNNING, *TERMINAL_STATES)) or {}).get("ts"))
    terminal = _transition_ts(record, TERMINAL_STATES)
    lower, upper = [], []   # bounds of (instance - here)
    if started is not None:
        if first_ts is not None:
            lower.append((started - first_ts).total_seconds() - MARK_SLACK_S)
        if submitted is not None:
            upper.append((started - submitted).total_seconds() + MARK_SLACK_S)
    if finished is not None:
        if terminal is not None:
            lower.append((finished - terminal).total_seconds() - MARK_SLACK_S)
        if submitted is not None:
            upper.append((finished - submitted).total_seconds() + MARK_SLACK_S)
    low = max(lower) if lower else None
    high = min(upper) if upper else None
    if low is not None and low > 0:
        return round(low, 3)
    if high is not None and high < 0:
        return round(high, 3)
    return None


def _pull_seconds(ctx: Context, instance: Optional[str], submitted: Optional[datetime]) -> Optional[float]:
    """The last recorded pull on ``instance`` before the submit - unless an instance of that
    name was deleted between the pull and the submit (the job runs on a newer one)."""
    memory = ctx.sidecars.instance(instance) if instance else InstanceSidecar()
    pulled_at, deleted_at = parse_ts(memory.last_pull_at), parse_ts(memory.deleted_at)
    if pulled_at is None or submitted is None or pulled_at > submitted or \
            (deleted_at is not None and pulled_at <= deleted_at <= submitted):
        return None
    return memory.last_pull_s


def note_start(ctx: Context, instance: str, took_s: float) -> None:
    """Remember that the bundle started ``instance`` (preflight --start) and how long the start took
    (it bills from the start: ``billed_parts.start_s`` of the next job on it)."""
    ctx.sidecars.note_instance(instance, last_start_s=round(took_s, 3), last_start_at=now_precise())


def note_stop(ctx: Context, instance: str, job_ids: list[str]) -> str:
    """Remember that the bundle stopped ``instance`` (teardown --stop-instance): its memory and
    every job on it get the time (``instance_stopped_at``: the end of what they bill)."""
    at = now_precise()
    ctx.sidecars.note_instance(instance, stopped_at=at)
    for job_id in job_ids:
        ctx.sidecars.update(job_id, instance_stopped_at=at)
    return at


def _bundle_start_seconds(ctx: Context, instance: Optional[str], submitted: Optional[datetime]) -> Optional[float]:
    """How long the bundle's own start of ``instance`` took, when that start is the one the job ran
    after: before the submit, with no deletion or stop of the instance between."""
    memory = ctx.sidecars.instance(instance) if instance else InstanceSidecar()
    at = parse_ts(memory.last_start_at)
    if at is None or submitted is None or at > submitted:
        return None
    for other in ("deleted_at", "stopped_at"):
        then = parse_ts(getattr(memory, other))
        if then is not None and at <= then <= submitted:
            return None
    return memory.last_start_s


def started_by_bundle(ctx: Context, job_id: str) -> bool:
    """The job ran after the bundle's own start of its instance (``preflight.py --start`` / ``submit.py
    --start`` brought it up from STOPPED: :func:`note_start`), with no stop or deletion between."""
    record, side = ctx.records.load(job_id), ctx.sidecars.load(job_id)
    submitted = parse_ts((side.cost or {}).get("submitted_at")) or parse_ts(record.get("submitted_at"))
    return _bundle_start_seconds(ctx, side.instance, submitted) is not None


def facts(ctx: Context, job_id: str, owned: bool, price_per_hour: Optional[float] = None, lookup: bool = True) -> CostFacts:
    """The job's ``cost`` object (see the module doc), also saved in its sidecar.

    ``owned``: this bundle created the instance (``instance_jobs.created_by_bundle``), so its
    idle time until the deletion is billed to the job. ``lookup`` allows
    one ``brev ls`` for the instance type when the price is not known otherwise.
    """
    record = ctx.records.load(job_id)
    sidecar = ctx.sidecars.load(job_id)
    note_price(ctx, job_id, price_per_hour)
    if lookup:
        learn_instance_type(ctx, job_id)
    stored = ctx.sidecars.load(job_id).cost or {}
    explicit = stored.get("price_flag_usd")
    deleted_at = parse_ts(sidecar.instance_deleted_at)

    submitted = parse_ts(stored.get("submitted_at")) or parse_ts(record.get("submitted_at"))   # here
    running_mark = _transition_ts(record, (JobState.RUNNING,))                                         # here
    terminal_mark = _transition_ts(record, TERMINAL_STATES)                                     # here
    started, finished = parse_ts(stored.get("started_at")), parse_ts(stored.get("finished_at"))   # instance
    running = started or running_mark
    ended = ended_at(record, JobSidecar(cost=stored))
    run_s = seconds(started, finished) if started and finished else seconds(running_mark, terminal_mark)
    end_here = _end_here(record, submitted, running_mark, terminal_mark, run_s if started and finished else None)
    never_existed = (sidecar.launch or {}).get("instance_missing") is True   # brev ls: no such instance
    never_ran = sidecar.never_ran   # refused before launch, never launched, failed to start: bills nothing
    if ended is not None and submitted is not None and finished is None and ended < submitted:
        ended = submitted   # a mark has whole seconds (truncated): never before the submit
    owned = owned and not never_existed   # who created the instance: a delete never changes it
    stopped_at = parse_ts(sidecar.instance_stopped_at)
    start_s = None if never_existed or never_ran else _bundle_start_seconds(ctx, sidecar.instance, submitted)
    # the bundle caused the instance's time around the job: it owns it, started it, or deleted it; a job
    # that never ran caused none of it (a start the bundle did is billed to the next job that runs there)
    caused = (owned or deleted_at is not None or start_s is not None) and not never_existed and not never_ran
    stop_end = deleted_at or stopped_at
    # a reused instance bills its owner whatever the job did: not this bundle's to say (null)
    still_billing = (caused and stop_end is None and end_here is not None) if caused or never_existed or never_ran else None
    billing_end = (stop_end or datetime.now(timezone.utc)) if caused else end_here
    pull_s = None if never_ran else _pull_seconds(ctx, sidecar.instance, submitted)
    billed = 0.0 if never_existed or never_ran else seconds(submitted, billing_end)
    if billed is not None and caused:
        billed = round(billed + (pull_s or 0) + (start_s or 0), 3)
    kind = stored.get("instance_type") or known_instance_type(ctx, job_id)
    price, source, price_note = prices.price(ctx, explicit, kind, lookup)
    idle_s = seconds(end_here, billing_end) if caused else None
    out: CostFacts = {
        "submitted_at": _iso(submitted), "running_at": _iso(running), "ended_at": _iso(ended),
        "instance_deleted_at": _iso(deleted_at),
        "submit_to_running_s": seconds(submitted, running_mark), "image_pull_s": pull_s,
        "run_s": run_s, "idle_billed_s": idle_s,
        "billed_s": billed, "owned": owned, "still_billing": still_billing,
        "instance_type": kind, "price_per_hour_usd": price, "price_source": source,
        "estimated_cost_usd": round(billed / 3600 * price, 4) if billed is not None and price is not None else None,
        "clock_skew_s": clock_skew(submitted, record, started, finished),
        "price_note": price_note, "instance_stopped_at": _iso(stopped_at),
        "billed_parts": _parts(caused, "no instance existed" if never_existed else
                               "never launched: nothing ran, nothing billed" if never_ran else None, start_s, pull_s, submitted, end_here, billing_end,
                               deleted_at, stopped_at),
    }
    if stored.get("stalled_s") is not None:   # torn down as stalled (poll_status --wait --teardown --stall-after)
        out["stalled_s"] = stored["stalled_s"]
    # the job's own type stays what brev ls said of it (teardown still learns it once); the answer
    # is priced from the instance's remembered type meanwhile
    ctx.sidecars.update(job_id, cost={**out, "instance_type": stored.get("instance_type")})
    return out


def _parts(caused: bool, nothing_ran: Optional[str], start_s, pull_s, submitted, end_here, billing_end,
           deleted_at, stopped_at) -> CostFactsBilledParts:
    """``billed_s`` part by part, each named (seconds; null: not part of this job's bill), and
    ``until``: what ended the billing this job is charged for (``nothing_ran``: why nothing did)."""
    if nothing_ran:
        return {"start_s": None, "image_pull_s": None, "job_s": 0.0, "idle_s": None, "until": nothing_ran}
    job_end = end_here if end_here is not None and (not caused or end_here <= billing_end) else billing_end
    until = ("instance deleted by the bundle" if deleted_at else "instance stopped by the bundle" if stopped_at
             else "still billing (now)" if caused else "job end (a reused instance bills its owner before and after)")
    return {"start_s": start_s if caused else None, "image_pull_s": pull_s if caused else None,
            "job_s": seconds(submitted, job_end), "idle_s": seconds(end_here, billing_end) if caused else None,
            "until": until}


def _end_here(record: RecordDocument, submitted: Optional[datetime], running_mark: Optional[datetime],
              terminal_mark: Optional[datetime], docker_run_s: Optional[float]) -> Optional[datetime]:
    """The job's end on THIS machine's clock: its terminal mark (a poll saw it ended), or earlier,
    the launch's RUNNING mark + docker's run time (both known only when the submit marked RUNNING).
    Never before the submit + docker's run time: the container started after the submit, and the
    record's marks are whole seconds (truncated), so the mark + run time alone can fall short."""
    if terminal_mark is None:
        return None
    end = terminal_mark
    first_running = _first_transition(record, (JobState.RUNNING,))
    if running_mark is not None and docker_run_s is not None and (first_running or {}).get("source") == Source.AGENT:
        end = min(terminal_mark, running_mark + timedelta(seconds=docker_run_s))
    if submitted is not None and docker_run_s is not None:
        end = max(end, submitted + timedelta(seconds=docker_run_s))
    return end


def _iso(ts: Optional[datetime]) -> Optional[str]:
    return ts.isoformat(timespec="milliseconds") if ts else None


def chain_total(ctx: Context, job_ids: list[str], owned: Callable[[JobSidecar], bool]) -> PollAnswerChainCost:
    """``{"billed_s", "estimated_cost_usd", "attempts"}`` of jobs that follow each other (a recovery
    chain): each attempt's own time (its ``billed_s`` minus its ``idle_billed_s``: on an owned instance
    the idle time after one attempt is the next one's time, counted once), plus the last attempt's idle
    time; a live attempt counts from its submit. Each attempt is priced at its own price, else at the
    price of another attempt on the same instance (one instance, one type), else of the chain's others:
    a price known for one attempt prices them all. A sum is null only when a part's time is unknown
    or no attempt has a price."""
    parts = [_attempt(ctx, job_id, owned) for job_id in job_ids]
    by_instance = {p["instance"]: p["price"] for p in parts if p["price"] is not None}
    anyone = next((p["price"] for p in parts if p["price"] is not None), None)
    billed: Optional[float] = 0.0
    usd: Optional[float] = 0.0
    for number, part in enumerate(parts, 1):
        seconds_ = part["seconds"]
        if seconds_ is not None and number == len(parts):
            seconds_ += part["idle"]
        price = part["price"] if part["price"] is not None else by_instance.get(part["instance"], anyone)
        billed = None if billed is None or seconds_ is None else billed + seconds_
        usd = None if usd is None or price is None or seconds_ is None else usd + seconds_ / 3600 * price
    return {"billed_s": None if billed is None else round(billed, 3),
            "estimated_cost_usd": None if usd is None else round(usd, 4), "attempts": len(parts)}


class _Attempt(TypedDict):
    """One attempt of :func:`chain_total`: its seconds, idle seconds after it, instance and hourly price."""
    seconds: Optional[float]
    idle: float
    instance: Optional[str]
    price: Optional[float]


def _attempt(ctx: Context, job_id: str, owned: Callable[[JobSidecar], bool]) -> _Attempt:
    record, side = ctx.records.load(job_id), ctx.sidecars.load(job_id)
    if record.get("terminal_state") not in TERMINAL_STATES:
        stored = side.cost or {}
        start = parse_ts(stored.get("submitted_at")) or parse_ts(record.get("submitted_at"))
        price, _source, _note = prices.price(ctx, stored.get("price_flag_usd"),
                                             stored.get("instance_type") or known_instance_type(ctx, job_id), False)
        return {"seconds": seconds(start, datetime.now(timezone.utc)) if start else None, "idle": 0.0,
                "instance": side.instance, "price": price}
    out = facts(ctx, job_id, owned=owned(side), lookup=False)
    idle = out.get("idle_billed_s") or 0.0
    billed = out.get("billed_s")
    return {"seconds": None if billed is None else max(0.0, billed - idle), "idle": idle,
            "instance": side.instance, "price": out.get("price_per_hour_usd")}
