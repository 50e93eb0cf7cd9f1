"""submit in process: the dry run (one brev ls: the instance's status), the launch round trip, and its refusals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tao_brev import remote
from tao_brev.errors import TaoBrevError
from tao_brev.verbs import submit
from tao_brev.verbs.submit import SubmitRequest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "visual_changenet" / "train.yaml"
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt"
BOX = {"name": "box", "id": "ws-1", "status": "RUNNING", "build_status": "COMPLETED", "shell_status": "READY",
       "instance_type": "g5.xlarge"}
CONTAINER = "3f9a1c0d2b7e" * 5 + "abcd"


def request(**kw) -> SubmitRequest:
    base = dict(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet", action="train",
                spec=str(SPEC), inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"])
    return SubmitRequest(**{**base, **kw})


def test_a_dry_run_plans_the_launch_and_only_reads_the_instance_status(ctx, fake_brev):
    fake_brev.expect_ls(BOX)
    answer, code = submit.submit(ctx, request(dry_run=True))
    assert code == 0 and answer["ok"] is True and answer["dry_run"] is True and answer["job_id"] is None
    assert answer["image"] == IMAGE
    assert [s["step"] for s in answer["plan"]] == ["open_record", "launch", "mark_running"]
    launch = answer["plan"][1]
    assert launch["command"] == "brev exec box <script>" and "docker run -d" in launch["script"]
    assert [c.args for c in fake_brev.calls] == [["ls", "--json"]] and ctx.records.list() == []
    assert answer["instance_status"] == "RUNNING" and "instance_note" not in answer


def test_a_launch_opens_the_record_and_marks_it_running(ctx, fake_brev):
    fake_brev.expect_ls(BOX)
    launch = fake_brev.expect_exec("box", re.compile(r"docker run -d --name visual_changenet-train-"),
                                   stdout=CONTAINER + "\n")
    answer, code = submit.submit(ctx, request())
    assert code == 0 and answer["ok"] is True and answer["state"] == "RUNNING", answer
    job_id = answer["job_id"]
    assert answer["backend_ref"] == f"box/{job_id}" and answer["container_id"] == CONTAINER
    assert answer["adopted"] is False
    assert f"--label tao-job={job_id}" in launch.calls[0].command
    record = ctx.records.load(job_id)
    assert [t["state"] for t in record["transitions"]] == ["PENDING", "RUNNING"]
    assert ctx.sidecars.load(job_id).launch["state"] == "launched"


def test_a_missing_image_closes_the_record_as_never_launched(ctx, fake_brev):
    fake_brev.expect_ls(BOX)
    fake_brev.expect_exec("box", "docker run -d", stdout="TAO_IMAGE_MISSING\n", exit=4)
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, request())
    exc = raised.value
    assert exc.code == "IMAGE_NOT_PULLED" and exc.exit_code == 1
    answer = exc.details["answer"]
    assert answer["state"] == "ERROR" and answer["backend_ref"] is None
    assert ctx.records.load(answer["job_id"])["transitions"][-1]["state"] == "ERROR"


def test_a_stopped_instance_is_refused_before_a_record_opens(ctx, fake_brev):
    fake_brev.expect_ls({**BOX, "status": "STOPPED"})
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, request(argv=["--instance", "box", "--spec", str(SPEC)]))
    assert raised.value.code == "INSTANCE_NOT_RUNNING" and "--start" in raised.value.fix
    assert ctx.records.list() == [] and fake_brev.exec_commands() == []


RUNNING_STATE = '{"Status":"running","Running":true,"ExitCode":0,"StartedAt":"2026-12-01T10:00:00Z"}'


def test_an_ambiguous_launch_whose_container_exists_is_adopted(ctx, fake_brev):
    fake_brev.expect_ls(BOX)
    fake_brev.expect_exec("box", "docker run -d", raw=True, stderr="ssh: connect to host: Connection reset\n",
                          exit=1)   # no frame: the launch may or may not have run
    ask = fake_brev.expect_exec("box", "TAO_NEVER_LAUNCHED", stdout=RUNNING_STATE + "\n")
    answer, code = submit.submit(ctx, request())
    assert code == 0 and answer["ok"] is True, answer
    assert answer["reconciled"] == "adopted" and answer["state"] == "RUNNING"
    job_id = answer["job_id"]
    assert ask.calls[0].command == remote.reconcile_launch(job_id)   # under the launch lock
    assert ctx.records.load(job_id)["backend_ref"] == f"box/{job_id}"


def test_an_ambiguous_launch_with_no_container_is_closed_as_never_launched(ctx, fake_brev):
    fake_brev.expect_ls(BOX)
    fake_brev.expect_exec("box", "docker run -d", timeout=True)
    fake_brev.expect_exec("box", "TAO_NEVER_LAUNCHED", stdout="TAO_NEVER_LAUNCHED\n", exit=5)
    answer, code = submit.submit(ctx, request())
    assert code == 1 and answer["ok"] is False and answer["state"] == "ERROR", answer
    assert answer["reconciled"] == "never_launched"
    assert ctx.records.load(answer["job_id"])["transitions"][-1]["state"] == "ERROR"


def test_an_env_value_travels_in_a_copied_file_never_on_a_command_line(ctx, fake_brev):
    value = "hf_" + "Qm7Zt2Lx9Vb4Nc8Rk1Wp5Yd3" * 2
    ctx.env["HF_TOKEN"] = value
    fake_brev.expect_ls(BOX)
    copied = []

    def copy(call):
        copied.append(Path(call.args[1]).read_text())
        return "", "", 0
    fake_brev.expect("copy", re.compile(r"/.+/cred"), re.compile(r"box:\.tao-cred-visual_changenet-train-\w+-[0-9a-f]{10}"),
                     answer=copy)
    launch = fake_brev.expect_exec("box", "docker run -d", stdout=CONTAINER + "\n")
    answer, code = submit.submit(ctx, request(env_names=["HF_TOKEN"]))
    assert code == 0 and answer["state"] == "RUNNING", answer
    assert copied == [f"HF_TOKEN={value}\n"]
    assert "--env-file" in launch.calls[0].command
    assert not [c for c in fake_brev.calls if value in " ".join(c.args) or value in c.env.values()]
