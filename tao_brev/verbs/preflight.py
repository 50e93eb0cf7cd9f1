"""preflight: everything that can fail before GPU money is spent, in one answer.

Each check is ``{"name", "ok", "detail", "fix", "elapsed_s"}`` (plus ``code``
when it failed, ``warning`` when it passed with a caveat, ``data``) under a
stable name. Checks that make later ones impossible stop the run (brev
missing, not logged in, instance unknown / not running / not exec-ready);
otherwise every check is reported, so one run tells the whole truth. ``ok``
is true only when every check passed; warnings do not fail it.

Order: the local checks first (``image_ref``, ``s3``), then ``brev_cli``,
``brev_auth``, ``instance``, ``exec_ready``, then ONE combined round trip for
``docker``, ``gpu``, ``disk``, ``ngc_auth`` (login + ``docker manifest
inspect``) and ``image``; ``--pull`` and ``--gpu-smoke`` are their own round
trips. Once the instance is exec-ready that is 2 ``brev exec`` calls (the
successful probe and the combined script), plus one ``brev copy`` when an NGC
key travels.

Facts relied on: brev-cli behaviour in ``references/brev-exec.md`` (read from brevdev/brev-cli)
(``ls --json`` shape and statuses, RUNNING before sshd, the two-word probe,
>= 600 s for a first exec); the NGC login and entitlement rule of the TAO
skill bank contract (``docker manifest inspect`` failing before any login =
not authenticated, after a successful login = not entitled); Docker CLI
messages classified by :func:`tao_brev.docker_state.docker_error_code`.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field

from .. import lazy_re
from .. import bank, cost, credentials, docker_state, remote
from ..secrets import redact
from .. import routing as routing_mod
from ..cli import Context, say
from ..errors import CODES, TaoBrevError, TransportError
from ..transport import BREV_TIMEOUT_S, check_instance

GIB = 1024**3
PROBE_INTERVAL_S = 5.0               # between readiness probes (each brev exec also waits for ssh itself)
INSTANCE_POLL_S = 10.0               # between `brev ls --json` polls while an instance starts
MIN_ATTEMPT_TIMEOUT_S = 5.0          # an attempt in flight gets at least this long
MAX_PROBE_TIMEOUT_S = 120.0          # one probe attempt never waits longer than this
KEY_REJECTED_ATTEMPTS = 2            # probes refused with `Permission denied (publickey)` before giving up
PULL_TIMEOUT_S = 3600.0              # `docker pull` of a multi-GB image
SMOKE_TIMEOUT_S = 600.0              # small image pull + `nvidia-smi` in a container
DEFAULT_IMAGE_BYTES = 20 * GIB       # a TAO pyt image extracted, when its size is unknown
EXTRACT_FACTOR = 2                   # registry layers are compressed; extracted takes ~2x (estimate)
DISK_HEADROOM_BYTES = 20 * GIB       # warn when less stays free for results and checkpoints
GPU_SMOKE_KEY = "images.gpu_smoke"
GPU_SMOKE_DEFAULT = "nvidia/cuda:12.4.1-base-ubuntu22.04"
# `docker run` could not get its image (docker/cli run.go: "Unable to find image ... locally", then the pull error)
PULL_FAILED = lazy_re.compile(r"Unable to find image|Error response from daemon: (Get|Head) \"https://", re.I)

BROKEN_STATES = {
    "FAILURE": "The instance failed to deploy or start: read its error in the Brev console, then replace it "
               "with the official Brev agent skill (this bundle never provisions).",
    "UNHEALTHY": "The instance runs but Brev reports it unhealthy: restart it (brev stop {name} && brev start "
                 "{name}) or replace it with the official Brev agent skill.",
    "DELETING": "The instance is being deleted: use another instance (the official Brev agent skill provisions one).",
}
STOPPED_FIX = ("Start it: rerun preflight.py --instance {name} --start (runs `brev start {name}` and waits), "
               "or run `brev start {name}` yourself.")
NO_MANIFEST = "no such manifest"     # `docker manifest inspect` on a missing tag: "no such manifest: REF"
# docker login --password-stdin with an empty stdin (docker/cli cli/command/registry/login.go)
NON_TTY_LOGIN = "Cannot perform an interactive login from a non TTY device"


@dataclass
class PreflightRequest:
    """What to check. Times in seconds; paths are instance paths (``~/...`` or absolute)."""

    instance: str
    image: str | None = None
    exec_timeout: float | None = None   # budget to reach the instance (start wait + probe); default 600 s
    host: bool = False
    start: bool = False
    pull: bool = False
    gpu_smoke: bool = False
    storage_tier: str = "A"
    bucket: str | None = None
    results_root: str | None = None


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""
    fix: str | None = None
    code: str | None = None
    warning: bool = False
    elapsed_s: float | None = None
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix,
               "elapsed_s": round(self.elapsed_s or 0.0, 3)}
        if self.code:
            out["code"] = self.code
        if self.warning:
            out["warning"] = True
        if self.data:
            out["data"] = self.data
        return out


class Stop(Exception):
    """A check failed that later checks depend on: answer now."""


class Report:
    """The checks in order, each timed from the previous one unless it brings its
    own time, and the round trips spent (``brev exec`` by step, ``brev copy``)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        self.checks: list[Check] = []
        self.round_trips = {"probe": 0, "checks": 0, "pull": 0, "gpu_smoke": 0, "copy": 0}
        self.s3_target: S3Target | None = None   # set by check_s3: what the instance must reach
        self._mark = ctx.clock()

    def add(self, check: Check) -> Check:
        now = self.ctx.clock()
        if check.elapsed_s is None:
            check.elapsed_s = now - self._mark
        self._mark = now
        self.checks.append(check)
        state = "ok" if check.ok and not check.warning else ("WARN" if check.ok else "FAIL")
        say(f"preflight {check.name}: {state} {check.detail}")
        return check

    def passed(self, name: str, detail: str, elapsed_s: float | None = None, **data) -> Check:
        return self.add(Check(name, True, detail, elapsed_s=elapsed_s, data=data))

    def warn(self, name: str, detail: str, fix: str, elapsed_s: float | None = None, code: str | None = None,
             **data) -> Check:
        return self.add(Check(name, True, detail, fix, code, warning=True, elapsed_s=elapsed_s, data=data))

    def fail(self, name: str, code: str, detail: str, fix: str | None = None, elapsed_s: float | None = None,
             **data) -> Check:
        return self.add(Check(name, False, detail, fix or CODES[code].fix, code, elapsed_s=elapsed_s, data=data))

    def error(self, name: str, exc: TaoBrevError, elapsed_s: float | None = None, **data) -> Check:
        return self.fail(name, exc.code, exc.message, exc.fix, elapsed_s, **data)

    def stop(self, name: str, exc: TaoBrevError, **data) -> None:
        self.error(name, exc, **data)
        raise Stop()

    def count(self, step: str, fn, *args, **kw):
        """Call ``fn`` and add the ``brev exec`` calls it made to ``round_trips[step]``."""
        before = self.ctx.brev.exec_calls
        try:
            return fn(*args, **kw)
        finally:
            self.round_trips[step] += self.ctx.brev.exec_calls - before


