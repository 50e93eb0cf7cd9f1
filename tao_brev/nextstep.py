"""``next``: the exact command an answer tells its reader to run next.

Every answer of preflight.py, submit.py, poll_status.py and teardown.py carries
``"next"`` (schema: ``references/schemas/common.schema.json#/$defs/next``):

* a string: ONE complete shell command, runnable as is from any directory - the
  absolute path of the script of the bundle that answered (derived from this
  file, so an installed copy names itself), real values (the job id, the
  instance), every word quoted for a POSIX shell; never a placeholder;
* ``null``: no command fits. ``next_note`` then says why: the lifecycle is
  finished, or a person must act first (export a credential, log in to brev in
  a terminal, choose the job's spec); on a failure the error's ``fix`` says how.

The bank-compatible tools (tao_job_record.py, redact_secrets.py) keep the TAO
skill bank's formats and carry no ``next``.

The functions here are pure: (answer, exit code, argv of this run) -> the
answer's ``next`` / ``next_note``; ``cli.run`` applies the script's one to every
answer, failures included (a verb may set ``next`` itself; it is kept).
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Callable, TypeVar, Union

from .errors import CODES
from .model.answer_types import PollAnswer, PreflightAnswer, SubmitAnswer, TeardownAnswer
from .next_words import WAIT_INTERVAL_S, WAIT_TIMEOUT_MAX_S, WAIT_TIMEOUT_S, covering_timeout, eta_of  # noqa: F401
from .next_words import flag as _flag, kept as _kept, with_timeout as _with_timeout, without as _without
from .vocabulary import TERMINAL_STATES as TERMINAL, InstanceStatus, JobState, LaunchState, StorageTier

BUNDLE_ROOT = Path(__file__).absolute().parent.parent
SCRIPTS_DIR = BUNDLE_ROOT / "scripts"
DIAGNOSE_LINES = 50

# a person must act before any command helps (the error's fix says what)
HUMAN_ACTION = {"BREV_NOT_FOUND", "BREV_NOT_LOGGED_IN", "BREV_LOGIN_FAILED", "MISSING_CREDENTIAL",
                "BREV_NVIDIA_LOGIN_REQUIRED", "BREV_API_KEY_REJECTED", "INSTANCE_AMBIGUOUS", "S3_AUTH_FAILED",
                "SSH_KEY_REJECTED", "SECRET_IN_COMMAND", "SECRET_IN_IDENTIFIER", "SECRET_TOO_SHORT",
                "BUNDLE_CREDENTIAL_ENV", "SPEC_NOT_FOUND", "BAD_SPEC", "BAD_NAME", "VERSIONS_FILE",
                "UNKNOWN_VERSIONS_KEY", "BAD_STATE_DIR", "INTERNAL_ERROR"}
RECOVERY_STOPS = ("RECOVERY_LIMIT", "RECOVERY_BUDGET_EXHAUSTED", "RECOVERY_NOT_POSSIBLE")   # verbs/recover.py
# the backend did not answer: the same command again is safe for these verbs
RETRY_SAFE = ("preflight.py", "poll_status.py", "teardown.py")
ENV_CODES = ("PYTHON_ENV_MISSING", "DEPENDENCIES_MISSING")
FINISHED = "nothing left to run: the job is closed"
VerbAnswer = Union[PreflightAnswer, SubmitAnswer, PollAnswer, TeardownAnswer]   # Union: evaluated, on 3.9 too
A = TypeVar("A", PreflightAnswer, SubmitAnswer, PollAnswer, TeardownAnswer)


def command(script: str, *args: object) -> str:
    """``script`` (a name in scripts/) of this bundle with ``args``, as one quoted shell command."""
    return shlex.join([str(SCRIPTS_DIR / script), *(str(a) for a in args)])


def install_command() -> str:
    """The command that (re)creates this bundle's environment (scripts/_bootstrap.py says the same)."""
    return shlex.join(["bash", str(BUNDLE_ROOT / "install.sh"), "--local"])


