"""Answers an agent can act on: ``next`` in every verb's answer, quiet broken pipes, missing
dependencies (tao_brev/nextstep.py, tao_brev/pipes.py, tao_brev/cli.py, tao_brev/answers.py)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_script, validate
from tao_brev import answers, cli, nextstep
from tests.fixtexts import answer_violations, next_violations

SCRIPTS_DIR = ROOT / "scripts"
JOB = "visual_changenet-train-1a2b3c"


def cmd(script: str, *args) -> str:
    return shlex.join([str(SCRIPTS_DIR / script), *map(str, args)])


@pytest.fixture
def in_process():
    """cli.run in this process installs its signal handlers and, once answered, blocks SIGINT /
    SIGTERM (as a script does until it exits): restore both, or processes forked later by other
    tests inherit the mask (a pool worker would then ignore the SIGTERM that ends it)."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    yield cli.run
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)


# -- the check every answer of the suite goes through (conftest's tap) --------------------------
def test_the_tap_rejects_an_answer_without_next_a_placeholder_or_a_wrong_flag():
    argv = [sys.executable, str(SCRIPTS_DIR / "poll_status.py"), JOB]
    assert answer_violations(argv, json.dumps({"ok": True, "state": "RUNNING"}))   # no next
    bad = [{"ok": True, "next": "poll_status.py JOB_ID --wait"},                  # relative, placeholder
           {"ok": True, "next": cmd("poll_status.py", "JOB_ID", "--wait")},       # placeholder
           {"ok": True, "next": cmd("poll_status.py", JOB, "--teardown")},        # --teardown needs --wait
           {"ok": True, "next": cmd("poll_status.py", JOB, "--nope")},
           {"ok": True, "next": None},                                            # null without a note
           {"ok": True, "next": "brev delete box"}]
    for answer in bad:
        assert answer_violations(argv, json.dumps(answer)), answer
    bad.append({"ok": True, "next": cmd("poll_status.py", JOB, "--wait")})              # --wait without --timeout
    for answer in bad[-1:]:
        assert answer_violations(argv, json.dumps(answer)), answer
    good = [{"ok": True, "next": cmd("poll_status.py", JOB, "--wait", "--timeout", "100")},
            {"ok": True, "next": cmd("teardown.py", JOB)},
            {"ok": True, "next": None, "next_note": "nothing left to run"},
            {"ok": False, "error": {"code": "DEPENDENCIES_MISSING", "message": "m", "fix": "f"},
             "next": f"bash {ROOT / 'install.sh'} --local"}]
    for answer in good:
        assert answer_violations(argv, json.dumps(answer)) == [], answer
    # the bank-format tools keep their format: no next asked of them
    assert next_violations("tao_job_record.py", ["list", "--json"], {"ok": True, "jobs": []}) == []


def test_the_tap_checks_processes_of_any_copy_of_the_bundle_and_nothing_else(tmp_path):
    copy = tmp_path / "bundle" / "scripts" / "submit.py"
    answer = json.dumps({"ok": True, "job_id": JOB})
    assert answer_violations([sys.executable, str(copy)], answer)       # an installed copy's answer: checked
    assert answer_violations(["brev", "ls", "--json"], answer) == []     # brev's output: not ours
    assert answer_violations([sys.executable, str(copy), "--help"], "usage: submit.py ...") == []   # not JSON


# -- next, verb by verb (pure: answer -> next) ----------------------------------------------------
@pytest.mark.parametrize("state,logs,expected", [
    ("RUNNING", None, ("poll_status.py", JOB, "--wait", "--interval", "20", "--timeout", "100")),
    ("PENDING", None, ("poll_status.py", JOB, "--wait", "--interval", "20", "--timeout", "100")),
    ("COMPLETE", None, ("teardown.py", JOB)),
    ("CANCELED", None, ("teardown.py", JOB)),
    ("UNKNOWN", None, ("teardown.py", JOB)),
    ("ERROR", None, ("poll_status.py", JOB, "--logs", "50")),   # diagnose first
    ("ERROR", "Traceback ...", ("teardown.py", JOB)),
])
def test_a_poll_names_the_next_step_of_each_state(state, logs, expected):
    answer = {"ok": True, "job_id": JOB, "state": state, **({"logs": logs} if logs else {})}
    assert nextstep.poll(answer, 0, [JOB])["next"] == cmd(*expected)


