#!/usr/bin/env python3
"""Staging inputs (tiers B/C) beside `aws s3 sync`, against one moto S3 server on 127.0.0.1.

Prints figures and the targets; asserts nothing about timing.
Run from the repository root:  python bench/bench_staging.py [--small 200] [--shards 3] [--shard-mib 100] [--reps 3]

Two data sets, each staged by the bundle (``s3.prepare_inputs`` with the
local hash cache and index copies, what ``submit.py --storage-tier B`` runs) and synced by the
AWS CLI (``aws s3 sync``, the venv's awscli) to its own prefix:

* ``--small`` files of 4-64 KiB: first upload, then a re-stage with nothing
  changed (target: <= 0.5x ``aws s3 sync``);
* ``--shards`` files of ``--shard-mib`` MiB: first upload, then one byte
  appended to one shard and staged again (target: <= 1.2x ``aws s3 sync``),
  with the bytes each tool sent again (objects created or rewritten).

The bundle is timed twice: in this process (botocore already imported; how
the issue first measured it) and as a fresh process, ``bench/stage_fresh.py``:
what ``submit.py`` runs up to its upload (the same start, imports and calls),
which adds interpreter and botocore start-up as the AWS CLI's own figure
does. Each figure is the median of ``--reps`` runs, the runs of the tools
interleaved.
Both tools get the same credentials, endpoint and checksum settings
(``S3Settings.container_env``) and the same concurrency (10) and 8 MiB
multipart threshold (awscli's defaults).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tao_brev import s3  # noqa: E402
from tao_brev.s3 import hash_cache  # noqa: E402
from tests.s3server import MotoS3Server  # noqa: E402

MiB = 2**20
TARGETS = {"no change": 0.5, "one file changed": 1.2}
FRESH = ROOT / "bench" / "stage_fresh.py"


def small_files(root: Path, count: int) -> int:
    total = 0
    for i in range(count):
        data = os.urandom(4096 + (i * 7919) % 61440)  # 4-64 KiB
        path = root / f"images/{i % 10:02d}/img_{i:04d}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        total += len(data)
    return total


def shard_files(root: Path, count: int, mib: int) -> int:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        with open(root / f"shard_{i}.tar", "wb") as handle:
            for _ in range(mib):
                handle.write(os.urandom(MiB))
    return count * mib * MiB


class Bench:
    def __init__(self, server: MotoS3Server, tmp: Path):
        self.server, self.tmp = server, tmp
        self.bucket = server.create_bucket("bench")
        self.settings = s3.s3_settings(dict(server.env, S3_BUCKET_NAME=self.bucket))
        self.s3 = server.boto_client()
        self.cache = tmp / "state" / "brev" / "hash-cache.json"
        self.aws = str(Path(sys.executable).parent / "aws")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.env.update(self.settings.container_env())
        self.env["AWS_CONFIG_FILE"] = self.env["AWS_SHARED_CREDENTIALS_FILE"] = os.devnull
        self.env["TAO_STATE_DIR"] = str(tmp / "state")   # stage_fresh.py's hash cache: self.cache

    def objects(self, prefix: str) -> dict[str, tuple]:
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return {o["Key"]: (o["Size"], o["ETag"], o["LastModified"]) for p in pages for o in p.get("Contents", [])}

    def sent(self, prefix: str, before: dict) -> int:
        """Bytes of the objects created or rewritten under ``prefix`` since ``before``."""
        return sum(v[0] for k, v in self.objects(prefix).items() if before.get(k) != v)

    def bundle(self, source: Path, name: str) -> tuple[float, int]:
        before = self.objects(f"inputs/{name}/")
        started = time.perf_counter()
        s3.prepare_inputs(self.settings, self.bucket, s3.parse_inputs([f"{source}={name}"]),
                          cache=hash_cache.HashCache(self.cache), progress=None,
                          index_copies=s3.index_copies_dir(self.tmp / "state"))
        return time.perf_counter() - started, self.sent(f"inputs/{name}/", before)

    def bundle_process(self, source: Path, name: str) -> tuple[float, int]:
        before = self.objects(f"inputs/{name}/")
        started = time.perf_counter()
        done = subprocess.run([sys.executable, str(FRESH), f"{source}={name}"], env=self.env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        seconds = time.perf_counter() - started
        if done.returncode:
            sys.exit(f"{FRESH.name} failed ({done.returncode}): {done.stderr[-2000:]}")
        return seconds, self.sent(f"inputs/{name}/", before)

    def aws_sync(self, source: Path, name: str) -> tuple[float, int]:
        prefix = f"awscli/{name}/"
        before = self.objects(prefix)
        started = time.perf_counter()
        subprocess.run([self.aws, "s3", "sync", str(source), f"s3://{self.bucket}/{prefix}",
                        "--endpoint-url", self.settings.endpoint_url, "--only-show-errors"],
                       env=self.env, check=True, stdin=subprocess.DEVNULL)
        return time.perf_counter() - started, self.sent(prefix, before)


def median(runs: list[tuple[float, int]]) -> tuple[float, int]:
    return statistics.median(t for t, _ in runs), max(b for _, b in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=200, help="number of 4-64 KiB files")
    parser.add_argument("--shards", type=int, default=3, help="number of large files")
    parser.add_argument("--shard-mib", type=int, default=100, help="size of each large file in MiB")
    parser.add_argument("--reps", type=int, default=3, help="runs per figure (the median is printed)")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp, MotoS3Server() as server:
        bench = Bench(server, Path(tmp))
        small, big = Path(tmp) / "small", Path(tmp) / "shards"
        small_bytes = small_files(small, args.small)
        big_bytes = shard_files(big, args.shards, args.shard_mib)
        time.sleep(0.2)   # past the hash cache's racy window, as for data written earlier
        print(f"data: {args.small} small files ({small_bytes / MiB:.1f} MiB), {args.shards} shards of "
              f"{args.shard_mib} MiB; endpoint {server.endpoint_url} (moto); {args.reps} runs each, median")

        rows.append(("first upload", f"{args.small} small", bench.bundle(small, "small"), None,
                     bench.aws_sync(small, "small")))
        rows.append(("no change", f"{args.small} small",
                     median([bench.bundle(small, "small") for _ in range(args.reps)]),
                     median([bench.bundle_process(small, "small") for _ in range(args.reps)]),
                     median([bench.aws_sync(small, "small") for _ in range(args.reps)])))

        rows.append(("first upload", f"{args.shards} shards", bench.bundle(big, "shards"), None,
                     bench.aws_sync(big, "shards")))
        ours, fresh, theirs = [], [], []
        for rep in range(args.reps):
            for runs, stage in ((ours, bench.bundle), (fresh, bench.bundle_process), (theirs, bench.aws_sync)):
                with open(big / "shard_1.tar", "ab") as handle:   # one byte more each time, for each tool
                    handle.write(b"x")
                runs.append(stage(big, "shards"))
                if stage is not bench.aws_sync:
                    bench.aws_sync(big, "shards")   # keep the aws prefix one byte behind, like ours
        rows.append(("one file changed", f"{args.shards} shards", median(ours), median(fresh), median(theirs)))
        bench.bundle(big, "shards")   # the last run above was aws's: bring the bundle's copy level, then check it
        report = s3.verify_against_manifest(bench.settings, f"s3://{bench.bucket}/inputs/shards/data/",
                                            s3.local_manifest(big), progress=None)

    print(f"{'case':<17} {'data':<11} {'aws sync s':>10} {'bundle s':>9} {'ratio':>6} {'target':>7} "
          f"{'process s':>10} {'ratio':>6} {'bundle sent':>12} {'aws sent':>10}")
    for case, data, (t_ours, b_ours), fresh, (t_aws, b_aws) in rows:
        target = f"<= {TARGETS[case]}" if case in TARGETS else ""
        fresh_s = f"{fresh[0]:10.2f} {fresh[0] / t_aws:6.2f}" if fresh else f"{'':>10} {'':>6}"
        print(f"{case:<17} {data:<11} {t_aws:10.2f} {t_ours:9.2f} {t_ours / t_aws:6.2f} {target:>7} {fresh_s} "
              f"{b_ours / MiB:8.2f} MiB {b_aws / MiB:6.2f} MiB")
    print("bundle: s3.prepare_inputs in this process (botocore already loaded); process: "
          "bench/stage_fresh.py, a fresh process doing what submit.py does up to its upload (its extra is "
          "interpreter and botocore start-up, which the aws CLI pays too); sent: bytes of the objects created "
          "or rewritten (the bundle's include its manifest and index)")
    print(json.dumps({"shards_verified": report["verified"]}))


if __name__ == "__main__":
    main()