def rerun(script: str, argv: list[str]) -> str:
    """This run's own command again, runnable from any directory: a local file it names
    (``--spec``; the local inputs of storage tiers B/C) by its absolute path."""
    return command(script, *_absolute_paths(argv))


def _absolute_paths(argv: list[str]) -> list[str]:
    local_inputs = _flag(argv, "--storage-tier") in (StorageTier.B, StorageTier.C)
    out = []
    for i, word in enumerate(argv):
        flag = argv[i - 1] if i else ""
        if flag == "--spec" and word and not os.path.isabs(word):
            word = os.path.abspath(word)
        elif flag == "--inputs" and local_inputs and "=" in word:
            source, name = word.rsplit("=", 1)
            if source and not source.startswith(("~", "/", "s3://")) and os.path.exists(source):
                word = f"{os.path.abspath(source)}={name}"
        out.append(word)
    return out


# poll_status.py flags a following poll keeps (the values the user gave this run)
POLL_KEPT = ("--interval", "--timeout", "--stall-after", "--price-per-hour")


def corrected(script: str, argv: list[str], near: dict[str, str]) -> str:
    """This run's command with each misspelt job id / instance name replaced by its closest known one
    (``did_you_mean``: ``{given: closest}``): all typos of one call corrected at once."""
    return rerun(script, [near.get(word, word) for word in argv])


def wait_command(job_id: str, argv: list[str], *extra: object, eta_s: float | None = None) -> str:
    """``poll_status.py JOB --wait --interval S --timeout S`` (this run's --interval / --timeout /
    --stall-after / --price-per-hour, else WAIT_INTERVAL_S / WAIT_TIMEOUT_S; the --timeout raised to
    cover ``eta_s``: :func:`covering_timeout`) plus ``extra``."""
    kept = _kept(argv, POLL_KEPT)
    if "--interval" not in {word.split("=", 1)[0] for word in kept}:
        kept += ["--interval", str(WAIT_INTERVAL_S)]
    kept = _with_timeout(kept, eta_s)
    return command("poll_status.py", job_id, "--wait", *kept, *extra)


def _set(answer: A, nxt: str | None, note: str | None = None) -> A:
    answer.setdefault("next", nxt)
    if answer["next"] is None and "next_note" not in answer:
        answer["next_note"] = note or ((answer.get("error") or {}).get("fix")) or FINISHED
    return answer


def common_error(script: str, argv: list[str], answer: VerbAnswer,
                 job_id: str | None = None) -> tuple[bool, str | None, str | None]:
    """(decided, next, note) for the failures every verb shares; ``decided`` False: the verb decides."""
    code = (answer.get("error") or {}).get("code")
    if code in ENV_CODES:
        return True, install_command(), None
    if code == "BAD_ARGUMENT":
        return True, command(script, "--help"), None
    if code in ("BAD_JOB_ID", "UNKNOWN_JOB", "NOT_AN_ORPHAN", "UNKNOWN_INSTANCE") \
            and isinstance(answer.get("did_you_mean"), dict) and answer["did_you_mean"]:
        return True, corrected(script, argv, answer["did_you_mean"]), None
    if code in ("BAD_JOB_ID", "UNKNOWN_JOB"):
        return True, command("tao_job_record.py", "list"), None
    if code == "INTERRUPTED":
        return True, resume(script, argv, job_id), None
    if code in HUMAN_ACTION:
        fix = (answer.get("error") or {}).get("fix") or CODES[code].fix
        first = "correct the call first" if CODES[code].exit_code == 2 else "a person must act first"
        return True, None, f"{first}: {fix}"
    if code in CODES and CODES[code].exit_code == 3 and code != "INSTANCE_DELETE_PENDING":
        if script == "submit.py":
            return True, (poll_after_submit(job_id, argv) if job_id else rerun(script, argv)), None
        return True, rerun(script, argv), None
    return False, None, None


def resume(script: str, argv: list[str], job_id: str | None) -> str:
    """The command that resumes an interrupted run: submit's job is polled (never resubmitted:
    the launch may have happened), every other verb is safe to run again as it was."""
    if script == "submit.py" and job_id:
        return poll_after_submit(job_id, argv)
    return rerun(script, argv)


