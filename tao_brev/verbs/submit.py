"""submit: open the record, then launch the TAO container on the instance, once.

Order (record-then-launch, from the TAO bank contract):
1. validate every input locally (names, spec, image, credentials) - bad input
   never opens a record;
2. ``records.open`` mints the job id and writes PENDING; the sidecar names the
   instance and marks the launch as in progress (with this process's pid);
3. credentials, if any, travel in a 0600 file (``credentials.push``);
4. ONE ``brev exec`` writes the spec, checks the inputs, and runs
   ``docker inspect <id> || docker run -d --name <id> --label tao-job=<id> ...``
   (never ``--rm``); it is never blindly repeated;
5. the record is marked RUNNING with backend ref ``<instance>/<id>``.

Storage tiers B and C (``staging``; ``references/storage.md``): before the
record opens, local inputs are uploaded to a content-addressed S3 prefix
(nothing twice); the S3 credentials travel in their own 0600 file and the
launch round trip first copies every input from S3 to
``~/tao-jobs/<id>/inputs/<NAME>`` with the AWS CLI carrier container, checks
the copy, then launches with the inputs mounted read-only at ``/data/<NAME>``.
Tier C also hands the S3 credentials (and the input / result URIs) to the job
container itself through ``--env-file``; tier B never does.

An ambiguous launch (the transport failed, so the container may or may not
exist) is reconciled by asking the instance for the container named after the
job id: one -> adopt it; none -> mark ERROR (ERR_INFRA), a new submit with
``--retry-of`` is safe; no answer -> the record stays PENDING and the next
``poll_status.py`` reconciles it.
"""

from __future__ import annotations

import errno
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from .. import archs, bank, cost, credentials, lazy_re, nextstep, remote, s3 as staging, s3 as storage
from .. import resume, resume_advice, spec_paths, tao_gpus, yaml_bounded
from ..s3 import hash_cache
from ..secrets import guard as known_secrets, interpolation, redact
from .. import routing as routing_mod
from ..cli import Context, deferred_interrupts, note_job, note_state, say
from ..errors import CODES, TaoBrevError, TransportError
from ..records import now_iso
from ..remote import RunSpec
from ..transport import FIRST_EXEC_TIMEOUT_S, check_instance, refuse_secrets
from . import reconcile

MAX_SPEC_BYTES = 64 * 1024   # the spec travels inside the command string (argv limit 128 KiB)
STAGE_TIMEOUT_S = 3600.0     # a launch round trip that first copies the inputs onto the instance


@dataclass
class SubmitRequest:
    instance: str
    image: str
    network_arch: str
    action: str
    spec: str
    storage_tier: str = "A"
    results_root: str | None = None
    bucket: str | None = None
    gpus: str = "all"
    env_names: list[str] = field(default_factory=list)
    shm_size: str = "16g"
    inputs: list[str] = field(default_factory=list)
    upload_excludes: list[str] = field(default_factory=list)
    ephemeral: bool = False
    dry_run: bool = False
    retry_of: str | None = None
    resume_from: str | None = None        # continue that train job from its last checkpoint (tao_brev.resume)
    overrides: list[str] = field(default_factory=list)
    price_per_hour: float | None = None   # USD; remembered for the job's cost facts
    allow_bundle_credential_env: bool = False   # --env BREV_API_TOKEN / NGC_KEY reach the container
    start: bool = False                   # `brev start` a STOPPED instance (billing resumes); else refuse
    share_gpus: bool = False              # launch even when a live tao-job container holds the same GPUs
    allow_unknown_arch: bool = False      # skip the network-arch / action list check
    no_spec_check: bool = False           # skip the spec check against TAO's schema (custom images)
    recover: dict | None = None           # --recover N policy, remembered in the sidecar (verbs/recover.py)
    argv: list[str] | None = None         # the script's own arguments: each fix names the exact command
    prog: str = "submit.py"               # the script as it was invoked

    def rerun(self, *, set_flags: dict | None = None, env_names: list[str] | None = None,
              to_overrides: tuple = (), add: tuple = (), drop: tuple = ()) -> str:
        """This submit's command line, changed: ``set_flags`` replaces (or adds)
        ``--flag value``, ``env_names`` replaces every ``--env`` value, ``to_overrides``
        moves those words after ``--``, ``add`` appends flags, ``drop`` removes flags (with
        their values). Built from ``argv``
        (shell-quoted); without it, from the request's main fields."""
        head, tail = self._words()
        set_flags = dict(set_flags or {})
        out, i = [], 0
        while i < len(head):
            word = head[i]
            flag = word.split("=", 1)[0] if word.startswith("--") else None
            if flag == "--env" and env_names is not None:
                i += 1 if "=" in word else 2
                continue
            if flag in set_flags or flag in drop:
                if flag in set_flags:
                    out += [flag, set_flags.pop(flag)]
                i += 1 if "=" in word else 2
                continue
            if word not in to_overrides:
                out.append(word)
            i += 1
        for name in env_names or []:
            out += ["--env", name]
        for flag, value in set_flags.items():
            out += [flag, value]
        out += list(add)
        tail = tail + [w for w in to_overrides if w not in tail]
        return shlex.join([self.prog, *out, *(["--", *tail] if tail else [])])

    def _words(self) -> tuple[list[str], list[str]]:
        if self.argv is None:
            head = ["--instance", self.instance, "--image", self.image, "--network-arch", self.network_arch,
                    "--action", self.action, "--spec", self.spec]
            return head + (["--inputs", *self.inputs] if self.inputs else []), list(self.overrides)
        argv = list(self.argv)
        if "--" in argv:
            cut = argv.index("--")
            return argv[:cut], argv[cut + 1:]
        return argv, []


