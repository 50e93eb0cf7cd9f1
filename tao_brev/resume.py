"""``submit.py --resume-from JOB_ID``: a new train job that continues from an earlier job's last checkpoint.

What TAO 7 does (tao-pytorch, the facts this module rests on):

* a train job writes its checkpoints in ``<results_dir>/train`` (``core/utilities.py:88``
  ``update_results_dir``: ``results_dir/<task>``), named ``model_epoch_EEE_step_SSSSS.pth``
  (``core/lightning/tao_lightning_module.py:90,103``: ``filename='model_{epoch:03d}_{step:05d}'``
  with ``CHECKPOINT_EQUALS_CHAR = "_"``), plus the link ``<prefix>_latest.pth``
  (``:94,102``: ``CHECKPOINT_NAME_LAST``, ``save_last='link'``); an exception checkpoint is
  linked the same way (``core/callbacks/model_checkpoint.py:29-31``). Lightning links only
  after the checkpoint was written, so the link's target is a whole file;
* a train job resumes from ``train.resume_training_checkpoint_path``, else from the
  ``*_latest.pth`` of its OWN results dir (``core/initialize_experiments.py:66``;
  ``core/utilities.py:109-118`` ``get_latest_checkpoint``: glob, then ``realpath``).

A new job has a fresh results dir, so it resumes only through the override: this module
mounts the old job's results read-only at ``/resume`` and sets
``train.resume_training_checkpoint_path=/resume/<checkpoint>``. Where the checkpoint comes from:

* ``instance``: the new job runs on the instance the old one ran on (not deleted since):
  its results dir there is mounted; the launch script (same round trip) picks the
  ``*_latest.pth`` link's target (a regular, non-empty file inside the results dir), else
  the checkpoint of the highest epoch and step, and prints ``TAO_RESUME_CHECKPOINT``;
* ``home``: its instance was deleted and a teardown kept its results here (a verified archive):
  the checkpoint is extracted from it and copied to the new instance (``resume_home``);
* ``s3``: the old job's results were uploaded and verified in S3 (another instance, or its
  instance is gone): the checkpoint is chosen here from the verified manifest and the
  link recorded beside it (``results.latest_checkpoint``, :func:`latest_checkpoint`), copied
  by the carrier into ``~/tao-jobs/<id>/resume/`` and checked (sha256) before ``docker run``.

Anything else is refused before a record opens (``RESUME_NOT_POSSIBLE``, the fix names
the command that works). A missing or corrupt checkpoint on the instance refuses the
launch (``RESUME_CHECKPOINT_MISSING``, exit 1, nothing launched).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence

from . import credentials, nextstep, remote, resume_home
from . import s3 as staging, s3 as storage
from .errors import TaoBrevError
from .model import JobSidecar
from .model.answer_types import Checkpoint, ResultsLinksItem, ResumeFrom
from .model.answer_types import RecordDocument
from .records import is_terminal
from .results_manifest import ManifestFile, load_links, load_manifest
from .verbs.reconcile import launch_failed

if TYPE_CHECKING:   # type hints only: the context is above, the request's module imports this one
    from .context import Context
    from .verbs.submit.plan import SubmitRequest

CONTAINER_DIR = "/resume"          # the old job's results (or the staged checkpoint) inside the container
OVERRIDE_KEY = "train.resume_training_checkpoint_path"
RESUME_FAILED_EXIT = 13            # the launch script's exit when no checkpoint can be used (6-11: remote, staging)
MARKER = "TAO_RESUME_CHECKPOINT"   # + <path under the results dir> <bytes> [<link it came through>]
MISSING = "TAO_RESUME_MISSING"
_CHECKPOINT = re.compile(r"(?:^|/)model_epoch_(\d+)(?:_step_(\d+))?\.pth$")
_SAFE = re.compile(r"^[A-Za-z0-9._/-]+$")


# ---------------------------------------------------------------- which checkpoint
def link_target(link_path: str, target: Optional[str]) -> Optional[str]:
    """The path under the results dir that a link at ``link_path`` (relative to the results dir)
    names: a relative target (Lightning's ``os.path.relpath``) from the link's directory, an
    absolute one under ``/results`` (the container's view) from the results dir. None when it
    points elsewhere or leaves the results dir."""
    if not target:
        return None
    if target.startswith("/"):
        if not target.startswith(remote.CONTAINER_RESULTS_DIR + "/"):
            return None
        path = posixpath.normpath(target[len(remote.CONTAINER_RESULTS_DIR) + 1:])
    else:
        path = posixpath.normpath(posixpath.join(posixpath.dirname(link_path), target))
    return None if path.startswith("../") or path in ("..", ".") else path


def epoch_step(path: str) -> Optional[tuple[int, int]]:
    """(epoch, step) of a TAO checkpoint name (``model_epoch_EEE[_step_SSSSS].pth``), else None."""
    found = _CHECKPOINT.search(path)
    return (int(found.group(1)), int(found.group(2) or 0)) if found else None


def latest_checkpoint(manifest: Sequence[ManifestFile], links: Sequence[ResultsLinksItem]) -> Optional[Checkpoint]:
    """The checkpoint a resume uses, from a results manifest (verified files: path, size, sha256)
    and the links recorded beside it (path, target, dangling): the target of a ``*_latest.pth``
    link that is a file of the manifest (``train/`` first, as TAO writes it), else the manifest's
    checkpoint of the highest (epoch, step). Returns ``{"path", "size", "sha256", "link"}``
    (``link``: the link it came through, or None) or None when the manifest holds no checkpoint."""
    files = {entry["path"]: entry for entry in manifest}
    found: Checkpoint
    latest = sorted((link for link in links if str(link.get("path", "")).endswith("_latest.pth")),
                    key=lambda link: (posixpath.dirname(link["path"]) != "train", link["path"]))
    for link in latest:
        path = link_target(link["path"], link.get("target"))
        if path is not None and path in files:
            found = {"path": path, "size": files[path]["size"], "sha256": files[path]["sha256"],
                     "link": link["path"]}
            return found
    ranked = sorted((epoch_step(path), path) for path in files if epoch_step(path) is not None)
    if not ranked:
        return None
    path = ranked[-1][1]
    found = {"path": path, "size": files[path]["size"], "sha256": files[path]["sha256"], "link": None}
    return found


# ---------------------------------------------------------------- the plan
@dataclass
class ResumePlan:
    """Where the new job finds the old job's checkpoint."""

    job_id: str                       # the job resumed from
    source: str                       # "instance", "s3" or "home"
    results_dir: str                  # the old job's results dir on its instance
    checkpoint: Optional[Checkpoint] = None  # s3, home: latest_checkpoint(); instance: known after the launch
    destination: Optional[str] = None  # s3: the old job's s3://.../results/<id>/
    settings: Optional[storage.S3Settings] = None   # s3: the settings of that bucket (never serialized)
    verified: Optional[Checkpoint] = None   # instance: the checkpoint verified in S3 (path, size, sha256), if any
    uploaded: Optional[str] = None     # home: the instance path the checkpoint was copied to (resume_home.push)
    member: Optional[str] = None       # home: the checkpoint's member name in the kept archive

    @property
    def chosen(self) -> Checkpoint:
        """The checkpoint chosen here (s3, home): a plan of those sources is made with it."""
        assert self.checkpoint is not None, f"a {self.source} resume plan holds its checkpoint"
        return self.checkpoint

    def host_dir(self, new_job: str) -> str:
        """The instance directory mounted at CONTAINER_DIR."""
        return self.results_dir if self.source == "instance" else remote.join(remote.job_dir(new_job), "resume")

    def mount(self, new_job: str) -> tuple[str, str, bool]:
        return (self.host_dir(new_job), CONTAINER_DIR, True)

    def override(self) -> str:
        """The override word, quoted for the remote shell (instance: the script's choice, ``$__tb_resume``)."""
        if self.source == "instance":
            return f'"{OVERRIDE_KEY}={CONTAINER_DIR}/$__tb_resume"'
        return shlex.quote(f"{OVERRIDE_KEY}={CONTAINER_DIR}/{self.chosen['path']}")

    def to_json(self) -> ResumeFrom:
        out: ResumeFrom = {"job_id": self.job_id, "source": self.source, "override_key": OVERRIDE_KEY,
                           "container_dir": CONTAINER_DIR}
        if self.checkpoint:
            out["checkpoint"] = self.checkpoint.copy()
            out["container_path"] = f"{CONTAINER_DIR}/{self.checkpoint['path']}"
        return out


def plan(ctx: Context, req: SubmitRequest) -> Optional[ResumePlan]:
    """The plan for ``req.resume_from`` (None without it). Raises UNKNOWN_JOB / BAD_JOB_ID,
    RESUME_NOT_POSSIBLE (not a train job of the same network, still running, a spec or override
    that sets the resume path itself, results out of reach), before anything is recorded."""
    old_id = req.resume_from
    if not old_id:
        return None
    record = ctx.records.load(old_id)
    sidecar = ctx.sidecars.load(old_id)
    results = sidecar.results or {}
    why = _unfit(req, record)
    if why is None and launch_failed(sidecar):
        why = f"{old_id} never ran (its launch was refused or never happened): it wrote no checkpoint"
    if why:
        raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {old_id}: {why}", _unfit_fix(req, record))
    same = sidecar.instance == req.instance and not sidecar.instance_deleted_at
    if same and results.get("instance_dir"):   # a checkpoint verified in S3 meanwhile is checked again there
        return ResumePlan(old_id, "instance", results["instance_dir"], verified=results.get("latest_checkpoint"))
    synced = results.get("checkpoint_sync") or {}   # a live job's checkpoint verified in S3 (checkpoint_sync)
    if results.get("kind") == "s3" and (results.get("verified") or synced.get("latest_checkpoint")):
        destination = storage.s3_uri(results["destination"])
        settings = storage.s3_settings(ctx.env, bucket=storage.parse_s3_uri(destination)[0])
        if settings.missing():
            raise TaoBrevError("MISSING_CREDENTIAL", f"--resume-from {old_id}: its checkpoint is copied from "
                               f"{results['destination']}; not set: {', '.join(settings.missing())}")
        chosen = latest_checkpoint(load_manifest(ctx, old_id) or [],
                                   load_links(ctx, old_id) or results.get("links") or synced.get("links") or [])
        if chosen is None:
            raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {old_id}: its verified results in "
                               f"{results.get('destination')} hold no checkpoint (model_epoch_*.pth; were they "
                               "excluded with --upload-exclude?)", "Submit without --resume-from to train from the "
                               f"start: {req.rerun(drop=('--resume-from',))}")
        return ResumePlan(old_id, "s3", results["instance_dir"], chosen, results["destination"], settings)
    saved = results.get("saved") or {}
    path, digest = saved.get("path"), saved.get("sha256")
    if path and digest:   # kept here by the teardown that deleted its instance
        chosen, member = resume_home.choose(old_id, Path(path), digest, latest_checkpoint)
        return ResumePlan(old_id, "home", results["instance_dir"], chosen, member=member)
    raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {old_id}: {_out_of_reach(req, sidecar)}",
                       _reach_fix(req, old_id, sidecar))


