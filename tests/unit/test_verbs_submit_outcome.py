"""The launch round trip's answer read in process (``submit.outcome``): each marker and exit status
the launch script prints becomes its error code, the record closed as never launched (ERROR, no
backend ref), and the same marker with another exit status is not taken for it."""

from __future__ import annotations

import pytest

from tao_brev import remote, spec_paths
from tao_brev.errors import TaoBrevError
from tao_brev.vocabulary import JobState
from tao_brev.verbs import submit
from tao_brev.verbs.submit import SubmitRequest, outcome
from tests.unit.jobs import SPEC, entry

CONTAINER = "c0ffee" * 10


def request(**kw) -> SubmitRequest:
    base = dict(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet", action="train",
                spec=str(SPEC), inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"], no_spec_check=True)
    return SubmitRequest(**{**base, **kw})


REPLIES = [   # (stdout, stderr, exit) of the launch script -> the answer's error code
    (f"{outcome.IMAGE_MISSING}\n", "", outcome.IMAGE_MISSING_EXIT, "IMAGE_NOT_PULLED"),
    (f"{remote.DOCKER_MISSING} docker\n", "sh: docker: not found\n", 127, "DOCKER_NOT_FOUND"),
    (f"{outcome.NO_GPUS}\n", "", remote.NO_GPUS_EXIT, "GPU_NOT_FOUND"),
    (f"{outcome.GPUS_BUSY} detectnet_v2-train-aaaaaa=0\n", "", remote.GPUS_BUSY_EXIT, "GPUS_BUSY"),
    (f"{outcome.WRITE_FAILED[0]} spec\n", "", remote.WRITE_FAILED_EXIT, "SPEC_NOT_WRITTEN"),
    (f"{outcome.INPUT_MISSING} /home/ubuntu/tao-data/levir_cd_tiny\n", "", outcome.INPUT_MISSING_EXIT,
     "INPUT_NOT_FOUND"),
    (f"{spec_paths.MARKER} /data/levir_cd_tiny/A\n", "", spec_paths.MISSING_EXIT, "SPEC_PATH_MISSING"),
    ("", "docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon "
         "running?\n", 125, "DOCKER_DAEMON_DOWN"),
]


@pytest.mark.parametrize("stdout, stderr, exit, code", REPLIES, ids=[r[3] for r in REPLIES])
def test_each_refusal_of_the_launch_script_is_its_code_and_closes_the_record(ctx, fake_brev, stdout, stderr, exit,
                                                                           code):
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", "docker run -d", stdout=stdout, stderr=stderr, exit=exit)
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, request())
    exc = raised.value
    assert exc.code == code, exc.to_json()
    answer = exc.details["answer"]
    assert answer["state"] == JobState.ERROR and answer["backend_ref"] is None
    record = ctx.records.load(answer["job_id"])
    assert record["terminal_state"] == JobState.ERROR and record.get("backend_ref") is None
    assert ctx.sidecars.load(answer["job_id"]).launch["code"] == code
    assert exc.fix   # every refusal says what to do


@pytest.mark.parametrize("stdout, stderr, exit, code", REPLIES[:-1], ids=[r[3] for r in REPLIES[:-1]])
def test_a_marker_with_another_exit_status_is_not_taken_for_it(ctx, fake_brev, stdout, stderr, exit, code):
    fake_brev.expect_ls(entry())   # output may print a marker word by chance: the exit status decides too
    fake_brev.expect_exec("box", "docker run -d", stdout=stdout, exit=1)
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, request())
    assert raised.value.code != code, raised.value.to_json()
    assert "exit 1" in raised.value.message


def test_an_existing_container_is_adopted_not_launched_twice(ctx, fake_brev):
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", "docker run -d", stdout=f"{outcome.ALREADY_SUBMITTED}\n{CONTAINER}\n")
    answer, code = submit.submit(ctx, request())
    assert code == 0 and answer["state"] == JobState.RUNNING and answer["adopted"] is True, answer
    assert ctx.records.load(answer["job_id"])["backend_ref"] == f"box/{answer['job_id']}"
