"""A failure a verb survives is told in its answer's ``warnings`` too, not only on stderr
(``cli.warn``): an agent reads the JSON, not the human progress lines."""

from __future__ import annotations

from conftest import validate

WAIT = ("--wait", "--interval", "0.1", "--timeout", "60")


def test_a_failed_hand_over_of_the_results_is_a_warning_of_the_teardown(world):
    done = world.submit()
    job = done.json["job_id"]
    world.run("poll_status.py", job, *WAIT)
    images = world.sim.world.docker_dir("box") / "images.json"
    images.write_text("{}")                                   # the image is gone and cannot be pulled again:
    world.sim.set_instance("box", registry_reachable=False)   # the chown container cannot run
    down = world.run("teardown.py", job)
    validate("teardown", down.json)
    told = [line for line in down.stderr.splitlines() if "could not hand the results" in line]
    assert len(told) == 1 and down.json["ok"] is True, down
    assert [w for w in down.json["warnings"] if "could not hand the results to the instance user" in w], down


def test_warn_adds_each_message_once_and_never_to_preflights_check_names():
    from tao_brev import cli

    cli._reset("teardown.py", [])
    cli.warn("teardown j: could not hand the results to the instance user: boom")
    answer = {"warnings": ["teardown j: could not hand the results to the instance user: boom"]}
    cli._merge_warnings(answer)
    assert len(answer["warnings"]) == 1
    fresh = {}
    cli._merge_warnings(fresh)
    assert fresh == {"warnings": ["teardown j: could not hand the results to the instance user: boom"]}
    cli._reset("preflight.py", [])
    cli.warn("preflight: could not copy the NGC key file: x")
    checks = {"warnings": ["ngc_auth"]}
    cli._merge_warnings(checks)
    assert checks == {"warnings": ["ngc_auth"]}
    cli._reset()
