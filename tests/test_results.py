"""Results routed to S3: links as TAO writes them, verification by content, one upload per job,
and the documented --wait contract (RESULTS_UPLOAD_FAILED, exit 1). Simulator + a real S3 server."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, validate
from test_robustness import records, sidecars
from tests.s3world import CARRIER, S3World, s3world  # noqa: F401  (fixture)

WAIT = ("--wait", "--interval", "0.2", "--timeout", "60")


def submit_a(s3world: S3World, **simulate):
    """A tier A job whose results are routed to the bucket (S3_BUCKET_NAME is set)."""
    sub = s3world.world.submit(spec=s3world.world.spec({"epoch_seconds": 0.01, **simulate}))
    assert sub.code == 0, sub
    validate("submit", sub.json)
    return sub.json["job_id"]


def syncs(s3world: S3World, job_id: str) -> int:
    """How many results uploads (``aws s3 sync /results ...``) ran on the instance for ``job_id``."""
    return sum(1 for r in s3world.sim.audit() if r["tool"] == "container" and "sync" in r["argv"]
               and any(f"results/{job_id}/" in a for a in r["argv"]))


def test_latest_links_valid_and_dangling_are_recorded_and_the_files_verified(s3world):
    job_id = submit_a(s3world, latest_link="dangling")
    out_dir = s3world.results_dir(job_id) / "train"
    out_dir.mkdir(parents=True, exist_ok=True)   # the job may not have made it yet: no race with its start
    os.symlink("model_epoch_000_step_00025.pth", out_dir / "best_model.pth")   # a valid link too
    wait = s3world.run("poll_status.py", job_id, *WAIT, schema="poll_status")
    assert wait.code == 0 and wait.json["ok"] and "error" not in wait.json, wait
    results = wait.json["results"]
    assert results["verified"] is True and results["uploaded"] is True and "error" not in results, results
    links = {link["path"]: link for link in results["links"]}
    assert links["train/changenet_model_segment_latest.pth"]["dangling"] is True
    assert links["train/best_model.pth"] == {"path": "train/best_model.pth",
                                             "target": "model_epoch_000_step_00025.pth", "dangling": False}
    assert "dangling" in results["note"]
    latest = results["latest_checkpoint"]   # the link dangles: the verified checkpoint of the highest epoch
    assert latest["link"] is None and latest["path"] == "train/model_epoch_002_step_00075.pth", latest
    keys = s3world.keys(f"results/{job_id}/")
    assert "train/model_epoch_000_step_00025.pth" in keys and "train/best_model.pth" not in keys
    assert "train/changenet_model_segment_latest.pth" not in keys      # manifest and upload agree
    down = s3world.run("teardown.py", job_id, "--delete-instance", schema="teardown")
    assert down.code == 0 and down.json["instance_deleted"], down   # nothing blocks the delete


def test_an_upload_failure_is_exit_1_results_upload_failed_under_wait(s3world):
    s3world.sim.add_image(CARRIER, size_bytes=130_000_000, pull_fails="toomanyrequests: rate limit")
    job_id = submit_a(s3world)
    wait = s3world.run("poll_status.py", job_id, *WAIT, schema="poll_status")
    assert wait.code == 1 and wait.json["ok"] is False, wait
    assert wait.json["state"] == "COMPLETE" and wait.json["error"]["code"] == "RESULTS_UPLOAD_FAILED"
    assert wait.json["results"]["verified"] is False and wait.json["results"]["error"] == wait.json["error"]
    plain = s3world.run("poll_status.py", job_id, schema="poll_status")   # without --wait: the state is the answer
    assert plain.code == 0 and plain.json["ok"] and plain.json["results"]["error"]["code"] == "RESULTS_UPLOAD_FAILED"
    assert records(s3world.world).load(job_id)["terminal_state"] == "COMPLETE"


def test_files_uploaded_by_hand_verify_by_content_although_the_upload_step_failed(s3world):
    s3world.sim.add_image(CARRIER, size_bytes=130_000_000, pull_fails="toomanyrequests: rate limit")
    job_id = submit_a(s3world)
    first = s3world.run("poll_status.py", job_id, *WAIT, schema="poll_status")
    assert first.code == 1 and not first.json["results"]["verified"], first
    root = s3world.results_dir(job_id)
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):   # "by hand"
        s3world.s3.put_object(Bucket=s3world.bucket, Key=f"results/{job_id}/{path.relative_to(root)}",
                              Body=path.read_bytes())
    again = s3world.run("poll_status.py", job_id, *WAIT, schema="poll_status")
    assert again.code == 0 and again.json["ok"], again
    results = again.json["results"]
    assert results["verified"] is True and results["uploaded"] is False and "error" not in results
    assert results["upload_error"]["code"] == "RESULTS_UPLOAD_FAILED" and "by content" in results["note"]
    # A wrong byte is caught by its sha256, whoever wrote it.
    key = f"results/{job_id}/train/model_epoch_000_step_00025.pth"
    body = s3world.s3.get_object(Bucket=s3world.bucket, Key=key)["Body"].read()
    s3world.s3.put_object(Bucket=s3world.bucket, Key=key, Body=bytes([body[0] ^ 1]) + body[1:])
    side = sidecars(s3world.world)
    side.update(job_id, results={"verified": False})
    bad = s3world.run("poll_status.py", job_id, *WAIT, schema="poll_status")
    assert bad.code == 1 and bad.json["results"]["mismatched"] == ["train/model_epoch_000_step_00025.pth"], bad


def test_pollers_that_see_the_end_together_upload_once(s3world):
    job_id = submit_a(s3world)
    s3world.sim.wait_container("box", job_id, timeout=60)
    procs = [subprocess.Popen([sys.executable, str(ROOT / "scripts" / "poll_status.py"), job_id],
                              env=s3world.world.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert syncs(s3world, job_id) == 1
    assert sidecars(s3world.world).load(job_id).results["verified"] is True