# -- the verb ---------------------------------------------------------------------
def preflight(ctx: Context, req: PreflightRequest) -> tuple[dict, int]:
    """Run every check for ``req``; return (answer, exit code). Bad flags raise BAD_ARGUMENT/BAD_NAME."""
    _validate(req)
    report = Report(ctx)
    resolved = check_image_ref(report, ctx, req)
    results_root = check_s3(report, ctx, req)
    stopped = False
    try:
        check_brev_cli(report, ctx)
        entry = check_brev_auth(report, ctx, req)
        deadline = ctx.clock() + (req.exec_timeout or ctx.brev.timeout_for(req.instance))
        check_instance_state(report, ctx, req, entry, deadline)
        check_exec_ready(report, ctx, req, deadline)
        check_on_instance(report, ctx, req, resolved["image"] if resolved else None, results_root)
    except Stop:
        stopped = True
    return _answer(report, ctx, req, resolved, stopped)


def login_only(ctx: Context) -> tuple[dict, int]:
    """``preflight.py --login``: ``brev_cli`` and ``brev_auth`` only (``brev ls --json``; the
    transport renews a missing login with BREV_API_TOKEN, or brev reads BREV_API_KEY from its
    environment), so that a plain ``brev`` command typed next finds brev logged in."""
    from ..transport import api_key

    report = Report(ctx)
    try:
        check_brev_cli(report, ctx)
        started = ctx.clock()
        try:
            listed = ctx.brev.ls()
        except TaoBrevError as exc:
            report.stop("brev_auth", exc, token_set=bool(ctx.env.get("BREV_API_TOKEN", "").strip()))
        how = ("brev reads BREV_API_KEY from its environment" if api_key(ctx.env)
               else "headless login with BREV_API_TOKEN" if ctx.brev.logins else "already logged in")
        report.passed("brev_auth", f"logged in ({how}); brev ls lists {len(listed)} instance(s)",
                      elapsed_s=ctx.clock() - started, headless_login=ctx.brev.logins > 0,
                      api_key=bool(api_key(ctx.env)), instances=len(listed))
        stopped = False
    except Stop:
        stopped = True
    answer, code = _answer(report, ctx, PreflightRequest(instance=""), None, stopped)
    answer.pop("instance", None)
    return answer, code


def _validate(req: PreflightRequest) -> None:
    check_instance(req.instance)
    if req.exec_timeout is not None and not req.exec_timeout > 0:
        raise TaoBrevError("BAD_ARGUMENT", f"--exec-timeout must be a positive number of seconds "
                           f"(got {req.exec_timeout})")
    if req.storage_tier not in ("A", "B", "C"):
        raise TaoBrevError("BAD_ARGUMENT", f"--storage-tier must be A, B or C (got {req.storage_tier!r})")
    if req.results_root:
        remote.rpath(req.results_root)


def _answer(report: Report, ctx: Context, req: PreflightRequest, resolved: dict | None,
            stopped: bool) -> tuple[dict, int]:
    """The JSON answer. The error (and exit code) is the first failed check of
    bad input (exit 2), else the check that stopped the run (its code's class),
    else PREFLIGHT_FAILED (exit 1) naming every failed check."""
    failed = [c for c in report.checks if not c.ok]
    answer = {"ok": not failed, "instance": req.instance, "image": resolved["image"] if resolved else None,
              "checks": [c.to_json() for c in report.checks],
              "warnings": [c.name for c in report.checks if c.warning],
              "exec_calls": ctx.brev.exec_calls, "round_trips": dict(report.round_trips),
              "brev_logins": ctx.brev.logins}
    if not failed:
        return answer, 0
    decisive = next((c for c in failed if CODES[c.code].exit_code == 2), None) or (failed[-1] if stopped else None)
    if decisive is not None:
        answer["error"] = {"code": decisive.code, "message": f"{decisive.name}: {decisive.detail}",
                           "fix": decisive.fix}
        return answer, CODES[decisive.code].exit_code
    names = ", ".join(c.name for c in failed)
    answer["error"] = TaoBrevError("PREFLIGHT_FAILED", f"failed checks: {names}").to_json()
    return answer, 1


# -- local checks -----------------------------------------------------------------
def check_image_ref(report: Report, ctx: Context, req: PreflightRequest) -> dict | None:
    """``image_ref``: the image argument resolves (``bank.resolve_image``)."""
    if not req.image:
        return None
    try:
        resolved = bank.resolve_image(req.image, ctx.env)
    except TaoBrevError as exc:
        report.error("image_ref", exc, argument=req.image)
        return None
    report.passed("image_ref", f"{req.image} -> {resolved['image']}", **resolved)
    return resolved


