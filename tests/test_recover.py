"""poll_status.py JOB_ID --wait --recover N (tao_brev/verbs/recover.py), end to end on the simulator.

A train hit by an Xid resumes from its last checkpoint (only the later epochs run again); a
program error is never recovered; the attempt limit stops the chain and says so; an instance
deleted under a job recovers on the fallback instance from S3 (tier B) or says why it cannot
(tier A); the budget stops the chain; every answer of the first job shows the chain.
"""

from __future__ import annotations

import json
import sys

import pytest

from conftest import validate
from test_robustness import brev_cli, records, sidecars
from tests.s3world import s3world  # noqa: F401  (fixture)

from tao_brev.verbs import recover

FAST = ("--interval", "0.2", "--timeout", "90", "--health-wait", "2")


def _checkpoints(sim, job_id: str, instance: str = "box") -> list[str]:
    out = sim.instance_home(instance) / "tao-results" / job_id / "train"
    return sorted(p.name for p in out.glob("model_epoch_*.pth")) if out.is_dir() else []


def _epochs_run(sim, job_id: str, instance: str = "box") -> list[int]:
    path = sim.instance_home(instance) / "tao-results" / job_id / "train" / "status.json"
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [line["epoch"] for line in lines if line.get("epoch") is not None and line.get("eta") is not None]


def _docker_runs(sim) -> list[list[str]]:
    """The job launches (``docker run -d --name JOB``), not the GPU checks (``docker run --rm``)."""
    return [r["argv"] for r in sim.audit() if r["tool"] == "docker" and r["argv"][:2] == ["run", "-d"]]


def test_an_xid_after_epoch_2_of_6_recovers_once_and_runs_only_epochs_3_to_6(world):
    sub = world.submit("--recover", "1", spec=world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [2]},
                                                         num_epochs=6))
    assert sub.code == 0, sub
    first = sub.json["job_id"]
    assert sidecars(world).load(first).recovery_policy["attempts"] == 1
    done = world.run("poll_status.py", first, "--wait", *FAST)   # the remembered policy applies
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    validate("poll_status", done.json)
    chain = done.json["attempts"]
    assert [a["attempt"] for a in chain] == [1, 2] and chain[0]["job_id"] == first
    second = chain[1]["job_id"]
    assert done.json["job_id"] == second                                       # the last attempt's answer
    assert chain[0]["state"] == "ERROR" and "Xid" in chain[0]["cause"]["reason"]
    assert (chain[0]["epoch"], chain[1]["epoch"], chain[1]["num_epochs"]) == (2, 6, 6)   # epochs reached
    assert chain[1]["resumed_from"] == {"job_id": first, "checkpoint": "train/model_epoch_001_step_00050.pth"}
    assert _checkpoints(world.sim, first) == ["model_epoch_000_step_00025.pth", "model_epoch_001_step_00050.pth"]
    assert _checkpoints(world.sim, second) == [f"model_epoch_00{e}_step_00{25 * (e + 1):03d}.pth"
                                               for e in range(2, 6)]          # epochs 3-6 only
    assert _epochs_run(world.sim, second) == [2, 3, 4, 5]
    record = records(world).load(second)
    assert record["retry_of"] == first and sidecars(world).load(second).attempt == 2
    assert done.json["recovery"]["attempts_used"] == 1 and done.json["recovery"]["stopped"] is None
    parts = [c["billed_s"] - (c["idle_billed_s"] or 0) for c in (sidecars(world).load(j).cost for j in (first, second))]
    assert done.json["chain_cost"]["billed_s"] == pytest.approx(sum(parts), abs=0.01)   # a reused instance: no idle
    assert len(_docker_runs(world.sim)) == 2                                   # one launch per attempt
    again = world.run("poll_status.py", first)                                 # every answer of the first job
    assert [a["job_id"] for a in again.json["attempts"]] == [first, second]


def test_a_program_error_is_never_recovered(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "cuda_oom": True}, num_epochs=3))
    job = sub.json["job_id"]
    done = world.run("poll_status.py", job, "--wait", "--recover", "3", *FAST)
    assert done.code == 1 and done.json["hint"]["err_class"] == "ERR_PROGRAM", done
    assert done.json["job_id"] == job and len(done.json["attempts"]) == 1
    assert done.json["recovery"]["stopped"] == "ERR_PROGRAM" and done.json["error"]["code"] == "JOB_FAILED"
    assert len(_docker_runs(world.sim)) == 1


