"""``tao_job_record.py cost [--since DATE] [--instance NAME]``: what the jobs cost, in total, and
what still bills now.

Each job's figures are its ``cost`` facts (tao_brev/cost.py: ``billed_s``, ``billed_parts``, the
price and where it came from). Each job's figures count the instance time around it, so jobs that
shared an instance overlap; the total counts an instance's time once: ``total.instances`` has, per
instance, the union of its jobs' billed intervals (each job's ``billed_s`` ending where its billing
ended), priced at that instance's hourly price, and the total adds the instances up.
Two brev calls at most: ``brev search gpu|cpu --json`` when the cached prices are older than a
day (tao_brev/prices.py) and one ``brev ls --json``, for the instance types not known yet and
for ``billing_now``: every instance of the account that bills at this moment (RUNNING: compute
and disk; STOPPED: disk only), with its hourly price. When brev cannot be reached the jobs are
still totalled from what is known here, and ``billing_now`` is null with the reason.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional, TypedDict

from .. import cost, instance_names, nextstep, prices
from ..context import Context
from ..errors import TaoBrevError
from ..records import current_state
from ..transport import BrevInstance, check_instance
from ..vocabulary import InstanceStatus
from . import teardown as teardown_mod
from ..model import JobSidecar
from ..model.answer_types import CostFactsBilledParts

RUNNING = (InstanceStatus.RUNNING, InstanceStatus.UNHEALTHY)


class JobLine(TypedDict):
    """One job of ``jobs``: its cost facts (``cost.facts``) as the report shows them."""
    job_id: str
    instance: Optional[str]
    state: str
    submitted_at: Optional[str]
    ended_at: Optional[str]
    billed_s: Optional[float]
    billed_parts: CostFactsBilledParts
    instance_type: Optional[str]
    price_per_hour_usd: Optional[float]
    price_source: Optional[str]
    price_note: Optional[str]
    estimated_cost_usd: Optional[float]
    still_billing: Optional[bool]


class NeverLaunched(TypedDict):
    """One job of ``never_launched``: refused or never launched, $0."""
    job_id: str
    instance: Optional[str]
    code: Optional[str]
    billed_s: float
    estimated_cost_usd: float


class BillingNow(TypedDict):
    """One instance of ``billing_now``: what it bills at this moment, at which hourly price."""
    instance: Optional[str]
    status: str
    instance_type: Optional[str]
    bills: str
    ours: bool
    usd_per_hour: Optional[float]
    price_source: Optional[str]
    price_note: Optional[str]


class InstanceTotal(TypedDict):
    """One instance of ``total.instances``: its jobs' billed intervals counted once, and priced."""
    instance: Optional[str]
    jobs: list[str]
    billed_s: float
    jobs_billed_s: float
    usd_per_hour: Optional[float]
    price_source: Optional[str]
    estimated_cost_usd: Optional[float]


class Total(TypedDict):
    """The report's ``total``."""
    jobs: int
    billed_s: float
    estimated_cost_usd: float
    instances: list[InstanceTotal]
    unpriced_jobs: list[str]
    still_billing_jobs: list[str]
    price_sources: list[str]
    note: str


class NextStep(TypedDict):
    next: Optional[str]
    next_note: str


class CostReport(TypedDict, total=False):
    """The answer of ``tao_job_record.py cost``."""
    ok: bool
    since: Optional[str]
    instance: Optional[str]
    jobs: list[JobLine]
    total: Total
    never_launched: list[NeverLaunched]
    billing_now: Optional[list[BillingNow]]
    billing_now_note: Optional[str]
    usd_per_hour_now: float
    instance_note: str
    did_you_mean: dict[str, str]
    next: Optional[str]
    next_note: str


def parse_since(text: Optional[str]) -> Optional[datetime]:
    """``--since`` (``YYYY-MM-DD``, or an ISO 8601 time; UTC when no zone): a datetime, or BAD_ARGUMENT."""
    if text is None:
        return None
    when = cost.parse_ts(text + "T00:00:00" if len(text.strip()) == 10 else text)
    if when is None:
        raise TaoBrevError("BAD_ARGUMENT", f"--since takes a date (YYYY-MM-DD) or an ISO 8601 time (got {text!r})")
    return when