def check_s3(report: Report, ctx: Context, req: PreflightRequest) -> str:
    """``s3`` (tier B/C, or a bucket from --bucket / S3_BUCKET_NAME): credentials
    resolve, the bucket answers, and a write/read/delete probe under
    ``results/`` succeeds. Returns the instance results root (the bank's routing)."""
    root = req.results_root or ctx.env.get("TAO_RESULTS_ROOT") or remote.RESULTS_ROOT
    try:
        routing = routing_mod.route(req, ctx.env)
    except TaoBrevError as exc:
        report.error("s3", exc, storage_tier=req.storage_tier)
        return root
    if routing.kind != "s3":
        return routing.instance_root
    from .. import staging, storage  # boto3 only on this path

    settings = storage.s3_settings(ctx.env, bucket=routing.bucket)
    report.s3_target = S3Target.of(settings.endpoint_url, settings.region, staging.carrier_image(ctx.env))
    where = f"s3://{routing.bucket}/results/"
    data = {"bucket": routing.bucket, "prefix": "results/", "endpoint": settings.endpoint_url,
            "credential_sources": {k: v for k, v in settings.sources.items() if k != "bucket"}}
    try:
        storage.probe(settings, where)
    except TaoBrevError as exc:
        report.error("s3", exc, **data)
    else:
        report.passed("s3", f"{where} answers: write, read back and delete of a probe object succeeded", **data)
    return routing.instance_root


# -- reaching the instance --------------------------------------------------------
def check_brev_cli(report: Report, ctx: Context) -> None:
    """``brev_cli``: brev is on PATH and ``brev --version`` answers (no login needed).

    The transport has no public call that needs no login, hence its process
    helper (stdin from /dev/null, timeout kills the process group).
    """
    try:
        path = ctx.brev.path()
        done = ctx.brev._spawn(["--version"], BREV_TIMEOUT_S)
    except TaoBrevError as exc:
        report.stop("brev_cli", exc)
    lines = (done.stdout or done.stderr or "").strip().splitlines()
    if done.returncode != 0:
        report.stop("brev_cli", TaoBrevError("BREV_FAILED", f"`brev --version` exited {done.returncode}: "
                                             + redact.tail(" ".join(lines), 300)), path=path)
    version = lines[-1] if lines else None
    report.passed("brev_cli", f"brev at {path} ({version or 'version unknown'})", path=path, version=version)


def check_brev_auth(report: Report, ctx: Context, req: PreflightRequest) -> dict | None:
    """``brev_auth``: ``brev ls --json`` answers. The transport logs in headlessly
    with BREV_API_TOKEN once when brev reports 401/unauthorized or a prompt
    without a terminal; this check says whether that happened."""
    try:
        entry = ctx.brev.instance(req.instance)
    except TaoBrevError as exc:
        report.stop("brev_auth", exc, token_set=bool(ctx.env.get("BREV_API_TOKEN", "").strip()))
    relogged = ctx.brev.logins > 0
    report.passed("brev_auth", "logged in" + (" (headless re-login with BREV_API_TOKEN)" if relogged else ""),
                  headless_login=relogged)
    return entry


def check_instance_state(report: Report, ctx: Context, req: PreflightRequest, entry: dict | None,
                         deadline: float) -> None:
    """``instance``: listed and RUNNING; STARTING/DEPLOYING/STOPPING are waited
    for (``brev ls --json`` polls) until ``deadline``; STOPPED is started only
    with ``--start``; FAILURE/UNHEALTHY/DELETING fail with the reason."""
    started_at = ctx.clock()
    try:
        entry, started = _settle_instance(ctx, req, entry, deadline)
    except TaoBrevError as exc:
        near = {"did_you_mean": exc.details["did_you_mean"]} if exc.details.get("did_you_mean") else {}
        report.stop("instance", exc, **_instance_facts(exc.details.get("entry")), **near)
    waited = ctx.clock() - started_at
    facts = _instance_facts(entry)
    how = (" after `brev start`" if started else "") + (f", waited {waited:.0f} s" if waited >= 1 else "")
    report.passed("instance", f"{req.instance} RUNNING{how}; shell {facts['shell_status']}, gpu {facts['gpu']}",
                  started=started, waited_s=round(waited, 3), **facts)


def _instance_facts(entry: dict | None) -> dict:
    keys = ("status", "shell_status", "health_status", "build_status", "gpu", "instance_type")
    return {k: entry.get(k) for k in keys} if entry else {}


def _settle_instance(ctx: Context, req: PreflightRequest, entry: dict | None,
                     deadline: float) -> tuple[dict, bool]:
    """Poll until ``entry`` is RUNNING; return (entry, whether we started it)."""
    name, started = req.instance, False
    interval = _interval(deadline - ctx.clock(), INSTANCE_POLL_S)
    while True:
        if entry is None:
            from ..instance_names import closest, unknown_message

            listed = [str(w.get("name") or "") for w in ctx.brev.ls()]
            raise TaoBrevError("UNKNOWN_INSTANCE", unknown_message(name, listed),
                               did_you_mean=closest(name, listed))
        status = str(entry.get("status") or "").upper()
        build = building(entry) if status == "RUNNING" else None
        if status == "RUNNING" and build is None:
            if started:   # the bundle's own start bills from here: the next job's billed_parts.start_s
                cost.note_start(ctx, name, ctx.clock() - start_at)
            return entry, started
        if build == "CREATE_FAILED":
            raise TaoBrevError("INSTANCE_NOT_RUNNING", f"{name} is RUNNING but its build failed{_reason(entry)}",
                               BROKEN_STATES["FAILURE"], entry=entry)
        if status in BROKEN_STATES:
            raise TaoBrevError("INSTANCE_NOT_RUNNING", f"{name} is {status}{_reason(entry)}",
                               BROKEN_STATES[status].format(name=name), entry=entry)
        if status == "STOPPED" and not started:
            if not req.start:
                raise TaoBrevError("INSTANCE_NOT_RUNNING", f"{name} is STOPPED", STOPPED_FIX.format(name=name),
                                   entry=entry)
            say(f"preflight: starting {name} (brev start {name})")
            start_at = ctx.clock()
            ctx.brev.start(name, timeout=max(deadline - ctx.clock(), BREV_TIMEOUT_S))
            started = True
        elif ctx.clock() + interval > deadline and build is not None:
            raise TaoBrevError("INSTANCE_BUILDING", f"{name} is RUNNING but still building (build {build}, shell "
                               f"{entry.get('shell_status') or '?'}) at the end of the --exec-timeout budget",
                               entry=entry)
        elif ctx.clock() + interval > deadline:
            raise TaoBrevError("NOT_EXEC_READY", f"{name} is still {status or 'in an unknown state'} "
                               "at the end of the --exec-timeout budget", entry=entry)
        else:
            what = f"RUNNING, build {build}, shell {entry.get('shell_status') or '?'}" if build else status
            say(f"preflight: {name} is {what}; waiting {interval:g} s")
            ctx.sleep(interval)
        entry = ctx.brev.instance(name)


