"""A job's cost facts in process (``tao_brev.cost``): docker's StartedAt / FinishedAt noted by the
poll that reads them, billed seconds and dollars from the price given or learnt from brev."""

from __future__ import annotations

import pytest

from tao_brev import cost
from tao_brev.errors import TaoBrevError
from tao_brev.verbs import status
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, launched, poll_sections, state


def finished(ctx, fake_brev, **kw) -> tuple[str, dict]:
    job_id = launched(ctx, fake_brev, no_spec_check=True, **kw)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(poll_sections(job_id, state(
        "exited", 0, StartedAt="2026-12-01T10:00:00.5Z", FinishedAt="2026-12-01T10:45:00.5Z"))))
    answer, code = status.poll(ctx, job_id)
    assert code == 0 and answer["state"] == "COMPLETE", answer
    return job_id, answer["cost"]


def test_a_reused_instance_bills_the_job_its_run_at_the_price_given(ctx, fake_brev):
    job_id, facts = finished(ctx, fake_brev, price_per_hour=2.0)
    assert facts["run_s"] == 2700.0 and facts["billed_s"] == 2700.0, facts
    assert facts["estimated_cost_usd"] == pytest.approx(1.5) and facts["price_per_hour_usd"] == 2.0
    assert facts["owned"] is False
    assert facts["running_at"].startswith("2026-12-01T10:00:00.5") and facts["ended_at"].startswith("2026-12-01T10:45")
    again = cost.facts(ctx, job_id, owned=False)   # read again from what the poll noted: the same
    assert {k: again[k] for k in ("run_s", "billed_s", "estimated_cost_usd")} == \
        {k: facts[k] for k in ("run_s", "billed_s", "estimated_cost_usd")}


def test_without_a_price_the_dollars_are_unknown_and_the_note_says_how_to_give_one(ctx, fake_brev):
    _, facts = finished(ctx, fake_brev, instance_type="x9.unlisted")   # neither brev search nor prices.yaml
    assert facts["billed_s"] == 2700.0 and facts["estimated_cost_usd"] is None, facts
    assert "--price-per-hour" in facts["price_note"]


@pytest.mark.parametrize("price", [-1.0, float("nan"), float("inf"), 10 ** 9])
def test_an_impossible_price_is_bad_input(price):
    with pytest.raises(TaoBrevError) as raised:
        cost.check_price(price)
    assert raised.value.exit_code == 2


def test_seconds_between_two_times_is_never_negative_and_none_when_one_is_missing():
    from tao_brev.isotime import parse_ts

    a, b = parse_ts("2026-12-01T10:00:00Z"), parse_ts("2026-12-01T10:00:30.250Z")
    assert cost.seconds(a, b) == 30.25 and cost.seconds(a, None) is None and cost.seconds(b, a) == 0.0


def test_a_delete_never_makes_a_reused_instance_owned(ctx, fake_brev):
    """Ownership is who created the instance: a user's instance the bundle deleted stays not owned,
    though its time up to the delete is billed to the job."""
    job_id, facts = finished(ctx, fake_brev, price_per_hour=2.0)
    assert facts["owned"] is False
    ctx.sidecars.update(job_id, instance_deleted_at="2026-12-01T11:00:00.000+00:00")
    after = cost.facts(ctx, job_id, owned=False, lookup=False)
    assert after["owned"] is False, after
    assert after["billed_parts"]["until"] == "instance deleted by the bundle"
