"""Results that live only on an instance: copied back here before the instance is deleted.

A job routed with no destination (kind ``ephemeral``: no ``TAO_RESULTS_ROOT``,
no bucket; see ``tao_brev.routing``) writes its results on the instance disk
only, and ``brev delete`` destroys that disk. Before any delete of the instance
(``teardown``), for every such job on it not yet saved:

1. in the teardown's one ``brev exec`` (after ``docker rm -f``: the job no longer
   writes), the results dir becomes one gzip tar on the instance
   (``~/tao-jobs/<job_id>/results.tar.gz``) whose sha256 and size the instance
   prints (:func:`sections`, ``remote.archive_results``);
2. ``brev copy INSTANCE:tao-jobs/<job_id>/results.tar.gz LOCAL.part`` (scp: only
   paths on argv), then the local sha256 and size are compared with the
   instance's; only a match renames it to ``$TAO_STATE_DIR/brev/results/<job_id>.tar.gz``
   and records ``results.saved`` in the sidecar (:func:`fetch`).

Anything not verified so refuses the delete (``RESULTS_ONLY_ON_INSTANCE``,
:func:`refusal`): the instance keeps running (it bills) and a rerun of the same
teardown tries again; ``--discard-results`` deletes without saving (recorded
as ``results.discarded_at``). Kind ``s3`` (verified in S3 instead) and kind
``local`` (``TAO_RESULTS_ROOT``: the results' chosen home is the instance, its
delete only warns) are not copied here.
"""

from __future__ import annotations

import os
import re
import tarfile
import zlib
from pathlib import Path
from typing import Optional

from .. import nextstep, remote, s3 as storage
from ..secrets import archive_names, redact
from ..context import Context, say
from ..errors import TaoBrevError
from ..fsio import private_dir
from ..model import JobSidecar
from ..model.answer_types import TeardownAnswerResultsSavedItem
from ..records import now_iso

COPY_TIMEOUT_S = 3600.0   # one archive of the whole results dir through scp
ARCHIVE_TIMEOUT_S = 3600.0   # the exec that writes that archive on the instance (tar + gzip + sha256)
ARCHIVE_NAME = "results.tar.gz"
_ARCHIVED = re.compile(r"^TAO_ARCHIVE ([0-9a-f]{64}) ([0-9]+)$", re.MULTILINE)
# a job's results copied back (the sidecar's ``results.saved``; with its job_id, an answer's ``results_saved``)
Saved = TeardownAnswerResultsSavedItem


def pending(ctx: Context, sidecars: list[JobSidecar]) -> list[JobSidecar]:
    """The sidecars (of jobs on one instance) whose results live only there and are
    neither saved here nor discarded."""
    out = []
    for side in sidecars:
        results = side.results or {}
        if (results.get("kind") == "ephemeral" and results.get("instance_dir") and not results.get("saved")
                and not results.get("discarded_at")):
            out.append(side)
    return out


def remote_archive(job_id: str) -> str:
    return remote.join(remote.job_dir(job_id), ARCHIVE_NAME)


def local_archive(ctx: Context, job_id: str) -> Path:
    return ctx.state_root / "brev" / "results" / f"{job_id}.tar.gz"


def _job_id(side: JobSidecar) -> str:
    """The job of a sidecar :func:`pending` found (one without its id is damaged: BAD_JOB_ID)."""
    if not side.job_id:
        raise TaoBrevError("BAD_JOB_ID", "a job's sidecar names no job id: its results cannot be saved")
    return side.job_id


def _results_dir(side: JobSidecar) -> str:
    """The results dir on the instance of a sidecar :func:`pending` found."""
    return (side.results or {})["instance_dir"]


def sections(token: str, sidecars: list[JobSidecar]) -> list[str]:
    """The exec sections (``save:<job_id>``) that archive each job's results dir on the instance."""
    return [remote.section(token, f"save:{side.job_id}",
                           remote.archive_results(_results_dir(side), remote_archive(_job_id(side))))
            for side in sidecars]


def fetch(ctx: Context, instance: str, sidecars: list[JobSidecar],
          archived: dict[str, remote.Section]) -> tuple[list[Saved], list[str]]:
    """Copy each archive of ``archived`` (``save:<job_id>`` -> exec section) back and verify it.

    Returns (saved: [{job_id, path, sha256, bytes}], problems: one line per job
    whose results are still only on ``instance``). Never raises for a failed copy."""
    saved: list[Saved] = []
    problems: list[str] = []
    for side in sidecars:
        job_id = _job_id(side)
        try:
            entry = _fetch_one(ctx, instance, job_id, archived.get(f"save:{job_id}"))
        except TaoBrevError as exc:
            problems.append(f"job {job_id}: results only on {instance} ({_results_dir(side)}): "
                            f"{exc.message}")
            say(f"results {job_id}: NOT saved from {instance}: {exc.message}")
            continue
        ctx.sidecars.update(job_id, results={"saved": entry})
        saved.append({"job_id": job_id, **entry})
    return saved, problems