def _read_spec(path: str) -> tuple[str, dict]:
    from ..secrets.safe_read import UnsafeFile, read_bytes

    try:   # a regular file (a link to one is followed), opened without blocking, read up to the cap
        text = read_bytes(path, MAX_SPEC_BYTES, follow=True).decode("utf-8")
    except UnsafeFile as exc:
        if exc.errno == errno.EFBIG:
            raise TaoBrevError("BAD_SPEC", f"spec {path!r} is larger than {MAX_SPEC_BYTES} bytes",
                               "Keep large data out of the spec: put it in an input (--inputs) and reference "
                               "its path.") from None
        raise TaoBrevError("SPEC_NOT_FOUND", f"cannot read spec {path!r}: it {exc.strerror}",
                           "Pass --spec with the path of a TAO spec YAML file (a regular file).") from None
    except OSError as exc:
        raise TaoBrevError("SPEC_NOT_FOUND", f"cannot read spec {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TaoBrevError("BAD_SPEC", f"spec {path!r} is not UTF-8 text",
                           "Pass the TAO spec YAML file itself (UTF-8 text), not a binary or archive.") from None
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise TaoBrevError("BAD_SPEC", f"spec {path!r} is larger than {MAX_SPEC_BYTES} bytes",
                           "Keep large data out of the spec: put it in an input (--inputs) and reference its path.")
    data = yaml_bounded.load(text, f"spec {path!r}")   # bounded; errors give line and column only
    if not isinstance(data, dict):
        raise TaoBrevError("BAD_SPEC", f"spec {path!r} is not a YAML mapping",
                           "A TAO spec is a mapping of sections (train:, model:, dataset:, ...).")
    refuse_secrets(text, f"spec {path}")   # known values (any encoding), then the lint
    known_secrets.refuse_parsed(data, f"spec {path}")   # ... and every key and string YAML decodes
    nodes = _node_counts(data)
    if any(n > 1 for n in nodes.values()):
        raise TaoBrevError("MULTI_NODE_UNSUPPORTED", f"spec {path!r} asks for several nodes: "
                           + ", ".join(f"{k}={v}" for k, v in nodes.items() if v > 1))
    return text, data


def _node_counts(node, prefix: str = "") -> dict[str, int]:
    """Every integer ``num_nodes`` in a spec (TAO's multi-node knob), by dotted key."""
    found = {}
    if isinstance(node, dict):
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if key == "num_nodes" and isinstance(value, int) and not isinstance(value, bool):
                found[dotted] = value
            found.update(_node_counts(value, dotted + "."))
    return found


def _refuse_multi_node_overrides(overrides: list[str]) -> None:
    for item in overrides:
        key, _, value = item.partition("=")
        if key.split(".")[-1] == "num_nodes" and value.strip().isdigit() and int(value) > 1:
            raise TaoBrevError("MULTI_NODE_UNSUPPORTED", f"override {key} asks for several nodes")


_PLAIN_KEY = lazy_re.compile(r"[A-Za-z0-9_.\[\]/@:-]{1,80}")


def _override_views(item: str) -> tuple[str, list]:
    """(key, [value as each reader may decode it]) of a ``KEY=VALUE`` override.

    TAO's launchers hand overrides to Hydra, whose grammar drops quotes and
    backslash escapes (``key='a\\'b'``, ``key=a\\,b``; hydra-core's
    hydra/grammar/OverrideLexer.g4: quoted values, ESC), and a value may be read as YAML
    later (``"\\x41"`` escapes, ``''`` doubling). The views: the text as
    written, quotes dropped with escapes decoded, quotes dropped with
    backslashes kept, and the YAML document of the first two when they parse.
    Generous by design: a view only matters when it holds a known value."""
    key, _, value = item.partition("=")
    key = key.lstrip("+~").strip()
    if not _PLAIN_KEY.fullmatch(key):   # no key Hydra reads (quotes, escapes, blanks): not repeated
        key = "(its key)"
    views: list = [value]
    decoded, kept = _hydra_unquote(value)
    views += [decoded, kept]
    for text in (value, decoded):
        try:
            views.append(yaml_bounded.load(text, "override"))
        except TaoBrevError:
            pass
    return key, views


def _refuse_interpolated_secrets(spec: dict, overrides: list[str], env: dict) -> None:
    """SECRET_IN_COMMAND when a string of the spec or an override's value, once its
    OmegaConf interpolations are evaluated as TAO's loader evaluates them (:mod:`tao_brev.interpolation`:
    references of any spelling, ``oc.select`` with its default, ``oc.decode``, nested; an
    override ``a=abc`` counts as the key it sets), holds a known value: a value split across
    keys is still the value. The finding names the variable and the key's path, never the value."""
    scalars: dict[tuple, str] = {}
    interpolation.leaves(spec, (), scalars)
    for item in overrides:
        key, views = _override_views(item)
        scalars[interpolation.segments(key)] = views[1]   # quotes dropped, escapes decoded: what Hydra sets
    readings: list[dict] = []   # readings[n]: each string's n-th possible value
    memo: dict = {}
    for path, text in scalars.items():
        if "${" in text:
            try:
                outs = [out for out in interpolation.alternatives(scalars, path, memo) if out != text]
            except RecursionError:   # thousands of nested ${: OmegaConf's parser gives up too
                shown = known_secrets.redact_text(interpolation.dotted(path)[:80], env)
                raise TaoBrevError("BAD_SPEC", f"{shown!r} nests interpolations too deeply to be "
                                   "checked for credentials", "Nest interpolations a few levels at most.") from None
            readings += [{} for _ in range(len(outs) - len(readings))]
            for number, out in enumerate(outs):
                readings[number][interpolation.dotted(path)] = out
    for resolved in readings:
        known_secrets.refuse_parsed(resolved, "a string of the spec or an override, its interpolations "
                                    "resolved,", env)


