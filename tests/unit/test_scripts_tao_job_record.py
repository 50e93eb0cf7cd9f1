"""The records CLI (scripts/tao_job_record.py) in process: its verbs called through ``main`` and
``cli.run``, the answers and exit codes read from stdout, the store checked on disk."""

from __future__ import annotations

import importlib.util
import json
import signal
import sys
from pathlib import Path

import pytest

from tests.unit.leaks import SECRETS

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
OPEN = ["open", "--image", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt", "--network-arch", "visual_changenet",
        "--action", "train", "--storage-tier", "A", "--results-root", "/tmp/tao-results"]


@pytest.fixture
def tool(monkeypatch, tmp_path, capsys):
    """``tool(*argv)`` -> (exit code, stdout): the script's ``main`` run by ``cli.run`` in this process,
    over a private TAO_STATE_DIR; the signal handlers its import and cli.run install are put back."""
    from tao_brev import cli
    from tao_brev.secrets import values as known_secrets

    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    monkeypatch.setenv("TAO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("TAO_BREV_NO_REEXEC", "1")
    monkeypatch.syspath_prepend(str(SCRIPTS))
    monkeypatch.setattr(sys, "argv", [str(SCRIPTS / "tao_job_record.py")])
    spec = importlib.util.spec_from_file_location("tao_job_record_under_test", SCRIPTS / "tao_job_record.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    known_secrets.reset()

    def run(*argv):
        capsys.readouterr()
        code = cli.run(module.main, list(argv))
        return code, capsys.readouterr().out

    yield run
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    for signum, handler in handlers.items():
        signal.signal(signum, handler)
    known_secrets.reset()


def opened(tool) -> str:
    code, out = tool(*OPEN)
    assert code == 0
    return out.strip()


def test_open_prints_the_bare_id_and_writes_pending(tool, tmp_path):
    job_id = opened(tool)
    assert job_id.startswith("visual_changenet-train-") and "\n" not in job_id   # JOB_ID=$(... open ...)
    record = json.loads((tmp_path / "state" / "jobs" / f"{job_id}.json").read_text())
    assert record["transitions"][-1]["state"] == "PENDING" and record["results_dir"] == f"/tmp/tao-results/{job_id}"


def test_open_json_mark_and_show_answer_in_json(tool):
    code, out = tool(*OPEN, "--json")
    answer = json.loads(out)
    assert code == 0 and answer["ok"] is True and answer["record"]["id"] == answer["job_id"]
    job_id = answer["job_id"]
    code, out = tool("mark", job_id, "--state", "RUNNING", "--backend-ref", f"box/{job_id}")
    assert code == 0 and json.loads(out) == {"ok": True, "job_id": job_id, "state": "RUNNING", "terminal_state": None}
    code, out = tool("show", job_id)
    shown = json.loads(out)
    assert code == 0 and shown["backend_ref"] == f"box/{job_id}" and "ok" not in shown   # the record itself


def test_a_terminal_state_never_changes(tool):
    job_id = opened(tool)
    assert tool("mark", job_id, "--state", "COMPLETE")[0] == 0
    code, out = tool("mark", job_id, "--state", "RUNNING")
    answer = json.loads(out)
    assert code == 2 and answer["ok"] is False, answer
    code, out = tool("show", job_id)
    assert json.loads(out)["terminal_state"] == "COMPLETE"


@pytest.mark.parametrize("argv, code", [
    (("show", "../../etc/passwd"), "BAD_JOB_ID"),
    (("show", "visual_changenet-train-abcdef"), "UNKNOWN_JOB"),
    (("mark", "visual_changenet-train-abcdef", "--state", "DONE"), "BAD_ARGUMENT"),
    (("open", "--image", "x"), "BAD_ARGUMENT"),
    (("cost", "--since", "the day before"), "BAD_ARGUMENT"),
])
def test_bad_input_is_an_error_in_json_with_exit_2(tool, argv, code):
    exit_code, out = tool(*argv)
    answer = json.loads(out)
    assert exit_code == 2 and answer["ok"] is False and answer["error"]["code"] == code, answer
    assert set(answer["error"]) >= {"code", "message", "fix"}


def test_list_in_bank_format_and_in_json(tool):
    first, second = opened(tool), opened(tool)
    code, out = tool("list")
    rows = sorted(line.split("\t") for line in out.splitlines())
    assert code == 0 and rows == sorted([[first, "brev", "PENDING", f"/tmp/tao-results/{first}"],
                                         [second, "brev", "PENDING", f"/tmp/tao-results/{second}"]])
    code, out = tool("list", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["ok"] is True and sorted(j["id"] for j in answer["jobs"]) == sorted([first, second])


def test_a_message_holding_a_secret_value_is_refused_and_nothing_is_recorded(tool, monkeypatch, tmp_path):
    value = SECRETS["HF_TOKEN"]
    monkeypatch.setenv("HF_TOKEN", value)
    job_id = opened(tool)
    code, out = tool("mark", job_id, "--state", "ERROR", "--err-class", "ERR_PROGRAM",
                     "--message", f"login failed with {value}")
    answer = json.loads(out)
    assert code == 2 and answer["error"]["code"] == "SECRET_IN_IDENTIFIER" and "--message" in out, answer
    assert value not in out
    stored = (tmp_path / "state" / "jobs" / f"{job_id}.json").read_text()
    assert value not in stored and json.loads(stored)["transitions"][-1]["state"] == "PENDING"
    assert value not in tool("show", job_id)[1] + tool("list", "--json")[1]