def _listing(ctx: Context) -> tuple[Optional[list[BrevInstance]], Optional[str]]:
    try:
        return ctx.brev.ls(), None
    except TaoBrevError as exc:
        return None, f"brev ls failed ({exc.code}): {exc.message}"


def _job_line(ctx: Context, side: JobSidecar, types: dict[str, str]) -> Optional[JobLine]:
    job_id, instance = side.job_id, side.instance
    if not job_id:   # no record to read (as records.load's BAD_JOB_ID)
        return None
    try:
        record = ctx.records.load(job_id)
    except TaoBrevError:
        return None
    if instance in types:
        cost.remember_instance_type(ctx, job_id, types[instance])
    facts = cost.facts(ctx, job_id, owned=teardown_mod.created_by_bundle(ctx, side), lookup=False)
    return {"job_id": job_id, "instance": instance, "state": current_state(record),
            "submitted_at": facts["submitted_at"], "ended_at": facts["ended_at"], "billed_s": facts["billed_s"],
            "billed_parts": facts["billed_parts"], "instance_type": facts["instance_type"],
            "price_per_hour_usd": facts["price_per_hour_usd"], "price_source": facts["price_source"],
            "price_note": facts["price_note"], "estimated_cost_usd": facts["estimated_cost_usd"],
            "still_billing": facts["still_billing"]}


def _billing_now(ctx: Context, listing: list[BrevInstance], ours: set[str]) -> list[BillingNow]:
    out: list[BillingNow] = []
    for entry in listing:
        status = str(entry.get("status") or "").upper()
        if status not in RUNNING and status != InstanceStatus.STOPPED:
            continue
        price, source, note = prices.price(ctx, None, entry.get("instance_type"), lookup=False)
        running = status in RUNNING
        out.append({"instance": entry.get("name"), "status": status, "instance_type": entry.get("instance_type"),
                    "bills": "compute and disk" if running else "disk only (stopped)", "ours": entry.get("name") in ours,
                    "usd_per_hour": price if running else None, "price_source": source if running else None,
                    "price_note": note if running else "a stopped instance bills its disk only (brev's "
                                                       "storage price, not listed here)"})
    return out


def _interval(job: JobLine) -> Optional[tuple[datetime, datetime]]:
    """The instance time a job's ``billed_s`` counts, as one interval on this machine's clock: it
    ends where its billing ended (submit + billed_s - the start and pull parts before the submit)."""
    submitted, billed = cost.parse_ts(job["submitted_at"]), job["billed_s"]
    if submitted is None or billed is None:
        return None
    parts = job.get("billed_parts") or {}
    before = (parts.get("start_s") or 0) + (parts.get("image_pull_s") or 0)
    end = submitted + timedelta(seconds=billed - before)
    return end - timedelta(seconds=billed), end


def _union_s(intervals: list[tuple[datetime, datetime]]) -> float:
    out, reach = 0.0, None
    for start, end in sorted(intervals):
        if reach is not None and start < reach:
            start = reach
        if end > start:
            out += (end - start).total_seconds()
            reach = end
    return round(out, 3)


def per_instance(jobs: list[JobLine]) -> list[InstanceTotal]:
    """Per instance: its jobs, the union of their billed intervals (``billed_s``: overlapping time
    counted once), the sum of their own figures (``jobs_billed_s``) and the price of the instance
    (a job's explicit price, else brev's of its type: one instance, one price)."""
    out: list[InstanceTotal] = []
    for name in sorted({j["instance"] or "" for j in jobs}):
        mine = [j for j in jobs if (j["instance"] or "") == name]
        spans = [span for span in map(_interval, mine) if span is not None]
        billed = _union_s(spans)
        priced = next((j for j in mine if j["price_per_hour_usd"] is not None), None)
        price = priced["price_per_hour_usd"] if priced else None
        out.append({"instance": name or None, "jobs": [j["job_id"] for j in mine], "billed_s": billed,
                    "jobs_billed_s": round(sum(j["billed_s"] or 0 for j in mine), 3),
                    "usd_per_hour": price, "price_source": priced["price_source"] if priced else None,
                    "estimated_cost_usd": round(billed / 3600 * price, 4) if price is not None else None})
    return out


