#!/usr/bin/env python3
"""Record store at 50,000 records: `tao_job_record.py list` and `list --json` beside the
TAO bank's own listing, and the record scan behind `poll_status.py --all`.

The records are written as files in the bank's format (what a long history leaves, 1 in
100 unfinished), from one record made by the store's own `open`/`mark`. The yardstick
`bank_record_list.py` is a stand-in for the bank's `tao_job_record.py list`, rebuilt from
its public record format (see its docstring). Each command is a fresh process; the runs of
the two tools are interleaved; figures are medians (wall, CPU, peak memory from the
kernel). Targets: `list` within 1.2x of the bank's, `list --json` under 5 s, memory flat
(the same at 5,000 and 50,000 records). Figures only; nothing is asserted.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import _measure

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tao_brev.record_index import live_records  # noqa: E402
from tao_brev.records import RecordStore, is_terminal  # noqa: E402

RECORDS = int(os.environ.get("BENCH_RECORDS", "50000"))
SMALL = RECORDS // 10
RUNS = int(os.environ.get("BENCH_RUNS", "3"))


def fill_files(store: RecordStore, count: int) -> None:
    """``count`` records, 1 in 100 unfinished, written straight to files in the bank's format."""
    template = store.open(image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", network_arch="visual_changenet",
                          action="train", storage_tier="A", results_root="~/tao-results")
    done = store.mark(template["id"], "COMPLETE", source="poller", message="training finished, 3 epochs")
    for i in range(count - 1):
        job_id = f"visual_changenet-train-{i:06x}"
        record = {**(template if i % 100 == 0 else done), "id": job_id, "results_dir": f"~/tao-results/{job_id}"}
        (store.jobs_dir / f"{job_id}.json").write_text(json.dumps(record, indent=2))


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> int:
    python = sys.executable
    ours = [python, str(ROOT / "scripts" / "tao_job_record.py"), "list"]
    bank = [python, str(ROOT / "bench" / "bank_record_list.py"), "list"]
    figures = {}
    for size in (SMALL, RECORDS):
        work = Path(tempfile.mkdtemp(prefix="tao-brev-records-"))
        try:
            store = RecordStore(work / "state")
            fill_files(store, size)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "PYTHON"))}
            env.update(TAO_STATE_DIR=str(work / "state"), TAO_BREV_NO_REEXEC="1")
            listed, banked = _measure.side_by_side(ours, bank, RUNS, env)
            as_json = _measure.medians([_measure.run([*ours, "--json"], env) for _ in range(RUNS)])
            figures[size] = {"list": listed, "bank": banked, "json": as_json}
            if size == RECORDS:
                figures["scan"] = (timed(lambda: [r["id"] for r in store.list() if not is_terminal(r.get("terminal_state"))]),
                                   timed(lambda: live_records(store, work / "state")),
                                   timed(lambda: live_records(store, work / "state")))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    print(f"record store: `tao_job_record.py list` / `list --json` vs the bank's listing (stand-in), "
          f"median of {RUNS}; {_measure.load()}")
    print(f"{'records':>8} {'command':<26} {'wall s':>7} {'cpu s':>6} {'MB':>6}  yardstick / target")
    for size in (SMALL, RECORDS):
        f = figures[size]
        ratio = f["list"]["wall"] / f["bank"]["wall"]
        print(f"{size:>8} {'bank tool list (stand-in)':<26} {f['bank']['wall']:7.2f} {f['bank']['cpu']:6.2f} "
              f"{f['bank']['rss_mb']:6.1f}")
        print(f"{size:>8} {'list':<26} {f['list']['wall']:7.2f} {f['list']['cpu']:6.2f} {f['list']['rss_mb']:6.1f}  "
              f"{ratio:.2f}x the bank's (CPU {f['list']['cpu'] / f['bank']['cpu']:.2f}x); target <= 1.2x")
        print(f"{size:>8} {'list --json':<26} {f['json']['wall']:7.2f} {f['json']['cpu']:6.2f} {f['json']['rss_mb']:6.1f}  "
              f"target < 5 s at {RECORDS:,}")
    full_s, cold_s, warm_s = figures["scan"]
    print(f"--all record scan at {RECORDS:,}: every record read {full_s:.2f} s; record_index.py {cold_s:.2f} s "
          f"the first time, {warm_s:.2f} s after")
    big, small = figures[RECORDS], figures[SMALL]
    print(f"ROW | `tao_job_record.py list`, {RECORDS:,} records (`bench_records.py`, median of {RUNS}) | "
          f"{big['list']['wall']:.2f} s vs the bank's listing {big['bank']['wall']:.2f} s: "
          f"{big['list']['wall'] / big['bank']['wall']:.2f}x (CPU {big['list']['cpu'] / big['bank']['cpu']:.2f}x); "
          f"{big['list']['rss_mb']:.0f} MB (bank {big['bank']['rss_mb']:.0f} MB) | <= 1.2x |")
    print(f"ROW | `tao_job_record.py list --json`, {RECORDS:,} records | {big['json']['wall']:.2f} s "
          f"(CPU {big['json']['cpu']:.2f} s); {big['json']['rss_mb']:.0f} MB, {small['json']['rss_mb']:.0f} MB at "
          f"{SMALL:,} (streamed) | < 5 s, memory flat |")
    print(f"ROW | record scan behind `--all`, {RECORDS:,} records (1 % unfinished) | every record read: "
          f"{full_s:.1f} s; with `record_index.py`: {cold_s:.1f} s the first time, {warm_s:.2f} s after | "
          f"no full read per call |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