def _unfit(req: SubmitRequest, record: RecordDocument) -> Optional[str]:
    if req.action != "train" or record.get("action") != "train":
        return (f"only a train job resumes from a train job's checkpoint (this is {req.action}, "
                f"{record['id']} was {record.get('action')})")
    if record.get("network_arch") != req.network_arch:
        return f"{record['id']} trained {record.get('network_arch')}, not {req.network_arch}"
    if not is_terminal(record.get("terminal_state")):
        return f"{record['id']} has not ended (its record is not terminal): its checkpoints may still change"
    if req.retry_of and req.retry_of != req.resume_from:
        return f"--retry-of {req.retry_of} names another job (a resumed job links to the job it resumes)"
    return None


def _unfit_fix(req: SubmitRequest, record: RecordDocument) -> str:
    if not is_terminal(record.get("terminal_state")):
        return (f"Poll it ({nextstep.command('poll_status.py', record['id'])}); if it still runs, stop it with "
                f"{nextstep.command('teardown.py', record['id'])}, then submit again.")
    return f"Name a train job of {req.network_arch} (tao_job_record.py list), or submit without --resume-from."


def _out_of_reach(req: SubmitRequest, sidecar: JobSidecar) -> str:
    where, results = sidecar.instance, sidecar.results or {}
    if not where or not results:
        return "this bundle holds no instance or results dir for it (it was not submitted by submit.py here)"
    if sidecar.instance_deleted_at and results.get("kind") != "s3":
        saved = (results.get("saved") or {}).get("path")
        return (f"its instance {where} was deleted and its results were not in S3"
                + (f" (they were kept here: {saved})" if saved else ""))
    if results.get("kind") == "s3":
        return f"its results are not verified in {results.get('destination')} yet"
    return f"its results live on {where} only (results kind {results.get('kind')}), not on {req.instance}"


