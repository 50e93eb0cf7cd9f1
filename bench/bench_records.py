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

from tao_brev.records import RecordStore, is_terminal  # noqa: E402

SIZES = (1_000, 10_000)


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
    print(f"record store ({os.cpu_count()} cores)")
    print(f"{'records':>8} {'open+mark ms/job':>17} {'list (CLI) s':>13} {'--all scan s':>13}")
    for size, per_job_ms, list_s, scan_s in rows:
        print(f"{size:>8} {per_job_ms:>17.2f} {list_s:>13.3f} {scan_s:>13.3f}")
    (small, *_), (large, *_) = rows[0], rows[-1]
    print(f"growth {small} -> {large} records: list x{rows[-1][2] / rows[0][2]:.1f}, "
          f"scan x{rows[-1][3] / rows[0][3]:.1f} (linear would be x{large / small:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