def report(ctx: Context, since: Optional[str] = None, instance: Optional[str] = None) -> tuple[CostReport, int]:
    """The answer (see the module doc); exit 0 (also when brev could not be reached)."""
    start = parse_since(since)
    if instance is not None:
        check_instance(instance)
    listing, why = _listing(ctx)
    prices.catalog(ctx, lookup=listing is not None)   # one brev search per day at most
    types: dict[str, str] = {e["name"]: e["instance_type"] for e in listing or []   # a nameless entry: none
                             if e.get("instance_type") and isinstance(e.get("name"), str)}
    jobs: list[JobLine] = []
    never: list[NeverLaunched] = []
    for side in sorted(ctx.sidecars.all(), key=lambda s: str(s.job_id)):
        if not side.job_id or (instance is not None and side.instance != instance):
            continue
        line = _job_line(ctx, side, types)
        if line is None or (start is not None and (cost.parse_ts(line["submitted_at"]) or start) < start):
            continue
        if side.never_ran:   # refused, never launched: nothing ran, $0 (not a cost line)
            never.append({"job_id": line["job_id"], "instance": line["instance"],
                          "code": (side.launch or {}).get("code") or ((side.launch or {}).get("error") or {}).get("code"),
                          "billed_s": 0.0, "estimated_cost_usd": 0.0})
            continue
        jobs.append(line)
    instances = per_instance(jobs)
    priced = [i for i in instances if i["estimated_cost_usd"] is not None]
    total: Total = {"jobs": len(jobs), "billed_s": round(sum(i["billed_s"] for i in instances), 3),
             "estimated_cost_usd": round(sum(i["estimated_cost_usd"] or 0.0 for i in priced), 4),
             "instances": instances,
             "unpriced_jobs": [j["job_id"] for j in jobs if j["estimated_cost_usd"] is None],
             "still_billing_jobs": [j["job_id"] for j in jobs if j["still_billing"]],
             "price_sources": sorted({i["price_source"] for i in priced if i["price_source"] is not None}),
             "note": "estimates from brev's listed hourly prices (the Brev console is authoritative); an "
                     "instance's time is counted once however many jobs shared it (total.instances)"}
    answer: CostReport = {"ok": True, "since": start.isoformat() if start else None, "instance": instance, "jobs": jobs,
              "total": total, "never_launched": never}
    # ``ours`` as the orphans answer it: a job of this state dir ran on the instance as it is now
    # (jobs on an earlier instance of that name, which a teardown deleted, left out: teardown.jobs_on)
    ours = {j.instance for j in ctx.sidecars.all() if j.instance and j.job_id and not j.instance_deleted_at}
    if listing is None:
        answer.update({"billing_now": None, "billing_now_note": why})
    else:
        now = [b for b in _billing_now(ctx, listing, ours) if instance is None or b["instance"] == instance]
        answer["billing_now"] = now
        answer["usd_per_hour_now"] = round(sum(b["usd_per_hour"] or 0 for b in now), 4)
    known = sorted(ours | set(types) | {str(e.get("name")) for e in listing or [] if e.get("name")})
    if instance is not None and not jobs and instance not in known:   # a typo: the closest name, the call corrected
        near = instance_names.closest(instance, known, n=1)
        answer["instance_note"] = instance_names.unknown_message(instance, known) + " (no job of this state dir ran on it)"
        if near:
            answer["did_you_mean"] = {instance: near[0]}
            argv = ["cost", "--instance", near[0]] + (["--since", since] if since else [])
            answer.update({"next": nextstep.command("tao_job_record.py", *argv), "next_note": answer["instance_note"]})
            return answer, 0
    answer.update(_next(answer))
    return answer, 0


def _next(answer: CostReport) -> NextStep:
    """``next``: the orphan check when a running instance bills, else nothing to run."""
    running = [b for b in answer.get("billing_now") or []
               if b["usd_per_hour"] is not None or b["status"] != InstanceStatus.STOPPED]
    if running:
        return {"next": nextstep.command("teardown.py", "--orphans"),
                "next_note": "instances bill now: the orphan check lists those no live job uses (--stop or "
                             "--delete with --instance NAME acts on one)"}
    return {"next": None, "next_note": "nothing to run: a report only (no instance bills compute now)"
            if answer.get("billing_now") is not None else "nothing to run: a report only"}
