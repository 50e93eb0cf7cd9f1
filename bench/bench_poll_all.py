#!/usr/bin/env python3
"""`poll_status.py --all` at scale: 200 jobs on 5 instances (simulator).

Prints the `brev exec` calls (target: one per instance), the docker calls made
on the instances (one `docker ps` + one `docker inspect` per instance, plus a
log tail only for containers that exited non-zero), the size of the remote
script per instance (it must not grow with the jobs: it finds them by their
`tao-job` label), and the wall time. The jobs finish at once (one short
epoch) so 200 containers do not hold 200 processes; their records stay
unfinished until this `--all` reads them, as after an agent's long absence.
Figures only; nothing is asserted.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from _world import World

JOBS, INSTANCES = 200, 5


def main() -> int:
    world = World()
    try:
        for i in range(INSTANCES):
            world.instance(f"fleet-{i}")
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=4) as pool:
            answers = list(pool.map(lambda i: world.submit(f"fleet-{i % INSTANCES}", "--share-gpus", "--",
                                                           "train.num_epochs=1"), range(JOBS)))
        submit_s = time.perf_counter() - started
        failed = [a for a in answers if a.get("exit") != 0]
        execs, docker = world.sim.exec_count(), len([r for r in world.sim.audit() if r["tool"] == "docker"])
        remote_before = len(world.sim.remote_commands())
        started = time.perf_counter()
        answer = world.run("poll_status.py", "--all")
        seconds = time.perf_counter() - started
        scripts = world.sim.remote_commands()[remote_before:]
        calls = [r for r in world.sim.audit() if r["tool"] == "docker"][docker:]
        kinds = {}
        for call in calls:
            verb = next((a for a in call["argv"] if not a.startswith("-")), "?")
            kinds[verb] = kinds.get(verb, 0) + 1
        jobs = answer.get("jobs", [])
        with_progress = sum(1 for j in jobs if (j.get("progress") or {}).get("available"))
        print(f"poll_status.py --all: {JOBS} jobs on {INSTANCES} instances, {len(jobs)} in the answer "
              f"({len(failed)} submits failed; submits took {submit_s:.1f} s)")
        print(f"  brev exec:        {world.sim.exec_count() - execs}   (target {INSTANCES}: one per instance)")
        print(f"  docker calls:     {len(calls)}  {dict(sorted(kinds.items()))}   (before: 2 inspects per job)")
        print(f"  remote script:    {max(map(len, scripts)) if scripts else 0} bytes per instance, "
              f"whatever the number of jobs")
        print(f"  jobs with progress: {with_progress}/{len(jobs)}; exit {answer.get('exit')}")
        print(f"  wall time:        {seconds:.2f} s")
        cut = answer.get("answer_cut") or {}
        listed = f"; the answer lists {len(jobs)} (bounded at {cut['limit']:,} bytes)" if cut else ""
        print(f"ROW | `poll_status.py --all`, {JOBS} live jobs on {INSTANCES} instances (`bench_poll_all.py`) | "
              f"{world.sim.exec_count() - execs} `brev exec`; {len(calls)} docker calls "
              f"({', '.join(f'{n} `{k}`' for k, n in sorted(kinds.items()))}); remote script "
              f"{max(map(len, scripts)) if scripts else 0:,} bytes per instance whatever the job count; progress for "
              f"{with_progress}/{len(jobs)} listed jobs{listed}; {seconds:.1f} s | {INSTANCES} exec, script size flat |")
    finally:
        world.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
