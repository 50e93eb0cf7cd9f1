"""poll_status --wait --recover in process: what ends a chain without a resubmit."""

from __future__ import annotations

import json
import re

from tao_brev import nextstep
from tao_brev.verbs import recover
from tests.unit.fake_brev import sections
from tests.unit.jobs import SPEC, entry, launched, poll_sections, state

TRACEBACK = ("Traceback (most recent call last):\n  File \"/usr/local/lib/python3.12/train.py\", line 12\n"
             "KeyError: 'dataset'")


def no_resubmit(argv):
    raise AssertionError(f"no resubmit was expected: {argv}")


def test_a_program_error_is_never_recovered(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(
        poll_sections(job_id, state("exited", 1), **{f"{job_id}:tail": TRACEBACK})))
    out, code = recover.recover(ctx, job_id, no_resubmit, recover.policy(2, None, None), interval=5.0)
    assert code == 1 and out["ok"] is False and out["state"] == "ERROR", out
    assert out["error"]["code"] == "JOB_FAILED" and out["hint"]["err_class"] == "ERR_PROGRAM"
    assert out["recovery"]["stopped"] == "ERR_PROGRAM" and out["recovery"]["attempts_used"] == 0
    assert out["recovery"]["first_job"] == job_id and out["recovery"]["max_attempts"] == 2
    assert [a["job_id"] for a in out["attempts"]] == [job_id]


def test_a_complete_job_ends_the_chain_with_its_cost(ctx, fake_brev, clock):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry(), times=2)
    states = iter([state(), state("exited", 0)])
    fake_brev.expect_exec("box", f"{job_id}:state", times=2,
                          answer=lambda call: sections(poll_sections(job_id, next(states)))(call))
    out, code = recover.recover(ctx, job_id, no_resubmit, recover.policy(1, None, None), interval=5.0)
    assert code == 0 and out["ok"] is True and out["state"] == "COMPLETE", out
    assert out["recovery"]["stopped"] is None and out["recovery"]["attempts_used"] == 0
    assert set(out["chain_cost"]) >= {"billed_s", "estimated_cost_usd"} and clock.slept == [5.0]


GONE = (1, "Error: No such container: {job_id}")


def test_an_infrastructure_failure_past_the_limit_stops_the_chain_with_nothing_removed(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(
        poll_sections(job_id, "", **{f"{job_id}:state": (GONE[0], GONE[1].format(job_id=job_id))})))
    out, code = recover.recover(ctx, job_id, no_resubmit, recover.policy(0, None, None), interval=5.0)
    assert code == 1 and out["ok"] is False and out["error"]["code"] == "RECOVERY_LIMIT", out
    assert out["recovery"]["stopped"] == "RECOVERY_LIMIT" and out["recovery"]["attempts_used"] == 0
    assert out["state"] == "UNKNOWN" and out["observed"]["gone"] == "container"
    assert len(fake_brev.exec_commands()) == 2   # the launch and the poll: no teardown, no resubmit


def complete(call):
    """A poll's answer for whichever job the command asks about: its container exited 0."""
    job_id = re.search(r"'S[0-9a-f]{12}>([^']+):state'", call.command).group(1)
    return sections(poll_sections(job_id, state("exited", 0)))(call)


def request_of(argv: list[str]):
    """submit.py's arguments -> SubmitRequest, for the flags a recovery's resubmit carries."""
    import argparse

    from tao_brev.verbs.submit import SubmitRequest

    p = argparse.ArgumentParser()
    for flag in ("--instance", "--image", "--network-arch", "--action", "--spec", "--resume-from", "--retry-of"):
        p.add_argument(flag)
    p.add_argument("--inputs", nargs="*", default=[])
    p.add_argument("--start", action="store_true")
    args = p.parse_args(argv)
    return SubmitRequest(instance=args.instance, image=args.image, network_arch=args.network_arch,
                         action=args.action, spec=args.spec, inputs=args.inputs, resume_from=args.resume_from,
                         retry_of=args.retry_of, start=args.start, argv=list(argv))