def test_recover_2_with_three_failures_stops_after_two_attempts_and_says_so(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [1, 2, 3]}, num_epochs=5))
    job = sub.json["job_id"]
    done = world.run("poll_status.py", job, "--wait", "--recover", "2", *FAST)
    assert done.code == 1 and done.json["error"]["code"] == "RECOVERY_LIMIT", done
    assert "all 2 recovery attempt(s)" in done.json["error"]["message"]
    assert [a["attempt"] for a in done.json["attempts"]] == [1, 2, 3]
    assert all(a["state"] == "ERROR" for a in done.json["attempts"])
    assert done.json["recovery"] == {**done.json["recovery"], "attempts_used": 2, "stopped": "RECOVERY_LIMIT"}
    assert len(_docker_runs(world.sim)) == 3
    assert done.json["next"] is None and "teardown.py " + done.json["job_id"] in done.json["next_note"]
    rerun = world.run("poll_status.py", job, "--wait", "--recover", "2", *FAST)   # continues, launches nothing
    assert rerun.json["error"]["code"] == "RECOVERY_LIMIT" and len(_docker_runs(world.sim)) == 3


def test_gpus_that_stay_lost_without_a_fallback_stop_after_the_bounded_wait(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [1]}, num_epochs=3))
    job = sub.json["job_id"]
    assert world.run("poll_status.py", job, "--wait", *FAST).code == 1
    world.sim.set_instance("box", gpu_lost=True)
    done = world.run("poll_status.py", job, "--wait", "--recover", "1", *FAST)
    assert done.code == 1 and done.json["error"]["code"] == "RECOVERY_NOT_POSSIBLE", done
    assert "GPUs of box do not answer" in done.json["error"]["message"]
    assert "--fallback-instance" in done.json["error"]["fix"]
    world.sim.set_instance("box", gpu_lost=False)                              # reset: the rerun continues
    again = world.run("poll_status.py", job, "--wait", "--recover", "1", *FAST)
    assert again.code == 0 and again.json["state"] == "COMPLETE", again
    assert [a["attempt"] for a in again.json["attempts"]] == [1, 2]


def test_policy_flags_are_checked():
    assert recover.policy(None, None, None) is None
    assert recover.policy(2, "spare", 600.0) == {"attempts": 2, "fallback_instance": "spare", "budget_s": 600.0}
    for bad in ((None, "spare", None), (None, None, 10.0), (-1, None, None), (1, None, 0.0)):
        with pytest.raises(Exception) as info:
            recover.policy(*bad)
        assert info.value.code == "BAD_ARGUMENT"


def test_resubmit_argv_moves_instance_drops_the_policy_and_keeps_the_overrides():
    words = ["--instance", "box", "--image", "img", "--recover", "2", "--fallback-instance=spare", "--ephemeral",
             "--budget-s", "60", "--", "train.num_epochs=6"]
    assert recover.resubmit_argv(words, "spare", "j-1", [], moved=True) == [
        "--instance", "spare", "--image", "img", "--resume-from", "j-1", "--", "train.num_epochs=6"]
    assert recover.resubmit_argv(words, "box", "j-1", ["--start"], moved=False) == [
        "--instance", "box", "--image", "img", "--ephemeral", "--start", "--resume-from", "j-1", "--",
        "train.num_epochs=6"]
    assert recover.resubmit_argv(["--instance", "box", "--action", "evaluate"], "box", "j-1", [], False,
                                 link="--retry-of") == ["--instance", "box", "--action", "evaluate", "--retry-of", "j-1"]


