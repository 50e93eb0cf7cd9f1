"""The shape of a script's answer: printed as one redacted JSON document within 64 KiB, a job's
output withheld when its ``--env`` values are not proven here, placeholders filled with real
values, bundle scripts named by their absolute paths, the run's warnings and the instances brev
started merged in.

``cli.run`` imports this module once an answer is made (a ``--help`` makes none); a second
signal may import it in the middle of another import, so it reads the names of the modules it
imports when it runs, not at import (``logcap.cap_answer``, ``redact.redact_obj``).
"""

from __future__ import annotations

import json
import re
import signal
import sys
from typing import Any, Callable, Iterable

from . import logcap, nextstep, pipes
from .errors import TaoBrevError
from .model.answer_types import InstanceStarted, PollAnswerWithheld
from .secrets import redact
from .secrets import values as known_secrets
from .run_state import RUN


def emit(result: dict) -> None:
    """Print the answer (redacted, then within ``logcap.ANSWER_BYTES``: cut after redaction);
    a stdout reader that left ends the process quietly (``pipes``)."""
    pipes.write_stdout(json.dumps(logcap.cap_answer(redact.redact_obj(withhold_job_output(result))), indent=2,
                                  default=str) + "\n")


def interrupt_text(answer: dict) -> str:
    """The text of an answer printed at once by a second signal (redacted, not capped)."""
    return json.dumps(redact.redact_obj(answer), indent=2) + "\n"


WITHHELD = "[tao-brev: withheld: the job was given {names} by --env and this shell cannot prove it holds the " \
           "same values: its output cannot be redacted]"
OWN_EVIDENCE = ("ExitCode=", "OOMKilled=", "State.Error=")   # docker's facts, not the job's output
# Whole values a job wrote (status.json KPIs: names and values) withheld with its output.
JOB_VALUES = ("kpi", "final_kpi", "metrics")
PROGRESS_VALUES = ("warnings", "resumed_from")   # under ``progress``: the status file's FAILURE messages, a path
# TAO's status words (vocabulary.TaoStatus) and the older ones an image may still write
TAO_STATUSES = frozenset({"STARTED", "RUNNING", "SUCCESS", "FAILURE", "SKIPPED", "PENDING", "CANCELED", "ERROR"})


def withheld_fix(names: list[str]) -> str:
    """How to see the job's output again: export the values it was given (names known), or,
    for a job whose sidecar is lost or damaged (``*``), restore the sidecar."""
    real = [n for n in names if n != "*"]
    parts = []
    if real:
        parts.append(f"export {' '.join(real)} (the same values the job was given) in the shell that runs this "
                     "script, then run it again")
    if "*" in names:
        parts.append(f"{known_secrets.unproven().get('*', 'the job sidecar is lost')}: restore it from a backup "
                     "(the job's output stays withheld without it)")
    return "; ".join(parts)


def _emptied(key: str, value, notice: str):
    """A withheld KPI value of the same type: ``metrics`` keeps its facts (available, file)
    without ``epochs`` and ``best``; another object or list is emptied; a string is ``notice``."""
    if key == "metrics" and isinstance(value, dict):
        return {**{k: v for k, v in value.items() if k in ("available", "file")}, "epochs": [], "best": {}}
    return {} if isinstance(value, dict) else [] if isinstance(value, list) else notice[:280]


def withhold_job_output(answer: dict) -> dict:
    """``answer`` without the text a job printed (``logs``, log lines in a hint's ``evidence``,
    a stall's ``last_log_line``/``evidence``, the status file's ``message``, ``status`` when it
    is not one of TAO's, and whole KPIs: ``kpi``, ``final_kpi``, ``metrics``, emptied) when a job's
    ``--env`` value is not proven in this process (:func:`known_secrets.unset_watched`: unset,
    another value, no digest or no sidecar): redaction rests on the values, so text that may hold
    unknown ones is never printed. ``withheld`` names the variables and the way out."""
    names = known_secrets.unset_watched()
    if not names or not isinstance(answer, dict):
        return answer
    notice = WITHHELD.format(names=", ".join(n if n != "*" else "values (names unknown)" for n in names))
    found: list[str] = []
    result = _withheld_walk(answer, "", notice, found)
    if found:
        withheld: PollAnswerWithheld = {"names": names, "fields": sorted(set(found)), "fix": withheld_fix(names)}
        result["withheld"] = withheld
    return result


def _withheld_walk(obj, parent: str, notice: str, found: list[str]):
    """``obj`` with the job's output in it replaced by ``notice`` (the keys replaced go to ``found``)."""
    if isinstance(obj, list):
        return [_withheld_walk(item, parent, notice, found) for item in obj]
    if not isinstance(obj, dict):
        return obj
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key == "logs" and isinstance(value, str) and value:
            out[key] = notice
            found.append(key)
        elif value and (key in JOB_VALUES or (parent == "progress" and key in PROGRESS_VALUES)):
            # the same type, emptied (answers keep their schema)
            out[key] = _emptied(key, value, notice)
            found.append(key)
        elif key == "evidence" and isinstance(value, list):
            kept = [v for v in value if isinstance(v, str) and v.startswith(OWN_EVIDENCE)]
            out[key] = kept + ([notice] if len(kept) < len(value) else [])
            if len(kept) < len(value):
                found.append(key)
        elif (parent == "stall" and key in ("last_log_line", "evidence") and isinstance(value, str)) or \
                (parent == "progress" and key == "message" and isinstance(value, str)) or \
                (parent == "progress" and key in ("status", "last_tao_status") and isinstance(value, str)
                 and value not in TAO_STATUSES):
            out[key] = notice[:280]
            found.append(key)
        else:
            out[key] = _withheld_walk(value, key, notice, found)
    return out