def poll_after_submit(job_id: str, argv: list[str]) -> str:
    """One look at a submitted job, with the submit's --price-per-hour (poll_status.py takes it too)."""
    return command("poll_status.py", job_id, *_kept(argv, ("--price-per-hour",)))


def resume_fix(script: str, argv: list[str], job_id: str | None, state: str | None) -> str:
    """The INTERRUPTED fix of this verb (it names the resume command)."""
    again = resume(script, argv, job_id)
    if script == "submit.py" and job_id:
        return (f"Do NOT resubmit: run {again} (it adopts the container or closes the record as never "
                "launched).")
    if script == "poll_status.py" and job_id:
        known = f" (last known state {state})" if state else ""
        return f"Resume watching job {job_id}{known}: {again} - polling is safe to repeat."
    if script == "teardown.py" and job_id:
        return f"Run the same teardown again (safe to repeat; it resumes where it stopped): {again}"
    return f"Run the same command again: {again}"


# -- per verb -------------------------------------------------------------------


def preflight(answer: PreflightAnswer, code: int, argv: list[str]) -> PreflightAnswer:
    decided, nxt, note = common_error("preflight.py", argv, answer)
    if decided:
        return _set(answer, nxt, note)
    if answer.get("ok") and "--login" in argv:
        return _set(answer, None, "brev is logged in: plain brev commands work now; check an instance with "
                                  f"{command('preflight.py', '--instance', 'NAME')} (NAME: the instance)")
    if answer.get("ok"):
        fixes = [c.get("fix") or "" for c in answer.get("checks") or [] if c.get("warning")]
        extra = [flag for flag in WARNING_FLAGS if flag not in argv and any(flag in fix for fix in fixes)]
        if extra:   # a warning whose fix this preflight runs itself: that rerun is next
            return _set(answer, rerun("preflight.py", [*argv, *extra]))
        return _set(answer, None, preflight_note(answer, argv))
    code_name = (answer.get("error") or {}).get("code")
    failed = [c for c in answer.get("checks") or [] if not c.get("ok") and not c.get("warning")]
    near = next((c.get("data", {}).get("did_you_mean") for c in failed if c.get("name") == "instance"), None)
    if code_name == "UNKNOWN_INSTANCE" and near and len(near) == 1:   # one close name: the corrected call
        return _set(answer, rerun("preflight.py", [*_without(argv, "--instance"), "--instance", near[0]]))
    if code_name == "INSTANCE_NOT_RUNNING" and "--start" not in argv:
        return _set(answer, None, "the instance is not RUNNING; starting it bills: add --start to start it - "
                                  f"{rerun('preflight.py', [*argv, '--start'])}")
    if failed and all(c.get("name") == "image" for c in failed) and "--pull" not in argv:
        return _set(answer, rerun("preflight.py", [*argv, "--pull"]))
    fix = next((c.get("fix") for c in failed if c.get("fix")), None)
    return _set(answer, None, f"a failed check needs a fix first: {fix}" if fix else None)


# preflight.py flags that act on what a warning names (a missing carrier image, an unproven GPU runtime)
WARNING_FLAGS = ("--pull", "--gpu-smoke")
# preflight.py flags that submit.py takes too, with the same meaning: the submit it names keeps them
SUBMIT_KEPT = ("--instance", "--image", "--storage-tier", "--bucket", "--results-root")


def preflight_note(answer: PreflightAnswer, argv: list[str]) -> str:
    """The submit a passed preflight leads to: every value preflight checked (instance, image,
    storage tier, bucket, results root) kept; the job's own flags left to the caller. Without
    --image no image was checked, and the note says how to check (and pull) it first."""
    kept = _kept(argv, SUBMIT_KEPT)
    if "--instance" not in kept and answer.get("instance"):
        kept = ["--instance", str(answer["instance"]), *kept]
    if "--image" not in kept and answer.get("image"):
        kept += ["--image", str(answer["image"])]
    submit_cmd = command("submit.py", *kept)
    if "--image" in kept:
        return (f"every check passed: submit the job - {submit_cmd} with your job's --network-arch, --action and "
                "--spec (--help lists the rest)")
    check = rerun("preflight.py", [a for a in argv if a != "--pull"])
    return (f"every check passed, but no image was checked (no --image): check and pull the job's image first - "
            f"{check} --image IMAGE --pull; then submit the job - {submit_cmd} --image IMAGE with your job's "
            "--network-arch, --action and --spec (--help lists the rest)")


