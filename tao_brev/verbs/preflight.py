"""preflight: everything that can fail before GPU money is spent, in one answer.

Each check is ``{"name", "ok", "detail", "fix", "elapsed_s"}`` with a stable
name. Checks that make later ones impossible fail fast (no brev, no login,
instance unreachable); otherwise every check is reported, so one run tells
the whole truth. ``"ok"`` is true only when every required check passed;
warnings (``"warning": true``) do not fail it.

Round trips once the instance is exec-ready: the readiness probe (1) and one
combined script for docker, GPU, disk and image (1); the pull, when asked,
is its own step.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from .. import bank, remote
from ..cli import Context, say
from ..errors import TaoBrevError, TransportError

PROBE_INTERVAL_S = 5.0
DISK_WARN_BYTES = 50 * 1024**3       # warn below 50 GiB free where images live
DEFAULT_IMAGE_BYTES = 20 * 1024**3   # a TAO pyt image is ~20 GB when its size is unknown


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""
    fix: str | None = None
    elapsed_s: float = 0.0
    warning: bool = False
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"name": self.name, "ok": self.ok, "detail": self.detail, "fix": self.fix,
               "elapsed_s": round(self.elapsed_s, 3)}
        if self.warning:
            out["warning"] = True
        if self.data:
            out["data"] = self.data
        return out


class Checks:
    """Collects checks, timing each from the previous one."""

    def __init__(self, clock):
        self.clock = clock
        self.items: list[Check] = []
        self._mark = clock()

    def add(self, check: Check) -> Check:
        now = self.clock()
        check.elapsed_s = check.elapsed_s or (now - self._mark)
        self._mark = now
        self.items.append(check)
        say(f"preflight {check.name}: {'ok' if check.ok else ('WARN' if check.warning else 'FAIL')} {check.detail}")
        return check

    def fail(self, name: str, detail: str, fix: str, **data) -> Check:
        return self.add(Check(name, False, detail, fix, data=data))

    def passed(self, name: str, detail: str, **data) -> Check:
        return self.add(Check(name, True, detail, data=data))

    @property
    def ok(self) -> bool:
        return all(c.ok or c.warning for c in self.items)


def _error_check(checks: Checks, name: str, exc: TaoBrevError) -> Check:
    return checks.fail(name, exc.message, exc.fix, code=exc.code)


def wait_exec_ready(ctx: Context, instance: str, budget_s: float, host: bool = False) -> float:
    """Poll the two-word probe ``echo ok`` until its output is exactly ``ok``.

    A single token such as ``true`` would land in brev's command slot by
    accident even when real commands are misquoted, so the probe is two words
    and its output is checked (brev-cli exec.go; seed). Returns the seconds it
    took; raises NOT_EXEC_READY when ``budget_s`` runs out.
    """
    started = ctx.clock()
    last = "no attempt"
    while True:
        remaining = budget_s - (ctx.clock() - started)
        try:
            result = ctx.brev.exec(instance, "echo ok", timeout=max(min(remaining, 120.0), 5.0), host=host)
            if result.ok and result.stdout.strip() == "ok":
                return ctx.clock() - started
            last = f"probe printed {result.stdout.strip()[:80]!r} (exit {result.exit_code})"
        except TransportError as exc:
            last = exc.message
        if ctx.clock() - started + PROBE_INTERVAL_S > budget_s:
            raise TaoBrevError("NOT_EXEC_READY", f"{instance} not exec-ready after {ctx.clock() - started:.0f} s: {last}")
        ctx.sleep(PROBE_INTERVAL_S)


def instance_script(token: str, image: str | None) -> str:
    """The combined on-instance checks: docker, gpu, disk, image (one round trip)."""
    parts = [
        remote.section(token, "docker", "docker info --format '{{json .}}'"),
        remote.section(token, "gpu", "nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader"),
        remote.section(token, "disk", "df -P -B1 \"$(docker info --format '{{.DockerRootDir}}' 2>/dev/null || echo /)\" "
                                      "\"$HOME\""),
    ]
    if image:
        parts.append(remote.section(token, "image", f"docker image inspect --format '{{{{.Size}}}}' {shlex.quote(image)}"))
    return "\n".join(parts)


def preflight(ctx: Context, instance: str, image: str | None = None, exec_timeout: float | None = None,
              host: bool = False) -> tuple[dict, int]:
    checks = Checks(ctx.clock)
    resolved = None
    if image:
        try:
            resolved = bank.resolve_image(image, ctx.env)
            checks.passed("image_ref", f"{image} -> {resolved['image']}", **resolved)
        except TaoBrevError as exc:
            _error_check(checks, "image_ref", exc)

    def answer(code: int | None = None):
        ok = checks.ok
        out = {"ok": ok, "instance": instance, "image": resolved["image"] if resolved else None,
               "checks": [c.to_json() for c in checks.items], "exec_calls": ctx.brev.exec_calls}
        if not ok:
            failed = [c.name for c in checks.items if not c.ok and not c.warning]
            out["error"] = TaoBrevError("PREFLIGHT_FAILED", f"failed checks: {', '.join(failed)}").to_json()
        return out, (0 if ok else (code or 1))

    try:
        ctx.brev.path()
        checks.passed("brev_cli", f"brev at {ctx.brev.path()}")
    except TaoBrevError as exc:
        _error_check(checks, "brev_cli", exc)
        return answer(3)

    try:
        entry = ctx.brev.instance(instance)
        checks.passed("brev_auth", "logged in" + (" (after a headless re-login)" if ctx.brev.logins else ""))
    except TaoBrevError as exc:
        _error_check(checks, "brev_auth", exc)
        return answer(3)

    if entry is None:
        checks.fail("instance", f"{instance} is not in `brev ls --json`",
                    "Check the name with `brev ls`; provision it with the official Brev agent skill (we never provision).")
        return answer(3)
    status = str(entry.get("status", "")).upper()
    facts = {k: entry.get(k) for k in ("status", "shell_status", "gpu", "instance_type")}
    if status != "RUNNING":
        checks.fail("instance", f"{instance} is {status}", f"Start it: brev start {instance} (then rerun preflight)", **facts)
        return answer(3)
    checks.passed("instance", f"{instance} RUNNING, shell {entry.get('shell_status')}, gpu {entry.get('gpu')}", **facts)

    budget = exec_timeout or (ctx.brev.timeout_for(instance))
    try:
        took = wait_exec_ready(ctx, instance, budget, host)
        checks.add(Check("exec_ready", True, f"`echo ok` answered after {took:.1f} s", elapsed_s=took))
    except TaoBrevError as exc:
        _error_check(checks, "exec_ready", exc)
        return answer(3)

    token = remote.new_token()
    try:
        result = ctx.brev.exec(instance, instance_script(token, resolved["image"] if resolved else None),
                               idempotent=True, host=host)
    except TransportError as exc:
        _error_check(checks, "docker", exc)
        return answer(3)
    sections = remote.parse_sections(result.stdout, token)
    _docker_check(checks, sections.get("docker"))
    _gpu_check(checks, sections.get("gpu"))
    image_size = _image_check(checks, sections.get("image"), resolved) if resolved else None
    _disk_check(checks, sections.get("disk"), image_size)
    return answer()


def _docker_check(checks: Checks, sec) -> None:
    if sec is None or sec.exit_code != 0:
        detail = sec.output.strip()[-300:] if sec else "no answer"
        from ..errors import CODES

        checks.fail("docker", f"docker daemon does not answer: {detail}", CODES["DOCKER_DAEMON_DOWN"].fix)
        return
    try:
        info = json.loads(sec.output.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        info = {}
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    checks.passed("docker", f"Docker {info.get('ServerVersion', '?')}", server_version=info.get("ServerVersion"),
                  runtimes=runtimes, docker_root_dir=info.get("DockerRootDir"))


def _gpu_check(checks: Checks, sec) -> None:
    if sec is None or sec.exit_code != 0:
        checks.fail("gpu", "nvidia-smi failed: " + (sec.output.strip()[-300:] if sec else "no answer"),
                    "Use a Brev GPU instance with the NVIDIA driver loaded (nvidia-smi must work on the host).")
        return
    gpus = [line.split(",")[0].strip() for line in sec.output.strip().splitlines() if line.strip()]
    checks.passed("gpu", f"{len(gpus)} x {gpus[0] if gpus else '?'}", count=len(gpus), models=gpus)


def _image_check(checks: Checks, sec, resolved) -> int | None:
    image = resolved["image"]
    if sec is not None and sec.exit_code == 0:
        try:
            size = int(sec.output.strip().splitlines()[-1])
        except (ValueError, IndexError):
            size = None
        checks.passed("image", f"{image} is on the instance", size_bytes=size)
        return size
    checks.fail("image", f"{image} is not on the instance",
                f"Pull it before the GPU run: preflight.py --instance NAME --image {image} --pull")
    return None


def _disk_check(checks: Checks, sec, image_size: int | None) -> None:
    if sec is None or sec.exit_code != 0:
        checks.add(Check("disk", False, "df failed: " + (sec.output.strip()[-200:] if sec else "no answer"),
                         "Check the instance disk by hand (df -h).", warning=True))
        return
    free = {}
    for line in sec.output.strip().splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 6 and cols[3].isdigit():
            free[cols[5]] = int(cols[3])
    least = min(free.values()) if free else 0
    need = image_size or DEFAULT_IMAGE_BYTES
    if least < DISK_WARN_BYTES or (image_size is None and least < need):
        checks.add(Check("disk", False, f"only {least / 1024**3:.1f} GiB free (need ~{need / 1024**3:.0f} GiB)",
                         "Free space (docker image prune -a) or use an instance with a larger disk.",
                         warning=least >= need, data={"free_bytes": free}))
        return
    checks.passed("disk", f"{least / 1024**3:.0f} GiB free", free_bytes=free)