def emit_stream(head: dict, key: str, items: Iterable) -> None:
    """Print ``{**head, key: [*items]}`` byte for byte as :func:`emit` would, one item at a
    time, each redacted on its way: memory stays flat however many items (written in
    chunks of about 64 KiB). From the first byte on, signals are ignored (the one JSON
    document is being printed), as in ``run``."""
    emit_stream_texts(head, key, lambda redacted: (redacted.json_text(item, 2) for item in items))


def emit_stream_texts(head: dict, key: str, texts_of: Callable[[redact.ObjRedactor], Iterable[str]]) -> None:
    """:func:`emit_stream` of items given as their JSON texts: ``texts_of(redacted)`` yields
    ``redacted.json_text(item, 2)`` of each item (depth 2: an item of the list), or the same
    text by another way (``record_listing.json_texts``)."""
    RUN["answering"] = True
    redacted = redact.obj_redactor()
    opening = json.dumps(redacted({**head, key: []}), indent=2, default=str)
    assert opening.endswith(f"{json.dumps(key)}: []\n}}"), "the streamed key must be the last one"
    chunk = [opening[:-len("]\n}")]]
    size = 0
    separator = "\n    "
    for text in texts_of(redacted):
        chunk += (separator, text)
        separator = ",\n    "
        size += len(text)
        if size > 65536:
            sys.stdout.write("".join(chunk))
            chunk, size = [], 0
    chunk.append("]\n}\n" if separator == "\n    " else "\n  ]\n}\n")
    sys.stdout.write("".join(chunk))
    sys.stdout.flush()


def instance_started_answer(names: list[str]) -> InstanceStarted:
    """The ``instance_started`` object of an answer (schema: common.schema.json)."""
    stop = " && ".join(f"brev stop {n}" for n in names)
    return {"instances": list(names), "billing": True,
            "message": f"brev started the STOPPED instance(s) {', '.join(names)} by itself to run a command: "
                       "RUNNING and billing again; containers that ran before the stop were killed by it",
            "fix": f"If nothing should run there now, stop it (its type can stop: it was stopped): {stop}"}


def merge_warnings(result: dict) -> None:
    """The ``run_state.warn`` messages of this run into ``result["warnings"]`` (not preflight's: its
    warnings are check names, its checks carry their failures), each once, redacted at emit."""
    warned = RUN.get("warned") or []
    if not warned or RUN.get("script") == "preflight.py" or not isinstance(result.get("warnings", []), list):
        return
    have = result.setdefault("warnings", [])
    for message in warned:
        if not any(message in w or w in message for w in have if isinstance(w, str)):
            have.append(message)


_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


def interrupted_answer() -> dict:
    """``INTERRUPTED`` (exit 130), naming the job this run worked on, if any."""
    name = _NAMES[RUN["signal"]] if RUN["signal"] else "SIGINT"
    job_id, state, script = RUN["job_id"], RUN["state"], RUN["script"] or ""
    fix = RUN["fix"] or nextstep.resume_fix(script, RUN["argv"], job_id, state)
    if job_id is None:
        return {"ok": False, "error": TaoBrevError("INTERRUPTED", f"interrupted ({name})", fix).to_json()}
    known = f" (last known state {state})" if state else ""
    return {"ok": False, "job_id": job_id, "state": state,
            "error": TaoBrevError("INTERRUPTED", f"interrupted ({name}) while working on job {job_id}{known}",
                                  fix).to_json()}


_INSTANCE_PLACEHOLDER = re.compile(r"(--instance |brev (?:delete|stop|start|exec|copy [^\s]+) )NAME\b")
_JOB_PLACEHOLDER = re.compile(r"\bJOB_ID\b")
# a script of this bundle named bare (``teardown.py``) or relative (``scripts/teardown.py``) in a text
_SCRIPT_WORD = re.compile(r"(?<![\w/.@-])(?:scripts/)?((?:preflight|submit|poll_status|teardown|tao_job_record|"
                               r"redact_secrets)\.py)\b")
COMMAND_TEXTS = ("fix", "advice", "next_note", "teardown_skipped", "why")


def absolute_scripts(text: str) -> str:
    """``text`` with every script of this bundle it names by its absolute path (runnable as is)."""
    return _SCRIPT_WORD.sub(lambda m: str(nextstep.SCRIPTS_DIR / m.group(1)), text)


def concrete(answer, job_id: str | None = None, instance: str | None = None):
    """``answer`` with the placeholders of its fix and advice texts filled with the real values
    it names: ``JOB_ID`` with the job id of the nearest object that has one, ``NAME`` after
    ``--instance`` / ``brev delete`` etc. with its instance (an error's default fix is generic)."""
    if isinstance(answer, list):
        return [concrete(item, job_id, instance) for item in answer]
    if not isinstance(answer, dict):
        return answer
    job_id = answer.get("job_id") if isinstance(answer.get("job_id"), str) else job_id
    instance = answer.get("instance") if isinstance(answer.get("instance"), str) else instance
    out = {}
    for key, value in answer.items():
        if key in ("fix", "advice") and isinstance(value, str):
            if job_id:
                value = _JOB_PLACEHOLDER.sub(job_id, value)
            if instance:
                value = _INSTANCE_PLACEHOLDER.sub(lambda m: m.group(1) + instance, value)
        if key in COMMAND_TEXTS and isinstance(value, str):
            value = absolute_scripts(value)
        out[key] = concrete(value, job_id, instance)
    return out
