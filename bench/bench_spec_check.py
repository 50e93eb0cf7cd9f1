#!/usr/bin/env python3
"""The spec check's cost per submit: CPU seconds of one check in a fresh process, for each
network of the repository's specs (the shipped example and tests/fixtures/tao_specs/), beside
a bare start of the same interpreter (``python -c pass``), the runs interleaved.

What a submit pays: importing omegaconf and nvidia_tao_core's config module of the network,
building its ExperimentConfig (OmegaConf.structured), the merge with the spec, the overrides
(the bundle's results_dir=/results) and the YAML key positions. The figure is the median CPU
time (user + system of the child, from the kernel) minus the bare interpreter's; the target is
<= 1 s per submit. Figures only; nothing is asserted.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from _measure import medians, run

ROOT = Path(__file__).resolve().parent.parent
RUNS = 5
CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tao_brev import spec_check, yaml_bounded
text = Path({path!r}).read_text()
result = spec_check.check(network_arch={network!r}, action={action!r},
                          image="nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", spec_path={path!r}, spec_text=text,
                          spec_data=yaml_bounded.load(text, "spec"), overrides=["train.num_epochs=2"],
                          state_root=Path("/nonexistent"), env={{}}, skip=False, fix="")
sys.exit(0 if result.checked else 3)
"""


def specs() -> list:
    found = [(ROOT / "examples" / "visual_changenet" / "train.yaml", "visual_changenet", "train")]
    for path in sorted((ROOT / "tests" / "fixtures" / "tao_specs").glob("*.train.yaml")):
        found.append((path, *path.name.split(".")[:2]))
    return found


def main() -> int:
    python = sys.executable
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    rows = []
    for path, network, action in specs():
        code = CHILD.format(root=str(ROOT), path=str(path), network=network, action=action)
        ours, bare = [], []
        for _ in range(RUNS):
            bare.append(run([python, "-c", "pass"], env))
            ours.append(run([python, "-c", code], env))
            if ours[-1]["code"] != 0:
                raise SystemExit(f"the check of {path.name} did not pass (exit {ours[-1]['code']})")
        a, b = medians(ours), medians(bare)
        rows.append((network, a["cpu"] - b["cpu"], a["wall"] - b["wall"], a["rss_mb"]))
    print(f"spec check per submit (fresh process, median of {RUNS}, minus `python -c pass`; target <= 1 s CPU)")
    print(f"{'network':<22} {'CPU s':>7} {'wall s':>7} {'peak MB':>8}")
    for network, cpu, wall, rss in rows:
        print(f"{network:<22} {cpu:7.3f} {wall:7.3f} {rss:8.1f}")
    worst = max(rows, key=lambda r: r[1])
    print(f"worst: {worst[0]} {worst[1]:.3f} s CPU ({'within' if worst[1] <= 1.0 else 'OVER'} the 1 s target)")
    best = min(rows, key=lambda r: r[1])
    print(f"ROW | spec check against TAO's schema per submit (`bench_spec_check.py`: fresh process, omegaconf and "
          f"nvidia_tao_core imports included, {len(rows)} networks) | {best[1]:.2f}-{worst[1]:.2f} s CPU (worst: "
          f"{worst[0]}) | <= 1 s CPU |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