def building(entry: dict) -> str | None:
    """The build status of a RUNNING instance that is not ready for a shell yet, else None.
    brev-cli pkg/cmd/ls/ls.go getShellDisplayStatus: shell READY only when RUNNING and the build
    (VerbBuildStatus: PENDING, BUILDING, CREATE_FAILED, COMPLETED) is COMPLETED; an entry without
    the field (older brev) is not held back."""
    build = str(entry.get("build_status") or "").upper()
    shell = str(entry.get("shell_status") or "").upper()
    if build in ("", "COMPLETED") and shell in ("", "READY"):
        return None
    return build or "?"


def _reason(entry: dict) -> str:
    parts = [f"{k} {entry[k]}" for k in ("build_status", "health_status") if entry.get(k)]
    return f" ({', '.join(parts)})" if parts else ""


def _interval(budget: float, cap: float) -> float:
    """Poll at ``cap`` seconds, or ten times within a small budget."""
    return max(min(cap, budget / 10), 0.05)


def check_exec_ready(report: Report, ctx: Context, req: PreflightRequest, deadline: float) -> None:
    """``exec_ready``: the two-word probe ``echo ok`` printed exactly ``ok``.

    A fresh instance reports RUNNING before sshd accepts connections, and a
    single token such as ``true`` lands in brev's command slot even when a
    real command is misquoted, so the probe is two words and its output is
    checked (references/brev-exec.md, fact 8). Polled until ``deadline``.
    """
    started = ctx.clock()
    try:
        attempts = report.count("probe", _probe_until_ready, ctx, req, deadline)
    except TaoBrevError as exc:
        report.stop("exec_ready", exc, attempts=report.round_trips["probe"])
    took = ctx.clock() - started
    report.passed("exec_ready", f"`echo ok` answered after {took:.1f} s ({attempts} attempt(s))",
                  elapsed_s=took, attempts=attempts, seconds=round(took, 3))


def _probe_until_ready(ctx: Context, req: PreflightRequest, deadline: float) -> int:
    """Return the number of attempts; raise NOT_EXEC_READY at ``deadline``.

    ``Permission denied (publickey)`` is not a boot delay (brev's own wait for ssh
    stops on it): the probe gives up with SSH_KEY_REJECTED after
    KEY_REJECTED_ATTEMPTS such answers, whatever budget is left."""
    interval = _interval(deadline - ctx.clock(), PROBE_INTERVAL_S)
    attempt, last, rejected = 0, "no attempt", 0
    while True:
        attempt += 1
        remaining = deadline - ctx.clock()
        timeout = min(max(remaining, MIN_ATTEMPT_TIMEOUT_S), MAX_PROBE_TIMEOUT_S)
        try:
            result = ctx.brev.exec(req.instance, "echo ok", timeout=timeout, host=req.host)
            if result.ok and result.stdout.strip() == "ok":
                return attempt
            last = f"the probe printed {result.stdout.strip()[:80]!r} (exit {result.exit_code})"
        except TransportError as exc:
            last = exc.message
            rejected = rejected + 1 if exc.code == "SSH_KEY_REJECTED" else 0
            if rejected >= KEY_REJECTED_ATTEMPTS:
                raise TransportError(exc.code, f"{exc.message} ({attempt} attempts)", exc.fix) from None
        if ctx.clock() + interval > deadline:
            raise TaoBrevError("NOT_EXEC_READY", f"{req.instance} did not run `echo ok` within the "
                               f"--exec-timeout budget ({attempt} attempts); last: {last}")
        ctx.sleep(interval)


# -- on the instance: one combined round trip -----------------------------------------
@dataclass
class Answers:
    """The sections of the combined script and how long its round trip took."""

    sections: dict
    elapsed_s: float
    instance: str = "NAME"

    def get(self, name: str) -> remote.Section | None:
        return self.sections.get(name)


@dataclass
class ImageFacts:
    """What the combined round trip says about ``--image``."""

    image: str
    present: bool = False
    local_bytes: int | None = None     # ``docker image inspect`` .Size
    size_bytes: int = DEFAULT_IMAGE_BYTES   # what a pull needs on disk (see image_facts)
    size_source: str = "default"


@dataclass
class NgcKey:
    """NGC_KEY's trip to the instance: the remote 0600 file, or why it did not arrive."""

    file: credentials.RemoteSecretFile | None = None
    error: TaoBrevError | None = None

    @property
    def set(self) -> bool:
        return self.file is not None or self.error is not None


def check_on_instance(report: Report, ctx: Context, req: PreflightRequest, image: str | None,
                      results_root: str) -> None:
    """docker, gpu, disk, ngc_auth, image in ONE brev exec; then --pull and --gpu-smoke."""
    ngc = image is not None and bank.image_registry(image) == credentials.NGC_REGISTRY
    key = _push_ngc_key(report, ctx, req) if ngc else NgcKey()
    token = remote.new_token()
    script = combined_script(token, image, results_root, key.file, report.s3_target)
    try:
        result = report.count("checks", ctx.brev.exec, req.instance, script, idempotent=True, host=req.host)
    except TaoBrevError as exc:
        if key.file:   # its trap never fired: the key file would stay on the instance
            credentials.discard(ctx.brev, req.instance, key.file)
        if isinstance(exc, TransportError):
            report.stop("docker", exc)
        raise
    answers = Answers(remote.parse_sections(result.stdout, token), result.elapsed_s, req.instance)
    facts = image_facts(answers, image) if image else None
    docker = check_docker(report, answers)
    check_gpu(report, answers)
    disk = check_disk(report, answers, facts, results_root)
    ngc_check = check_ngc(report, answers, key, facts.present) if ngc else None
    if report.s3_target is not None:
        check_s3_from_instance(report, answers, report.s3_target, ctx, req)
    if facts:
        blocker = next((c for c in (docker, disk, ngc_check) if c is not None and not c.ok), None)
        authed = ngc_check is not None and ngc_check.data.get("status") == "AUTH_OK"
        check_image(report, ctx, req, answers, facts, blocker, logged_in=authed)
    if req.gpu_smoke:
        check_gpu_smoke(report, ctx, req, docker)


