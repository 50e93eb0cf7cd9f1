"""Timing a command as a fresh process: wall time, CPU time (user + system: less moved by
other work on a shared machine than wall time) and peak memory, from the kernel's own
accounting of the child (os.wait4)."""

from __future__ import annotations

import os
import statistics
import subprocess
import time


def run(argv, env=None, stdout=subprocess.DEVNULL) -> dict:
    """One run of ``argv``: {"wall", "cpu", "rss_mb", "code"}."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss_mb": usage.ru_maxrss / 1024,
            "code": proc.returncode}


def medians(runs: list[dict]) -> dict:
    """Median wall, CPU and peak memory, and ``fastest``: the least wall time of the runs (what the
    command costs when no other process slowed it: timeit's rule)."""
    return {**{key: statistics.median(r[key] for r in runs) for key in ("wall", "cpu", "rss_mb")},
            "fastest": min(r["wall"] for r in runs)}


def side_by_side(ours, yardstick, runs: int, env=None) -> tuple[dict, dict]:
    """Median figures of ``ours`` and ``yardstick``, their runs interleaved (same load for both)."""
    a, b = [], []
    for _ in range(runs):
        b.append(run(yardstick, env))
        a.append(run(ours, env))
        if a[-1]["code"] != 0:
            raise SystemExit(f"{' '.join(map(str, ours))} failed with exit {a[-1]['code']}")
    return medians(a), medians(b)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (5 min {five:.1f}) on {os.cpu_count()} cores"