def _hydra_unquote(value: str) -> tuple[str, str]:
    """``value`` with its quotes dropped: (backslash escapes decoded, backslashes kept)."""
    decoded, kept, quote = [], [], ""
    i = 0
    while i < len(value):
        char = value[i]
        if char == "\\" and i + 1 < len(value):
            decoded.append(value[i + 1])
            kept.append(value[i:i + 2] if value[i + 1] not in "'\"" else value[i + 1])
            i += 2
            continue
        if char in "'\"" and (not quote or quote == char):
            quote = "" if quote else char
        else:
            decoded.append(char)
            kept.append(char)
        i += 1
    return "".join(decoded), "".join(kept)


def _input_mounts(inputs: list[str]) -> list[tuple[str, str, bool]]:
    """Tier A inputs ``PATH[=NAME]`` (instance paths, names unique) -> read-only mounts at /data/NAME."""
    mounts = []
    for inp in staging.parse_inputs(inputs):
        if inp.source.startswith("s3://") or not inp.source.startswith(("/", "~/")):
            raise TaoBrevError("BAD_ARGUMENT", f"tier A input {inp.source!r} is not an instance path",
                               "Tier A inputs are already on the instance ('~/data=NAME' or '/abs/path=NAME'); "
                               "local directories and s3:// inputs need --storage-tier B (or C) and a bucket.")
        remote.rpath(inp.source)  # validates
        mounts.append((inp.source, f"{remote.CONTAINER_DATA_DIR}/{inp.name}", True))
    return mounts


def _refuse_secret_overrides(overrides: list[str], env: dict) -> None:
    """Check each ``-- KEY=VALUE`` override on its own, so the finding names it:
    known secret values first (as written, then as parsed: :func:`_override_views`),
    then the lint."""
    for number, item in enumerate(overrides, 1):
        known_secrets.refuse(item, f"override {number}", env)
        key, views = _override_views(item)
        for view in views:
            known_secrets.refuse_parsed({key: view}, f"override {number}", env)
        findings = redact.lint(item)
        if findings:
            raise TaoBrevError("SECRET_IN_COMMAND", f"override {number} ({findings[0].name}) holds a literal "
                               "credential", findings=[f.to_json() for f in findings])


def _inputs_check(mounts) -> str:
    return "\n".join(f"test -e {remote.rpath(host)} || {{ echo TAO_INPUT_MISSING {remote.rpath(host)}; exit 5; }}"
                     for host, _c, _ro in mounts)


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
    names = {"--instance": req.instance, "--network-arch": req.network_arch, "--action": req.action,
             "--image": req.image, "--results-root": req.results_root, "--bucket": req.bucket,
             "--retry-of": req.retry_of, "--resume-from": req.resume_from}
    names.update({f"--inputs {i}": item for i, item in enumerate(req.inputs, 1)})
    names.update({f"--upload-exclude {i}": item for i, item in enumerate(req.upload_excludes, 1)})
    known_secrets.refuse_in_identifiers(names, ctx.env)
    known_secrets.refuse_in_env_identifiers(ctx.env)


# An override typed where an input was expected: ``train.num_epochs=3`` (a key path, then =).
_OVERRIDE_LIKE = lazy_re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_\[\]-]+)*=")


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
    from .. import tao_schema_pkg

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
    found = [unknown]
    if unknown.flag == "network-arch":   # every typo of the call at once: the action of the arch it meant
        second = archs.check(unknown.closest, req.action, image, networks, version).refusal
        if second is not None and second.flag == "action" and second.closest:
            found.append(second)
    corrected = req.rerun(set_flags={"--" + u.flag: u.closest for u in found})
    fix = f"Use {' and '.join(repr(u.closest) for u in found)}: {corrected}"
    raise TaoBrevError("BAD_ARGUMENT", "; ".join(u.message(image) for u in found), fix,
                       known=list(found[-1].known), answer={"next": corrected})   # the corrected call is next


def _instance_running(ctx: Context, req: SubmitRequest) -> None:
    """Know the instance's status (``brev ls --json``) before the first exec: brev
    exec would start a STOPPED instance by itself (billing resumes). STOPPED is
    refused (INSTANCE_NOT_RUNNING) unless ``--start``, exactly like
    preflight.py; a starting instance is waited for; a broken one is refused."""
    from .preflight import PreflightRequest, settle_instance

    entry = ctx.brev.instance(req.instance)
    if entry is not None and str(entry.get("status") or "").upper() == "RUNNING":
        return
    try:
        settle_instance(ctx, PreflightRequest(instance=req.instance, start=req.start), entry,
                        ctx.clock() + FIRST_EXEC_TIMEOUT_S)
    except TaoBrevError as exc:
        exc.details.pop("entry", None)
        if exc.code == "INSTANCE_NOT_RUNNING" and "STOPPED" in exc.message:
            exc.message = f"{req.instance} is STOPPED: nothing was recorded or launched"
            exc.fix = (f"Start it (billing resumes; or run brev start {req.instance} yourself first) and launch "
                       f"in one step: {req.rerun(add=('--start',))}")
        raise