def _push_ngc_key(report: Report, ctx: Context, req: PreflightRequest) -> NgcKey:
    """NGC_KEY -> a 0600 file on the instance by ``brev copy`` (counted in round_trips)."""
    if not credentials.ngc_key(ctx.env):
        return NgcKey()
    report.round_trips["copy"] += 1
    try:
        return NgcKey(file=credentials.push_ngc_key(ctx.brev, req.instance, ctx.env))
    except TaoBrevError as exc:
        say(f"preflight: could not copy the NGC key file: {exc.message}")
        return NgcKey(error=exc)


@dataclass(frozen=True)
class S3Target:
    """What the instance itself needs for S3 transfers (tier B/C inputs, S3 results): a TCP
    connection to the endpoint and the carrier image (``images.s3_transfer``) that runs the AWS CLI."""

    host: str
    port: int
    carrier: str

    @classmethod
    def of(cls, endpoint_url: str | None, region: str | None, carrier: str) -> "S3Target":
        """``endpoint_url`` (AWS_ENDPOINT_URL...) or AWS's regional endpoint (botocore's default
        ``s3.<region>.amazonaws.com``, port 443)."""
        from urllib.parse import urlsplit

        if endpoint_url:
            url = urlsplit(endpoint_url)
            port = url.port or (80 if url.scheme == "http" else 443)
            return cls(url.hostname or "", port, carrier)
        return cls(f"s3.{region or 'us-east-1'}.amazonaws.com", 443, carrier)

    def reach_command(self) -> str:
        """Prints ``reached`` when a TCP connection to host:port opens within 10 s (bash's
        /dev/tcp, as curl may be missing on the host); its error otherwise."""
        connect = shlex.quote(f"exec 3<>/dev/tcp/{self.host}/{self.port}")
        return f"timeout 10 bash -c {connect} && echo reached"


def combined_script(token: str, image: str | None, results_root: str,
                    key_file: credentials.RemoteSecretFile | None, s3: S3Target | None = None) -> str:
    """The on-instance checks as sections of one POSIX sh script.

    The NGC key file (if any) is removed by the trap on every path; the login
    runs before ``docker manifest inspect``, which then uses it.
    """
    parts = [credentials.remove_on_exit(key_file)] if key_file else []
    parts += [
        remote.section(token, "docker", "docker info --format '{{json .}}'"),
        remote.section(token, "docker_path", DOCKER_WHERE),
        remote.section(token, "gpu", "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader"),
        remote.section(token, "disk_docker", _free_space(
            "$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || echo /var/lib/docker)")),
        remote.section(token, "disk_results", _free_space(remote.rpath(results_root))),
    ]
    if image:
        quoted = shlex.quote(image)
        parts.append(remote.section(token, "image", f"docker image inspect --format '{{{{.Size}}}}' {quoted}"))
        if key_file:
            parts.append(remote.section(token, "ngc_login", credentials.ngc_login_command(key_file)))
        parts.append(remote.section(token, "manifest", f"docker manifest inspect {quoted}"))
    if s3 is not None:
        parts.append(remote.section(token, "s3_reach", s3.reach_command()))
        parts.append(remote.section(token, "carrier", f"docker image inspect --format '{{{{.Size}}}}' "
                                                      f"{shlex.quote(s3.carrier)}"))
    return "\n".join(parts)


def check_s3_from_instance(report: Report, answers: Answers, target: S3Target, ctx: Context | None = None,
                           req: PreflightRequest | None = None) -> None:
    """``s3_from_instance``: the transfers run ON the instance (staging.py's carrier), so the
    instance must reach the endpoint (a failure: S3_UNREACHABLE, nothing would be staged or
    uploaded) and should hold the carrier image (a warning: the first transfer pulls it)."""
    t = answers.elapsed_s
    where = f"{target.host}:{target.port}"
    reach, carrier = answers.get("s3_reach"), answers.get("carrier")
    data = {"endpoint": where, "carrier_image": target.carrier,
            "carrier_present": carrier is not None and carrier.exit_code == 0}
    if reach is None or reach.exit_code != 0 or "reached" not in reach.output.split():
        report.fail("s3_from_instance", "S3_UNREACHABLE",
                    f"the instance cannot open a connection to the S3 endpoint {where}: {_tail(reach)}",
                    f"Make {where} reachable from {answers.instance} (a public endpoint, or one on its network; "
                    "127.0.0.1 on this machine is not the instance's), or choose --storage-tier A without a bucket",
                    elapsed_s=t, **data)
        return
    if not data["carrier_present"]:
        from . import carrier_pull

        if req is not None and req.pull:
            carrier_pull.pull(report, ctx, req, target.carrier, t, data)
            return
        hint = [*(["--image", req.image] if req and req.image else []),
                *(["--storage-tier", req.storage_tier] if req else []),
                *(["--bucket", req.bucket] if req and req.bucket else [])]
        report.warn("s3_from_instance", f"{where} is reachable from the instance; the AWS CLI image "
                    f"{target.carrier} is not on it: the first transfer pulls it "
                    f"(from {carrier_pull.where(target.carrier)})",
                    carrier_pull.pull_fix(answers.instance, hint), elapsed_s=t, **data)
        return
    report.passed("s3_from_instance", f"{where} is reachable from the instance and {target.carrier} is on it",
                  elapsed_s=t, **data)


# Where docker is when the non-interactive ssh shell cannot find it: usual places, and the
# PATH of a login shell (which reads ~/.profile; `ssh HOST 'command'` does not).
DOCKER_WHERE = (
    "if command -v docker >/dev/null 2>&1; then command -v docker; else echo TAO_DOCKER_NOT_ON_PATH; "
    'for __tb_d in /usr/bin/docker /usr/local/bin/docker /snap/bin/docker /opt/bin/docker "$HOME/bin/docker" '
    '"$HOME/.local/bin/docker"; do [ -x "$__tb_d" ] && echo "found $__tb_d"; done; '
    "__tb_l=$(\"${SHELL:-sh}\" -lc 'command -v docker' </dev/null 2>/dev/null | tail -n 1); "
    'case "$__tb_l" in /*) echo "login $__tb_l";; esac; fi')