def _fetch_one(ctx: Context, instance: str, job_id: str, section: Optional[remote.Section]) -> Saved:
    if section is None:
        raise TaoBrevError("RESULTS_ONLY_ON_INSTANCE", "not archived on the instance in this run")
    if "TAO_NO_RESULTS" in section.output.split():
        return {"path": None, "sha256": None, "bytes": 0, "at": now_iso(), "note": "no results dir on the instance"}
    found = _ARCHIVED.search(section.output)
    if section.exit_code != 0 or not found:
        raise TaoBrevError("RESULTS_ONLY_ON_INSTANCE", f"archiving on the instance failed (exit "
                           f"{section.exit_code}): {redact.tail(section.output, 300)}")
    sha256, size = found.group(1), int(found.group(2))
    target = local_archive(ctx, job_id)
    private_dir(target.parent)
    part = target.with_name(target.name + ".part")
    say(f"results {job_id}: copying {size} bytes from {instance} to {target}")
    try:
        # scp's remote side is relative to the home directory ("NAME:tao-jobs/...")
        ctx.brev.copy(f"{instance}:{remote_archive(job_id)[2:]}", str(part), timeout=COPY_TIMEOUT_S)
        got_size, got_sha = part.stat().st_size, storage.file_checksum(part)
    except (TaoBrevError, OSError) as exc:
        part.unlink(missing_ok=True)
        raise TaoBrevError("RESULTS_ONLY_ON_INSTANCE", f"brev copy failed: {getattr(exc, 'message', exc)}") from None
    if (got_size, got_sha) != (size, sha256):
        part.unlink(missing_ok=True)
        raise TaoBrevError("RESULTS_ONLY_ON_INSTANCE", f"the copy does not match the instance's archive "
                           f"({got_size} bytes, sha256 {got_sha[:12]}... here; {size} bytes, sha256 "
                           f"{sha256[:12]}... there)")
    os.chmod(part, 0o600)   # what the job wrote, unredacted: the owner's only (scp keeps the remote mode)
    renamed = _names_as_digests(part)   # a member name holding a known value: kept as its digest only
    if renamed:
        size, sha256 = part.stat().st_size, storage.file_checksum(part)
    os.replace(part, target)
    return {"path": str(target), "sha256": sha256, "bytes": size, "at": now_iso(),
            **({"names_as_digests": renamed} if renamed else {})}


def _names_as_digests(part: Path) -> int:
    """Rewrite the copied archive with each member name holding a known value as its digest
    (``secrets.archive_names``); how many were renamed."""
    clean = part.with_name(part.name + ".names")
    try:
        try:
            renamed = archive_names.rewrite_without_tainted(part, clean)
        except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:   # names unchecked: keep nothing
            part.unlink(missing_ok=True)
            raise TaoBrevError("RESULTS_ONLY_ON_INSTANCE", f"the copied archive is no readable tar.gz, so its "
                               f"file names cannot be checked ({type(exc).__name__})") from None
        if renamed:
            os.chmod(clean, 0o600)
            os.replace(clean, part)
        return renamed
    finally:
        clean.unlink(missing_ok=True)


def save_from(ctx: Context, instance: str, sidecars: list[JobSidecar]) -> tuple[list[Saved], list[str]]:
    """Archive (one ``brev exec``) and :func:`fetch` the results of ``sidecars`` from ``instance``
    when no teardown exec carries the archive (``teardown.py --orphans --delete``)."""
    token = remote.new_token()
    try:
        done = ctx.brev.exec(instance, "\n".join(sections(token, sidecars)), timeout=ARCHIVE_TIMEOUT_S,
                             idempotent=True)
    except TaoBrevError as exc:
        return [], [f"job {side.job_id}: results only on {instance}: could not archive them: {exc.message}"
                    for side in sidecars]
    return fetch(ctx, instance, sidecars, remote.parse_sections(done.stdout, token))


def refusal(job_id: str, instance: str, problems: list[str], argv_flag: str) -> TaoBrevError:
    """RESULTS_ONLY_ON_INSTANCE: the delete is refused; the fix names the retry and the explicit discard."""
    retry = nextstep.command("teardown.py", job_id, *([argv_flag] if argv_flag else []))
    discard = nextstep.command("teardown.py", job_id, "--delete-instance", "--discard-results")
    return TaoBrevError("RESULTS_ONLY_ON_INSTANCE",
                        f"not deleting {instance} (it still runs and bills): " + "; ".join(problems),
                        f"Run {retry} again: it archives, copies back and verifies the results, then deletes. "
                        f"To delete anyway and lose them: {discard}")


def mark_discarded(ctx: Context, sidecars: list[JobSidecar]) -> list[str]:
    """``--discard-results``: remember that the results of these jobs were knowingly left to the delete."""
    at = now_iso()
    for side in sidecars:
        ctx.sidecars.update(_job_id(side), results={"discarded_at": at})
    return [_job_id(side) for side in sidecars]
