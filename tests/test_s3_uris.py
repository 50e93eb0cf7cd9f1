"""tao_brev/s3/uris.py: s3:// URIs and the bank's results routing."""

from __future__ import annotations

from tao_brev import s3 as storage
from tests.s3fixtures import raises


def test_parse_s3_uri():
    assert storage.parse_s3_uri("s3://b/k/x y.txt") == ("b", "k/x y.txt")
    assert storage.parse_s3_uri("s3://b") == ("b", "")
    assert storage.parse_s3_uri("s3://b/") == ("b", "")
    for bad in ("http://b/k", "s3:///k", "b/k", "s3://bad bucket/k", ""):
        raises("BAD_ARGUMENT", storage.parse_s3_uri, bad)


def test_results_routing():
    job = "visual_changenet-train-1a2b3c"
    r = storage.results_destination(job, {"TAO_RESULTS_ROOT": "/mnt/results/", "S3_BUCKET_NAME": "b"})
    assert (r["kind"], r["uri"], r["warning"]) == ("local", f"/mnt/results/{job}/", None)

    r = storage.results_destination(job, {"S3_BUCKET_NAME": "tao-bucket"})
    assert (r["kind"], r["uri"], r["bucket"], r["prefix"]) == (
        "s3", f"s3://tao-bucket/results/{job}/", "tao-bucket", f"results/{job}/")
    r = storage.results_destination(job, {"S3_BUCKET_NAME": "env-bucket"}, bucket="flag-bucket")
    assert r["uri"] == f"s3://flag-bucket/results/{job}/" and r["source"] == "--bucket"

    r = storage.results_destination(job, {})
    assert r["kind"] == "ephemeral" and "LOST" in r["warning"] and "S3_BUCKET_NAME" in r["warning"]

    raises("BAD_JOB_ID", storage.results_destination, "../etc", {})
    raises("BAD_ARGUMENT", storage.results_destination, job, {"TAO_RESULTS_ROOT": "rel/dir"})


def test_a_job_id_with_a_trailing_newline_is_no_job_id():
    """The record store's id check (``records.ID_RE`` whole-text match): ``$`` before a final newline is no end."""
    for bad in ("vc-train-1\n", "vc-train-1\nx", ""):
        raises("BAD_JOB_ID", storage.results_destination, bad, {})
    assert storage.results_destination("vc-train-1", {"TAO_RESULTS_ROOT": "/r"})["kind"] == "local"
