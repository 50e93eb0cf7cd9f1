"""submit's guards: every check that runs before a record opens, in order. Each guard
is a small function ``guard(ctx, req, plan)`` that checks one thing (raising
:class:`TaoBrevError`: bad input never mints a job id) or learns one fact into the
:class:`~.plan.Plan`; :data:`GUARDS` is the order the verb walks them in
(``references/submit-guards.md`` lists what each refuses)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from ... import archs, bank, cost, credentials, remote, resume, spec_check
from ... import routing as routing_mod
from ... import spec_paths, tao_gpus, tao_schema, tao_schema_pkg
from ... import s3 as staging
from ...errors import TaoBrevError
from ...model.answer_types import SubmitAnswerFindingsItem
from ...limits import refuse_long_env, refuse_long_script
from ...secrets import guard as known_secrets, redact
from ...transport import check_instance, refuse_secrets
from ...vocabulary import STORAGE_TIERS
from .plan import Plan, SubmitRequest, placeholder_script
from .spec_guards import guard_overrides, guard_spec_file
from .stage import Staging, credential_warnings

if TYPE_CHECKING:   # type hints only: the CLI runner is the scripts' layer
    from ...context import Context


def _env_values(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    _refuse_env_values(req)   # before anything reads the --env words as names
    refuse_long_env(req.env_names, ctx.env)   # before any value is indexed for redaction


def _credentials(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    _refuse_unsafe_credentials(ctx, req)


def _names(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    """The instance, the inputs, the network arch and action, the --env names, --gpus, the price, the tier."""
    check_instance(req.instance)
    _refuse_overrides_as_inputs(req)
    remote.check_name(req.network_arch, "network arch")
    remote.check_name(req.action, "action")
    for name in req.env_names:
        remote.check_env_name(name)
    remote.gpus_flag(req.gpus)
    cost.check_price(req.price_per_hour)
    if req.storage_tier not in STORAGE_TIERS:
        raise TaoBrevError("BAD_ARGUMENT", f"--storage-tier must be A, B or C (got {req.storage_tier!r})")


def _image(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    plan.image = bank.resolve_image(req.image, ctx.env)["image"]
    plan.arch_warnings = _check_arch(ctx, req, plan.image)


def _schema(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    plan.checked = _check_spec(ctx, req, plan.image, plan.spec_text, plan.spec_data)   # BAD_SPEC before anything is sent
    plan.gpu_plan = _gpu_plan(req, plan.checked, plan.spec_data)


def _history(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    """--retry-of names a job we know (BAD_JOB_ID / UNKNOWN_JOB); --resume-from can resume (RESUME_NOT_POSSIBLE)."""
    if req.retry_of:
        ctx.records.load(req.retry_of)
    plan.resumed = resume.plan(ctx, req)
    if plan.resumed:
        resume.refuse_conflicts(plan.spec_data, req.overrides, plan.resumed.job_id)


def _where(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    """The --env values, the results routing, the staging (tiers B/C), the inputs' mounts, the spec's paths."""
    plan.secret_values = credentials.collect(ctx.env, req.env_names)
    plan.routing = routing_mod.route(req, ctx.env)
    plan.stage = Staging.plan(ctx, req)
    plan.mounts = plan.stage.mounts(req.placeholder) if plan.stage else _input_mounts(req.inputs)
    plan.named = [] if req.no_spec_check else spec_paths.named(
        plan.spec_data, req.overrides, plan.mounts, req.network_arch, req.action,
        plan.checked.resolved if plan.checked else None)   # SPEC_INPUT_UNKNOWN


def _warnings(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    checked = plan.checked
    plan.warnings = list(plan.routing.warnings) + credential_warnings(ctx, plan.routing, plan.stage) + \
        plan.arch_warnings + ([f"spec not checked: {checked.reason}"] if not checked.checked else []) + \
        list(checked.warnings) + \
        plan.gpu_plan.warnings + [
            f"--env {name} reaches the container: `docker inspect` on the instance shows it while the container "
            "exists (until teardown.py)" for name in req.env_names if name in known_secrets.BUNDLE_CREDENTIALS]


def _script(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    """The launch script holds no known value and fits execve (E2BIG), before a record opens."""
    plan.run, plan.script = placeholder_script(req, plan, ctx.env)
    refuse_secrets(plan.script, "submit command", ctx.env)
    refuse_long_script(plan.script, len(req.overrides))




def _input_mounts(inputs: list[str]) -> list[tuple[str, str, bool]]:
    """Tier A inputs ``PATH[=NAME]`` (instance paths, names unique) -> read-only mounts at /data/NAME."""
    mounts: list[tuple[str, str, bool]] = []
    for inp in staging.parse_inputs(inputs):
        if inp.source.startswith("s3://") or not inp.source.startswith(("/", "~/")):
            raise TaoBrevError("BAD_ARGUMENT", f"tier A input {inp.source!r} is not an instance path",
                               "Tier A inputs are already on the instance ('~/data=NAME' or '/abs/path=NAME'); "
                               "local directories and s3:// inputs need --storage-tier B (or C) and a bucket.")
        remote.rpath(inp.source)  # validates
        mounts.append((inp.source, f"{remote.CONTAINER_DATA_DIR}/{inp.name}", True))
    return mounts




def _refuse_unsafe_credentials(ctx: Context, req: SubmitRequest) -> None:
    """The --env values become known secrets; the bundle's own credentials stay
    out of containers unless allowed; values too short to redact are refused;
    no stored identifier may contain a known value."""
    known_secrets.watch(req.env_names)
    own = [n for n in req.env_names if n in known_secrets.BUNDLE_CREDENTIALS]
    if own and not req.allow_bundle_credential_env:
        raise TaoBrevError("BUNDLE_CREDENTIAL_ENV", f"--env {', '.join(own)}: the bundle's own credential never "
                           "reaches a container unless --allow-bundle-credential-env says the job needs it")
    known_secrets.refuse_short([*req.env_names, *redact.SECRET_ENV_NAMES], ctx.env)
    known_secrets.refuse_in_identifiers(stored_identifiers(req), ctx.env)
    known_secrets.refuse_in_env_identifiers(ctx.env)


def stored_identifiers(req: SubmitRequest) -> dict[str, str]:
    """{label: text} of every name the record, the sidecar or the job's later commands keep from the
    request: each flag's value, the --env names, the job id's prefix (arch-action) and every word
    of the argv before ``--`` (the sidecar's ``submit_argv``, which recovery runs again). Overrides
    (after ``--``) are checked as spec text (SECRET_IN_COMMAND)."""
    names = {"--instance": req.instance, "--network-arch": req.network_arch, "--action": req.action,
             "--image": req.image, "--spec": req.spec, "--storage-tier": req.storage_tier,
             "--results-root": req.results_root, "--bucket": req.bucket, "--gpus": req.gpus,
             "--shm-size": req.shm_size, "--retry-of": req.retry_of, "--resume-from": req.resume_from,
             "the job id (network arch-action)": f"{req.network_arch}-{req.action}"}
    names.update({f"--inputs {i}": item for i, item in enumerate(req.inputs, 1)})
    names.update({f"--upload-exclude {i}": item for i, item in enumerate(req.upload_excludes, 1)})
    names.update({f"--env {i} (its name)": item for i, item in enumerate(req.env_names, 1)})
    if req.recover:
        names["--recover"] = " ".join(f"{k}={v}" for k, v in sorted(req.recover.items(), key=str))
    words = list(req.argv or [])
    words = words[:words.index("--")] if "--" in words else words
    names.update({f"argument {i}": word for i, word in enumerate(words, 1)})
    return {label: text for label, text in names.items() if isinstance(text, str) and text}


def _routed_identifiers(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    """The names worked out from the request and the environment that the record and the sidecar
    keep (the image the bank resolved, the results root and dir, the bucket, each staged input's
    URI): one holding a known value is refused (SECRET_IN_IDENTIFIER) before a record opens."""
    routing = plan.routing
    names: dict[str, str | None] = {"the image": plan.image, "the results root": routing.record_root, "the bucket": routing.bucket,
             "the instance results dir": routing.instance_root, "the results dir": routing.results_dir("JOB")}
    if plan.stage is not None:
        settings = plan.stage.settings
        names.update({"the S3 endpoint": settings.endpoint_url, "the S3 region": settings.region,
                      "the S3 bucket": settings.bucket, "the carrier image": plan.stage.carrier_image})
    for number, inp in enumerate(getattr(plan.stage, "inputs", None) or [], 1):
        names.update({f"input {number} name": getattr(inp, "name", None), f"input {number} URI": getattr(inp, "uri", None)})
    known_secrets.refuse_in_identifiers({k: v for k, v in names.items() if isinstance(v, str) and v}, ctx.env)


# An override typed where an input was expected: ``train.num_epochs=3`` (a key path, then =).
_OVERRIDE_LIKE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_\[\]-]+)*=")


def _refuse_env_values(req: SubmitRequest) -> None:
    """``--env NAME=value``: the value is on a command line already; say to export it (never repeat it)."""
    given = [n for n in req.env_names if isinstance(n, str) and "=" in n]
    if given:
        names = [n.split("=", 1)[0] for n in req.env_names]
        shown = ", ".join(n.split("=", 1)[0] + "=<value, not shown>" for n in given)
        exports = "; ".join(f"export {n.split('=', 1)[0]}=..." for n in given)
        raise TaoBrevError("BAD_ARGUMENT", f"--env takes a variable NAME only, got {shown}: a value on a command "
                           "line is readable by other processes (ps) and kept in shell history",
                           f"Pass only the name and export the value in this shell (not on the command line): "
                           f"{exports}; then run: {req.rerun(env_names=names)}")


def _refuse_overrides_as_inputs(req: SubmitRequest) -> None:
    """``--inputs '~/d=d' train.num_epochs=3``: --inputs swallowed a TAO override (no ``--`` before it).

    A word counts when it is ``key.path=value`` (or ``key=value``) and its key is
    no existing local path: as an input it would be refused anyway (a tier A input
    is an instance path, a tier B/C one a local path or s3:// URI)."""
    swallowed = [i for i in req.inputs if _OVERRIDE_LIKE.match(i) and not os.path.exists(i.split("=", 1)[0])]
    if swallowed:
        raise TaoBrevError("BAD_ARGUMENT", f"--inputs got {', '.join(swallowed)}, which look like TAO overrides "
                           "(key.path=value), not inputs (an input is SRC[=NAME] with SRC '~/...', '/...', a "
                           "local path or s3://...): --inputs takes every word up to the next flag",
                           f"Put overrides after `--` at the end: {req.rerun(to_overrides=tuple(swallowed))}",
                           answer={"next": req.rerun(to_overrides=tuple(swallowed))})   # the corrected call


def _check_arch(ctx: Context, req: SubmitRequest, image: str) -> list[str]:
    """Refuse an unmistakable typo of a known --network-arch / --action, or a network the image
    cannot run (TAO 7 -pyt image; :mod:`tao_brev.archs`); warn for any other unknown name.
    Returns the warnings."""
    if req.allow_unknown_arch:
        return []
    version = tao_schema_pkg.image_version(image)
    networks = None
    if version and not req.no_spec_check:
        try:
            networks = tao_schema_pkg.networks(version, tao_schema_pkg.locate(version, ctx.state_root, ctx.env))
        except tao_schema_pkg.Unavailable:
            networks = None
    verdict = archs.check(req.network_arch, req.action, image, networks, version)
    unknown = verdict.refusal
    if unknown is None:
        return verdict.warnings
    if unknown.why:
        raise TaoBrevError("BAD_ARGUMENT", unknown.message(image),
                           f"Use the image that runs it: {req.rerun(set_flags={'--image': unknown.image})}")
    assert unknown.closest is not None, "a refused typo names the name it is a typo of"
    found = [unknown]
    flags = {"--" + unknown.flag: unknown.closest}
    if unknown.flag == "network-arch":   # every typo of the call at once: the action of the arch it meant
        second = archs.check(unknown.closest, req.action, image, networks, version).refusal
        if second is not None and second.flag == "action" and second.closest:
            found.append(second)
            flags["--" + second.flag] = second.closest
    corrected = req.rerun(set_flags=flags)
    fix = f"Use {' and '.join(repr(u.closest) for u in found)}: {corrected}"
    raise TaoBrevError("BAD_ARGUMENT", "; ".join(u.message(image) for u in found), fix,
                       known=list(found[-1].known), answer={"next": corrected})   # the corrected call is next


def _check_spec(ctx: Context, req: SubmitRequest, image: str, spec_text: str,
                spec_data: dict[str, Any]) -> tao_schema.SpecCheck:
    """The spec and overrides against TAO's schema of the image's version (:mod:`tao_brev.spec_check`)."""
    fix = (f"Fix the spec {req.spec} (or the override) where the finding says, then run the same command: "
           f"{req.rerun()}. A custom image with its own schema: {req.rerun(add=('--no-spec-check',))}")
    try:
        return spec_check.check(network_arch=req.network_arch, action=req.action, image=image, spec_path=req.spec,
                                spec_text=spec_text, spec_data=spec_data, overrides=list(req.overrides),
                                state_root=ctx.state_root, env=ctx.env, skip=req.no_spec_check, fix=fix)
    except TaoBrevError as exc:
        renamed = _corrected_overrides(req, (exc.details.get("answer") or {}).get("findings") or [])
        if exc.code == "BAD_SPEC" and renamed:   # every finding an override's key with its closest: the corrected call
            corrected = req.rerun(renamed=renamed)
            exc.fix = f"Use {', '.join(repr(new.split('=', 1)[0]) for new in renamed.values())}: {corrected}"
            exc.details["answer"]["next"] = corrected
        raise


def _corrected_overrides(req: SubmitRequest, findings: list[SubmitAnswerFindingsItem]) -> dict[str, str]:
    """{override word: the word with its key replaced by the closest valid key} when every finding is an
    override's unknown key that has one (its ``override``: N, the Nth override), else {}."""
    renamed: dict[str, str] = {}
    for found in findings:
        number, key, closest = found.get("override"), found.get("key"), found.get("closest")
        if not (isinstance(number, int) and closest and 0 < number <= len(req.overrides)):
            return {}
        word = req.overrides[number - 1]
        name, sep, value = word.partition("=")
        bare = name.lstrip("+~")
        if not sep or bare != key:
            return {}
        renamed[word] = f"{name[:len(name) - len(bare)]}{closest}={value}"
    return renamed


def _gpu_plan(req: SubmitRequest, checked: tao_schema.SpecCheck, spec_data: dict[str, Any]) -> tao_gpus.GpuPlan:
    """--gpus and the spec's num_gpus / gpu_ids agree (:mod:`tao_brev.tao_gpus`), or BAD_ARGUMENT."""
    return tao_gpus.plan(gpus=req.gpus, action=req.action, config=checked.config, spec_data=spec_data,
                         overrides=list(req.overrides), rerun=req.rerun)


GUARDS = (_env_values, _credentials, _names, _image, guard_spec_file, guard_overrides, _schema, _history, _where,
          _routed_identifiers, _warnings, _script)