def test_diagnosis_is_asked_once_then_the_next_step_follows():
    """A failed job without logs: read them once; a job that never ran has none - then teardown,
    never the same --logs again. A stalled job: its logs first, then a person decides."""
    failed = {"ok": True, "job_id": JOB, "state": "ERROR"}
    assert nextstep.poll(dict(failed), 0, [JOB])["next"] == cmd("poll_status.py", JOB, "--logs", "50")
    assert nextstep.poll(dict(failed), 0, [JOB, "--logs", "50"])["next"] == cmd("teardown.py", JOB)
    stalled = {"ok": False, "job_id": JOB, "state": "RUNNING", "stalled": True,
               "error": {"code": "JOB_STALLED", "message": "m", "fix": "f"}}
    assert nextstep.poll(dict(stalled), 1, [JOB, "--wait"])["next"] == cmd("poll_status.py", JOB, "--logs", "50")
    # a threshold given keeps the log read judging by it (the default of 1800 s would call the job alive)
    assert nextstep.poll(dict(stalled), 1, [JOB, "--wait", "--stall-after", "30"])["next"] == cmd(
        "poll_status.py", JOB, "--logs", "50", "--stall-after", "30")
    read = nextstep.poll({**stalled, "logs": "..."}, 1, [JOB, "--logs", "50"])
    assert read["next"] is None and cmd("teardown.py", JOB) in read["next_note"]


def test_a_closed_job_has_nothing_left_and_a_wait_timeout_waits_again():
    done = nextstep.poll({"ok": True, "job_id": JOB, "state": "COMPLETE"}, 0, [JOB], closed=lambda _j: True)
    assert done["next"] is None and "closed" in done["next_note"]
    argv = [JOB, "--wait", "--timeout", "60"]
    timed_out = {"ok": False, "job_id": JOB, "state": "RUNNING",
                 "error": {"code": "WAIT_TIMEOUT", "message": "m", "fix": "f"}}
    assert nextstep.poll(timed_out, 1, argv)["next"] == cmd("poll_status.py", *argv)
    waited_out = {"ok": True, "job_id": JOB, "state": "RUNNING", "waited_out": True, "waited_s": 40.0,
                  "progress": {"available": True, "eta_s": 600}}   # ok: the same wait, long enough for the ETA
    assert nextstep.poll(waited_out, 0, argv)["next"] == cmd("poll_status.py", JOB, "--wait", "--timeout", "750")


def test_failures_name_their_runnable_fix_or_say_a_person_must_act():
    def err(code):
        return {"ok": False, "error": {"code": code, "message": "m", "fix": f"the fix of {code}"}}

    assert nextstep.submit(err("BAD_ARGUMENT"), 2, [])["next"] == cmd("submit.py", "--help")
    assert nextstep.teardown(err("UNKNOWN_JOB"), 2, [JOB])["next"] == cmd("tao_job_record.py", "list")
    assert nextstep.preflight(err("TRANSPORT_TIMEOUT"), 3, ["--instance", "box"])["next"] == \
        cmd("preflight.py", "--instance", "box")
    pending = {**err("TRANSPORT_FAILED"), "job_id": JOB, "state": "PENDING"}
    assert nextstep.submit(pending, 3, ["--instance", "box"])["next"] == cmd("poll_status.py", JOB)   # no resubmit
    human = nextstep.preflight(err("BREV_NOT_LOGGED_IN"), 3, ["--instance", "box"])
    assert human["next"] is None and human["next_note"] == "a person must act first: the fix of BREV_NOT_LOGGED_IN"
    deps = nextstep.poll(err("DEPENDENCIES_MISSING"), 3, ["--all"])
    assert deps["next"] == f"bash {shlex.quote(str(ROOT / 'install.sh'))} --local"
    submitted = nextstep.submit({"ok": True, "job_id": JOB, "state": "RUNNING"}, 0, ["--instance", "box"])
    assert submitted["next"] == cmd("poll_status.py", JOB)
    dry = ["--instance", "box", "--dry-run", "--spec", "/tmp/a b.yaml"]
    assert nextstep.submit({"ok": True, "dry_run": True}, 0, dry)["next"] == \
        cmd("submit.py", "--instance", "box", "--spec", "/tmp/a b.yaml")


