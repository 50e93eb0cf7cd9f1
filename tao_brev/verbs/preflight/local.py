"""The local checks, before anything reaches brev: ``image_ref`` (the image argument
resolves) and ``s3`` (credentials, the bucket, a probe object under ``results/``)."""

from __future__ import annotations

from typing import TypedDict

from ... import bank, remote, s3 as staging, s3 as storage
from ... import routing as routing_mod
from ...errors import TaoBrevError
from .report import Context, PreflightRequest, Report
from .units import S3Target


class S3Data(TypedDict):
    """The ``s3`` check's ``data``: where the probe ran and which variables gave each setting."""
    bucket: str | None
    prefix: str
    endpoint: str | None
    credential_sources: dict[str, str]   # setting -> the variable (or flag) it came from


def check_image_ref(report: Report, ctx: Context, req: PreflightRequest) -> str | None:
    """``image_ref``: the image argument resolves (``bank.resolve_image``); the image it names."""
    if not req.image:
        return None
    try:
        resolved = bank.resolve_image(req.image, ctx.env)
    except TaoBrevError as exc:
        report.error("image_ref", exc, argument=req.image)
        return None
    report.passed("image_ref", f"{req.image} -> {resolved['image']}", **resolved)
    return resolved["image"]


def check_s3(report: Report, ctx: Context, req: PreflightRequest) -> tuple[str, S3Target | None]:
    """``s3`` (tier B/C, or a bucket from --bucket / S3_BUCKET_NAME): credentials
    resolve, the bucket answers, and a write/read/delete probe under
    ``results/`` succeeds. Returns the instance results root (the bank's routing)
    and, when results or inputs go through S3, what the instance must reach."""
    root = req.results_root or ctx.env.get("TAO_RESULTS_ROOT") or remote.RESULTS_ROOT
    try:
        routing = routing_mod.route(req, ctx.env)
    except TaoBrevError as exc:
        report.error("s3", exc, storage_tier=req.storage_tier)
        return root, None
    if routing.kind != "s3":
        return routing.instance_root, None
    settings = storage.s3_settings(ctx.env, bucket=routing.bucket)
    target = S3Target.of(settings.endpoint_url, settings.region, staging.carrier_image(ctx.env))
    where = f"s3://{routing.bucket}/results/"
    data: S3Data = {"bucket": routing.bucket, "prefix": "results/", "endpoint": settings.endpoint_url,
                    "credential_sources": {k: v for k, v in settings.sources.items() if k != "bucket"}}
    try:
        storage.probe(settings, where)
    except TaoBrevError as exc:
        report.error("s3", exc, **data)
    else:
        report.passed("s3", f"{where} answers: write, read back and delete of a probe object succeeded", **data)
    return routing.instance_root, target
