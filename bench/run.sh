#!/usr/bin/env bash
# Every performance figure of the bundle in one run, each beside its yardstick and target:
# round trips per verb and `poll_status.py --all` (counts, simulator); script start-up vs
# the bare interpreter (installed copy and checkout, with and without
# PYTHONDONTWRITEBYTECODE); the record store at 50,000 records vs the bank's listing;
# redaction and the spec guard vs value length and input size; staging vs `aws s3 sync`; the spec check's CPU
# per submit (target <= 1 s). Prints figures; asserts nothing timed. Takes several minutes.
# usage: bench/run.sh [--readme]   (after `bash install.sh --local --dev`)
#   --readme  also write README.md's performance table from this run (bench/readme_table.py)
set -euo pipefail
cd "$(dirname "$0")"
PY="${PYTHON:-../.venv/bin/python}"
[ -x "$PY" ] || PY=python3
LOG="$(mktemp "${TMPDIR:-/tmp}/tao-brev-bench.XXXXXX")"
trap 'rm -f "$LOG"' EXIT
{
  echo "# tao-run-on-brev benchmarks - $(date -u +%Y-%m-%d) on $(nproc) cores, $(uname -m), $("$PY" --version 2>&1)"
  echo
  echo "## Round trips (simulator)"
  "$PY" bench_round_trips.py
  echo
  "$PY" bench_poll_all.py
  echo
  echo "## Script start-up"
  "$PY" bench_overhead.py
  echo
  echo "## Spec check against TAO's schema"
  "$PY" bench_spec_check.py
  echo
  echo "## Record store"
  "$PY" bench_records.py
  "$PY" bench_listing_json.py
  echo
  echo "## Redaction and the spec guard (linear in value length and input size)"
  "$PY" bench_redaction.py
  echo
  echo "## Staging (moto S3 server on 127.0.0.1)"
  "$PY" bench_staging.py
  "$PY" bench_s3_client.py
} 2>&1 | tee "$LOG"
if [ "${1:-}" = "--readme" ]; then
  "$PY" readme_table.py "$LOG" ../README.md
fi
