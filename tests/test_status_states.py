"""Every docker state and failure named right, on the simulator, through the scripts.

Each case asserts the record, the JSON answer (schema-valid) and the exit
code. The simulator reproduces what moby does (a failed start leaves a
``created`` container with ``State.Error``; ``dead``; SIGKILL from ``docker
kill``), see tests/sim/docker_sim.py.
"""

from __future__ import annotations

import json

import pytest

from conftest import validate
from tao_brev.transport import Brev
from test_robustness import FAST, hanging_job, launches, records, sidecars, states

WAIT = ("--wait", "--interval", "0.2", "--timeout", "60")


def poll(world, job_id, *args, **env):
    res = world.run("poll_status.py", job_id, *args, **{**FAST, **env})
    assert res.json is not None, res
    validate("poll_status", res.json)
    return res


def exec_on_box(world, command: str):
    return Brev(env=world.env).run("box", command)


def test_an_outside_sigkill_is_oom_or_external_kill_never_a_program_error(world):
    job_id = hanging_job(world)
    exec_on_box(world, f"docker kill {job_id}")
    res = poll(world, job_id, *WAIT)
    assert res.code == 1 and res.json["error"]["code"] == "JOB_FAILED", res
    hint = res.json["hint"]
    assert hint["err_class"] is None and "OOM" in hint["reason"] and "external kill" in hint["reason"]
    assert {"ExitCode=137", "OOMKilled=false"} <= set(hint["evidence"])
    assert "reduce the batch size" not in res.json["message"]
    record = records(world).load(job_id)
    assert record["terminal_state"] == "ERROR" and record.get("err_class") is None


@pytest.mark.parametrize("breaks", [1, 2])
def test_a_lost_launch_answer_with_a_failed_start_is_a_failed_launch_not_pending(world, breaks):
    """docker run created the container, the start failed (no nvidia driver), and the ssh
    connection broke before the answer came back: brev's own second run then finds the container
    (breaks=1), or that breaks too and reconciliation asks (breaks=2)."""
    world.sim.set_instance("box", gpu_runtime=False)
    world.sim.add_fault("docker run", "reset_after", times=breaks)
    sub = world.submit(**FAST)
    assert sub.code == 1, sub
    validate("submit", sub.json)
    job_id = sub.json["job_id"]
    assert sub.json["state"] == "ERROR" and sub.json["error"]["code"] == "NVIDIA_RUNTIME_MISSING"
    assert sub.json["hint"]["err_class"] == "ERR_INFRA"
    assert any('could not select device driver' in line for line in sub.json["hint"]["evidence"])
    container = world.sim.container("box", job_id)
    assert container["State"]["Status"] == "created" and container["State"]["ExitCode"] == 128
    record = records(world).load(job_id)
    assert record["terminal_state"] == "ERROR" and record["err_class"] == "ERR_INFRA"
    assert launches(world, job_id) == 1

    for args in ((), WAIT):   # one answer, every time, and never PENDING until a timeout
        res = poll(world, job_id, *args)
        assert res.code == 1 and res.json["state"] == "ERROR", res
        assert res.json["error"] == sub.json["error"] and res.json["hint"] == sub.json["hint"]
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and down.json["container_removed"] is True, down
    assert world.sim.container("box", job_id) is None


def test_after_an_xid_the_refused_launch_advises_a_reset_and_answers_the_same_later(world):
    world.sim.set_instance("box", gpu_lost=True)
    sub = world.submit(**FAST)
    assert sub.code == 1 and sub.json["error"]["code"] == "GPU_UNHEALTHY", sub
    validate("submit", sub.json)
    fix = sub.json["error"]["fix"]
    assert "brev stop" in fix and "brev start" in fix and "nvidia-ctk" not in fix
    job_id = sub.json["job_id"]
    assert world.sim.container("box", job_id)["State"]["Status"] == "created"   # moby keeps it
    res = poll(world, job_id)
    assert res.code == 1 and res.json["error"]["code"] == "GPU_UNHEALTHY" and res.json["state"] == "ERROR"
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and world.sim.container("box", job_id) is None, down


def test_a_full_disk_at_a_checkpoint_write_is_infrastructure(world):
    sub = world.submit(spec=world.spec({"disk_full_at_epoch": 1, "epoch_seconds": 0.01}))
    res = poll(world, sub.json["job_id"], *WAIT)
    assert res.code == 1 and res.json["state"] == "ERROR", res
    hint = res.json["hint"]
    assert hint["err_class"] == "ERR_INFRA" and hint["reason"] == "instance disk full"
    assert any("PytorchStreamWriter failed writing file" in line for line in hint["evidence"])
    assert "df -h" in hint["advice"]
    assert records(world).load(sub.json["job_id"])["err_class"] == "ERR_INFRA"


