"""teardown in process: the container removed, the record closed, an owned instance deleted."""

from __future__ import annotations

from tao_brev import remote
from tao_brev.verbs import teardown
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, expect_catalog, launched, state


def removed(docker_state: str, logs: str = "epoch 1/2\nepoch 2/2", **more):
    """The answer of teardown's one round trip: state, logs, rm (and ``own`` of the results dir)."""
    return sections({"state": docker_state, "logs": logs, "rm": "", "own": "", "others": "", **more})


def test_teardown_of_a_running_job_on_a_reused_instance_keeps_the_instance(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())   # the instance gate: a STOPPED instance is not started
    remove = fake_brev.expect_exec("box", remote.remove_container(job_id), answer=removed(state()))
    fake_brev.expect_ls(entry())   # the cost facts: the instance type, learnt once, and its price
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 0 and answer["ok"] is True, answer
    assert answer["container_removed"] is True and answer["instance_deleted"] is False and answer["deleted"] == []
    assert answer["state"] == "CANCELED" and ctx.records.load(job_id)["terminal_state"] == "CANCELED"
    assert remove.used == 1
    assert answer["cost"]["instance_type"] == "g5.xlarge" and answer["cost"]["price_per_hour_usd"] == 1.006
    assert answer["cost"]["price_source"] == "brev search"
    assert remote.abandon_launch(job_id) in remove.calls[0].command   # a launch still on its way now refuses
    assert ctx.sidecars.load(job_id).teardown["container_removed"] is True


def test_teardown_of_an_owned_instance_deletes_it_once_nothing_is_left_on_it(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, ephemeral=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=removed(state("exited", 0)))
    fake_brev.expect_ls(entry())   # its type, learnt before the delete (the cost facts need it after)
    delete = fake_brev.expect("delete", "box", stdout="box\n")
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id, discard_results=True)
    assert code == 0 and answer["ok"] is True, answer
    assert answer["instance_deleted"] is True and answer["deleted"] == ["box"] and delete.used == 1
    assert answer["state"] == "COMPLETE" and answer["results_discarded"] == [job_id]


def test_a_teardown_rerun_after_the_delete_reaches_nothing(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, ephemeral=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=removed(state("exited", 0)))
    fake_brev.expect_ls(entry())
    fake_brev.expect("delete", "box", stdout="box\n")
    expect_catalog(fake_brev)
    teardown.teardown(ctx, job_id, discard_results=True)
    fake_brev.verify()
    answer, code = teardown.teardown(ctx, job_id)   # no brev call at all: the instance is gone
    assert code == 0 and answer["ok"] is True and answer["deleted"] == [], answer
    assert any("was deleted by teardown" in w for w in answer["warnings"])


def test_bad_and_unknown_job_ids_are_refused_before_any_brev_call(ctx, fake_brev):
    import pytest

    from tao_brev.errors import TaoBrevError

    for job_id, code in (("../x", "BAD_JOB_ID"), ("visual_changenet-train-abcdef", "UNKNOWN_JOB")):
        with pytest.raises(TaoBrevError) as raised:
            teardown.teardown(ctx, job_id)
        assert raised.value.code == code and raised.value.exit_code == 2
    assert fake_brev.calls == []


def test_a_stopped_instance_is_not_started_by_a_teardown_that_deletes_nothing(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, no_spec_check=True)
    fake_brev.expect_ls(entry(status="STOPPED"))
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 1 and answer["error"]["code"] == "INSTANCE_STOPPED", answer
    assert "--start" in answer["error"]["fix"] and fake_brev.calls[-1].args[0] == "ls"
    assert ctx.records.load(job_id).get("terminal_state") is None and not ctx.sidecars.load(job_id).cancel
