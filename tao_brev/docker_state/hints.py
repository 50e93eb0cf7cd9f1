"""The advice texts of the failure hints (a poll answer fills their placeholders: JOB_ID, INSTANCE,
the job's own resume command)."""

from __future__ import annotations

from ..model.answer_types import PollAnswer
from ..vocabulary import STATES  # noqa: F401 (docker_state.STATES, the status vocabulary)

# The resume command of an advice: the poll answer replaces it with the job's exact submit command
# (tao_brev.resume_advice.fill: the job's own flags, then --resume-from for a train job, --retry-of otherwise).
RESUME = "submit.py ... --resume-from JOB_ID (continues from its last checkpoint)"
INFRA_ADVICE = f"retriable: resubmit, preferably on another instance: {RESUME}"
PROGRAM_ADVICE = "fix the spec/data/code before resubmitting"
# brev-cli pkg/cmd/stop/stop.go (PR #416): `brev stop` of a type that cannot stop is refused with
# `instance "NAME" does not support stop.`; brev search --json's `stoppable` says which types can
# (prices.stoppable). A text that names `brev stop` names it only under that condition (:func:`gated`).
RESET_BY_STOP = "stop and start the instance (brev stop INSTANCE, then brev start INSTANCE)"
RESET_BY_REPLACE = ("replace the instance: its type cannot stop (brev refuses: instance \"INSTANCE\" does not support "
                    "stop.), so once its results are safe delete it (teardown.py JOB_ID --delete-instance, or brev "
                    "delete INSTANCE) and use a new one; it bills its hourly GPU price until it is deleted")
RESET_EITHER = (f"{RESET_BY_STOP} if its type can stop; if brev answers `does not support stop`, "
                f"{RESET_BY_REPLACE}")
GPU_RESET_ADVICE = (f"the GPU needs a reset: {RESET_EITHER}; or use another instance; then resubmit: {RESUME}; "
                    "reinstalling the NVIDIA Container Toolkit does not help")


def gated(text: str, stoppable: bool | None) -> str:
    """``text`` with its reset (:data:`RESET_EITHER`) as the instance type allows: stop/start when
    it can stop, replace when it cannot, both when unknown (None)."""
    if not isinstance(text, str) or stoppable is None or RESET_EITHER not in text:
        return text
    return text.replace(RESET_EITHER, RESET_BY_STOP if stoppable else RESET_BY_REPLACE)


def gate_answer(answer: PollAnswer, stoppable: bool | None) -> PollAnswer:
    """A poll answer with every reset advice gated (``hint``, ``observed.hint``, ``error.fix``); copies."""
    out = answer.copy()
    hint, error = out.get("hint"), out.get("error")
    if isinstance(hint, dict) and "advice" in hint:
        out["hint"] = {**hint, "advice": gated(hint["advice"], stoppable)}
    if isinstance(error, dict) and "fix" in error:
        out["error"] = {**error, "fix": gated(error["fix"], stoppable)}
    observed = out.get("observed")
    if isinstance(observed, dict) and isinstance(observed.get("hint"), dict):
        out["observed"] = {**observed, "hint": gate_answer({"hint": observed["hint"]}, stoppable)["hint"]}
    return out


DISK_ADVICE = ("free disk space on the instance (brev exec INSTANCE \"df -h ~ /var/lib/docker\"; remove old "
               f"results, docker image prune) or use a larger disk, then resubmit: {RESUME}")
LOGS_ADVICE = "read the last log lines: poll_status.py JOB_ID --logs 200"
# nvidia-container-toolkit issue #48: a `systemctl daemon-reload` on the host resets the device cgroup of
# running containers; their CUDA/NVML calls then fail while the GPU itself is fine and new containers get it.
GPU_ACCESS_ADVICE = ("not the spec: the container lost its GPU devices (a host `systemctl daemon-reload`, "
                     "nvidia-container-toolkit #48); resubmit with --resume-from JOB_ID (a new "
                     "container gets the GPUs again; checkpoints survive); if it repeats, replace the instance")
DRIVER_ADVICE = ("the instance's NVIDIA kernel driver is not loaded (a kernel upgraded without its driver): reboot "
                 "the instance's host, then rerun preflight.py --instance INSTANCE --gpu-smoke; if nvidia-smi still "
                 "fails, replace the instance; reinstalling the container toolkit does not help")
KILL_ADVICE = ("if nobody killed it (docker kill / docker stop / teardown), it was most likely the host's OOM "
               f"killer: check `dmesg | grep -i oom` on the instance, then resubmit: {RESUME}, with a smaller "
               "batch size or num_workers, or on an instance with more RAM")
# The container's /dev/shm (docker --shm-size) exhausted by PyTorch DataLoader workers: the same
# settings fail the same way, so the resubmit names a larger --shm-size (argparse: the last one wins).
SHM_CODE = "SHM_EXHAUSTED"
SHM_ADVICE = ("not the instance disk: the container's shared memory (/dev/shm, docker --shm-size) ran out in the "
              "DataLoader workers, and the same --shm-size fails again; resubmit with a larger one (twice the "
              "job's, e.g. 32g for the default 16g) or fewer num_workers: "
              "submit.py ... --resume-from JOB_ID --shm-size 32g (continues from its last checkpoint)")