def test_an_unknown_failure_gets_a_hint_with_the_exit_code_and_last_lines(world):
    sub = world.submit(spec=world.spec({"exit_code": 3, "epoch_seconds": 0.01}))
    res = poll(world, sub.json["job_id"], *WAIT)
    assert res.code == 1 and res.json["hint"]["reason"] == "exit 3, no known pattern: read the last log lines"
    # TAO's logger line: "<time> - [TAO Toolkit] - WARNING - Execution status: FAIL (entrypoint.py:362)"
    assert any("Execution status: FAIL" in line for line in res.json["hint"]["evidence"])


def test_a_dead_container_is_terminal_error_infra(world):
    """moby: a dead container never runs again (its removal failed): the job ends ERROR, ERR_INFRA,
    and the hint says its results dir is still on the instance to collect."""
    job_id = hanging_job(world)
    world.sim.set_container_state("box", job_id, Status="dead")
    res = poll(world, job_id)
    assert res.json["state"] == "ERROR" and res.json["observed"]["docker_status"] == "dead", res
    assert res.json["hint"]["err_class"] == "ERR_INFRA" and "teardown.py" in res.json["hint"]["advice"]
    assert states(world, job_id) == ["PENDING", "RUNNING", "ERROR"]
    assert records(world).load(job_id)["terminal_state"] == "ERROR"
    world.sim.set_container_state("box", job_id, Status="running")   # let teardown kill it


@pytest.mark.parametrize("status, state", [("paused", "RUNNING"), ("restarting", "PENDING"),
                                           ("removing", "UNKNOWN")])
def test_paused_restarting_removing_and_dead_containers(world, status, state):
    job_id = hanging_job(world)
    world.sim.set_container_state("box", job_id, Status=status)
    res = poll(world, job_id)
    assert res.code == 0 and res.json["state"] == state and res.json["observed"]["docker_status"] == status, res
    assert status in res.json["message"]
    expected = ["PENDING", "RUNNING"] + ([state] if state != "RUNNING" else [])
    assert states(world, job_id) == expected
    if state == "UNKNOWN":
        waited = poll(world, job_id, *WAIT)
        assert waited.code == 1 and waited.json["error"]["code"] in ("CONTAINER_GONE", "INSTANCE_LOST"), waited
    world.sim.set_container_state("box", job_id, Status="running")   # let teardown kill it


def test_a_misspelled_instance_gets_one_answer_no_retries_and_closes(world):
    """my-bo for box: brev cannot look it up; brev ls does not list it. No retry waits, no "deleted"
    story, the same answer on every poll, teardown closes it and --all forgets it then."""
    data = world.put_dataset("box")
    argv = ("submit.py", "--instance", "my-bo", "--image", "images.tao_toolkit.pyt", "--network-arch",
            "visual_changenet", "--action", "train", "--spec", str(world.spec()), "--inputs", f"{data}=levir_cd_tiny")
    before = world.sim.exec_count()
    refused = world.run(*argv)   # submit asks brev ls first: no exec, nothing recorded
    assert refused.code == 1 and refused.json["error"]["code"] == "UNKNOWN_INSTANCE", refused
    assert world.sim.exec_count() == before and "job_id" not in refused.json, refused
    assert "brev ls" in refused.json["error"]["fix"] and not list(records(world).jobs_dir.glob("*.json"))
    # deleted between submit's brev ls and its exec: brev exec cannot look it up (a record exists)
    world.sim.add_instance("my-bo", vanish_at_exec=True)
    before = world.sim.exec_count()
    sub = world.run(*argv)   # a retry would show: a second exec, a 'retrying' line
    assert sub.code == 1 and sub.json["error"]["code"] == "UNKNOWN_INSTANCE", sub
    validate("submit", sub.json)
    assert world.sim.exec_count() - before <= 1 and "retrying" not in sub.stderr
    assert "brev ls" in sub.json["error"]["fix"] and "--instance" in sub.json["error"]["fix"]
    job_id = sub.json["job_id"]
    assert records(world).load(job_id)["terminal_state"] == "ERROR"
    assert sidecars(world).load(job_id).launch["instance_missing"] is True

    answers = []
    for args in ((), WAIT, ()):
        before = world.sim.exec_count()
        res = world.run("poll_status.py", job_id, *args)
        validate("poll_status", res.json)
        assert res.code == 1 and world.sim.exec_count() == before, res    # no round trip, no retries
        words = json.dumps([res.json["message"], res.json["error"], res.json["hint"]])
        assert "deleted" not in words and "--logs" not in words
        answers.append((res.json["state"], res.json["error"], res.json["message"]))
        assert res.json["cost"]["billed_s"] == 0
    assert answers[0] == answers[1] == answers[2] and answers[0][1]["code"] == "UNKNOWN_INSTANCE"

    listed = world.run("poll_status.py", "--all")
    assert listed.code == 1 and [j["job_id"] for j in listed.json["jobs"]] == [job_id], listed
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and down.json["state"] == "ERROR", down
    validate("teardown", down.json)
    assert down.json["container_removed"] is False and not down.json["deleted"]
    listed = world.run("poll_status.py", "--all")
    assert listed.code == 0 and listed.json["jobs"] == [], listed
    again = world.run("poll_status.py", job_id)
    assert again.code == 1 and again.json["error"] == answers[0][1] and again.json["closed_at"]
