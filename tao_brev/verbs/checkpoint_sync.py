"""While a recovering wait runs: a live S3-routed train job's newest checkpoint reaches S3.

Results routed to S3 are uploaded when the job ends (``results.finalize``); an instance deleted
under the job takes them along. ``poll_status.py --wait --recover N`` therefore uploads the
results dir so far every ``--sync-every S`` seconds (the same carrier round trip as the final
upload: ``results._upload``) and verifies the newest checkpoint's object in S3 (size and sha256,
``storage.verify_against_manifest``). Only that verified checkpoint enters the job's manifest and
the sidecar's ``results.checkpoint_sync`` ``{at, latest_checkpoint, links}``, so the final upload
is judged as before and ``submit.py --resume-from`` can stage it on another instance
(``tao_brev.resume.plan``). Never raises for S3 or transport trouble: the next sync tries again.
"""

from __future__ import annotations

from typing import Optional

from .. import resume
from .. import s3 as storage
from ..context import Context, say
from ..errors import TaoBrevError
from ..fsio import locked, private_dir
from ..model.answer_types import Checkpoint
from ..model.sidecar_parts import CheckpointSync
from ..records import is_terminal, now_iso
from . import results as results_mod
from .results import ManifestFile, ManifestLink

SYNC_EVERY_S = 300.0   # default seconds between two uploads of a live job's checkpoints


def wanted(ctx: Context, job_id: str) -> bool:
    """The job is live, of action train, its results go to S3 and are not verified yet."""
    results = ctx.sidecars.load(job_id).results or {}
    record = ctx.records.load(job_id)
    return (results.get("kind") == "s3" and not results.get("verified") and record.get("action") == "train"
            and not is_terminal(record.get("terminal_state")))


def sync(ctx: Context, job_id: str) -> Optional[CheckpointSync]:
    """One upload of ``job_id``'s results so far; returns the verified ``checkpoint_sync`` or None."""
    side = ctx.sidecars.load(job_id)
    results = side.results or {}
    destination = storage.s3_uri(results["destination"])
    settings = storage.s3_settings(ctx.env, bucket=storage.parse_s3_uri(destination)[0])
    if settings.missing():
        return None
    excludes = list(ctx.records.load(job_id).get("upload_excludes") or [])
    lock = results_mod._manifest_path(ctx, job_id).with_suffix(".upload")
    private_dir(lock.parent)
    try:
        with locked(lock):   # never beside the final upload of the same job
            reported, error = results_mod._upload(ctx, job_id, side.instance, results["instance_dir"],
                                                  destination, settings, excludes)
            entries: list[ManifestFile] = [e for e in reported.entries if not storage.is_excluded(e["path"], excludes)]
            links: list[ManifestLink] = [link for link in reported.links if not storage.is_excluded(link["path"], excludes)]
            chosen = resume.latest_checkpoint(entries, links)
            if chosen is None or chosen == (results.get("checkpoint_sync") or {}).get("latest_checkpoint"):
                return results.get("checkpoint_sync")
            entry = next(e for e in entries if e["path"] == chosen["path"])
            report = storage.verify_against_manifest(settings, destination, [entry], progress=None)
            if not report["verified"]:
                say(f"checkpoint sync {job_id}: {chosen['path']} not verified in S3 ({error or report})")
                return results.get("checkpoint_sync")
            manifest = results_mod._merge(results_mod.load_manifest(ctx, job_id) or [], [entry])
            results_mod._save_manifest(ctx, job_id, manifest, links)
            synced: CheckpointSync = {"at": now_iso(), "latest_checkpoint": chosen, "links": links}
            ctx.sidecars.update(job_id, results={"checkpoint_sync": synced})
    except TaoBrevError as exc:
        say(f"checkpoint sync {job_id}: {exc.code}: {exc.message}")
        return None
    say(f"checkpoint sync {job_id}: {chosen['path']} verified in {results['destination']}")
    return synced