def submit(ctx: Context, req: SubmitRequest) -> tuple[dict, int]:
    _refuse_env_values(req)   # before anything reads the --env words as names
    from ..limits import refuse_long_env, refuse_long_script

    refuse_long_env(req.env_names, ctx.env)   # before any value is indexed for redaction
    _refuse_unsafe_credentials(ctx, req)
    check_instance(req.instance)
    _refuse_overrides_as_inputs(req)
    remote.check_name(req.network_arch, "network arch")
    remote.check_name(req.action, "action")
    for name in req.env_names:
        remote.check_env_name(name)
    remote.gpus_flag(req.gpus)
    cost.check_price(req.price_per_hour)
    if req.storage_tier not in ("A", "B", "C"):
        raise TaoBrevError("BAD_ARGUMENT", f"--storage-tier must be A, B or C (got {req.storage_tier!r})")
    resolved = bank.resolve_image(req.image, ctx.env)
    arch_warnings = _check_arch(ctx, req, resolved["image"])
    spec_text, spec_data = _read_spec(req.spec)
    _refuse_multi_node_overrides(req.overrides)
    _refuse_secret_overrides(req.overrides, ctx.env)
    _refuse_interpolated_secrets(spec_data, req.overrides, ctx.env)
    checked = _check_spec(ctx, req, resolved["image"], spec_text, spec_data)   # BAD_SPEC before anything is sent
    gpu_plan = _gpu_plan(req, checked, spec_data)
    if req.retry_of:
        ctx.records.load(req.retry_of)   # BAD_JOB_ID / UNKNOWN_JOB: a retry names a job we know
    resumed = resume.plan(ctx, req)   # --resume-from: RESUME_NOT_POSSIBLE before anything is recorded
    if resumed:
        resume.refuse_conflicts(spec_data, req.overrides, req.resume_from)
    secret_values = credentials.collect(ctx.env, req.env_names)
    routing = routing_mod.route(req, ctx.env)
    stage = Staging.plan(ctx, req)
    placeholder = f"{req.network_arch}-{req.action}-dryrun"
    mounts = stage.mounts(placeholder) if stage else _input_mounts(req.inputs)
    named = [] if req.no_spec_check else spec_paths.named(spec_data, req.overrides, mounts, req.network_arch,
                                                          req.action)   # SPEC_INPUT_UNKNOWN before anything
    warnings = list(routing.warnings) + _credential_warnings(ctx, routing, stage) + arch_warnings + \
        ([f"spec not checked: {checked.reason}"] if not checked.checked else []) + gpu_plan.warnings + [
        f"--env {name} reaches the container: `docker inspect` on the instance shows it while the container "
        "exists (until teardown.py)" for name in req.env_names if name in known_secrets.BUNDLE_CREDENTIALS]

    run = _run_spec(req, resolved["image"], placeholder, routing, mounts, env_file=None, gpu_plan=gpu_plan,
                    resumed=resumed)
    extra = _extra_checks(resumed, placeholder, None, None, named, mounts, staging.carrier_image(ctx.env)
                          if resumed and resumed.source == "s3" else "")
    script = _script(run, spec_text, "\n".join(filter(None, [_inputs_check(mounts) if not stage else "", extra])))
    refuse_secrets(script, "submit command", ctx.env)
    refuse_long_script(script, len(req.overrides))   # execve's E2BIG, before a record opens
    if req.dry_run:
        if stage:
            stage.prepare(upload=False)
            job_file = "~/.tao-cred-<job_id>"
            carrier_file = job_file if stage.tier == "C" else job_file + "-s3"
            script = _script(run, spec_text, "\n".join(filter(None, [
                stage.checks(placeholder, resolved["image"], job_file, carrier_file),
                _extra_checks(resumed, placeholder, job_file, carrier_file, named, mounts, stage.carrier_image)])))
        return {"ok": True, "dry_run": True, "job_id": None, "instance": req.instance, "state": None,
                "backend_ref": None, "image": resolved["image"], "results_dir": routing.results_dir(placeholder),
                "plan": [{"step": "open_record", "what": "scripts/tao_job_record.py open (mints the job id)"},
                         *(stage.plan_steps(req.instance) if stage else []),
                         *([{"step": "copy_s3_credentials", "what": f"brev copy <0600 file with the AWS_* settings, "
                             f"read by the carrier that copies the checkpoint of {req.resume_from}> "
                             f"{req.instance}:.tao-cred-<job_id>-s3-<random>"}]
                           if resumed and resumed.source == "s3" and not stage else []),
                         *([{"step": "copy_checkpoint", "what": f"brev copy <{resumed.checkpoint['path']} of "
                             f"{resumed.checkpoint['archive']}> {req.instance}:.tao-resume-<job_id>-<random>.pth"}]
                           if resumed and resumed.source == "home" else []),
                         *([{"step": "copy_credentials", "what": f"brev copy <0600 file with {', '.join(req.env_names)}> "
                             f"{req.instance}:.tao-cred-<job_id>-<random>"}] if req.env_names else []),
                         {"step": "launch", "command": f"brev exec {req.instance} <script>", "script": script,
                          "gpu_overrides": gpu_plan.to_json()["overrides"],
                          "lines": remote.readable_lines(script)},
                         {"step": "mark_running", "backend_ref": f"{req.instance}/<job_id>"}],
                "storage_tier": req.storage_tier, **(stage.answer() if stage else {}),
                "spec_check": checked.to_json(), **({"resume_from": resumed.to_json()} if resumed else {}),
                "warnings": warnings}, 0

    if stage:
        stage.warm()
    ctx.brev.path()       # BREV_NOT_FOUND before anything is recorded
    _instance_running(ctx, req)   # before the first exec: brev exec would start a STOPPED instance
    if stage:
        stage.prepare()   # uploads before the record opens: a failed upload leaves nothing behind
    from ..secrets import proof as env_proof

    proof = env_proof.proof(ctx.state_root, ctx.env, req.env_names)   # digests, kept: later verbs prove values

    with deferred_interrupts():   # the record and the note that names it in every answer appear together
        record = ctx.records.open(image=resolved["image"], network_arch=req.network_arch, action=req.action,
                                  storage_tier=req.storage_tier, results_dir=None,
                                  results_root=routing.record_root, upload_excludes=req.upload_excludes,
                                  retry_of=req.retry_of or req.resume_from)
        job_id = record["id"]
        note_job(job_id, interrupted_fix=interrupted_fix(job_id))
        note_state("PENDING")
    backend_ref = f"{req.instance}/{job_id}"
    ctx.sidecars.update(job_id, instance=req.instance, ephemeral=req.ephemeral, env_names=list(req.env_names),
                        env_proof=proof,
                        results={"instance_dir": routing.instance_dir(job_id), "kind": routing.kind,
                                 "destination": routing.destination(job_id)},
                        inputs=stage.answer()["inputs"] if stage else [],
                        launch={"state": "launching", "pid": os.getpid(), "started_at": now_iso()},
                        **({"submit_argv": resume_advice.resubmit_words(req.argv)} if req.argv is not None else {}),
                        **({"resume_from": resumed.to_json()} if resumed else {}),
                        **({"recovery_policy": req.recover} if req.recover else {}))
    cost.note_submit(ctx, job_id, req.price_per_hour)
    answer = {"job_id": job_id, "instance": req.instance, "backend_ref": None, "image": resolved["image"],
              "results_dir": record["results_dir"], "storage_tier": req.storage_tier,
              **(stage.answer() if stage else {}),
              "results": {"kind": routing.kind, "destination": routing.destination(job_id),
                          "instance_dir": routing.instance_dir(job_id)},
              "spec_check": checked.to_json(), "gpu_overrides": gpu_plan.to_json()["overrides"],
              **({"resume_from": resumed.to_json()} if resumed else {}), "warnings": warnings}
    say(f"submit: record {job_id} opened (PENDING); launching on {req.instance}")

    env_file = carrier_file = None
    try:
        if stage:
            env_file, carrier_file = stage.push_credentials(ctx, req.instance, job_id, secret_values,
                                                            routing.destination(job_id))
        elif secret_values:
            env_file = credentials.push(ctx.brev, req.instance, job_id,
                                        credentials.env_file_text(secret_values)).path
        carrier_file = resume.push(ctx, resumed, req.instance, job_id, carrier_file)   # --resume-from's copies
    except TaoBrevError as exc:   # nothing was launched: the record is closed, the answer names it
        _mark_never_launched(ctx, job_id, f"credential copy failed: {exc.message}")
        raise TaoBrevError(exc.code, f"submit of {job_id}: copying the credentials to {req.instance} failed, "
                           f"nothing was launched (the record is closed as ERROR): {exc.message}",
                           f"{exc.fix} Then submit again with --retry-of {job_id}; nothing runs under {job_id}.",
                           answer={**answer, "state": "ERROR", "backend_ref": None}) from None
    except KeyboardInterrupt:
        raise _interrupted(answer) from None
    mounts = stage.mounts(job_id) if stage else mounts
    run = _run_spec(req, resolved["image"], job_id, routing, mounts, env_file, gpu_plan=gpu_plan, resumed=resumed)
    checks = stage.checks(job_id, resolved["image"], env_file, carrier_file) if stage else _inputs_check(mounts)
    checks = "\n".join(filter(None, [checks, _extra_checks(resumed, job_id, env_file, carrier_file, named, mounts,
                                                           staging.carrier_image(ctx.env))]))
    try:
        result = ctx.brev.exec(req.instance, _script(run, spec_text, checks),
                               timeout=STAGE_TIMEOUT_S if stage else None)
    except TransportError as exc:
        say(f"submit: launch of {job_id} is ambiguous ({exc.message}); asking the instance")
        outcome = reconcile.pending_launch(ctx, record, req.instance, source="agent", cause=exc)
        return {**answer, **outcome["answer"]}, outcome["exit_code"]
    except TaoBrevError as exc:   # e.g. BREV_NOT_LOGGED_IN: the record stays PENDING, poll_status reconciles it
        exc.details.setdefault("answer", {**answer, "state": "PENDING"})
        raise
    except KeyboardInterrupt:     # Ctrl-C / SIGTERM (cli.run): the launch may go on without us
        raise _interrupted(answer) from None

    out = result.stdout
    if result.ok:
        adopted = "TAO_ALREADY_SUBMITTED" in out
        failed = reconcile.failed_start(out) if adopted else None
        if failed is not None:   # brev's own retry found the container a first run created but could not start
            outcome = reconcile.start_failed(ctx, job_id, req.instance, "agent", failed)
            return {**answer, **outcome["answer"]}, outcome["exit_code"]
        container_id = out.strip().splitlines()[-1] if out.strip() and not adopted else None
        ctx.records.mark(job_id, "RUNNING", message="container started" if not adopted else
                         "container already existed; adopted", source="agent", backend_ref=backend_ref)
        ctx.sidecars.update(job_id, launch={"state": "launched", "finished_at": now_iso(),
                                            "container_id": container_id})
        chosen = resume.launched(resumed, out)   # the instance chose the checkpoint: record it
        if chosen:
            answer["resume_from"] = chosen
            ctx.sidecars.update(job_id, resume_from=chosen)
        return {"ok": True, **answer, "state": "RUNNING", "backend_ref": backend_ref,
                "container_id": container_id, "adopted": adopted}, 0

    from ..docker_state import docker_error_code

    docker_code = docker_error_code(result.stderr + out, default="SUBMIT_REFUSED")   # e.g. the daemon is down
    fix = None
    if result.exit_code == 4 and "TAO_IMAGE_MISSING" in out and docker_code == "SUBMIT_REFUSED":
        code, why = "IMAGE_NOT_PULLED", f"image {resolved['image']} is not on {req.instance}"
    elif result.exit_code == 127 and remote.DOCKER_MISSING in out:
        command = out.split(remote.DOCKER_MISSING, 1)[1].strip().splitlines()[0]
        code = "DOCKER_NOT_FOUND"
        why = (f"`{command}` failed on {req.instance}: docker: command not found on the PATH of the "
               "non-interactive ssh shell (nothing was launched)")
        fix = (f"Run preflight.py --instance {req.instance}: its docker check tells a missing Docker from one "
               "that only a login shell finds, with the fix for each.")
    elif result.exit_code == remote.NO_GPUS_EXIT and "TAO_NO_GPUS" in out:
        code, why = "GPU_NOT_FOUND", f"--gpus all: nvidia-smi -L on {req.instance} lists no GPU (nothing was launched)"
        fix = f"Check the instance: preflight.py --instance {req.instance} --gpu-smoke"
        if docker_code == "GPU_DRIVER_NOT_LOADED":   # nvidia-smi: couldn't communicate with the NVIDIA driver
            code, fix = docker_code, CODES[docker_code].fix.replace("NAME", req.instance)
            why += ": " + redact.tail(result.stderr, 200)
    elif result.exit_code == remote.GPUS_BUSY_EXIT and "TAO_GPUS_BUSY" in out:
        code, why, fix = _gpus_busy(req, job_id, out)
    elif result.exit_code == remote.WRITE_FAILED_EXIT and ("TAO_WRITE_FAILED" in out or "TAO_SPEC_UNVERIFIED" in out):
        code, why, fix = _spec_failed(req, job_id, out, result.stderr, docker_code)
    elif result.exit_code == resume.RESUME_FAILED_EXIT and resume.MISSING in out:
        code, why, fix = _resume_failed(req, out)
    elif result.exit_code == spec_paths.MISSING_EXIT and spec_paths.MARKER in out:
        code, why, fix = "SPEC_PATH_MISSING", spec_paths.describe(named, out), spec_paths.fix(req)
    elif result.exit_code == 5 and "TAO_INPUT_MISSING" in out:
        code, why = "INPUT_NOT_FOUND", "input path missing on the instance: " + out.split("TAO_INPUT_MISSING", 1)[1].strip()
    elif result.exit_code == staging.STAGE_FAILED_EXIT and "TAO_STAGE_FAILED" in out:
        code = docker_code if docker_code in ("DISK_FULL", "DOCKER_DAEMON_DOWN") else "INPUT_STAGING_FAILED"
        why = ("copying input " + out.split("TAO_STAGE_FAILED", 1)[1].strip() + " from S3 failed: "
               + redact.tail(result.stderr, 500))
    else:
        code = docker_code
        why = f"docker run failed (exit {result.exit_code}): {redact.tail(result.stderr or out, 500)}"
    _mark_never_launched(ctx, job_id, why, code, fix)
    raise TaoBrevError(code, f"submit refused: {why}", fix,
                       answer={**answer, "state": "ERROR", "backend_ref": None})


