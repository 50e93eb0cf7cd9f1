"""The whole life of a job on the simulated Brev instance, through the scripts."""

import json
import os
import shlex
from pathlib import Path

from conftest import TAO_IMAGE, validate


def test_full_lifecycle_ends_complete_with_checkpoints_and_no_container(world):
    sub = world.submit()
    assert sub.code == 0, sub
    validate("submit", sub.json)
    job_id = sub.json["job_id"]
    assert sub.json["state"] == "RUNNING" and sub.json["backend_ref"] == f"box/{job_id}"
    assert sub.json["image"] == TAO_IMAGE
    assert any("EPHEMERAL" in w for w in sub.json["warnings"])

    wait = world.run("poll_status.py", job_id, "--wait", "--interval", "0.2", "--timeout", "60")
    assert wait.code == 0, wait
    validate("poll_status", wait.json)
    assert wait.json["state"] == "COMPLETE" and wait.json["terminal_state"] == "COMPLETE"

    logs = world.run("poll_status.py", job_id, "--logs", "50")
    assert logs.code == 0 and "Epoch 2: 100%" in logs.json["logs"]   # Lightning counts epochs from 0
    validate("poll_status", logs.json)

    results = world.sim.instance_home("box") / "tao-results" / job_id / "train"
    checkpoints = [f"model_epoch_{i:03d}_step_{(i + 1) * 25:05d}.pth" for i in range(3)]
    assert sorted(p.name for p in results.glob("model_epoch_*.pth")) == checkpoints
    # TAO's relative <checkpoint_filename>_latest.pth symlink; the example is task: segment
    # (tao-pytorch cv/visual_changenet/segmentation/models/cn_pl_model.py:93)
    latest = results / "changenet_model_segment_latest.pth"
    assert latest.is_symlink() and os.readlink(latest) == checkpoints[-1]
    last = json.loads((results / "status.json").read_text().splitlines()[-1])
    # TAO 7 never writes SUCCESS: monitor_status ends with RUNNING "Train finished successfully."
    assert (last["status"], last["message"]) == ("RUNNING", "Train finished successfully.")

    down = world.run("teardown.py", job_id)
    assert down.code == 0, down
    validate("teardown", down.json)
    assert down.json["state"] == "COMPLETE" and down.json["container_removed"] is True
    assert down.json["instance_deleted"] is False and down.json["deleted"] == []
    assert world.sim.container("box", job_id) is None

    record = world.run("tao_job_record.py", "show", job_id).json
    validate("job_record", record)
    assert [t["state"] for t in record["transitions"]] == ["PENDING", "RUNNING", "COMPLETE"]
    assert record["terminal_write_by"] == "poller"


def test_submit_twice_creates_one_container(world):
    """The launch command guards itself: sent again for the same job id (an
    agent's retry, brev's own second execution), it adopts the container."""
    from tao_brev import remote
    from tao_brev.transport import Brev

    job_id = world.submit().json["job_id"]
    assert world.sim.docker_run_count("box", job_id) == 1
    again = remote.submit_script(remote.RunSpec(job_id=job_id, image=TAO_IMAGE, network_arch="visual_changenet",
                                                action="train", results_dir=f"~/tao-results/{job_id}"), "a: 1\n")
    result = Brev(env=world.env).exec("box", again)
    assert result.ok and "TAO_ALREADY_SUBMITTED" in result.stdout
    assert world.sim.docker_run_count("box", job_id) == 1


def test_failing_job_ends_error_with_the_exit_code(world):
    sub = world.submit(spec=world.spec({"exit_code": 3, "epoch_seconds": 0.01}))
    wait = world.run("poll_status.py", sub.json["job_id"], "--wait", "--interval", "0.2", "--timeout", "60")
    assert wait.code == 1
    validate("poll_status", wait.json)
    assert wait.json["state"] == "ERROR" and "exit code 3" in wait.json["message"]
    assert wait.json["error"]["code"] == "JOB_FAILED"


