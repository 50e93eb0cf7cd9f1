"""Taint (``tao_brev/secrets/taint.py`` behind ``secrets.search``): every encoding x every exit.

Encodings: the forms a leaking job prints (``tests/sim/leaky_job.py``, the red team's 15 and
more) and others no list of forms holds (full-width letters, decimal byte lists, ``%u``
escapes, JS ``\\u{..}``, HTML entities twice, base64url of UTF-16LE, upper-case hex with
blanks, CRLF-split values, JSON four deep). Exits: the answer on stdout, stderr (``say``),
the saved log, the sidecar, a record, the hash cache. A hit withholds the line (or redacts
the form); ordinary ML output passes unchanged.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from tao_brev import cli
from tao_brev.secrets import guard as known_secrets, redact, search, taint, withhold
from tests.sim.leaky_job import forms

VALUE = "Qx7/Hm+Lk2&Vw9!Np4\u00f6Tz6Bc8Hd3Jf~"
NAME = "MIRROR_API_KEY"
ENV = {NAME: VALUE}


def _other_forms(value: str) -> dict[str, str]:
    raw = value.encode()
    return {
        "fullwidth": "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in value),
        "decimal-bytes": str(list(raw)),
        "percent-u": "".join(f"%u{ord(c):04X}" for c in value),
        "js-brace": "".join(f"\\u{{{ord(c):x}}}" for c in value),
        "html-twice": "".join(f"&amp;#{ord(c)};" for c in value),
        "base64url-utf16le": base64.urlsafe_b64encode(value.encode("utf-16-le")).decode().rstrip("="),
        "hex-upper-blanks": " ".join(f"{b:02X}" for b in raw),
        "crlf-split": value[:11] + "\r\n" + value[11:],
        "json-4-deep": json.dumps(json.dumps(json.dumps(json.dumps(value)))),
        "octal": "".join(f"\\{b:03o}" for b in raw),
        "url-plus-twice": quote(quote(value.replace("/", " "))).replace("%2520", "+"),
        "zero-width": "\u200b".join(value),
        "base64-of-url": base64.b64encode(quote(value, safe="").encode()).decode(),
        "perl-brace-hex": "".join(f"\\x{{{ord(c):x}}}" for c in value),
        "unicode-code-points": " ".join(f"U+{ord(c):04X}" for c in value),
        "base85": base64.b85encode(raw).decode(),
        "ascii85": base64.a85encode(raw).decode(),
    }


ENCODINGS = {**forms(NAME, VALUE), **_other_forms(VALUE)}
ENCODINGS.pop("url-plus-twice")   # the blank-for-slash variant is not the value


def pieces(text: str) -> list[str]:
    """Parts of a leaked text that hold a run of the value: none may survive."""
    return [p for p in text.replace("\r", "\n").replace("\x1b", "\n").split("\n") if len(p.strip()) >= 8]


@pytest.fixture(autouse=True)
def _clean():
    known_secrets.reset()
    yield
    known_secrets.reset()


@pytest.mark.parametrize("how", sorted(ENCODINGS))
def test_every_encoding_is_found_by_the_normaliser(how):
    text = f"INFO step 3 {ENCODINGS[how]} done"
    assert known_secrets.matcher(ENV).hit(text) is not None, how
    out = known_secrets.redactor(ENV)(text)
    assert [p for p in pieces(ENCODINGS[how]) if p in out] == [], out
    assert VALUE not in out and VALUE[:10] not in taint.canon(out)


def _exit_stdout(text, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(NAME, VALUE)
    cli.emit({"ok": True, "logs": text, "progress": {"kpi": {f"acc_{text}": 0.5}}})
    return capsys.readouterr().out


def _exit_stderr(text, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(NAME, VALUE)
    cli.say(text)
    return capsys.readouterr().err


def _sidecar(tmp_path, monkeypatch):
    from tao_brev.secrets import proof as env_proof
    from tao_brev.sidecar import SidecarStore

    monkeypatch.setenv(NAME, VALUE)
    store = SidecarStore(tmp_path / "state")
    store.update("a-b-123456", instance="box", env_names=[NAME],
                 env_proof=env_proof.proof(tmp_path / "state", ENV, [NAME]))
    return store


def _exit_saved_log(text, tmp_path, capsys, monkeypatch):
    store = _sidecar(tmp_path, monkeypatch)
    return store.logs_path("a-b-123456").read_text() if store.save_logs("a-b-123456", f"line\n{text}\nend\n") else ""


def _exit_sidecar(text, tmp_path, capsys, monkeypatch):
    store = _sidecar(tmp_path, monkeypatch)
    store.update("a-b-123456", final_progress={"message": text, "kpi": {text: 1.0}})
    return store.path("a-b-123456").read_text()


def _exit_record(text, tmp_path, capsys, monkeypatch):
    from tao_brev.records import RecordStore

    monkeypatch.setenv(NAME, VALUE)
    store = RecordStore(tmp_path / "state")
    record = store.open(image="i", network_arch="a", action="t", storage_tier="A", results_root="/r")
    store.mark(record["id"], "RUNNING", message=text)
    return store.path(record["id"]).read_text()


EXITS = {"stdout": _exit_stdout, "stderr": _exit_stderr, "saved-log": _exit_saved_log, "sidecar": _exit_sidecar,
         "record": _exit_record}


@pytest.mark.parametrize("exit_name", sorted(EXITS))
@pytest.mark.parametrize("how", sorted(ENCODINGS))
def test_no_encoding_leaves_by_any_exit(how, exit_name, tmp_path, capsys, monkeypatch):
    try:
        out = EXITS[exit_name](ENCODINGS[how], tmp_path, capsys, monkeypatch)
    except TypeError as exc:   # an exit whose API this table does not know: a test bug, not a pass
        pytest.fail(f"{exit_name}: {exc}")
    assert out, exit_name
    leaked = [p for p in pieces(ENCODINGS[how]) if p in out]
    assert leaked == [] and VALUE not in out, (exit_name, how, out[:400])


ORDINARY = [
    "Epoch 3/10: 100%|##########| 1250/1250 [02:13<00:00,  9.36it/s, loss=0.0123, v_num=0]",
    json.dumps({"date": "12/1/2026", "time": "21:4:53", "status": "RUNNING", "verbosity": "INFO",
                "kpi": {"val_loss": 0.25, "mAP@0.5": 0.61}, "message": "Training loop in progress"}),
    "sha256 3f786850e387550fdab836ed7e6dc881de23001b1f2c8a5d7d8f4a2c1e0b9a87  model.pth",
    "Loading checkpoint from /results/train/model_epoch_009_step_12500.pth (base64 cfg: eyJhIjogMX0=)",
    "\x1b[32mINFO\x1b[0m  url=https://example.com/a%20b?q=1&x=2  &lt;ok&gt; \\u0041\\x42",
    "de:ad:be:ef:00:11:22:33:44:55 visual_changenet-train-1a2b3c 2026-12-01T21:41:53Z",
]


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_output_passes_unchanged(line):
    assert known_secrets.redactor(ENV)(line) == line
    assert known_secrets.matcher(ENV).hit(line) is None


def test_a_hit_withholds_only_its_line_and_names_the_variable():
    text = "\n".join(["Epoch 1/2", f"[go] {ENCODINGS['go-json']}", "Epoch 2/2"])
    out = known_secrets.redactor(ENV)(text).split("\n")
    assert out[0] == "Epoch 1/2" and out[2] == "Epoch 2/2"
    assert out[1].startswith("[tao-brev: withheld: this line held the value of MIRROR_API_KEY (escapes decoded")


def test_a_value_split_over_two_lines_withholds_both():
    text = f"a\nkey: {VALUE[:9]}\n{VALUE[9:]}\nb"   # each line holds a part (8+ characters)
    out = known_secrets.redactor(ENV)(text).split("\n")
    assert out[0] == "a" and out[-1] == "b" and all(line.startswith("[tao-brev: withheld") for line in out[1:3]), out
    text = f"a\nkey: {VALUE[:6]}\n{VALUE[6:12]}\nb"   # neither does: the pair does
    out = known_secrets.redactor(ENV)(text).split("\n")
    assert out[0] == "a" and out[-1] == "b" and "across lines" in out[1] and out[1] == out[2], out


def test_a_value_spread_over_many_lines_withholds_the_text():
    text = "\n".join(VALUE[i:i + 3] for i in range(0, len(VALUE), 3))
    out = known_secrets.redactor(ENV)(text)
    assert out.startswith("[tao-brev: withheld") and "\n" not in out


def test_forms_are_still_redacted_in_place_and_the_line_kept():
    out = known_secrets.redactor(ENV)(f"url={quote(VALUE, safe='')} ok")
    assert out == "url=<redacted> ok"


def test_identifiers_are_refused_in_decoded_forms_too():
    with pytest.raises(Exception) as err:
        known_secrets.refuse_in_identifiers({"--bucket": ENCODINGS["hex-colons"]}, ENV)
    assert err.value.code == "SECRET_IN_IDENTIFIER" and NAME in err.value.message
    assert VALUE not in err.value.message
    known_secrets.refuse_in_identifiers({"--bucket": "my-bucket-01"}, ENV)


def test_find_decodes_only_when_asked():
    text = f"x {ENCODINGS['printf-q']} y"
    assert known_secrets.find(text, ENV) == []
    hits = known_secrets.find(f"a\n{text}", ENV, decoded=True)
    assert [(n, line) for n, _how, line in hits] == [(NAME, 2)] and hits[0][1].endswith("once decoded")
    split = known_secrets.find(f"{VALUE[:12]}\n{VALUE[12:]}", ENV, decoded=True)
    assert split[0][0] == NAME and split[0][2] == 1 and "across lines" in split[0][1]
    spread = known_secrets.find("\n".join(VALUE[i:i + 4] for i in range(0, len(VALUE), 4)), ENV, decoded=True)
    assert spread == [(NAME, "as written, across lines", 1)] or spread[0][1].endswith("across lines")


def test_the_spec_guard_finds_decoded_forms_in_parsed_strings():
    wrapped = base64.encodebytes(b"pre" + VALUE.encode() * 2).decode()
    for data in ({"train": {"note": wrapped}}, {"cfg": ":".join(f"{b:02x}" for b in VALUE.encode())},
                 {"k": base64.b64encode(VALUE.encode("utf-16-le")).decode()}):
        hits = known_secrets.find_parsed(data, ENV)
        assert hits and hits[0][0] == NAME, data
    assert known_secrets.find_parsed({"train": {"num_epochs": 3, "note": "plain words here"}}, ENV) == []


def test_no_value_known_changes_nothing():
    assert known_secrets.matcher({}) is None
    assert known_secrets.redactor({})(ENCODINGS["go-json"]) == ENCODINGS["go-json"]


def test_short_texts_and_texts_without_triggers_skip_the_normaliser(monkeypatch):
    calls = []
    monkeypatch.setattr(withhold, "withhold_lines", lambda text, m, note=withhold.NOTE, needs=None: calls.append(text) or text)
    redactor = known_secrets.redactor(ENV)
    assert redactor("short") == "short" and redactor("plain.ident.v1") == "plain.ident.v1"
    assert calls == []
    spaced = "a b c d e f g h i j k l m n o p q r s t u v w x y z"
    redactor(spaced)
    assert calls == [spaced]


def test_strip_terminal_removes_escapes_and_controls_keeps_lines_and_tabs():
    assert taint.strip_terminal("a\x1b[1;31mb\x1b[0m\tc\n\x1b]0;title\x07d\x00e\x9bKf\x1b(Bg\r\n") == "ab\tc\ndef" \
        "g\r\n"


def test_views_are_bounded_and_dedup():
    views = taint.views(" ".join(base64.b64encode(bytes([i]) * 30).decode() for i in range(200)))
    assert len(views) <= taint.MAX_VIEWS
    assert len({v for _h, v in views}) == len(views)


def test_matcher_uses_find_for_long_forms_and_long_texts():
    long_value = "Zq" + "k9/" * 200 + "end"
    m = known_secrets.matcher({NAME: long_value})
    assert m.hit("x" * 2000 + long_value + "y") is not None
    assert m.hit("x" * 2000) is None
    assert m.hit(("p" * 30 + " ") * 100 + quote(long_value, safe="-_.!~*'()")) is not None


def test_code_points_and_bad_ones():
    assert taint._chr("41") == "A" and taint._chr("110000") == ""
    views = dict((how, text) for how, text in taint.views("U+0041 U+0042 U+0043 U+0044 U+0045 U+0046 U+0047 U+0048"))
    assert views["code points decoded"] == "ABCDEFGH"


def test_backslash_layers_decode_surrogate_pairs_and_bad_escapes():
    assert taint._backslash_once("\\ud83d\\ude00 \\u{1F600} \\x41\\102\\n\\q") == "\U0001F600 \U0001F600 AB\nq"
    assert taint._backslash_once("\\u{110000}") == ""
    assert taint._as_bytes_repr("\xc3\xb6") == "\u00f6" and taint._as_bytes_repr("abc") is None
    assert taint._as_bytes_repr("\u00f6\u4e00") is None
    assert len(taint._backslashes("\\\\" * 300)[0]) <= 2 * taint.MAX_BACKSLASH_DEPTH


def test_quoted_printable_and_hex_and_decimal_readings():
    assert taint._quoted_printable("no equals") is None
    assert taint._quoted_printable("a=3Db=\nc") == "a=bc"
    assert "AB" in taint._hex_runs("0x41,0x42,0x43,0x44,0x45,0x46,0x47,0x48")[0]
    assert "ABCDEFGH" in taint._hex_runs("65, 66, 67, 68, 69, 70, 71, 72")[0]
    assert not any("BCDEFGH" in r for r in taint._hex_runs("300, 66, 67, 68, 69, 70, 71, 72"))   # not bytes
    assert taint._readings([]) == []


def test_base64_runs_at_every_offset():
    text = "zz" + base64.b64encode(b"hello world value here").decode()
    assert any("hello world value here" in r for r in taint._base64_runs(text))
    assert taint._base64_runs("short") == []


def test_keys_of_answers_are_redacted(monkeypatch, capsys):
    monkeypatch.setenv(NAME, VALUE)
    cli.emit({"ok": True, "progress": {"kpi": {f"acc_{VALUE}": 0.5, "plain": 1}}})
    out = json.loads(capsys.readouterr().out)
    assert list(out["progress"]["kpi"]) == ["acc_<redacted>", "plain"]



SUBMIT_REFUSED = [
    # (id, spec text added, overrides, extra env): forms only a decoder finds, refused before anything is sent
    ("spec-wrapped-base64-block", "note: |\n" + "".join(
        f"  {line}\n" for line in base64.encodebytes(b"pre-" + VALUE.encode() * 3).decode().splitlines()), [], {}),
    ("spec-colon-hex", "mirror_hex: " + ":".join(f"{b:02x}" for b in VALUE.encode()) + "\n", [], {}),
    ("override-utf16le-base64", "", [f"train.note={base64.b64encode(VALUE.encode('utf-16-le')).decode()}"], {}),
    ("override-printf-q", "", [f"train.note=x{ENCODINGS['printf-q']}"], {}),
    ("spec-upper-json-escapes", 'note: "' + json.dumps(VALUE)[1:-1].replace("\\u00f6", "\\\\U00F6") + '"\n', [], {}),
]


@pytest.mark.parametrize("case_id, extra, overrides, env_extra", SUBMIT_REFUSED, ids=[c[0] for c in SUBMIT_REFUSED])
def test_submit_refuses_a_spec_or_override_holding_a_decoded_value(state_env, tmp_path, case_id, extra, overrides,
                                                                   env_extra):
    from conftest import EXAMPLE_SPEC, run_script

    spec = tmp_path / "spec.yaml"
    spec.write_text(EXAMPLE_SPEC.read_text() + "\n" + extra)
    res = run_script("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
                     "visual_changenet", "--action", "train", "--spec", str(spec), "--env", NAME, "--dry-run",
                     "--no-spec-check",   # keys TAO's schema lacks (note, mirror_hex): the secret guards run first
                     *(["--", *overrides] if overrides else []), env={**state_env, NAME: VALUE, **env_extra})
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_COMMAND", res
    assert NAME in res.json["error"]["message"] and VALUE not in res.stdout + res.stderr
    assert not (Path(state_env["TAO_STATE_DIR"]) / "jobs").exists()


def test_short_base64_and_hex_runs_are_not_decoded_for_a_longer_value():
    assert taint._base64_runs("dmlzdWFsX2NoYW5nZW5ldA", shortest=27) == []      # 22 < 36 characters
    assert taint._base64_runs("dmlzdWFsX2NoYW5nZW5ldA", shortest=8) != []
    assert taint._hex_runs("de:ad:be:ef:00:11:22:33", shortest=27) == []
    assert search._taint_trigger(27).search("visual_changenet-train-1a2b3c") is None
    assert search._taint_trigger(27).search("2026-12-01T21:41:53Z") is None
    assert search._taint_trigger(8).search("visual_changenet") is not None
    assert search._taint_trigger(8).search("de:ad:be:ef:00:11:22:33") is not None


def test_lines_the_caller_says_need_no_decoding_are_not_decoded():
    m = known_secrets.matcher(ENV)
    text = f"plain\n[go] {ENCODINGS['go-json']}"
    assert withhold.withhold_lines(text, m, needs=lambda line: False).startswith("[tao-brev: withheld")   # whole text
    assert withhold.withhold_lines(text, m, needs=lambda line: True).startswith("plain\n[tao-brev: withheld")