def _gpus_busy(req: SubmitRequest, job_id: str, out: str) -> tuple[str, str, str]:
    """GPUS_BUSY: the live tao-job containers (``TAO_GPUS_BUSY NAME=GPUS`` lines) and how to wait or cancel."""
    holders = [line.split(" ", 1)[1].strip().partition("=") for line in out.splitlines()
               if line.startswith("TAO_GPUS_BUSY ")]
    names = [name for name, _, _ in holders]
    live = ", ".join(f"{name} (GPUs {gpus or 'all'})" for name, _, gpus in holders)
    scripts = os.path.dirname(req.prog)
    poll = shlex.join([os.path.join(scripts, "poll_status.py"), names[0], "--wait", "--interval",
                       str(nextstep.WAIT_INTERVAL_S), "--timeout", str(nextstep.WAIT_TIMEOUT_S)])
    cancel = shlex.join([os.path.join(scripts, "teardown.py"), names[0]])
    again = req.rerun(set_flags={"--retry-of": job_id})
    why = (f"GPUs busy: live job {live} on {req.instance} holds GPUs that this job (--gpus {req.gpus}) asks for; "
           "two jobs on the same GPUs slow each other down or run out of memory")
    fix = (f"Wait for it: {poll}, then submit again: {again}. Or cancel it: {cancel}. Or share the GPUs on "
           f"purpose: {req.rerun(set_flags={'--retry-of': job_id}, add=('--share-gpus',))}")
    return "GPUS_BUSY", why, fix