def _reach_fix(req: SubmitRequest, old_id: str, sidecar: JobSidecar) -> str:
    results = sidecar.results or {}
    if results.get("kind") == "s3" and not sidecar.instance_deleted_at:
        return (f"Upload and verify them: {nextstep.command('poll_status.py', old_id)}, then submit again: "
                f"{req.rerun()}")
    if sidecar.instance and results and not sidecar.instance_deleted_at:
        return f"Resume on the instance that holds them: {req.rerun(set_flags={'--instance': sidecar.instance})}"
    return (f"Its checkpoints are not reachable from here: train from the start: {req.rerun(drop=('--resume-from',))}; "
            f"or, with a checkpoint file of your own in an input, pass -- {OVERRIDE_KEY}=/data/NAME/FILE.pth.")


def refuse_conflicts(spec: dict[str, Any], overrides: Sequence[str], old_id: str) -> None:
    """RESUME_NOT_POSSIBLE when the spec or an override sets the resume path itself (only one may)."""
    train = spec.get("train")
    train = train if isinstance(train, dict) else {}
    if train.get("resume_training_checkpoint_path") not in (None, ""):
        raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {old_id}: the spec sets {OVERRIDE_KEY} already",
                           f"Set {OVERRIDE_KEY}: null in the spec (--resume-from sets it), or drop --resume-from.")
    for item in overrides:
        if item.partition("=")[0].lstrip("+~") == OVERRIDE_KEY:
            raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {old_id}: an override sets {OVERRIDE_KEY} "
                               "already", "Drop that override (--resume-from sets it), or drop --resume-from.")


