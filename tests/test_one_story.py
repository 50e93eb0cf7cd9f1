"""One story per answer: wherever an answer (or an answer nested in it) names the job's state, it
is the record's, on every verb and every terminal path; a request that was carried out is not a
failure (the stall teardown asked for with --stall-after answers ok, the job CANCELED)."""

from __future__ import annotations

import json
import os

import pytest

from conftest import EXAMPLE_DATA, validate
from test_progress import _wait_for_epoch
from tests.s3world import s3world  # noqa: F401  (fixture)

WAIT = ("--wait", "--interval", "0.2", "--timeout", "60")


def states(answer) -> list:
    """Every ``state`` / ``terminal_state`` an answer names for the job (its own and nested answers)."""
    found = []
    if isinstance(answer, dict):
        for key, value in answer.items():
            if key in ("state", "terminal_state") and isinstance(value, (str, type(None))):
                found.append(value)
            elif key not in ("progress", "observed", "observed_before_teardown", "jobs", "hint", "stall"):
                found += states(value)
    elif isinstance(answer, list):
        for item in answer:
            found += states(item)
    return found


def record_state(world, job: str) -> str:
    shown = world.run("tao_job_record.py", "show", job)
    return json.loads(shown.stdout)["terminal_state"]


def agree(world, job: str, answer: dict, schema: str) -> str:
    validate(schema, answer)
    final = record_state(world, job)
    assert set(states(answer)) == {final}, (final, states(answer), answer)
    return final


RUNNING_WORDS = ("RUNNING", "STARTED", "PENDING")


def assert_one_story(answer: dict) -> None:
    """No nested state, status or verified field contradicts the top level: a terminal answer shows
    no running observation or progress status as the job now, and its results' ``verified`` is
    the same wherever it is said (the top level, the teardown's, the stall teardown's)."""
    state = answer["state"]
    if state in ("COMPLETE", "ERROR", "CANCELED"):
        assert (answer.get("observed") or {}).get("state", state) not in RUNNING_WORDS, answer
        assert "status" not in (answer.get("progress") or {}), answer["progress"]   # TAO's word: last_tao_status
        for nested in (answer.get("teardown"), answer.get("stall_teardown")):
            if nested and nested.get("state"):
                assert nested["state"] == state, (state, nested)
    said = [part["results"]["verified"] for part in (answer, answer.get("teardown") or {},
                                                      answer.get("stall_teardown") or {})
            if isinstance(part.get("results"), dict) and "verified" in part["results"]]
    assert len(set(said)) <= 1, (said, answer)


def _age_status(world, job: str, seconds: float) -> None:
    results = world.sim.instance_home("box") / "tao-results" / job
    for path in results.rglob("status.json"):
        old = path.stat().st_mtime - seconds
        os.utime(path, (old, old))
    world.sim.backdate_container_logs("box", job, seconds)


@pytest.mark.parametrize("simulate, final", [
    ({"epoch_seconds": 0.05}, "COMPLETE"),
    ({"epoch_seconds": 0.05, "cuda_oom": True}, "ERROR"),
], ids=["complete", "error"])
def test_wait_teardown_tells_one_state_on_every_ending(world, simulate, final):
    job = world.submit(spec=world.spec(simulate)).json["job_id"]
    done = world.run("poll_status.py", job, *WAIT, "--teardown")
    assert agree(world, job, done.json, "poll_status") == final
    again = world.run("poll_status.py", job)
    assert agree(world, job, again.json, "poll_status") == final
    down = world.run("teardown.py", job)
    assert agree(world, job, down.json, "teardown") == final


def test_the_requested_stall_teardown_is_done_canceled_and_ok(world):
    job = world.submit(spec=world.spec({"epoch_seconds": 0.05, "hang_after_epoch": 1}, num_epochs=5)).json["job_id"]
    _wait_for_epoch(world, job, 1)   # its last line before the hang: aged now, nothing newer follows
    _age_status(world, job, 900)
    done = world.run("poll_status.py", job, *WAIT, "--teardown", "--stall-after", "600")
    assert done.code == 0 and done.json["ok"] is True, done
    assert agree(world, job, done.json, "poll_status") == "CANCELED"
    assert done.json["stall_teardown"]["stalled_s"] >= 600


def test_teardown_of_a_running_job_and_the_polls_after_it_agree(world):
    job = world.submit(spec=world.spec({"epoch_seconds": 5}, num_epochs=20)).json["job_id"]
    down = world.run("teardown.py", job)
    assert down.code == 0 and agree(world, job, down.json, "teardown") == "CANCELED"
    polled = world.run("poll_status.py", job)
    assert agree(world, job, polled.json, "poll_status") == "CANCELED"
    waited = world.run("poll_status.py", job, *WAIT, "--teardown")
    assert agree(world, job, waited.json, "poll_status") == "CANCELED"


def test_a_wait_teardown_on_a_deleted_instance_says_teardown_closes_the_record_not_cancels(world):
    from test_robustness import brev_cli

    job = world.submit(spec=world.spec({"epoch_seconds": 5}, num_epochs=20)).json["job_id"]
    brev_cli(world, "delete", "box")
    waited = world.run("poll_status.py", job, *WAIT, "--teardown")
    assert waited.json["state"] == "UNKNOWN" and waited.json["observed"]["gone"] == "instance", waited
    assert "close its record (its instance is gone)" in waited.json["teardown_skipped"], waited
    assert "to cancel it" not in waited.json["teardown_skipped"]


