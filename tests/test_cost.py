"""Cost facts never mix the laptop's clock with the instance's; docker's timestamps parse on every Python."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import validate
from tao_brev import cost, isotime
from tao_brev.context import Context
from tao_brev.fsio import atomic_write_json

UTC = timezone.utc
T0 = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)   # the submit, on this machine's clock


@pytest.mark.parametrize("text, expected", [
    ("2024-05-01T12:00:00.5Z", datetime(2024, 5, 1, 12, 0, 0, 500000, tzinfo=UTC)),
    ("2024-05-01T12:00:00.1234Z", datetime(2024, 5, 1, 12, 0, 0, 123400, tzinfo=UTC)),
    ("2024-05-01T12:00:00.12Z", datetime(2024, 5, 1, 12, 0, 0, 120000, tzinfo=UTC)),
    ("2024-05-01T12:00:00Z", datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)),
    ("2024-05-01T12:00:00.123456789Z", datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)),
    ("2024-05-01T12:00:00.5+02:00", datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC)),
    ("2026-11-29T16:57:47.298+00:00", datetime(2026, 11, 29, 16, 57, 47, 298000, tzinfo=UTC)),
    ("2026-11-29T16:57:47", datetime(2026, 11, 29, 16, 57, 47, tzinfo=UTC)),
])
def test_docker_rfc3339nano_times_parse_whatever_their_fraction(text, expected):
    assert isotime.parse_ts(text) == expected


@pytest.mark.parametrize("text", [None, "", "0001-01-01T00:00:00Z", "yesterday", "2024-13-01T00:00:00Z"])
def test_unset_or_unreadable_times_are_none(text):
    assert isotime.parse_ts(text) is None


def _iso(ts: datetime) -> str:
    return ts.isoformat(timespec="seconds")


def job_with_clocks(tmp_path: Path, instance_offset: timedelta, run: timedelta = timedelta(minutes=30)):
    """A reused-instance job submitted at T0, started 10 s later and run for ``run``, as its record
    (this machine's marks) and its sidecar (docker's times, ``instance_offset`` off) say."""
    ctx = Context(env={"TAO_STATE_DIR": str(tmp_path / "state")})
    record = ctx.records.open(image="img:1", network_arch="visual_changenet", action="train",
                              storage_tier="A", results_root="~/tao-results")
    job_id = record["id"]
    ctx.records.mark(job_id, "RUNNING", message="container started", source="agent", backend_ref=f"box/{job_id}")
    ctx.records.mark(job_id, "COMPLETE", message="docker status exited, exit code 0", source="poller")
    path = ctx.state_root / "jobs" / f"{job_id}.json"
    data = json.loads(path.read_text())
    data["submitted_at"] = _iso(T0)
    marks = [T0, T0 + timedelta(seconds=11), T0 + timedelta(seconds=10) + run + timedelta(seconds=25)]
    for transition, ts in zip(data["transitions"], marks):
        transition["ts"] = _iso(ts)
    atomic_write_json(path, data)
    started, finished = T0 + timedelta(seconds=10) + instance_offset, T0 + timedelta(seconds=10) + run + instance_offset
    ctx.sidecars.update(job_id, instance="box", cost={
        "submitted_at": T0.isoformat(timespec="milliseconds"),
        "started_at": started.strftime("%Y-%m-%dT%H:%M:%S.5Z"), "finished_at": finished.strftime("%Y-%m-%dT%H:%M:%S.5Z")})
    return ctx, job_id


@pytest.mark.parametrize("offset_h", [-1, 0, 1])
def test_an_instance_clock_off_by_an_hour_changes_no_duration(tmp_path, offset_h):
    ctx, job_id = job_with_clocks(tmp_path, timedelta(hours=offset_h))
    facts = cost.facts(ctx, job_id, owned=False, price_per_hour=3.6, lookup=False)
    validate("cost", facts)
    assert facts["run_s"] == 1800.0                     # docker - docker
    assert facts["submit_to_running_s"] == 11.0         # here - here
    assert 1800 < facts["billed_s"] <= 1800 + 11 + 25   # here: submit -> the job's end seen here
    assert facts["estimated_cost_usd"] == round(facts["billed_s"] / 3600 * 3.6, 4) > 0
    if offset_h == 0:
        assert facts["clock_skew_s"] is None
    else:
        assert facts["clock_skew_s"] == pytest.approx(offset_h * 3600, abs=40)


def test_a_job_on_an_instance_whose_clock_is_behind_bills_its_time_on_the_simulator(world):
    world.sim.set_instance("box", clock_offset_s=-3600)
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.3}))
    assert sub.code == 0, sub
    wait = world.run("poll_status.py", sub.json["job_id"], "--wait", "--interval", "0.2", "--timeout", "60")
    assert wait.code == 0, wait
    facts = wait.json["cost"]
    validate("cost", facts)
    assert facts["run_s"] >= 0.9 and facts["billed_s"] >= facts["run_s"]
    assert facts["clock_skew_s"] is not None and facts["clock_skew_s"] < -3000


def test_whole_second_marks_never_bill_less_than_dockers_run_time(tmp_path):
    """The record's marks are truncated to the second: a RUNNING mark 0.9 s early plus docker's run
    time ends before the container did; the bill is still at least submit -> submit + run."""
    ctx, job_id = job_with_clocks(tmp_path, timedelta(0), run=timedelta(seconds=0.3))
    path = ctx.state_root / "jobs" / f"{job_id}.json"
    data = json.loads(path.read_text())
    data["transitions"][1]["ts"] = _iso(T0)                                  # RUNNING mark truncated to T0
    data["transitions"][2]["ts"] = _iso(T0 + timedelta(seconds=11))
    atomic_write_json(path, data)
    ctx.sidecars.update(job_id, cost={"submitted_at": (T0 + timedelta(seconds=0.9)).isoformat(timespec="milliseconds"),
                                      "started_at": "2026-05-01T12:00:01.0Z", "finished_at": "2026-05-01T12:00:01.3Z"})
    facts = cost.facts(ctx, job_id, owned=False, price_per_hour=None, lookup=False)
    assert facts["run_s"] == pytest.approx(0.3)
    assert facts["billed_s"] >= facts["run_s"], facts    # was 0.0 + 0.3 - 0.9 < run_s before the bound


def test_billed_parts_name_each_part_the_bundle_caused(tmp_path):
    ctx, job_id = job_with_clocks(tmp_path, timedelta(0), run=timedelta(minutes=10))
    reused = cost.facts(ctx, job_id, owned=False, price_per_hour=2.0, lookup=False)
    validate("cost", reused)
    assert reused["billed_parts"]["start_s"] is None and reused["billed_parts"]["idle_s"] is None
    assert reused["billed_parts"]["until"].startswith("job end") and reused["billed_parts"]["job_s"] == reused["billed_s"]
    # the bundle started it 90 s before the submit, pulled for 30 s, and stopped it 60 s after the job ended
    ctx.sidecars.note_instance("box", last_start_at=(T0 - timedelta(seconds=120)).isoformat(), last_start_s=90.0,
                               last_pull_at=(T0 - timedelta(seconds=30)).isoformat(), last_pull_s=30.0)
    end = cost.facts(ctx, job_id, owned=False, price_per_hour=2.0, lookup=False)["ended_at"]
    stop = cost.parse_ts(end) + timedelta(seconds=60)
    ctx.sidecars.update(job_id, instance_stopped_at=stop.isoformat())
    caused = cost.facts(ctx, job_id, owned=False, price_per_hour=2.0, lookup=False)
    validate("cost", caused)
    parts = caused["billed_parts"]
    assert (parts["start_s"], parts["image_pull_s"], parts["until"]) == (90.0, 30.0, "instance stopped by the bundle")
    assert parts["idle_s"] == pytest.approx(60, abs=26) and caused["still_billing"] is False
    assert caused["billed_s"] == pytest.approx(90 + 30 + parts["job_s"] + parts["idle_s"], abs=0.01)
    # a stop between that start and the submit: the start was not this job's
    ctx.sidecars.note_instance("box", stopped_at=(T0 - timedelta(seconds=10)).isoformat())
    assert cost.facts(ctx, job_id, owned=False, price_per_hour=2.0, lookup=False)["billed_parts"]["start_s"] is None


@pytest.mark.parametrize("last_state", ["RUNNING", "ERROR"])
def test_a_recovery_chain_is_priced_when_one_attempt_is(tmp_path, last_state):
    """The chain's total adds up: a live attempt, or one whose type this state dir never learnt,
    is priced like the attempt before it on the same instance (one instance, one type)."""
    from tao_brev.verbs import recovery_chain
    ctx = Context(env={"TAO_STATE_DIR": str(tmp_path)})
    ids = [ctx.records.open(image="i", network_arch="visual_changenet", action="train", storage_tier="A",
                            results_root="~/r")["id"] for _ in range(2)]
    for job in ids:
        ctx.sidecars.update(job, instance="box")
        ctx.records.mark(job, "RUNNING", message="up", source="agent")
    ctx.records.mark(ids[0], "ERROR", message="x", source="agent")
    if last_state == "ERROR":
        ctx.records.mark(ids[1], "ERROR", message="x", source="agent")
    cost.note_price(ctx, ids[0], 3.6)
    ctx.sidecars.update(ids[0], recovery={"chain": [{"job_id": ids[0], "attempt": 1},
                                                    {"job_id": ids[1], "attempt": 2}]})
    first = cost.facts(ctx, ids[0], owned=False, lookup=False)
    assert first["estimated_cost_usd"] is not None
    out = recovery_chain.chain_cost(ctx, ids[0])
    assert out["billed_s"] is not None and out["estimated_cost_usd"] is not None, out
    assert out["estimated_cost_usd"] == pytest.approx(out["billed_s"] / 3600 * 3.6, abs=1e-3)
