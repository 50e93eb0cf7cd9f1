"""Results that exist only on an instance (tao_brev.verbs.keep): copied back and verified
before the instance is deleted, never the other way round.

Through the scripts on the brev/docker simulator: a tier-A job submitted with
``--ephemeral`` and no destination (no bucket, no ``TAO_RESULTS_ROOT``) is torn
down by ``poll_status.py --wait --teardown`` / ``teardown.py``; its results dir
arrives here as one .tar.gz whose bytes equal the instance's files, and only
then is the instance deleted. A copy that fails or arrives damaged refuses the
delete (RESULTS_ONLY_ON_INSTANCE) with nothing deleted and the record as it was;
``--discard-results`` deletes without a copy; S3-routed and TAO_RESULTS_ROOT
jobs are not copied.
"""

from __future__ import annotations

import hashlib
import os
import tarfile

import pytest

from conftest import validate
from test_cost_guard import WAIT, Guard, kill_caller_once

from tao_brev.context import Context
from tao_brev.errors import TaoBrevError


@pytest.fixture
def guard(world):
    return Guard(world)


def _instance_files(guard: Guard, job: str, instance: str = "box") -> dict:
    """{relative path: bytes, or ("link", target)} of the job's results dir on the instance."""
    root = guard.sim.instance_home(instance) / "tao-results" / job
    return {str(p.relative_to(root.parent)): ("link", os.readlink(p)) if p.is_symlink() else p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_symlink() or p.is_file()}


def _archive_files(path: str) -> dict:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: ("link", m.linkname) if m.issym() else tar.extractfile(m).read()
                for m in tar.getmembers() if m.isfile() or m.issym()}


def _copies_of_results(guard: Guard) -> list[dict]:
    return [r for r in guard.brev_calls("copy") if any("results.tar.gz" in a for a in r["argv"])]


def _order(guard: Guard, verb: str) -> int:
    return next(i for i, r in enumerate(guard.sim.audit()) if r["tool"] == "brev" and r["argv"][:1] == [verb])


def test_wait_teardown_saves_instance_only_results_then_deletes(guard):
    job = guard.submit("--ephemeral")
    done = guard.run("poll_status.py", job, *WAIT, schema="poll_status")
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    on_instance = _instance_files(guard, job)
    assert on_instance, "the simulated job wrote no results"

    down = guard.wait_teardown(job)
    assert down.code == 0, down
    td = down.json["teardown"]
    assert td["instance_deleted"] and td["deleted"] == ["box"] and not guard.exists("box"), td
    saved = td["results_saved_to"]
    assert saved.endswith(f"{job}.tar.gz") and _archive_files(saved) == on_instance
    assert os.stat(saved).st_mode & 0o777 == 0o600     # what the job wrote: the owner's only
    entry = td["results_saved"][0]
    assert entry["job_id"] == job and entry["sha256"] == hashlib.sha256(open(saved, "rb").read()).hexdigest()
    assert len(_copies_of_results(guard)) == 1 and _order(guard, "copy") < _order(guard, "delete")   # copy first
    assert down.execs == down.json["polls"] + 1        # the archive rides in the teardown's one exec
    assert Context(env=guard.world.env).sidecars.load(job).results["saved"]["path"] == saved


@pytest.mark.parametrize("fault", ["fails", "arrives-empty"])
def test_a_copy_not_verified_refuses_the_delete_and_a_rerun_saves(guard, fault):
    job = guard.submit("--ephemeral")
    assert guard.run("poll_status.py", job, *WAIT).code == 0
    on_instance = _instance_files(guard, job)
    ctx = Context(env=guard.world.env)
    if fault == "fails":
        guard.sim.add_copy_fault("results.tar.gz", "fail")
    else:
        guard.sim.add_copy_fault("results.tar.gz")   # scp "succeeds", the content never arrived

    down = guard.run("teardown.py", job, schema="teardown")
    assert down.code == 1 and down.json["error"]["code"] == "RESULTS_ONLY_ON_INSTANCE", down
    assert down.json["still_billing"] is True and down.json["deleted"] == [] and not down.json["instance_deleted"]
    assert guard.exists("box") and guard.brev_calls("delete") == [] and _instance_files(guard, job) == on_instance
    assert job in down.json["blockers"][0] and "--discard-results" in down.json["error"]["fix"]
    assert down.json["next"].endswith(f"teardown.py {job}")
    assert "saved" not in ctx.sidecars.load(job).results and not ctx.sidecars.load(job).instance_deleted_at
    assert not (ctx.state_root / "brev" / "results" / f"{job}.tar.gz").exists()
    assert not (ctx.state_root / "brev" / "results" / f"{job}.tar.gz.part").exists()
    record = ctx.records.path(job).read_bytes()

    again = guard.run("teardown.py", job, schema="teardown")   # the `next`: the same teardown again
    assert again.code == 0 and again.json["deleted"] == ["box"], again
    assert _archive_files(again.json["results_saved_to"]) == on_instance
    assert ctx.records.load(job)["terminal_state"] == "COMPLETE" and record   # it stayed COMPLETE


