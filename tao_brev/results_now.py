"""Where a job's results are now, for ``tao_job_record.py list`` and ``show``.

The record's ``results_dir`` is bound at open and never re-derived (the bank's contract): for a
job whose results lived only on its instance (kinds ``ephemeral`` and ``local``, see
``tao_brev.routing``) it stays the instance path after ``brev delete`` destroyed that disk. The
listing and ``show`` answer a view of the record instead, once the job's sidecar says the instance
was deleted (``instance_deleted_at``, written by ``teardown.delete_and_record`` for a teardown's
delete and the orphan clean-up's alike):

- ``results_dir``: where the results are now - the copy the teardown saved and verified here
  (``results.saved.path``, ``verbs.keep``), else the record's own value (the S3 URI for kind
  ``s3``; the dead instance path when nothing survives, said so below);
- ``instance_copy`` (an extra field, never in the record file): ``{deleted_at, instance, path (the
  results dir the instance had), results}``, ``results`` one of :data:`RESULTS`.

The record file is not touched: its required fields keep their bound values.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from .errors import TaoBrevError
from .fsio import read_text
from .model import JobSidecar
from .record_quarantine import is_quarantined
from .secrets import safe_read
from .sidecar import SidecarStore

if TYPE_CHECKING:   # type hints only (the answer types cost ~10 ms to import)
    from .model.answer_types import RecordDocument, RecordDocumentInstanceCopy
    from .record_quarantine import QuarantinedEntry

# What is left of the results once the instance is gone (``instance_copy.results``).
RESULTS = {
    "copied_here": "saved and verified here before the delete; results_dir is that copy",
    "s3": "uploaded and verified in S3 before the delete; results_dir is the S3 URI",
    "s3_unverified": "the delete was forced before S3 held them all; results_dir is the S3 URI",
    "none": "the instance held no results dir",
    "discarded": "deleted with the instance (teardown --discard-results)",
    "lost": "deleted with the instance (they lived only there); results_dir is the path that was deleted",
}
_TSV = {"copied_here": "instance copy deleted", "s3": "instance copy deleted",
        "s3_unverified": "instance copy deleted; results in S3 unverified", "none": "instance deleted; no results",
        "discarded": "instance deleted; results discarded", "lost": "instance deleted; results lost"}


def sidecar_path(state_root: Path, job_id: str) -> str | None:
    """The job's sidecar (``SidecarStore.path``); None for a name that is no job id (no sidecar)."""
    try:
        return str(SidecarStore(state_root).path(job_id))
    except TaoBrevError:
        return None


def view(record: RecordDocument | QuarantinedEntry, state_root: Path) -> RecordDocument | QuarantinedEntry:
    """``record`` as the listing and ``show`` answer it (the module doc); a damaged or missing
    sidecar, a record the bank's tool made, an instance not deleted: the record as it is."""
    if is_quarantined(record) or not isinstance(record.get("id"), str):
        return record
    path = sidecar_path(state_root, record["id"])
    sidecar = _deleted_sidecar(path) if path else JobSidecar()
    deleted_at = sidecar.instance_deleted_at
    if not isinstance(deleted_at, str):
        return record
    results = sidecar.results if isinstance(sidecar.results, dict) else {}
    saved = results.get("saved")
    saved = saved if isinstance(saved, dict) else {}
    here = saved.get("path") if isinstance(saved.get("path"), str) and saved["path"] else None
    if here:
        left = "copied_here"
    elif results.get("kind") == "s3":
        left = "s3" if results.get("verified") else "s3_unverified"
    elif saved:
        left = "none"
    else:
        left = "discarded" if results.get("discarded_at") else "lost"
    copy: RecordDocumentInstanceCopy = {"deleted_at": deleted_at, "instance": sidecar.instance,
                                        "path": results.get("instance_dir") or record["results_dir"], "results": left}
    out: RecordDocument = {**record, "instance_copy": copy}
    if here:   # results_dir is a required field: its place in the document is kept
        out["results_dir"] = here
    return out


def _deleted_sidecar(path: str) -> JobSidecar:
    """The sidecar at ``path`` when it names an instance delete, else an empty one (also when it is missing,
    damaged or no regular file). A sidecar without the word is not parsed (a listing reads thousands)."""
    try:
        text = read_text(path)
    except (OSError, ValueError):   # not there, no regular file, not UTF-8
        return JobSidecar()
    if '"instance_deleted_at"' not in text:
        return JobSidecar()
    try:
        data = safe_read.loads(text)
    except ValueError:
        return JobSidecar()
    return JobSidecar.from_json(data) if isinstance(data, dict) else JobSidecar()


def tsv_note(entry: RecordDocument | QuarantinedEntry) -> str | None:
    """The listing line's fifth field for a job whose instance was deleted, else None."""
    copy = None if is_quarantined(entry) else entry.get("instance_copy")
    return _TSV.get(copy.get("results", ""), "instance deleted") if isinstance(copy, dict) else None