@pytest.mark.parametrize("argv, kept", [
    ([JOB], ["--interval", "20", "--timeout", "100"]),
    ([JOB, "--logs", "20"], ["--interval", "20", "--timeout", "100"]),
    ([JOB, "--wait", "--timeout", "45"], ["--timeout", "45", "--interval", "20"]),
    ([JOB, "--wait", "--interval=5", "--timeout", "60", "--stall-after", "900"],
     ["--interval=5", "--timeout", "60", "--stall-after", "900", ]),
    ([JOB, "--price-per-hour", "2.5", "--metrics"], ["--price-per-hour", "2.5", "--interval", "20", "--timeout", "100"]),
])
@pytest.mark.parametrize("state", ["RUNNING", "PENDING"])
def test_a_running_job_is_waited_for_with_a_timeout_and_the_values_given(state, argv, kept):
    """An agent with no memory runs ``next`` as is: a --wait without --timeout would hold its shell
    until the job ends (SKILL.md section 6), and a value the user gave would be lost."""
    nxt = nextstep.poll({"ok": True, "job_id": JOB, "state": state}, 0, argv)["next"]
    assert nxt == cmd("poll_status.py", JOB, "--wait", *kept)
    assert not next_violations("poll_status.py", argv, {"ok": True, "job_id": JOB, "state": state, "next": nxt})
    stalled = {"ok": False, "job_id": JOB, "state": "RUNNING", "stalled": True, "logs": "...",
               "error": {"code": "JOB_STALLED", "message": "m", "fix": "f"}}
    note = nextstep.poll(stalled, 1, [*argv, "--logs", "50"])["next_note"]
    assert "--wait" in note and "--timeout" in note.split("--wait", 1)[1]


@pytest.mark.parametrize("argv, submit_words", [
    (["--instance", "box", "--image", "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"],
     ["--instance", "box", "--image", "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt"]),
    (["--instance", "gpu-a", "--image", "images.tao_toolkit.pyt", "--pull", "--storage-tier", "C", "--bucket", "bk-1"],
     ["--instance", "gpu-a", "--image", "images.tao_toolkit.pyt", "--storage-tier", "C", "--bucket", "bk-1"]),
    (["--instance", "gpu-a", "--results-root", "/data/runs", "--storage-tier=B"],
     ["--instance", "gpu-a", "--results-root", "/data/runs", "--storage-tier=B"]),
    (["--instance", "box"], ["--instance", "box"]),
])
def test_a_passed_preflight_names_the_submit_with_every_value_it_checked(argv, submit_words):
    note = nextstep.preflight({"ok": True, "instance": argv[1]}, 0, argv)["next_note"]
    assert cmd("submit.py", *submit_words) in note
    if "--image" not in argv:   # nothing was checked: say so, and how to check (and pull) it first
        assert "no image was checked" in note and cmd("preflight.py", *argv) + " --image IMAGE --pull" in note
        assert cmd("submit.py", *submit_words) + " --image IMAGE" in note
    else:
        assert "no image was checked" not in note


