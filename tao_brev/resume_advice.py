"""The advice that resumes a job: the exact ``submit.py ... --resume-from JOB_ID`` command.

The static advice texts (``docker_state``, ``progress.STALL_ADVICE``, error fixes) name the
placeholder :data:`RESUME_WORDS`; a poll answer replaces it (:func:`fill_answer`) with the
job's own submit command, kept in its sidecar at submit (``submit_argv``: local paths absolute,
one-off flags dropped, :func:`resubmit_words`), plus ``--resume-from JOB_ID`` for a train job
(``tao_brev.resume``) or ``--retry-of JOB_ID`` for any other action (nothing to resume).
"""

from __future__ import annotations

import re

from typing import Optional, Sequence

from . import nextstep
from .errors import TaoBrevError

# The instance placeholder of the static advice texts (docker_state's GPU-reset and disk advice), a
# whole word only (never inside a code such as INSTANCE_STOPPED)
_INSTANCE_WORD = re.compile(r"\bINSTANCE\b")

# submit.py flags a resubmit never repeats (each names one earlier job or is a one-off)
_NOT_REPEATED = {"--retry-of": True, "--resume-from": True, "--dry-run": False, "--start": False}

RESUME_WORDS = "submit.py ... --resume-from JOB_ID"   # the placeholder of the static advice texts


def resubmit_words(argv: Sequence[str]) -> list[str]:
    """A submit's own arguments as a later resubmit repeats them: local paths absolute
    (``nextstep`` conventions), without --retry-of / --resume-from / --dry-run / --start."""
    words, skip = [], False
    for word in nextstep._absolute_paths(list(argv)):
        if skip:
            skip = False
            continue
        flag = word.split("=", 1)[0]
        if flag in _NOT_REPEATED:
            skip = _NOT_REPEATED[flag] and "=" not in word
            continue
        words.append(word)
    return words


def command(record: dict, sidecar: dict) -> Optional[str]:
    """The exact command that continues ``record``'s job: its own submit with ``--resume-from``
    (a train job) or ``--retry-of`` (any other action: nothing to resume). None when the submit's
    arguments were not kept (a job submitted by an older bundle)."""
    words = sidecar.get("submit_argv")
    if not words:
        return None
    if "--" in words:
        cut = words.index("--")
        head, tail = list(words[:cut]), list(words[cut:])
    else:
        head, tail = list(words), []
    flag = "--resume-from" if record.get("action") == "train" else "--retry-of"
    return nextstep.command("submit.py", *head, flag, record["id"], *tail)


def fill(text: Optional[str], record: dict, sidecar: dict) -> Optional[str]:
    """``text`` with the placeholder :data:`RESUME_WORDS` (and ``JOB_ID``) replaced by this job's
    exact command (:func:`command`); the job id alone where the command is not known."""
    if not text or RESUME_WORDS not in text:
        return text
    exact = command(record, sidecar)
    if exact is None:
        flag = "--resume-from" if record.get("action") == "train" else "--retry-of"
        exact = f"submit.py (the same flags as {record['id']}'s submit) {flag} {record['id']}"
    if record.get("action") != "train":   # nothing to resume: the same job again, linked
        text = text.replace(" (continues from its last checkpoint)", "").replace(
            " continues from its last checkpoint", " starts it again")
    elif sidecar.get("ephemeral") and (sidecar.get("results") or {}).get("kind") != "s3":
        text += (f" (the job owns its instance and its checkpoints are only there: tear it down with "
                 f"{nextstep.command('teardown.py', record['id'], '--keep-instance')} to resume on it)")
    return text.replace(RESUME_WORDS, exact).replace("JOB_ID", record["id"])


def fill_job(ctx, job_id: str, out: dict) -> dict:
    """:func:`fill_answer` for ``job_id`` (its record and sidecar read here); ``out`` as it was when
    they cannot be read (the answer says why elsewhere)."""
    try:
        record, sidecar = ctx.records.load(job_id), ctx.sidecars.load(job_id)
    except TaoBrevError:
        return out
    return fill_answer(out, record, sidecar)


def fill_answer(out: dict, record: dict, sidecar: dict) -> dict:
    """Every resume advice of a poll answer (``hint.advice``, ``stall.advice``, the error's fix,
    ``observed.hint.advice``) with the exact command, and the placeholder INSTANCE with the job's
    instance; the parts changed are copies."""
    instance = out.get("instance") or sidecar.get("instance")
    instance = instance if isinstance(instance, str) and instance else None
    for key in ("hint", "stall", "error", "observed"):
        part = out.get(key)
        if not isinstance(part, dict):
            continue
        if key == "observed" and isinstance(part.get("hint"), dict):
            part = out[key] = {**part, "hint": fill_answer({"hint": part["hint"]}, record, sidecar)["hint"]}
        for field in ("advice", "fix"):
            if isinstance(part.get(field), str) and RESUME_WORDS in part[field]:
                part = out[key] = {**part, field: fill(part[field], record, sidecar)}
            if isinstance(part.get(field), str) and instance and _INSTANCE_WORD.search(part[field]):
                part = out[key] = {**part, field: _INSTANCE_WORD.sub(instance, part[field])}
    return out