def submit(answer: SubmitAnswer, code: int, argv: list[str]) -> SubmitAnswer:
    job_id = answer.get("job_id")
    if answer.get("ok"):
        if answer.get("dry_run"):   # a STOPPED instance: the submit INSTANCE_NOT_RUNNING's fix names (--start)
            words = [a for a in argv if a != "--dry-run"]
            cut = words.index("--") if "--" in words else len(words)   # flags before the TAO overrides
            if answer.get("instance_status") == InstanceStatus.STOPPED and "--start" not in words[:cut]:
                words[cut:cut] = ["--start"]
            return _set(answer, rerun("submit.py", words))
        return _set(answer, poll_after_submit(job_id, argv) if job_id else None)
    decided, nxt, note = common_error("submit.py", argv, answer, job_id)
    if decided:
        return _set(answer, nxt, note)
    err = answer.get("error") or {}
    instance = answer.get("instance") or _flag(argv, "--instance")
    if err.get("code") == "IMAGE_NOT_PULLED" and instance and _flag(argv, "--image"):
        return _set(answer, command("preflight.py", "--instance", instance, "--image", _flag(argv, "--image"),
                                    *_kept(argv, ("--storage-tier", "--bucket", "--results-root")), "--pull"))
    if err.get("code") == "GPUS_BUSY" and answer.get("busy_job"):   # wait on the job that holds the GPUs
        return _set(answer, wait_command(answer["busy_job"], _kept(argv, ("--price-per-hour",)),
                                         eta_s=answer.get("busy_eta_s")))
    if job_id and answer.get("state") in (JobState.PENDING, JobState.RUNNING):
        return _set(answer, poll_after_submit(job_id, argv))
    return _set(answer, None)


def poll(answer: PollAnswer, code: int, argv: list[str], closed: Callable[[str], bool] = lambda job_id: False) -> PollAnswer:
    """``closed(job_id)``: a teardown already closed the job (nothing left to tear down)."""
    if "jobs" in answer and not answer.get("job_id"):
        return poll_all(answer, code, argv)
    decided, nxt, note = common_error("poll_status.py", argv, answer, answer.get("job_id"))
    if decided:
        return _set(answer, nxt, note)
    job_id, state = answer.get("job_id"), answer.get("state")
    err = (answer.get("error") or {}).get("code")
    if job_id is None:
        return _set(answer, None)
    if "teardown" in answer:   # --wait --teardown: the teardown's own next decides
        down = teardown(answer["teardown"], code, [job_id, *_kept(argv, ("--price-per-hour",))])
        return _set(answer, down.get("next"), down.get("next_note"))
    if answer.get("waited_out"):   # --timeout reached on a healthy job: the same wait, covering its ETA
        return _set(answer, rerun("poll_status.py", _with_timeout(argv, eta_of(answer))))
    if err == "WAIT_TIMEOUT":   # the same wait, its --timeout covering the ETA; the fix names that command
        again = rerun("poll_status.py", _with_timeout(argv, eta_of(answer)))
        answer["error"] = {**answer["error"], "fix": f"The last poll could not read the job: wait again - {again}"}
        return _set(answer, again)
    if err in RECOVERY_STOPS:   # --recover: the user decides (more attempts, budget, a fallback) or cleans up
        return _set(answer, None, f"the recovery stopped ({err}): {answer['error'].get('fix')} To stop here "
                                  f"instead: {command('teardown.py', job_id)}")
    if (err == "JOB_STALLED" or answer.get("stalled")) and state not in TERMINAL:
        if "--logs" not in argv:   # read what it printed last before anything else (by the same threshold)
            return _set(answer, command("poll_status.py", job_id, "--logs", DIAGNOSE_LINES, *_kept(argv, ["--stall-after"])))
        return _set(answer, None, f"job {job_id} looks stalled (a heuristic) and its logs are read: if they show "
                                  f"it hung, {command('teardown.py', job_id)} cancels it (then stall.advice's submit command continues it "
                                  "from its last checkpoint); if it is only slow, wait "
                                  f"with a larger threshold: {wait_command(job_id, _without(argv, '--stall-after'))} "
                                  "--stall-after SECONDS")
    if err in ("RESULTS_UPLOAD_FAILED", "S3_VERIFY_FAILED"):
        return _set(answer, command("poll_status.py", job_id))
    if state in TERMINAL or state == JobState.UNKNOWN:
        never_ran = answer.get("reconciled") == LaunchState.NEVER_LAUNCHED   # nothing ran: no logs to read
        if state == JobState.ERROR and answer.get("logs") is None and "--logs" not in argv and not never_ran:
            return _set(answer, command("poll_status.py", job_id, "--logs", DIAGNOSE_LINES))
        if closed(job_id) or answer.get("closed_at"):
            return _set(answer, None, FINISHED + (" (the refusal closed it; its error's fix says what to correct)"
                                                  if never_ran else " (teardown ran)"))
        return _set(answer, stop_started(answer, job_id) or command("teardown.py", job_id))
    if state in (JobState.PENDING, JobState.RUNNING):
        return _set(answer, wait_command(job_id, argv, eta_s=eta_of(answer)))
    return _set(answer, None)


