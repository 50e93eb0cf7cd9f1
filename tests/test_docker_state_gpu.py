"""GPUs lost while a job runs, and a driver that is not loaded: their real messages, each
row of docker_state answered on its own (a guarantee module: every branch has its test).

Messages: NVML/CUDA after a host ``systemctl daemon-reload`` (nvidia-container-toolkit
issue #48): ``Failed to initialize NVML: Unknown Error``, ``RuntimeError: CUDA error: unknown
error``; a kernel without its driver: nvidia-container-cli ``nvml error: driver not loaded``,
nvidia-smi "couldn't communicate with the NVIDIA driver"."""

from __future__ import annotations

import pytest

from tao_brev import docker_state
from tao_brev.docker_state import classify_logs, docker_error_code, from_inspect
from tao_brev.errors import CODES
from tao_brev.model import JobSidecar

NVML_LOST = "Failed to initialize NVML: Unknown Error"
CUDA_UNKNOWN = "RuntimeError: CUDA error: unknown error"
HOOK_NO_DRIVER = ("docker: Error response from daemon: failed to create task for container: OCI runtime create "
                  "failed: nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.")
SMI_NO_DRIVER = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the "
                 "latest NVIDIA driver is installed and running.")


@pytest.mark.parametrize("line", [NVML_LOST, CUDA_UNKNOWN, "  " + CUDA_UNKNOWN.lower()])
def test_a_running_job_that_lost_its_gpus_is_infrastructure_with_resume_advice(line):
    logs = f"epoch 3/10\n{line}\nTraceback (most recent call last):\n  File x\n"
    seen = from_inspect({"Status": "exited", "ExitCode": 1}, logs)
    assert seen.state == "ERROR" and seen.hint["err_class"] == "ERR_INFRA"
    assert "lost its GPUs" in seen.hint["reason"]
    assert "--resume-from" in seen.hint["advice"] and "fix the spec" not in seen.hint["advice"]
    assert "daemon-reload" in seen.hint["advice"] and line.strip() in seen.hint["evidence"]


def test_the_nvml_loss_wins_over_the_traceback_and_over_a_program_pattern():
    hint = classify_logs(f"Traceback (most recent call last):\nFileNotFoundError: x\n{NVML_LOST}")
    assert (hint["err_class"], hint["evidence"]) == ("ERR_INFRA", [NVML_LOST])


@pytest.mark.parametrize("text", [NVML_LOST, CUDA_UNKNOWN])
def test_a_new_container_that_meets_the_nvml_loss_is_gpu_access_lost(text):
    assert docker_error_code(text) == "GPU_ACCESS_LOST"
    assert "--resume-from" in CODES["GPU_ACCESS_LOST"].fix


@pytest.mark.parametrize("text", ["nvidia-container-cli: initialization error: nvml error: unknown error",
                                  "Failed to initialize NVML: Driver/library version mismatch", "GPU is lost"])
def test_a_gpu_fault_stays_gpu_unhealthy(text):
    assert docker_error_code(text) == "GPU_UNHEALTHY"


@pytest.mark.parametrize("text", [HOOK_NO_DRIVER, SMI_NO_DRIVER])
def test_a_driver_that_is_not_loaded_is_its_own_code_never_the_toolkit(text):
    assert docker_error_code(text) == "GPU_DRIVER_NOT_LOADED"
    assert docker_state.registry_error_code(text, "nvcr.io") == "GPU_DRIVER_NOT_LOADED"
    fix = CODES["GPU_DRIVER_NOT_LOADED"].fix
    assert "reboot" in fix.lower() and "replace" in fix and "nvidia-ctk" not in fix


def test_a_launch_refused_for_a_missing_driver_names_the_code_and_its_fix():
    seen = from_inspect({"Status": "created", "ExitCode": 128, "Error": HOOK_NO_DRIVER})
    assert seen.state == "ERROR" and "GPU_DRIVER_NOT_LOADED" in seen.hint["reason"]
    assert seen.hint["advice"] == CODES["GPU_DRIVER_NOT_LOADED"].fix


def test_a_job_log_with_the_driver_gone_is_infrastructure_with_reboot_advice():
    hint = classify_logs(SMI_NO_DRIVER)
    assert hint["err_class"] == "ERR_INFRA" and "not loaded" in hint["reason"]
    assert "reboot" in hint["advice"] and "replace the instance" in hint["advice"]


def test_the_gpu_reset_advice_names_the_jobs_instance_not_the_placeholder():
    """The static advice says INSTANCE; a poll answer names the job's instance there (resume_advice.fill_answer),
    a whole word only: a code such as INSTANCE_STOPPED in the same text stays as it is."""
    from tao_brev import resume_advice

    record = {"id": "visual_changenet-train-1a2b3c", "action": "train"}
    hint = {"err_class": "ERR_INFRA", "advice": docker_state.GPU_RESET_ADVICE + " (else INSTANCE_STOPPED)"}
    out = resume_advice.fill_answer({"instance": "gpu-box-7", "hint": hint}, record, JobSidecar())
    advice = out["hint"]["advice"]
    assert "brev stop gpu-box-7, then brev start gpu-box-7" in advice and "INSTANCE_STOPPED" in advice, advice
    assert " INSTANCE " not in advice and "INSTANCE)" not in advice and "INSTANCE_STOPPED" in hint["advice"]
    bare = resume_advice.fill_answer({"hint": dict(hint)}, record, JobSidecar(instance="from-sidecar"))
    assert "brev stop from-sidecar" in bare["hint"]["advice"]
    assert "brev stop INSTANCE" in resume_advice.fill_answer({"hint": dict(hint)}, record, JobSidecar())["hint"]["advice"]
