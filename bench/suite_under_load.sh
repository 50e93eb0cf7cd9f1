#!/usr/bin/env bash
# The test suite must not depend on the machine's speed. This runs it RUNS times
# in a row (default 5) while one busy process per core (LOAD, default nproc)
# keeps every CPU at 100 %: a test that waits on wall-clock time instead of an
# event or an injected clock shows up here as a red run. Not part of CI (it takes
# RUNS x the suite's time, and more under load): run it after changing a test
# that waits, and before a release.
# usage: bench/suite_under_load.sh [RUNS] [PYTEST ARG ...]   (after `bash install.sh --local --dev`)
#   e.g. bench/suite_under_load.sh 5
#        bench/suite_under_load.sh 3 tests/test_preflight.py
# Prints one line per run (passed/FAILED, seconds, pytest's summary), the log of a
# failed run, and exits 0 only if every run passed.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
shift || true
case "$RUNS" in ''|*[!0-9]*) echo "usage: bench/suite_under_load.sh [RUNS] [PYTEST ARG ...]" >&2; exit 2 ;; esac
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || { echo "no $PY: run bash install.sh --local --dev first" >&2; exit 2; }
LOAD="${LOAD:-$(nproc)}"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/suite-under-load.XXXXXX")"

burners=()
stop_load() {
  local pid
  for pid in ${burners[@]+"${burners[@]}"}; do kill "$pid" 2>/dev/null || true; done
}
trap stop_load EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$LOAD"); do
  "$PY" -c 'while True: pass' &
  burners+=("$!")
done

echo "# the suite $RUNS times under $LOAD busy processes on $(nproc) cores, $("$PY" --version 2>&1); logs in $LOGS"
failed=0
for run in $(seq "$RUNS"); do
  start=$(date +%s)
  if "$PY" -m pytest -q -p no:cacheprovider "$@" >"$LOGS/run-$run.log" 2>&1; then verdict=passed
  else verdict=FAILED; failed=$((failed + 1)); fi
  echo "run $run/$RUNS: $verdict in $(( $(date +%s) - start )) s: $(tail -n1 "$LOGS/run-$run.log")"
  if [ "$verdict" = FAILED ]; then grep -E '^(FAILED|ERROR) ' "$LOGS/run-$run.log" | head -n 20 || true; fi
done
echo "$((RUNS - failed))/$RUNS runs passed"
[ "$failed" = 0 ]