def test_a_lost_container_is_resumed_on_the_same_instance_once_its_gpus_answer(ctx, fake_brev):
    from tao_brev import remote
    from tests.unit.jobs import SPEC, expect_catalog

    argv = ["--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
            "--action", "train", "--spec", str(SPEC), "--inputs", "~/tao-data/levir_cd_tiny=levir_cd_tiny"]
    first = launched(ctx, fake_brev, argv=argv)
    gone = (GONE[0], GONE[1].format(job_id=first))
    fake_brev.expect_ls(entry(), times=6)   # wait, teardown gate, instance type, health, resubmit, wait
    fake_brev.expect_exec("box", f"{first}:state", answer=sections(
        poll_sections(first, "", **{f"{first}:state": gone})))
    fake_brev.expect_exec("box", remote.remove_container(first), answer=sections(
        {"state": gone, "logs": "", "rm": gone, "own": "", "others": ""}))                      # made safe: nothing left
    expect_catalog(fake_brev)
    fake_brev.expect_exec("box", "nvidia-smi -L", answer=sections({"gpu": "GPU 0: NVIDIA A10G (UUID: GPU-1)"}))
    launch = fake_brev.expect_exec("box", "docker run -d", stdout="d00d" * 16 + "\n")
    fake_brev.expect_exec("box", re.compile(r"'S[0-9a-f]{12}>(?!%s)[^']+:state'" % first), answer=complete)
    answer, code = recover.recover(ctx, first, request_of, recover.policy(1, None, None), interval=5.0)
    fake_brev.verify()
    second = answer["job_id"]
    assert second != first and answer["recovery"]["attempts_used"] == 1, answer
    assert [a["job_id"] for a in answer["attempts"]] == [first, second]
    assert ctx.records.load(second)["retry_of"] == first
    assert answer["state"] == "COMPLETE" and code == 0 and answer["recovery"]["stopped"] is None
    assert "train.resume_training_checkpoint_path=" in launch.calls[0].command   # resumed, not restarted


# ---------------------------------------------------------------- moved from tests/test_recover.py (in process)
TRAIN_ARGV = ["--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
              "--action", "train", "--spec", str(SPEC), "--inputs", "~/tao-data/levir_cd_tiny=levir_cd_tiny"]


def test_tier_a_instance_deleted_under_the_job_says_the_checkpoints_were_only_there(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, argv=TRAIN_ARGV)
    fake_brev.expect_exec("box", raw=True, stderr="dev environment with id/name box not found\n", exit=1,
                          times=6)                                           # box deleted (tests/sim/brev_sim.py lookup)
    fake_brev.expect_ls(entry("spare"), times=5)                               # brev lists only spare
    out, code = recover.recover(ctx, job_id, no_resubmit, recover.policy(1, "spare", None), interval=5.0)
    assert code == 1 and out["error"]["code"] == "RECOVERY_NOT_POSSIBLE", out
    message = out["error"]["message"]
    assert "brev ls lists no instance box (deleted)" in message and "were only on box" in message, message
    assert "--retry-of " + job_id in out["error"]["fix"] and "--instance spare" in out["error"]["fix"]
    assert not [c for c in fake_brev.exec_commands() if "docker run -d" in c][1:]   # only the first launch


