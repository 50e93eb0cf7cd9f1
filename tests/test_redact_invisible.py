"""A known value with an invisible character inside it (soft hyphen, combining grapheme joiner,
Mongolian vowel separator, invisible operators, variation selectors, bidi controls, tags ...)
still is the value on screen: every exit withholds it and the spec guard refuses it. The table is
the whole class, found by Unicode property over every code point, not a hand list."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from tao_brev.secrets import guard as known_secrets
from tao_brev.verbs.submit import spec_guards
from tests.conftest import watching
from tests.test_redact_taint import EXITS

VALUE = "Kq7Wm2Zt9Rx4Lp8Vn3Hd6"
NAME = "INVIS_API_KEY"
ENV = {NAME: VALUE}


def _shown_as_nothing(cp: int) -> bool:
    char = chr(cp)
    if unicodedata.category(char) == "Cf":
        return True
    name = unicodedata.name(char, "")
    return "VARIATION SELECTOR" in name or name == "COMBINING GRAPHEME JOINER" or (
        "HANGUL" in name and name.endswith("FILLER"))


CLASS = [cp for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF and _shown_as_nothing(cp)]
# The reported ones and one of each kind, through every exit (the whole class is checked below).
EXAMPLES = [0xAD, 0x34F, 0x180E, 0x2061, 0x2063, 0xFE0F, 0x61C, 0x202E, 0x2066, 0x180B, 0xE0041, 0xE0100,
            0x3164, 0x1D173, 0x200B, 0xFEFF]


def _inside(cp: int) -> str:
    return VALUE[:8] + chr(cp) + VALUE[8:13] + chr(cp) + VALUE[13:]


@pytest.fixture(autouse=True)
def _known(monkeypatch):
    yield from watching(monkeypatch, NAME, VALUE)


def test_the_class_is_the_property_not_a_list():
    assert len(CLASS) > 300 and {0xAD, 0x34F, 0x180E, 0x61C, 0x202E, 0xFE0F, 0xE01EF} <= set(CLASS)


def test_every_invisible_character_inside_a_value_is_redacted():
    redact = known_secrets.redactor(ENV)
    missed = [hex(cp) for cp in CLASS if VALUE[:8] in redact(f"wandb key: {_inside(cp)} ok")]
    assert missed == []


def test_every_invisible_character_inside_a_value_is_refused_in_the_spec(tmp_path):
    path = tmp_path / "spec.yaml"
    passed = []
    for cp in CLASS:
        path.write_text(f"train:\n  num_epochs: 3\n# {_inside(cp)}\n", encoding="utf-8")
        try:
            spec_guards._read_spec(str(path))
        except Exception as exc:   # noqa: BLE001 - the refusal's class is asserted below
            assert VALUE not in str(exc) and NAME in str(exc) or "SECRET" in str(getattr(exc, "code", "")), exc
        else:
            passed.append(hex(cp))
    assert passed == []


@pytest.mark.parametrize("exit_name", sorted(EXITS))
@pytest.mark.parametrize("cp", EXAMPLES, ids=hex)
def test_no_exit_lets_a_value_with_an_invisible_character_out(cp, exit_name, tmp_path, capsys, monkeypatch):
    text = f"INFO key {_inside(cp)} done"
    out = EXITS[exit_name](text, tmp_path, capsys, monkeypatch)
    assert out and VALUE[:8] not in out and VALUE[-8:] not in out, (exit_name, out[:300])
