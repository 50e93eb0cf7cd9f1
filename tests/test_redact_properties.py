"""Properties of the secret lint and the value guard, over generated input (Hypothesis).

The lint is advice over text the bundle did not produce: whatever a spec, an
override or a job's log holds, ``lint`` / ``redact`` / ``redact_uri`` /
``redact_obj`` / ``redact_values`` must answer, never raise. Inputs are drawn
from all of Unicode and, to reach the rules' corners, from fragments of ML
configuration, shell and JSON glued together. And a known value inserted
anywhere in such text never survives ``redact_values``.
"""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tao_brev.secrets import guard as known_secrets, redact

FRAGMENTS = ["api_key", "password", "token", "eos_token_id", "pad_token", "authToken", "clientSecret", "KAGGLE_KEY",
             "HF_TOKEN", "_file", ": ", "=", " ", "\n", "\\\n", "  ", "- ", "{", "}", "[", "]", ",", '"', "'", "$",
             "${", "${oc.env:", "$(", ")", "<|", "|>", "</s>", "[PAD]", "--token", "--secret", "-p", "-u", "login",
             "mysql", "sshpass", "curl", "aws configure set ", "https://", "@", ":", "?", "&", "Signature=",
             "X-Amz-Signature=", "Authorization: Bearer ", "name: ", "value: ", "| ", "> ", "#", "-----BEGIN ",
             "PRIVATE KEY-----", "nvapi-", "hf_", "AKIA", "0123456789", "Zq9TkW4mLp7RvX2cN8", "\r", "\t", "\x00",
             "🔑", "é", "%2F", "\\/", "+", "~", "|"]

texts = st.one_of(
    st.text(max_size=300),
    st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=8)), max_size=40).map("".join),
)
json_like = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), texts),
                         lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                 st.dictionaries(st.text(max_size=10), inner, max_size=4)),
                         max_leaves=12)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(texts)
def test_lint_and_redact_never_raise(text):
    findings = redact.lint(text)
    lines = text.count("\n") + 1
    assert all(f.kind in redact.KINDS and 1 <= f.line <= lines for f in findings)
    assert all(isinstance(str(f), str) and f.to_json()["name"] == f.name for f in findings)
    assert isinstance(redact.redact(text), str)
    assert isinstance(redact.redact_uri(text), str)
    assert isinstance(redact.tail(text, 50), str)


@SETTINGS
@given(json_like)
def test_redact_obj_never_raises_and_keeps_shape(obj):
    out = redact.redact_obj(obj, {})
    assert type(out) is type(obj)
    if isinstance(obj, dict):
        assert list(out) == list(obj)


VALUE_CHARS = string.ascii_letters + string.digits + "/+=-_.:%\"\\ &"


@SETTINGS
@given(texts, texts, st.text(alphabet=VALUE_CHARS, min_size=redact.MIN_VALUE_LENGTH, max_size=40)
       .filter(lambda v: v.strip() == v and not v.startswith("/"))    # an absolute path names a file (see the docs)
       .filter(lambda v: v not in redact.PLACEHOLDER))   # "redacted" itself lives on inside every "<redacted>"
def test_a_known_value_never_survives_redaction(before, after, value):
    env = {"SOME_SERVICE_TOKEN": value}
    out = redact.redact_values(before + value + after, env)
    assert value not in out   # every occurrence overlapped a match, so none is left whole
    hits = known_secrets.find(before + value + after, env)
    assert hits and all(name == "SOME_SERVICE_TOKEN" for name, _how, _line in hits)