def test_the_record_is_unchanged_by_a_refused_delete(guard):
    job = guard.submit("--ephemeral")
    assert guard.run("poll_status.py", job, *WAIT).code == 0
    assert guard.run("teardown.py", job, "--keep-instance").code == 0   # closed; the instance kept
    ctx = Context(env=guard.world.env)
    record = ctx.records.path(job).read_bytes()
    guard.sim.add_copy_fault("results.tar.gz", "fail")
    down = guard.run("teardown.py", job, "--delete-instance", schema="teardown")
    assert down.code == 1 and down.json["error"]["code"] == "RESULTS_ONLY_ON_INSTANCE", down
    assert down.json["next"].endswith(f"teardown.py {job} --delete-instance")
    assert ctx.records.path(job).read_bytes() == record and guard.exists("box")


def test_discard_results_deletes_without_a_copy(guard):
    job = guard.submit("--ephemeral")
    down = guard.wait_teardown(job)
    assert down.code == 0 and down.json["teardown"]["deleted"] == ["box"], down   # the default: saved
    job2_box = "box2"
    guard.add_box(job2_box)
    job2 = guard.submit("--ephemeral", instance=job2_box)
    assert guard.run("poll_status.py", job2, *WAIT).code == 0
    copies = len(_copies_of_results(guard))
    gone = guard.run("teardown.py", job2, "--discard-results", schema="teardown")
    assert gone.code == 0 and gone.json["deleted"] == [job2_box] and gone.json["results_discarded"] == [job2], gone
    assert "results_saved_to" not in gone.json and len(_copies_of_results(guard)) == copies
    assert any("--discard-results" in w for w in gone.json["warnings"])


def test_tao_results_root_jobs_are_not_copied(guard):
    res = guard.world.submit("--ephemeral", spec=guard.world.spec({"epoch_seconds": 0.02}),
                             TAO_RESULTS_ROOT="~/kept-results")
    assert res.code == 0, res
    job = res.json["job_id"]
    down = guard.wait_teardown(job)
    assert down.code == 0 and down.json["teardown"]["deleted"] == ["box"], down
    assert _copies_of_results(guard) == [] and "results_saved_to" not in down.json["teardown"]
    assert any("live only on box" in w for w in down.json["teardown"]["warnings"])


def test_s3_routed_jobs_are_not_copied(world, s3_server):
    from test_cost_guard import CARRIER

    world.sim.add_image(CARRIER, size_bytes=130_000_000)
    world.env.update(s3_server["env"], S3_BUCKET_NAME=s3_server["create_bucket"]())
    guard = Guard(world)
    job = guard.submit("--ephemeral")
    down = guard.wait_teardown(job)
    assert down.code == 0 and down.json["results"]["verified"] and down.json["teardown"]["deleted"] == ["box"], down
    assert _copies_of_results(guard) == [] and "results_saved_to" not in down.json["teardown"]


def test_orphans_delete_saves_instance_only_results_first_and_refuses_when_it_cannot(guard):
    job = guard.submit("--ephemeral")
    assert guard.run("poll_status.py", job, *WAIT).code == 0
    assert guard.run("teardown.py", job, "--keep-instance").code == 0   # an owned orphan holding the results
    on_instance = _instance_files(guard, job)
    listed = guard.run("teardown.py", "--orphans", schema="teardown")
    assert listed.code == 0 and "copies them back" in listed.json["orphans"][0]["advice"], listed

    guard.sim.add_copy_fault("results.tar.gz", "fail")
    refused = guard.run("teardown.py", "--orphans", "--delete", schema="teardown")
    assert refused.code == 1 and refused.json["error"]["code"] == "RESULTS_ONLY_ON_INSTANCE", refused
    assert refused.json["deleted"] == [] and guard.exists("box") and guard.brev_calls("delete") == []
    assert any(job in b for b in refused.json["orphans"][0]["blockers"])

    deleted = guard.run("teardown.py", "--orphans", "--delete", schema="teardown")
    assert deleted.code == 0 and deleted.json["deleted"] == ["box"] and not guard.exists("box"), deleted
    saved = deleted.json["orphans"][0]["results_saved"]
    assert [s["job_id"] for s in saved] == [job] and _archive_files(saved[0]["path"]) == on_instance
    assert _order(guard, "copy") < _order(guard, "delete")


