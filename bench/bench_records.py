#!/usr/bin/env python3
"""Record store at scale: `tao_job_record.py list` and the record scan behind
`poll_status.py --all`, with 1,000 and 10,000 records (time, and how it grows).

Records are written with the store's own `open` (atomic, locked, redacted),
most of them terminal, as an agent's long history would be.
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

from tao_brev.record_index import live_records  # noqa: E402
from tao_brev.records import RecordStore, is_terminal  # noqa: E402

SIZES = (1_000, 10_000)
SCAN_ONLY = 50_000     # terminal records written as files (as the bank's tool leaves them): the --all scan only


def fill(store: RecordStore, count: int) -> None:
    for i in range(count):
        rec = store.open(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="visual_changenet",
                         action="train", storage_tier="A", results_root="~/tao-results")
        if i % 10:  # 90 % finished jobs
            store.mark(rec["id"], "COMPLETE", source="poller")


def best_of(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> int:
    rows = []
    for size in SIZES:
        work = Path(tempfile.mkdtemp(prefix="tao-brev-records-"))
        try:
            store = RecordStore(work / "state")
            started = time.perf_counter()
            fill(store, size)
            fill_s = time.perf_counter() - started
            env = {**os.environ, "TAO_STATE_DIR": str(work / "state"), "TAO_BREV_NO_REEXEC": "1"}
            cli = [sys.executable, str(ROOT / "scripts" / "tao_job_record.py"), "list"]
            list_s = best_of(lambda: subprocess.run(cli, env=env, capture_output=True, check=True))
            scan_s = best_of(lambda: [r["id"] for r in store.list() if not is_terminal(r.get("terminal_state"))])
            rows.append((size, fill_s / size * 1000, list_s, scan_s))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    scans = []
    for size in (*SIZES, SCAN_ONLY):
        work = Path(tempfile.mkdtemp(prefix="tao-brev-scan-"))
        try:
            store = RecordStore(work / "state")
            fill_files(store, size)
            full_s = best_of(lambda: [r["id"] for r in store.list() if not is_terminal(r.get("terminal_state"))], 1)
            cold_s = best_of(lambda: live_records(store, work / "state"), 1)
            warm_s = best_of(lambda: live_records(store, work / "state"))
            scans.append((size, full_s, cold_s, warm_s))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    print(f"record store ({os.cpu_count()} cores)")
    print(f"{'records':>8} {'open+mark ms/job':>17} {'list (CLI) s':>13} {'--all scan s':>13}")
    for size, per_job_ms, list_s, scan_s in rows:
        print(f"{size:>8} {per_job_ms:>17.2f} {list_s:>13.3f} {scan_s:>13.3f}")
    (small, *_), (large, *_) = rows[0], rows[-1]
    print(f"growth {small} -> {large} records: list x{rows[-1][2] / rows[0][2]:.1f}, "
          f"scan x{rows[-1][3] / rows[0][3]:.1f} (linear would be x{large / small:.0f})")
    print()
    print("--all record scan: every record read (before) vs the index (tao_brev/record_index.py)")
    print(f"{'records':>8} {'read all s':>11} {'index cold s':>13} {'index warm s':>13}")
    for size, full_s, cold_s, warm_s in scans:
        print(f"{size:>8} {full_s:>11.3f} {cold_s:>13.3f} {warm_s:>13.3f}")
    return 0


def fill_files(store: RecordStore, count: int) -> None:
    """``count`` records, 1 in 100 unfinished, written straight to files in the bank's format."""
    import json

    template = store.open(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="visual_changenet",
                          action="train", storage_tier="A", results_root="~/tao-results")
    done = store.mark(template["id"], "COMPLETE", source="poller")
    for i in range(count - 1):
        job_id = f"visual_changenet-train-{i:06x}"
        record = {**(template if i % 100 == 0 else done), "id": job_id, "results_dir": f"~/tao-results/{job_id}"}
        (store.jobs_dir / f"{job_id}.json").write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    sys.exit(main())
