"""The simulated Brev world plus a real S3 server (moto) and a bucket, for the tier B/C tests
(the ``s3world`` fixture: a test module imports it by name)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import validate
from tests.s3server import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY

CARRIER = "public.ecr.aws/aws-cli/aws-cli:2.22.35"
SECRETS = (FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY)


class S3World:
    """The simulator world plus a bucket, the S3 settings in the shell env, and output bookkeeping."""

    def __init__(self, world, s3_server, bucket: str):
        self.world, self.sim, self.bucket = world, world.sim, bucket
        self.s3 = s3_server["server"].boto_client()
        world.env.update(s3_server["env"], S3_BUCKET_NAME=bucket)
        self.outputs: list[str] = []

    def run(self, script: str, *args: str, schema: str | None = None):
        before = self.sim.exec_count()
        result = self.world.run(script, *args)
        result.execs = self.sim.exec_count() - before
        self.outputs += [result.stdout, result.stderr]
        if schema:
            assert result.json is not None, result
            validate(schema, result.json)
        return result

    def submit(self, tier: str, dataset: Path, *extra: str, simulate: dict | None = None):
        spec = self.world.spec({"epoch_seconds": 0.02, **(simulate or {})})
        return self.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train", "--spec", str(spec),
                        "--storage-tier", tier, "--inputs", f"{dataset}=levir_cd_tiny", *extra, schema="submit")

    def wait(self, job_id: str):
        return self.run("poll_status.py", job_id, "--wait", "--interval", "0.2", "--timeout", "60",
                        schema="poll_status")

    def keys(self, prefix: str) -> dict[str, int]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"][len(prefix):]: o["Size"] for page in pages for o in page.get("Contents", [])}

    def staged(self, job_id: str) -> Path:
        return self.sim.instance_home("box") / "tao-jobs" / job_id / "inputs" / "levir_cd_tiny"

    def results_dir(self, job_id: str) -> Path:
        return self.sim.instance_home("box") / "tao-results" / job_id

    def assert_no_secret_anywhere(self) -> None:
        audit = self.sim.audit_text()
        for secret in SECRETS:
            assert secret not in audit, "an AWS credential reached an argv"
            for text in self.outputs:
                assert secret not in text, "an AWS credential reached a script's output"


@pytest.fixture
def s3world(world, s3_server):
    world.sim.add_image(CARRIER, size_bytes=130_000_000)
    return S3World(world, s3_server, s3_server["create_bucket"]())
