"""A submit refused before launch leaves nothing to clean up: the refusal closes the job (nothing
was created on the instance), ``poll_status.py --all`` is not failed by it, the caller's own
mistake is never ERR_INFRA, and its times never run backwards."""

from __future__ import annotations

import pytest
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


# Every refusal submit can give before the container starts, each made the way the instance makes it
# (the simulator's knobs): (how, the refusal's code, the caller's own mistake?)
BEFORE_RUN = [("spec_path_missing", "SPEC_PATH_MISSING", True), ("gpus_busy", "GPUS_BUSY", True),
              ("input_not_found", "INPUT_NOT_FOUND", True), ("disk_full", "DISK_FULL", False),
              ("credential_copy_failed", "BREV_FAILED", False)]


def _refuse(world, how: str):
    data = world.put_dataset()
    inputs, env, flags = f"{data}=levir_cd_tiny", {}, []
    spec = world.spec({"epoch_seconds": 30})
    if how == "spec_path_missing":
        spec.write_text(spec.read_text().replace("/data/levir_cd_tiny", "/data/levir_cd_tiny/not-staged"))
    elif how == "gpus_busy":
        assert _submit(world, spec, inputs, []).code == 0
    elif how == "input_not_found":
        inputs = "/root/not-on-the-instance=levir_cd_tiny"
    elif how == "disk_full":
        world.sim.set_instance("box", disk_free_bytes=0)
    elif how == "credential_copy_failed":   # brev copy of the --env file fails (scp exit 255)
        world.sim.add_copy_fault(".tao-cred", "fail", times=10)
        flags, env = ["--env", "MIRROR_SETTING"], {"MIRROR_SETTING": "Kq7Wm2Zt9Rx4Lp8Vn3Hd6"}
    return _submit(world, spec, inputs, flags, **env)


def _submit(world, spec, inputs, flags, **env):
    return world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
                     "visual_changenet", "--action", "train", "--spec", str(spec), "--inputs", inputs, *flags, **env)


@pytest.mark.parametrize("how,code,users", BEFORE_RUN, ids=[c[0] for c in BEFORE_RUN])
def test_every_refusal_before_the_container_starts_is_closed_with_one_fix(world, how, code, users):
    res = _refuse(world, how)
    assert res.code != 0 and res.json["error"]["code"] == code, res
    job = res.json["job_id"]
    everything = world.run("poll_status.py", "--all")
    assert everything.code == 0 and everything.json["ok"] is True, (how, everything.stdout[-1500:])
    assert job not in [j["job_id"] for j in everything.json["jobs"]]
    one = world.run("poll_status.py", job)
    validate("poll_status", one.json)
    assert one.json["error"]["code"] == code and one.json.get("closed_at"), one
    assert one.json["hint"]["advice"] == one.json["error"]["fix"] == res.json["error"]["fix"], one
    assert one.json["hint"]["err_class"] == ("ERR_PROGRAM" if users else "ERR_INFRA"), one


def test_a_gpus_busy_refusal_costs_nothing_and_stderr_says_refused(world):
    """The trial's case: a second job asks for the GPUs a live one holds. stderr answers its own
    "launching" line with the refusal; the cost report has no line, no total for it, and names it
    under never_launched with 0 s and $0."""
    res = _refuse(world, "gpus_busy")
    assert res.code == 1 and res.json["error"]["code"] == "GPUS_BUSY", res
    job, busy = res.json["job_id"], res.json["busy_job"]
    err = res.stderr.splitlines()
    launching = next(i for i, line in enumerate(err) if f"{job} opened" in line and "launching" in line)
    assert any(f"{job} refused" in line and "GPUS_BUSY" in line for line in err[launching + 1:]), err
    report = world.run("tao_job_record.py", "cost", "--instance", "box")
    assert report.code == 0, report
    assert [j["job_id"] for j in report.json["jobs"]] == [busy], report
    assert [n["job_id"] for n in report.json["never_launched"]] == [job]
    assert report.json["never_launched"][0]["billed_s"] == 0 and report.json["never_launched"][0]["code"] == "GPUS_BUSY"
    assert report.json["total"]["jobs"] == 1
    one = world.run("poll_status.py", job)
    assert one.json["cost"]["billed_s"] == 0 and one.json["cost"]["estimated_cost_usd"] in (0, None), one.json["cost"]
