#!/usr/bin/env python3
"""Script start-up: every script's `--help` beside a bare start of the same interpreter
(`python -c pass`), in the same run, the runs interleaved.

Three ways a script starts, each with and without PYTHONDONTWRITEBYTECODE=1 (common in
agent sandboxes: it stops Python writing bytecode, not reading it):

* installed: `install.sh --claude` into a temporary HOME (the shared environment made there
  by uv); the script is run as an agent runs it, by its path (its #! line names the
  environment's python); the yardstick is that python;
* checkout: `.venv/bin/python scripts/NAME.py` in this checkout (`install.sh --local`
  precompiles it); the yardstick is `.venv/bin/python`;
* checkout without any bytecode: a copy of the code with no __pycache__, run with
  PYTHONDONTWRITEBYTECODE=1, so every module it imports is compiled from source each time.

Prints the median wall and CPU time of each and the ratio to the bare interpreter (target:
<= 3x). Figures only; nothing is asserted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import _measure

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
SCRIPTS = ("preflight.py", "submit.py", "poll_status.py", "teardown.py", "redact_secrets.py", "tao_job_record.py")
TARGET = 3.0
# What any --help costs before a line of the bundle runs: argparse printing a help laid out as
# the scripts' (tao_brev.cli.help_formatter: a raw description, an explicit width, so no shutil),
# with what that loads (gettext, locale, textwrap). A script's --help loads no json.
FLOOR = ("import argparse; argparse.ArgumentParser(description='d', formatter_class=lambda prog: "
         "argparse.RawDescriptionHelpFormatter(prog, width=78)).parse_args(['--help'])")


def _env(nowrite: bool, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "PYTHON"))}
    env.update(extra)
    if nowrite:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def install(base: Path) -> tuple[Path, Path] | str:
    """(installed bundle, its environment's python) or why there is none."""
    env = {**_env(False), "HOME": str(base / "home"), "XDG_DATA_HOME": str(base / "xdg"),
           "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}   # uv of the dev extra
    done = subprocess.run(["bash", str(ROOT / "install.sh"), "--claude"], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        return f"install.sh failed: {done.stderr.strip().splitlines()[-1:]}"
    return base / "home" / ".claude" / "skills" / "tao-run-on-brev", base / "xdg" / "tao-run-on-brev" / "venv" / "bin" / "python"


def bare_copy(base: Path) -> Path:
    """The checkout's code without bytecode, its .venv linked."""
    copy = base / "bare-checkout"
    copy.mkdir()
    for item in ("tao_brev", "scripts", "references", "versions.yaml"):
        source = ROOT / item
        if source.is_dir():
            shutil.copytree(source, copy / item, ignore=shutil.ignore_patterns("__pycache__"))
        elif source.exists():
            shutil.copy(source, copy / item)
    (copy / ".venv").symlink_to(ROOT / ".venv")
    return copy


def measure(label: str, python: Path, command, nowrite: bool) -> list[dict]:
    env = _env(nowrite, TAO_STATE_DIR=str(Path(tempfile.gettempdir()) / "tao-brev-bench-empty-state"))
    rows = []
    for script in SCRIPTS:
        ours, bare = _measure.side_by_side(command(script), [str(python), "-c", "pass"], RUNS, env)
        rows.append({"mode": label, "nowrite": nowrite, "script": script, "ours": ours, "bare": bare})
    return rows


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="tao-brev-startup-"))
    rows, notes = [], []
    try:
        installed = install(base)
        venv_python = ROOT / ".venv" / "bin" / "python"
        plans = []
        if isinstance(installed, str):
            notes.append(f"installed copy: not measured ({installed})")
        else:
            dest, python = installed
            plans += [("installed", python, lambda s, d=dest: [str(d / "scripts" / s), "--help"], nw) for nw in (False, True)]
        plans += [("checkout", venv_python, lambda s: [str(venv_python), str(ROOT / "scripts" / s), "--help"], nw)
                  for nw in (False, True)]
        copy = bare_copy(base)
        plans.append(("checkout, no bytecode", venv_python,
                      lambda s, c=copy: [str(venv_python), str(c / "scripts" / s), "--help"], True))
        for label, python, command, nowrite in plans:
            rows += measure(label, python, command, nowrite)
        floor = _measure.side_by_side([str(venv_python), "-c", FLOOR], [str(venv_python), "-c", "pass"], RUNS,
                                      _env(False))
    finally:
        shutil.rmtree(base, ignore_errors=True)

    print(f"script start-up: `NAME.py --help` vs `python -c pass` of the same interpreter, median of {RUNS} "
          f"interleaved runs; {_measure.load()}")
    print(f"{'start':<23} {'PYTHONDONTWRITEBYTECODE':<23} {'script':<18} {'wall s':>7} {'bare s':>7} {'x':>5} "
          f"{'cpu x':>6}  target")
    for r in rows:
        ratio, cpu = r["ours"]["wall"] / r["bare"]["wall"], r["ours"]["cpu"] / r["bare"]["cpu"]
        print(f"{r['mode']:<23} {'=1' if r['nowrite'] else 'unset':<23} {r['script']:<18} {r['ours']['wall']:7.3f} "
              f"{r['bare']['wall']:7.3f} {ratio:5.1f} {cpu:6.1f}  <= {TARGET:g}x{'' if ratio <= TARGET else '  MISSED'}")
    for note in notes:
        print(note)
    floor_x = floor[0]["wall"] / floor[1]["wall"]
    print(f"floor: `python -c \"{FLOOR}\"` takes {floor[0]['wall']:.3f} s, {floor_x:.1f}x the bare interpreter "
          f"(CPU {floor[0]['cpu'] / floor[1]['cpu']:.1f}x): the part of any script's --help no code of the bundle adds")
    groups = {}
    for r in rows:
        groups.setdefault((r["mode"], r["nowrite"]), []).append(r)
    for (mode, nowrite), group in groups.items():
        ratios = [g["ours"]["wall"] / g["bare"]["wall"] for g in group]
        cpus = [g["ours"]["cpu"] / g["bare"]["cpu"] for g in group]
        walls = [g["ours"]["wall"] for g in group]
        bare = sorted(g["bare"]["wall"] for g in group)[len(group) // 2]
        print(f"ROW | script start-up, {mode}, PYTHONDONTWRITEBYTECODE {'=1' if nowrite else 'unset'} "
              f"(`--help` of the 6 scripts, median of {RUNS}) | {min(walls):.3f}-{max(walls):.3f} s: "
              f"{min(ratios):.1f}-{max(ratios):.1f}x the bare interpreter ({bare:.3f} s); CPU time "
              f"{min(cpus):.1f}-{max(cpus):.1f}x | <= {TARGET:g}x |")
    print(f"ROW | the floor of any `--help`: argparse printing a help, nothing of the bundle | "
          f"{floor_x:.1f}x the bare interpreter (CPU {floor[0]['cpu'] / floor[1]['cpu']:.1f}x) | - |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
