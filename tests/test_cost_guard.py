"""Cost guard (issue 7): no ephemeral instance left billing, no idle GPU time unaccounted.

Through the scripts, on the brev/docker simulator plus a real S3 server (moto)
where results go to S3: ``poll_status.py --wait --teardown`` carries a job to
its end (upload, verification, container removal, deletion of an owned
instance) and survives being killed at any point; a reused instance, an
instance with another live job and one with unverified results survive;
``teardown.py --orphans`` lists what bills for nothing and deletes only what
it may, only when asked; every answer carries schema-valid cost facts.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from conftest import EXAMPLE_DATA, TAO_IMAGE, validate
from tao_brev import cost as cost_mod
from tao_brev.context import Context
from tao_brev.transport import Brev

CARRIER = "public.ecr.aws/aws-cli/aws-cli:2.22.35"
WAIT = ("--wait", "--interval", "0.2", "--timeout", "60")
FAST = {"TAO_BREV_RETRY_BACKOFF_S": "0"}


class Guard:
    """The simulator world, with helpers that count what reached brev and docker."""

    def __init__(self, world):
        self.world, self.sim = world, world.sim
        world.env.update(FAST)

    def run(self, script: str, *args: str, schema: str | None = None, env: dict | None = None):
        before = self.sim.exec_count()
        result = self.world.run(script, *args, **(env or {}))
        result.execs = self.sim.exec_count() - before
        if schema:
            assert result.json is not None, result
            validate(schema, result.json)
        return result

    def submit(self, *extra: str, instance: str = "box", hang: bool = False):
        spec = self.world.spec({"epoch_seconds": 0.02, **({"hang": True} if hang else {})})
        res = self.world.submit(*extra, spec=spec, instance=instance)
        assert res.code == 0, res
        return res.json["job_id"]

    def wait_teardown(self, job_id: str, *extra: str, env: dict | None = None):
        return self.run("poll_status.py", job_id, *WAIT, "--teardown", *extra, schema="poll_status", env=env)

    def add_box(self, name: str, **opts) -> None:
        self.sim.add_instance(name, **opts)
        self.sim.preload_image(name, TAO_IMAGE)

    def exists(self, name: str) -> bool:
        return self.sim.world.instance(name) is not None

    def brev_calls(self, verb: str) -> list[dict]:
        return [r for r in self.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == [verb]]

    def results_syncs(self, job_id: str) -> int:
        """`aws s3 sync` runs of the results carrier for ``job_id`` (the uploads)."""
        return sum(1 for r in self.sim.audit() if r["tool"] == "docker" and "sync" in r["argv"]
                   and any(a.startswith("s3://") and f"/results/{job_id}" in a for a in r["argv"]))


@pytest.fixture
def guard(world):
    return Guard(world)


@pytest.fixture
def s3guard(world, s3_server):
    """As ``guard``, with a bucket, the S3 settings in the shell env and the carrier image."""
    world.sim.add_image(CARRIER, size_bytes=130_000_000)
    world.env.update(s3_server["env"], S3_BUCKET_NAME=s3_server["create_bucket"]())
    return Guard(world)


def kill_caller_once(guard: Guard, tmp_path: Path, glob: str) -> dict:
    """An env whose `brev` SIGKILLs the calling script the first time its argv matches ``glob``
    (that call never happens): a deterministic kill between two steps of one command."""
    shim = tmp_path / "shim"
    shim.mkdir()
    fired, real = shlex.quote(str(shim / "fired")), shlex.quote(str(guard.sim.world.bin_dir / "brev"))
    (shim / "brev").write_text(f"""#!/bin/bash
