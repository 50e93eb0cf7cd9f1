"""Where a job's results live: the output routing used across the TAO bank.

1. ``TAO_RESULTS_ROOT`` set (and no explicit ``--bucket``): results stay on the
   instance under that root (kind ``local``); deleting the instance loses them.
2. else a bucket (``--bucket`` or ``S3_BUCKET_NAME``): the job writes on the
   instance disk and its results dir is uploaded to
   ``s3://<bucket>/results/<job_id>/`` (kind ``s3``) before any delete.
3. else kind ``ephemeral``: a loud warning, results die with the instance.

The record's ``results_dir`` is the final home of the results (the S3 URI for
kind ``s3``, else the instance path); the instance path is in the sidecar.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import remote
from .errors import TaoBrevError
from .vocabulary import StorageTier

_EPHEMERAL_WARNING = ("RESULTS ARE EPHEMERAL: no bucket (--bucket / S3_BUCKET_NAME) and no TAO_RESULTS_ROOT; "
                      "results live only on the instance disk: a teardown that deletes the instance copies them "
                      "home first ($TAO_STATE_DIR/brev/results/), or refuses")
_LOCAL_WARNING = ("results stay on the instance disk ({root}); deleting the instance deletes them - "
                  "copy them off (brev copy) or use a bucket before teardown --delete-instance")


@dataclass
class Routing:
    kind: str                  # s3 | local | ephemeral
    instance_root: str         # instance path (~/... or /...)
    bucket: str | None = None
    warnings: list[str] = field(default_factory=list)

    def instance_dir(self, job_id: str) -> str:
        return remote.join(self.instance_root, job_id)

    def destination(self, job_id: str) -> str | None:
        return f"s3://{self.bucket}/results/{job_id}/" if self.kind == "s3" else None

    @property
    def record_root(self) -> str:
        """The ``--results-root`` handed to the record's ``open``."""
        return f"s3://{self.bucket}/results" if self.kind == "s3" else self.instance_root

    def results_dir(self, job_id: str) -> str:
        return self.destination(job_id) or self.instance_dir(job_id)


def route(req, env) -> Routing:
    """Routing for a submit request (``results_root``, ``bucket``, ``storage_tier``)."""
    root = req.results_root or env.get("TAO_RESULTS_ROOT") or remote.RESULTS_ROOT
    remote.rpath(root)  # validates: absolute or ~/
    bucket = req.bucket or (None if env.get("TAO_RESULTS_ROOT") else env.get("S3_BUCKET_NAME"))
    if bucket:
        if not remote.NAME_RE.match(bucket):
            raise TaoBrevError("BAD_ARGUMENT", f"invalid bucket name: {bucket!r}")
        return Routing("s3", root, bucket)
    if req.storage_tier in (StorageTier.B, StorageTier.C) and not env.get("S3_BUCKET_NAME"):  # inputs need one even when results stay
        raise TaoBrevError("BAD_ARGUMENT", f"storage tier {req.storage_tier} moves data through S3 and needs a bucket",
                           "Pass --bucket NAME or export S3_BUCKET_NAME (and the AWS_* credentials).")
    if env.get("TAO_RESULTS_ROOT") or req.results_root:
        return Routing("local", root, warnings=[_LOCAL_WARNING.format(root=root)])
    return Routing("ephemeral", root, warnings=[_EPHEMERAL_WARNING])