# ---------------------------------------------------------------- on the instance
def instance_lines(results_dir: str, verified: Optional[Checkpoint] = None) -> str:
    """Shell lines (before ``docker run``) that pick the checkpoint in the old job's results dir
    into ``$__tb_resume`` (a path under it): a ``*_latest.pth`` link's target (``train/`` first, then
    the dir itself, then any other first-level dir: a spec's own ``train.results_dir``;
    relative to the link, or ``/results/...``), a regular non-empty file inside the dir; else the
    ``model_epoch_*`` file of the highest epoch and step. Prints ``MARKER <path> <bytes> [<link>]``,
    or ``MISSING`` and exits RESUME_FAILED_EXIT. ``verified`` (the checkpoint whose sha256 the S3
    verification knows): when the script picks that path, its size and sha256 must still match."""
    rd = remote.rpath(results_dir)
    newest = ("awk '{n=$0; sub(/.*model_epoch_/, \"\", n); sub(/[.]pth$/, \"\", n); split(n, p, \"_step_\"); "
              "printf \"%d %d %s\\n\", p[1], p[2], $0}' | sort -k1,1n -k2,2n | tail -n 1 | cut -d' ' -f3-")
    return "\n".join([
        f"__tb_rd={rd}; __tb_resume=; __tb_via=",
        f'[ -d "$__tb_rd" ] || {{ echo "{MISSING} no results dir"; exit {RESUME_FAILED_EXIT}; }}',
        'for __tb_l in "$__tb_rd"/train/*_latest.pth "$__tb_rd"/*_latest.pth "$__tb_rd"/*/*_latest.pth; do',
        '  [ -L "$__tb_l" ] || [ -f "$__tb_l" ] || continue',
        '  __tb_d=${__tb_l%/*}; __tb_d=${__tb_d#"$__tb_rd"}; __tb_d=${__tb_d#/}',
        '  if [ -L "$__tb_l" ]; then __tb_t=$(readlink -- "$__tb_l") || continue; else __tb_t=${__tb_l##*/}; fi',
        f'  case "$__tb_t" in {remote.CONTAINER_RESULTS_DIR}/*) __tb_t=${{__tb_t#{remote.CONTAINER_RESULTS_DIR}/}};; '
        '/*) continue;; *) __tb_t=${__tb_d:+$__tb_d/}$__tb_t;; esac',
        '  case "$__tb_t" in *..*) continue;; esac',
        '  if [ -f "$__tb_rd/$__tb_t" ] && [ -s "$__tb_rd/$__tb_t" ]; then __tb_resume=$__tb_t; '
        '__tb_via=${__tb_l#"$__tb_rd"/}; break; fi',
        "done",
        'if [ -z "$__tb_resume" ]; then __tb_resume=$(cd "$__tb_rd" && for __tb_f in train/model_epoch_*.pth '
        'model_epoch_*.pth */model_epoch_*.pth; do '
        '[ -f "$__tb_f" ] && [ -s "$__tb_f" ] && printf \'%s\\n\' "$__tb_f"; done | '
        f"{newest}); fi",
        f'case "$__tb_resume" in ""|*[!A-Za-z0-9._/-]*|*..*) echo "{MISSING} no checkpoint"; '
        f"exit {RESUME_FAILED_EXIT};; esac",
        f'[ -f "$__tb_rd/$__tb_resume" ] || {{ echo "{MISSING} no checkpoint"; exit {RESUME_FAILED_EXIT}; }}',
        *(_verified_check(verified) if verified and _SAFE.fullmatch(verified.get("path", "")) else []),
        f'echo "{MARKER} $__tb_resume $(wc -c < "$__tb_rd/$__tb_resume") $__tb_via"',
    ])