@pytest.mark.parametrize("answer,kind", [
    ({"state": "COMPLETE"}, None),
    ({"state": "ERROR", "hint": {"err_class": "ERR_PROGRAM"}}, None),
    ({"state": "ERROR", "hint": {"err_class": None}}, None),
    ({"state": "RUNNING", "error": {"code": "WAIT_TIMEOUT"}}, None),
    ({"state": "RUNNING", "waited_out": True}, None),
    ({"state": "CANCELED", "error": {"code": "JOB_CANCELED"}}, None),
    ({"state": "CANCELED", "observed": {"gone": "container"}, "error": {"code": "JOB_CANCELED"}}, None),
    ({"state": "ERROR", "hint": {"err_class": "ERR_INFRA", "reason": "x"}}, "infra"),
    ({"state": "UNKNOWN", "observed": {"gone": "instance"}}, "instance"),
    ({"state": "UNKNOWN", "observed": {"gone": "container"}}, "container"),
    ({"state": "RUNNING", "stalled": True, "stall": {"idle_s": 9}}, "stalled"),
    ({"state": "ERROR", "reconciled": "never_launched", "error": {"code": "NEVER_LAUNCHED"}}, "never_launched"),
    ({"state": "ERROR", "reconciled": "never_launched", "error": {"code": "SPEC_PATH_MISSING"},
      "hint": {"err_class": "ERR_INFRA"}}, None),
])
def test_only_infrastructure_failures_are_causes(answer, kind):
    found = recover.cause_of(answer)
    assert (found or {}).get("kind") == kind


def test_tier_b_instance_deleted_under_the_job_recovers_on_the_fallback_from_s3(s3world):
    """The recovering wait uploads the live job's newest checkpoint (--sync-every); once the instance
    is deleted, the next attempt runs on the fallback from that checkpoint, staged from S3."""
    import shutil
    import subprocess

    from conftest import EXAMPLE_DATA, ROOT, wait_until
    world = s3world.world
    world.sim.add_instance("spare")
    world.sim.preload_image("spare", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt")
    data = world.tmp_path / "levir"
    shutil.copytree(EXAMPLE_DATA, data)
    spec = world.spec({"epoch_seconds": 0.02, "hang_after_epoch": 2}, num_epochs=4)
    sub = s3world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
                      "visual_changenet", "--action", "train", "--spec", str(spec), "--storage-tier", "B",
                      "--inputs", f"{data}=levir_cd_tiny", "--recover", "1", "--fallback-instance", "spare",
                      schema="submit")
    assert sub.code == 0, sub
    first = sub.json["job_id"]
    waiting = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "poll_status.py"), first, "--wait",
                                "--sync-every", "0.5", *FAST], env=world.env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def synced():
            found = (sidecars(world).load(first).results or {}).get("checkpoint_sync") or {}
            return (found.get("latest_checkpoint") or {}).get("path") == "train/model_epoch_001_step_00050.pth"
        wait_until(synced, "the second checkpoint verified in S3 while the job runs")
        spec.write_text(spec.read_text().replace("hang_after_epoch: 2", "epoch_seconds: 0.02"))   # the rerun runs on
        brev_cli(world, "delete", "box")
        out, err = waiting.communicate(timeout=120)
    finally:
        if waiting.poll() is None:
            waiting.kill()
    done = json.loads(out)
    assert waiting.returncode == 0 and done["state"] == "COMPLETE", (done, err[-2000:])
    validate("poll_status", done)
    second = done["job_id"]
    assert [a["instance"] for a in done["attempts"]] == ["box", "spare"]
    assert done["attempts"][0]["cause"]["kind"] in ("instance", "container")   # a poll during the delete: either
    assert sidecars(world).load(second).resume_from["source"] == "s3"
    assert _checkpoints(world.sim, second, "spare") == ["model_epoch_002_step_00075.pth",
                                                        "model_epoch_003_step_00100.pth"]
    assert not sidecars(world).load(second).ephemeral
    s3world.assert_no_secret_anywhere()


# In process (tests/unit/test_verbs_recover.py): the tier A deleted-instance refusal, a run killed after its
# intent or after its resubmit opened a record, RECOVERY_NOT_POSSIBLE's gated `brev stop`.
def test_the_budget_stops_the_chain_before_it_is_billed(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "hang": True}, num_epochs=2))
    job = sub.json["job_id"]
    # The wait keeps one --interval of the budget for the teardown that stops the attempt (recover.py);
    # 2 s covers that teardown's round trip on a loaded 2-core machine (1 s did not: billed 8.04 s).
    done = world.run("poll_status.py", job, "--wait", "--recover", "2", "--budget-s", "8", "--interval", "2",
                     "--timeout", "90")
    assert done.code == 1 and done.json["error"]["code"] == "RECOVERY_BUDGET_EXHAUSTED", done
    assert done.json["state"] == "CANCELED" and len(done.json["attempts"]) == 1     # stopped, not resubmitted
    assert 0 < done.json["chain_cost"]["billed_s"] <= 8, done.json["chain_cost"]
    assert not [c for c in world.sim.containers("box") if c["State"]["Status"] == "running"]