def test_oom_job_ends_error_naming_oom(world):
    sub = world.submit(spec=world.spec({"oom": True, "epoch_seconds": 0.01}))
    wait = world.run("poll_status.py", sub.json["job_id"], "--wait", "--interval", "0.2", "--timeout", "60")
    assert wait.code == 1 and wait.json["state"] == "ERROR"
    assert "OOM" in wait.json["message"]
    assert wait.json["hint"]["err_class"] == "ERR_PROGRAM"
    assert wait.json["observed"]["oom_killed"] is True and wait.json["observed"]["exit_code"] == 137


def test_host_oom_and_gpu_oom_get_their_own_advice(world):
    """docker's OOMKilled is the host's RAM; PyTorch's "CUDA out of memory" is the GPU's: each
    answer names its own memory, and no hint contradicts its evidence."""
    answers = {}
    for key in ("oom", "cuda_oom"):
        sub = world.submit(spec=world.spec({key: True, "epoch_seconds": 0.01}))
        answers[key] = world.run("poll_status.py", sub.json["job_id"], "--wait", "--interval", "0.2",
                                 "--timeout", "60").json
    host, gpu = answers["oom"], answers["cuda_oom"]
    assert host["observed"]["oom_killed"] is True and "RAM" in host["hint"]["advice"]
    assert not any("CUDA" in line for line in host["hint"]["evidence"])
    assert gpu["observed"]["oom_killed"] is False and gpu["observed"]["exit_code"] == 1
    assert gpu["hint"]["reason"] == "CUDA out of memory" and "GPU" in gpu["hint"]["advice"]
    assert "RAM" not in gpu["hint"]["advice"]
    for answer in (host, gpu):
        assert answer["error"]["code"] == "JOB_FAILED" and "--retry-of " + answer["job_id"] in answer["error"]["fix"]
    # killed mid-run (host) or raising an exception monitor_status does not catch (torch's OOM:
    # tao-pytorch core/decorators/workflow.py:68-109 writes no FAILURE line for it), the status
    # file's last line still says RUNNING: no ETA, a note that it ended
    for answer in (host, gpu):
        assert answer["progress"]["last_tao_status"] == "RUNNING", answer["progress"]   # TAO's last word
        assert "status" not in answer["progress"]
        assert answer["progress"]["eta_s"] is None and "ended ERROR" in answer["progress"]["note"]


def test_a_log_pattern_beside_docker_s_record_adds_its_advice():
    """OOMKilled with a CUDA OOM line in the logs (both can happen): the hint keeps docker's
    fact and adds the log's cause, instead of advice that contradicts its evidence."""
    from tao_brev.docker_state import from_inspect
    state = {"Status": "exited", "ExitCode": 137, "OOMKilled": True}
    hint = from_inspect(state, logs="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB").hint
    assert "RAM" in hint["advice"] and "CUDA out of memory" in hint["advice"] and "GPU" in hint["advice"]
    assert "CUDA out of memory" not in from_inspect(state, logs="Epoch 1/3").hint["advice"]


def test_xid_in_the_log_hints_infrastructure(world):
    sub = world.submit(spec=world.spec({"xid": True, "epoch_seconds": 0.01}))
    wait = world.run("poll_status.py", sub.json["job_id"], "--wait", "--interval", "0.2", "--timeout", "60")
    assert wait.json["state"] == "ERROR"
    assert wait.json["hint"]["err_class"] == "ERR_INFRA"
    assert any("Xid" in line for line in wait.json["hint"]["evidence"])


def test_job_removed_behind_our_back_is_unknown(world):
    sub = world.submit(spec=world.spec({"hang": True}))
    job_id = sub.json["job_id"]
    from tao_brev.transport import Brev

    Brev(env=world.env).run("box", f"docker rm -f {job_id}")
    status = world.run("poll_status.py", job_id)
    assert status.code == 0 and status.json["state"] == "UNKNOWN"
    validate("poll_status", status.json)
    record = world.run("tao_job_record.py", "show", job_id).json
    assert record["transitions"][-1]["state"] == "UNKNOWN" and record["terminal_state"] is None
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and down.json["state"] == "CANCELED"