def _spec_failed(req: SubmitRequest, job_id: str, out: str, err: str, docker_code: str) -> tuple[str, str, str]:
    """The spec did not reach the instance intact (write failed, or size/sha256 differ): nothing launched."""
    marker = next(line for line in out.splitlines() if line.startswith(("TAO_WRITE_FAILED", "TAO_SPEC_UNVERIFIED")))
    why = f"the spec did not reach {req.instance} intact ({marker}): {redact.tail(err, 300) or 'no message'}"
    again = req.rerun(set_flags={"--retry-of": job_id})
    if docker_code == "DISK_FULL":
        return "DISK_FULL", why, (f"Free disk space on {req.instance} (see what fills it: brev exec {req.instance} "
                                  f"'df -h ~ /var/lib/docker; docker system df' </dev/null), then: {again}")
    return "SPEC_NOT_WRITTEN", why, f"Check the instance disk and home directory, then: {again}"


def interrupted_fix(job_id: str) -> str:
    """Never resubmit an interrupted submit: poll the job (absolute command, ``nextstep``)."""
    return nextstep.resume_fix("submit.py", [], job_id, "PENDING")


def _interrupted(answer: dict) -> TaoBrevError:
    job_id = answer["job_id"]
    return TaoBrevError("INTERRUPTED", f"submit of {job_id} was interrupted while launching: the container may "
                        "or may not start", interrupted_fix(job_id),
                        answer={**answer, "state": "PENDING"})


