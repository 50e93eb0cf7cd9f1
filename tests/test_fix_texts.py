"""Fix texts that name a flag agree with the parser of the script they name, in the
context they are given (tests/fixtexts.py; conftest.run_script checks every answer)."""

import pytest

from tao_brev.errors import CODES
from tao_brev.verbs.orphans import ORPHAN_REFUSED_FIX
from tao_brev.verbs.teardown import DELETE_REFUSED_FIX
from tests.fixtexts import commands, rejection, violations

ORPHANS_DELETE = ["--orphans", "--delete", "--instance", "box"]


def refused(fix: str) -> dict:
    return {"ok": False, "error": {"code": "INSTANCE_DELETE_REFUSED", "message": "not deleted", "fix": fix}}


def test_pass_force_is_wrong_advice_for_orphans_and_right_for_a_job():
    wrong = violations("teardown.py", ORPHANS_DELETE, refused(CODES["INSTANCE_DELETE_REFUSED"].fix))
    assert len(wrong) == 1 and "adding --force is rejected" in wrong[0], wrong
    assert violations("teardown.py", ORPHANS_DELETE, refused(ORPHAN_REFUSED_FIX)) == []
    job = "visual_changenet-train-1a2b3c"
    assert violations("teardown.py", [job, "--delete-instance"],
                      refused(DELETE_REFUSED_FIX.format(job_id=job))) == []


def test_an_explicit_command_is_checked_whole():
    bad = refused("Run poll_status.py JOB_ID --teardown to finish it.")   # --teardown needs --wait
    assert any("--teardown needs --wait" in w for w in violations("poll_status.py", ["x-1"], bad))
    assert violations("poll_status.py", ["x-1"], refused("Run poll_status.py JOB_ID --wait --teardown.")) == []
    assert any("unrecognized arguments: --nope" in w
               for w in violations("submit.py", [], refused("rerun preflight.py --instance NAME --nope")))


def test_commands_are_read_out_of_prose():
    text = ("Pull it first: preflight.py --instance NAME --image IMAGE --pull (a pull is billed), then "
            "run teardown.py --orphans --delete again (with the same --instance names).")
    assert [(s, a) for s, a, _ in commands(text, "gpu-1")] == [
        ("preflight.py", ["--instance", "gpu-1", "--image", "images.tao_toolkit.pyt", "--pull"]),
        ("teardown.py", ["--orphans", "--delete"])]


@pytest.mark.parametrize("code", sorted(c for c in CODES if "--" in CODES[c].fix))
def test_every_default_fix_names_commands_their_scripts_accept(code):
    fix = CODES[code].fix
    for script, argv, _span in commands(fix):
        why = rejection(script, argv)
        missing = "the following arguments are required" in (why or "")
        assert why is None or missing, f"{code}: `{script} {' '.join(argv)}` is rejected: {why}"


def test_a_near_miss_job_id_or_instance_name_gets_the_corrected_command_as_next(world):
    """Every place that takes a job id or an instance name suggests the closest known one, and
    ``next`` is the whole command corrected."""
    done = world.submit()
    assert done.code == 0, done
    job = done.json["job_id"]
    typo = job[:-1] + ("0" if job[-1] != "0" else "1")
    for argv in (("poll_status.py", typo, "--logs", "20"), ("teardown.py", typo, "--keep-instance")):
        answer = world.run(*argv)
        assert answer.json["error"]["code"] == "UNKNOWN_JOB" and f"did you mean {job!r}" in answer.json["error"]["message"]
        assert answer.json["next"].endswith(" ".join([argv[0], job, *argv[2:]])), answer.json
        assert answer.json["next"].startswith("/")
    far = world.run("poll_status.py", "visual_changenet-train-zzzzzz")
    assert far.json["error"]["code"] == "UNKNOWN_JOB" and "did you mean" not in far.json["error"]["message"]
    world.run("teardown.py", job, "--keep-instance")
    orphans = world.run("teardown.py", "--orphans", "--delete", "--instance", "bxo")
    assert orphans.json["error"]["code"] == "NOT_AN_ORPHAN" and "did you mean 'box'" in orphans.json["error"]["message"]
    assert orphans.json["next"].endswith("teardown.py --orphans --delete --instance box"), orphans.json


def test_cost_for_a_misspelt_instance_suggests_the_closest_with_the_corrected_command(world):
    done = world.submit()
    assert done.code == 0, done
    answer = world.run("tao_job_record.py", "cost", "--instance", "bxo")
    assert answer.code == 0 and answer.json["did_you_mean"] == {"bxo": "box"}, answer.json
    assert answer.json["next"].endswith("tao_job_record.py cost --instance box") and "did you mean" in \
        answer.json["instance_note"]
    world.run("teardown.py", done.json["job_id"], "--keep-instance")