def test_teardown_of_a_running_job_cancels_it(world):
    sub = world.submit(spec=world.spec({"hang": True}))
    job_id = sub.json["job_id"]
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and down.json["state"] == "CANCELED" and down.json["container_removed"]
    assert world.sim.container("box", job_id) is None
    # a second teardown is harmless and keeps the terminal state
    again = world.run("teardown.py", job_id)
    assert again.code == 0 and again.json["state"] == "CANCELED" and again.json["container_removed"] is False


def test_dry_run_launches_nothing_and_shows_every_remote_command(world):
    res = world.submit("--dry-run", "--env", "HF_TOKEN", HF_TOKEN="hf_dryrunSECRETvalue0123456789")
    assert res.code == 0, res
    validate("submit", res.json)
    assert res.json["dry_run"] is True and res.json["job_id"] is None
    launch = [step for step in res.json["plan"] if step["step"] == "launch"][0]
    assert "docker run -d --name" in launch["script"] and "--rm" not in launch["script"]
    assert "hf_dryrunSECRET" not in res.stdout + res.stderr
    assert world.sim.exec_count() == 0
    assert world.run("tao_job_record.py", "list").stdout == ""


def test_a_dry_run_on_a_stopped_instance_says_so_and_next_is_the_submit_with_start(world):
    """Its answer must not lead to the guards' refusal: next is the submit INSTANCE_NOT_RUNNING's fix names."""
    world.put_dataset()
    world.sim.set_instance("box", status="STOPPED")
    spec = world.spec({"epoch_seconds": 0.05})
    res = world.submit("--dry-run", spec=spec)
    assert res.code == 0 and res.json["instance_status"] == "STOPPED", res
    validate("submit", res.json)
    assert "INSTANCE_NOT_RUNNING" in res.json["instance_note"] and res.json["instance_note"] in res.json["warnings"]
    assert world.sim.instance("box")["status"] == "STOPPED" and world.sim.exec_count() == 0
    words = shlex.split(res.json["next"])
    assert "--start" in words and "--dry-run" not in words, words
    refused = world.submit(spec=spec)
    assert refused.json["error"]["code"] == "INSTANCE_NOT_RUNNING", refused
    assert shlex.split(refused.json["error"]["fix"].rsplit(": ", 1)[1])[1:] == words[1:]
    started = world.run("submit.py", *words[1:])
    assert started.code == 0 and started.json["state"] == "RUNNING", started


def test_image_not_on_the_instance_is_refused_before_any_gpu_time(world):
    world.sim.add_instance("fresh")
    res = world.submit(instance="fresh")
    assert res.code == 1 and res.json["error"]["code"] == "IMAGE_NOT_PULLED"
    validate("submit", res.json)
    assert "preflight.py" in res.json["error"]["fix"]
    record = world.run("tao_job_record.py", "show", res.json["job_id"]).json
    assert record["terminal_state"] == "ERROR" and "never launched" in record["transitions"][-1]["message"]


def test_multi_node_is_refused_before_anything_is_recorded(world):
    spec = world.spec(num_nodes=2)
    res = world.submit(spec=spec)
    assert res.code == 2 and res.json["error"]["code"] == "MULTI_NODE_UNSUPPORTED"
    assert "train.num_nodes=2" in res.json["error"]["message"]
    override = world.submit("--", "train.num_nodes=4")
    assert override.code == 2 and override.json["error"]["code"] == "MULTI_NODE_UNSUPPORTED"
    assert world.run("tao_job_record.py", "list").stdout == "" and world.sim.exec_count() == 0


def test_a_gpu_id_the_instance_lacks_is_named(world):
    res = world.submit("--gpus", "0,5")
    assert res.code == 1 and res.json["error"]["code"] == "GPU_IDS_UNKNOWN"
    validate("submit", res.json)
    record = world.run("tao_job_record.py", "show", res.json["job_id"]).json
    assert record["terminal_state"] == "ERROR"