def test_the_next_of_other_verbs_keeps_the_values_given():
    submitted = nextstep.submit({"ok": True, "job_id": JOB, "state": "RUNNING"}, 0,
                                ["--instance", "box", "--price-per-hour", "3.2"])
    assert submitted["next"] == cmd("poll_status.py", JOB, "--price-per-hour", "3.2")
    orphans = {"ok": True, "orphans": [{"instance": "gpu-b", "owned": True}]}
    argv = ["--orphans", "--instance", "gpu-b", "--price-per-hour", "1.5"]
    assert nextstep.teardown(dict(orphans), 0, argv)["next"] == cmd("teardown.py", *argv, "--delete")
    down = nextstep.teardown({"ok": True, "job_id": JOB, "instance": "box"}, 0, [JOB, "--price-per-hour", "1.5"])
    assert down["next"] == cmd("teardown.py", "--orphans", "--price-per-hour", "1.5")


def test_reused_orphans_get_complete_stop_and_delete_commands_and_no_next():
    listed = {"ok": True, "orphans": [{"instance": "mine-a", "ours": True, "owned": False},
                                      {"instance": "mine b", "ours": True, "owned": False},
                                      {"instance": "theirs", "ours": False, "owned": False}]}
    answer = nextstep.teardown(dict(listed), 0, ["--orphans"])
    assert answer["next"] is None   # the user's instances: stopping or deleting one is their choice
    note = answer["next_note"]
    assert cmd("teardown.py", "--orphans", "--stop", "--instance", "mine-a", "--instance", "mine b") in note
    assert cmd("teardown.py", "--orphans", "--delete", "--instance", "mine-a") in note and "theirs" not in note
    strangers = nextstep.teardown({"ok": True, "orphans": [{"instance": "theirs", "ours": False}]}, 0, ["--orphans"])
    assert strangers["next"] is None and "none was used by it" in strangers["next_note"]
    assert "teardown.py" not in strangers["next_note"]
    after = nextstep.teardown({"ok": True, "deleted": ["eph"], "orphans": [
        {"instance": "eph", "ours": True, "owned": True, "deleted": True},
        {"instance": "theirs", "ours": False}, {"instance": "mine-a", "ours": True, "owned": False}]}, 0,
        ["--orphans", "--delete"])
    assert after["next_note"].startswith("deleted eph; still idle and billing: theirs, mine-a (")
    assert cmd("teardown.py", "--orphans", "--delete", "--instance", "mine-a") in after["next_note"]
    only_theirs = nextstep.teardown({"ok": True, "deleted": [], "orphans": [{"instance": "theirs", "ours": False}]},
                                    0, ["--orphans", "--delete"])
    assert "their owners decide" in only_theirs["next_note"] and "teardown.py" not in only_theirs["next_note"]


@pytest.mark.parametrize("storage", [[], ["--storage-tier", "C", "--bucket", "bk-1"], ["--results-root", "/data/r"]])
def test_an_image_not_pulled_names_the_preflight_that_pulls_it_with_the_storage_given(storage):
    argv = ["--instance", "gpu-a", "--image", "img:1", "--network-arch", "dino", "--action", "train", *storage]
    refused = {"ok": False, "job_id": JOB, "state": "ERROR",
               "error": {"code": "IMAGE_NOT_PULLED", "message": "m", "fix": "f"}}
    assert nextstep.submit(refused, 1, argv)["next"] == \
        cmd("preflight.py", "--instance", "gpu-a", "--image", "img:1", *storage, "--pull")


def test_the_tap_flags_a_wait_without_timeout_and_a_dropped_value():
    def answer(nxt):
        return {"ok": True, "job_id": JOB, "state": "RUNNING", "next": nxt}

    assert next_violations("poll_status.py", [JOB], answer(cmd("poll_status.py", JOB, "--wait")))
    argv = [JOB, "--wait", "--timeout", "60"]
    assert next_violations("poll_status.py", argv, answer(cmd("poll_status.py", JOB, "--wait", "--timeout", "100")))
    pre = ["--instance", "box", "--image", "img:1"]
    dropped = {"ok": False, "next": cmd("preflight.py", "--instance", "box", "--start")}
    assert "--image img:1" in " ".join(next_violations("preflight.py", pre, dropped))
    assert not next_violations("preflight.py", pre, {"ok": False, "next": cmd("preflight.py", *pre, "--start")})


