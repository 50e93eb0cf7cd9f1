"""evals/evals.json: the tasks the skill is evaluated on, in the TAO skill bank's format.

The bank keeps, next to each skill's SKILL.md, ``evals/evals.json``: a JSON array
of tasks, each ``{"id", "question", "expected_skill", "expected_script",
"ground_truth", "expected_behavior": [str, ...]}`` (see for example the bank's
skills/platform/tao-run-on-docker/evals/evals.json). A negative task names the
skill that should take the request instead, or ``null`` when no skill should (the bank's
BENCHMARK.md: "entries with ``expected_skill: null`` are treated as negative activation cases").

Invariant: the file has that shape, at least 8 tasks with unique ids, both
activation kinds (this skill, and a request it must not take), the four verbs, a
failure diagnosis and a cost clean-up; every script a task expects exists; and
install.sh ships it with the skill.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
EVALS = ROOT / "evals" / "evals.json"
FIELDS = {"id", "question", "expected_skill", "expected_script", "ground_truth", "expected_behavior"}
# What a negative task may expect instead: the official Brev skill (provisioning), the TAO bank's
# other platform skills, or no skill at all.
OTHER_SKILLS = {"brev-cli", "tao-run-on-docker", "tao-run-on-slurm", "tao-run-on-kubernetes", None}


def skill_name() -> str:
    front = re.match(r"^---\n(.*?)\n---\n", (ROOT / "SKILL.md").read_text(encoding="utf-8"), re.DOTALL)
    return yaml.safe_load(front.group(1))["name"]


@pytest.fixture(scope="module")
def tasks() -> list[dict]:
    data = json.loads(EVALS.read_text(encoding="utf-8"))
    assert isinstance(data, list), "evals.json is a JSON array of tasks (the bank's format)"
    return data


def test_every_task_has_the_banks_fields(tasks):
    for task in tasks:
        assert set(task) == FIELDS, (task.get("id"), sorted(set(task) ^ FIELDS))
        for key in ("id", "question", "ground_truth"):
            assert isinstance(task[key], str) and task[key].strip(), (task["id"], key)
        assert task["expected_skill"] is None or (isinstance(task["expected_skill"], str)
                                                  and task["expected_skill"].strip() and task["expected_skill"] != "NONE")
        assert task["expected_script"] is None or isinstance(task["expected_script"], str), task["id"]
        behaviour = task["expected_behavior"]
        assert isinstance(behaviour, list) and behaviour and all(isinstance(b, str) and b.strip() for b in behaviour)


def test_the_file_passes_the_banks_own_evals_check():
    """The TAO skill bank's scripts/validate-skills.sh step 5b, rule by rule: a non-empty top-level
    array of objects, each with id, question, expected_skill, ground_truth and a non-empty
    expected_behavior list."""
    data = json.loads(EVALS.read_text(encoding="utf-8"))
    assert isinstance(data, list) and len(data) > 0
    for entry in data:
        assert isinstance(entry, dict)
        assert all(field in entry for field in ("id", "question", "expected_skill", "ground_truth",
                                                "expected_behavior"))
        assert isinstance(entry["expected_behavior"], list) and len(entry["expected_behavior"]) > 0
    assert [t["id"] for t in data if t["expected_skill"] is None] == ["tao-run-on-brev-negative-unrelated"]


def test_ids_are_unique_and_name_the_skill(tasks):
    ids = [task["id"] for task in tasks]
    assert len(ids) == len(set(ids)), ids
    assert all(re.fullmatch(rf"{skill_name()}-[a-z0-9]+(-[a-z0-9]+)*", i) for i in ids), ids


def test_at_least_eight_tasks_with_both_activation_kinds(tasks):
    name = skill_name()
    assert len(tasks) >= 8
    skills = {task["expected_skill"] for task in tasks}
    assert skills <= {name} | OTHER_SKILLS, skills - {name} - OTHER_SKILLS
    positive = [t for t in tasks if t["expected_skill"] == name]
    negative = [t for t in tasks if t["expected_skill"] != name]
    assert len(positive) >= 6 and len(negative) >= 2, (len(positive), len(negative))
    for task in negative:    # a negative task's grader checks that this skill was NOT chosen
        assert any(name in b and "not" in b.lower() for b in task["expected_behavior"]), task["id"]


def test_the_verbs_a_diagnosis_and_a_clean_up_are_covered(tasks):
    scripts = {task["expected_script"] for task in tasks if task["expected_script"]}
    for script in scripts:
        assert (ROOT / script).is_file(), f"{script} does not exist"
    assert {"scripts/preflight.py", "scripts/submit.py", "scripts/poll_status.py", "scripts/teardown.py"} <= scripts
    text = {task["id"]: json.dumps(task) for task in tasks}
    assert any("ERR_INFRA" in t or "ERR_PROGRAM" in t for t in text.values()), "no failure diagnosis"
    assert any("--orphans" in t for t in text.values()), "no cost clean-up"


def test_the_tasks_name_only_flags_the_scripts_have(tasks):
    """A ground truth is graded against what the skill says: it must not teach a flag that does not exist."""
    from test_docs import ALL_OPTIONS, EXTERNAL_FLAGS

    named = {flag for task in tasks for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", json.dumps(task))}
    assert named and named <= ALL_OPTIONS | EXTERNAL_FLAGS, sorted(named - ALL_OPTIONS - EXTERNAL_FLAGS)


def test_install_ships_the_evals_with_the_skill():
    bundle = re.search(r"^BUNDLE=\(([^)]*)\)", (ROOT / "install.sh").read_text(), re.M).group(1).split()
    assert "evals" in bundle