def docker_elsewhere(section: remote.Section | None) -> str | None:
    """The path of a docker that a login shell or a usual place has, when the
    non-interactive PATH has none (the ``docker_path`` section); else None."""
    if section is None or "TAO_DOCKER_NOT_ON_PATH" not in section.output:
        return None
    lines = section.output.splitlines()
    found = [line.split(" ", 1)[1].strip() for prefix in ("login /", "found /")   # the login shell's first
             for line in lines if line.startswith(prefix)]
    return found[0] if found else None


def _free_space(path_expr: str) -> str:
    """Print the nearest existing directory of ``path_expr``, then ``df -P -B1`` of it."""
    return (f'__tb_p={path_expr}; while [ ! -e "$__tb_p" ] && [ "$__tb_p" != / ]; do '
            '__tb_p=$(dirname "$__tb_p"); done; printf \'%s\\n\' "$__tb_p"; df -P -B1 "$__tb_p"')


def _tail(section: remote.Section | None, limit: int = 300) -> str:
    return "no answer" if section is None else redact.tail(section.output, limit)


def check_docker(report: Report, answers: Answers) -> Check:
    """``docker``: ``docker info`` answers; its server version and runtimes."""
    sec = answers.get("docker")
    t = answers.elapsed_s
    if sec is not None and sec.exit_code == 127:
        where = docker_elsewhere(answers.get("docker_path"))
        if where:
            fix = CODES["DOCKER_NOT_ON_PATH"].fix.replace("NAME", answers.instance).replace("DOCKER_PATH", where)
            return report.fail("docker", "DOCKER_NOT_ON_PATH", f"docker is installed at {where} but not on the "
                               "PATH of non-interactive ssh shells, which brev exec uses (`docker`: command not "
                               "found)", fix, elapsed_s=t, docker_path=where)
        return report.fail("docker", "DOCKER_NOT_FOUND", f"docker: command not found ({_tail(sec)})", elapsed_s=t)
    info = _json_line(sec.output) if sec is not None else None
    info = info if isinstance(info, dict) else {}
    if sec is None or sec.exit_code != 0 or info.get("ServerErrors"):
        why = "; ".join(map(str, info.get("ServerErrors") or [])) or _tail(sec)
        code = docker_state.docker_error_code(why, "DOCKER_DAEMON_DOWN")
        return report.fail("docker", code, f"the Docker daemon does not answer: {why}", elapsed_s=t)
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    return report.passed("docker", f"Docker {info.get('ServerVersion', '?')}", elapsed_s=t,
                         server_version=info.get("ServerVersion"), docker_root_dir=info.get("DockerRootDir"),
                         runtimes=runtimes)