def test_next_names_the_bundle_that_answers_not_a_relative_path():
    assert nextstep.SCRIPTS_DIR == Path(nextstep.__file__).absolute().parent.parent / "scripts"
    assert shlex.split(cmd("teardown.py", JOB))[0] == str(ROOT / "scripts" / "teardown.py")


# -- the lifecycle, through the scripts: each answer's next is the step that follows ----------------
def test_each_answer_of_a_lifecycle_names_the_step_that_follows(world):
    submitted = world.submit()
    job_id = submitted.json["job_id"]
    assert submitted.json["next"] == cmd("poll_status.py", job_id), submitted
    polled = world.run("poll_status.py", job_id)
    # still running (the default wait, nextstep.wait_command) or already ended
    running = cmd("poll_status.py", job_id, "--wait", "--interval", "20", "--timeout", "100")
    assert polled.json["next"] in (running, cmd("teardown.py", job_id)), polled
    waited = world.run("poll_status.py", job_id, "--wait", "--interval", "0.1")
    assert waited.json["state"] == "COMPLETE" and waited.json["next"] == cmd("teardown.py", job_id), waited
    down = world.run("teardown.py", job_id)
    assert down.code == 0 and down.json["next"] == cmd("teardown.py", "--orphans"), down   # box is kept, bills
    after = world.run("poll_status.py", job_id)
    assert after.json["next"] is None and "closed" in after.json["next_note"], after
    for answer, schema in ((submitted, "submit"), (waited, "poll_status"), (down, "teardown"),
                           (after, "poll_status")):
        validate(schema, answer.json)


