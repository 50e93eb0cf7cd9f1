"""Parts of a value (``tao_brev/secrets/withhold.py``): what is left where no whole form is.

A job's stdout and stderr reach ``docker logs`` as two streams merged line by line, in no
order the job controls: a value printed over two lines can come back with the other stream's
lines between its halves, and a line cap can cut a value in a form the bundle does not compute.
Any :data:`withhold.PART` consecutive characters of a known value in a line's reading withhold
that line; whole forms are still redacted in place, and lines without a part are shown.
"""

from __future__ import annotations

import base64
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
    # URL-, escape- or HTML-decoded line (base64 and hex runs: test_parts_the_first_reviewers_found...)
    for line in (f"GET /x?k={quote(VALUE[10:], safe='')} 200", f'"k": "{VALUE[10:]}"'.replace("\u00f6", "\\u00f6"),
                 "".join(f"&#{ord(c)};" for c in VALUE[10:])):
        assert known_secrets.redactor()(line).startswith("[tao-brev: withheld"), line


def test_a_value_no_longer_than_a_part_has_no_parts_but_itself():
    m = withhold.Matcher({"Ab3$Cd4%": NAME}, pattern_of, {"Ab3$Cd4%": NAME})
    assert m.part_in("xAb3$Cd4%x") is None and m.hit("xAb3$Cd4%x") == (NAME, "as written")


def test_parts_inside_an_id_the_bundle_minted_count_for_nothing():
    m = withhold.Matcher({}, pattern_of, {"x-visual_changenet-train-0a1b2c-y": "T"},
                         exempt=("visual_changenet-train-0a1b2c",))
    assert m.part_in("docker logs visual_changenet-train-0a1b2c") is None
    assert m.part_in("x-visual_ch") == "T"   # a part reaching out of the id still counts


def test_the_users_own_input_is_refused_for_whole_values_only():
    known_secrets.refuse(f"echo {VALUE[:12]}", "a command", ENV)   # a part of the value: not refused
    with pytest.raises(TaoBrevError):
        known_secrets.refuse(f"echo {VALUE}", "a command", ENV)


TOKEN = "k9Qz3LmT7vRx2PaW8nBy5HcD4jFs6GuE1oKi0XtZ"   # a 40-character random token


@pytest.mark.parametrize("how, text", [
    ("7 characters a line", "\n".join(TOKEN[i:i + 7] for i in range(0, 35, 7))),
    ("7 a line, CRLF", "\r\n".join(TOKEN[i:i + 7] for i in range(0, 35, 7))),
    ("two halves of 4", "a k9Qz\n3LmT b"),
    ("upper-cased", "key " + TOKEN[:20].upper()),
    ("lower-cased", "key " + TOKEN[:20].lower()),
    ("underlined mark by mark", "key " + "\u0332".join(TOKEN)),
    ("enclosed mark by mark", "key " + "\u20dd".join(TOKEN)),
    ("braille blanks between", "key " + "\u2800".join(TOKEN)),
    ("base64 of 30", "x " + base64.b64encode(TOKEN[:30].encode()).decode()),
    ("base64 of UTF-16LE of 15", "x " + base64.b64encode(TOKEN[:15].encode("utf-16-le")).decode()),
    ("hex of 39", "sha " + TOKEN[:39].encode().hex()),
    ("decimal bytes of 39", "x " + str(list(TOKEN[:39].encode()))),
])
def test_parts_the_first_reviewers_found_are_withheld(monkeypatch, how, text):
    monkeypatch.setenv(NAME, TOKEN)
    shown = known_secrets.redactor()(text)
    assert parts_shown(shown.lower(), TOKEN.lower()) == [], (how, shown)


def test_a_hex_form_cut_by_the_instance_is_withheld(monkeypatch):
    monkeypatch.setenv(NAME, TOKEN)
    tail = ":".join(f"{b:02x}" for b in TOKEN.encode())[60:]   # leaky_job's hex-colons form, cut
    kept, _cut = logcap.bound(f"tok:cut:4000 {tail} loss=0.2\nEpoch 2/3\n", token="tok")
    assert known_secrets.redactor()(kept).split("\n") == [
        "[tao-brev: 4000 bytes cut] [tao-brev: withheld: this line held the value of WANDB_API_KEY "
        "(8 or more of its characters, hex-decoded); the rest of the output is shown]", "Epoch 2/3"]


def test_ordinary_training_lines_are_shown_beside_a_random_token(monkeypatch):
    monkeypatch.setenv(NAME, TOKEN)
    lines = ["Epoch 3: 100%|\u2588\u2588\u2588\u2588\u2588\u2588| 25/25 [00:01<00:00, 19.9it/s, loss=0.231, v_num=1]",
             "2026-12-02 15:59:26,566 - [TAO Toolkit] - INFO - Saved /results/train/dino_model_epoch_003.pth",
             "sha256 9f2c4e1d0b8a7c6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1",
             "uuid 3f1e2d4c-5b6a-4789-8a0b-1c2d3e4f5a6b  train.yaml: model.backbone=vit_large_dinov2"]
    assert known_secrets.redactor()("\n".join(lines)) == "\n".join(lines)


def test_a_part_is_eight_characters_from_the_values_first_to_its_last(monkeypatch):
    monkeypatch.setenv(NAME, TOKEN)
    redact = known_secrets.redactor()
    for start in (0, len(TOKEN) - withhold.PART):
        part = TOKEN[start:start + withhold.PART]
        assert redact(part).startswith("[tao-brev: withheld"), part              # the part alone, 8 characters
        assert redact(f"x {part} y").startswith("[tao-brev: withheld"), part
    assert redact(f"x {TOKEN[-7:]} y") == f"x {TOKEN[-7:]} y"                    # 7 of its end
    assert redact(f"x {TOKEN[:7]} y") == f"x {TOKEN[:7]} y"                      # 7 of its start


def test_the_notes_name_the_variable_and_say_across_lines(monkeypatch):
    monkeypatch.setenv(NAME, TOKEN)
    redact = known_secrets.redactor()
    pair = "[tao-brev: withheld: this line held the value of WANDB_API_KEY (8 or more of its characters, " \
           "as written, across lines); the rest of the output is shown]"
    assert redact(f"a\nb\n{TOKEN[:5]}\n{TOKEN[5:10]}").split("\n") == ["a", "b", pair, pair]   # the last two lines
    run = "\n".join(TOKEN[i:i + 3] for i in range(0, 12, 3))   # 3 characters a line: no pair holds 8
    assert redact(f"a\n{run}\nb") == ("[tao-brev: withheld: this line held the value of WANDB_API_KEY (8 or more "
                                      "of its characters, as written, across lines); the rest of the output is shown]")


def test_a_short_value_beside_a_long_one_leaves_the_long_ones_parts():
    m = withhold.Matcher({}, pattern_of, {"Ab3$Cd4%": "SHORT", TOKEN: "LONG"})
    assert m.part_in(f"x {TOKEN[10:18]} y") == "LONG" and m.part_in("x Ab3$Cd4% y") is None


def test_a_matcher_of_values_with_no_form_left_finds_nothing_even_in_a_text_too_long_to_read():
    m = withhold.Matcher({" " * 8: "BLANKS"}, pattern_of, {" " * 8: "BLANKS"})   # blanks: nothing to compare
    assert m.hit("x" * (taint.MAX_VIEW_CHARS + 1)) is None
