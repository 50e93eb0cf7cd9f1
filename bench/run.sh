#!/usr/bin/env bash
# Every performance figure of the bundle in one run: round trips per verb,
# script start-up overhead, the record store at 1k/10k records, and staging
# throughput vs `aws s3 sync`. Prints figures; asserts nothing timed.
# usage: bench/run.sh   (after `bash install.sh --local --dev`)
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-../.venv/bin/python}"
[ -x "$PY" ] || PY=python3
echo "# tao-run-on-brev benchmarks - $(date -u +%Y-%m-%d), $(nproc) cores, $(uname -m), $("$PY" --version 2>&1)"
echo
echo "## Round trips (simulator)"
"$PY" bench_round_trips.py
echo
"$PY" bench_poll_all.py
echo
echo "## Script overhead"
"$PY" bench_overhead.py
echo
echo "## Record store"
"$PY" bench_records.py
echo
echo "## Staging throughput (moto S3 server on 127.0.0.1)"
"$PY" bench_staging.py
