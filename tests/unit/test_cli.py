"""cli.run in process: one JSON document on stdout, the documented exit code, a signal's answer,
bad input as BAD_ARGUMENT, secrets redacted from the answer and refused on the command line."""

from __future__ import annotations

import json
import signal

import pytest

from tao_brev import cli
from tao_brev.errors import TaoBrevError
from tests.unit.leaks import SECRETS


@pytest.fixture
def run(capsys, monkeypatch, tmp_path):
    """``cli.run(main, argv)`` -> (exit code, the one JSON answer, stderr); the signal handlers and
    mask cli.run installs are put back afterwards (it blocks SIGINT/SIGTERM once it answers)."""
    from tao_brev.secrets import values as known_secrets

    monkeypatch.setenv("TMPDIR", str(tmp_path))   # the credential sweep lists this directory only
    monkeypatch.setattr("sys.argv", ["/bundle/scripts/poll_status.py"])
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    known_secrets.reset()

    def call(main, argv=(), **kw):
        code = cli.run(main, list(argv), **kw)
        out, err = capsys.readouterr()
        return code, (json.loads(out) if out.lstrip().startswith("{") else out), err

    yield call
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    known_secrets.reset()


def test_a_result_becomes_one_json_document_and_its_exit_code(run):
    code, answer, _ = run(lambda argv: ({"state": "RUNNING", "argv": argv}, 0), ["JOB"])
    assert code == 0 and answer == {**answer, "ok": True, "state": "RUNNING", "argv": ["JOB"]}


def test_a_result_without_ok_takes_it_from_the_exit_code(run):
    code, answer, _ = run(lambda argv: ({"state": "ERROR"}, 1))
    assert code == 1 and answer["ok"] is False, answer
    code, answer, _ = run(lambda argv: ({"state": "RUNNING", "ok": True}, 0))
    assert code == 0 and answer["ok"] is True


def test_an_error_answers_its_code_message_fix_and_exit(run):
    def main(argv):
        raise TaoBrevError("UNKNOWN_JOB", "no record for visual_changenet-train-abc123", "List the jobs.",
                           answer={"state": None})
    code, answer, _ = run(main)
    assert code == 2 and answer["ok"] is False and "state" in answer, answer
    assert answer["error"] == {**answer["error"], "code": "UNKNOWN_JOB", "fix": "List the jobs."}
    assert answer["error"]["message"].startswith("no record for")


def test_bad_input_to_the_parser_is_bad_argument_in_json(run):
    def main(argv):
        p = cli.parser("poll_status.py", "doc")
        p.add_argument("--interval", type=float)
        p.parse_args(argv)
        return {}, 0
    code, answer, _ = run(main, ["--interval", "soon"])
    assert code == 2 and answer["ok"] is False and answer["error"]["code"] == "BAD_ARGUMENT", answer
    assert "--help" in answer["error"]["fix"]


def test_a_bug_is_internal_error_exit_1_with_the_traceback_on_stderr(run):
    def main(argv):
        return {}["missing"], 0
    code, answer, err = run(main)
    assert code == 1 and answer["error"]["code"] == "INTERNAL_ERROR" and "KeyError" in answer["error"]["message"]
    assert "Traceback" in err


def test_a_sigterm_while_working_answers_interrupted_and_names_the_job(run):
    def main(argv):
        cli.note_job("visual_changenet-train-0a1b2c")
        signal.raise_signal(signal.SIGTERM)   # an agent's tool timeout
        raise AssertionError("the handler raises KeyboardInterrupt before this line")
    code, answer, _ = run(main)
    assert code == 130 and answer["ok"] is False and answer["error"]["code"] == "INTERRUPTED", answer
    assert answer["job_id"] == "visual_changenet-train-0a1b2c"


def test_a_signal_inside_a_deferred_block_is_answered_when_the_block_ends(run):
    seen = []

    def main(argv):
        with cli.deferred_interrupts():
            signal.raise_signal(signal.SIGINT)
            seen.append("the block finished")   # a record write is never cut in half
        return {"state": "RUNNING"}, 0
    code, answer, _ = run(main)
    assert seen == ["the block finished"] and code == 130 and answer["error"]["code"] == "INTERRUPTED"


def test_a_secret_value_in_a_result_is_redacted_from_stdout(run, monkeypatch):
    value = SECRETS["HF_TOKEN"]

    def main(argv):
        env = {"HF_TOKEN": value}
        cli.Context(env=env)   # its secret values are redacted from every output from now on
        return {"message": f"the job printed {value}"}, 0
    code, answer, _ = run(main)
    assert code == 0 and value not in json.dumps(answer) and "the job printed" in answer["message"], answer


def test_a_secret_value_given_as_an_instance_name_stops_the_run_before_main(run, monkeypatch):
    value = SECRETS["NGC_KEY"]
    monkeypatch.setenv("NGC_KEY", value)
    called = []
    code, answer, _ = run(lambda argv: (called.append(argv), ({}, 0))[1], ["--instance", value])
    assert called == [] and code == 2 and answer["error"]["code"] == "SECRET_IN_IDENTIFIER", answer
    assert value not in json.dumps(answer)


def test_next_step_is_asked_for_every_answer_a_failure_s_too(run):
    asked = []

    def next_step(answer, code, argv):
        asked.append((answer["ok"], code, argv))
        answer["next"] = None
        answer["next_note"] = "Run scripts/preflight.py --instance box first."

    def main(argv):
        raise TaoBrevError("INSTANCE_STOPPED", "box is STOPPED")
    code, answer, _ = run(main, ["JOB"], next_step=next_step)
    assert asked == [(False, code, ["JOB"])] and answer["next"] is None
    assert "/scripts/preflight.py --instance box" in answer["next_note"]   # the script by its absolute path
    assert not answer["next_note"].startswith("Run scripts/")


def test_a_main_that_printed_its_own_text_gets_no_json_added(run, capsys):
    code, answer, _ = run(lambda argv: (print("visual_changenet-train-0a1b2c"), (None, 0))[1])
    assert code == 0 and answer == "visual_changenet-train-0a1b2c\n"
