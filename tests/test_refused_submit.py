"""A submit refused before launch leaves nothing to clean up: the refusal closes the job (nothing
was created on the instance), ``poll_status.py --all`` is not failed by it, the caller's own
mistake is never ERR_INFRA, and its times never run backwards."""

from __future__ import annotations

from conftest import validate
from tao_brev import cost


def refused(world):
    res = world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                    "--network-arch", "visual_changenet", "--action", "train", "--spec", str(world.spec()),
                    "--inputs", "/root/not-on-the-instance=levir_cd_tiny")   # the name the spec reads
    assert res.code == 1 and res.json["error"]["code"] == "INPUT_NOT_FOUND", res
    return res.json["job_id"]


def test_a_refused_submit_is_closed_and_does_not_fail_poll_all(world):
    job = refused(world)
    everything = world.run("poll_status.py", "--all")
    validate("poll_status", everything.json)
    assert everything.code == 0 and everything.json["ok"] is True, everything
    assert job not in [j["job_id"] for j in everything.json["jobs"]]
    one = world.run("poll_status.py", job)
    validate("poll_status", one.json)
    assert one.json["state"] == "ERROR" and one.json.get("closed_at"), one
    assert one.json["hint"]["err_class"] == "ERR_PROGRAM" and one.json["next"] is None, one
    record = world.run("tao_job_record.py", "show", job).json
    assert record["err_class"] == "ERR_PROGRAM"
    down = world.run("teardown.py", job)                  # nothing left, and saying so is no error
    assert down.code == 0 and down.json["state"] == "ERROR", down


def test_a_refused_submit_never_ends_before_it_was_submitted(world):
    job = refused(world)
    from tao_brev.context import Context

    facts = cost.facts(Context(env=world.env), job, owned=False, lookup=False)
    assert cost.parse_ts(facts["ended_at"]) >= cost.parse_ts(facts["submitted_at"]), facts
    assert facts["billed_s"] is not None and facts["billed_s"] >= 0


def test_a_refusal_after_docker_run_may_have_left_a_container_and_stays_open(world):
    from tao_brev.verbs import submit

    assert "REMOTE_COMMAND_FAILED" not in submit.REFUSED_BEFORE_RUN and "SUBMIT_REFUSED" not in submit.REFUSED_BEFORE_RUN
