#!/usr/bin/env python3
"""Script start-up overhead: each script with the backend answering at once,
against `python3 -c pass` on the same machine in the same run.

An agent polling in a loop pays every script start. The backend here is a
stub `brev` (a shell script answering a canned frame instantly), so what is
measured is the script itself: interpreter start, imports, record reads,
JSON out. Prints the median of N runs and the ratio to `python3 -c pass`,
plus which heavy modules (boto3, botocore, jsonschema) each script imported.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
HEAVY = ("boto3", "botocore", "jsonschema")

# A brev that answers every exec with a complete frame at once: it echoes the
# nonce found in the command (the frame's own markers) around a canned answer.
STUB_BREV = r'''#!/bin/sh
case "$1" in
  ls) echo '{"workspaces":[{"name":"box","status":"RUNNING","shell_status":"READY","gpu":"A100"}]}' ;;
  exec)
    for last; do :; done
    nonce=$(printf '%s' "$last" | sed -n "s/.*'\(TAOBREV[0-9a-f]*\):out'.*/\1/p" | head -n 1)
    tok=$(printf '%s' "$last" | sed -n "s/.*'\(S[0-9a-f]\{12\}\)>.*/\1/p" | head -n 1)
    printf '%s:out\n' "$nonce"
    if [ -n "$tok" ]; then
      job=$(printf '%s' "$last" | sed -n "s/.*'S[0-9a-f]\{12\}>\([^:']*\):state'.*/\1/p" | head -n 1)
      printf '%s>%s:state\n{"Status":"running","Running":true,"ExitCode":0,"OOMKilled":false}\n%s<%s:state 0\n' "$tok" "$job" "$tok" "$job"
    fi
    printf '\n%s:err\n\n%s:rc 0\n' "$nonce" "$nonce" ;;
  *) exit 0 ;;
esac
'''


def timed(argv, env) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    return time.perf_counter() - started, done.stdout


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="tao-brev-overhead-"))
    try:
        (work / "bin").mkdir()
        stub = work / "bin" / "brev"
        stub.write_text(STUB_BREV)
        stub.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "AWS_", "S3_"))}
        env.update(PATH=f"{work / 'bin'}:{env.get('PATH', '')}", TAO_STATE_DIR=str(work / "state"),
                   TAO_BREV_NO_REEXEC="1")
        py = sys.executable
        opened = subprocess.run([py, str(ROOT / "scripts" / "tao_job_record.py"), "open", "--image", "img:1",
                                 "--network-arch", "visual_changenet", "--action", "train", "--storage-tier", "A",
                                 "--results-root", "~/r"], env=env, capture_output=True, text=True)
        job = opened.stdout.strip()
        subprocess.run([py, str(ROOT / "scripts" / "tao_job_record.py"), "mark", job, "--state", "RUNNING",
                        "--backend-ref", f"box/{job}"], env=env, capture_output=True)
        cases = {
            "python3 -c pass": [py, "-c", "pass"],
            "poll_status.py JOB": [py, str(ROOT / "scripts" / "poll_status.py"), job],
            "tao_job_record.py show JOB": [py, str(ROOT / "scripts" / "tao_job_record.py"), "show", job],
            "tao_job_record.py list": [py, str(ROOT / "scripts" / "tao_job_record.py"), "list"],
            "redact_secrets.py lint": [py, str(ROOT / "scripts" / "redact_secrets.py"), "lint", str(ROOT / "README.md")],
            "submit.py --help": [py, str(ROOT / "scripts" / "submit.py"), "--help"],
            "preflight.py --help": [py, str(ROOT / "scripts" / "preflight.py"), "--help"],
            "teardown.py --help": [py, str(ROOT / "scripts" / "teardown.py"), "--help"],
        }
        medians = {}
        for name, argv in cases.items():
            medians[name] = statistics.median(timed(argv, env)[0] for _ in range(RUNS))
        heavy = {}
        for name, argv in cases.items():
            if argv[1] == "-c":
                continue
            probe = [py, "-X", "importtime", *argv[1:]]
            done = subprocess.run(probe, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
            imported = {line.split("|")[-1].strip().split(".")[0] for line in done.stderr.splitlines()
                        if line.startswith("import time:")}
            heavy[name] = sorted(m for m in HEAVY if m in imported)
        base = medians["python3 -c pass"]
        print(f"script start-up, median of {RUNS} runs ({os.cpu_count()} cores)")
        print(f"{'command':32} {'median s':>9} {'x python':>9}  heavy imports")
        for name, seconds in medians.items():
            print(f"{name:32} {seconds:>9.3f} {seconds / base:>9.1f}  {', '.join(heavy.get(name, [])) or '-'}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
