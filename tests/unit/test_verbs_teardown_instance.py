"""teardown's instance end in process: an owned instance kept while another job lives on it,
deleted by the last one, a delete asked by name refused while something would be lost (unless
--force), and a failed ``brev delete`` remembered as pending with the exact manual command."""

from __future__ import annotations

from tao_brev import remote
from tao_brev.vocabulary import JobState
from tao_brev.verbs import teardown
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, expect_catalog, launched, state


def expect_removal(fake_brev, job_id, docker_state=None, listings: int = 2):
    fake_brev.expect_ls(entry(), times=listings)   # the gate, the instance type
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=sections(
        {"state": docker_state or state("exited", 0), "logs": "", "rm": "", "own": "", "others": ""}))


def test_an_owned_instance_is_kept_while_another_job_lives_on_it(ctx, fake_brev):
    first = launched(ctx, fake_brev, ephemeral=True, no_spec_check=True)
    second = launched(ctx, fake_brev, ephemeral=True, no_spec_check=True)
    expect_removal(fake_brev, first)
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, first, discard_results=True)
    assert code == 0 and answer["ok"] is True and answer["deleted"] == [], answer
    assert second in answer["instance_kept"] and not any(c.args[:1] == ["delete"] for c in fake_brev.calls)
    assert any("kept, it still bills" in w for w in answer["warnings"])


def test_a_delete_asked_by_name_is_refused_while_a_job_lives_and_forced_it_deletes(ctx, fake_brev):
    first = launched(ctx, fake_brev, no_spec_check=True)
    second = launched(ctx, fake_brev, no_spec_check=True)
    expect_removal(fake_brev, first)
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, first, delete_instance=True, discard_results=True)
    assert code == 1 and answer["ok"] is False and answer["error"]["code"] == "INSTANCE_DELETE_REFUSED", answer
    assert any(second in b for b in answer["blockers"]) and answer["deleted"] == []
    assert "--force" in answer["error"]["fix"]
    assert answer["container_removed"] is True   # the container went all the same, the record closed
    assert ctx.records.load(first)["terminal_state"] == JobState.COMPLETE
    fake_brev.verify()
    # the rerun asks for the container again (nothing left); type and price are known by now
    expect_removal(fake_brev, first, (1, f"Error: No such object: {first}"), listings=1)
    fake_brev.expect("delete", "box", stdout="box\n")
    answer, code = teardown.teardown(ctx, first, delete_instance=True, force=True, discard_results=True)
    assert code == 0 and answer["deleted"] == ["box"] and answer["forced"] is True, answer
    assert ctx.sidecars.load(second).instance_deleted_at   # every job on it remembers the delete


def test_a_failed_delete_is_pending_with_the_manual_command_and_a_rerun_finishes_it(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, ephemeral=True, no_spec_check=True)
    expect_removal(fake_brev, job_id)
    fake_brev.expect("delete", "box", stderr="Error: you do not have permission to delete this instance\n", exit=1)
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id, discard_results=True)
    assert code != 0 and answer["ok"] is False and answer["error"]["code"] == "INSTANCE_DELETE_PENDING", answer
    assert answer["still_billing"] is True and answer["manual_command"] == "brev delete box"
    assert answer["deleted"] == [] and ctx.sidecars.load(job_id).delete_pending["manual_command"] == "brev delete box"
    fake_brev.verify()
    # the rerun asks for the container again (nothing left); type and price are known by now
    expect_removal(fake_brev, job_id, (1, f"Error: No such object: {job_id}"), listings=1)
    fake_brev.expect("delete", "box", stdout="box\n")
    answer, code = teardown.teardown(ctx, job_id, discard_results=True)
    assert code == 0 and answer["deleted"] == ["box"], answer
    assert not ctx.sidecars.load(job_id).delete_pending and not ctx.sidecars.instance("box").delete_pending


def test_keep_instance_never_deletes_an_owned_one(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, ephemeral=True, no_spec_check=True)
    expect_removal(fake_brev, job_id)
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id, delete_instance=False)
    assert code == 0 and answer["instance_deleted"] is False and answer["deleted"] == [], answer
    assert not any(c.args[:1] == ["delete"] for c in fake_brev.calls)
