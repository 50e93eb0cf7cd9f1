#!/usr/bin/env python3
"""`tao_job_record.py list --json` where its text is made: every record's entry written by the
redactor's ``json_text`` (`json.dumps(obj, indent=2, default=str)`, indented to its depth), i.e.
the listing without its cache (the first listing, or each record changed since the last one),
and with the cache (the texts of unchanged records read back). A fresh process per run; the
CPU time (user + system) is the figure, less moved than wall time by other work on a shared
machine. Figures only; nothing is asserted.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import _measure
from bench_records import fill_files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tao_brev.record_listing import cache_path  # noqa: E402
from tao_brev.records import RecordStore  # noqa: E402

RECORDS = int(os.environ.get("BENCH_RECORDS", "20000"))
RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="tao-brev-listing-"))
    try:
        state = work / "state"
        fill_files(RecordStore(state), RECORDS)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "PYTHON"))}
        env.update(TAO_STATE_DIR=str(state), TAO_BREV_NO_REEXEC="1")
        argv = [sys.executable, str(ROOT / "scripts" / "tao_job_record.py"), "list", "--json"]
        cold, warm = [], []
        for _ in range(RUNS):
            cache_path(state).unlink(missing_ok=True)
            cold.append(_measure.run(argv, env))
            warm.append(_measure.run(argv, env))
        cold, warm = _measure.medians(cold), _measure.medians(warm)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"`tao_job_record.py list --json`, {RECORDS:,} records, median of {RUNS}; {_measure.load()}")
    print(f"  no cache (every entry through json_text): CPU {cold['cpu']:.2f} s, wall {cold['wall']:.2f} s, "
          f"{cold['rss_mb']:.0f} MB")
    print(f"  cache (unchanged records' texts read back): CPU {warm['cpu']:.2f} s, wall {warm['wall']:.2f} s, "
          f"{warm['rss_mb']:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
