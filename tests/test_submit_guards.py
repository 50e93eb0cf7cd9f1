"""submit.py's guards: no GPU money is spent by accident.

Each case runs the real script against the simulator and proves: one clear
error, no ``docker run``, no instance start, and a ``fix`` whose command is the
exact next step (the test runs that command and it gets further).
"""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from conftest import ROOT, TAO_IMAGE, validate

SUBMIT = str(ROOT / "scripts" / "submit.py")
LONG = {"epoch_seconds": 30}          # a job that stays RUNNING for the whole test


def docker_runs(world, instance: str = "box") -> list[list[str]]:
    """Every `docker run` that reached ``instance`` (carrier runs included)."""
    return [r["argv"] for r in world.sim.audit()
            if r["tool"] == "docker" and r["instance"] == instance and r["argv"][:1] == ["run"]]


def brev_commands(world, command: str) -> list[dict]:
    return [r for r in world.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == [command]]


def records(world) -> list[str]:
    """The job records written so far (their file names)."""
    from pathlib import Path

    return sorted(p.name for p in (Path(world.env["TAO_STATE_DIR"]) / "jobs").glob("*.json"))


def refused(res, code: str, exit_code: int) -> dict:
    """The answer is one error with ``code``; returns it."""
    assert res.code == exit_code, res
    assert res.json["ok"] is False and res.json["error"]["code"] == code, res
    validate("submit", res.json)
    validate("error", res.json)
    return res.json["error"]


def fix_command(error: dict) -> list[str]:
    """The submit command inside a fix (it starts with the script path; the fix ends with it)."""
    fix = error["fix"]
    words = shlex.split(fix[fix.rindex(shlex.quote(SUBMIT)):])
    assert fix.endswith(shlex.join(words)), fix                  # the command is the whole end of the fix
    return words


def run_fix(world, error: dict, **extra_env):
    words = fix_command(error)
    assert words[0] == SUBMIT
    return world.run("submit.py", *words[1:], **extra_env)


def base_args(world, *, instance: str = "box", spec=None, arch: str = "visual_changenet",
              action: str = "train", image: str = "images.tao_toolkit.pyt") -> list[str]:
    data = world.put_dataset(instance)
    return ["--instance", instance, "--image", image, "--network-arch", arch, "--action", action,
            "--spec", str(spec or world.spec({"epoch_seconds": 0.05})), "--inputs", f"{data}=levir_cd_tiny"]


# -- the instance's status is known before the first exec ------------------------------------------------
def test_stopped_instance_is_refused_before_any_exec_and_the_fix_starts_it(world):
    world.sim.set_instance("box", status="STOPPED")
    before = world.sim.exec_count()
    res = world.run("submit.py", *base_args(world))
    error = refused(res, "INSTANCE_NOT_RUNNING", 1)
    assert "STOPPED" in error["message"]
    assert world.sim.exec_count() == before                     # no brev exec: brev would have started it
    assert world.sim.instance("box")["status"] == "STOPPED"     # nothing started, nothing billed
    assert brev_commands(world, "start") == [] and docker_runs(world) == []
    assert records(world) == []                                 # nothing recorded
    assert "--start" in fix_command(error)

    started = run_fix(world, error)                             # the fix: start it and launch, on purpose
    assert started.code == 0, started
    assert started.json["state"] == "RUNNING"
    assert world.sim.instance("box")["status"] == "RUNNING" and len(brev_commands(world, "start")) == 1
    assert "instance_started" not in started.json                # asked for: not a surprise
    assert records(world) == [f"{started.json['job_id']}.json"]


@pytest.mark.parametrize("status", ["FAILURE", "UNHEALTHY"])
def test_broken_instance_is_refused_before_any_exec(world, status):
    if status == "UNHEALTHY":
        world.sim.set_instance("box", health_status="UNHEALTHY")
    else:
        world.sim.set_instance("box", status=status)
    before = world.sim.exec_count()
    error = refused(world.run("submit.py", *base_args(world), "--start"), "INSTANCE_NOT_RUNNING", 1)
    assert status in error["message"]
    assert world.sim.exec_count() == before and brev_commands(world, "start") == [] and records(world) == []