# -- a reader that leaves early (| head) ---------------------------------------------------------------
def _to_a_closed_pipe(argv: list[str], env: dict, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    """Run with stdout a pipe nobody reads: its read end is closed before the script starts, so
    the script's first write meets a reader that left - as ``| head -1`` once head exited."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, input=stdin, env=env, timeout=120)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("argv", [
    ("tao_job_record.py", "list"), ("tao_job_record.py", "list", "--json"), ("poll_status.py", "--all"),
    ("poll_status.py", "nope-train-000000", "--logs", "5"), ("teardown.py", "--help"),
    ("preflight.py", "--instance", "box", "--image", "images.no.such"), ("redact_secrets.py", "redact"),
    ("tao_job_record.py", "open", "--image", "img:1", "--network-arch", "a", "--action", "b",
     "--storage-tier", "A", "--results-root", "~/r"),
], ids=" ".join)
def test_a_reader_that_left_ends_every_script_quietly_as_sigpipe_would(state_env, argv, buffered):
    for _ in range(3):   # records to list
        run_script("tao_job_record.py", "open", "--image", "img:1", "--network-arch", "a", "--action", "b",
                   "--storage-tier", "A", "--results-root", "~/r", env=state_env)
    env = {k: v for k, v in state_env.items() if not (buffered and k == "PYTHONUNBUFFERED")}
    env.update({} if buffered else {"PYTHONUNBUFFERED": "1"})
    done = _to_a_closed_pipe([sys.executable, str(SCRIPTS_DIR / argv[0]), *argv[1:]], env,
                             stdin=b"x\n" * 100_000)
    assert done.returncode == -signal.SIGPIPE, done
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr, done.stderr[-2000:]
    assert b"Exception ignored" not in done.stderr, done.stderr[-2000:]


def test_a_broken_pipe_to_a_child_is_not_mistaken_for_a_reader_that_left(capsys, in_process):
    def main(_argv):
        raise BrokenPipeError(32, "Broken pipe")   # e.g. writing to brev's stdin: stdout is fine

    assert in_process(main, []) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "INTERNAL_ERROR"


# -- missing dependencies -----------------------------------------------------------------------
def test_a_dependency_that_fails_to_import_at_run_time_is_dependencies_missing(capsys, in_process):
    def main(_argv):
        raise ModuleNotFoundError("No module named 'botocore'", name="botocore")

    assert in_process(main, [], next_step=nextstep.poll) == 3
    out = capsys.readouterr()
    answer = json.loads(out.out)
    assert answer["error"]["code"] == "DEPENDENCIES_MISSING" and "botocore" in answer["error"]["message"]
    install = f"bash {shlex.quote(str(ROOT / 'install.sh'))} --local"
    assert install in answer["error"]["fix"] and answer["next"] == install
    assert "Traceback" not in out.err and "Report it" not in out.out


def test_a_bundle_import_error_stays_a_bug(capsys, in_process):
    def main(_argv):
        raise ImportError("cannot import name 'x' from 'tao_brev.remote'", name="tao_brev.remote")

    assert in_process(main, []) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "INTERNAL_ERROR"


def test_a_checkout_whose_dependency_is_broken_answers_dependencies_missing(tmp_path, state_env):
    """find_spec finds ``yaml`` but importing it fails (a half-installed package): the script does
    not crash with a traceback; it names the module and the install command."""
    stubs = tmp_path / "site"
    for name in ("yaml", "jsonschema", "boto3"):
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text("from ._native import load  # the compiled part is missing\n")
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    env = {**state_env, "PYTHONPATH": str(stubs)}
    spec = tmp_path / "spec.yaml"
    spec.write_text("train:\n  num_epochs: 1\n")
    argv = [str(bare / "bin" / "python"), str(SCRIPTS_DIR / "submit.py"), "--instance", "box", "--image",
            "images.tao_toolkit.pyt", "--network-arch", "visual_changenet", "--action", "train", "--spec",
            str(spec), "--dry-run"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 3, done
    answer = json.loads(done.stdout)
    validate("submit", answer)
    assert answer["error"]["code"] == "DEPENDENCIES_MISSING" and "'yaml'" in answer["error"]["message"], answer
    assert answer["next"] == f"bash {shlex.quote(str(ROOT / 'install.sh'))} --local"
    assert "Traceback" not in done.stderr and "Report it" not in done.stdout


def test_fix_texts_name_the_real_job_and_instance_not_placeholders():
    answer = {"ok": False, "job_id": JOB, "instance": "gpu-1",
              "error": {"code": "CORRUPT_RECORD", "message": "m",
                        "fix": "teardown.py JOB_ID closes it; brev exec NAME \"docker ps\"; --env NAME stays"},
              "jobs": [{"job_id": "other-train-000001", "hint": {"advice": "teardown.py JOB_ID"}}]}
    filled = answers.concrete(answer)
    teardown = str(ROOT / "scripts" / "teardown.py")   # every script a text names: by its absolute path
    assert filled["error"]["fix"] == f"{teardown} {JOB} closes it; brev exec gpu-1 \"docker ps\"; --env NAME stays"
    assert filled["jobs"][0]["hint"]["advice"] == f"{teardown} other-train-000001"
    fix = f"{teardown} x; scripts/tao_job_record.py list; @SKILL_DIR@/scripts/submit.py"
    assert answers.concrete({"fix": fix}) == {
        "fix": f"{teardown} x; {ROOT / 'scripts' / 'tao_job_record.py'} list; @SKILL_DIR@/scripts/submit.py"}
    wrong = next_violations("teardown.py", [JOB], {**answer, "next": None, "next_note": "n"})
    assert wrong and "placeholders" in wrong[0]
    assert next_violations("teardown.py", [JOB], {**filled, "next": None, "next_note": "n"}) == []


# -- --dry-run: the remote step as lines a person reads -------------------------------------------
def test_a_dry_run_plan_gives_the_remote_script_as_readable_lines_and_next_runs_it_for_real(world):
    spec = world.spec({"epoch_seconds": 0.05})
    secret = "hf_" + "k" * 30
    res = world.submit("--env", "HF_TOKEN", "--dry-run", spec=spec, HF_TOKEN=secret)
    assert res.code == 0, res
    validate("submit", res.json)
    launch = next(step for step in res.json["plan"] if step["step"] == "launch")
    lines = launch["lines"]
    assert isinstance(lines, list) and all(isinstance(line, str) for line in lines)
    assert any("line(s) of the file's content" in line for line in lines)            # the spec, summed up
    assert lines[lines.index("docker run \\") + 1].strip().startswith("-d")            # one flag per line
    assert max(len(line) for line in lines if not line.startswith(("__tb", "[", "if", "docker image"))) < 200
    assert secret not in res.stdout and secret not in "\n".join(lines)
    real = shlex.split(res.json["next"])
    assert "--dry-run" not in real and real[real.index("--spec") + 1] == str(spec)


# -- the demo: one line per step and the summary; the JSON behind --json --------------------------
def test_the_demo_step_and_cost_lines_say_what_is_unknown_and_why():
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo", ROOT / "examples" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    line = demo.step_line("3. submit", 0, {"ok": True, "state": "RUNNING",
                                           "next": cmd("poll_status.py", JOB)})
    assert line == f"3. submit: exit 0; RUNNING; next: scripts/poll_status.py {JOB}"
    reused = demo.cost_line({"run_s": 6.1, "idle_billed_s": None, "owned": False, "price_source": None})
    assert "?" not in reused and "idle billed none (a reused instance" in reused
    assert "estimated unknown (no price: pass --price-per-hour)" in reused
    assert "idle billed unknown" in demo.cost_line({"idle_billed_s": None, "owned": None})


def test_the_demo_prints_one_line_per_step_and_the_summary_by_default():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], capture_output=True, text=True,
                          timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) <= 10 and done.stderr == "", done.stdout
    assert [line.split(".")[0] for line in lines[:6]] == ["1", "2", "3", "4", "5", "6"]
    assert lines[-1].startswith("demo: cost:") and "?" not in lines[-1]
    assert "next: scripts/poll_status.py" in lines[2] and "next: scripts/teardown.py" in lines[3]


def test_the_demo_with_json_prints_one_json_document_and_nothing_else():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py"), "--json"], capture_output=True,
                          text=True, timeout=900, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    document = json.loads(done.stdout)            # the whole stdout is ONE JSON document
    assert document["ok"] is True and [s["title"].split(".")[0] for s in document["steps"]] == list("123456")
    assert document["summary"]["state"] == "COMPLETE" and document["summary"]["cost"]["billed_s"] > 0
    assert "=== 1. preflight" in done.stderr       # the progress is on stderr
    assert "withheld" not in done.stdout, done.stdout   # its throw-away secrets share nothing with its paths


@pytest.mark.parametrize("script,argv,state,expected", [
    ("poll_status.py", [JOB, "--wait"], "RUNNING", ("poll_status.py", JOB, "--wait")),
    ("teardown.py", [JOB], "RUNNING", ("teardown.py", JOB)),
    ("submit.py", ["--instance", "box"], "PENDING", ("poll_status.py", JOB)),
    ("preflight.py", ["--instance", "box"], None, ("preflight.py", "--instance", "box")),
])
def test_an_interrupt_is_answered_with_the_command_that_resumes_this_verb(script, argv, state, expected):
    job_id = None if script == "preflight.py" else JOB
    fix = nextstep.resume_fix(script, argv, job_id, state)
    assert nextstep.resume(script, argv, job_id) == cmd(*expected) and cmd(*expected) in fix
    assert ("resubmit" in fix.lower()) == (script == "submit.py")   # only a submit speaks of submitting
    answer = {"ok": False, "job_id": job_id, "error": {"code": "INTERRUPTED", "message": "m", "fix": fix}}
    assert getattr(nextstep, {"poll_status.py": "poll", "teardown.py": "teardown", "submit.py": "submit",
                              "preflight.py": "preflight"}[script])(answer, 130, argv)["next"] == cmd(*expected)
