"""``ngc_auth`` for nvcr.io images: NGC_KEY travels in a 0600 file (``brev copy``),
``docker login --password-stdin`` reads it inside the combined round trip, and
``docker manifest inspect`` then says AUTH_OK / NOT_AUTHENTICATED / NOT_ENTITLED
(the rule of the TAO skill bank contract)."""

from __future__ import annotations

from ... import credentials, docker_state, remote
from ...errors import CODES, TaoBrevError
from ...vocabulary import Word
from .report import Check, Context, PreflightRequest, Report, say, section_tail
from .units import NO_MANIFEST, Answers, NgcKey, Plan, RemoteCheck, Snippet

# docker login --password-stdin with an empty stdin (docker/cli cli/command/registry/login.go)
NON_TTY_LOGIN = "Cannot perform an interactive login from a non TTY device"



class NgcStatus(Word):
    """The NGC login's outcome (TAO skill bank contract), ``data.status`` of ``ngc_auth``."""

    AUTH_OK = "AUTH_OK"
    NOT_AUTHENTICATED = "NOT_AUTHENTICATED"
    NOT_ENTITLED = "NOT_ENTITLED"
    UNKNOWN = "UNKNOWN"


NGC_LOGIN = Snippet("ngc_login", lambda plan: (credentials.ngc_login_command(plan.key.file)
                                               if plan.image and plan.key.file else None))


def push_ngc_key(report: Report, ctx: Context, req: PreflightRequest) -> NgcKey:
    """NGC_KEY -> a 0600 file on the instance by ``brev copy`` (counted in round_trips)."""
    if not credentials.ngc_key(ctx.env):
        return NgcKey()
    report.round_trips["copy"] += 1
    try:
        return NgcKey(file=credentials.push_ngc_key(ctx.brev, req.instance, ctx.env))
    except TaoBrevError as exc:
        say(f"preflight: could not copy the NGC key file: {exc.message}")
        return NgcKey(error=exc)


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


def _login_refused(login: remote.Section | None) -> tuple[NgcStatus, str | None, str] | None:
    """The answer when the login itself failed (an empty key file, a refused key, no registry)."""
    if login is not None and (credentials.NGC_KEY_FILE_EMPTY in login.output or NON_TTY_LOGIN in login.output):
        return (NgcStatus.UNKNOWN, "NGC_KEY_NOT_DELIVERED",
                f"the NGC key file reached the instance empty, so no key was sent to nvcr.io: {section_tail(login)}")
    if login is not None and login.exit_code != 0 and credentials.NGC_KEY_FILE_MISSING not in login.output:
        code = docker_state.registry_error_code(login.output, credentials.NGC_REGISTRY,
                                                default="NGC_NOT_AUTHENTICATED")
        if code != "NGC_NOT_AUTHENTICATED":
            return NgcStatus.UNKNOWN, code, f"cannot log in: {section_tail(login)}"
        return NgcStatus.NOT_AUTHENTICATED, code, f"nvcr.io refused NGC_KEY: {section_tail(login)}"
    return None


def _how(login: remote.Section | None, key_set: bool) -> str:
    """How the instance came to talk to nvcr.io (for the detail)."""
    if login is not None and login.exit_code == 0:
        return "logged in with NGC_KEY"
    if login is not None:
        return "the NGC key file was not found where docker runs (an earlier run of this command used it)"
    if key_set:
        return "NGC_KEY did not reach the instance (brev copy failed)"
    return "no NGC_KEY set; using the instance's earlier login"


def classify_ngc(login: remote.Section | None, manifest: remote.Section | None, *,
                 key_set: bool) -> tuple[NgcStatus, str | None, str]:
    """(status, error code or None, detail) from the login and manifest sections.

    Rule (TAO skill bank contract): ``docker manifest inspect`` failing before
    any successful login = NOT_AUTHENTICATED; after a successful login =
    NOT_ENTITLED. Without NGC_KEY, a manifest that answers means the instance
    is already logged in (or the image is public): AUTH_OK.
    """
    refused = _login_refused(login)
    if refused is not None:
        return refused
    logged_in, how = login is not None and login.exit_code == 0, _how(login, key_set)
    if manifest is not None and manifest.exit_code == 0:
        return NgcStatus.AUTH_OK, None, f"{how}; docker manifest inspect answers"
    text = section_tail(manifest)
    code = docker_state.registry_error_code(text, credentials.NGC_REGISTRY, logged_in=logged_in)
    if code == "NGC_NOT_ENTITLED":
        return NgcStatus.NOT_ENTITLED, code, f"{how}, but the registry refuses the image: {text}"
    if code == "NGC_NOT_AUTHENTICATED":
        return NgcStatus.NOT_AUTHENTICATED, code, f"{how}; the registry asks for a login: {text}"
    if code == "IMAGE_NOT_FOUND" or NO_MANIFEST in text.lower():
        if logged_in:   # the key was accepted; the image check reports the missing image
            return NgcStatus.AUTH_OK, None, f"{how}; the registry has no such image: {text}"
        return NgcStatus.UNKNOWN, "IMAGE_NOT_FOUND", f"{how}; the registry has no such image: {text}"
    return NgcStatus.UNKNOWN, code, f"{how}; docker manifest inspect failed: {text}"


def _read(report: Report, answers: Answers, plan: Plan) -> Check:
    assert plan.facts is not None   # ngc_auth applies to an nvcr.io --image, whose facts the plan holds
    return check_ngc(report, answers, plan.key, plan.facts.present)


NGC_CHECK = RemoteCheck("ngc_auth", ("ngc_login", "manifest", "image"), _read, applies=lambda plan: plan.ngc)
