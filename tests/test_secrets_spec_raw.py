"""The spec's raw text (comments and all: it travels to the instance as spec.yaml) and each
override's raw text are searched with the full normaliser, not only for the value's forms:
a decoder-only form of a known value where parsing never reaches (a YAML comment, a key no
reader takes apart) is refused before anything is recorded (``verbs/submit/spec_guards.py``).
Table: decoder-only encodings x places in the raw text the parser does not return.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from tao_brev.errors import TaoBrevError
from tao_brev.secrets import guard as known_secrets
from tao_brev.verbs.submit import spec_guards
from tests.conftest import watching

VALUE = "Hz4/Mq+Tn8Wc2&Lp6Rv1Xk9Bd5"
NAME = "SPECRAW_API_KEY"

ENCODINGS = {   # none of them is a form secrets.forms computes: only a decoder finds them
    "base64 of entities": base64.b64encode("".join(f"&#{ord(c)};" for c in VALUE).encode()).decode(),
    "base64 of UTF-16LE": base64.b64encode(VALUE.encode("utf-16-le")).decode(),
    "double URL-encoded": quote(quote(VALUE, safe=""), safe=""),
    "colon hex": ":".join(f"{b:02x}" for b in VALUE.encode()),
    "HTML entities": "".join(f"&#x{ord(c):x};" for c in VALUE),
    "JSON three deep": json.dumps(json.dumps("".join(f"\\u{ord(c):04X}" for c in VALUE)))[1:-1],
    "quoted-printable": "".join(f"={b:02X}" for b in VALUE.encode()),
    "decimal bytes": str(list(VALUE.encode())),
    "wrapped base64": "\n# ".join(base64.b64encode(b"pre-" + VALUE.encode() * 2).decode()[i:i + 20]
                                  for i in range(0, 80, 20)),
}

PLACES = {
    "comment line": "train:\n  num_epochs: 3\n# {enc}\n",
    "comment after a value": "train:\n  num_epochs: 3  # {enc}\n",
    "comment in a block": "train:\n  # {enc}\n  num_epochs: 3\n",
    "comment before the document": "# {enc}\n---\ntrain:\n  num_epochs: 3\n",
}


@pytest.fixture(autouse=True)
def _known(monkeypatch):
    yield from watching(monkeypatch, NAME, VALUE)


def test_the_encodings_are_decoder_only():
    for how, enc in ENCODINGS.items():
        assert known_secrets.find(enc, {NAME: VALUE}) == [], how
        assert known_secrets.find(enc, {NAME: VALUE}, decoded=True), how


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("how", sorted(ENCODINGS))
def test_a_decoder_only_form_in_the_raw_spec_text_is_refused(tmp_path, how, place):
    spec = tmp_path / "spec.yaml"
    spec.write_text(PLACES[place].format(enc=ENCODINGS[how]))
    with pytest.raises(TaoBrevError) as err:
        spec_guards._read_spec(str(spec))
    assert err.value.code == "SECRET_IN_COMMAND" and NAME in err.value.message
    assert VALUE not in err.value.message


@pytest.mark.parametrize("how", sorted(ENCODINGS))
def test_a_decoder_only_form_in_an_override_key_is_refused(how):
    enc = ENCODINGS[how].replace("\n# ", "")
    with pytest.raises(TaoBrevError) as err:
        spec_guards._refuse_secret_overrides([f"train.x'{enc}'=1"], {NAME: VALUE})
    assert err.value.code == "SECRET_IN_COMMAND" and VALUE not in err.value.message


def test_a_raw_spec_the_normaliser_cannot_examine_whole_is_refused(tmp_path):
    spec = tmp_path / "spec.yaml"
    nested = json.dumps("x" * 20)
    for _ in range(12):   # escapes nested deeper than the normaliser decodes
        nested = json.dumps(nested)
    spec.write_text(f"train:\n  num_epochs: 3\n# {nested}\n")
    with pytest.raises(TaoBrevError) as err:
        spec_guards._read_spec(str(spec))
    assert err.value.code == "SECRET_IN_COMMAND" and "could not examine whole" in err.value.message


def test_an_ordinary_commented_spec_passes(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("# TAO visual_changenet train spec, see https://docs.nvidia.com/tao/ (v5.5)\n"
                    "train:\n  num_epochs: 3  # 3 is enough for a smoke run\n"
                    "  checkpoint_interval: 1\n# lr=1e-4 & batch 8; C:\\data\\ paths are 100% fine\n")
    _text, data = spec_guards._read_spec(str(spec))
    assert data["train"]["num_epochs"] == 3


def test_example_spec_passes():
    from conftest import EXAMPLE_SPEC

    spec_guards._read_spec(str(Path(EXAMPLE_SPEC)))