def stop_started(answer: PollAnswer | TeardownAnswer, job_id: str) -> str | None:
    """``teardown.py JOB --stop-instance`` when the bundle itself started the job's instance
    (``bundle_started_instance``: it was STOPPED before) and its type can stop, so it is left as it
    was found; None otherwise (a type that cannot stop: ``next_note`` says what keeps billing)."""
    started = answer.get("bundle_started_instance") or {}
    if not started:
        return None
    name = started.get("instance") or answer.get("instance")
    if started.get("stoppable") is False:
        answer["next_note"] = (f"this bundle started {name} (it was STOPPED), but its type "
                               f"{started.get('instance_type')} cannot stop: after the teardown it keeps billing "
                               f"compute and disk until deleted ({command('teardown.py', job_id, '--delete-instance')}"
                               " deletes it; copy what you need first)")
        return None
    answer["next_note"] = (f"this bundle started {name} (it was STOPPED): the teardown stops it again once the "
                           "results are safe (its disk stays and bills storage; brev start brings it back)")
    return command("teardown.py", job_id, "--stop-instance")


def poll_all(answer: PollAnswer, code: int, argv: list[str]) -> PollAnswer:
    jobs = answer.get("jobs") or []
    if answer.get("error") and (answer["error"].get("code") in ENV_CODES or code == 2 or not jobs):
        decided, nxt, note = common_error("poll_status.py", argv, answer, answer.get("job_id"))
        if decided:
            return _set(answer, nxt, note)
    parked = [j for j in jobs if j.get("instance_status") == InstanceStatus.STOPPED]   # never started by a read
    for job in jobs:
        if job in parked:
            continue
        if job.get("state") in TERMINAL or job.get("state") == JobState.UNKNOWN:
            return _set(answer, command("teardown.py", job["job_id"]))
    if parked and len(parked) == len(jobs):
        first = parked[0]
        return _set(answer, None, f"every job's instance is STOPPED and was left so (results on it are safe); "
                                  f"starting resumes billing, so ask first - then, e.g.: "
                                  f"{command('poll_status.py', first['job_id'], '--start')}")
    for entry in answer.get("quarantined") or []:
        return _set(answer, command("teardown.py", entry["job_id"]))
    if jobs:
        return _set(answer, command("poll_status.py", "--all"))
    if answer.get("error"):
        return _set(answer, None)
    return _set(answer, None, "no unfinished job: nothing to poll")


