"""docker, gpu, disk, ngc_auth, s3_from_instance and image in ONE ``brev exec``: the
registered units (:mod:`.units`) walked in order, then ``--gpu-smoke`` as its own round trip."""

from __future__ import annotations

from ... import credentials, remote
from ...errors import TaoBrevError, TransportError
from .disk import DISK_CHECK, DISK_DOCKER, DISK_RESULTS
from .docker_gpu import DOCKER, DOCKER_CHECK, DOCKER_PATH, GPU, GPU_CHECK
from .image import IMAGE, IMAGE_CHECK, MANIFEST, image_facts
from .ngc import NGC_CHECK, NGC_LOGIN, push_ngc_key
from .report import Context, PreflightRequest, Report
from .s3_reach import CARRIER, S3_CHECK, S3_REACH
from .smoke import check_gpu_smoke
from .units import Answers, NgcKey, Plan, S3Target

# The sections of the combined script, in the script's order: the NGC login runs before
# `docker manifest inspect`, which then uses it.
SNIPPETS = (DOCKER, DOCKER_PATH, GPU, DISK_DOCKER, DISK_RESULTS, IMAGE, NGC_LOGIN, MANIFEST, S3_REACH, CARRIER)
# The checks, in the answer's order (disk reads the image's size; image reads the docker,
# disk and ngc_auth outcomes before it pulls).
CHECKS = (DOCKER_CHECK, GPU_CHECK, DISK_CHECK, NGC_CHECK, S3_CHECK, IMAGE_CHECK)


def script(token: str, plan: Plan) -> str:
    """The on-instance checks as sections of one POSIX sh script: every section an applicable
    check needs. The NGC key file (if any) is removed by the trap on every path."""
    needed = {name for check in CHECKS if check.applies(plan) for name in check.needs}
    parts = [credentials.remove_on_exit(plan.key.file)] if plan.key.file else []
    for snippet in SNIPPETS:
        command = snippet.command(plan) if snippet.name in needed else None
        if command:
            parts.append(remote.section(token, snippet.name, command))
    return "\n".join(parts)


def combined_script(token: str, image: str | None, results_root: str,
                    key_file: credentials.RemoteSecretFile | None, s3: S3Target | None = None) -> str:
    """The combined script for ``image`` (or none), the results root, the NGC key file (its
    login section is read by ngc_auth: an nvcr.io image, the only kind a key is sent for) and
    the S3 target (see :func:`script`)."""
    return script(token, Plan(image, results_root, NgcKey(file=key_file), s3))


def check_on_instance(report: Report, ctx: Context, req: PreflightRequest, image: str | None,
                      results_root: str, s3: S3Target | None = None) -> None:
    """docker, gpu, disk, ngc_auth, s3_from_instance, image in ONE brev exec; then --pull and --gpu-smoke."""
    plan = Plan(image, results_root, s3=s3, ctx=ctx, req=req)
    if plan.ngc:
        plan.key = push_ngc_key(report, ctx, req)
    token = remote.new_token()
    try:
        result = report.count("checks", ctx.brev.exec, req.instance, script(token, plan), idempotent=True,
                              host=req.host)
    except TaoBrevError as exc:
        if plan.key.file:   # its trap never fired: the key file would stay on the instance
            credentials.discard(ctx.brev, req.instance, plan.key.file)
        if isinstance(exc, TransportError):
            report.stop("docker", exc)
        raise
    answers = Answers(remote.parse_sections(result.stdout, token), result.elapsed_s, req.instance)
    plan.facts = image_facts(answers, image) if image else None
    for check in CHECKS:
        if check.applies(plan):
            plan.done[check.name] = check.read(report, answers, plan)
    docker = plan.done["docker"]
    if req.gpu_smoke and docker is not None:   # the docker check always applies and reads to a Check
        check_gpu_smoke(report, ctx, req, docker)