def test_a_dead_container_closes_the_job_error_and_its_results_are_collected(world):
    job = world.submit(spec=world.spec({"epoch_seconds": 5}, num_epochs=20)).json["job_id"]
    world.sim.set_container_state("box", job, Status="dead", Running=False, Dead=True, ExitCode=137)
    polled = world.run("poll_status.py", job)
    assert polled.json["state"] == "ERROR" and polled.json["hint"]["err_class"] == "ERR_INFRA", polled
    done = world.run("poll_status.py", job, *WAIT, "--teardown")
    assert agree(world, job, done.json, "poll_status") == "ERROR"
    assert done.json["teardown"]["container_removed"] is True, done


def test_submit_and_poll_all_tell_each_jobs_record_state(world):
    ok = world.submit(spec=world.spec({"epoch_seconds": 5}, num_epochs=20))
    assert ok.json["state"] == "RUNNING" and record_state(world, ok.json["job_id"]) is None   # not terminal yet
    refused = world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train", "--spec", str(world.spec()),
                        "--inputs", "/root/not-there=levir_cd_tiny")
    assert agree(world, refused.json["job_id"], refused.json, "submit") == "ERROR"
    everything = world.run("poll_status.py", "--all")
    validate("poll_status", everything.json)
    for entry in everything.json["jobs"]:
        assert set(states(entry)) <= {"RUNNING", None}, entry
    world.run("teardown.py", ok.json["job_id"])


@pytest.mark.parametrize("refusal", ["INPUT_NOT_FOUND", "GPUS_BUSY", "IMAGE_NOT_PULLED"])
def test_a_submit_refused_before_launch_leaves_nothing_to_clean_up(world, refusal):
    """A launch the instance refused before ``docker run`` closed its record itself: ``--all``
    stays ok, the caller's own mistake is never ERR_INFRA, and the cost's times run forward."""
    from tao_brev.isotime import parse_ts
    extra, instance = [], "box"
    if refusal == "GPUS_BUSY":
        holder = world.submit(spec=world.spec({"epoch_seconds": 30}))
        assert holder.code == 0, holder
    elif refusal == "INPUT_NOT_FOUND":
        extra = ["--inputs", "~/tao-data/not-there=levir_cd_tiny"]
    else:
        world.sim.add_instance("bare")
        instance = "bare"
    refused = world.submit(*extra, instance=instance) if not extra else world.run(
        "submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
        "--action", "train", "--spec", str(world.spec()), *extra)
    assert refused.code == 1 and refused.json["error"]["code"] == refusal, refused
    job = refused.json["job_id"]
    record = json.loads(world.run("tao_job_record.py", "show", job).stdout)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_PROGRAM", record
    everything = world.run("poll_status.py", "--all")
    assert everything.code == 0 and everything.json["ok"] is True, everything
    assert job not in [entry["job_id"] for entry in everything.json["jobs"]]
    cost = world.run("poll_status.py", job).json["cost"]
    assert parse_ts(cost["ended_at"]) >= parse_ts(cost["submitted_at"]), cost


def test_the_stall_teardown_of_a_tier_b_job_tells_one_story(s3world):
    """A hung tier B job (results to S3) stopped by ``--wait --teardown --stall-after``: what the
    answer shows as the job now is after the teardown (no RUNNING observation, the results as the
    teardown's upload verified them), and ``stall_teardown`` names the instance path as such."""
    world = s3world.world
    spec = world.spec({"epoch_seconds": 0.05, "hang_after_epoch": 2}, num_epochs=5)
    sub = s3world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                      "--network-arch", "visual_changenet", "--action", "train", "--spec", str(spec),
                      "--storage-tier", "B", "--inputs", f"{EXAMPLE_DATA}=levir_cd_tiny", schema="submit")
    job = sub.json["job_id"]
    _wait_for_epoch(world, job, 2)
    _age_status(world, job, 900)
    done = world.run("poll_status.py", job, *WAIT, "--teardown", "--stall-after", "45", "--logs", "50")
    assert done.code == 0 and done.json["ok"] is True, done
    assert agree(world, job, done.json, "poll_status") == "CANCELED"
    assert_one_story(done.json)
    story = done.json["stall_teardown"]
    assert done.json["observed_before_teardown"]["state"] == "RUNNING", done.json   # said as from before
    assert done.json["observed"] == {"state": "CANCELED", "message": "container removed by teardown",
                                     "gone": "container"}, done.json["observed"]
    assert done.json["results"]["verified"] is True, done.json["results"]
    on_instance = story["results_dir_on_instance"]
    assert on_instance and not on_instance.startswith("s3://"), story
    assert story["results_destination"] == done.json["results"]["destination"], story
    assert story["results_destination"].startswith("s3://"), story


def test_a_complete_poll_tells_one_story(world):
    job = world.submit(spec=world.spec({"epoch_seconds": 0.05})).json["job_id"]
    done = world.run("poll_status.py", job, *WAIT)
    assert done.code == 0 and agree(world, job, done.json, "poll_status") == "COMPLETE"
    assert_one_story(done.json)
    assert done.json["progress"].get("finished") is True, done.json["progress"]
    again = world.run("poll_status.py", job)
    assert_one_story(again.json)
    down = world.run("poll_status.py", job, *WAIT, "--teardown")
    assert_one_story(down.json)