def teardown(answer: TeardownAnswer, code: int, argv: list[str]) -> TeardownAnswer:
    if "orphans" in answer:
        return orphans(answer, code, argv)
    decided, nxt, note = common_error("teardown.py", argv, answer, answer.get("job_id"))
    if decided:
        return _set(answer, nxt, note)
    err = (answer.get("error") or {}).get("code")
    if err in ("INSTANCE_DELETE_PENDING", "RESULTS_ONLY_ON_INSTANCE"):   # the error's fix names the discard
        return _set(answer, rerun("teardown.py", argv))
    if answer.get("ok"):
        if answer.get("instance_deleted") or answer.get("instance_stopped") or not answer.get("instance"):
            return _set(answer, None, FINISHED)
        if (answer.get("stop") or {}).get("why"):   # asked to stop a type that cannot: deleting is a choice
            return _set(answer, None, answer["stop"]["why"])
        if answer.get("bundle_started_instance") and answer.get("job_id"):   # leave it as it was found: stopped
            return _set(answer, stop_started(answer, answer["job_id"]))
        return _set(answer, command("teardown.py", "--orphans", *_kept(argv, ("--price-per-hour",))))
    return _set(answer, None)


def orphans(answer: TeardownAnswer, code: int, argv: list[str]) -> TeardownAnswer:
    decided, nxt, note = common_error("teardown.py", argv, answer, answer.get("job_id"))
    if decided:
        return _set(answer, nxt, note)
    if answer.get("error"):
        return _set(answer, None)
    if "--stop" in argv:
        left = [o for o in answer.get("orphans") or [] if (o.get("stop") or {}).get("why")]
        done = f"stopped {', '.join(answer.get('stopped') or [])}; " if answer.get("stopped") else ""
        return _set(answer, None, done + ("; ".join(o["stop"]["why"] for o in left) if left
                                          else orphans_note(answer)))
    if "--delete" not in argv and any(o.get("owned") for o in answer.get("orphans") or []):
        return _set(answer, rerun("teardown.py", [*argv, "--delete"]))   # its --instance / --price-per-hour kept
    if answer.get("orphans") and "--delete" not in argv:
        return _set(answer, None, reused_orphans_note(answer))
    return _set(answer, None, orphans_note(answer))


def reused_orphans_note(answer: TeardownAnswer) -> str:
    """No orphan is the bundle's to delete: the complete commands that stop or delete the reused ones
    of ours (the user's choice, so no ``next``), or why none is ours to touch."""
    reused = [o["instance"] for o in answer.get("orphans") or [] if o.get("ours") and not o.get("owned")]
    if not reused:
        return "no orphan is this bundle's: none was used by it, so their owners decide (each advice says how)"
    stop = command("teardown.py", "--orphans", "--stop", *[w for name in reused for w in ("--instance", name)])
    delete = command("teardown.py", "--orphans", "--delete", "--instance", reused[0])
    return (f"no orphan this bundle owns; idle and billing, reused (yours): {', '.join(reused)}. Stopping or "
            f"deleting is your choice - stop (disks still bill): {stop}; or delete one (its files are lost; "
            f"results of ours are copied home first): {delete}")


def orphans_note(answer: TeardownAnswer) -> str:
    """What is left after ``--orphans [--delete]``: true of every instance the answer lists."""
    deleted = answer.get("deleted") or []
    left = [o for o in answer.get("orphans") or [] if not o.get("deleted") and not (o.get("stop") or {}).get("stopped")]
    done = f"deleted {', '.join(deleted)}; " if deleted else ""
    if not left:
        return done + "no orphan is left: nothing of this bundle's bills for nothing"
    ours = [o["instance"] for o in left if o.get("ours")]
    how = (f"after saving what is on it, {command('teardown.py', '--orphans', '--delete', '--instance', ours[0])} "
           f"deletes {ours[0]}" if ours else "none was used by this bundle: their owners decide")
    return (done + f"still idle and billing: {', '.join(o['instance'] for o in left)} (not this bundle's to delete "
            f"unasked: each reason says why; {how})")
