"""Results of S3-routed jobs: upload from the instance, verify from here, before any delete.

A job whose results are routed to S3 (kind ``s3``: tiers B and C, and tier A
with a bucket) writes them on the instance disk (its results dir, mounted at
``/results``). Once the job is terminal, :func:`finalize`:

1. copies the credentials (``S3Settings.container_env``) in a 0600 file
   (``credentials.push``, ``brev copy``);
2. in ONE ``brev exec``: makes the MANIFEST on the instance (``find``,
   ``stat``, ``sha256sum``) and uploads the results dir with the carrier
   (``aws s3 sync``, ``upload_excludes`` honoured) - ``staging.results_script``;
3. verifies from this machine with boto3 (``storage.verify_against_manifest``:
   every manifest entry present with the same size and sha256), the
   ``upload_excludes`` taken out of the manifest first;
4. records the outcome in the sidecar (``results``: uploaded, verified,
   files, bytes, missing, mismatched, unreadable, error) and the manifest in
   ``$TAO_STATE_DIR/brev/manifests/<id>.json``. A later run merges its
   manifest into that one: a file once listed stays required, so a result
   lost both in S3 and on the instance is reported, never forgotten.

Verified means by content: every file of the instance-side manifest is in the
destination with its size and sha256, whoever put it there - a failed upload
step does not unverify files that are there (say, uploaded by hand); its
error is kept as ``upload_error``. Symbolic links are recorded as links
(``links``: path, target, dangling), not uploaded (see
``staging.results_script``); a dangling ``*_latest.pth`` blocks nothing.

Once per job: an attempt runs under a per-job lock; a poller that waited for
it takes the outcome of the attempt made meanwhile instead of uploading again.

It is idempotent: verified results are never uploaded again. Callers:
``poll_status`` when it sees the job terminal, ``teardown`` after removing the
container. Before an instance is deleted, :func:`recheck` LISTs the
destination of every verified job on it (no download): an object lost since
the verification makes the results unverified again and blocks the delete;
the next poll or teardown uploads them again from the instance.
"""

from __future__ import annotations

from typing import Optional

from .. import credentials, remote, resume, s3 as staging, s3 as storage
from ..context import Context, say
from ..errors import TaoBrevError
from ..fsio import locked, private_dir
from ..secrets import redact
from ..secrets.file_names import stored_names
from ..records import is_terminal, now_iso
from ..results_manifest import ManifestFile, ManifestLink, load_links, load_manifest  # noqa: F401 (handed on)
from ..results_manifest import load_manifest as _load_manifest
from ..results_manifest import manifest_path as _manifest_path
from ..results_manifest import save_manifest as _save_manifest
from . import reconcile
from ..model import JobSidecar
from ..model.answer_types import ErrorObject, Results
from ..model.answer_types import RecordDocument
from ..model.sidecar_parts import JobResults

RESULTS_TIMEOUT_S = 3600.0   # one round trip uploads the whole results dir
LISTED = 20                  # file names shown in answers and messages


def summary(results: JobResults) -> Results:
    """The ``results`` object of an answer, from the sidecar's ``results``."""
    out: Results = {"kind": results.get("kind"), "destination": results.get("destination"),
                    "instance_dir": results.get("instance_dir")}
    if results.get("kind") == "s3":
        out.update({"uploaded": bool(results.get("uploaded")), "verified": bool(results.get("verified"))})
        for key in ("files", "bytes", "excluded", "verified_at", "note", "latest_checkpoint"):
            if results.get(key) is not None:
                out[key] = results[key]
        out["missing"] = list(results.get("missing") or [])[:LISTED]
        out["mismatched"] = list(results.get("mismatched") or [])[:LISTED]
        out["unreadable"] = list(results.get("unreadable") or [])[:LISTED]
        if results.get("links"):
            out["links"] = list(results["links"])[:LISTED]
        error, upload_error = results.get("error"), results.get("upload_error")
        if error:
            out["error"] = error
        if upload_error:
            out["upload_error"] = upload_error
    return out


def describe_loss(results: Results | JobResults) -> str:
    """``missing a, b; mismatched c`` (or the last error) for blockers and messages: of an answer's
    ``results``, of the sidecar's (``JobSidecar.results``), or of an update of it."""
    parts = []
    for key, listed in (("missing", results.get("missing")), ("mismatched", results.get("mismatched")),
                        ("unreadable", results.get("unreadable"))):
        names = list(listed or [])
        if names:
            more = f" (+{len(names) - LISTED} more)" if len(names) > LISTED else ""
            parts.append(f"{key} {', '.join(names[:LISTED])}{more}")
    error = results.get("error")
    if not parts and error:
        parts.append(error.get("message", ""))
    return "; ".join(parts) or "not uploaded yet"


