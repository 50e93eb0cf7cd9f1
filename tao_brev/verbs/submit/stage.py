"""submit's storage tiers B and C (``tao_brev.staging``; ``references/storage.md``): the
inputs through S3, the carrier that copies them onto the instance, and who receives the
S3 credentials (tier C: the job container too; tier B: the carrier only)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ... import credentials
from ... import s3 as staging, s3 as storage
from ...s3 import hash_cache
from ...errors import TaoBrevError
from ...model.answer_types import SubmitAnswer, SubmitAnswerPlanItem
from ...routing import Routing
from ...secrets.values import is_credential_env_name
from ...vocabulary import StorageTier

if TYPE_CHECKING:   # type hints only: the CLI runner is the scripts' layer; plan imports this module
    from ...context import Context
    from .plan import SubmitRequest


@dataclass
class Staging:
    """Tier B/C: the inputs through S3, the carrier, and who receives the S3 credentials."""

    tier: str
    settings: storage.S3Settings
    inputs: list[staging.Input]
    carrier_image: str
    cache_path: Path | None = None     # the local hash cache (hash_cache.default_path)
    index_copies: Path | None = None   # local copies of the inputs' index.json (staging.index_copies_dir)

    @classmethod
    def plan(cls, ctx: Context, req: SubmitRequest) -> "Staging | None":
        """None for tier A. Raises MISSING_CREDENTIAL / BAD_ARGUMENT before anything moves."""
        if req.storage_tier == StorageTier.A:
            return None
        settings = storage.s3_settings(ctx.env, bucket=req.bucket)   # inputs: --bucket, else S3_BUCKET_NAME
        if settings.missing():
            raise TaoBrevError("MISSING_CREDENTIAL", f"storage tier {req.storage_tier} moves data through S3; "
                               f"not set: {', '.join(settings.missing())}")
        return cls(req.storage_tier, settings, staging.parse_inputs(req.inputs), staging.carrier_image(ctx.env),
                   hash_cache.default_path(ctx.state_root), staging.index_copies_dir(ctx.state_root))

    def warm(self) -> None:
        """Start building the S3 client in the background (no request), so it overlaps the
        instance checks that come before the upload (``brev ls``)."""
        if self.inputs:
            staging.prefetch_client(self.settings)

    def prepare(self, upload: bool = True) -> None:
        """Put the local inputs in S3 (or, with ``upload=False``, only work out where they would go)."""
        bucket = self.settings.bucket
        assert bucket is not None, "routing.route refuses tiers B/C without a bucket"
        staging.prepare_inputs(self.settings, bucket, self.inputs, upload=upload,
                               cache=hash_cache.HashCache(self.cache_path), index_copies=self.index_copies)

    def mounts(self, job_id: str) -> list[tuple[str, str, bool]]:
        return staging.input_mounts(job_id, self.inputs)

    def job_credentials(self) -> dict[str, str]:
        """The credentials this bundle itself hands the job's container (tier C: the S3 keys, which
        the job may print), by name: proved like ``--env`` values, so a later shell without
        them withholds the job's output. Tier B keeps them in the carrier: none."""
        if self.tier != StorageTier.C:
            return {}
        return {n: v for n, v in self.settings.container_env(legacy=True).items()
                if is_credential_env_name(n)}

    def push_credentials(self, ctx: Context, instance: str, job_id: str, user_values: dict[str, str],
                         destination: str | None) -> tuple[str | None, str]:
        """(job container env file or None, carrier env file): B keeps the S3 keys away from the job."""
        s3_env = self.settings.container_env(legacy=self.tier == StorageTier.C)
        if self.tier == StorageTier.C:
            values = {**user_values, **s3_env, **staging.locations(self.inputs, destination)}
            path = credentials.push(ctx.brev, instance, job_id, credentials.env_file_text(values)).path
            return path, path
        carrier = credentials.push(ctx.brev, instance, f"{job_id}-s3", credentials.env_file_text(s3_env)).path
        job = (credentials.push(ctx.brev, instance, job_id, credentials.env_file_text(user_values)).path
               if user_values else None)
        return job, carrier

    def checks(self, job_id: str, image: str, env_file: str | None, carrier_file: str) -> str:
        """The launch script's preamble: remove the credential files on exit, copy the inputs in."""
        carrier = staging.Carrier(self.carrier_image, carrier_file, job_id,
                                  path_style=bool(self.settings.endpoint_url))
        remove = list(dict.fromkeys(p for p in (env_file, carrier_file) if p))
        return staging.fetch_script(carrier, self.inputs, image, remove=remove)

    def answer(self) -> SubmitAnswer:
        return {"inputs": [inp.to_json() for inp in self.inputs]}

    def plan_steps(self, instance: str) -> list[SubmitAnswerPlanItem]:
        who = "the carrier and the job container" if self.tier == StorageTier.C else "the carrier only"
        return [{"step": "upload_inputs", "what": "staging.sync_input of each local input to "
                 "s3://BUCKET/inputs/NAME/ (only files not already there are sent)",
                 "inputs": [inp.to_json() for inp in self.inputs]},
                {"step": "copy_s3_credentials", "what": f"brev copy <0600 file with the AWS_* settings, read by "
                 f"{who}> {instance}:.tao-cred-<job_id>-<random>"}]


def credential_warnings(ctx: Context, routing: Routing, stage: Staging | None) -> list[str]:
    """Tier A with results routed to S3: the upload at the end needs credentials then."""
    if stage is None and routing.kind == "s3":
        missing = storage.s3_settings(ctx.env, bucket=routing.bucket).missing()
        if missing:
            return [f"results go to {routing.destination('<job_id>')} but {', '.join(missing)} "
                    "is not set here: export it before poll_status.py / teardown.py upload them"]
    return []