def test_an_instance_brev_starts_by_itself_is_reported_by_every_verb(world):
    """poll_status / teardown on a STOPPED instance never start it (brev exec would); with --start
    they do, and the answer says it bills again."""
    sub = world.submit(spec=world.spec(LONG))
    assert sub.code == 0, sub
    job = sub.json["job_id"]
    stop = subprocess.run(["brev", "stop", "box"], env=world.env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert stop.returncode == 0, stop.stderr

    before = world.sim.exec_count()
    parked = world.run("poll_status.py", job)
    validate("poll_status", parked.json)
    assert parked.code == 1 and parked.json["error"]["code"] == "INSTANCE_STOPPED", parked
    assert world.sim.exec_count() == before and world.sim.instance("box")["status"] == "STOPPED"

    poll = world.run("poll_status.py", job, "--start")
    validate("poll_status", poll.json)
    started = poll.json["instance_started"]
    assert started["instances"] == ["box"] and started["billing"] is True
    assert "brev stop box" in started["fix"] and "billing" in started["message"]
    assert "BILLING" in poll.stderr
    assert world.sim.instance("box")["status"] == "RUNNING"

    subprocess.run(["brev", "stop", "box"], env=world.env, capture_output=True, stdin=subprocess.DEVNULL, check=True)
    kept = world.run("teardown.py", job)
    validate("teardown", kept.json)
    assert kept.code == 1 and kept.json["error"]["code"] == "INSTANCE_STOPPED", kept
    assert world.sim.instance("box")["status"] == "STOPPED"
    down = world.run("teardown.py", job, "--start")
    validate("teardown", down.json)
    assert down.json["instance_started"]["instances"] == ["box"], down

    again = world.run("poll_status.py", job)            # RUNNING all along now: nothing to report
    assert "instance_started" not in again.json


def test_the_transport_tells_its_listener_when_brev_starts_an_instance(world):
    from tao_brev.transport import Brev

    heard = []
    world.sim.set_instance("box", status="STOPPED")
    result = Brev(env=world.env, on_started=heard.append).exec("box", "echo ok")
    assert result.ok and result.instance_started and heard == ["box"]
    assert Brev(env=world.env, on_started=heard.append).exec("box", "echo ok").instance_started is False
    assert heard == ["box"]


# -- GPUs held by a live tao-job container ------------------------------------------------------------------
def test_a_second_job_on_busy_gpus_is_refused_naming_the_live_job(world):
    first = world.submit(spec=world.spec(LONG))
    assert first.code == 0, first
    live = first.json["job_id"]

    res = world.run("submit.py", *base_args(world))
    error = refused(res, "GPUS_BUSY", 1)
    second = res.json["job_id"]
    assert live in error["message"]
    assert f"poll_status.py {live} --wait" in error["fix"] and f"teardown.py {live}" in error["fix"]
    assert world.sim.docker_run_count("box", second) == 0 and len(docker_runs(world)) == 1
    assert res.json["state"] == "ERROR"                          # closed as never launched
    shown = world.run("tao_job_record.py", "show", second).json
    assert shown["terminal_state"] == "ERROR" and "never launched" in shown["transitions"][-1]["message"]

    shared = run_fix(world, error)                              # the last command of the fix: share on purpose
    assert "--share-gpus" in fix_command(error) and fix_command(error)[-2:] != ["--", "--share-gpus"]
    assert shared.code == 0, shared
    assert world.sim.docker_run_count("box", shared.json["job_id"]) == 1


def test_jobs_on_disjoint_gpu_ids_share_an_instance_and_overlapping_ones_do_not(world):
    world.sim.add_instance("duo", gpus=("NVIDIA A100-SXM4-80GB",) * 2)
    world.sim.preload_image("duo", TAO_IMAGE)
    spec = world.spec(LONG)
    zero = world.run("submit.py", *base_args(world, instance="duo", spec=spec), "--gpus", "0")
    one = world.run("submit.py", *base_args(world, instance="duo", spec=spec), "--gpus", "1")
    assert zero.code == 0 and one.code == 0, (zero, one)
    every = world.run("submit.py", *base_args(world, instance="duo", spec=spec), "--gpus", "all")
    error = refused(every, "GPUS_BUSY", 1)
    assert zero.json["job_id"] in error["message"] and one.json["job_id"] in error["message"]
    again = world.run("submit.py", *base_args(world, instance="duo", spec=spec), "--gpus", "1")
    assert refused(again, "GPUS_BUSY", 1) and one.json["job_id"] in again.json["error"]["message"]
    assert zero.json["job_id"] not in again.json["error"]["message"]
    assert len(docker_runs(world, "duo")) == 2


def test_a_finished_job_does_not_hold_the_gpus(world):
    done = world.submit()
    job = done.json["job_id"]
    world.sim.wait_container("box", job)
    assert world.run("submit.py", *base_args(world)).code == 0


# -- the spec must reach the instance intact ----------------------------------------------------------------
def test_a_full_disk_stops_the_launch_before_docker_run(world):
    world.sim.set_instance("box", disk_free_bytes=0)
    res = world.run("submit.py", *base_args(world))
    error = refused(res, "DISK_FULL", 1)
    job = res.json["job_id"]
    assert "here-document" in error["message"] and "No space left on device" in error["message"]
    assert docker_runs(world) == [] and world.sim.docker_run_count("box", job) == 0
    spec = world.sim.instance_home("box") / "tao-jobs" / job / "spec" / "spec.yaml"
    assert spec.exists() and spec.stat().st_size == 0          # what a full disk leaves behind
    assert res.json["state"] == "ERROR"
    assert fix_command(error)[fix_command(error).index("--retry-of") + 1] == job

    world.sim.set_instance("box", disk_free_bytes=None)         # space freed: the fix launches
    retry = run_fix(world, error)
    assert retry.code == 0, retry
    assert world.run("tao_job_record.py", "show", retry.json["job_id"]).json["retry_of"] == job


def test_the_simulated_full_disk_fails_a_here_document_like_bash(world):
    from tao_brev.transport import Brev

    world.sim.set_instance("box", disk_free_bytes=0)
    brev = Brev(env=world.env)
    wrote = brev.exec("box", "cat > f.txt <<'EOF'\nhello\nEOF\necho \"rc=$?\"")
    assert "rc=1" in wrote.stdout
    assert wrote.stderr.strip() == "bash: line 1: cannot create temp file for here-document: No space left on device"
    assert (world.sim.instance_home("box") / "f.txt").stat().st_size == 0
    assert brev.exec("box", "printf 'a\\nb\\n' | cat").stdout == "a\nb\n"    # cat to a pipe still works
    world.sim.set_instance("box", disk_free_bytes=None)
    assert brev.exec("box", "cat > f.txt <<'EOF'\nhello\nEOF\ncat f.txt").stdout == "hello\n"


@pytest.mark.parametrize("tamper", ["truncate", "edit", "remove"])
def test_the_spec_check_refuses_a_spec_that_differs_on_the_instance(tmp_path, tamper):
    """verify_file: size and sha256 of the written file, whatever the write step said."""
    from tao_brev import remote

    text = "train:\n  num_epochs: 3\n"
    script = "\n".join([remote.heredoc_file("~/spec.yaml", text).rstrip("\n"),
                        {"truncate": ': > "$HOME"/spec.yaml',
                         "edit": "printf 'train:\\n  num_epochs: 4\\n' > \"$HOME\"/spec.yaml",
                         "remove": 'rm "$HOME"/spec.yaml'}[tamper],
                        remote.verify_file("~/spec.yaml", text), "echo LAUNCHED"])
    done = subprocess.run(["sh", "-c", script], env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)
    assert done.returncode == remote.WRITE_FAILED_EXIT and "TAO_SPEC_UNVERIFIED" in done.stdout
    assert "LAUNCHED" not in done.stdout
    untouched = subprocess.run(["sh", "-c", "\n".join([remote.heredoc_file("~/spec.yaml", text).rstrip("\n"),
                                                       remote.verify_file("~/spec.yaml", text), "echo LAUNCHED"])],
                               env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert untouched.returncode == 0 and untouched.stdout.strip() == "LAUNCHED"


@pytest.mark.parametrize("breakage", ["results_root_is_a_file", "docker_daemon_down"])
def test_any_failed_step_of_the_launch_script_stops_it(world, breakage):
    args = base_args(world)
    if breakage == "results_root_is_a_file":
        (world.sim.instance_home("box") / "blocked").write_text("not a directory\n")
        res = world.run("submit.py", *args, "--results-root", "~/blocked")
    else:
        world.sim.set_instance("box", docker_daemon="down")
        res = world.run("submit.py", *args)
    assert res.code == 1 and res.json["ok"] is False and res.json["state"] == "ERROR", res
    assert docker_runs(world) == []


def test_the_launch_script_stops_at_its_first_failing_step():
    from tao_brev import remote

    run = remote.RunSpec(job_id="vc-train-1", image=TAO_IMAGE, network_arch="visual_changenet", action="train",
                         results_dir="~/tao-results/vc-train-1")
    script = remote.submit_script(run, "a: 1\n")
    lines = script.splitlines()
    assert lines[0] == "set -e"                                   # an unchecked failure ends the script too
    assert script.index("TAO_SPEC_UNVERIFIED") < script.index("TAO_GPUS_BUSY") < script.index("docker run -d")
    assert "TAO_GPUS_BUSY" not in remote.submit_script(
        remote.RunSpec(**{**run.__dict__, "share_gpus": True}), "a: 1\n")


# -- names checked before anything runs ---------------------------------------------------------------------
@pytest.mark.parametrize("flag,typo,meant", [("--network-arch", "visual_changent", "visual_changenet"),
                                             ("--action", "trian", "train")])
def test_a_typo_in_arch_or_action_is_refused_with_the_closest_name(world, flag, typo, meant):
    args = base_args(world)
    args[args.index(flag) + 1] = typo
    before = world.sim.exec_count()
    error = refused(world.run("submit.py", *args), "BAD_ARGUMENT", 2)
    assert typo in error["message"] and repr(meant) in error["message"]
    assert world.sim.exec_count() == before and records(world) == []
    fixed = fix_command(error)
    assert fixed[fixed.index(flag) + 1] == meant and typo not in fixed
    assert run_fix(world, error).code == 0


def test_an_arch_and_an_action_typo_are_reported_at_once_and_next_is_the_corrected_call(world):
    args = base_args(world)
    args[args.index("--network-arch") + 1] = "visual_changent"
    args[args.index("--action") + 1] = "trian"
    res = world.run("submit.py", *args)
    error = refused(res, "BAD_ARGUMENT", 2)
    assert "'visual_changenet'" in error["message"] and "'train'" in error["message"], error
    fixed = fix_command(error)
    assert fixed[fixed.index("--network-arch") + 1] == "visual_changenet" and fixed[fixed.index("--action") + 1] == "train"
    assert res.json["next"] == error["fix"].split(": ", 1)[1]       # next is the corrected command
    assert run_fix(world, error).code == 0                            # one round, not two


def test_an_unknown_arch_without_a_close_match_is_a_warning_that_says_what_is_known(world):
    args = base_args(world)
    args[args.index("--network-arch") + 1] = "zzz_brand_new"
    res = world.run("submit.py", *args, "--dry-run")
    assert res.code == 0, res                        # a newer image may have it: never refused
    arch_warning = [w for w in res.json["warnings"] if w.startswith("--network-arch 'zzz_brand_new'")]
    assert arch_warning and "nvidia-tao-core 7.3.0" in arch_warning[0] and "tao-pytorch 7.0.1" in arch_warning[0]
    assert res.json["spec_check"]["checked"] is False   # no schema for it: said so, not refused


@pytest.mark.parametrize("image", ["nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt",
                                   "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-tf2", "ubuntu:22.04"])
def test_other_images_only_warn_about_an_unknown_arch(world, image):
    args = base_args(world, arch="visual_changent", image=image)
    res = world.run("submit.py", *args, "--dry-run", "--no-spec-check")
    assert res.code == 0, res
    assert any("visual_changent" in w and "visual_changenet" in w for w in res.json["warnings"])


def test_allow_unknown_arch_skips_the_check(world):
    res = world.run("submit.py", *base_args(world, arch="visual_changent"), "--allow-unknown-arch", "--dry-run")
    assert res.code == 0, res
    assert not any(w.startswith("--network-arch") for w in res.json["warnings"])


def test_the_reference_list_names_its_source_and_the_example_arch():
    from tao_brev import archs

    table = archs.table()
    assert table["source"]["repository"].endswith("NVIDIA-TAO/tao-pytorch")
    assert len(table["source"]["commit"]) == 40
    assert "quantize" in table["archs"]["visual_changenet"]
    assert archs.is_strict_image(TAO_IMAGE)
    assert not archs.is_strict_image("nvcr.io/nvidia/tao/tao-toolkit:7.3.0-deploy")


# -- arguments in the wrong place ---------------------------------------------------------------------------
@pytest.mark.parametrize("stray", [("train.num_epochs=2",), ("train.seed=7", "train.optim.lr=0.001")])
def test_an_override_swallowed_by_inputs_says_to_put_it_after_the_double_dash(world, stray):
    before = world.sim.exec_count()
    res = world.run("submit.py", *base_args(world), *stray)
    error = refused(res, "BAD_ARGUMENT", 2)
    assert all(word in error["message"] for word in stray) and "`--`" in error["fix"]
    assert "tier" not in error["message"].lower()                # not the misleading tier A message
    assert world.sim.exec_count() == before and records(world) == []
    fixed = fix_command(error)
    assert fixed[-len(stray) - 1:] == ["--", *stray]
    assert res.json["next"] == error["fix"].split(": ", 1)[1]     # next is the corrected call, not --help
    ran = run_fix(world, error)
    assert ran.code == 0, ran
    assert all(word in world.sim.container("box", ran.json["job_id"])["Args"] for word in stray)


def test_a_local_path_with_an_equals_sign_is_still_an_input(tmp_path, monkeypatch):
    """A tier B/C input `data.v2=NAME` that exists locally is an input, not an override."""
    from tao_brev.errors import TaoBrevError
    from tao_brev.verbs.submit import SubmitRequest
    from tao_brev.verbs.submit.guards import _refuse_overrides_as_inputs

    (tmp_path / "data.v2").mkdir()
    monkeypatch.chdir(tmp_path)
    _refuse_overrides_as_inputs(SubmitRequest("box", "img", "a", "b", "s", inputs=["data.v2=levir"]))
    with pytest.raises(TaoBrevError, match="look like TAO overrides"):
        _refuse_overrides_as_inputs(SubmitRequest("box", "img", "a", "b", "s", inputs=["data.v3=levir"]))


def test_env_name_value_says_to_pass_the_name_and_export_the_value(world):
    value = "v4lue-that-must-not-be-repeated"
    res = world.run("submit.py", *base_args(world), "--env", f"MY_SETTING={value}")
    error = refused(res, "BAD_ARGUMENT", 2)
    assert value not in res.stdout + res.stderr
    assert "export MY_SETTING=" in error["fix"] and "name" in error["fix"].lower()
    fixed = fix_command(error)
    assert fixed[fixed.index("--env") + 1] == "MY_SETTING"
    assert world.sim.exec_count() == 0 and records(world) == []
    assert run_fix(world, error, MY_SETTING=value).code == 0


def test_a_credential_named_variable_holding_the_job_id_blocks_no_verb(world):
    """Three credential-named variables (three naming styles) hold the job id, all at once: one world
    for the three (each name alone: tests/test_known_secrets.py, in process)."""
    sub = world.run("submit.py", *base_args(world))
    assert sub.code == 0, sub
    job_id = sub.json["job_id"]
    holding = {var: job_id for var in ("TAO_JOB_KEY", "lastRunSecret", "RUN_PASSWORD")}
    for words in ([job_id], [job_id, "--logs", "20"], [job_id, "--wait", "--interval", "0.2", "--timeout", "60"]):
        res = world.run("poll_status.py", *words, **holding)
        assert res.code == 0 and res.json["job_id"] == job_id and "<redacted>" not in res.stdout, res
    down = world.run("teardown.py", job_id, **holding)
    assert down.code == 0 and down.json["job_id"] == job_id, down


@pytest.mark.parametrize("script", ["submit.py", "preflight.py"])
def test_an_instance_named_like_a_credential_value_names_the_variable_before_any_exec(world, script):
    world.sim.add_instance("trainbox-0042")
    args = base_args(world, instance="trainbox-0042") if script == "submit.py" else ["--instance", "trainbox-0042"]
    before = world.sim.exec_count()
    res = world.run(script, *args, BOX_SECRET="trainbox-0042")
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_IDENTIFIER", res
    assert "--instance equals the value of BOX_SECRET" in res.json["error"]["message"]
    assert "unset BOX_SECRET" in res.json["error"]["fix"] and world.sim.exec_count() == before