def test_a_stall_is_recovered_only_with_an_explicit_stall_after(world, monkeypatch):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "hang_after_epoch": 1}, num_epochs=3))
    job = sub.json["job_id"]
    from conftest import wait_until
    wait_until(lambda: _checkpoints(world.sim, job), "the first checkpoint")
    done = world.run("poll_status.py", job, "--wait", "--recover", "1", "--stall-after", "1", "--interval", "1.2",
                     "--timeout", "60", "--health-wait", "2")
    assert done.code == 1 and done.json["error"]["code"] == "RECOVERY_LIMIT", done   # it hangs again
    first, second = done.json["attempts"]
    assert first["cause"]["kind"] == "stalled" and first["state"] == "CANCELED"     # torn down, then resumed
    assert second["resumed_from"]["checkpoint"] == "train/model_epoch_000_step_00025.pth"
    assert len(_docker_runs(world.sim)) == 2
    assert world.run("teardown.py", second["job_id"]).code == 0


def test_a_stall_without_an_explicit_threshold_is_only_reported(tmp_path, monkeypatch):
    """The loop itself (no simulator): a stalled wait without --stall-after ends the call, nothing resubmitted."""
    from tao_brev.context import Context
    ctx = Context(env={"TAO_STATE_DIR": str(tmp_path)})
    job = ctx.records.open(image="img", network_arch="visual_changenet", action="train", storage_tier="A",
                           results_root="~/tao-results")["id"]
    stalled = {"ok": False, "job_id": job, "state": "RUNNING", "stalled": True, "stall": {"idle_s": 4000},
               "error": {"code": "JOB_STALLED", "message": "m"}}
    monkeypatch.setattr(recover.status, "poll", lambda *a, **k: (dict(stalled), 1))
    launched = []
    out, code = recover.recover(ctx, job, launched.append, recover.policy(2, None, None), interval=0.01)
    assert code == 1 and out["error"]["code"] == "JOB_STALLED" and "explicit --stall-after" in out["recovery_note"]
    assert out["recovery"]["attempts_used"] == 0 and not launched


def test_a_container_removed_under_the_job_resumes_on_the_same_instance(world):
    spec = world.spec({"epoch_seconds": 0.02, "hang_after_epoch": 2}, num_epochs=4)
    sub = world.submit(spec=spec)
    job = sub.json["job_id"]
    from conftest import wait_until
    wait_until(lambda: len(_checkpoints(world.sim, job)) >= 2, "two checkpoints")
    brev_cli(world, "exec", "box", f"docker rm -f {job}")                      # removed outside the bundle
    spec.write_text(spec.read_text().replace("hang_after_epoch: 2", "epoch_seconds: 0.02"))
    done = world.run("poll_status.py", job, "--wait", "--recover", "1", *FAST)
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert done.json["attempts"][0]["cause"]["kind"] == "container"
    assert _checkpoints(world.sim, done.json["job_id"]) == ["model_epoch_002_step_00075.pth",
                                                            "model_epoch_003_step_00100.pth"]


def test_an_instance_stopped_under_the_job_resumes_there_from_its_disk(world):
    spec = world.spec({"epoch_seconds": 0.02, "hang_after_epoch": 2}, num_epochs=4)
    sub = world.submit(spec=spec)
    job = sub.json["job_id"]
    from conftest import wait_until
    wait_until(lambda: len(_checkpoints(world.sim, job)) >= 2, "two checkpoints")
    brev_cli(world, "stop", "box")                                              # checkpoints survive a stop
    spec.write_text(spec.read_text().replace("hang_after_epoch: 2", "epoch_seconds: 0.02"))
    done = world.run("poll_status.py", job, "--wait", "--recover", "1", *FAST)
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert done.json["attempts"][0]["cause"]["kind"] in ("infra", "instance")
    assert done.json["attempts"][1]["instance"] == "box"
    assert _checkpoints(world.sim, done.json["job_id"]) == ["model_epoch_002_step_00075.pth",
                                                            "model_epoch_003_step_00100.pth"]


