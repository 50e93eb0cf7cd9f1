#!/usr/bin/env python3
"""Round trips per verb, counted through the simulator (issue: one round trip per verb).

Every `brev exec` is an ssh session to a cloud machine: seconds, and a chance
to fail. Prints, per verb on a prepared (exec-ready, image pulled) instance,
the `brev exec` and `brev copy` calls it made, against its target and the
floor of 1. Then `poll_status.py --all` with 50 jobs on 5 instances (target:
5 round trips, one per instance, done concurrently).
"""

from __future__ import annotations

import sys
import time

from _world import World

# verb -> (target exec calls, why above the floor of 1 when it is)
TARGETS = {
    "preflight (exec-ready, NGC login)": (3, "readiness probe + combined checks; the NGC key file is a brev copy"),
    "submit (with --env HF_TOKEN)": (1, "the credential file travels by brev copy, then one exec"),
    "poll_status --logs 50": (1, ""),
    "teardown --delete-instance": (1, "plus brev delete, after a brev copy home of results with no destination"),
}


def measure(world: World, label: str, fn) -> dict:
    before = world.counts()
    started = time.perf_counter()
    answer = fn()
    seconds = time.perf_counter() - started
    after = world.counts()
    return {"verb": label, "exec": after[0] - before[0], "copy": after[1] - before[1], "seconds": seconds,
            "exit": answer.get("exit"), "answer": answer}


def main() -> int:
    world = World()
    rows = []
    try:
        world.instance("bench-a")
        world.run("preflight.py", "--instance", "bench-a")  # first contact: make it exec-ready
        rows.append(measure(world, "preflight (exec-ready, NGC login)", lambda: world.run(
            "preflight.py", "--instance", "bench-a", "--image", "images.tao_toolkit.pyt")))
        sub = measure(world, "submit (with --env HF_TOKEN)", lambda: world.submit("bench-a", "--env", "HF_TOKEN"))
        rows.append(sub)
        job = sub["answer"].get("job_id")
        world.run("poll_status.py", job, "--wait", "--interval", "0.2", "--timeout", "60")
        rows.append(measure(world, "poll_status --logs 50", lambda: world.run("poll_status.py", job, "--logs", "50")))
        rows.append(measure(world, "teardown --delete-instance",
                            lambda: world.run("teardown.py", job, "--delete-instance", "--force")))

        for i in range(5):
            world.instance(f"bench-{i}")
        for i in range(50):
            world.submit(f"bench-{i % 5}", "--share-gpus", hang=True)   # many live jobs per instance, on purpose
        rows.append(measure(world, "poll_status --all (50 jobs, 5 instances)",
                            lambda: world.run("poll_status.py", "--all")))
    finally:
        world.close()

    print(f"{'verb':44} {'exec':>4} {'copy':>4} {'target':>6} {'seconds':>8}  note")
    failed = 0
    for row in rows:
        target, why = TARGETS.get(row["verb"], (5, "one per instance, concurrent"))
        met = row["exec"] <= target
        failed += not met
        note = ("" if met else "MISSED: ") + (why if row["exec"] > 1 else "at the floor")
        if row["exit"] not in (0, None):
            note += f" (exit {row['exit']}: {row['answer'].get('error', {}).get('code')})"
        print(f"{row['verb']:44} {row['exec']:>4} {row['copy']:>4} {target:>6} {row['seconds']:>8.2f}  {note}")
    for row in rows:   # the README's rows (bench/readme_table.py)
        target, _why = TARGETS.get(row["verb"], (5, ""))
        label, extra = README_ROWS[row["verb"]]
        figure = f"{row['exec']} `brev exec`" + (f" + {row['copy']} `brev copy`" if row["copy"] else "") + extra
        if row["verb"].startswith("poll_status --all"):
            figure += f", concurrent ({row['seconds']:.1f} s on the simulator)"
        print(f"ROW | {label} | {figure} | {README_TARGETS.get(row['verb'], f'{target} exec')} |")
    return 0


README_TARGETS = {"preflight (exec-ready, NGC login)": "<= 3 exec", "teardown --delete-instance": "1 exec + delete",
                  "poll_status --all (50 jobs, 5 instances)": "5 exec (one per instance)"}
README_ROWS = {
    "preflight (exec-ready, NGC login)": ("`preflight.py` on an exec-ready instance, with NGC login", " (key file)"),
    "submit (with --env HF_TOKEN)": ("`submit.py` with `--env HF_TOKEN`", " (credential file)"),
    "poll_status --logs 50": ("`poll_status.py JOB --logs 50`", ""),
    "teardown --delete-instance": ("`teardown.py JOB --delete-instance`",
                                   " + `brev delete` (the copy: results with no destination, copied home first)"),
    "poll_status --all (50 jobs, 5 instances)": ("`poll_status.py --all`, 50 jobs on 5 instances", ""),
}


if __name__ == "__main__":
    sys.exit(main())