def test_recovery_not_possible_names_brev_stop_only_for_a_type_that_can_stop(ctx, fake_brev):
    """RECOVERY_NOT_POSSIBLE's reset is gated like every reset advice (docker_state.gated): brev-cli
    pkg/cmd/stop/stop.go refuses `brev stop` of a type brev search lists as not stoppable."""
    from tao_brev import remote
    from tests.unit.jobs import expect_catalog

    job_id = launched(ctx, fake_brev, instance_type="a2-highgpu-1g", argv=TRAIN_ARGV)   # brev search: not stoppable
    gone = (GONE[0], GONE[1].format(job_id=job_id))
    fake_brev.expect_ls(entry(instance_type="a2-highgpu-1g"), times=6)
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(
        poll_sections(job_id, "", **{f"{job_id}:state": gone})))
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=sections(
        {"state": gone, "logs": "", "rm": gone, "own": "", "others": ""}))
    expect_catalog(fake_brev)
    fake_brev.expect_exec("box", "nvidia-smi -L", times=3, answer=sections(   # at 0, 5 and 10 s of the wait
        {"gpu": (9, "Unable to determine the device handle for GPU0000:00:1E.0: Unknown Error")}))
    out, code = recover.recover(ctx, job_id, no_resubmit, recover.policy(1, None, None), interval=5.0,
                                health_wait_s=10.0)
    assert code == 1 and out["error"]["code"] == "RECOVERY_NOT_POSSIBLE", out
    assert "GPUs of box do not answer" in out["error"]["message"]
    fix = out["error"]["fix"]
    assert "brev stop" not in fix and "does not support stop" in fix and "brev delete box" in fix, fix


def _expect_resume_on_box(fake_brev, first: str):
    """The calls of a recovery of ``first`` (its container gone) on the same instance, whose resumed
    attempt completes: the expectation of its one launch (``docker run -d``)."""
    from tao_brev import remote
    from tests.unit.jobs import expect_catalog

    gone = (GONE[0], GONE[1].format(job_id=first))
    fake_brev.expect_ls(entry(), times=6)   # wait, teardown gate, instance type, health, resubmit, wait
    fake_brev.expect_exec("box", f"{first}:state", answer=sections(
        poll_sections(first, "", **{f"{first}:state": gone})))
    fake_brev.expect_exec("box", remote.remove_container(first), answer=sections(
        {"state": gone, "logs": "", "rm": gone, "own": "", "others": ""}))
    expect_catalog(fake_brev)
    fake_brev.expect_exec("box", "nvidia-smi -L", answer=sections({"gpu": "GPU 0: NVIDIA A10G (UUID: GPU-1)"}))
    launch = fake_brev.expect_exec("box", "docker run -d", stdout="d00d" * 16 + "\n")
    fake_brev.expect_exec("box", re.compile(r"'S[0-9a-f]{12}>(?!%s)[^']+:state'" % first), answer=complete)
    return launch


def _intent(ctx, first: str, attempt: int = 2) -> None:
    """What a recovering run writes before its resubmit (tao_brev/verbs/recover.py _launch_next)."""
    from tao_brev.records import now_iso
    ctx.sidecars.update(first, recovery={"policy": {"attempts": 1, "fallback_instance": None, "budget_s": None},
                                         "intent": {"attempt": attempt, "after": first, "resume_from": first,
                                                    "instance": "box", "at": now_iso(), "argv": []}})


def test_a_run_killed_after_its_intent_but_before_the_record_launches_once(ctx, fake_brev):
    first = launched(ctx, fake_brev, argv=TRAIN_ARGV)
    _intent(ctx, first)                                                        # the killed run got this far
    launch = _expect_resume_on_box(fake_brev, first)
    done, code = recover.recover(ctx, first, request_of, recover.policy(1, None, None), interval=5.0)
    fake_brev.verify()
    assert code == 0 and done["state"] == "COMPLETE", done
    assert len(done["attempts"]) == 2 and len(launch.calls) == 1              # the first launch + this one
    shaped = nextstep.poll(done, code, [first, "--wait", "--recover", "1"],    # as scripts/poll_status.py does
                           closed=lambda job: bool(ctx.sidecars.load(job).teardown))
    assert shaped["next"].endswith("teardown.py " + done["job_id"])           # the last attempt


XID = "NVRM: Xid (PCI:0000:00:04): 79, GPU has fallen off the bus."   # tests/sim/tao_lightning.py


