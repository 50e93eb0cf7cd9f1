"""Brev-specific state beside the bank's job record, never inside it.

``$TAO_STATE_DIR/brev/jobs/<id>.json`` holds what only this platform needs:
the instance name, whether the instance is ephemeral (owned by the job), the
remote job directory, the results sync state and the cost facts.
``$TAO_STATE_DIR/brev/instances/<name>.json`` remembers per instance when it
was last proven exec-ready (the first exec on an instance gets >= 600 s).
Same atomic, locked, redacted writes as the records.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import statedir
from .errors import TaoBrevError
from .fsio import atomic_write_json, atomic_write_text, locked, private_dir, read_text
from .model import InstanceSidecar, JobSidecar
from .records import check_job_id, now_iso
from .secrets import proof as env_proof
from .secrets import redact, safe_read
from .secrets import values as known_secrets
from .secrets.taint import strip_terminal


JOB_OUTPUT_FIELDS = ("final_progress",)   # the job's status.json read back: message, status, KPI names and values


class SidecarStore:
    def __init__(self, state_root: Path):
        statedir.note_root(state_root)   # no link inside it (statedir.check_inside)
        self.root = state_root
        self.jobs_dir = state_root / "brev" / "jobs"
        self.instances_dir = state_root / "brev" / "instances"

    def path(self, job_id: str) -> Path:
        return self.jobs_dir / f"{check_job_id(job_id)}.json"

    def _dir(self, path: Path) -> None:
        private_dir(self.root)   # 0700
        private_dir(path)

    def load(self, job_id: str) -> JobSidecar:
        """The job's sidecar, empty (falsy) when none was written (e.g. a bank-made record).
        Its ``env_names`` (the job's ``--env``) become known secrets: this verb
        redacts their values wherever its environment has them set."""
        try:
            data = _read(self.path(job_id))
        except TaoBrevError:
            known_secrets.unprove("*", f"the job's sidecar {self.path(job_id).name} is damaged")
            raise
        return self._watch(JobSidecar.from_json(data))

    def update(self, job_id: str, **fields) -> JobSidecar:
        """Merge ``fields`` into the sidecar (nested dicts merged one level deep). What a job wrote
        (:data:`JOB_OUTPUT_FIELDS`) is not stored while a job's ``--env`` value is unproven in this
        process (``known_secrets.unset_watched``): it could hold that value; a later verb that
        proves the values stores it. A field :class:`JobSidecar` does not have is a TypeError."""
        _check_fields(JobSidecar, fields)
        if known_secrets.unset_watched():
            fields = {k: v for k, v in fields.items() if k not in JOB_OUTPUT_FIELDS}
        path = self.path(job_id)
        self._dir(path.parent)
        with locked(path):
            data = _read(path) or {"job_id": job_id, "created_at": now_iso()}
            for key, value in fields.items():
                if isinstance(value, dict) and isinstance(data.get(key), dict):
                    data[key] = {**data[key], **value}
                else:
                    data[key] = value
            data["updated_at"] = now_iso()
            atomic_write_json(path, redact.redact_obj(JobSidecar.from_json(data).to_json()))
            return JobSidecar.from_json(data)

    def all(self) -> list[JobSidecar]:
        if not self.jobs_dir.is_dir():
            return []
        found = []
        for path in sorted(self.jobs_dir.glob("*.json")):
            data = _read(path, strict=False)
            if data:
                found.append(self._watch(JobSidecar.from_json(data)))
            else:   # a job whose --env values cannot be proven: what any job printed is withheld
                known_secrets.unprove("*", f"the sidecar {path.name} is damaged")
        return found

    def _watch(self, data: JobSidecar) -> JobSidecar:
        """``data``'s ``--env`` names whose value this process holds and proves (``env_proof``)
        become known secrets; the others, and a sidecar that names none, are unproven: what
        the job printed is withheld (``known_secrets.unprove``)."""
        proven, unproven = env_proof.verdicts(self.root, {"env_names": data.env_names, "env_proof": data.env_proof},
                                              known_secrets.held_value)
        known_secrets.watch(proven)
        for name, why in unproven.items():
            known_secrets.unprove(name, why)
        return data

    # -- logs saved at teardown ------------------------------------------------
    def logs_path(self, job_id: str) -> Path:
        return self.jobs_dir.parent / "logs" / f"{check_job_id(job_id)}.log"

    def save_logs(self, job_id: str, text: str) -> Path:
        """Keep a job's last log lines (redacted): its container, and with it
        ``docker logs``, is gone after teardown."""
        path = self.logs_path(job_id)
        self._dir(path.parent)
        self.load(job_id)   # the job's --env names: their values are redacted too
        missing = known_secrets.unset_watched()
        if missing:   # values this process does not know cannot be redacted: the text is not kept
            text = (f"[tao-brev: the log was not saved: the job was given {', '.join(missing)} by --env and "
                    "the shell that ran teardown had not their values (or not the same ones), so it could not "
                    "be redacted]\n")
        def hide(part: str) -> str:
            return redact.redact_values(redact.redact(part))

        # redacted as received (a value holding an escape or a control is whole only there), then
        # stripped of escapes, then redacted again (a value an escape sequence split is whole now)
        atomic_write_text(path, hide(strip_terminal(hide(text))))
        return path

    def saved_logs(self, job_id: str) -> str | None:
        path = self.logs_path(job_id)
        try:
            statedir.check(path, last=False)
            return safe_read.read_bytes(path).decode("utf-8", "replace")   # a regular file, bounded
        except FileNotFoundError:
            return None
        except OSError as exc:   # a directory, FIFO, device or link where the log should be: say so
            return f"[tao-brev: the saved log could not be read: {safe_read.describe(exc)}]\n"

    # -- instances --------------------------------------------------------
    def instance_path(self, name: str) -> Path:
        return self.instances_dir / f"{name}.json"

    def instance(self, name: str) -> InstanceSidecar:
        return InstanceSidecar.from_json(_read(self.instance_path(name), strict=False))

    def ready_instances(self) -> set[str]:
        """Instances proven exec-ready before (by any script run): they get the
        shorter exec timeout instead of the first-contact 600 s."""
        if not self.instances_dir.is_dir():
            return set()
        return {p.stem for p in self.instances_dir.glob("*.json")
                if InstanceSidecar.from_json(_read(p, strict=False)).exec_ready_at}

    def note_instance(self, name: str, **fields) -> None:
        """Merge ``fields`` (fields of :class:`InstanceSidecar`, else a TypeError) into the instance's sidecar."""
        _check_fields(InstanceSidecar, fields)
        path = self.instance_path(name)
        self._dir(path.parent)
        with locked(path):
            data = {**_read(path, strict=False), **fields, "updated_at": now_iso()}
            atomic_write_json(path, redact.redact_obj(InstanceSidecar.from_json(data).to_json()))


def _check_fields(kind: type[JobSidecar] | type[InstanceSidecar], fields: Iterable[str]) -> None:
    unknown = sorted(set(fields) - set(kind.json_fields()))
    if unknown:
        raise TypeError(f"{kind.__name__} has no field {', '.join(unknown)}")


def _read(path: Path, strict: bool = True) -> dict[str, Any]:   # a state file read whole
    try:
        data = safe_read.loads(read_text(path))   # a regular file, bounded; a link/FIFO/directory raises
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as exc:   # JSONDecodeError and UnicodeDecodeError are ValueErrors
        if strict:
            why = safe_read.describe(exc) if isinstance(exc, OSError) else f"{path} is not valid JSON: {exc}"
            raise TaoBrevError("CORRUPT_RECORD", why) from None
        return {}
    if not isinstance(data, dict):
        if strict:
            raise TaoBrevError("CORRUPT_RECORD", f"{path} is not a JSON object")
        return {}
    return data
