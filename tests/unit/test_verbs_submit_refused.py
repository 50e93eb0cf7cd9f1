"""A submit refused before launch, in process: it costs nothing (0 s, $0 in its cost facts; the cost
report leaves it out of its job lines and totals and names it under ``never_launched``), and stderr
says it was refused, after the line that said it was launching."""

from __future__ import annotations

from datetime import timedelta

from tao_brev import cost
from tao_brev.verbs import cost_report
from tao_brev.verbs.submit import outcome
from tests.unit.jobs import entry, expect_catalog, launched, refused_busy


def refused(ctx, fake_brev, busy: str) -> str:
    """A second submit on box, refused GPUS_BUSY by the launch script; returns its job id."""
    return refused_busy(ctx, fake_brev, f"{outcome.GPUS_BUSY} {busy}=all\n", price_per_hour=3.6).details["answer"]["job_id"]


def test_a_refused_submit_bills_nothing(ctx, fake_brev):
    busy = launched(ctx, fake_brev, no_spec_check=True)
    job = refused(ctx, fake_brev, busy)
    submitted = cost.parse_ts(ctx.sidecars.load(job).cost["submitted_at"])
    ctx.sidecars.update(job, cost={"submitted_at": (submitted - timedelta(seconds=5)).isoformat()})   # the round trip
    facts = cost.facts(ctx, job, owned=False, lookup=False)
    assert facts["billed_s"] == 0 and facts["estimated_cost_usd"] == 0, facts
    assert facts["billed_parts"]["job_s"] == 0 and "never launched" in facts["billed_parts"]["until"], facts


def test_the_cost_report_leaves_a_refused_submit_out_and_names_it(ctx, fake_brev):
    busy = launched(ctx, fake_brev, no_spec_check=True, price_per_hour=3.6)
    job = refused(ctx, fake_brev, busy)
    fake_brev.expect_ls(entry())
    expect_catalog(fake_brev)
    answer, code = cost_report.report(ctx)
    assert code == 0, answer
    assert [j["job_id"] for j in answer["jobs"]] == [busy], answer
    assert answer["total"]["jobs"] == 1 and answer["total"]["instances"][0]["jobs"] == [busy]
    assert answer["never_launched"] == [{"job_id": job, "instance": "box", "code": "GPUS_BUSY",
                                         "billed_s": 0.0, "estimated_cost_usd": 0.0}], answer


def test_stderr_says_the_submit_was_refused_after_launching(ctx, fake_brev, capsys):
    busy = launched(ctx, fake_brev, no_spec_check=True)
    capsys.readouterr()
    job = refused(ctx, fake_brev, busy)
    lines = capsys.readouterr().err.splitlines()
    launching = next(i for i, line in enumerate(lines) if "launching on box" in line)
    after = lines[launching + 1:]
    assert any(f"{job} refused" in line and "GPUS_BUSY" in line and "nothing was launched" in line
               for line in after), lines
