"""What the launch round trip's answer says: :class:`LaunchOutcome`, read from its exit
status and the marker words the launch script prints.

Who prints which marker (each read here by the same constant):
- this module's :func:`inputs_check`: ``TAO_INPUT_MISSING`` (exit 5, tier A inputs);
- ``remote.submit_script`` (frozen, so its words are named here): ``TAO_ALREADY_SUBMITTED``,
  ``TAO_IMAGE_MISSING`` (exit 4), ``remote.DOCKER_MISSING`` (127), ``TAO_NO_GPUS``
  (``remote.NO_GPUS_EXIT``), ``TAO_GPUS_BUSY`` (``remote.GPUS_BUSY_EXIT``),
  ``TAO_WRITE_FAILED`` / ``TAO_SPEC_UNVERIFIED`` (``remote.WRITE_FAILED_EXIT``);
- ``resume.checks``: ``resume.MISSING`` (``resume.RESUME_FAILED_EXIT``);
- ``spec_paths.check_lines``: ``spec_paths.MARKER`` (``spec_paths.MISSING_EXIT``), read by ``spec_paths.describe``;
- ``staging.fetch_script``: ``TAO_STAGE_FAILED`` (``staging.STAGE_FAILED_EXIT``).
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Sequence, TypedDict

from ... import eta_seen, nextstep, remote, resume, spec_paths
from ... import s3 as staging
from ...docker_state import Observed, docker_error_code
from ...errors import CODES
from ...model.answer_types import ResumeFrom
from ...secrets import redact
from ...transport import RemoteResult
from .. import reconcile

if TYPE_CHECKING:   # type hints only: plan imports this module (inputs_check)
    from .plan import SubmitRequest

INPUT_MISSING = "TAO_INPUT_MISSING"
INPUT_MISSING_EXIT = 5
ALREADY_SUBMITTED = "TAO_ALREADY_SUBMITTED"    # remote.submit_script: the container exists, adopted
IMAGE_MISSING = "TAO_IMAGE_MISSING"            # ... exit 4: the image is not on the instance
IMAGE_MISSING_EXIT = 4
NO_GPUS = "TAO_NO_GPUS"
GPUS_BUSY = "TAO_GPUS_BUSY"
WRITE_FAILED = ("TAO_WRITE_FAILED", "TAO_SPEC_UNVERIFIED")
STAGE_FAILED = "TAO_STAGE_FAILED"


def inputs_check(mounts: Sequence[tuple[str, str, bool]]) -> str:
    """The launch script's ``test -e`` of each tier A input (``INPUT_MISSING PATH``, exit 5)."""
    return "\n".join(f"test -e {remote.rpath(host)} || {{ echo {INPUT_MISSING} {remote.rpath(host)}; "
                     f"exit {INPUT_MISSING_EXIT}; }}" for host, _c, _ro in mounts)


# what a live job has left of its last poll's ETA (eta_seen.left: left_s, age_s, eta_s), or None
EtaLeft = Optional[eta_seen.EtaLeft]


class BusyFields(TypedDict):
    """What a GPUS_BUSY refusal adds to the answer (SubmitAnswer's ``busy_job``, ``busy_eta_s``)."""
    busy_job: str
    busy_eta_s: int | None


@dataclass(frozen=True)
class Refusal:
    """What a rule of _RULES recognised: the error code, why, the fix (None: the code's own), the fields."""

    code: str
    why: str
    fix: str | None = None
    fields: BusyFields | None = None


@dataclass(frozen=True)
class LaunchOutcome:
    """One launch round trip, decoded. ``ok``: the container runs (``adopted``: it existed
    already; ``failed_start``: docker created it but could not start it, from
    ``reconcile.failed_start``; ``resume_chosen``: the checkpoint the instance chose). Else a
    refusal: ``code`` (an error code of ``errors.CODES``), ``why``, ``fix`` (None: the code's own)
    and ``fields``: what the refusal adds to the answer (GPUS_BUSY: ``busy_job``, ``busy_eta_s``)."""

    ok: bool
    adopted: bool = False
    container_id: str | None = None
    failed_start: Observed | None = None
    resume_chosen: ResumeFrom | None = None
    code: str | None = None
    why: str = ""
    fix: str | None = None
    before_run: bool = False   # a rule of _RULES decided it: the launch script stopped before `docker run`
    fields: BusyFields | None = None
    gpu_count: int | None = None   # --gpus all: the GPUs the launch counted (the host keys' value)