def _verified_check(verified: Checkpoint) -> list[str]:
    path = shlex.quote(verified["path"])
    size = int(verified["size"])
    return [f'if [ "$__tb_resume" = {path} ]; then [ "$(wc -c < "$__tb_rd/$__tb_resume")" -eq {size} ] '
            f'&& [ "$(sha256sum < "$__tb_rd/$__tb_resume" | cut -c1-64)" = {verified["sha256"]} ] || '
            f'{{ echo "{MISSING} $__tb_resume differs from its verified sha256"; exit {RESUME_FAILED_EXIT}; }}; fi']


def s3_lines(resume: ResumePlan, new_job: str, carrier: staging.Carrier) -> str:
    """Shell lines (before ``docker run``; skipped when the job's container exists) that copy the
    chosen checkpoint from S3 with the carrier into ``~/tao-jobs/<id>/resume/`` and check its size
    and sha256 against the verified manifest; ``MISSING`` and exit RESUME_FAILED_EXIT otherwise."""
    checkpoint, destination = resume.chosen, resume.destination
    assert destination is not None, "an s3 resume plan names its results' destination"
    path = checkpoint["path"]
    if not _SAFE.fullmatch(path) or ".." in path.split("/"):
        raise TaoBrevError("RESUME_NOT_POSSIBLE", f"--resume-from {resume.job_id}: checkpoint name {path!r} "
                           "holds characters this bundle does not pass to a shell")
    host = resume.host_dir(new_job)
    target = remote.rpath(remote.join(host, path))
    fail = f'{{ echo "{MISSING} {path}"; exit {RESUME_FAILED_EXIT}; }}'
    copy = carrier.run(host, CONTAINER_DIR, ["s3", "cp", "--only-show-errors", "--no-progress",
                                             destination.rstrip("/") + "/" + path,
                                             f"{CONTAINER_DIR}/{path}"])
    lines = [f"if ! docker inspect --type container {shlex.quote(new_job)} >/dev/null 2>&1; then",
             f"mkdir -p {remote.rpath(remote.join(host, posixpath.dirname(path) or '.'))} || exit 3"]
    if carrier.path_style:
        lines.append(carrier.prepare().rstrip("\n"))
    lines += [f"{copy} || {fail}",
              f'[ "$(wc -c < {target})" -eq {int(checkpoint["size"])} ] && '
              f'[ "$(sha256sum < {target} | cut -c1-64)" = {checkpoint["sha256"]} ] || {fail}',
              "fi"]
    return "\n".join(lines)


