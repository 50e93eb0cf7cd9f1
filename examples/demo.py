#!/usr/bin/env python3
"""The bundle's main job: a TAO job's whole life on a (simulated) Brev instance.

Real Brev and a GPU are not needed: the demo starts the simulator of `brev`
and `docker` shipped in tests/sim/ (a RUNNING instance whose sshd comes up a
few seconds late, brev logged out, an NGC-gated TAO image) and then runs the
bundle's scripts exactly as an agent would, printing one line per step (its exit
status, state and the answer's `next`) and a closing summary; --json prints ONE JSON
document instead ({"ok", "steps": [{"title", "argv", "exit", "answer"}], "summary"}), the
scripts' progress on stderr:

  1. preflight.py    brev, headless login, instance, readiness probe, docker, GPU, disk,
                     NGC login, and the image pulled as its own step (--pull), before any GPU run
  2. brev copy       pre-position the tiny LEVIR-CD dataset on the instance (tier A)
  3. submit.py       open the record, launch visual_changenet train once
  4. poll_status.py  --wait until COMPLETE
  5. poll_status.py  --logs 20
  6. teardown.py     remove the container, close the record; the job's cost facts are printed last

usage: demo.py [--workdir DIR] [--json | --quiet]
  --workdir DIR  keep the simulator, state dir and records there (default: a temp dir, removed)
  --json         print one JSON document (every step's whole answer, and the summary); progress on stderr
  --quiet        one line per step and the summary (the default; kept for CI's command line)
Exit codes: 0 the job ended COMPLETE with its checkpoints and its container
removed; 1 any step failed (its JSON answer says why).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.sim.simctl import Simulator  # noqa: E402

INSTANCE = "demo-a100"
IMAGE_KEY = "images.tao_toolkit.pyt"
# The simulator's accepted Brev token and NGC key: throw-away values made per run (never real ones).
# Random, so that no 8 of their characters also spell a path of the run (the answers withhold any
# line that holds 8 characters of a secret: "brev-demo-token" once hid the demo's own tao-brev-demo- dir).
DEMO_TOKEN = "sim-" + secrets.token_hex(12)
DEMO_NGC_KEY = "nvapi-" + secrets.token_hex(16)


class StepFailed(SystemExit):
    """A step exited non-zero: the demo ends with exit 1 (its answer says why)."""


class Demo:
    def __init__(self, workdir: Path, verbose: bool):
        self.workdir = workdir
        self.verbose = verbose
        self.sim = Simulator(workdir / "sim")
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "AWS_", "S3_"))}
        base.update(TAO_STATE_DIR=str(workdir / "state"), BREV_API_TOKEN=DEMO_TOKEN, NGC_KEY=DEMO_NGC_KEY)
        self.env = self.sim.env(base)
        self.steps: list[dict] = []
        self.summary: dict = {}

    def setup(self) -> None:
        self.sim.set_auth(token=DEMO_TOKEN, logged_in=False)
        self.sim.set_ngc_key(DEMO_NGC_KEY)
        self.sim.add_instance(INSTANCE, ssh_delay_s=2.0)

    def step(self, title: str, argv: list[str]) -> dict:
        """Run one command as an agent would (stdin closed); print one line (or, verbose, its
        JSON and progress) and return its answer. A failed step prints its whole answer."""
        if self.verbose:
            print(f"\n=== {title}\n$ {' '.join(argv)}", file=sys.stderr, flush=True)
        done = subprocess.run(argv, env=self.env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              cwd=ROOT, timeout=900)
        if self.verbose:
            sys.stderr.write(done.stderr)
        try:
            answer = json.loads(done.stdout) if done.stdout.strip() else {"ok": done.returncode == 0}
        except json.JSONDecodeError:
            answer = {"ok": done.returncode == 0, "stdout": done.stdout}
        self.steps.append({"title": title, "argv": argv, "exit": done.returncode, "answer": answer})
        if self.verbose:   # --json: stdout holds the one document main() prints at the end
            pass
        elif done.returncode != 0:
            print(f"# {title} (exit {done.returncode})")
            print(json.dumps(answer, indent=2))
        else:
            print(step_line(title, done.returncode, answer))
        sys.stdout.flush()
        if done.returncode != 0:
            raise StepFailed(f"demo: step '{title}' failed with exit {done.returncode}")
        return answer

    def script(self, name: str, *args: str) -> list[str]:
        return [sys.executable, str(ROOT / "scripts" / name), *args]

    def run(self) -> int:
        self.setup()
        data = ROOT / "examples" / "data" / "levir_cd_tiny"
        self.step("1. preflight", self.script("preflight.py", "--instance", INSTANCE, "--image", IMAGE_KEY,
                                                              "--pull"))
        self.step("2. copy the dataset to the instance (tier A: pre-positioned)",
                  [str(self.workdir / "sim" / "bin" / "brev"), "copy", str(data), f"{INSTANCE}:levir_cd_tiny"])
        sub = self.step("3. submit", self.script(
            "submit.py", "--instance", INSTANCE, "--image", IMAGE_KEY, "--network-arch", "visual_changenet",
            "--action", "train", "--spec", str(ROOT / "examples" / "visual_changenet" / "train.yaml"),
            "--inputs", "~/levir_cd_tiny=levir_cd_tiny"))
        job_id = sub["job_id"]
        final = self.step("4. wait for the job", self.script("poll_status.py", job_id, "--wait", "--interval", "1",
                                                             "--timeout", "300"))
        self.step("5. logs", self.script("poll_status.py", job_id, "--logs", "20"))
        down = self.step("6. teardown", self.script("teardown.py", job_id))

        results = self.sim.instance_home(INSTANCE) / "tao-results" / job_id / "train"
        checkpoints = sorted(p.name for p in results.glob("*.pth"))
        ok = final.get("state") == "COMPLETE" and checkpoints and down.get("container_removed") \
            and self.sim.container(INSTANCE, job_id) is None
        self.summary = {"job_id": job_id, "state": final.get("state"), "checkpoints": checkpoints,
                        "container_removed": down.get("container_removed"), "exec_round_trips": self.sim.exec_count(),
                        "cost": down.get("cost")}
        if not self.verbose:
            print(f"\ndemo: job {job_id} {final.get('state')}; checkpoints {checkpoints}; "
                  f"container removed: {down.get('container_removed')}; brev exec round trips: {self.sim.exec_count()}")
            print("demo: " + cost_line(down.get("cost") or {}))
        return 0 if ok else 1


def step_line(title: str, code: int, answer: dict) -> str:
    """One line for a step: exit status, what it says (state, job, checks), and its ``next``."""
    said = [f"exit {code}"]
    if answer.get("state"):
        said.append(str(answer["state"]))
    if answer.get("checks"):
        passed = sum(1 for c in answer["checks"] if c.get("ok"))
        said.append(f"{passed}/{len(answer['checks'])} checks passed")
    nxt = answer.get("next") or answer.get("next_note")
    if nxt:
        said.append(f"next: {nxt.replace(str(ROOT) + '/', '')}")
    return f"{title}: " + "; ".join(said)


def cost_line(cost: dict) -> str:
    """The job's cost facts (teardown's ``cost``) in one line; a figure that is not known says why
    (references/cost.md): idle time is an owned instance's only, a cost needs a price."""
    def num(key: str, fmt: str = "{:.1f} s", unknown: str = "unknown") -> str:
        return unknown if cost.get(key) is None else fmt.format(cost[key])

    idle = num("idle_billed_s", unknown="none (a reused instance: its idle time is not this job's)"
               if cost.get("owned") is False else "unknown")
    price = (f"{num('estimated_cost_usd', '${:.4f}')} at {num('price_per_hour_usd', '${:.2f}/h')} "
             f"({cost.get('instance_type')}, from {cost.get('price_source')})" if cost.get("price_source")
             else "unknown (no price: pass --price-per-hour)")
    return (f"cost: submit->running {num('submit_to_running_s')}, image pull {num('image_pull_s')}, "
            f"run {num('run_s')}, idle billed {idle}, billed {num('billed_s')}; estimated {price}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, help="keep everything here (default: a temp dir, removed)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print one JSON document: every step's answer, the summary")
    group.add_argument("--quiet", action="store_true", help="one line per step and the summary (the default)")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="tao-brev-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    demo = Demo(workdir.resolve(), verbose=args.json)
    code, failure = 1, None
    try:
        code = demo.run()
    except StepFailed as exc:
        failure = str(exc)
        if not args.json:
            raise
    finally:
        if args.json:   # one JSON document on stdout, whatever happened
            print(json.dumps({"ok": code == 0, "steps": demo.steps, "summary": demo.summary,
                              **({"error": failure} if failure else {})}, indent=2))
        demo.sim.close()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
