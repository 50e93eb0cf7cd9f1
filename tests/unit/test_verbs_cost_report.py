"""tao_job_record.py cost in process: billed time and dollars across jobs, and what bills now."""

from __future__ import annotations

from tao_brev.verbs import cost_report
from tests.unit.jobs import entry, expect_catalog, launched


def test_the_report_prices_each_job_and_names_what_bills_now(ctx, fake_brev):
    first = launched(ctx, fake_brev)
    second = launched(ctx, fake_brev, instance="gpu2", price_per_hour=2.5)
    fake_brev.expect_ls(entry("box"), entry("gpu2", status="STOPPED"))
    expect_catalog(fake_brev)
    answer, code = cost_report.report(ctx)
    assert code == 0 and answer["ok"] is True, answer
    assert [j["job_id"] for j in answer["jobs"]] == sorted([first, second])
    assert answer["total"]["jobs"] == 2 and answer["instance"] is None
    now = {b["instance"]: b for b in answer["billing_now"]}
    assert now["box"]["usd_per_hour"] == 1.006
    assert answer["next"].endswith("teardown.py --orphans")


def test_brev_unreachable_still_answers_from_the_records(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect("ls", "--json", stderr='Get "https://brevapi.us-west-2-prod.control-plane.brev.dev/api/x": EOF\n',
                     exit=1, times=3)   # the Brev API's own failure: retried, then given up
    answer, code = cost_report.report(ctx, instance="box")
    assert code == 0 and answer["ok"] is True and [j["job_id"] for j in answer["jobs"]] == [job_id], answer
    assert answer["billing_now"] is None and answer["billing_now_note"]
    assert answer["next"] is None


def test_a_bad_since_is_bad_input(ctx, fake_brev):
    import pytest

    from tao_brev.errors import TaoBrevError

    with pytest.raises(TaoBrevError) as raised:
        cost_report.report(ctx, since="last tuesday-ish")
    assert raised.value.exit_code == 2 and fake_brev.calls == []


def _at(seconds: float) -> str:
    from datetime import datetime, timedelta, timezone

    base = datetime(2026, 12, 1, 10, 0, tzinfo=timezone.utc)
    return (base + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def test_jobs_sharing_an_owned_instance_bill_its_time_once(ctx, fake_brev):
    """Three jobs on one owned instance, submitted 0 / 60 / 120 s after its start, deleted at 217 s:
    the total is the instance's 217 s, not each job's submit -> delete summed (217 + 157 + 97);
    a job on another instance adds its own time."""
    ids = [launched(ctx, fake_brev, ephemeral=True) for _ in range(3)]
    other = launched(ctx, fake_brev, instance="gpu2", ephemeral=True)
    for job_id, submitted in zip(ids, (0, 60, 120)):
        ctx.sidecars.update(job_id, cost={"submitted_at": _at(submitted), "price_flag_usd": 3.6},
                            instance_deleted_at=_at(217))
    ctx.sidecars.update(other, cost={"submitted_at": _at(100), "price_flag_usd": 3.6}, instance_deleted_at=_at(200))
    fake_brev.expect_ls()
    expect_catalog(fake_brev)
    answer, code = cost_report.report(ctx)
    assert code == 0, answer
    assert sorted(j["billed_s"] for j in answer["jobs"] if j["instance"] == "box") == [97.0, 157.0, 217.0]
    per = {i["instance"]: i for i in answer["total"]["instances"]}
    assert per["box"]["billed_s"] == 217.0 and sorted(per["box"]["jobs"]) == sorted(ids)
    assert per["gpu2"]["billed_s"] == 100.0
    assert answer["total"]["billed_s"] == 317.0
    assert answer["total"]["estimated_cost_usd"] == round(317 / 3600 * 3.6, 4)
    fake_brev.expect_ls()
    single, _ = cost_report.report(ctx, instance="box")
    assert single["total"]["billed_s"] == 217.0


def test_ours_and_owned_mean_what_the_orphans_mean(ctx, fake_brev):
    """One meaning, one name: billing_now's ``ours`` (a job of this state dir ran on the instance as it
    is now) and the cost facts' ``owned`` (the bundle created it; a delete never changes it)."""
    from tao_brev.verbs.instance_jobs import created_by_bundle

    made = launched(ctx, fake_brev, instance="eph", ephemeral=True)
    reused_there = launched(ctx, fake_brev, instance="eph")          # a second job on the bundle's instance
    users = launched(ctx, fake_brev, instance="box")
    for job_id in (made, reused_there):
        ctx.sidecars.update(job_id, instance_deleted_at=_at(300))   # the bundle deleted eph
    assert [created_by_bundle(ctx, ctx.sidecars.load(j)) for j in (made, reused_there, users)] == [True, True, False]
    # a new instance took the name eph: no job of this state dir ran on it
    fake_brev.expect_ls(entry("eph"), entry("box"))
    expect_catalog(fake_brev)
    answer, code = cost_report.report(ctx)
    assert code == 0, answer
    assert {b["instance"]: b["ours"] for b in answer["billing_now"]} == {"eph": False, "box": True}
    assert "instance_owned" not in str(answer)


def test_a_brev_row_without_a_name_is_left_out_not_a_crash(ctx, fake_brev):
    """brev ls may print a row with an instance type and no name (a workspace being created): the
    report leaves it out of the name -> type table (it once put a None key among the names and the
    sort raised INTERNAL_ERROR); the row still bills, so billing_now still shows it, unnamed."""
    job_id = launched(ctx, fake_brev)
    before = ctx.records.load(job_id)
    nameless = {k: v for k, v in entry("ghost").items() if k != "name"}
    fake_brev.expect_ls(entry("box"), nameless)
    expect_catalog(fake_brev)
    answer, code = cost_report.report(ctx)
    assert code == 0 and answer["ok"] is True, answer
    assert [j["job_id"] for j in answer["jobs"]] == [job_id]
    assert [b["instance"] for b in answer["billing_now"]] == ["box", None]
    assert ctx.records.load(job_id) == before   # the report reads records, it never writes one