def test_a_job_the_user_canceled_is_never_recovered(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "hang": True}, num_epochs=1))
    job = sub.json["job_id"]
    assert world.run("teardown.py", job).code == 0
    done = world.run("poll_status.py", job, "--wait", "--recover", "2", *FAST)
    assert done.code == 1 and done.json["error"]["code"] == "JOB_CANCELED", done
    assert len(done.json["attempts"]) == 1 and len(_docker_runs(world.sim)) == 1


def test_a_run_killed_after_it_made_the_attempt_safe_still_resubmits(world):
    """The cause is recorded before the teardown, after which a stalled attempt reads CANCELED: a
    rerun keeps the decision (and does not take it for the user's cancel)."""
    spec = world.spec({"epoch_seconds": 0.02, "hang_after_epoch": 1}, num_epochs=3)
    sub = world.submit(spec=spec)
    first = sub.json["job_id"]
    from conftest import wait_until
    wait_until(lambda: _checkpoints(world.sim, first), "the first checkpoint")
    sidecars(world).update(first, recovery={"chain": [{"job_id": first, "attempt": 1,
                                                       "cause": {"kind": "stalled", "reason": "no sign of life"}}]})
    assert world.run("teardown.py", first).json["state"] == "CANCELED"          # what the killed run did
    spec.write_text(spec.read_text().replace("hang_after_epoch: 1", "epoch_seconds: 0.02"))
    done = world.run("poll_status.py", first, "--wait", "--recover", "1", "--stall-after", "30", *FAST)
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert [a["attempt"] for a in done.json["attempts"]] == [1, 2]
    assert done.json["attempts"][1]["resumed_from"]["checkpoint"] == "train/model_epoch_000_step_00025.pth"


def test_teardown_follows_a_finished_chain_but_not_a_stopped_one(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [1, 2]}, num_epochs=3))
    job = sub.json["job_id"]
    stopped = world.run("poll_status.py", job, "--wait", "--recover", "1", "--teardown", *FAST)
    assert stopped.json["error"]["code"] == "RECOVERY_LIMIT" and "teardown" not in stopped.json, stopped
    assert "teardown.py" in stopped.json["teardown_skipped"]
    done = world.run("poll_status.py", job, "--wait", "--recover", "2", "--teardown", *FAST)   # one more
    assert done.code == 0 and done.json["state"] == "COMPLETE" and done.json["teardown"]["ok"], done
    assert [a["attempt"] for a in done.json["attempts"]] == [1, 2, 3]
    assert not world.sim.containers("box") or all(c["State"]["Status"] != "running" for c in world.sim.containers("box"))


def test_chain_cost_counts_an_owned_instance_s_idle_time_once(tmp_path, monkeypatch):
    from tao_brev.context import Context
    from tao_brev.verbs import recovery_chain
    ctx = Context(env={"TAO_STATE_DIR": str(tmp_path)})
    ids = [ctx.records.open(image="i", network_arch="visual_changenet", action="train", storage_tier="A",
                            results_root="~/r")["id"] for _ in range(2)]
    for job in ids:
        ctx.records.mark(job, "ERROR", message="x", source="agent")
    ctx.sidecars.update(ids[0], recovery={"chain": [{"job_id": ids[0], "attempt": 1}, {"job_id": ids[1], "attempt": 2}]})
    facts = {ids[0]: (100.0, 50.0), ids[1]: (30.0, 10.0)}   # billed_s, idle_billed_s (owned: until now)
    monkeypatch.setattr(recovery_chain.cost, "facts", lambda c, job, **k: {
        "billed_s": facts[job][0], "idle_billed_s": facts[job][1], "price_per_hour_usd": 3.6})
    out = recovery_chain.chain_cost(ctx, ids[0])
    assert out == {"billed_s": 50.0 + 30.0, "estimated_cost_usd": 0.08, "attempts": 2}


# ---------------------------------------------------------------- one chain, whoever launches its attempts
def _advice_texts(answer: dict) -> str:
    return " ".join(str((answer.get(k) or {}).get(f) or "") for k in ("hint", "error") for f in ("advice", "fix"))