# refusals decided by the submit script's checks BEFORE `docker run` (remote.submit_script): nothing was
# created on the instance, so the refusal closes the job itself (no teardown is left to do)
REFUSED_BEFORE_RUN = ("INPUT_NOT_FOUND", "IMAGE_NOT_PULLED", "GPUS_BUSY", "DOCKER_NOT_FOUND", "SPEC_NOT_WRITTEN",
                      "DISK_FULL", "INPUT_STAGING_FAILED")
# the caller's own input was wrong: retrying the same call cannot help (the TAO bank's ERR_PROGRAM), never ERR_INFRA
USER_ERRORS = ("INPUT_NOT_FOUND",)


def _mark_never_launched(ctx: Context, job_id: str, why: str, code: str | None = None,
                         fix: str | None = None) -> None:
    """Close a launch that was refused (``code``: the answer's error code; later polls repeat it,
    with its class: ERR_PROGRAM for the caller's own mistake, else ERR_INFRA). A refusal before
    ``docker run`` (REFUSED_BEFORE_RUN) left nothing on the instance: it is closed here too."""
    err_class = "ERR_PROGRAM" if code in USER_ERRORS or (code in CODES and CODES[code].exit_code == 2) \
        else "ERR_INFRA"
    ctx.records.mark(job_id, "ERROR", message=f"never launched: {why}", source="agent", err_class=err_class)
    hint = {"err_class": err_class, "reason": f"refused before launch ({code or 'NEVER_LAUNCHED'}): nothing ran",
            "advice": fix or CODES[code if code in CODES else "NEVER_LAUNCHED"].fix, "evidence": [why]}
    ctx.sidecars.update(job_id, launch={"state": "refused", "finished_at": now_iso(), "hint": hint,
                                        **({"code": code} if code else {})})
    if code in REFUSED_BEFORE_RUN:
        ctx.sidecars.update(job_id, teardown={"at": now_iso(), "container_removed": False,
                                              "closed_by": "the submit's refusal (nothing was launched)"})


def _run_spec(req: SubmitRequest, image: str, job_id: str, routing, mounts, env_file, gpu_plan=None,
              resumed=None) -> RunSpec:
    gpu_plan = gpu_plan or tao_gpus.GpuPlan()
    return RunSpec(job_id=job_id, image=image, network_arch=req.network_arch, action=req.action,
                   results_dir=routing.instance_dir(job_id), gpus=req.gpus, shm_size=req.shm_size,
                   env_file=env_file, mounts=tuple(mounts) + ((resumed.mount(job_id),) if resumed else ()),
                   overrides=(*gpu_plan.overrides, *req.overrides), share_gpus=req.share_gpus,
                   gpu_count_keys=gpu_plan.host_keys, shell_args=(resumed.override(),) if resumed else ())


def _extra_checks(resumed, job_id: str, env_file, carrier_file, named, mounts, carrier_image: str) -> str:
    """The launch script's lines after the inputs are in place: the resume checkpoint
    (``tao_brev.resume``), then every path the spec names under an input mount (``spec_paths``)."""
    return "\n".join(filter(None, [resume.checks(resumed, job_id, carrier_image, (env_file, carrier_file),
                                                  carrier_file),
                                    spec_paths.check_lines(named, spec_paths.host_paths(mounts))]))


def _resume_failed(req: SubmitRequest, out: str) -> tuple[str, str, str]:
    """RESUME_CHECKPOINT_MISSING: the instance found no usable checkpoint of --resume-from's job."""
    detail = out.split(resume.MISSING, 1)[1].strip().splitlines()[0] if resume.MISSING in out else ""
    why = f"no usable checkpoint of {req.resume_from} on {req.instance} ({detail}): nothing was launched"
    look = nextstep.command("poll_status.py", req.resume_from)
    return "RESUME_CHECKPOINT_MISSING", why, (f"Train from the start instead: {req.rerun(drop=('--resume-from',))}; "
                                              f"or look at its results: {look}")