def finalize(ctx: Context, job_id: str) -> Optional[Results]:
    """Upload and verify the results of a terminal S3-routed job, once. Returns :func:`summary`.

    Never raises for S3 or transport trouble: the failure is recorded in the
    sidecar (``results.error``) and in the summary, the results stay
    unverified, and the next call tries again. None for a job without
    results routing (no sidecar).
    """
    sidecar = ctx.sidecars.load(job_id)
    results = sidecar.results or {}
    if not results:
        return None
    if results.get("kind") != "s3" or results.get("verified"):
        return summary(results)
    record = ctx.records.load(job_id)
    if not is_terminal(record.get("terminal_state")):
        return summary(results)
    if reconcile.launch_failed(sidecar):
        return summary(ctx.sidecars.update(job_id, results={
            "uploaded": False, "verified": True, "files": 0, "bytes": 0, "error": None,
            "verified_at": now_iso(), "note": "never launched: nothing to upload"}).results or {})
    seen = int(results.get("attempts") or 0)
    lock = _manifest_path(ctx, job_id).with_suffix(".upload")
    private_dir(lock.parent)   # the manifests dir: 0700
    with locked(lock):   # one attempt at a time per job, whichever process sees the end first
        results = ctx.sidecars.load(job_id).results or {}
        if results.get("verified") or int(results.get("attempts") or 0) > seen:
            return summary(results)   # another poller made an attempt while this one waited: its outcome
        ctx.sidecars.update(job_id, results={"attempts": seen + 1})
        try:
            results = _upload_and_verify(ctx, job_id, ctx.sidecars.load(job_id), record)
        except TaoBrevError as exc:
            say(f"results {job_id}: {exc.message}")
            results = ctx.sidecars.update(job_id, results={"verified": False, "error": exc.to_json(),
                                                           "checked_at": now_iso()}).results or {}
    return summary(results)


def _upload_and_verify(ctx: Context, job_id: str, sidecar: JobSidecar, record: RecordDocument) -> JobResults:
    results = sidecar.results or {}
    destination = storage.s3_uri(results["destination"])
    settings = storage.s3_settings(ctx.env, bucket=storage.parse_s3_uri(destination)[0])
    if settings.missing():
        raise TaoBrevError("MISSING_CREDENTIAL", f"S3 credentials needed to upload the results of {job_id} "
                           f"are not set: {', '.join(settings.missing())}")
    excludes = list(record.get("upload_excludes") or [])
    reported, upload_error = _upload(ctx, job_id, sidecar.instance, results["instance_dir"], destination,
                                     settings, excludes)
    kept: list[ManifestFile] = [e for e in reported.entries if not storage.is_excluded(e["path"], excludes)]
    manifest = _merge(_load_manifest(ctx, job_id) or [], kept)
    links: list[ManifestLink] = [link for link in reported.links if not storage.is_excluded(link["path"], excludes)]
    _save_manifest(ctx, job_id, manifest, links)

    report = storage.verify_against_manifest(settings, destination, manifest)
    mismatched = [m["path"] for m in report["mismatched"]]
    # By content: every manifest file is there with its sha256, whoever uploaded it.
    verified = report["verified"] and not reported.unreadable
    update: JobResults = {"uploaded": upload_error is None and reported.present, "verified": verified,
              "files": report["files"], "bytes": report["bytes"], "excluded": len(reported.entries) - len(kept),
              "missing": stored_names(report["missing"]), "mismatched": stored_names(mismatched),
              "unreadable": stored_names(reported.unreadable),
              "links": [{**link, "path": name} for link, name in zip(links, stored_names([x["path"] for x in links]))],
              "upload_error": upload_error, "error": None if verified else upload_error,
              "checked_at": now_iso()}
    update["latest_checkpoint"] = resume.latest_checkpoint(manifest, links) if verified else None
    notes = [_links_note(links)] if links else []
    if verified:
        update["verified_at"] = update["checked_at"]
        if upload_error is not None:
            notes.append("the upload step failed (upload_error), yet every file of the manifest is in the "
                         "destination with its sha256: verified by content")
    elif upload_error is None:
        update["error"] = TaoBrevError("S3_VERIFY_FAILED", f"{destination}: {describe_loss(update)}").to_json()
    update["note"] = "; ".join(notes) if notes else None
    say(f"results {job_id}: {report['files']} files, {report['bytes']} bytes in {destination}: "
        + ("verified" if verified else f"NOT verified ({describe_loss(update)})"))
    return ctx.sidecars.update(job_id, results=update).results or {}