def test_every_job_on_the_deleted_instance_is_saved_and_no_secret_on_any_command_line(guard):
    key = "nvapi-" + "K" * 40
    first = guard.submit("--ephemeral", "--share-gpus")
    second = guard.submit("--ephemeral", "--share-gpus")
    assert guard.run("poll_status.py", first, *WAIT).code == 0
    assert guard.run("poll_status.py", second, *WAIT).code == 0
    kept = guard.world.run("teardown.py", first, "--keep-instance", NGC_KEY=key)
    assert kept.code == 0, kept
    down = guard.world.run("teardown.py", second, NGC_KEY=key, HF_TOKEN="hf_" + "z" * 34)
    assert down.code == 0 and down.json["deleted"] == ["box"], down
    validate("teardown", down.json)
    assert sorted(s["job_id"] for s in down.json["results_saved"]) == sorted([first, second])
    assert key not in guard.sim.audit_text() and "hf_" + "z" * 34 not in guard.sim.audit_text()
    for record in _copies_of_results(guard):    # only the two paths on argv
        assert len([a for a in record["argv"] if not a.startswith("-")]) == 3, record


def test_archive_command_quotes_paths_and_reports_absence():
    from tao_brev import remote

    script = remote.archive_results("~/tao-results/j-1", "~/tao-jobs/j-1/results.tar.gz")
    assert '-C "$HOME"/tao-results j-1' in script and "TAO_NO_RESULTS" in script
    with pytest.raises(TaoBrevError):
        remote.archive_results("~/tao-results/../x/j", "~/a/b.tar.gz")


def test_wait_teardown_refused_names_the_retry_and_keeps_billing_visible(guard):
    job = guard.submit("--ephemeral")
    guard.sim.add_copy_fault("results.tar.gz", "fail")
    done = guard.wait_teardown(job)
    assert done.code == 1 and done.json["error"]["code"] == "RESULTS_ONLY_ON_INSTANCE", done
    assert done.json["state"] == "COMPLETE" and done.json["teardown"]["still_billing"] is True
    assert done.json["cost"]["still_billing"] is True and guard.exists("box")
    assert done.json["next"].endswith(f"teardown.py {job}")
    again = guard.wait_teardown(job)
    assert again.code == 0 and again.json["teardown"]["deleted"] == ["box"], again
    assert again.json["teardown"]["results_saved_to"] and not guard.exists("box")


@pytest.mark.parametrize("kill_at", ["copy *results.tar.gz*", "delete *"], ids=["before-copy", "before-delete"])
def test_killed_at_any_point_a_rerun_saves_once_and_deletes_once(guard, tmp_path, kill_at):
    job = guard.submit("--ephemeral")
    assert guard.run("poll_status.py", job, *WAIT).code == 0
    on_instance = _instance_files(guard, job)
    killed = guard.run("teardown.py", job, env=kill_caller_once(guard, tmp_path, kill_at))
    assert killed.code == -9 and guard.exists("box"), killed
    rerun = guard.run("teardown.py", job, schema="teardown")
    assert rerun.code == 0 and rerun.json["deleted"] == ["box"] and not guard.exists("box"), rerun
    saved = Context(env=guard.world.env).sidecars.load(job).results["saved"]["path"]
    assert _archive_files(saved) == on_instance
    assert len(_copies_of_results(guard)) == 1 and len(guard.brev_calls("delete")) == 1
    assert ("results_saved_to" in rerun.json) == (kill_at.startswith("copy"))   # copied by the run that did it


def test_a_stopped_orphan_holding_such_results_is_refused_without_starting_it(guard):
    job = guard.submit("--ephemeral")
    assert guard.run("poll_status.py", job, *WAIT).code == 0
    assert guard.run("teardown.py", job, "--keep-instance").code == 0
    guard.sim.set_instance("box", status="STOPPED")
    refused = guard.run("teardown.py", "--orphans", "--delete", schema="teardown")
    assert refused.code == 1 and refused.json["error"]["code"] == "RESULTS_ONLY_ON_INSTANCE", refused
    assert refused.execs == 0 and guard.brev_calls("delete") == [] and _copies_of_results(guard) == []
    assert guard.sim.instance("box")["status"] == "STOPPED"
    assert any(f"teardown.py {job} --delete-instance" in b for b in refused.json["orphans"][0]["blockers"])


def test_the_exec_that_archives_has_the_archive_budget_and_the_others_the_default(guard):
    from tao_brev.verbs import keep, teardown as teardown_mod

    jobs = [guard.submit("--ephemeral"), guard.submit("--ephemeral", "--share-gpus")]
    for job in jobs:
        assert guard.run("poll_status.py", job, *WAIT).code == 0
    ctx = Context(env=guard.world.env)
    budgets, real = [], ctx.brev.exec

    def exec_(instance, script, **kwargs):
        budgets.append(("save:" in script, kwargs.get("timeout")))
        return real(instance, script, **kwargs)

    ctx.brev.exec = exec_
    kept, _code = teardown_mod.teardown(ctx, jobs[0], delete_instance=False)   # nothing archived
    down, code = teardown_mod.teardown(ctx, jobs[1])
    assert code == 0 and down["deleted"] == ["box"] and len(down["results_saved"]) == 2, down
    assert budgets == [(False, None), (True, keep.ARCHIVE_TIMEOUT_S)]