def test_a_tier_a_input_missing_on_the_instance_is_named_with_the_quoting_hint(world):
    res = world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                    "--network-arch", "visual_changenet", "--action", "train", "--spec", str(world.spec()),
                    "--inputs", "/root/not-on-the-instance=levir_cd_tiny")   # the name the spec reads
    assert res.code == 1 and res.json["error"]["code"] == "INPUT_NOT_FOUND"
    assert "quote ~" in res.json["error"]["fix"]
    assert world.sim.docker_run_count("box", res.json["job_id"]) == 0


def test_exec_ready_instances_are_remembered_across_script_runs(world, tmp_path):
    """The first contact gets the 600 s budget; later runs the shorter one, until a delete."""
    from tao_brev.context import Context
    from tao_brev.transport import EXEC_TIMEOUT_S, FIRST_EXEC_TIMEOUT_S

    assert Context(env=world.env).brev.timeout_for("box") == FIRST_EXEC_TIMEOUT_S
    assert world.run("poll_status.py", world.submit().json["job_id"]).code == 0
    ctx = Context(env=world.env)
    assert ctx.brev.timeout_for("box") == EXEC_TIMEOUT_S
    ctx.brev.delete("box")
    assert Context(env=world.env).brev.timeout_for("box") == FIRST_EXEC_TIMEOUT_S


def test_teardown_sweeps_credential_files_left_for_the_job(world):
    job_id = world.submit(spec=world.spec({"hang": True})).json["job_id"]
    home = world.sim.instance_home("box")
    (home / f".tao-cred-{job_id}-stale0000").write_text("X=1\n")   # e.g. a push whose command never ran
    (home / ".tao-cred-other-job-keep").write_text("Y=1\n")
    assert world.run("teardown.py", job_id).code == 0
    assert sorted(p.name for p in home.glob(".tao-cred-*")) == [".tao-cred-other-job-keep"]


def test_poll_all_quarantines_a_damaged_record_and_teardown_closes_it(world):
    ok_job = world.submit(spec=world.spec({"hang": True})).json["job_id"]
    bad_job = world.submit("--share-gpus", spec=world.spec({"hang": True})).json["job_id"]   # two live jobs on purpose
    path = Path(world.env["TAO_STATE_DIR"]) / "jobs" / f"{bad_job}.json"
    path.write_text("garbage{")
    for _ in range(2):   # not a one-off: the healthy job is never blocked by the damaged one
        res = world.run("poll_status.py", "--all")
        assert res.code == 0 and res.json["ok"] is True, res
        validate("poll_status", res.json)
        assert [(j["job_id"], j["state"]) for j in res.json["jobs"]] == [(ok_job, "RUNNING")]
        [entry] = res.json["quarantined"]
        assert entry["job_id"] == bad_job and entry["instance"] == "box" and f"teardown.py {bad_job}" in entry["fix"]
    assert not path.exists() and (path.parent / "quarantine" / path.name).read_text() == "garbage{"
    down = world.run("teardown.py", bad_job)
    assert down.code == 0 and down.json["container_removed"] is True and down.json["job_id"] == bad_job, down
    validate("teardown", down.json)
    assert world.sim.container("box", bad_job) is None and world.sim.container("box", ok_job) is not None
    res = world.run("poll_status.py", "--all")
    assert res.code == 0 and "quarantined" not in res.json, res


def test_poll_all_without_brev_is_one_exit_3_answer(world):
    world.submit(spec=world.spec({"hang": True}))
    res = world.run("poll_status.py", "--all", PATH="/usr/bin:/bin")
    assert res.code == 3 and res.json["error"]["code"] == "BREV_NOT_FOUND", res
    validate("poll_status", res.json)


def test_logs_survive_teardown(world):
    job_id = world.submit().json["job_id"]
    assert world.run("poll_status.py", job_id, "--wait", "--interval", "0.2", "--timeout", "60").code == 0
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and down.json["container_removed"]
    logs = world.run("poll_status.py", job_id, "--logs", "20")
    assert logs.code == 0 and "Epoch 2: 100%" in logs.json["logs"], logs
    assert logs.json["logs_source"].startswith("saved at teardown")
    validate("poll_status", logs.json)
