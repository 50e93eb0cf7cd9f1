"""Parts of a value (``tao_brev/secrets/withhold.py``): what is left where no whole form is.

A job's stdout and stderr reach ``docker logs`` as two streams merged line by line, in no
order the job controls: a value printed over two lines can come back with the other stream's
lines between its halves, and a line cap can cut a value in a form the bundle does not compute.
Any :data:`withhold.PART` consecutive characters of a known value in a line's reading withhold
that line; whole forms are still redacted in place, and lines without a part are shown.
"""

from __future__ import annotations

import quopri
import random
from urllib.parse import quote

import pytest

from tao_brev import logcap
from tao_brev.errors import TaoBrevError
from tao_brev.secrets import guard as known_secrets, taint, withhold
from tao_brev.secrets.forms import pattern_of
from tests.sim.leaky_job import forms

VALUE = "Xr7/Qm+Lk2&Vw9!Np4\u00f6Tz6Bc8Hd3Jf~"
NAME = "WANDB_API_KEY"
ENV = {NAME: VALUE}


@pytest.fixture(autouse=True)
def _known(monkeypatch):
    monkeypatch.setenv(NAME, VALUE)
    known_secrets.reset()
    yield
    known_secrets.reset()


def parts_shown(text: str, value: str = VALUE) -> list[str]:
    """Every PART-character run of the canonical value that the canonical text still holds."""
    key, shown = taint.canon(value), taint.canon(text)
    return [key[i:i + withhold.PART] for i in range(len(key) - withhold.PART + 1) if key[i:i + withhold.PART] in shown]


def _printed_lines() -> list[str]:
    return [line for how, text in forms(NAME, VALUE).items() for line in f"[{how}] {text}".split("\n")]


@pytest.mark.parametrize("seed", range(40))
def test_stdout_and_stderr_interleaved_any_way_leave_no_part_of_the_value(seed):
    rng = random.Random(seed)
    out, err, merged = _printed_lines(), _printed_lines(), []
    bias = rng.random()
    while out or err:
        merged.append((out if out and (not err or rng.random() < bias) else err).pop(0))
    text = "Epoch 1/3\n" + "\n".join(merged) + "\nExecution status: PASS\n"
    kept, _cut = logcap.bound(text, lines=400)
    shown = known_secrets.redactor()(kept)
    assert parts_shown(shown) == [], shown
    assert shown.startswith("Epoch 1/3\n") and shown.endswith("\nExecution status: PASS")


def test_a_value_split_with_another_line_between_withholds_both_halves_and_keeps_that_line():
    text = f"a\nkey: {VALUE[:9]}\nEpoch 2/3 done\n{VALUE[9:]}\nb"
    out = known_secrets.redactor()(text).split("\n")
    assert out[0] == "a" and out[2] == "Epoch 2/3 done" and out[4] == "b", out
    assert all(line.startswith(f"[tao-brev: withheld: this line held the value of {NAME} (8 or more") for line in (out[1], out[3]))


def test_a_line_the_instance_cut_inside_a_form_it_does_not_know_is_withheld():
    token = "tok"
    encoded = quopri.encodestring(VALUE.encode(), quotetabs=True).decode()   # Np4=C3=B6Tz6...
    cut_inside = encoded[encoded.index("=B6"):]                              # the cut left "=B6Tz6Bc8Hd3Jf~"
    text = f"Epoch 1/3\n{token}:cut:4000 {cut_inside} loss=0.25\nEpoch 2/3\n"
    kept, cut = logcap.bound(text, token=token)
    shown = known_secrets.redactor()(kept)
    assert cut.lines_cut == 1 and parts_shown(shown) == [], shown
    assert shown.split("\n")[1].startswith("[tao-brev: 4000 bytes cut] [tao-brev: withheld")


def test_a_line_the_instance_cut_inside_a_known_form_keeps_what_follows_the_value():
    token = "tok"
    text = f"{token}:cut:4000 {VALUE[12:]} loss=0.25\n"
    kept, _cut = logcap.bound(text, token=token)
    assert known_secrets.redactor()(kept) == "[tao-brev: 4000 bytes cut]  loss=0.25"


def test_whole_forms_are_redacted_in_place_and_text_without_a_part_is_untouched():
    redact = known_secrets.redactor()
    assert redact(f"key={VALUE} step 3") == "key=<redacted> step 3"
    assert redact("Epoch 1: 100%|##########| 25/25 [00:00<00:00, 2500.00it/s]") == \
        "Epoch 1: 100%|##########| 25/25 [00:00<00:00, 2500.00it/s]"
    assert redact(f"seven {VALUE[3:10]} of it") == f"seven {VALUE[3:10]} of it"   # PART - 1 characters
    assert redact(f"eight {VALUE[3:11]} of it").startswith("[tao-brev: withheld")


def test_a_part_is_found_in_a_reading_of_the_line_too():
    # URL-, escape-, HTML- or QP-decoded line; a base64 or hex run is decoded once it could spell the
    # shortest whole form (taint.examine), so a run shorter than that is read as written only
    for line in (f"GET /x?k={quote(VALUE[10:], safe='')} 200", f'"k": "{VALUE[10:]}"'.replace("\u00f6", "\\u00f6"),
                 "".join(f"&#{ord(c)};" for c in VALUE[10:])):
        assert known_secrets.redactor()(line).startswith("[tao-brev: withheld"), line


def test_a_value_no_longer_than_a_part_has_no_parts_but_itself():
    m = withhold.Matcher({"Ab3$Cd4%": NAME}, pattern_of,
                         {"Ab3$Cd4%": NAME})
    assert m.part_in("xAb3$Cd4%x") is None and m.hit("xAb3$Cd4%x") == (NAME, "as written")


def test_parts_inside_an_id_the_bundle_minted_count_for_nothing():
    m = withhold.Matcher({}, pattern_of,
                         {"x-visual_changenet-train-0a1b2c-y": "T"}, exempt=("visual_changenet-train-0a1b2c",))
    assert m.part_in("docker logs visual_changenet-train-0a1b2c") is None
    assert m.part_in("x-visual_ch") == "T"   # a part reaching out of the id still counts


def test_the_users_own_input_is_refused_for_whole_values_only():
    known_secrets.refuse(f"echo {VALUE[:12]}", "a command", ENV)   # a part of the value: not refused
    with pytest.raises(TaoBrevError):
        known_secrets.refuse(f"echo {VALUE}", "a command", ENV)
