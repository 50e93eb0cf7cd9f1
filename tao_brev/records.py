"""The job-record store, in the TAO skill bank's format: one JSON file a job.

Invariant: records written here are byte-for-byte readable by the bank's
``scripts/tao_job_record.py`` and vice versa (``$TAO_STATE_DIR/jobs/<id>.json``,
``schema_version`` 1; schema in ``references/schemas/job_record.schema.json``).
Every write is atomic, under a per-record lock, and passes the redactor.
``open`` creates the record exclusively before anything is launched
(record-then-launch): the whole PENDING record is written to a temp file first
and then linked under ``<id>.json`` (``fsio.create_json``), so a record is never
visible empty or half-written, whatever kills the writer; ``mark`` appends
transitions; a terminal state never changes (a repeated mark of the same
terminal state may only add ``err_class`` or ``backend_ref``).

A damaged record (not UTF-8, not JSON, not an object, required fields
missing, a field of the wrong type or value or one the schema does not have -
written by some other tool, by hand, or by a crash of an older version) is moved, bytes intact,
to ``jobs/quarantine/<id>.json`` by the first reader that finds it, and
answered as ``CORRUPT_RECORD`` naming that path: it never blocks the other
jobs (``list`` reports it apart). ``teardown.py <id>`` closes it
(:meth:`RecordStore.close_quarantined` moves it to ``jobs/quarantine/closed/``).

Records answer "what was submitted, where do results live, how did it end";
what is running now is always read from the backend. Brev-specific state
(instance, ephemeral, results sync) lives in ``sidecar.py``, not here.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Iterator

from . import instance_names, record_schema
from .errors import TaoBrevError
from .fsio import atomic_write_json, create_json, locked, private_dir, read_bytes_or_error, read_text, sweep_temp
from .model import JobRecord, Transition
from .record_quarantine import Quarantine, QuarantinedEntry, json_stems as _json_stems, quarantine_error as _quarantine_error
from .record_schema import ID_RE, REQUIRED as _REQUIRED, check_job_id  # noqa: F401 (re-exported)
from .secrets import redact
from .secrets import values as known_secrets
from .vocabulary import (ERR_CLASSES, SOURCES, STATES, STORAGE_TIERS, TERMINAL_STATES,  # noqa: F401 (re-exported)
                         JobState, Source)

if TYPE_CHECKING:   # type hints only (the answer types cost ~10 ms to import)
    from .model.answer_types import RecordDocument

SCHEMA_VERSION = 1
PLATFORM = "brev"

# Fields holding paths or URIs get the gentle redaction that keeps paths intact.
_URI_FIELDS = frozenset({"results_dir", "image", "backend_ref"})


def is_terminal(state: str | None) -> bool:
    return state in TERMINAL_STATES


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def state_root(env=os.environ) -> Path:
    """``$TAO_STATE_DIR`` (absolute) or ``~/.tao``. Raises BAD_STATE_DIR."""
    raw = env.get("TAO_STATE_DIR")
    if raw is None:
        return Path.home() / ".tao"
    if not raw.strip():
        raise TaoBrevError("BAD_STATE_DIR", "TAO_STATE_DIR is set but empty")
    path = Path(raw)
    if not path.is_absolute():
        raise TaoBrevError("BAD_STATE_DIR", f"TAO_STATE_DIR must be absolute (got {raw!r})")
    return path


def _slug(value: str) -> str:
    out = re.sub(r"[^A-Za-z0-9._-]+", "-", value)
    out = re.sub(r"^[^A-Za-z0-9]+", "", out).strip(".-")
    return out or "job"


def _minted(job_id: str) -> None:
    """A job id this store minted (or holds under its own name) is the bundle's word, not a user's
    secret: a variable whose value equals it is neither refused nor redacted (``known_secrets.minted``)."""
    known_secrets.minted([job_id])


def _redacted(record: RecordDocument) -> RecordDocument:
    """``record`` as this store writes and returns it: every string redacted."""
    return _redact_record(record)


def _redact_record(obj: Any, key: str | None = None) -> Any:
    if isinstance(obj, str):
        return redact.redact_values(redact.redact_uri(obj) if key in _URI_FIELDS else redact.redact(obj))
    if isinstance(obj, list):   # no path/URI field holds a list
        return [_redact_record(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _redact_record(v, k) for k, v in obj.items()}
    return obj


class RecordStore(Quarantine):
    """Job records under ``<state_root>/jobs``."""

    def __init__(self, root: Path | None = None):
        self.root = root if root is not None else state_root()
        self.jobs_dir = self.root / "jobs"

    def _ensure_dir(self) -> None:
        try:
            private_dir(self.root)           # 0700: records, sidecars and logs are private
            private_dir(self.jobs_dir)
        except (NotADirectoryError, FileExistsError):
            raise TaoBrevError("BAD_STATE_DIR", f"not a directory: {self.root}") from None

    def path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{check_job_id(job_id)}.json"

    def _write(self, path: Path, record: RecordDocument) -> None:
        atomic_write_json(path, _redacted(record))

    def open(self, *, image: str, network_arch: str, action: str, storage_tier: str,
             results_dir: str | None = None, results_root: str | None = None,
             upload_excludes: list[str] | None = None, parent_job: str | None = None,
             retry_of: str | None = None, platform: str = PLATFORM) -> RecordDocument:
        """Mint ``<arch>-<action>-<6 hex>``, bind ``results_dir`` and write PENDING.

        Exactly one of ``results_dir`` / ``results_root`` (then
        ``results_dir = <root>/<id>``). Returns the record as written (redacted, like
        every record this store returns). Raises BAD_ARGUMENT.
        """
        if bool(results_dir) == bool(results_root):
            raise TaoBrevError("BAD_ARGUMENT", "pass exactly one of results_dir or results_root")
        for flag, val in (("--image", image), ("--network-arch", network_arch), ("--action", action)):
            if not val or not str(val).strip():
                raise TaoBrevError("BAD_ARGUMENT", f"{flag} must be non-empty")
        if storage_tier not in STORAGE_TIERS:
            raise TaoBrevError("BAD_ARGUMENT", f"storage tier must be one of A, B, C (got {storage_tier!r})")
        for ref in (parent_job, retry_of):
            if ref is not None:
                check_job_id(ref)
        self._ensure_dir()
        for _ in range(8):
            job_id = f"{_slug(network_arch)}-{_slug(action)}-{uuid.uuid4().hex[:6]}"
            _minted(job_id)
            record = self._new_record(job_id, image=image, network_arch=network_arch, action=action,
                                      results_dir=results_dir or os.path.join(results_root or "", job_id),   # one is set
                                      storage_tier=storage_tier, upload_excludes=upload_excludes,
                                      parent_job=parent_job, retry_of=retry_of, platform=platform)
            path = self.path(job_id)
            stored = _redacted(record)
            if self.quarantined(job_id) is None and create_json(path, stored):
                return stored   # what was written, not what was passed: a caller prints it
        raise TaoBrevError("BAD_ARGUMENT", "could not reserve a fresh job id")  # pragma: no cover - 8 collisions

    @staticmethod
    def _new_record(job_id: str, *, image, network_arch, action, results_dir, storage_tier, upload_excludes,
                    parent_job, retry_of, platform) -> RecordDocument:
        ts = now_iso()
        return JobRecord(schema_version=SCHEMA_VERSION, id=job_id, platform=platform, backend_ref=None, image=image,
                         network_arch=network_arch, action=action, results_dir=results_dir,
                         storage_tier=storage_tier, upload_excludes=list(upload_excludes or []), submitted_at=ts,
                         transitions=[Transition(ts=ts, state=JobState.PENDING, message="record opened before launch",
                                                 source=Source.AGENT)],
                         terminal_state=None, redacted=True, parent_job=parent_job or None,
                         retry_of=retry_of or None).to_json()

    def load(self, job_id: str) -> RecordDocument:
        """Read one record. Raises BAD_JOB_ID, UNKNOWN_JOB, CORRUPT_RECORD (a damaged
        record is quarantined first: see the module doc)."""
        path = self.path(job_id)
        try:
            text = read_bytes_or_error(path)   # a special file or a link: damaged (quarantined below)
        except FileNotFoundError:
            quarantined = self.quarantined(job_id) or self.closed_quarantine(job_id)
            if quarantined is not None:
                raise _quarantine_error(job_id, quarantined, "it was damaged") from None
            raise instance_names.unknown_job(job_id, self.jobs_dir) from None
        try:
            return self._parse(path, text)
        except TaoBrevError as exc:
            where = self.quarantine(job_id)
            if where is None:   # rewritten intact meanwhile
                return self.load(job_id)
            raise _quarantine_error(job_id, where, exc.message) from None

    @staticmethod
    def _parse(path: Path | str, text: str | bytes | OSError) -> RecordDocument:
        """The record in ``text`` (the bytes or text of ``path``), or CORRUPT_RECORD: not
        UTF-8, not JSON (nesting too deep included), not an object, a required field
        missing, or a field of the wrong type or value (:func:`record_problem`). The
        message names the field, never its value (it may be anything). ``text`` an OSError:
        ``path`` is no regular file (``fsio.read_bytes_or_error``)."""
        if isinstance(text, OSError):
            raise TaoBrevError("CORRUPT_RECORD", f"{path} is no record: {text.strerror}")
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TaoBrevError("CORRUPT_RECORD", f"{path} is not valid JSON: {exc}") from None
        except UnicodeDecodeError:
            raise TaoBrevError("CORRUPT_RECORD", f"{path} is not UTF-8 text") from None
        except (ValueError, RecursionError) as exc:   # an integer of too many digits; nesting too deep
            raise TaoBrevError("CORRUPT_RECORD", f"{path} is not JSON this store can read "
                               f"({type(exc).__name__})") from None
        missing = [k for k in _REQUIRED if not isinstance(record, dict) or k not in record]
        if missing:
            raise TaoBrevError("CORRUPT_RECORD", f"{path} misses required fields: {', '.join(missing)}")
        problem = record_schema.problem(record)
        if problem:
            raise TaoBrevError("CORRUPT_RECORD", f"{path} has {problem}")
        if os.path.basename(str(path)) == f"{record['id']}.json":   # an id this store minted and holds
            _minted(record["id"])
        return record

    def mark(self, job_id: str, state: str, *, message: str = "", source: str = "agent",
             backend_ref: str | None = None, err_class: str | None = None) -> RecordDocument:
        """Append a transition under the record lock; returns the record as written.

        A terminal record refuses any other state (TERMINAL_STATE); the same
        terminal state again only fills ``err_class``/``backend_ref`` when unset.
        """
        if state not in STATES:
            raise TaoBrevError("BAD_ARGUMENT", f"unknown state {state!r}; one of {', '.join(STATES)}")
        if source not in SOURCES:
            raise TaoBrevError("BAD_ARGUMENT", f"unknown source {source!r}; one of {', '.join(SOURCES)}")
        if err_class is not None and err_class not in ERR_CLASSES:
            raise TaoBrevError("BAD_ARGUMENT", f"unknown err_class {err_class!r}")
        path = self.path(job_id)
        with locked(path):
            record = self.load(job_id)
            terminal = record.get("terminal_state")
            if terminal:
                if state != terminal:
                    raise TaoBrevError("TERMINAL_STATE",
                                       f"job {job_id} is terminal ({terminal}); refusing transition to {state}")
                added: RecordDocument = {}
                if err_class and not record.get("err_class"):
                    added["err_class"] = err_class
                if backend_ref and not record.get("backend_ref"):
                    added["backend_ref"] = backend_ref
                if added:
                    record.update(added)
                    self._write(path, record)
                return _redacted(record)
            record["transitions"].append({"ts": now_iso(), "state": state,
                                          "message": message or "", "source": source})
            if backend_ref:
                record["backend_ref"] = backend_ref
            if err_class:
                record["err_class"] = err_class
            if state in TERMINAL_STATES:
                record["terminal_state"] = state
                record["terminal_write_by"] = source
            self._write(path, record)
            return _redacted(record)

    def list(self) -> list[RecordDocument | QuarantinedEntry]:
        """Every readable record, sorted by id. A damaged record is quarantined and,
        like one quarantined before and not closed, comes back as
        ``{"id", "corrupt": True, "quarantined": path, "error"}`` rather than failing the listing."""
        return list(self.iter_list())

    def iter_list(self) -> Iterator[RecordDocument | QuarantinedEntry]:
        """:meth:`list`, one record at a time in the same order: only the file names are
        held (memory stays flat however many records; ``tao_job_record.py list`` streams)."""
        for stem, path in self.listed_names():
            if path is None:
                yield self.quarantined_entry(stem)
                continue
            try:
                yield self._parse(path, read_text(path))
            except (TaoBrevError, OSError, UnicodeDecodeError) as exc:   # not UTF-8: damaged too
                entry = self.damaged_entry(stem, path, exc)
                if entry is not None:
                    yield entry

    def listed_names(self) -> Iterator[tuple[str, str | None]]:
        """``(stem, path of jobs/<stem>.json)`` of every entry :meth:`iter_list` lists, sorted by
        stem; the path is None for a record only in quarantine. Removes dead writers' temp files first."""
        if not self.jobs_dir.is_dir():
            return
        sweep_temp(self.jobs_dir)   # temp files of writers killed before their link/rename
        stems = _json_stems(self.jobs_dir)
        quarantined = {stem for stem in _json_stems(self.quarantine_dir) if ID_RE.fullmatch(stem)}
        jobs = os.path.join(self.jobs_dir, "")   # paths as strings: pathlib costs as much as the read
        for stem in sorted(stems | quarantined):
            yield stem, (f"{jobs}{stem}.json" if stem in stems else None)

    def note_held_ids(self) -> None:
        """Every job id this store holds (``jobs/<id>.json``, names only this store writes) is one the
        bundle minted: tell ``known_secrets`` before a listing makes its redactor, so a variable equal
        to one does not hide it (``known_secrets.minted``)."""
        known_secrets.minted(stem for stem, path in self.listed_names() if path is not None and ID_RE.fullmatch(stem))

def record_problem(record: RecordDocument) -> str | None:
    """What makes ``record`` no record of schema_version 1, or None (``record_schema.problem``)."""
    return record_schema.problem(record)


def current_state(record: RecordDocument) -> str:
    """The last transition's state (the record's view, not the backend's)."""
    transitions = record.get("transitions") or []
    return transitions[-1]["state"] if transitions else JobState.UNKNOWN
