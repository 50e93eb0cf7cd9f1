"""``--resume-from`` a job whose results were kept here: the checkpoint from the teardown's archive.

A job whose results had no destination is archived on its instance and copied home
(``verbs/keep.py``: ``$TAO_STATE_DIR/brev/results/<job_id>.tar.gz``, its sha256 recorded in
the sidecar's ``results.saved``) before the instance is deleted. ``tar`` keeps the
``*_latest.pth`` link as a link, so the archive still says which checkpoint is the latest.
Resuming from it (source ``home``):

1. here, before a record opens: the archive's sha256 must equal the recorded one; the
   checkpoint is chosen as for S3 results (``resume.latest_checkpoint``: the link's target,
   else the highest epoch and step) and its sha256 computed from the archive member;
2. after the record opens: that one member is extracted to a private temporary file and
   copied to the new job's instance with ``brev copy`` (one copy, the checkpoint's bytes);
3. in the launch round trip: moved to ``~/tao-jobs/<id>/resume/<path>`` and checked (size and
   sha256) before ``docker run`` (``RESUME_CHECKPOINT_MISSING`` otherwise).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Callable, Optional, Sequence

from . import remote
from . import s3 as storage
from .errors import TaoBrevError
from .model.answer_types import Checkpoint, ResultsLinksItem
from .transport import Brev

if TYPE_CHECKING:   # type hints only: resume imports this module
    from .results_manifest import ManifestFile

# resume.latest_checkpoint: the checkpoint of a manifest and its links
Pick = Callable[[Sequence["ManifestFile"], Sequence[ResultsLinksItem]], Optional[Checkpoint]]

CHUNK = 1 << 20


def members(archive: Path) -> tuple[list[ManifestFile], list[ResultsLinksItem], dict[str, str]]:
    """(files [{path, size, sha256: "" (not read)}], links [{path, target, dangling}], path -> member
    name) of a results archive, paths relative to the results dir (the archive's top directory)."""
    files: list[ManifestFile] = []
    links: list[ResultsLinksItem] = []
    names: dict[str, str] = {}
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            rel = member.name.split("/", 1)[1] if "/" in member.name else ""
            if not rel:
                continue
            if member.isfile():
                files.append({"path": rel, "size": member.size, "sha256": ""})   # only the chosen one is read
                names[rel] = member.name
            elif member.issym():
                links.append({"path": rel, "target": member.linkname, "dangling": False})
    return files, links, names


def _copy_member(archive: Path, name: str, out: Optional[BinaryIO]) -> str:
    """Stream member ``name`` of ``archive`` into ``out`` (a binary file or None); its sha256."""
    digest = hashlib.sha256()
    with tarfile.open(archive, "r:gz") as tar:
        handle = tar.extractfile(name)
        if handle is None:   # no regular file now: the archive changed since its members were listed
            raise TaoBrevError("RESUME_CHECKPOINT_MISSING", f"{archive} changed while it was read ({name} is no file)")
        for block in iter(lambda: handle.read(CHUNK), b""):
            digest.update(block)
            if out is not None:
                out.write(block)
    return digest.hexdigest()


def choose(old_id: str, archive: Path, sha256: str, pick: Pick) -> tuple[Checkpoint, str]:
    """The checkpoint of the kept ``archive`` whose sha256 ``results.saved`` recorded: (``{"path", "size",
    "sha256", "link", "archive"}``, its member name). ``pick`` is ``resume.latest_checkpoint``.
    Raises RESUME_NOT_POSSIBLE (archive missing, changed since it was verified, no checkpoint)."""
    if not archive.is_file():
        raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {old_id}: its kept results {archive} are gone")
    if storage.file_checksum(archive) != sha256:
        raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {old_id}: {archive} is not the archive verified "
                           "at the teardown (its sha256 differs)")
    files, links, names = members(archive)
    chosen = pick(files, links)
    if chosen is None:
        raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {old_id}: {archive} holds no checkpoint "
                           "(model_epoch_*.pth)")
    member = names[chosen["path"]]
    chosen["sha256"] = _copy_member(archive, member, None)
    chosen["archive"] = str(archive)
    return chosen, member


def push(brev: Brev, instance: str, new_job: str, checkpoint: Checkpoint, member: str) -> str:
    """Extract the chosen member to a private temporary file, ``brev copy`` it to the instance's
    home; its instance path (``~/.tao-resume-<job_id>-<random>.pth``). Raises the copy's error."""
    target = f"~/.tao-resume-{remote.check_name(new_job, 'job id')}-{uuid.uuid4().hex[:10]}.pth"
    local_dir = tempfile.mkdtemp(prefix="tao-resume-")
    try:
        local = os.path.join(local_dir, "checkpoint.pth")
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            digest = _copy_member(Path(checkpoint["archive"]), member, out)
        if digest != checkpoint["sha256"]:
            raise TaoBrevError("RESUME_CHECKPOINT_MISSING", f"{checkpoint['archive']} changed while it was read")
        brev.copy(local, f"{instance}:{target[2:]}")   # scp: relative to the home directory
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)
    return target


def lines(host_dir: str, checkpoint: Checkpoint, uploaded: Optional[str], missing: str, exit_code: int) -> str:
    """Shell lines (before ``docker run``): the uploaded file moved under ``host_dir``, then its
    size and sha256 checked; ``missing`` and ``exit_code`` otherwise."""
    path = checkpoint["path"]
    target = remote.rpath(remote.join(host_dir, path))
    fail = f'{{ echo "{missing} {path}"; exit {exit_code}; }}'
    source = remote.rpath(uploaded) if uploaded else '"$HOME"/.tao-resume-JOB_ID-RANDOM.pth'
    parent = remote.rpath(remote.join(host_dir, path.rsplit("/", 1)[0] if "/" in path else "."))
    return "\n".join([
        f"if [ -e {source} ]; then mkdir -p {parent} && mv -f {source} {target} || {fail}; fi",
        f'[ -f {target} ] && [ "$(wc -c < {target})" -eq {int(checkpoint["size"])} ] && '
        f'[ "$(sha256sum < {target} | cut -c1-64)" = {shlex.quote(checkpoint["sha256"])} ] || {fail}',
    ])
