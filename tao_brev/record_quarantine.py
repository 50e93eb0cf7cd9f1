"""Damaged records (``RecordStore``'s part that keeps them apart): a record that does not read is
moved, bytes intact, to ``jobs/quarantine/<id>.json`` and answered as CORRUPT_RECORD naming that
path; ``teardown.py <id>`` closes it (``jobs/quarantine/closed/``). See ``records``' module doc."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:   # type hints only: typing_extensions is mypy's, not a dependency (the package runs on 3.9)
    from typing_extensions import TypeIs

    from .model.answer_types import RecordDocument

from .errors import TaoBrevError
from .fsio import locked, private_dir, read_bytes_or_error, read_text
from .record_schema import ID_RE, check_job_id


class QuarantinedEntry(TypedDict):
    """The listing's entry of a record in quarantine (never its bytes)."""
    id: str
    corrupt: bool
    quarantined: str
    error: str


def is_quarantined(entry: RecordDocument | QuarantinedEntry) -> TypeIs[QuarantinedEntry]:
    """A listing's entry of a record in quarantine (a record never has ``corrupt``: the schema's)."""
    return "corrupt" in entry


class Quarantine:
    """The quarantine of a ``RecordStore`` (which gives ``jobs_dir``, ``path`` and ``_parse``)."""

    if TYPE_CHECKING:   # RecordStore's, which the quarantine uses
        jobs_dir: Path

        def path(self, job_id: str) -> Path: ...

        @staticmethod
        def _parse(path: Path | str, text: str | bytes | OSError) -> RecordDocument: ...

    # -- damaged records ------------------------------------------------------
    @property
    def quarantine_dir(self) -> Path:
        return self.jobs_dir / "quarantine"

    def quarantined(self, job_id: str) -> Path | None:
        """The quarantined (damaged, not yet closed) record of ``job_id``, or None."""
        path = self.quarantine_dir / f"{check_job_id(job_id)}.json"
        return path if path.exists() else None

    def closed_quarantine(self, job_id: str) -> Path | None:
        """The damaged record of ``job_id`` that a teardown closed, or None."""
        path = self.quarantine_dir / "closed" / f"{check_job_id(job_id)}.json"
        return path if path.exists() else None

    def quarantine(self, job_id: str) -> Path | None:
        """Move the damaged ``jobs/<id>.json`` (bytes intact) to ``jobs/quarantine/<id>.json``
        under the record lock; returns where it is now, or None when the record reads
        intact (repaired meanwhile: nothing moved)."""
        path = self.path(job_id)
        target = self.quarantine_dir / path.name
        with locked(path):
            try:
                self._parse(path, read_bytes_or_error(path))
                return None
            except FileNotFoundError:
                return self.quarantined(job_id) or self.closed_quarantine(job_id) or target
            except TaoBrevError:
                pass
            private_dir(self.quarantine_dir)   # 0700, like the state dir
            if target.exists():   # an earlier damaged copy under this id stays as it is
                target = self.quarantine_dir / f"{path.stem}.{uuid.uuid4().hex[:6]}.damaged"
            os.replace(path, target)
        return target

    def close_quarantined(self, job_id: str) -> Path | None:
        """Close a quarantined record (its job was torn down): it moves to
        ``jobs/quarantine/closed/<id>.json`` and is no longer listed. None when there was none."""
        source = self.quarantined(job_id)
        if source is None:
            return self.closed_quarantine(job_id)
        closed = self.quarantine_dir / "closed"
        private_dir(closed)
        os.replace(source, closed / source.name)
        return closed / source.name

    def quarantined_entry(self, stem: str) -> QuarantinedEntry:
        """The listing's entry of ``stem`` when only ``jobs/quarantine/<stem>.json`` holds it."""
        return self._quarantined_entry(self.quarantine_dir / f"{stem}.json")

    def damaged_entry(self, stem: str, path: str, exc: BaseException) -> QuarantinedEntry | RecordDocument | None:
        """What the listing gives for ``path`` (``jobs/<stem>.json``) that did not read as a record
        (``exc``): quarantined, ``{"id", "corrupt": True, "quarantined", "error"}``; the record when
        it reads intact now (rewritten meanwhile); None for a name that is no job id (skipped)."""
        if not ID_RE.fullmatch(stem):
            return None
        where = self.quarantine(stem)
        if where is None:
            return self._parse(path, read_text(path))
        return {"id": stem, "corrupt": True, "quarantined": str(where),
                "error": quarantine_error(stem, where, str(exc)).message}

    def quarantined_entries(self) -> list[QuarantinedEntry]:
        """``{"id", "corrupt": True, "quarantined": path, "error"}`` for each quarantined record not closed."""
        return [self._quarantined_entry(self.quarantine_dir / f"{stem}.json")
                for stem in sorted(json_stems(self.quarantine_dir)) if ID_RE.fullmatch(stem)]

    @staticmethod
    def _quarantined_entry(path: Path) -> QuarantinedEntry:
        return {"id": path.stem, "corrupt": True, "quarantined": str(path),
                "error": quarantine_error(path.stem, path, "it was damaged").message}



def json_stems(directory: Path) -> set[str]:
    """The names without ``.json`` of the ``*.json`` entries of ``directory`` (what
    ``Path.glob("*.json")`` finds: no hidden names), or none when it is not a directory."""
    try:
        with os.scandir(directory) as entries:
            return {e.name[:-5] for e in entries if e.name.endswith(".json") and not e.name.startswith(".")}
    except (FileNotFoundError, NotADirectoryError):
        return set()


def quarantine_error(job_id: str, where: Path, why: str) -> TaoBrevError:
    closed = where.parent.name == "closed"
    state = ("closed by teardown: nothing of this job is left to remove" if closed else
             "quarantined so that it blocks no other job")
    fix = (f"Nothing to do for {job_id}; submit again (--retry-of cannot name it) if the job is still wanted."
           if closed else
           f"Run teardown.py {job_id}: it removes any container of the job (its instance is in the sidecar) "
           "and closes the record; then submit again if the job is still wanted. The damaged bytes are kept "
           f"in {where}.")
    return TaoBrevError("CORRUPT_RECORD", f"the record of {job_id} is damaged ({why}); {state}: {where}", fix,
                        answer={"job_id": job_id})


