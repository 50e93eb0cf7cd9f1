"""S3-routed results in process: uploaded from the instance (the fake answers for it and puts the
objects into the test S3 server), then verified from here, once."""

from __future__ import annotations

import hashlib
import re

from tao_brev.verbs import status
from tests.unit.fake_brev import sections
from tests.unit.jobs import expect_poll, launched, state

WEIGHTS = b"\x00tao-weights\x01" * 64


def upload_answer(ctx, s3_server, job_id: str, bucket: str, objects: dict, upload_exit: int = 0):
    """What the instance's upload round trip answers: its manifest of ``objects`` (what it holds)
    and the upload's exit; the objects are put where `aws s3 sync` would have put them."""
    def answer(call):
        destination = ctx.sidecars.load(job_id).results["destination"]
        prefix = destination[len(f"s3://{bucket}/"):].rstrip("/")
        client = s3_server["server"].boto_client()
        if upload_exit == 0:
            for name, data in objects.items():
                client.put_object(Bucket=bucket, Key=f"{prefix}/{name}", Body=data)
        manifest = "\n".join(f"{len(data)} {hashlib.sha256(data).hexdigest()}  ./{name}"
                             for name, data in objects.items())
        return sections({"manifest": manifest, "upload": (upload_exit, "" if upload_exit == 0 else
                                                          "upload failed: An error occurred (AccessDenied)")})(call)
    return answer


def s3_job(ctx, fake_brev, s3_server) -> tuple[str, str]:
    bucket = s3_server["create_bucket"]()
    ctx.env.update(s3_server["env"])
    return launched(ctx, fake_brev, bucket=bucket), bucket


def poll_terminal(ctx, fake_brev, job_id):
    expect_poll(fake_brev, job_id, state("exited", 0))
    fake_brev.expect("copy", re.compile(r"/.+/cred"), re.compile(rf"box:\.tao-cred-{job_id}-results-[0-9a-f]{{10}}"))


def test_the_results_of_a_job_seen_complete_are_uploaded_and_verified_once(ctx, fake_brev, s3_server):
    job_id, bucket = s3_job(ctx, fake_brev, s3_server)
    poll_terminal(ctx, fake_brev, job_id)
    objects = {"train/model.pth": WEIGHTS, "train/status.json": b'{"epoch": 1}\n'}
    upload = fake_brev.expect_exec("box", "aws", answer=upload_answer(ctx, s3_server, job_id, bucket, objects))
    answer, code = status.poll(ctx, job_id)
    assert code == 0 and answer["state"] == "COMPLETE", answer
    results = answer["results"]
    assert results["kind"] == "s3" and results["verified"] is True and results["files"] == 2, results
    assert results["bytes"] == len(WEIGHTS) + len(b'{"epoch": 1}\n')
    assert s3_server["env"]["AWS_SECRET_ACCESS_KEY"] not in upload.calls[0].command   # the file carries it
    fake_brev.verify()
    expect_poll(fake_brev, job_id, state("exited", 0))
    again, code = status.poll(ctx, job_id)   # terminal and verified: the record answers, nothing is uploaded again
    assert code == 0 and again["results"]["verified"] is True


def test_a_failed_upload_leaves_the_results_unverified_for_the_next_poll(ctx, fake_brev, s3_server):
    job_id, bucket = s3_job(ctx, fake_brev, s3_server)
    poll_terminal(ctx, fake_brev, job_id)
    fake_brev.expect_exec("box", "aws", answer=upload_answer(ctx, s3_server, job_id, bucket,
                                                             {"train/model.pth": WEIGHTS}, upload_exit=1))
    answer, code = status.poll(ctx, job_id)
    assert code == 0 and answer["state"] == "COMPLETE"
    assert answer["results"]["verified"] is False and answer["results"]["uploaded"] is False, answer
    assert ctx.sidecars.load(job_id).results["error"]["code"] == "RESULTS_UPLOAD_FAILED"


def test_a_teardown_deletes_an_owned_instance_only_while_its_verified_results_are_still_there(ctx, fake_brev,
                                                                                              s3_server):
    from tao_brev import remote
    from tao_brev.verbs import teardown
    from tests.unit.jobs import entry, expect_catalog

    bucket = s3_server["create_bucket"]()
    ctx.env.update(s3_server["env"])
    job_id = launched(ctx, fake_brev, bucket=bucket, ephemeral=True)
    poll_terminal(ctx, fake_brev, job_id)
    fake_brev.expect_exec("box", "aws", answer=upload_answer(ctx, s3_server, job_id, bucket,
                                                             {"train/model.pth": WEIGHTS}))
    assert status.poll(ctx, job_id)[0]["results"]["verified"] is True
    fake_brev.verify()
    destination = ctx.sidecars.load(job_id).results["destination"]
    s3_server["server"].boto_client().delete_object(
        Bucket=bucket, Key=destination[len(f"s3://{bucket}/"):].rstrip("/") + "/train/model.pth")   # lost since
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=sections(
        {"state": state("exited", 0), "logs": "", "rm": "", "own": "", "others": ""}))
    fake_brev.expect_ls(entry())
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 1 and answer["error"]["code"] == "INSTANCE_DELETE_REFUSED", answer   # no brev delete
    assert answer["deleted"] == [] and answer["blockers"]