def test_a_remembered_recovery_is_advised_and_a_resume_by_hand_is_adopted_not_doubled(world):
    """The double resume: the ended job's answer advises the recovering command (not a manual resubmit);
    a resume the user launched by hand anyway is the chain's next attempt, never a second one beside it."""
    sub = world.submit("--recover", "1", spec=world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [1]},
                                                         num_epochs=3))
    first = sub.json["job_id"]
    ended = world.run("poll_status.py", first)
    from conftest import wait_until
    wait_until(lambda: world.run("poll_status.py", first).json.get("state") == "ERROR", "the Xid")
    ended = world.run("poll_status.py", first)
    advice = _advice_texts(ended.json)
    assert ended.json["hint"]["err_class"] == "ERR_INFRA", ended
    assert f"poll_status.py {first} --wait --recover 1" in advice and "--resume-from" not in advice, advice
    words = sidecars(world).load(first).submit_argv
    by_hand = world.run("submit.py", *words, "--resume-from", first)              # the user resumes anyway
    assert by_hand.code == 0, by_hand
    done = world.run("poll_status.py", first, "--wait", *FAST)                     # the remembered recovery
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert done.json["job_id"] == by_hand.json["job_id"]
    assert [a["job_id"] for a in done.json["attempts"]] == [first, by_hand.json["job_id"]]
    assert len(_docker_runs(world.sim)) == 2                                       # no third launch


def test_a_resume_or_retry_by_hand_beside_a_live_attempt_is_refused(world):
    """A recovered attempt runs: a manual --resume-from / --retry-of of any job of the chain would be a
    second live attempt; refused before anything is recorded, pointing at the chain."""
    spec = world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [1], "hang_after_epoch": 2}, num_epochs=4)
    first = world.submit(spec=spec).json["job_id"]
    live = world.run("poll_status.py", first, "--wait", "--recover", "1", "--interval", "0.2", "--timeout", "8",
                     "--health-wait", "2")
    assert live.code == 0 and live.json["waited_out"] is True and len(live.json["attempts"]) == 2, live
    second = live.json["job_id"]
    known = len(records(world).list())
    words = sidecars(world).load(first).submit_argv
    for link in (["--resume-from", first], ["--retry-of", first], ["--resume-from", second]):
        again = world.run("submit.py", *words, *link)
        assert again.code == 2 and again.json["error"]["code"] == "RESUME_NOT_POSSIBLE", (link, again)
        assert second in again.json["error"]["message"]
    assert len(records(world).list()) == known and len(_docker_runs(world.sim)) == 2
    assert world.run("teardown.py", second).code == 0


def test_two_recovering_waits_and_a_wait_on_the_hand_made_attempt_launch_once(world):
    """Three waits at once - two on the first job, one on an attempt resumed by hand - share one chain."""
    import subprocess

    from conftest import ROOT
    spec = world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [1, 2]}, num_epochs=4)
    first = world.submit("--recover", "2", spec=spec).json["job_id"]
    from conftest import wait_until
    wait_until(lambda: world.run("poll_status.py", first).json.get("state") == "ERROR", "the first Xid")
    by_hand = world.run("submit.py", *sidecars(world).load(first).submit_argv, "--resume-from", first)
    assert by_hand.code == 0, by_hand
    waits = [subprocess.Popen([sys.executable, str(ROOT / "scripts" / "poll_status.py"), job, "--wait", *FAST],
                              env=world.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for job in (first, first, by_hand.json["job_id"])]
    answers = [json.loads(w.communicate(timeout=150)[0]) for w in waits]
    assert all(a["state"] == "COMPLETE" for a in answers), answers
    assert len({a["job_id"] for a in answers}) == 1 and len(answers[0]["attempts"]) == 3
    assert len(_docker_runs(world.sim)) == 3                                       # 1 + by hand + 1 recovery


def test_a_recovery_after_a_teardown_of_the_failed_job_resumes_it_once(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [1]}, num_epochs=3))
    first = sub.json["job_id"]
    assert world.run("poll_status.py", first, "--wait", *FAST).code == 1
    down = world.run("teardown.py", first)
    assert down.code == 0, down
    done = world.run("poll_status.py", first, "--wait", "--recover", "1", *FAST)
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    again = world.run("poll_status.py", first, "--wait", "--recover", "1", *FAST)   # a rerun launches nothing
    assert again.json["job_id"] == done.json["job_id"] and len(_docker_runs(world.sim)) == 2