def _json_line(text: str):
    """The last line of ``text`` that parses as JSON (docker prints warnings around it)."""
    for line in reversed(text.strip().splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return None


def check_gpu(report: Report, answers: Answers) -> None:
    """``gpu``: nvidia-smi on the host lists the GPUs (count, model, memory, driver).
    Warns when Docker lists no ``nvidia`` runtime (``--gpu-smoke`` proves it)."""
    sec, t = answers.get("gpu"), answers.elapsed_s
    lines = sec.output.strip().splitlines() if sec and sec.exit_code == 0 else []
    rows = [[cell.strip() for cell in line.split(",")] for line in lines if line.count(",") >= 2]
    if not rows:
        code = docker_state.docker_error_code(_tail(sec), "GPU_NOT_FOUND")   # "couldn't communicate with the driver"
        code = code if code in ("GPU_DRIVER_NOT_LOADED", "GPU_UNHEALTHY") else "GPU_NOT_FOUND"
        report.fail("gpu", code, f"nvidia-smi lists no GPU: {_tail(sec)}", _fix(code, answers.instance),
                    elapsed_s=t)
        return
    models = [r[0] for r in rows]
    data = {"count": len(rows), "models": models, "memory": rows[0][1], "driver_version": rows[0][2]}
    detail = f"{len(rows)} x {models[0]} ({rows[0][1]}), driver {rows[0][2]}"
    docker = answers.get("docker")
    info = _json_line(docker.output) if docker and docker.exit_code == 0 else None
    if isinstance(info, dict) and "nvidia" not in (info.get("Runtimes") or {}):
        report.warn("gpu", detail + "; Docker lists no 'nvidia' runtime",
                    "Run preflight.py with --gpu-smoke to prove containers get the GPU; if it fails: "
                    + CODES["NVIDIA_RUNTIME_MISSING"].fix, elapsed_s=t, **data)
        return
    report.passed("gpu", detail, elapsed_s=t, **data)


def image_facts(answers: Answers, image: str) -> ImageFacts:
    """Presence and local size (``docker image inspect``); the size a pull needs:
    registry layers (compressed) x EXTRACT_FACTOR, else the local size, else
    DEFAULT_IMAGE_BYTES."""
    facts = ImageFacts(image)
    sec = answers.get("image")
    if sec is not None and sec.exit_code == 0:
        facts.present = True
        last = (sec.output.strip().splitlines() or [""])[-1]
        facts.local_bytes = int(last) if last.isdigit() else None
    manifest = answers.get("manifest")
    registry = registry_bytes(manifest.output) if manifest and manifest.exit_code == 0 else None
    if registry:
        facts.size_bytes, facts.size_source = registry * EXTRACT_FACTOR, "registry"
    elif facts.local_bytes:
        facts.size_bytes, facts.size_source = facts.local_bytes, "local"
    return facts


def registry_bytes(manifest_text: str) -> int | None:
    """Sum of the layer sizes in ``docker manifest inspect`` output (a schema-2
    or OCI image manifest lists ``layers``; verbose output nests it under
    ``SchemaV2Manifest``/``OCIManifest``); None for a manifest list/index."""
    text = manifest_text.strip()
    try:
        data = json.loads(text[text.index("{"):] if "{" in text else text)
    except (ValueError, json.JSONDecodeError):
        return None
    for key in ("SchemaV2Manifest", "OCIManifest"):
        if isinstance(data, dict) and isinstance(data.get(key), dict):
            data = data[key]
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        return None
    return sum(int(layer.get("size") or 0) for layer in layers if isinstance(layer, dict)) or None


def _df(sec: remote.Section | None) -> dict | None:
    """``{"path", "free_bytes", "filesystem", "mount"}`` from a _free_space section."""
    if sec is None or sec.exit_code != 0:
        return None
    lines = sec.output.strip().splitlines()
    cols = lines[-1].split() if len(lines) >= 3 else []
    if len(cols) < 6 or not cols[3].isdigit():
        return None
    return {"path": lines[0], "free_bytes": int(cols[3]), "filesystem": cols[0], "mount": " ".join(cols[5:])}


def check_disk(report: Report, answers: Answers, facts: ImageFacts | None, results_root: str) -> Check:
    """``disk``: free space where Docker stores images and under the results
    root. Fails when a missing image will not fit; warns when less than
    DISK_HEADROOM_BYTES would stay free for results."""
    t = answers.elapsed_s
    docker, results = _df(answers.get("disk_docker")), _df(answers.get("disk_results"))
    need = facts.size_bytes if facts and not facts.present else 0
    data = {"docker_root": docker, "results_root": results and dict(results, root=results_root),
            "image_bytes": facts and facts.size_bytes, "image_size_source": facts and facts.size_source,
            "need_bytes": need}
    if docker is None or results is None:
        sec = answers.get("disk_docker") if docker is None else answers.get("disk_results")
        return report.warn("disk", f"could not read free space: {_tail(sec)}",
                           "Check the disk by hand: brev exec NAME \"df -h\".", elapsed_s=t, **data)
    if docker["free_bytes"] < need:
        return report.fail("disk", "DISK_FULL", f"{_gib(docker['free_bytes'])} free at {docker['path']} "
                           f"(Docker images) but {facts.image} needs ~{_gib(need)} ({facts.size_source} size)",
                           elapsed_s=t, **data)
    same_fs = (docker["filesystem"], docker["mount"]) == (results["filesystem"], results["mount"])
    left = results["free_bytes"] - (need if same_fs else 0)
    detail = (f"{_gib(docker['free_bytes'])} free for Docker images, {_gib(results['free_bytes'])} for "
              f"results ({results_root})" + (f"; the image needs ~{_gib(need)}" if need else ""))
    if left < DISK_HEADROOM_BYTES:
        return report.warn("disk", f"{detail}; only {_gib(left)} would stay free for results",
                           f"Keep at least {_gib(DISK_HEADROOM_BYTES)} free for results and checkpoints: "
                           + CODES["DISK_FULL"].fix, elapsed_s=t, **data)
    return report.passed("disk", detail, elapsed_s=t, **data)


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


def check_ngc(report: Report, answers: Answers, key: NgcKey, present: bool) -> Check:
    """``ngc_auth`` for nvcr.io images: AUTH_OK / NOT_AUTHENTICATED / NOT_ENTITLED.

    Required only when the image still has to be pulled (a warning otherwise).
    When the key file never reached the instance, that copy error is the cause.
    """
    login = answers.get("ngc_login")
    status, code, detail = classify_ngc(login, answers.get("manifest"), key_set=key.set)
    fix = CODES[code].fix if code else None
    if code and key.error:
        code, fix = key.error.code, key.error.fix
        detail += f" ({key.error.message})"
    data = {"status": status, "registry": credentials.NGC_REGISTRY, "key_from_env": key.set,
            "logged_in_now": login is not None and login.exit_code == 0}
    t = answers.elapsed_s
    if code is None:
        return report.passed("ngc_auth", f"{status}: {detail}", elapsed_s=t, **data)
    if present:
        return report.warn("ngc_auth", f"{status}: {detail} (the image is already on the instance: no pull needed)",
                           fix, elapsed_s=t, code=code, **data)
    return report.fail("ngc_auth", code, f"{status}: {detail}", fix, elapsed_s=t, **data)


def classify_ngc(login: remote.Section | None, manifest: remote.Section | None, *,
                 key_set: bool) -> tuple[str, str | None, str]:
    """(status, error code or None, detail) from the login and manifest sections.

    Rule (TAO skill bank contract): ``docker manifest inspect`` failing before
    any successful login = NOT_AUTHENTICATED; after a successful login =
    NOT_ENTITLED. Without NGC_KEY, a manifest that answers means the instance
    is already logged in (or the image is public): AUTH_OK.
    """
    logged_in = login is not None and login.exit_code == 0
    if login is not None and (credentials.NGC_KEY_FILE_EMPTY in login.output or NON_TTY_LOGIN in login.output):
        return ("UNKNOWN", "NGC_KEY_NOT_DELIVERED",
                f"the NGC key file reached the instance empty, so no key was sent to nvcr.io: {_tail(login)}")
    if login is not None and not logged_in and credentials.NGC_KEY_FILE_MISSING not in login.output:
        code = docker_state.registry_error_code(login.output, credentials.NGC_REGISTRY,
                                                default="NGC_NOT_AUTHENTICATED")
        if code != "NGC_NOT_AUTHENTICATED":
            return "UNKNOWN", code, f"cannot log in: {_tail(login)}"
        return "NOT_AUTHENTICATED", code, f"nvcr.io refused NGC_KEY: {_tail(login)}"
    if logged_in:
        how = "logged in with NGC_KEY"
    elif login is not None:
        how = "the NGC key file was not found where docker runs (an earlier run of this command used it)"
    elif key_set:
        how = "NGC_KEY did not reach the instance (brev copy failed)"
    else:
        how = "no NGC_KEY set; using the instance's earlier login"
    if manifest is not None and manifest.exit_code == 0:
        return "AUTH_OK", None, f"{how}; docker manifest inspect answers"
    text = _tail(manifest)
    code = docker_state.registry_error_code(text, credentials.NGC_REGISTRY, logged_in=logged_in)
    if code == "NGC_NOT_ENTITLED":
        return "NOT_ENTITLED", code, f"{how}, but the registry refuses the image: {text}"
    if code == "NGC_NOT_AUTHENTICATED":
        return "NOT_AUTHENTICATED", code, f"{how}; the registry asks for a login: {text}"
    if code == "IMAGE_NOT_FOUND" or NO_MANIFEST in text.lower():
        if logged_in:   # the key was accepted; the image check reports the missing image
            return "AUTH_OK", None, f"{how}; the registry has no such image: {text}"
        return "UNKNOWN", "IMAGE_NOT_FOUND", f"{how}; the registry has no such image: {text}"
    return "UNKNOWN", code, f"{how}; docker manifest inspect failed: {text}"


def check_image(report: Report, ctx: Context, req: PreflightRequest, answers: Answers, facts: ImageFacts,
                blocker: Check | None, logged_in: bool = False) -> None:
    """``image``: on the instance (``docker image inspect``); with ``--pull`` and
    no failed docker/disk/ngc_auth check (``blocker``), pulled in its own round trip."""
    t, image = answers.elapsed_s, facts.image
    if facts.present:
        report.passed("image", f"{image} is on the instance", elapsed_s=t, image=image, present=True,
                      size_bytes=facts.local_bytes, pulled=False)
        return
    if blocker is not None and blocker.name == "docker":
        report.fail("image", blocker.code, f"cannot look for {image}: the docker check failed", blocker.fix,
                    elapsed_s=t, image=image)
        return
    manifest = answers.get("manifest")
    if manifest is not None and manifest.exit_code != 0 and (
            NO_MANIFEST in _tail(manifest).lower() or docker_state.docker_error_code(_tail(manifest)) == "IMAGE_NOT_FOUND"):
        report.fail("image", "IMAGE_NOT_FOUND", f"{image} is not on the instance and the registry has no such "
                    f"image: {_tail(manifest)}", elapsed_s=t, image=image, present=False)
        return
    if not req.pull:
        report.fail("image", "IMAGE_NOT_PULLED", f"{image} is not on the instance",
                    f"Pull it before the GPU run: preflight.py --instance {req.instance} --image {req.image} --pull",
                    elapsed_s=t, image=image, present=False)
        return
    if blocker is not None:
        report.fail("image", blocker.code, f"{image} is not on the instance; not pulled because the "
                    f"{blocker.name} check failed", blocker.fix, elapsed_s=t, image=image, present=False)
        return
    pull_image(report, ctx, req, image, logged_in)


def pull_image(report: Report, ctx: Context, req: PreflightRequest, image: str, logged_in: bool = False) -> None:
    """``docker pull IMAGE`` as its own brev exec (PULL_TIMEOUT_S); failures mapped to codes
    (:func:`tao_brev.docker_state.registry_error_code`; ``logged_in``: the ngc_auth check
    logged in to this image's registry, so a refusal means not entitled)."""
    say(f"preflight: pulling {image} on {req.instance} (up to {PULL_TIMEOUT_S:.0f} s)")
    started = ctx.clock()
    try:
        result = report.count("pull", ctx.brev.exec, req.instance, f"docker pull {shlex.quote(image)}",
                              timeout=PULL_TIMEOUT_S, host=req.host)
    except TransportError as exc:
        report.error("image", exc, image=image, present=False, pulled=False)
        return
    took = ctx.clock() - started
    data = {"image": image, "present": result.ok, "pulled": result.ok, "pull_s": round(took, 3)}
    if result.ok:
        cost.note_pull(ctx, req.instance, image, took)   # the job's cost facts report it (image_pull_s)
        report.passed("image", f"{image} pulled in {took:.1f} s", elapsed_s=took, **data)
        return
    text = redact.tail(result.stdout + "\n" + result.stderr, 400)
    code = docker_state.registry_error_code(text, bank.image_registry(image), logged_in=logged_in)
    report.fail("image", code, f"docker pull {image} failed after {took:.1f} s: {text}",
                _fix(code, req.instance), elapsed_s=took, **data)


def check_gpu_smoke(report: Report, ctx: Context, req: PreflightRequest, docker: Check) -> None:
    """``gpu_smoke``: ``docker run --rm --gpus all <small image> nvidia-smi -L``
    proves the NVIDIA Container Toolkit gives containers the GPUs. Its own
    round trip (the small image may be pulled)."""
    image = gpu_smoke_image(ctx.env)
    if not docker.ok:
        report.fail("gpu_smoke", docker.code, "not run: the docker check failed", docker.fix, image=image)
        return
    started = ctx.clock()
    command = f"docker run --rm --gpus all {shlex.quote(image)} nvidia-smi -L"
    try:
        result = report.count("gpu_smoke", ctx.brev.exec, req.instance, command, timeout=SMOKE_TIMEOUT_S,
                              host=req.host)
    except TransportError as exc:
        report.error("gpu_smoke", exc, image=image)
        return
    took = ctx.clock() - started
    gpus = [line.strip() for line in result.stdout.splitlines() if line.startswith("GPU ")]
    if result.ok and gpus:
        report.passed("gpu_smoke", f"a container sees {len(gpus)} GPU(s) ({image})", elapsed_s=took,
                      image=image, gpus=gpus)
        return
    text = redact.tail(result.stdout + "\n" + result.stderr, 400)
    code = (docker_state.registry_error_code(text, bank.image_registry(image), default="GPU_NOT_FOUND")
            if result.exit_code == 125 or PULL_FAILED.search(text) else docker_state.docker_error_code(text, "GPU_NOT_FOUND"))
    report.fail("gpu_smoke", code, f"`{command}` failed (exit {result.exit_code}): {text}",
                _fix(code, req.instance), elapsed_s=took, image=image)


def _fix(code: str, instance: str) -> str:
    """The default fix of ``code`` for this instance (its NAME placeholder filled in)."""
    return CODES[code].fix.replace("NAME", instance)


def gpu_smoke_image(env: dict) -> str:
    """``images.gpu_smoke`` from versions.yaml, else GPU_SMOKE_DEFAULT (a bank without the key)."""
    try:
        return bank.resolve_image(GPU_SMOKE_KEY, env)["image"]
    except TaoBrevError:
        return GPU_SMOKE_DEFAULT