def _check_spec(ctx: Context, req: SubmitRequest, image: str, spec_text: str, spec_data: dict):
    """The spec and overrides against TAO's schema of the image's version (:mod:`tao_brev.spec_check`)."""
    from .. import spec_check

    fix = (f"Fix the spec {req.spec} (or the override) where the finding says, then run the same command: "
           f"{req.rerun()}. A custom image with its own schema: {req.rerun(add=('--no-spec-check',))}")
    return spec_check.check(network_arch=req.network_arch, action=req.action, image=image, spec_path=req.spec,
                            spec_text=spec_text, spec_data=spec_data, overrides=list(req.overrides),
                            state_root=ctx.state_root, env=ctx.env, skip=req.no_spec_check, fix=fix)


def _gpu_plan(req: SubmitRequest, checked, spec_data: dict):
    """--gpus and the spec's num_gpus / gpu_ids agree (:mod:`tao_brev.tao_gpus`), or BAD_ARGUMENT."""
    return tao_gpus.plan(gpus=req.gpus, action=req.action, config=checked.config, spec_data=spec_data,
                         overrides=list(req.overrides), rerun=req.rerun)


def _script(run: RunSpec, spec_text: str, checks: str) -> str:
    return remote.submit_script(run, spec_text, checks)


@dataclass
class Staging:
    """Tier B/C: the inputs through S3, the carrier, and who receives the S3 credentials."""

    tier: str
    settings: storage.S3Settings
    inputs: list
    carrier_image: str
    cache_path: Path | None = None     # the local hash cache (hash_cache.default_path)
    index_copies: Path | None = None   # local copies of the inputs' index.json (staging.index_copies_dir)

    @classmethod
    def plan(cls, ctx: Context, req: SubmitRequest) -> "Staging | None":
        """None for tier A. Raises MISSING_CREDENTIAL / BAD_ARGUMENT before anything moves."""
        if req.storage_tier == "A":
            return None
        settings = storage.s3_settings(ctx.env, bucket=req.bucket)   # inputs: --bucket, else S3_BUCKET_NAME
        if settings.missing():
            raise TaoBrevError("MISSING_CREDENTIAL", f"storage tier {req.storage_tier} moves data through S3; "
                               f"not set: {', '.join(settings.missing())}")
        return cls(req.storage_tier, settings, staging.parse_inputs(req.inputs), staging.carrier_image(ctx.env),
                   hash_cache.default_path(ctx.state_root), staging.index_copies_dir(ctx.state_root))

    def warm(self) -> None:
        """Start building the S3 client in the background (no request), so it overlaps the
        instance checks that come before the upload (``brev ls``)."""
        if self.inputs:
            staging.prefetch_client(self.settings)

    def prepare(self, upload: bool = True) -> None:
        """Put the local inputs in S3 (or, with ``upload=False``, only work out where they would go)."""
        staging.prepare_inputs(self.settings, self.settings.bucket, self.inputs, upload=upload,
                               cache=hash_cache.HashCache(self.cache_path), index_copies=self.index_copies)

    def mounts(self, job_id: str) -> list[tuple[str, str, bool]]:
        return staging.input_mounts(job_id, self.inputs)

    def push_credentials(self, ctx: Context, instance: str, job_id: str, user_values: dict,
                         destination: str | None) -> tuple[str | None, str]:
        """(job container env file or None, carrier env file): B keeps the S3 keys away from the job."""
        s3_env = self.settings.container_env(legacy=self.tier == "C")
        if self.tier == "C":
            values = {**user_values, **s3_env, **staging.locations(self.inputs, destination)}
            path = credentials.push(ctx.brev, instance, job_id, credentials.env_file_text(values)).path
            return path, path
        carrier = credentials.push(ctx.brev, instance, f"{job_id}-s3", credentials.env_file_text(s3_env)).path
        job = (credentials.push(ctx.brev, instance, job_id, credentials.env_file_text(user_values)).path
               if user_values else None)
        return job, carrier

    def checks(self, job_id: str, image: str, env_file: str | None, carrier_file: str) -> str:
        """The launch script's preamble: remove the credential files on exit, copy the inputs in."""
        carrier = staging.Carrier(self.carrier_image, carrier_file, job_id,
                                  path_style=bool(self.settings.endpoint_url))
        remove = list(dict.fromkeys(p for p in (env_file, carrier_file) if p))
        return staging.fetch_script(carrier, self.inputs, image, remove=remove)

    def answer(self) -> dict:
        return {"inputs": [inp.to_json() for inp in self.inputs]}

    def plan_steps(self, instance: str) -> list[dict]:
        who = "the carrier and the job container" if self.tier == "C" else "the carrier only"
        return [{"step": "upload_inputs", "what": "staging.sync_input of each local input to "
                 "s3://BUCKET/inputs/NAME/ (only files not already there are sent)",
                 "inputs": [inp.to_json() for inp in self.inputs]},
                {"step": "copy_s3_credentials", "what": f"brev copy <0600 file with the AWS_* settings, read by "
                 f"{who}> {instance}:.tao-cred-<job_id>-<random>"}]


def _credential_warnings(ctx: Context, routing, stage: Staging | None) -> list[str]:
    """Tier A with results routed to S3: the upload at the end needs credentials then."""
    if stage is None and routing.kind == "s3":
        missing = storage.s3_settings(ctx.env, bucket=routing.bucket).missing()
        if missing:
            return [f"results go to {routing.destination('<job_id>')} but {', '.join(missing)} "
                    "is not set here: export it before poll_status.py / teardown.py upload them"]
    return []
