"""poll_status --wait --recover in process: what ends a chain without a resubmit."""

from __future__ import annotations

import re

from tao_brev.verbs import recover
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, launched, poll_sections, state

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
