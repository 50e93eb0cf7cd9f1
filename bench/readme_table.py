#!/usr/bin/env python3
"""Write README.md's performance table from the output of one `bench/run.sh` run.

usage: readme_table.py RUN_LOG [README]   (bench/run.sh --readme does it for you)

Takes every `ROW | what | figure | target |` line the benchmarks printed, in order, and
the rows of bench_staging.py's table (case, data, aws sync s, bundle s, ratio, target,
process s, ratio, sent), and replaces the table under "## Performance" and the sentence
above it (date, machine, load) with them. The figures come only from the log: a row the
run did not print is not in the table.
"""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADING = "## Performance (latest `bench/run.sh`)"
STAGING = re.compile(r"^(first upload|no change|one file changed)\s+(\d+ \w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+"
                     r"(<= [\d.]+)?\s*([\d.]+)?\s*([\d.]+)?\s+([\d.]+) MiB\s+([\d.]+) MiB\s*$")


def rows_from(log: str) -> list[str]:
    rows = []
    for line in log.splitlines():
        if line.startswith("ROW |"):
            rows.append("|" + line[len("ROW |"):].rstrip())
            continue
        m = STAGING.match(line)
        if m and m.group(1) != "first upload":
            case, data, t_aws, t_ours, ratio, target, fresh, fresh_ratio, sent, aws_sent = m.groups()
            fresh_text = f"; as a fresh process {fresh} s, {fresh_ratio}x" if fresh else ""
            what = f"{data} files" if data.endswith("small") else data
            rows.append(f"| staging {what}, {case} (`bench_staging.py`, moto) | bundle {t_ours} s vs "
                        f"`aws s3 sync` {t_aws} s: {ratio}x{fresh_text}; sent {sent} MiB (aws {aws_sent} MiB) | "
                        f"{target + 'x' if target else '-'} |")
    return rows


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    log = Path(argv[0]).read_text()
    readme = Path(argv[1]) if len(argv) > 1 else ROOT / "README.md"
    head = next((line for line in log.splitlines() if line.startswith("# tao-run-on-brev benchmarks")), None)
    rows = rows_from(log)
    if head is None or not rows:
        print(f"{argv[0]}: not the output of bench/run.sh (no header line or no rows)", file=sys.stderr)
        return 2
    machine = head.split(" - ", 1)[1]
    loads = sorted(set(re.findall(r"load average ([\d.]+)", log)), key=float)
    span = f"{loads[0]}-{loads[-1]}" if len(loads) > 1 else (loads[0] if loads else "")
    intro = (f"Measured {machine}, from one `bench/run.sh` run; the simulator for brev/docker and moto's S3 server "
             f"on 127.0.0.1. The machine was shared with other work during the run (load average "
             f"{span} on its cores), so the seconds are noisy; the ratios, "
             f"each taken against its yardstick in the same run with the runs interleaved, and the counts are what "
             f"the targets apply to. `bench/run.sh` prints every figure again; nothing here is a timed test.\n"
             if loads else f"Measured {machine}, from one `bench/run.sh` run. Nothing here is a timed test.\n")
    intro = textwrap.fill(intro, width=100) + "\n"
    table = "| what | figure | target |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    text = readme.read_text()
    start = text.index(HEADING) + len(HEADING)
    body = text[start:]
    table_at = body.index("\n| what | figure | target |")
    end = table_at + 1
    lines = body[end:].split("\n")
    consumed = next(i for i, line in enumerate(lines) if not line.startswith("|"))
    rest = "\n".join(lines[consumed:])
    readme.write_text(text[:start] + "\n\n" + intro + "\n" + table + rest)
    print(f"{readme}: {len(rows)} rows written")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