@dataclass(frozen=True)
class _Reply:
    exit_code: int
    out: str
    err: str
    docker_code: str   # docker_state's reading of the output (SUBMIT_REFUSED when it names nothing)
    req: SubmitRequest  # its rerun builds the fixes
    job_id: str
    image: str
    named: list[tuple[str, str]]   # spec_paths.named: the paths the spec reads, numbered as the script checks them
    eta_of: Callable[[str], EtaLeft]   # a live job's name -> eta_seen.left of its last poll's ETA, or None


def parse(result: RemoteResult, req: SubmitRequest, job_id: str, image: str, named: list[tuple[str, str]],
          resumed: resume.ResumePlan | None, eta_of: Callable[[str], EtaLeft] = lambda name: None) -> LaunchOutcome:
    """The outcome of ``brev exec``'s ``result`` (stdout, stderr, exit code) of the launch script
    (``eta_of``: what is left of a live job's ETA, :func:`eta_seen.left`, for GPUS_BUSY)."""
    out = result.stdout
    if result.ok:
        adopted = ALREADY_SUBMITTED in out
        failed = reconcile.failed_start(out) if adopted else None
        if failed is not None:   # brev's own retry found the container a first run created but could not start
            return LaunchOutcome(ok=True, adopted=True, failed_start=failed)
        container_id = out.strip().splitlines()[-1] if out.strip() and not adopted else None
        counted = re.search(rf"^{remote.GPU_COUNT} ([0-9]+)$", out, re.MULTILINE)
        return LaunchOutcome(ok=True, adopted=adopted, container_id=container_id,
                             resume_chosen=resume.launched(resumed, out),
                             gpu_count=int(counted.group(1)) if counted and not adopted else None)
    reply = _Reply(result.exit_code, out, result.stderr,
                   docker_error_code(result.stderr + out, default="SUBMIT_REFUSED"),   # e.g. the daemon is down
                   req, job_id, image, named, eta_of)
    for rule in _RULES:
        found = rule(reply)
        if found is not None:
            return LaunchOutcome(ok=False, code=found.code, why=found.why, fix=found.fix, before_run=True,
                                 fields=found.fields)
    return LaunchOutcome(ok=False, code=reply.docker_code, why=f"docker run failed (exit {reply.exit_code}): "
                         f"{redact.tail(reply.err or out, 500)}")


def _image_missing(r: _Reply) -> Refusal | None:
    if r.exit_code == IMAGE_MISSING_EXIT and IMAGE_MISSING in r.out and r.docker_code == "SUBMIT_REFUSED":
        return Refusal("IMAGE_NOT_PULLED", f"image {r.image} is not on {r.req.instance}")
    return None


def _docker_missing(r: _Reply) -> Refusal | None:
    if not (r.exit_code == 127 and remote.DOCKER_MISSING in r.out):
        return None
    command = r.out.split(remote.DOCKER_MISSING, 1)[1].strip().splitlines()[0]
    why = (f"`{command}` failed on {r.req.instance}: docker: command not found on the PATH of the "
           "non-interactive ssh shell (nothing was launched)")
    return Refusal("DOCKER_NOT_FOUND", why, f"Run preflight.py --instance {r.req.instance}: its docker check tells "
                   "a missing Docker from one that only a login shell finds, with the fix for each.")


def _no_gpus(r: _Reply) -> Refusal | None:
    if not (r.exit_code == remote.NO_GPUS_EXIT and NO_GPUS in r.out):
        return None
    why = f"--gpus all: nvidia-smi -L on {r.req.instance} lists no GPU (nothing was launched)"
    if r.docker_code == "GPU_DRIVER_NOT_LOADED":   # nvidia-smi: couldn't communicate with the NVIDIA driver
        return Refusal(r.docker_code, why + ": " + redact.tail(r.err, 200),
                       CODES[r.docker_code].fix.replace("NAME", r.req.instance))
    return Refusal("GPU_NOT_FOUND", why, f"Check the instance: preflight.py --instance {r.req.instance} --gpu-smoke")


