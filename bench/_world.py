"""A simulated Brev world for the benchmarks (the same simulator the tests use)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.sim.simctl import Simulator  # noqa: E402

TAO_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt"
SPEC = ROOT / "examples" / "visual_changenet" / "train.yaml"
DATA = ROOT / "examples" / "data" / "levir_cd_tiny"
NGC_KEY = "nvapi-BENCHbench000000000000000"


class World:
    """A temp dir with a simulator, a state dir and the env a user's shell would have."""

    def __init__(self):
        self.dir = Path(tempfile.mkdtemp(prefix="tao-brev-bench-"))
        self.sim = Simulator(self.dir / "sim")
        self.sim.set_ngc_key(NGC_KEY)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "AWS_", "S3_"))}
        base.update(TAO_STATE_DIR=str(self.dir / "state"), NGC_KEY=NGC_KEY, TAO_BREV_NO_REEXEC="1",
                    HF_TOKEN="hf_benchBENCHbench0000000000000")
        self.env = self.sim.env(base)

    def instance(self, name: str) -> None:
        self.sim.add_instance(name)
        self.sim.preload_image(name, TAO_IMAGE)
        shutil.copytree(DATA, self.sim.instance_home(name) / "levir_cd_tiny")

    def run(self, script: str, *args: str) -> dict:
        done = subprocess.run([sys.executable, str(ROOT / "scripts" / script), *args], env=self.env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
        try:
            return {"exit": done.returncode, **json.loads(done.stdout)}
        except json.JSONDecodeError:
            return {"exit": done.returncode, "stdout": done.stdout, "stderr": done.stderr}

    def spec(self, **simulate) -> str:
        import yaml

        data = yaml.safe_load(SPEC.read_text())
        data["simulate"] = {"epoch_seconds": 0.01, **simulate}
        path = self.dir / f"spec-{len(list(self.dir.glob('spec-*')))}.yaml"
        path.write_text(yaml.safe_dump(data))
        return str(path)

    def submit(self, instance: str, *extra: str, **simulate) -> dict:
        return self.run("submit.py", "--instance", instance, "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train", "--spec", self.spec(**simulate),
                        "--inputs", "~/levir_cd_tiny=levir_cd_tiny", *extra)

    def counts(self) -> tuple[int, int]:
        """(brev exec calls, brev copy calls) so far."""
        copies = sum(1 for r in self.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["copy"])
        return self.sim.exec_count(), copies

    def close(self) -> None:
        self.sim.close()
        shutil.rmtree(self.dir, ignore_errors=True)
