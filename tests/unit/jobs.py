"""Jobs for the unit tests, made the way a user makes them: ``submit`` over the fake brev."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tao_brev import remote
from tao_brev.errors import TaoBrevError
from tao_brev.verbs import submit
from tao_brev.verbs.submit import SubmitRequest

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "examples" / "visual_changenet" / "train.yaml"
IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt"


def entry(name: str = "box", status: str = "RUNNING", instance_type: str = "g5.xlarge", **extra) -> dict:
    """One ``brev ls --json`` row as brev prints it (brev-cli pkg/cmd/ls/ls.go)."""
    return {"name": name, "id": f"ws-{name}", "status": status, "build_status": "COMPLETED",
            "shell_status": "READY", "health_status": "HEALTHY", "instance_type": instance_type, **extra}


def state(status: str = "running", exit_code: int = 0, **extra) -> str:
    """``docker inspect --format '{{json .State}}'`` of a container."""
    data = {"Status": status, "Running": status == "running", "Paused": False, "Restarting": False,
            "OOMKilled": False, "Dead": False, "Pid": 4242 if status == "running" else 0, "ExitCode": exit_code,
            "Error": "", "StartedAt": "2026-12-01T10:00:00.000000000Z",
            "FinishedAt": "0001-01-01T00:00:00Z" if status == "running" else "2026-12-01T10:30:00.000000000Z"}
    data.update(extra)
    return json.dumps(data)


def refused_busy(ctx, fake_brev, holders: str, **kw) -> TaoBrevError:
    """A submit on box that the launch script refuses GPUS_BUSY (``holders``: its ``TAO_GPUS_BUSY NAME=GPUS``
    lines); the error it raised."""
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", "docker run -d", stdout=holders, exit=remote.GPUS_BUSY_EXIT)
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, SubmitRequest(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet",
                                         action="train", spec=str(SPEC), no_spec_check=True,
                                         inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"], **kw))
    assert raised.value.code == "GPUS_BUSY", raised.value.to_json()
    return raised.value


def launched(ctx, fake_brev, instance: str = "box", instance_type: str = "g5.xlarge", **kw) -> str:
    """A job submitted on ``instance`` (brev ls lists it as ``instance_type``) and RUNNING there;
    returns its job id. The calls it took are checked here, so the test's own calls start clean."""
    fake_brev.expect_ls(entry(instance, instance_type=instance_type))
    fake_brev.expect_exec(instance, "docker run -d", stdout="c0ffee" * 10 + "\n")
    base = dict(instance=instance, image="images.tao_toolkit.pyt", network_arch="visual_changenet",
                action="train", spec=str(SPEC), inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"])
    answer, code = submit.submit(ctx, SubmitRequest(**{**base, **kw}))
    assert code == 0 and answer["state"] == "RUNNING", answer
    fake_brev.verify()
    return answer["job_id"]


GPU_TYPES = [{"type": "g5.xlarge", "gpu_name": "A10G", "gpu_count": 1, "price_per_hour": 1.006, "stoppable": True},
             {"type": "a2-highgpu-1g", "gpu_name": "A100", "gpu_count": 1, "price_per_hour": 3.67,
              "stoppable": False}]


def expect_catalog(fake_brev, gpu: list | None = None) -> None:
    """``brev search gpu|cpu --json``: the instance types' prices (cached a day after)."""
    fake_brev.expect("search", "gpu", "--json", stdout=json.dumps(GPU_TYPES if gpu is None else gpu))
    fake_brev.expect("search", "cpu", "--json", stdout="[]")


def poll_sections(job_id: str, docker_state: str, **more) -> dict:
    """The sections one poll's round trip answers for ``job_id`` (``status.job_sections``)."""
    return {f"{job_id}:state": docker_state, f"{job_id}:tail": "", f"{job_id}:progress": "",
            f"{job_id}:lastlog": "", **more}


def expect_poll(fake_brev, job_id: str, docker_state: str, instance: str = "box", times: int = 1):
    """One poll of ``job_id``: the instance gate's ``brev ls``, then the round trip."""
    from tests.unit.fake_brev import sections

    fake_brev.expect_ls(entry(instance), times=times)
    return fake_brev.expect_exec(instance, f"{job_id}:state", answer=sections(poll_sections(job_id, docker_state)),
                                 times=times)
