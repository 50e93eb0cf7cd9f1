"""The advice that resumes a job: the exact ``submit.py ... --resume-from JOB_ID`` command.

The static advice texts (``docker_state``, ``progress.STALL_ADVICE``, error fixes) name the
placeholder :data:`RESUME_WORDS`; a poll answer replaces it (:func:`fill_answer`) with the
job's own submit command, kept in its sidecar at submit (``submit_argv``: local paths absolute,
one-off flags dropped, :func:`resubmit_words`), plus ``--resume-from JOB_ID`` for a train job
(``tao_brev.resume``) or ``--retry-of JOB_ID`` for any other action (nothing to resume).

Two exceptions: a job whose chain remembers a recovery (``--recover N``) is advised the recovering
command (``recovery_chain.recovering_command``, handed in by the caller), never a manual resubmit
beside it; and a job that exhausted ``/dev/shm`` (docker_state's failure code
:data:`SHM_EXHAUSTED`) is advised its resubmit with a larger ``--shm-size`` (:func:`larger_shm`):
the same settings fail the same way, so no recovery repeats them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

from . import nextstep
from .errors import TaoBrevError
from .model import JobSidecar

if TYPE_CHECKING:
    from .context import Context
    from .model.answer_types import Hint, PollAnswer, RecordDocument

# The instance placeholder of the static advice texts (docker_state's GPU-reset and disk advice), a
# whole word only (never inside a code such as INSTANCE_STOPPED)
_INSTANCE_WORD = re.compile(r"\bINSTANCE\b")

# submit.py flags a resubmit never repeats (each names one earlier job or is a one-off)
_NOT_REPEATED = {"--retry-of": True, "--resume-from": True, "--dry-run": False, "--start": False}

RESUME_WORDS = "submit.py ... --resume-from JOB_ID"   # the placeholder of the static advice texts

# docker_state's failure code of a job that exhausted /dev/shm (torch DataLoader "Bus error", "No space
# left on device" in shm): a hint's ``code``; its cure is a larger --shm-size, never the same settings
SHM_EXHAUSTED = "SHM_EXHAUSTED"
DEFAULT_SHM_SIZE = "16g"   # submit.py --shm-size's default (verbs/submit/plan.SubmitRequest, remote.RunSpec)
_SIZE = re.compile(r"^([0-9]+)([bkmgBKMG]?)$")   # remote.SHM_RE's form


def shm_exhausted(hint: Optional[Hint]) -> bool:
    """``hint`` (a poll answer's) says the job ran out of /dev/shm."""
    return isinstance(hint, dict) and hint.get("code") == SHM_EXHAUSTED


def shm_size(words: Sequence[str]) -> str:
    """The ``--shm-size`` a submit's arguments ran with (the last one given, else the default)."""
    found, head = DEFAULT_SHM_SIZE, list(words[:list(words).index("--")] if "--" in words else words)
    for i, word in enumerate(head):
        if word == "--shm-size" and i + 1 < len(head):
            found = head[i + 1]
        elif word.startswith("--shm-size="):
            found = word.split("=", 1)[1]
    return found


def larger_shm(size: str) -> str:
    """Twice ``size`` in its own unit (``16g`` -> ``32g``); twice the default when it does not parse."""
    match = _SIZE.match(size or "")
    if match is None:
        return larger_shm(DEFAULT_SHM_SIZE)
    return f"{int(match.group(1)) * 2}{match.group(2)}"


def with_shm_size(words: Sequence[str], size: str) -> list[str]:
    """A submit's arguments with ``--shm-size size`` instead of the one they had (before ``--``)."""
    cut = list(words).index("--") if "--" in words else len(words)
    out, skip = [], False
    for word in list(words)[:cut]:
        if skip:
            skip = False
            continue
        if word == "--shm-size" or word.startswith("--shm-size="):
            skip = word == "--shm-size"
            continue
        out.append(word)
    return [*out, "--shm-size", size, *list(words)[cut:]]


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


def command(record: RecordDocument, sidecar: JobSidecar, shm: Optional[str] = None) -> Optional[str]:
    """The exact command that continues ``record``'s job: its own submit with ``--resume-from``
    (a train job) or ``--retry-of`` (any other action: nothing to resume), with ``--shm-size shm``
    when given. None when the submit's arguments were not kept (a job submitted by an older bundle)."""
    words = sidecar.submit_argv
    if not words:
        return None
    if shm:
        words = with_shm_size(words, shm)
    if "--" in words:
        cut = words.index("--")
        head, tail = list(words[:cut]), list(words[cut:])
    else:
        head, tail = list(words), []
    flag = "--resume-from" if record.get("action") == "train" else "--retry-of"
    return nextstep.command("submit.py", *head, flag, record["id"], *tail)


def fill(text: Optional[str], record: RecordDocument, sidecar: JobSidecar, recovering: Optional[str] = None,
         shm: Optional[str] = None) -> Optional[str]:
    """``text`` with the placeholder :data:`RESUME_WORDS` (and ``JOB_ID``) replaced by this job's
    exact command (:func:`command`; ``shm``: with that ``--shm-size``), or by ``recovering`` (the
    chain's recovering command) when given; the job id alone where the command is not known."""
    if not text or RESUME_WORDS not in text:
        return text
    if recovering and not shm:
        return text.replace(RESUME_WORDS, recovering).replace("JOB_ID", record["id"])
    exact = command(record, sidecar, shm)
    if exact is None:
        flag = "--resume-from" if record.get("action") == "train" else "--retry-of"
        exact = f"submit.py (the same flags as {record['id']}'s submit) {flag} {record['id']}"
    if record.get("action") != "train":   # nothing to resume: the same job again, linked
        text = text.replace(" (continues from its last checkpoint)", "").replace(
            " continues from its last checkpoint", " starts it again")
    elif sidecar.ephemeral and (sidecar.results or {}).get("kind") != "s3":
        text += (f" (the job owns its instance and its checkpoints are only there: tear it down with "
                 f"{nextstep.command('teardown.py', record['id'], '--keep-instance')} to resume on it)")
    return text.replace(RESUME_WORDS, exact).replace("JOB_ID", record["id"])


def fill_job(ctx: Context, job_id: str, out: PollAnswer, recovering: Optional[str] = None,
             hint: Optional[Hint] = None) -> PollAnswer:
    """:func:`fill_answer` for ``job_id`` (its record and sidecar read here); ``out`` as it was when
    they cannot be read (the answer says why elsewhere)."""
    try:
        record, sidecar = ctx.records.load(job_id), ctx.sidecars.load(job_id)
    except TaoBrevError:
        return out
    return fill_answer(out, record, sidecar, recovering, hint)


def fill_answer(out: PollAnswer, record: RecordDocument, sidecar: JobSidecar, recovering: Optional[str] = None,
                hint: Optional[Hint] = None) -> PollAnswer:
    """Every resume advice of a poll answer (``hint.advice``, ``stall.advice``, the error's fix,
    ``observed.hint.advice``) with the exact command (``recovering``: the chain's recovering
    command instead; a job out of /dev/shm: its resubmit with a larger ``--shm-size``), and the
    placeholder INSTANCE with the job's instance; the parts changed are copies. ``hint``: the
    answer's failure hint when ``out`` does not carry it."""
    hint = hint or out.get("hint") or (out.get("observed") or {}).get("hint")
    shm = larger_shm(shm_size(sidecar.submit_argv or [])) if shm_exhausted(hint) else None
    instance = out.get("instance") or sidecar.instance
    job = _Job(record, sidecar, recovering, shm)
    part, stall, error, observed = out.get("hint"), out.get("stall"), out.get("error"), out.get("observed")
    if isinstance(part, dict):
        out["hint"] = job.hint(part, instance)
    if isinstance(stall, dict) and isinstance(stall.get("advice"), str):
        out["stall"] = {**stall, "advice": job.text(stall["advice"], instance)}
    if isinstance(error, dict) and isinstance(error.get("fix"), str):
        out["error"] = {**error, "fix": job.text(error["fix"], instance)}
    if isinstance(observed, dict) and isinstance(observed.get("hint"), dict):   # the job's instance: the sidecar's
        out["observed"] = {**observed, "hint": job.hint(observed["hint"], sidecar.instance)}
    return out


@dataclass
class _Job:
    """What a job's advice texts are filled with (:func:`fill_answer`)."""

    record: RecordDocument
    sidecar: JobSidecar
    recovering: Optional[str]
    shm: Optional[str]

    def hint(self, part: Hint, instance: Optional[str]) -> Hint:
        """A failure hint with its advice filled (a job out of /dev/shm: its resubmit with a larger --shm-size)."""
        advice = part.get("advice")
        if not isinstance(advice, str):
            return part
        if self.shm and RESUME_WORDS not in advice:
            advice = f"{advice.rstrip('. ')}; the resubmit with a larger --shm-size: {RESUME_WORDS}"
        return {**part, "advice": self.text(advice, instance)}

    def text(self, text: str, instance: Optional[str]) -> str:
        """One advice or fix: the exact command (:func:`fill`), the placeholder INSTANCE the instance."""
        if RESUME_WORDS in text:
            text = fill(text, self.record, self.sidecar, self.recovering, self.shm) or text
        if isinstance(instance, str) and instance:
            text = _INSTANCE_WORD.sub(instance, text)
        return text