glob={shlex.quote(glob)}
if [ ! -e {fired} ] && [[ "$*" == $glob ]]; then touch {fired}; kill -9 "$PPID"; exit 1; fi
exec {real} "$@"
""")
    (shim / "brev").chmod(0o755)
    return {"PATH": f"{shim}{os.pathsep}{guard.world.env['PATH']}"}


def assert_cost(cost: dict, owned: bool) -> None:
    validate("cost", cost)
    assert cost["owned"] is owned
    assert cost["run_s"] > 0 and cost["submit_to_running_s"] >= 0 and cost["billed_s"] >= cost["run_s"]
    assert (cost["idle_billed_s"] is not None) is owned


# ------------------------------------------------------------------ --wait --teardown
def test_ephemeral_job_is_uploaded_verified_and_its_instance_deleted(s3guard, tmp_path):
    cost_mod.note_pull(Context(env=s3guard.world.env), "box", TAO_IMAGE, took_s=42.5)   # as after preflight --pull
    job = s3guard.submit("--ephemeral", "--storage-tier", "B", "--inputs", f"{EXAMPLE_DATA}=levir_cd_tiny")

    done = s3guard.wait_teardown(job)
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert done.json["results"]["verified"] and s3guard.results_syncs(job) == 1
    down = done.json["teardown"]
    assert down["container_removed"] and down["instance_deleted"] and down["deleted"] == ["box"], down
    assert not s3guard.exists("box") and len(s3guard.brev_calls("delete")) == 1
    assert done.execs == done.json["polls"] + 2          # polls, the results upload, the container removal
    cost = done.json["cost"]
    assert_cost(cost, owned=True)
    assert cost["image_pull_s"] == 42.5 and cost["billed_s"] >= 42.5 + cost["run_s"]
    assert not cost["still_billing"] and cost["instance_deleted_at"]
    # brev's own price (brev search gpu --json, the simulated account's catalog), not prices.yaml's 3.67
    assert (cost["instance_type"], cost["price_source"], cost["price_per_hour_usd"]) == ("a2-highgpu-1g",
                                                                                         "brev search", 4.09)
    assert cost["price_note"].startswith("brev search gpu --json, fetched ")
    assert cost["estimated_cost_usd"] == pytest.approx(cost["billed_s"] * 4.09 / 3600, abs=1e-3)

    again = s3guard.wait_teardown(job)                   # a rerun reaches nothing, deletes nothing
    assert again.code == 0 and again.execs == 0 and again.json["teardown"]["deleted"] == [], again
    assert len(s3guard.brev_calls("delete")) == 1 and s3guard.results_syncs(job) == 1
    assert again.json["cost"]["idle_billed_s"] == cost["idle_billed_s"]
    shown = s3guard.run("teardown.py", job, schema="teardown")
    assert shown.code == 0 and shown.json["deleted"] == [] and shown.json["cost"]["billed_s"] == cost["billed_s"]


@pytest.mark.parametrize("kill_at", ["exec *docker rm -f visual_changenet-*", "delete *"], ids=["before-rm", "before-delete"])
def test_killed_after_the_upload_a_rerun_uploads_nothing_twice_and_deletes_once(s3guard, tmp_path, kill_at):
    job = s3guard.submit("--ephemeral")                  # tier A, results routed to the bucket
    killed = s3guard.run("poll_status.py", job, *WAIT, "--teardown", env=kill_caller_once(s3guard, tmp_path, kill_at))
    assert killed.code == -9 and killed.json is None, killed
    assert s3guard.results_syncs(job) == 1 and s3guard.exists("box")
    assert (s3guard.sim.container("box", job) is None) == kill_at.startswith("delete")

    rerun = s3guard.wait_teardown(job)
    assert rerun.code == 0 and rerun.json["results"]["verified"], rerun
    assert rerun.json["teardown"]["deleted"] == ["box"] and not s3guard.exists("box")
    assert s3guard.results_syncs(job) == 1               # verified files are not sent again
    assert len(s3guard.brev_calls("delete")) == 1
    assert_cost(rerun.json["cost"], owned=True)


def test_reused_instance_survives_and_a_shared_owned_one_waits_for_its_last_job(guard):
    reused = guard.submit()
    done = guard.wait_teardown(reused, "--price-per-hour", "2.5")
    assert done.code == 0 and done.json["teardown"]["deleted"] == [] and guard.exists("box"), done
    assert done.json["teardown"]["container_removed"] and guard.sim.container("box", reused) is None
    assert_cost(done.json["cost"], owned=False)
    assert done.json["cost"]["price_source"] == "flag"
    assert done.json["cost"]["estimated_cost_usd"] == pytest.approx(done.json["cost"]["billed_s"] * 2.5 / 3600,
                                                                    abs=1e-3)

    guard.add_box("shared")
    live = guard.submit(instance="shared", hang=True)
    owner = guard.submit("--ephemeral", "--share-gpus", instance="shared")   # two live jobs on purpose
    kept = guard.wait_teardown(owner)
    assert kept.code == 0 and kept.json["teardown"]["deleted"] == [] and guard.exists("shared"), kept
    assert live in kept.json["teardown"]["instance_kept"]
    assert kept.json["cost"]["still_billing"] is True
    assert guard.sim.container("shared", live)["State"]["Status"] == "running"

    last = guard.run("teardown.py", live, schema="teardown")   # the last job on an owned instance deletes it
    assert last.code == 0 and last.json["state"] == "CANCELED" and last.json["deleted"] == ["shared"], last
    assert not guard.exists("shared")
    assert_cost(last.json["cost"], owned=True)


def test_unverified_results_keep_the_instance(guard):
    """Results routed to S3 whose upload cannot happen (no credentials here): never deleted."""
    job = guard.submit("--ephemeral", "--bucket", "tao-results-nowhere")
    done = guard.wait_teardown(job)
    assert done.code == 1 and done.json["error"]["code"] == "INSTANCE_DELETE_REFUSED", done
    assert done.json["state"] == "COMPLETE" and done.json["results"]["verified"] is False
    assert done.json["teardown"]["deleted"] == [] and guard.exists("box")
    assert any(job in b for b in done.json["teardown"]["blockers"])
    listed = guard.run("teardown.py", "--orphans", "--delete", schema="teardown")
    assert listed.code == 1 and listed.json["error"]["code"] == "INSTANCE_DELETE_REFUSED", listed
    assert listed.json["deleted"] == [] and guard.exists("box")
    assert guard.brev_calls("delete") == []


# ------------------------------------------------------------------ --orphans
def test_orphans_are_listed_and_only_ours_deleted_only_when_asked(guard):
    for name in ("eph", "dev", "busy"):
        guard.add_box(name)
    guard.sim.add_instance("parked", status="STOPPED")
    Brev(env=guard.world.env).run("busy", "docker run -d --name other-tool --label tao-job=x ubuntu:22.04 sleep 60")
    reused = guard.submit()
    assert guard.run("teardown.py", reused).code == 0        # box: reused, its job torn down, still running
    owned = guard.submit("--ephemeral", instance="eph")
    assert guard.run("teardown.py", owned, "--keep-instance").code == 0

    listed = guard.run("teardown.py", "--orphans", schema="teardown")
    assert listed.code == 0, listed
    orphans = {o["instance"]: o for o in listed.json["orphans"]}
    assert sorted(orphans) == ["box", "dev", "eph"], listed.json
    assert (orphans["eph"]["ours"], orphans["eph"]["owned"], orphans["eph"]["jobs"]) == (True, True, [owned])
    assert (orphans["box"]["ours"], orphans["box"]["owned"]) == (True, False)
    assert orphans["dev"]["ours"] is False and "never used by this bundle" in orphans["dev"]["reason"]
    assert orphans["eph"]["idle_s"] >= 0 and orphans["eph"]["estimated_idle_cost_usd"] is not None
    kept = {k["instance"]: k["reason"] for k in listed.json["kept"]}
    assert "other-tool" in kept["busy"] and "STOPPED" in kept["parked"]
    # a kept STOPPED instance is not free: the answer says its disk bills (and a busy one does not claim it)
    bills = {k["instance"]: k.get("bills") for k in listed.json["kept"]}
    assert bills == {"busy": None, "parked": "disk"} and "disk still bills" in kept["parked"], listed.json["kept"]
    assert listed.execs == 4 and listed.json["deleted"] == [] and guard.brev_calls("delete") == []

    deleted = guard.run("teardown.py", "--orphans", "--delete", schema="teardown")
    assert deleted.code == 0 and deleted.json["deleted"] == ["eph"], deleted
    # what is left is named, never "nothing bills" while idle instances still run
    assert deleted.json["next"] is None and deleted.json["next_note"].startswith(
        "deleted eph; still idle and billing: box, dev ("), deleted.json["next_note"]
    assert [guard.exists(n) for n in ("eph", "box", "dev", "busy", "parked")] == [False, True, True, True, True]

    foreign = guard.run("teardown.py", "--orphans", "--delete", "--instance", "dev", schema="teardown")
    assert foreign.code == 1 and foreign.json["error"]["code"] == "NOT_AN_ORPHAN", foreign
    assert foreign.json["deleted"] == [] and guard.exists("dev")

    named = guard.run("teardown.py", "--orphans", "--delete", "--instance", "box", schema="teardown")
    assert named.code == 0 and named.json["deleted"] == ["box"] and not guard.exists("box"), named
    assert named.json["next_note"].startswith("deleted box; still idle and billing: dev ("), named.json
    assert [c["argv"] for c in guard.brev_calls("delete")] == [["delete", "eph"], ["delete", "box"]]


def test_bad_combinations_are_bad_arguments(guard):
    for script, args in [("poll_status.py", ["some-job", "--teardown"]), ("teardown.py", []),
                         ("teardown.py", ["some-job", "--orphans"]), ("teardown.py", ["--orphans", "--force"]),
                         ("teardown.py", ["some-job", "--delete"]), ("teardown.py", ["--orphans", "--instance", "x"]),
                         ("poll_status.py", ["some-job", "--wait", "--price-per-hour", "-1"])]:
        res = guard.run(script, *args, schema=script.replace(".py", ""))
        assert res.code == 2 and res.json["error"]["code"] == "BAD_ARGUMENT", (script, args, res)
    assert guard.sim.exec_count() == 0
