"""The docker state table, read row by row from references/failure-classes.md.

The tests that compare the document with the code's tables carry the ``doc_sync``
marker: they are left out of docker_state's mutation score (dev/mutation.py), which
counts only the behavioural tests (test_docker_state_rows.py and the rest here).

The tests parse the generated table of the document (not the Python tuple)
and run each row's example ``.State`` through ``from_inspect``: what the
document promises is what the code answers.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, validate_hint
from tao_brev import docker_state
from tao_brev.docker_state import (DOCKER_STATUSES, LOG_PATTERNS, STATE_ROWS, classify_logs, docker_error_code,
                                   from_inspect)
from tao_brev.errors import CODES

FAILURE_CLASSES_MD = ROOT / "references" / "failure-classes.md"


def documented_rows() -> list[dict]:
    """The rows of the '.State.Status' table of failure-classes.md."""
    text = FAILURE_CLASSES_MD.read_text(encoding="utf-8")
    table = text.split("### Docker state -> status", 1)[1].split("\n### ", 1)[0]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) != 7 or cells[0].startswith(("`", "---")):
            continue
        example = cells[6]
        rows.append({"status": cells[0], "when": cells[1], "state": cells[2], "class": cells[3],
                     "example": None if example == "none" else json.loads(example.strip("`").replace("\\|", "|"))})
    return rows


ROWS = documented_rows()


@pytest.mark.doc_sync
def test_the_document_lists_every_row_of_the_code_and_every_docker_status():
    assert len(ROWS) == len(STATE_ROWS)
    assert {r["status"] for r in ROWS} >= set(DOCKER_STATUSES) | {"none"}
    assert set(DOCKER_STATUSES) == {"created", "running", "paused", "restarting", "removing", "exited", "dead"}


@pytest.mark.doc_sync
@pytest.mark.parametrize("row", ROWS, ids=[f"{r['status']}: {r['when'][:40]}" for r in ROWS])
def test_each_documented_row_is_what_the_code_answers(row):
    observed = from_inspect(row["example"])
    assert observed.state == row["state"], (row, observed)
    klass = row["class"].split(" ")[0]
    if klass == "-":
        assert observed.hint is None, (row, observed.hint)
    else:
        assert observed.hint is not None, row
        expected = None if klass == "null" else klass
        assert observed.hint["err_class"] == expected, (row, observed.hint)
    if observed.hint is not None:
        validate_hint(observed.hint)
        assert observed.hint["reason"] and observed.hint["advice"] and observed.hint["evidence"]


@pytest.mark.parametrize("code, oom, error", [
    (code, oom, error) for code in (0, 1, 2, 125, 126, 127, 128, 134, 137, 139, 143, 255)
    for oom in (False, True) for error in ("", "some daemon error")])
@pytest.mark.parametrize("status", DOCKER_STATUSES + ("frozen",))
def test_every_combination_maps_to_the_vocabulary_and_every_error_has_a_hint(status, code, oom, error):
    observed = from_inspect({"Status": status, "ExitCode": code, "OOMKilled": oom, "Error": error})
    assert observed.state in docker_state.STATES
    if observed.state == "ERROR":
        assert observed.hint is not None and observed.hint["reason"], observed
        assert observed.hint["err_class"] in ("ERR_INFRA", "ERR_PROGRAM", None)
        assert any(line.startswith("ExitCode=") for line in observed.hint["evidence"])


def test_sigkill_without_oomkilled_is_not_a_program_error_and_says_why():
    observed = from_inspect({"Status": "exited", "ExitCode": 137, "OOMKilled": False})
    assert observed.state == "ERROR" and observed.hint["err_class"] != "ERR_PROGRAM"
    assert "OOM" in observed.hint["reason"] and "kill" in observed.hint["reason"]
    assert {"ExitCode=137", "OOMKilled=false"} <= set(observed.hint["evidence"])
    assert "reduce the batch size" not in observed.message
    certain = from_inspect({"Status": "exited", "ExitCode": 137, "OOMKilled": True})
    assert certain.hint["err_class"] == "ERR_PROGRAM" and "OOMKilled=true" in certain.hint["evidence"]


def test_a_created_container_with_a_start_error_is_a_failed_launch():
    error = 'could not select device driver "" with capabilities: [[gpu]]'
    observed = from_inspect({"Status": "created", "ExitCode": 128, "Error": error})
    assert observed.state == "ERROR" and observed.hint["err_class"] == "ERR_INFRA"
    assert any(error in line for line in observed.hint["evidence"]) and observed.docker_error == error
    assert "NVIDIA_RUNTIME_MISSING" in observed.hint["reason"]
    assert from_inspect({"Status": "created", "ExitCode": 0, "Error": ""}).state == "PENDING"


def test_after_an_xid_the_runtime_refusal_advises_a_reset_not_the_toolkit():
    text = ("failed to create task for container: OCI runtime create failed: error running hook #0: stderr: "
            "nvidia-container-cli: initialization error: nvml error: unknown error: unknown")
    assert docker_error_code(text) == "GPU_UNHEALTHY"
    assert "brev stop" in CODES["GPU_UNHEALTHY"].fix and "does not support stop" in CODES["GPU_UNHEALTHY"].fix
    hint = from_inspect({"Status": "created", "ExitCode": 128, "Error": text}).hint
    assert hint["advice"] == CODES["GPU_UNHEALTHY"].fix and "nvidia-ctk" not in hint["advice"]
    for line in ("NVRM: Xid (PCI:0000:00:04): 79, pid=1234, GPU has fallen off the bus.",
                 "RuntimeError: CUDA error: GPU has fallen off the bus"):
        advice = classify_logs(line)["advice"]
        assert "stop and start the instance" in advice and "another instance" in advice


@pytest.mark.parametrize("line", [
    "RuntimeError: [enforce fail at inline_container.cc:603] . PytorchStreamWriter failed writing file data/17: "
    "file write failed",
    "RuntimeError: [enforce fail at inline_container.cc:445] . unexpected pos 1234 vs 5678",
    "RuntimeError: unexpected pos 64 vs 128",
    "OSError: [Errno 28] No space left on device",
    "OSError: [Errno 122] Disk quota exceeded: '/results/train/model.pth'",
])
def test_a_full_disk_is_infrastructure_with_the_free_space_fix_whatever_pytorch_says(line):
    text = f"Epoch 3/10\nTraceback (most recent call last):\n  File \"train.py\", line 1\n{line}\n"
    observed = from_inspect({"Status": "exited", "ExitCode": 1}, text)
    assert observed.hint["err_class"] == "ERR_INFRA" and observed.hint["reason"] == "instance disk full"
    assert "df -h" in observed.hint["advice"] and "free disk space" in observed.hint["advice"]
    assert line.strip() in observed.hint["evidence"]


def test_an_error_without_a_known_pattern_gets_a_hint_naming_the_exit_and_the_last_lines():
    observed = from_inspect({"Status": "exited", "ExitCode": 3}, "Epoch 1/2\nloading shards\nsomething odd\n")
    assert observed.hint["reason"] == "exit 3, no known pattern: read the last log lines"
    assert "--logs 200" in observed.hint["advice"] and "something odd" in observed.hint["evidence"]
    assert from_inspect({"Status": "exited", "ExitCode": 3}).hint is not None   # no logs read: still a hint


@pytest.mark.doc_sync
@pytest.mark.parametrize("pattern", LOG_PATTERNS, ids=[p.reason for p in LOG_PATTERNS])
def test_each_log_pattern_matches_its_documented_example_and_wins_as_documented(pattern):
    hint = classify_logs("Epoch 1/3\n" + pattern.example)   # a multi-line example: its last line is the evidence
    assert hint is not None and pattern.example.strip().splitlines()[-1].strip() in hint["evidence"]
    assert (hint["err_class"], hint.get("code")) == (pattern.err_class, pattern.code) or \
        (pattern.err_class == "ERR_PROGRAM" and pattern.code is None), (pattern.reason, hint)
    doc = FAILURE_CLASSES_MD.read_text(encoding="utf-8")
    assert pattern.example.replace("|", "\\|").replace("\n", "<br>") in doc and pattern.advice.replace("|", "\\|") in doc


def test_paused_restarting_removing_and_dead_are_named_in_the_message():
    for status, word in (("paused", "unpause"), ("restarting", "restarting"), ("removing", "removed"),
                         ("dead", "dead")):
        assert word in from_inspect({"Status": status, "ExitCode": 1}).message


def test_the_markdown_command_prints_the_generated_tables_and_nothing_else():
    import subprocess
    import sys
    from pathlib import Path

    from tao_brev import docker_state

    root = Path(__file__).resolve().parent.parent
    ok = subprocess.run([sys.executable, "-m", "tao_brev.docker_state", "--markdown"], cwd=str(root),
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout == docker_state.markdown()
    for args in ([], ["--markdwn"], ["--markdown", "x"]):
        bad = subprocess.run([sys.executable, "-m", "tao_brev.docker_state", *args], cwd=str(root),
                             capture_output=True, text=True)
        assert bad.returncode == 1 and bad.stdout == "" and "usage:" in bad.stderr, args


def test_evidence_and_docker_errors_are_redacted_before_they_are_cut(monkeypatch):
    """A value past the cut (EVIDENCE_CHARS) leaves no prefix of itself: redaction comes first."""
    value = "Kp3/Vx9+Qw2Lm8Zr4Ty6Nb0"
    monkeypatch.setenv("WANDB_API_KEY", value)
    line = "x" * (docker_state.EVIDENCE_CHARS - 10) + value + " CUDA out of memory"
    hint = classify_logs(line)
    assert hint and all(value[:8] not in e for e in hint["evidence"])
    assert value[:8] not in docker_state._short("y" * (docker_state.EVIDENCE_CHARS - 12) + value)
    assert docker_state._cut("short line") == "short line"
    assert len(docker_state._cut("z" * 1000)) == docker_state.EVIDENCE_CHARS
