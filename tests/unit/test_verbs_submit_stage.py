"""submit's tiers B/C in process (``submit.stage``): local inputs uploaded to S3 before the record
opens, the S3 settings in their own copied file for the carrier (tier B) or the job's container
too (tier C), and never on a command line."""

from __future__ import annotations

import re
from types import SimpleNamespace

from tao_brev.verbs import submit
from tao_brev.verbs.submit import SubmitRequest
from tests.unit.jobs import SPEC, entry
from tests.unit.leaks import assert_never_sent, printed

CONTAINER = "c0ffee" * 10


def request(tmp_path, tier: str, **kw) -> SubmitRequest:
    data = tmp_path / "levir_cd_tiny"
    (data / "A").mkdir(parents=True)
    (data / "A" / "0001.png").write_bytes(b"\x89PNG tiny")
    (data / "list.txt").write_text("0001.png\n")
    return SubmitRequest(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet",
                         action="train", spec=str(SPEC), inputs=[f"{data}=levir_cd_tiny"], storage_tier=tier,
                         no_spec_check=True, **kw)


def s3_env(ctx, s3_server) -> tuple[str, dict]:
    bucket = s3_server["create_bucket"]()
    ctx.env.update(s3_server["env"])
    from tao_brev.secrets import values as known_secrets

    known_secrets.observe_env(ctx.env)
    return bucket, {k: v for k, v in s3_server["env"].items() if k in ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID")}


def copies(fake_brev, *labels):
    """The 0600 files brev copy carries (their text read while the copy runs), by label."""
    seen = {}

    def copy(call):
        name = call.args[2].split(":", 1)[1]
        seen[name] = open(call.args[1], encoding="utf-8").read()
        return "", "", 0
    for label in labels:
        fake_brev.expect("copy", re.compile(r"/.+/cred"), re.compile(rf"box:\.tao-cred-{label}[0-9a-f]{{10}}"), answer=copy)
    return seen


def submitted(ctx, fake_brev, s3_server, tmp_path, tier: str, labels: str):
    """A tier B or C submit against the S3 server, once it answered RUNNING: its answer, ``seen``
    ({copied name: text}), the launch ``command``, the S3 settings (``secret``) and the ``bucket``."""
    bucket, secret = s3_env(ctx, s3_server)
    fake_brev.expect_ls(entry())
    seen = copies(fake_brev, labels)
    launch = fake_brev.expect_exec("box", "docker run -d", stdout=CONTAINER + "\n")
    answer, code = submit.submit(ctx, request(tmp_path, tier, bucket=bucket))
    assert code == 0 and answer["state"] == "RUNNING", answer
    return SimpleNamespace(answer=answer, seen=seen, command=launch.calls[0].command, secret=secret, bucket=bucket)


def test_tier_b_uploads_the_inputs_and_only_the_carrier_gets_the_s3_settings(ctx, fake_brev, s3_server, tmp_path):
    run = submitted(ctx, fake_brev, s3_server, tmp_path, "B", r"visual_changenet-train-\w+-s3-")
    keys = [o["Key"] for o in s3_server["server"].boto_client().list_objects_v2(Bucket=run.bucket).get("Contents", [])]
    assert any(k.endswith("A/0001.png") for k in keys) and any(k.endswith("list.txt") for k in keys), keys
    [text] = run.seen.values()
    assert run.secret["AWS_SECRET_ACCESS_KEY"] in text   # the carrier's file holds the settings ...
    job_run = run.command[run.command.index("docker run -d --name"):]
    assert "--env-file" not in job_run.split("\n")[0]   # ... the job's own container gets none (tier B)
    assert "/data/levir_cd_tiny" in run.command
    assert_never_sent(fake_brev, printed(run.answer), values=run.secret.values())


def test_tier_c_hands_the_s3_settings_to_the_job_container_in_its_env_file(ctx, fake_brev, s3_server, tmp_path):
    run = submitted(ctx, fake_brev, s3_server, tmp_path, "C", r"visual_changenet-train-\w+-")
    assert any(run.secret["AWS_SECRET_ACCESS_KEY"] in text for text in run.seen.values())
    assert "--env-file" in run.command[run.command.index("docker run -d --name"):].split("\n")[0]
    assert_never_sent(fake_brev, printed(run.answer), values=run.secret.values())


def test_an_unchanged_input_is_not_uploaded_twice(ctx, fake_brev, s3_server, tmp_path):
    bucket, _ = s3_env(ctx, s3_server)
    req = request(tmp_path, "B", bucket=bucket)
    staged = []
    for _round in range(2):
        fake_brev.expect_ls(entry())
        copies(fake_brev, r"visual_changenet-train-\w+-s3-")
        fake_brev.expect_exec("box", "docker run -d", stdout=CONTAINER + "\n")
        answer, code = submit.submit(ctx, req)
        assert code == 0, answer
        fake_brev.verify()
        staged.append(answer["inputs"][0])
    assert (staged[0]["uploaded"], staged[0]["skipped"]) == (2, 0), staged
    assert (staged[1]["uploaded"], staged[1]["skipped"], staged[1]["bytes_uploaded"]) == (0, 2, 0), staged
