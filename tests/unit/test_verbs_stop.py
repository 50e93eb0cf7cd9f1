"""teardown --stop-instance in process: `brev stop` once the results are safe, when the type can.

The end-to-end cases of a type brev search lists as not stoppable and of brev's own refusal moved here
from tests/test_stop_instance.py (which keeps the stop itself, end to end, with its cost parts)."""

from __future__ import annotations

from tao_brev import nextstep, remote
from tao_brev.verbs import teardown
from tests.unit.fake_brev import sections
from tests.unit.jobs import GPU_TYPES, entry, expect_catalog, launched, state


def removed():
    return sections({"state": state("exited", 0), "logs": "", "rm": "", "own": "", "others": ""})


def test_a_stoppable_instance_is_stopped_after_the_teardown(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=removed())
    fake_brev.expect_ls(entry())   # the instance type
    expect_catalog(fake_brev)      # ... and whether it can stop
    stop = fake_brev.expect("stop", "box", stdout="box\n")
    answer, code = teardown.teardown(ctx, job_id, stop_instance=True)
    assert code == 0 and answer["ok"] is True and answer["instance_stopped"] is True, answer
    assert answer["stop"]["stopped"] is True and answer["stop"]["still_billing"] is False and stop.used == 1
    assert answer["deleted"] == []


def test_a_type_that_cannot_stop_is_not_stopped_and_the_answer_says_it_bills(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=removed())
    fake_brev.expect_ls(entry(instance_type="a2-highgpu-1g"))
    expect_catalog(fake_brev, GPU_TYPES)
    answer, code = teardown.teardown(ctx, job_id, stop_instance=True)
    assert code == 0 and answer["instance_stopped"] is False, answer
    assert answer["stop"] == {**answer["stop"], "stopped": False, "stoppable": False, "still_billing": True}
    why = answer["stop"]["why"]
    assert "cannot be stopped" in why and "bills until it is deleted" in why and "--delete-instance" in why
    assert why in answer["warnings"]
    assert nextstep.teardown(answer, code, [job_id, "--stop-instance"])["next_note"] == why   # as teardown.py says
    assert not [c for c in fake_brev.calls if c.args[:1] == ["stop"]]   # brev stop never asked


def test_brev_refusing_the_stop_is_answered_as_not_stoppable(ctx, fake_brev):
    job_id = launched(ctx, fake_brev)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=removed())
    fake_brev.expect_ls(entry(instance_type="x-unlisted"))
    expect_catalog(fake_brev)
    fake_brev.expect("stop", "box", stderr='instance "box" does not support stop.\n', exit=1)
    answer, code = teardown.teardown(ctx, job_id, stop_instance=True)
    assert code == 0 and answer["instance_stopped"] is False and answer["stop"]["stoppable"] is False, answer
    assert "brev refused: it does not support stop" in answer["stop"]["why"]