def _ended_by_an_xid(ctx, fake_brev, job_id: str):
    """A plain poll of ``job_id`` whose container exited 1 after an Xid line (its record: ERROR)."""
    from tao_brev.verbs import status

    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{job_id}:state", answer=sections(
        poll_sections(job_id, state("exited", 1), **{f"{job_id}:tail": XID})))
    out = status.poll(ctx, job_id, wait=True, interval=5.0)   # as poll_status.py JOB --wait
    fake_brev.verify()
    return out


def test_a_run_killed_after_its_resubmit_opened_a_record_is_continued_never_launched_twice(ctx, fake_brev):
    first = launched(ctx, fake_brev, argv=TRAIN_ARGV)
    ended, code = _ended_by_an_xid(ctx, fake_brev, first)
    assert code == 1 and ended["hint"]["err_class"] == "ERR_INFRA", json.dumps(ended)
    _intent(ctx, first)
    words = ctx.sidecars.load(first).submit_argv
    second = launched(ctx, fake_brev, argv=[*words, "--resume-from", first], resume_from=first)   # the killed run's
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", f"{second}:state", answer=complete)             # first is ERROR: not polled again
    done, code = recover.recover(ctx, first, no_resubmit, recover.policy(1, None, None), interval=5.0)
    assert code == 0 and done["job_id"] == second, done                        # adopted
    assert [a["job_id"] for a in done["attempts"]] == [first, second]
    assert len([c for c in fake_brev.exec_commands() if "docker run -d" in c]) == 2   # first + the killed run's
    assert ctx.sidecars.load(first).recovery["intent"] is None


def test_an_attempt_killed_as_its_record_opened_continues_on_the_chain_s_instance(ctx, fake_brev):
    """A SIGKILL between the record's open and its sidecar's write leaves a chained attempt with no
    instance (SIGTERM/SIGINT are held until both exist: launch.open_record); the next attempt goes where
    the chain ran, never to an instance named '' (a chaos run answered BAD_NAME "invalid instance name: ''"),
    and the attempt that never launched uses none of ``--recover N``."""
    from tao_brev.verbs.recovery_chain import append
    first = launched(ctx, fake_brev, argv=TRAIN_ARGV)
    ended, code = _ended_by_an_xid(ctx, fake_brev, first)
    _intent(ctx, first)
    second = ctx.records.open(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="visual_changenet",
                              action="train", storage_tier="A", results_root="~/tao-results", retry_of=first)["id"]
    append(ctx, first, [{"job_id": first, "attempt": 1, "resume_from": None}], second,
           ctx.sidecars.load(first).recovery["intent"])                      # the killed run got this far
    assert ctx.sidecars.load(second).instance is None
    fake_brev.expect_ls(entry(), times=3)   # health, resubmit, wait (the never-launched one: no teardown)
    fake_brev.expect_exec("box", "nvidia-smi -L", answer=sections({"gpu": "GPU 0: NVIDIA A10G (UUID: GPU-1)"}))
    launch = fake_brev.expect_exec("box", "docker run -d", stdout="d00d" * 16 + "\n")
    fake_brev.expect_exec("box", re.compile(r"'S[0-9a-f]{12}>(?!%s)[^']+:state'" % first), answer=complete)
    done, code = recover.recover(ctx, first, request_of, recover.policy(1, None, None), interval=5.0)
    fake_brev.verify()
    assert code == 0 and done["state"] == "COMPLETE", done
    assert len(launch.calls) == 1 and f"/tao-results/{first}:/resume:ro" in launch.calls[0].command
    assert done["recovery"]["attempts_used"] == 1   # the killed attempt never launched: it used none of --recover 1
    killed, third = ctx.records.load(second), ctx.records.load(done["job_id"])
    assert killed["terminal_state"] == "ERROR" and killed["transitions"][-1]["message"].startswith("never launched")
    assert third["terminal_state"] == "COMPLETE" and third["retry_of"] == first
    assert ctx.sidecars.load(third["id"]).instance == "box"
    assert [a["job_id"] for a in done["attempts"]] == [first, second, third["id"]]
