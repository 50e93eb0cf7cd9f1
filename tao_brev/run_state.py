"""The state of this script's one run: the job it works on, its warnings, the instances brev
started by itself, and the signal bookkeeping ``cli.run`` acts on.

Below every verb and service (they report through :func:`say` / :func:`warn` and name their
job with :func:`note_job`); imported by every script's ``--help`` too, so it imports only the
standard library's light parts and ``errors`` (``redact``: where a message is printed).
"""

from __future__ import annotations

import contextlib
import sys

# The run: ``cli.run`` resets it at its start; an answer (and an interrupt's) reads it.
RUN: dict = {}
# Instances brev started by itself (a STOPPED instance resumed by `brev exec`) during this
# script's run: ``cli.run`` puts them in the answer, whatever the verb (they bill again).
STARTED: list[str] = []


def reset(script: str | None = None, argv: list[str] | None = None) -> None:
    """A new run of ``script`` with ``argv`` (nothing noted, nothing pending)."""
    RUN.update(job_id=None, fix=None, signal=None, deferred=0, pending=None, answering=False, state=None,
               script=script, argv=list(argv or []), warned=[])


reset()


def say(message: str) -> None:
    """Progress for humans: stderr, redacted (lost, never fatal, when stderr's reader left)."""
    from .secrets import redact

    try:
        print(redact.redact_values(redact.redact(message)), file=sys.stderr, flush=True)
    except BrokenPipeError:
        pass


def warn(message: str) -> None:
    """A failure the verb survives: on stderr now (:func:`say`), and in the answer's ``warnings``
    too (``cli.run`` adds it), so no failure is told only to a human."""
    say(message)
    RUN.setdefault("warned", []).append(message)


def note_instance_started(name: str) -> None:
    """Transport callback: brev started the STOPPED instance ``name`` to run a command."""
    if name not in STARTED:
        STARTED.append(name)
        say(f"WARNING: brev started the STOPPED instance {name} by itself; it is RUNNING and BILLING again")


def note_job(job_id: str, interrupted_fix: str | None = None) -> None:
    """From now on every answer of this run names ``job_id`` (an interrupt's too);
    ``interrupted_fix`` is what an interrupted run tells the agent to do next."""
    RUN["job_id"] = job_id
    if interrupted_fix:
        RUN["fix"] = interrupted_fix


def note_state(state: str | None) -> None:
    """The job's last known state: an interrupted answer reports it."""
    if state:
        RUN["state"] = state


@contextlib.contextmanager
def deferred_interrupts():
    """A SIGINT/SIGTERM arriving inside is acted on when the block ends: what the block
    makes (a record) and what names it (:func:`note_job`) exist together or not at all.
    A signal is held only by the handler ``cli.run`` installed (``RUN["on_signal"]``), which acts on it."""
    RUN["deferred"] += 1
    try:
        yield
    finally:
        RUN["deferred"] -= 1
        if not RUN["deferred"] and RUN["pending"] is not None:
            signum, RUN["pending"] = RUN["pending"], None
            RUN["on_signal"](signum, None)
