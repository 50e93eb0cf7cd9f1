#!/usr/bin/env python3
"""Stage the same data to one moto S3 server with upload_tree and with `aws s3 sync`.

Prints a table (seconds, MiB/s, ratio); asserts nothing about timing.
Run from the repository root:  python bench/bench_staging.py [--small 200] [--big 2] [--big-mib 20]

Both tools get the same credentials, endpoint and checksum settings
(S3Settings.container_env), the same concurrency (10) and the same 8 MiB
multipart threshold/chunk (awscli's defaults). One run each, plus a second
run with nothing changed (what a resumed staging costs).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tao_brev import storage  # noqa: E402
from tests.s3server import MotoS3Server  # noqa: E402

MiB = 2**20


def generate(root: Path, small: int, big: int, big_mib: int) -> int:
    total = 0
    for i in range(small):
        data = os.urandom(4096 + (i * 7919) % 61440)  # 4-64 KiB
        path = root / f"images/{i % 10:02d}/img_{i:04d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        total += len(data)
    for i in range(big):
        path = root / f"shards/shard_{i}.tar"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as handle:
            for _ in range(big_mib):
                handle.write(os.urandom(MiB))
        total += big_mib * MiB
    return total


def aws_sync(settings: storage.S3Settings, source: Path, uri: str) -> float:
    if not shutil.which("aws"):
        raise SystemExit("aws CLI not on PATH (pip install awscli)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(settings.container_env())
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
    started = time.perf_counter()
    subprocess.run(["aws", "s3", "sync", str(source), uri, "--endpoint-url", settings.endpoint_url,
                    "--only-show-errors"], env=env, check=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - started


def bundle_upload(settings: storage.S3Settings, source: Path, uri: str) -> tuple[float, dict]:
    started = time.perf_counter()
    report = storage.upload_tree(settings, source, uri, progress=None)
    return time.perf_counter() - started, report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=200, help="number of 4-64 KiB files")
    parser.add_argument("--big", type=int, default=2, help="number of large files")
    parser.add_argument("--big-mib", type=int, default=20, help="size of each large file in MiB")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, MotoS3Server() as server:
        source = Path(tmp) / "data"
        total = generate(source, args.small, args.big, args.big_mib)
        bucket = server.create_bucket("bench")
        settings = storage.s3_settings(server.env)
        files = args.small + args.big
        print(f"data: {files} files, {total / MiB:.1f} MiB; endpoint {server.endpoint_url} (moto)")

        rows = []
        t_bundle, report = bundle_upload(settings, source, f"s3://{bucket}/bundle/")
        assert report["uploaded"] == files
        t_aws = aws_sync(settings, source, f"s3://{bucket}/awscli/")
        rows.append(("first run", t_bundle, t_aws, total))
        t_bundle2, report2 = bundle_upload(settings, source, f"s3://{bucket}/bundle/")
        t_aws2 = aws_sync(settings, source, f"s3://{bucket}/awscli/")
        rows.append(("nothing changed", t_bundle2, t_aws2, 0))
        verified = storage.verify_against_manifest(settings, f"s3://{bucket}/bundle/",
                                                   storage.local_manifest(source),
                                                   progress=None)["verified"]

    print(f"{'run':<16} {'tool':<22} {'seconds':>8} {'MiB/s':>8} {'aws/bundle':>11}")
    for label, tb, ta, nbytes in rows:
        for tool, seconds in (("upload_tree", tb), ("aws s3 sync", ta)):
            rate = f"{nbytes / MiB / seconds:8.1f}" if nbytes else f"{'-':>8}"
            ratio = f"{ta / tb:11.2f}" if tool == "upload_tree" else ""
            print(f"{label:<16} {tool:<22} {seconds:8.2f} {rate} {ratio}")
    print(f"second upload_tree run skipped {report2['skipped']}/{files}; bundle prefix verified: {verified}")


if __name__ == "__main__":
    main()