def _gpus_busy(r: _Reply) -> Refusal | None:
    """GPUS_BUSY: the live tao-job containers (``TAO_GPUS_BUSY NAME=GPUS`` lines), how long they have
    left (their last poll's ETA: ``busy_eta_s``, None when no poll saw one) and how to wait or cancel."""
    if not (r.exit_code == remote.GPUS_BUSY_EXIT and GPUS_BUSY in r.out):
        return None
    req = r.req
    holders = [line.split(" ", 1)[1].strip().partition("=") for line in r.out.splitlines()
               if line.startswith(GPUS_BUSY + " ")]
    known = {name: r.eta_of(name) for name, _, _ in holders}
    untimed = [name for name, _, _ in holders if known[name] is None]
    timed = {name: left for name, left in known.items() if left is not None}
    # the last to end: one whose time left is unknown may be it (the wait's length is unknown then)
    busy = untimed[0] if untimed else max(timed, key=lambda name: timed[name]["left_s"])
    eta = None if untimed else timed[busy]["left_s"]
    live = ", ".join(f"{name} (GPUs {gpus or 'all'}; {eta_seen.phrase(known[name]) or 'time left unknown'})"
                     for name, _, gpus in holders)
    scripts = os.path.dirname(req.prog)
    poll = shlex.join([os.path.join(scripts, "poll_status.py"), busy, "--wait", "--interval",
                       str(nextstep.WAIT_INTERVAL_S), "--timeout", str(nextstep.covering_timeout(None, eta))])
    cancel = shlex.join([os.path.join(scripts, "teardown.py"), busy])
    again = req.rerun(set_flags={"--retry-of": r.job_id})
    why = (f"GPUs busy: live job {live} on {req.instance} holds GPUs that this job (--gpus {req.gpus}) asks for; "
           "two jobs on the same GPUs slow each other down or run out of memory")
    left = (f"{eta_seen.phrase(known[busy])}" if eta is not None
            else "how long it has left is unknown: no poll saw its ETA")
    fix = (f"Wait for it ({left}): {poll}, then submit again: {again}. Or cancel it: {cancel}. Or share the GPUs "
           f"on purpose: {req.rerun(set_flags={'--retry-of': r.job_id}, add=('--share-gpus',))}")
    return Refusal("GPUS_BUSY", why, fix, {"busy_job": busy, "busy_eta_s": eta})


def _spec_failed(r: _Reply) -> Refusal | None:
    """The spec did not reach the instance intact (write failed, or size/sha256 differ): nothing launched."""
    if not (r.exit_code == remote.WRITE_FAILED_EXIT and any(word in r.out for word in WRITE_FAILED)):
        return None
    req = r.req
    marker = next(line for line in r.out.splitlines() if line.startswith(WRITE_FAILED))
    why = f"the spec did not reach {req.instance} intact ({marker}): {redact.tail(r.err, 300) or 'no message'}"
    again = req.rerun(set_flags={"--retry-of": r.job_id})
    if r.docker_code == "DISK_FULL":
        return Refusal("DISK_FULL", why, f"Free disk space on {req.instance} (see what fills it: brev exec "
                       f"{req.instance} 'df -h ~ /var/lib/docker; docker system df' </dev/null), then: {again}")
    return Refusal("SPEC_NOT_WRITTEN", why, f"Check the instance disk and home directory, then: {again}")


def _resume_failed(r: _Reply) -> Refusal | None:
    """RESUME_CHECKPOINT_MISSING: the instance found no usable checkpoint of --resume-from's job."""
    if not (r.exit_code == resume.RESUME_FAILED_EXIT and resume.MISSING in r.out):
        return None
    req = r.req
    detail = r.out.split(resume.MISSING, 1)[1].strip().splitlines()[0]
    why = f"no usable checkpoint of {req.resume_from} on {req.instance} ({detail}): nothing was launched"
    look = nextstep.command("poll_status.py", req.resume_from)
    return Refusal("RESUME_CHECKPOINT_MISSING", why, f"Train from the start instead: "
                   f"{req.rerun(drop=('--resume-from',))}; or look at its results: {look}")


def _spec_path_missing(r: _Reply) -> Refusal | None:
    if r.exit_code == spec_paths.MISSING_EXIT and spec_paths.MARKER in r.out:
        return Refusal("SPEC_PATH_MISSING", spec_paths.describe(r.named, r.out), spec_paths.fix(r.req))
    return None


def _input_missing(r: _Reply) -> Refusal | None:
    if r.exit_code == INPUT_MISSING_EXIT and INPUT_MISSING in r.out:
        return Refusal("INPUT_NOT_FOUND",
                       "input path missing on the instance: " + r.out.split(INPUT_MISSING, 1)[1].strip())
    return None


def _stage_failed(r: _Reply) -> Refusal | None:
    if not (r.exit_code == staging.STAGE_FAILED_EXIT and STAGE_FAILED in r.out):
        return None
    code = r.docker_code if r.docker_code in ("DISK_FULL", "DOCKER_DAEMON_DOWN") else "INPUT_STAGING_FAILED"
    return Refusal(code, "copying input " + r.out.split(STAGE_FAILED, 1)[1].strip() + " from S3 failed: "
                   + redact.tail(r.err, 500))


# in the order they are tried: the first that recognises the reply decides
_RULES = (_image_missing, _docker_missing, _no_gpus, _gpus_busy, _spec_failed, _resume_failed, _spec_path_missing,
          _input_missing, _stage_failed)
