"""The typed state (tao_brev/model) and the JSON Schemas in references/schemas/ say the same thing:
every field of a schema is a field of its class and vice versa, and their types agree (an enum's
members are the schema's words). And a document read into its class comes back as it was."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from tao_brev import records, vocabulary
from tao_brev.model import InstanceSidecar, JobRecord, JobSidecar, Transition, sidecar_parts

SCHEMAS = Path(__file__).resolve().parent.parent / "references" / "schemas"
CLASSES = {"job_record": JobRecord, "job_sidecar": JobSidecar, "instance_sidecar": InstanceSidecar}
SIMPLE = {"str": {"string"}, "int": {"integer"}, "float": {"number"}, "bool": {"boolean"}, "dict": {"object"},
          "list": {"array"}}
ENUMS = {name: getattr(vocabulary, name) for name in ("JobState", "Source", "StorageTier", "ErrClass")}
NESTED = {"Transition": Transition}
PART_TYPES = {name: getattr(sidecar_parts, name) for name in sidecar_parts.__all__}   # a sidecar's sub-documents
PARTS = {"JobRecord.terminal_state": vocabulary.TERMINAL_STATES}


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def resolve(node: dict, root: dict) -> dict:
    while "$ref" in node:
        node = root["$defs"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def allows_null(node: dict, root: dict) -> bool:
    node = resolve(node, root)
    kinds = node.get("type")
    return ("null" in kinds if isinstance(kinds, list) else kinds == "null") or \
        any(allows_null(n, root) for n in node.get("oneOf", []) + node.get("anyOf", []))


def without_null(node: dict, root: dict) -> dict:
    node = resolve(node, root)
    if "oneOf" in node:
        rest = [resolve(n, root) for n in node["oneOf"] if not allows_null(n, root)]
        assert len(rest) == 1, node
        return rest[0]
    if isinstance(node.get("type"), list):
        return {**node, "type": [t for t in node["type"] if t != "null"]}
    return node


def json_types(node: dict) -> set[str]:
    if "const" in node:
        return {{bool: "boolean", int: "integer", str: "string"}[type(node["const"])]}
    if "enum" in node:
        return {"enum"}
    kinds = node.get("type")
    return set(kinds) if isinstance(kinds, list) else {kinds}


def agree(annotation: str, node: dict, root: dict, where: str) -> None:
    """``annotation`` (a dataclass field's, without Optional) says what ``node`` (a schema's) says."""
    inner = re.fullmatch(r"list\[(\w+)\]", annotation)
    if inner:
        assert json_types(node) == {"array"}, where
        agree(inner.group(1), resolve(node["items"], root), root, f"{where}[]")
    elif annotation in ENUMS:
        words = set(node.get("enum", ()))   # all the vocabulary's words, or a named part (terminal_state)
        assert words == set(ENUMS[annotation].values()) or words == set(PARTS.get(where, ())), where
    elif annotation in PART_TYPES:   # a TypedDict: an object; the keys the schema names are its keys
        assert json_types(node) == {"object"}, where
        keys = set(PART_TYPES[annotation].__annotations__)
        assert set(node.get("properties", ())) <= keys, (where, set(node.get("properties", ())) - keys)
        if node.get("additionalProperties") is False:
            assert set(node["properties"]) == keys, where
    elif annotation in NESTED:
        assert json_types(node) == {"object"}, where
        check_class(NESTED[annotation], node, root, set(node.get("required", ())))
    else:
        assert json_types(node) == SIMPLE[annotation], (where, annotation, node)


def check_class(cls, node: dict, root: dict, must_have: set[str]) -> None:
    fields = {f.name: f.type for f in dataclasses.fields(cls) if f.metadata.get("json", True)}
    # a property marked "x-view-only" is added by a view of the document (list/show), never stored
    stored = {k for k, v in node["properties"].items() if not v.get("x-view-only")}
    assert set(fields) == stored, (cls.__name__, set(fields) ^ stored)
    for name, annotation in fields.items():
        prop = node["properties"][name]
        optional = re.fullmatch(r"Optional\[(.+)\]", annotation)
        if optional:   # null allowed, or the field may be absent
            assert allows_null(prop, root) or name not in must_have, (cls.__name__, name)
            annotation = optional.group(1)
        else:
            assert not allows_null(prop, root) and name in node.get("required", ()), \
                (cls.__name__, name)
        agree(annotation, without_null(prop, root), root, f"{cls.__name__}.{name}")


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_each_schema_is_its_class(name):
    root = schema(name)
    must_have = set(records._REQUIRED) if name == "job_record" else set()
    check_class(CLASSES[name], root, root, must_have)


def test_a_schema_and_a_class_that_disagree_are_caught():
    """The check can fail: a field dropped from a schema, or a type changed, is found."""
    root = schema("job_record")
    dropped = {**root, "properties": {k: v for k, v in root["properties"].items() if k != "retry_of"}}
    with pytest.raises(AssertionError):
        check_class(JobRecord, dropped, dropped, set(records._REQUIRED))
    retyped = {**root, "properties": {**root["properties"], "image": {"type": "integer"}}}
    with pytest.raises(AssertionError):
        check_class(JobRecord, retyped, retyped, set(records._REQUIRED))
    renamed = {**root, "$defs": {**root["$defs"], "state": {"enum": ["PENDING", "RUNNING", "DONE"]}}}
    with pytest.raises(AssertionError):
        check_class(JobRecord, renamed, renamed, set(records._REQUIRED))


def test_a_record_reads_into_its_class_and_back_unchanged(tmp_path):
    store = records.RecordStore(tmp_path)
    opened = store.open(image="nvcr.io/x:1", network_arch="dino", action="train", storage_tier="B",
                        results_root="/r", parent_job="p-1", retry_of="r-1")
    done = store.mark(opened["id"], "ERROR", message="m", source="poller", err_class="ERR_INFRA",
                      backend_ref="box/x")
    for doc in (opened, done):
        typed = JobRecord.from_json(doc)
        assert typed.to_json() == doc and list(typed.to_json()) == list(doc)
        assert json.dumps(typed.to_json()) == json.dumps(doc)
    typed = JobRecord.from_json(done)
    assert typed.state is vocabulary.JobState.ERROR and typed.terminal_state is vocabulary.JobState.ERROR
    assert typed.err_class is vocabulary.ErrClass.INFRA and typed.transitions[0].source is vocabulary.Source.AGENT


def test_a_sidecar_keeps_what_another_version_wrote_and_is_read_by_its_fields_only():
    doc = {"job_id": "j-1", "instance": "box", "launch": {"state": "launched"}, "later_field": [1]}
    side = JobSidecar.from_json(doc)
    assert side.instance == "box" and side.extra == {"later_field": [1]} and side.to_json() == doc
    assert side.launch == {"state": "launched"} and side.teardown is None and bool(side) and not JobSidecar()
    with pytest.raises(TypeError):   # not a mapping: a state document is read by its fields
        side["job_id"]
    assert not hasattr(side, "get") and not hasattr(side, "later_field")
    assert InstanceSidecar.from_json({"exec_ready_at": None}).to_json() == {}


def test_a_sidecar_update_refuses_a_field_its_class_lacks(tmp_path):
    from tao_brev.sidecar import SidecarStore

    store = SidecarStore(tmp_path)
    with pytest.raises(TypeError):
        store.update("j-1", instnace="box")
    with pytest.raises(TypeError):
        store.note_instance("box", exec_ready="now")
    assert not store.jobs_dir.exists() or not list(store.jobs_dir.iterdir())
    side = store.update("j-1", instance="box", launch={"state": "launching"})
    side = store.update("j-1", launch={"pid": 1}, delete_pending=None)
    assert isinstance(side, JobSidecar) and side.launch == {"state": "launching", "pid": 1}
    assert store.load("j-1").instance == "box"


def test_the_launch_states_are_the_sidecar_schemas_and_say_which_never_ran():
    words = schema("job_sidecar")["properties"]["launch"]["properties"]["state"]["enum"]
    assert set(words) == set(vocabulary.LaunchState.values())
    never = {s.value for s in vocabulary.LaunchState if s.never_ran()}
    assert never == {"refused", "never_launched", "start_failed"}
    from tao_brev.verbs import reconcile

    assert set(reconcile.NEVER_RAN) == never
    assert reconcile.launch_failed(JobSidecar(launch={"state": "refused"})) and not reconcile.launch_failed(JobSidecar())