def _links_note(links: list[ManifestLink]) -> str:
    """What the answer says about the symbolic links of a results dir."""
    dangling = [link["path"] for link in links if link.get("dangling")]
    text = (f"{len(links)} symbolic link(s) recorded as links, not uploaded (a target inside the results dir is "
            f"uploaded and verified under its own name)")
    if dangling:
        text += f"; dangling, ignored: {', '.join(dangling[:LISTED])}"
    return text


def _upload(ctx: Context, job_id: str, instance: Optional[str], results_dir: str, destination: str,
            settings: storage.S3Settings, excludes: list[str]) -> tuple[staging.InstanceManifest, Optional[ErrorObject]]:
    """The one round trip: (the instance's manifest, the upload's error as JSON or None)."""
    if not instance:   # a sidecar without its instance: nothing to upload from (no brev call with no name)
        raise TaoBrevError("RESULTS_UPLOAD_FAILED", f"the instance of {job_id} is not recorded: its results "
                           "cannot be uploaded")
    say(f"results {job_id}: uploading {results_dir} on {instance} to {destination}")
    cred = credentials.push(ctx.brev, instance, f"{job_id}-results",
                            credentials.env_file_text(settings.container_env()))
    carrier = staging.Carrier(staging.carrier_image(ctx.env), cred.path, job_id,
                              path_style=bool(settings.endpoint_url))
    token = remote.new_token()
    try:
        done = ctx.brev.exec(instance, staging.results_script(carrier, results_dir, destination, excludes, token),
                             timeout=RESULTS_TIMEOUT_S)
    except TaoBrevError:
        credentials.discard(ctx.brev, instance, cred)   # its trap never fired
        raise
    sections = remote.parse_sections(done.stdout, token)
    if "manifest" not in sections or "upload" not in sections:
        raise TaoBrevError("RESULTS_UPLOAD_FAILED", f"incomplete answer from {instance} while uploading "
                           f"the results of {job_id} (exit {done.exit_code})")
    upload = sections["upload"]
    error: Optional[ErrorObject] = None
    if upload.exit_code != 0:
        error = TaoBrevError("RESULTS_UPLOAD_FAILED", f"aws s3 sync on {instance} exited {upload.exit_code}: "
                             f"{redact.tail(upload.output, 500)}").to_json()
    return staging.parse_manifest(sections["manifest"].output), error


def recheck(ctx: Context, job_id: str) -> JobResults:
    """LIST the destination of verified results; a lost or resized object unverifies them.

    Cheap (no download): catches objects deleted or truncated since the
    verification (a lifecycle rule, another job, a hand). Returns the
    sidecar's (possibly updated) ``results``. Raises the storage error when
    the store cannot be listed (the verified state is then left as it was).
    """
    sidecar = ctx.sidecars.load(job_id)
    results = sidecar.results or {}
    if results.get("kind") != "s3" or not results.get("verified"):
        return results
    manifest = _load_manifest(ctx, job_id)
    if manifest is None:
        return results
    destination = storage.s3_uri(results["destination"])
    settings = storage.s3_settings(ctx.env, bucket=storage.parse_s3_uri(destination)[0])
    listed = staging.list_sizes(settings, destination)
    missing = [e["path"] for e in manifest if e["path"] not in listed]
    resized = [e["path"] for e in manifest if e["path"] in listed and listed[e["path"]] != e["size"]]
    if not missing and not resized:
        return results
    error = TaoBrevError("S3_VERIFY_FAILED", f"{results['destination']} changed after its verification: "
                         + describe_loss({"missing": missing, "mismatched": resized})).to_json()
    return ctx.sidecars.update(job_id, results={"verified": False, "missing": missing, "mismatched": resized,
                                                "error": error, "checked_at": now_iso()}).results or {}


def recheck_instance(ctx: Context, instance: str) -> list[str]:
    """:func:`recheck` every job on ``instance``; the jobs whose store could not be listed, as blockers."""
    problems = []
    for side in ctx.sidecars.all():
        if side.instance == instance and side.job_id:
            try:
                recheck(ctx, side.job_id)
            except TaoBrevError as exc:
                problems.append(f"job {side.job_id}: results could not be listed again: {exc.message}")
    return problems


def _merge(previous: list[ManifestFile], current: list[ManifestFile]) -> list[ManifestFile]:
    """A file once in the manifest stays required (gone from the instance since, it must be in S3);
    the instance's current size and sha256 win for a path it still has."""
    merged = {e["path"]: e for e in previous}
    merged.update((e["path"], e) for e in current)
    return [merged[path] for path in sorted(merged)]
