"""The JSON text of answers and of the streamed listing: ``json.dumps(obj, indent=2, default=str)``.

Invariant: the redactor's ``json_text(obj, level)`` (each entry of ``tao_job_record.py list
--json``) is, byte for byte, the text ``json.dumps`` writes for the redacted object nested
``level`` deep in a whole document, so the streamed listing reads as one ``json.dumps``.
"""

from __future__ import annotations

import enum
import json
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from tao_brev.secrets import redact

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
           | st.text())
KEYS = st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
OBJECTS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                       | st.dictionaries(KEYS, inner, max_size=4), max_leaves=30)


def at_depth(obj, level: int) -> str:
    """The text of ``obj`` as ``json.dumps`` writes it nested ``level`` lists deep."""
    wrapped = obj
    for _ in range(level):
        wrapped = [wrapped]
    whole = json.dumps(wrapped, indent=2, default=str)
    head = "".join("[\n" + "  " * (i + 1) for i in range(level))
    tail = "".join("\n" + "  " * i + "]" for i in reversed(range(level)))
    assert whole.startswith(head) and whole.endswith(tail)
    return whole[len(head):len(whole) - len(tail)]


@settings(max_examples=300, deadline=None)
@given(OBJECTS, st.integers(min_value=0, max_value=3))
def test_an_entry_is_its_text_inside_the_whole_document(obj, level):
    redacted = redact.obj_redactor()
    assert redacted.json_text(obj, level) == at_depth(redacted(obj), level)


@settings(max_examples=100, deadline=None)
@given(OBJECTS)
def test_an_item_at_depth_two_is_its_text_inside_a_list_inside_an_object(obj):
    redacted = redact.obj_redactor()
    whole = json.dumps({"ok": True, "jobs": [redacted(obj)]}, indent=2, default=str)
    assert whole == '{\n  "ok": true,\n  "jobs": [\n    ' + redacted.json_text(obj, 2) + "\n  ]\n}"


class Colour(enum.Enum):
    RED = 1


def test_objects_json_cannot_encode_are_their_str_and_non_ascii_is_escaped():
    obj = {"id": uuid.UUID(int=7), "colour": Colour.RED, "path": "caf\u00e9\n\u2028", "n": [float("nan"), 1e300]}
    text = redact.obj_redactor().json_text(obj, 1)
    assert text == at_depth(obj, 1)
    assert "\u00e9" not in text and "\\u00e9" in text and str(uuid.UUID(int=7)) in text
