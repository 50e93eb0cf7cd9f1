"""tao_brev/json_out.py: the text of json.dumps(obj, indent=2, default=str), byte for byte.

Invariant: for every JSON-like object (and objects json.dumps turns into strings with
``default=str``), :func:`json_out.dumps` at depth 0 is ``json.dumps``'s text, and at
depth N it is the text of an item nested N levels deep.
"""

from __future__ import annotations

import enum
import json
import math
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from tao_brev import json_out

SCALARS = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
           | st.text())
KEYS = st.text() | st.integers() | st.booleans() | st.none() | st.floats(allow_nan=False)
OBJECTS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                       | st.dictionaries(KEYS, inner, max_size=4), max_leaves=30)


@settings(max_examples=400, deadline=None)
@given(OBJECTS)
def test_the_text_is_json_dumps_text(obj):
    assert json_out.dumps(obj) == json.dumps(obj, indent=2, default=str)


@settings(max_examples=100, deadline=None)
@given(OBJECTS)
def test_an_item_at_depth_two_is_its_text_inside_a_list_inside_an_object(obj):
    whole = json.dumps({"ok": True, "jobs": [obj]}, indent=2, default=str)
    assert whole == '{\n  "ok": true,\n  "jobs": [\n    ' + json_out.dumps(obj, 2) + "\n  ]\n}"


def _shout(obj):
    """``obj`` with each string value and string key upper-cased and marked (keys are redacted too)."""
    if isinstance(obj, str):
        return "!" + obj.upper()
    if isinstance(obj, (list, tuple)):
        return [_shout(v) for v in obj]
    if isinstance(obj, dict):
        return {(_shout(k) if isinstance(k, str) else k): _shout(v) for k, v in obj.items()}
    return obj


@settings(max_examples=200, deadline=None)
@given(OBJECTS)
def test_an_encoder_writes_each_string_value_through_its_function(obj):
    dumps = json_out.encoder(lambda s: json.dumps("!" + s.upper()))
    assert dumps(obj) == json.dumps(_shout(obj), indent=2, default=str)
    assert dumps(obj, 2) == json_out.dumps(_shout(obj), 2)


class Color(enum.IntEnum):
    RED = 1


class Name(str):
    pass


def test_subclasses_special_floats_and_other_objects_as_json_writes_them():
    job = uuid.UUID(int=7)
    obj = {"enum": Color.RED, "name": Name("x\u00e9\n\"q\""), "nan": math.nan, "inf": [math.inf, -math.inf],
           1.5: "float key", 2: "int key", True: "bool key", None: "null key", "uuid": job, "empty": [{}, [], ()]}
    assert json_out.dumps(obj) == json.dumps(obj, indent=2, default=str)


def test_a_key_json_refuses_is_refused():
    for bad in ({(1, 2): "tuple key"}, {b"bytes": 1}):
        try:
            json_out.dumps(bad)
        except TypeError as exc:
            assert "keys must be" in str(exc)
        else:
            raise AssertionError(f"{bad} was encoded")
