"""teardown --orphans (and --orphans --stop) in process: instances that bill for nothing, deleted
or stopped only when they are the bundle's own."""

from __future__ import annotations

from tao_brev import remote
from tao_brev.verbs import orphans, teardown
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, expect_catalog, launched, state


def ended_job(ctx, fake_brev, instance: str = "box", ephemeral: bool = True) -> str:
    """A job that ran on ``instance`` and was torn down, the instance kept (results: TAO_RESULTS_ROOT)."""
    ctx.env["TAO_RESULTS_ROOT"] = "~/tao-results"
    job_id = launched(ctx, fake_brev, instance=instance, ephemeral=ephemeral)
    fake_brev.expect_ls(entry(instance), times=2)
    fake_brev.expect_exec(instance, remote.remove_container(job_id), answer=sections(
        {"state": state("exited", 0), "logs": "", "rm": "", "own": "", "others": ""}))
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id, delete_instance=False)
    assert code == 0 and answer["instance_deleted"] is False, answer
    fake_brev.verify()
    return job_id


def no_containers(rows: str = ""):
    return sections({"ps": rows})


def idle_box_and_devbox(ctx, fake_brev) -> None:
    """An ended job's instance ``box`` (ours) and a ``devbox`` (not), both without a tao-job container."""
    ended_job(ctx, fake_brev)
    fake_brev.expect_ls(entry("box"), entry("devbox"))
    fake_brev.expect_exec("box", remote.list_job_containers(), answer=no_containers())
    fake_brev.expect_exec("devbox", remote.list_job_containers(), answer=no_containers())


def test_orphans_lists_idle_instances_and_keeps_the_busy_ones(ctx, fake_brev):
    job_id = ended_job(ctx, fake_brev)
    fake_brev.expect_ls(entry("box"), entry("devbox"), entry("busy"), entry("cold", status="STOPPED"))
    fake_brev.expect_exec("box", remote.list_job_containers(), answer=no_containers())
    fake_brev.expect_exec("devbox", remote.list_job_containers(), answer=no_containers())
    fake_brev.expect_exec("busy", remote.list_job_containers(), answer=no_containers("someone-job\trunning"))
    answer, code = orphans.orphans(ctx)
    assert code == 0 and answer["ok"] is True and answer["deleted"] == [], answer
    found = {o["instance"]: o for o in answer["orphans"]}
    assert sorted(found) == ["box", "devbox"]
    assert found["box"]["ours"] is True and found["box"]["owned"] is True and found["box"]["jobs"] == [job_id]
    assert found["devbox"]["ours"] is False and found["devbox"]["owned"] is False
    assert found["box"]["price_per_hour_usd"] == 1.006   # the cached brev search
    kept = {k["instance"]: k for k in answer["kept"]}
    assert "tao-job container running: someone-job" in kept["busy"]["reason"]
    assert kept["cold"]["bills"] == "disk"


def test_orphans_delete_deletes_only_the_owned_ones(ctx, fake_brev):
    idle_box_and_devbox(ctx, fake_brev)
    delete = fake_brev.expect("delete", "box", stdout="box\n")
    answer, code = orphans.orphans(ctx, delete=True)
    assert code == 0 and answer["deleted"] == ["box"] and delete.used == 1, answer


def test_naming_an_instance_the_bundle_never_used_is_refused(ctx, fake_brev):
    fake_brev.expect_ls(entry("devbox"))
    fake_brev.expect_exec("devbox", remote.list_job_containers(), answer=no_containers())
    expect_catalog(fake_brev)   # its idle cost: the price of its type
    answer, code = orphans.orphans(ctx, delete=True, names=["devbox"])
    assert code != 0 and answer["ok"] is False and answer["error"]["code"] == "NOT_AN_ORPHAN", answer
    assert answer["deleted"] == []
