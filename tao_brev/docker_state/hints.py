"""The advice texts of the failure hints (a poll answer fills their placeholders: JOB_ID, INSTANCE,
the job's own resume command)."""

from __future__ import annotations

STATES = ("PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN")

# The resume command of an advice: the poll answer replaces it with the job's exact submit command
# (tao_brev.resume_advice.fill: the job's own flags, then --resume-from for a train job, --retry-of otherwise).
RESUME = "submit.py ... --resume-from JOB_ID (continues from its last checkpoint)"
INFRA_ADVICE = f"retriable: resubmit, preferably on another instance: {RESUME}"
PROGRAM_ADVICE = "fix the spec/data/code before resubmitting"
GPU_RESET_ADVICE = ("the GPU needs a reset: stop and start the instance (brev stop INSTANCE, then brev start "
                    f"INSTANCE) or use another instance, then resubmit: {RESUME}; reinstalling the NVIDIA "
                    "Container Toolkit does not help")
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