# ---------------------------------------------------------------- /dev/shm exhausted: the failure class decides
# The failure code docker_state gives a job that exhausted /dev/shm (torch DataLoader "Bus error", "No space
# left on device" in shm): resume_advice.SHM_EXHAUSTED, the name agreed with docker_state's owner.
def _shm_answer(job: str, err_class: str = "ERR_PROGRAM") -> dict:   # the brev branch's row: ERR_PROGRAM
    return {"ok": False, "job_id": job, "state": "ERROR", "terminal_state": "ERROR",
            "hint": {"err_class": err_class, "code": "SHM_EXHAUSTED", "reason": "/dev/shm exhausted",
                     "advice": "raise --shm-size (e.g. 32g) or lower num_workers", "evidence": []},
            "error": {"code": "JOB_FAILED", "message": "m"}}


def _loop_ctx(tmp_path, argv):
    from tao_brev.context import Context
    ctx = Context(env={"TAO_STATE_DIR": str(tmp_path)})
    job = ctx.records.open(image="img", network_arch="visual_changenet", action="train", storage_tier="A",
                           results_root="~/tao-results")["id"]
    ctx.sidecars.update(job, instance="box", submit_argv=argv)
    ctx.records.mark(job, "ERROR", message="x", source="agent")
    return ctx, job


@pytest.mark.parametrize("err_class", ["ERR_PROGRAM", "ERR_INFRA"])
@pytest.mark.parametrize("given,larger", [([], "32g"), (["--shm-size", "24g"], "48g"), (["--shm-size=512m"], "1024m")])
def test_shm_exhausted_is_never_recovered_with_the_same_settings(tmp_path, monkeypatch, given, larger, err_class):
    argv = ["--instance", "box", "--image", "img", "--network-arch", "visual_changenet", "--action", "train",
            "--spec", "/s.yaml", *given, "--", "train.num_epochs=4"]
    ctx, job = _loop_ctx(tmp_path, argv)
    monkeypatch.setattr(recover.status, "poll", lambda *a, **k: (_shm_answer(job, err_class), 1))
    launched = []
    out, code = recover.recover(ctx, job, launched.append, recover.policy(2, None, None), interval=0.01)
    assert not launched and code == 1, out                                    # nothing resubmitted
    assert out["error"]["code"] == "RECOVERY_NOT_POSSIBLE" and out["recovery"]["stopped"] == "RECOVERY_NOT_POSSIBLE"
    words = out["error"]["fix"].split(": ", 1)[1].split("; then ")[0].split()   # the exact resubmit
    assert words[words.index("--shm-size") + 1] == larger and words.count("--shm-size") == 1, words
    assert words[words.index("--resume-from") + 1] == job
    assert words.index("--shm-size") < words.index("--") and words[-1] == "train.num_epochs=4"   # a flag, not an override


def test_shm_exhausted_advice_is_the_larger_resubmit_even_with_a_remembered_recovery(tmp_path):
    from tao_brev import resume_advice
    from tao_brev.verbs.recovery_chain import recovering_command
    ctx, job = _loop_ctx(tmp_path, ["--instance", "box", "--action", "train", "--recover", "2"])
    ctx.sidecars.update(job, recovery_policy={"attempts": 2, "fallback_instance": None, "budget_s": None})
    assert recovering_command(ctx, job).endswith(f"poll_status.py {job} --wait --recover 2")
    out = resume_advice.fill_job(ctx, job, _shm_answer(job), recovering_command(ctx, job))
    assert "--shm-size 32g" in out["hint"]["advice"] and f"--resume-from {job}" in out["hint"]["advice"]
    assert "poll_status.py" not in out["hint"]["advice"]


def test_a_recovery_after_a_larger_shm_resubmit_by_hand_keeps_the_larger_size(world):
    """The chain's next attempt repeats the settings of the attempt it resumes, not the first job's."""
    first = world.submit("--shm-size", "16g", spec=world.spec({"epoch_seconds": 0.02, "xid_after_epochs": [1, 2]},
                                                               num_epochs=4)).json["job_id"]
    assert world.run("poll_status.py", first, "--wait", *FAST).code == 1
    words = sidecars(world).load(first).submit_argv
    larger = world.run("submit.py", *[w if w != "16g" else "32g" for w in words], "--resume-from", first)
    assert larger.code == 0, larger
    done = world.run("poll_status.py", first, "--wait", "--recover", "1", *FAST)
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert [a["job_id"] for a in done.json["attempts"]][:2] == [first, larger.json["job_id"]]
    runs = _docker_runs(world.sim)
    assert len(runs) == 3 and runs[-1][runs[-1].index("--shm-size") + 1] == "32g", runs[-1]