def push(ctx: Context, resume: Optional[ResumePlan], instance: str, new_job: str,
         carrier_file: Optional[str]) -> Optional[str]:
    """What the launch needs on the instance first (after the record opened): the s3 source's
    carrier credential file when the job has none (``credentials.push``, one ``brev copy``), the
    home source's checkpoint (``resume_home.push``, one ``brev copy``). Returns the carrier file."""
    if resume is not None and resume.source == "home":
        assert resume.member is not None, "a home resume plan names the archive's member"
        resume.uploaded = resume_home.push(ctx.brev, instance, new_job, resume.chosen, resume.member)
    if resume is None or resume.source != "s3" or carrier_file:
        return carrier_file
    assert resume.settings is not None, "an s3 resume plan holds the settings of its bucket"
    text = credentials.env_file_text(resume.settings.container_env())
    return credentials.push(ctx.brev, instance, f"{new_job}-s3", text).path


def checks(resume: Optional[ResumePlan], new_job: str, carrier_image: str, remove: Sequence[Optional[str]],
           carrier_file: Optional[str]) -> str:
    """The launch script's resume lines: the credential files removed on every path (``remove``),
    then :func:`instance_lines` or :func:`s3_lines`. Empty without a resume."""
    if resume is None:
        return ""
    if resume.source == "instance":
        return instance_lines(resume.results_dir, resume.verified)
    if resume.source == "home":
        return resume_home.lines(resume.host_dir(new_job), resume.chosen, resume.uploaded, MISSING,
                                 RESUME_FAILED_EXIT)
    carrier = staging.Carrier(carrier_image, carrier_file or "~/.tao-cred-<job_id>-s3", new_job,
                              path_style=bool(resume.settings and resume.settings.endpoint_url))
    trap = [staging.remove_on_exit([p for p in dict.fromkeys(remove) if p])] if any(remove) else []
    return "\n".join(trap + [s3_lines(resume, new_job, carrier)])


def launched(resume: Optional[ResumePlan], out: str) -> Optional[ResumeFrom]:
    """After a launch: the plan's JSON with the checkpoint the launch script chose (instance
    source, :func:`parse_marker`); None when there is nothing new to record."""
    if resume is None or resume.source != "instance":
        return None
    chosen = parse_marker(out)
    if chosen is None:
        return None
    found: ResumeFrom = {**resume.to_json(), "checkpoint": chosen, "container_path": f"{CONTAINER_DIR}/{chosen['path']}"}
    return found


def parse_marker(out: str) -> Optional[Checkpoint]:
    """The ``MARKER`` line of the launch's output: {"path", "size", "link"} or None."""
    for line in out.splitlines():
        if line.startswith(MARKER + " "):
            words = line.split()
            if len(words) >= 3 and words[2].isdigit():
                found: Checkpoint = {"path": words[1], "size": int(words[2]),
                                     "link": words[3] if len(words) > 3 else None}
                return found
    return None
