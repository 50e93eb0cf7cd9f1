"""The normaliser's caps fail closed (``tao_brev/secrets/taint.py``): a text whose readings the
check could not examine all of (too many, too long, escapes nested deeper than it decodes) is
withheld or refused, never passed. Table: attacks that exhaust a cap before the reading that
holds the value x every exit (answer redactor, saved-log withholding, outbound guard, parsed
spec guard, file names). Plus the decoders' own caps (a decimal list with a number above 255,
Latin-1 bytes past the first 256 of a run), which hid a value instead of ending a run.
"""

from __future__ import annotations

import base64
import html
import json
from urllib.parse import quote

import pytest

from tao_brev.errors import TaoBrevError
from tao_brev.secrets import file_names, guard as known_secrets, taint, withhold

VALUE = "Rb8/Kt+Mw3Zp7Qs1Vx5Lc9Hn2Jd4"
LATIN = "Gr\u00fc\u00dfe-Kt8Mw3Zp7Qs1Vx5-\u00e9t\u00e9"
NAME = "BUDGET_API_KEY"
ENV = {NAME: VALUE}


def _entities(value: str) -> str:
    return "".join(f"&#{ord(c)};" for c in value)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


# Fragments that each make a decoder give one more reading (so the budget is spent on them).
_NOISE = " ".join(["\\\\" * 300, "%2541%2542", "a+b%41", "&amp;amp;", "U+0041 U+0042", "=41=42=43",
                   "de:ad:be:ef:de:ad:be:ef:00:11", "\uff41\uff42\uff43", "\\u0041\\x41\\101"]
                  + [_b64(f"noise fragment number {i} &amp; more") for i in range(40)])

ATTACKS = {
    # the reviewer's case: budget spent on noise, then base64 of an HTML-entity-encoded value
    "noise, then base64 of entities": _NOISE + " " + _b64(_entities(VALUE)),
    "noise, then base64 of URL-encoded": _NOISE + " " + _b64(quote(VALUE, safe="")),
    "noise, then hex of entities": _NOISE + " " + _entities(VALUE).encode().hex(),
    "noise after the value's base64": _b64(_entities(VALUE)) + " " + _NOISE,
    # past the size cap: the value's decoder-only form sits after MAX_VIEW_CHARS characters
    "base64 of entities past the size cap": "x " * (taint.MAX_VIEW_CHARS // 2 + 8) + _b64(_entities(VALUE)),
    "URL-encoded past the size cap": "%20" * (taint.MAX_VIEW_CHARS // 3 + 8) + quote(VALUE, safe=""),
    # deeper than the backslash decoder goes: JSON inside JSON, more layers than it decodes
    "JSON nested past the depth cap": (lambda t: [t := json.dumps(t) for _ in range(taint.MAX_BACKSLASH_DEPTH + 3)][-1])(
        "".join(f"\\u{ord(c):04x}" for c in VALUE)),
}

SIBLINGS = {   # decoder caps that hid a run instead of ending it
    "decimal list after a number above 255": "[999, " + ", ".join(str(b) for b in VALUE.encode()) + "]",
    "decimal list ending in a number above 255": "[" + ", ".join(str(b) for b in VALUE.encode()) + ", 4096]",
}
LATIN_SIBLINGS = {
    "Latin-1 hex past 256 ASCII bytes of the same run": "41" * 300 + LATIN.encode("latin-1").hex(),
    "Latin-1 base64 past 256 ASCII bytes of the same run": base64.b64encode(b"A" * 300 + LATIN.encode("latin-1")).decode(),
}


def _leaks(text: str, value: str) -> bool:
    return value in text or value[:12] in text


@pytest.mark.parametrize("how", sorted(ATTACKS))
def test_attack_is_not_passed_by_the_matcher(how):
    assert known_secrets.matcher(ENV).hit(ATTACKS[how]) is not None, how


@pytest.mark.parametrize("how", sorted(ATTACKS))
def test_attack_is_withheld_in_answers_and_saved_logs(how):
    text = "epoch 1 loss 0.5\n" + ATTACKS[how] + "\nepoch 2 loss 0.4"
    out = known_secrets.redactor(ENV)(text)
    assert ATTACKS[how] not in out and "[tao-brev: withheld" in out, how


@pytest.mark.parametrize("how", sorted(ATTACKS))
def test_attack_is_refused_outbound_and_in_a_parsed_spec(how):
    assert known_secrets.find(ATTACKS[how], ENV, decoded=True), how
    if len(ATTACKS[how]) <= 65536:   # a spec is at most 64 KiB
        with pytest.raises(TaoBrevError) as exc:
            known_secrets.refuse_parsed({"train": {"note": ATTACKS[how]}}, "spec", ENV)
        assert VALUE not in json.dumps(exc.value.to_json()) if hasattr(exc.value, "to_json") else True


@pytest.mark.parametrize("how", sorted(ATTACKS))
def test_attack_as_a_file_name_is_refused(how):
    name = ATTACKS[how][:4000] if len(ATTACKS[how]) > taint.MAX_VIEW_CHARS else ATTACKS[how]
    if name == ATTACKS[how] or known_secrets.matcher(ENV).hit(name) is not None:
        with pytest.raises(TaoBrevError):
            file_names.refuse_names(["a.jpg", name, "b.jpg"], "input data", ENV)


@pytest.mark.parametrize("how", sorted(SIBLINGS))
def test_decimal_runs_split_at_a_number_above_255(how):
    assert known_secrets.matcher(ENV).hit(SIBLINGS[how]) is not None
    out = known_secrets.redactor(ENV)(SIBLINGS[how])
    assert "[tao-brev: withheld" in out


@pytest.mark.parametrize("how", sorted(LATIN_SIBLINGS))
def test_latin1_readings_look_at_every_byte(how):
    env = {NAME: LATIN}
    assert known_secrets.matcher(env).hit(LATIN_SIBLINGS[how]) is not None
    assert "[tao-brev: withheld" in known_secrets.redactor(env)(LATIN_SIBLINGS[how])


def test_unchecked_is_a_hit_with_a_reason_and_ordinary_text_is_complete():
    views, why = taint.examine(ATTACKS["noise, then base64 of entities"])
    assert why and len(views) <= taint.MAX_VIEWS
    assert taint.examine("x" * (taint.MAX_VIEW_CHARS + 1))[1].startswith("longer than")
    assert taint.examine(_NOISE.replace("\\\\" * 300, "\\\\" * 32))[1] is None   # within every cap


def test_the_readings_cap_fails_closed(monkeypatch):
    text = _NOISE.replace("\\\\" * 300, "\\\\" * 32) + " " + _b64(_entities(VALUE))
    assert known_secrets.matcher(ENV).hit(text)[0] == NAME   # all readings examined: the value is found
    monkeypatch.setattr(taint, "MAX_VIEWS", 40)
    views, why = taint.examine(text)
    assert len(views) == 40 and "readings" in why
    assert known_secrets.matcher(ENV).hit(text) == (withhold.UNCHECKED, why)
    assert known_secrets.redactor(ENV)("ok line\n" + text).startswith("ok line\n[tao-brev: withheld")
    hit = known_secrets.matcher(ENV).hit("x " * (taint.MAX_VIEW_CHARS // 2 + 8))
    assert hit is not None and hit[0] == withhold.UNCHECKED
    for ordinary in ("epoch 3/80: loss=0.4312 acc=0.91 lr=1e-4 [00:12<01:40, 7.2it/s]",
                     'C:\\data\\train\\', '{"msg": "saved \\"model.pth\\" to /results/train"}',
                     "\\\\" * 20 + " path", "=" * 80, "x" * 4096):
        assert taint.examine(ordinary)[1] is None, ordinary
        assert known_secrets.matcher(ENV).hit(ordinary) is None, ordinary


def test_withheld_note_for_an_unchecked_line_names_no_value_and_keeps_the_rest():
    text = "epoch 1\n" + ATTACKS["noise, then base64 of entities"] + "\nepoch 2"
    out = known_secrets.redactor(ENV)(text).split("\n")
    assert out[0] == "epoch 1" and out[2] == "epoch 2" and out[1].startswith("[tao-brev: withheld")


def test_backslash_layers_report_when_more_are_left():
    layers, complete = taint._backslashes("\\\\" * 300)
    assert len(layers) <= 2 * taint.MAX_BACKSLASH_DEPTH and not complete
    assert taint._backslashes("a\\nb")[1] and taint._backslashes("trailing\\")[1]
    assert taint._backslashes("no escapes") == ([], True)


def test_entities_helper_is_not_the_value():
    assert html.unescape(_entities(VALUE)) == VALUE and VALUE not in _entities(VALUE)


# -- file names: every one checked, however many (tao_brev/secrets/file_names.py) -------------

NAME_FORMS = {"verbatim": VALUE, "base64 of entities": _b64(_entities(VALUE)),
              "URL-encoded": quote(VALUE, safe=""), "hex": VALUE.encode().hex()}


def _many_names(tainted: str, before_bytes: int) -> list[str]:
    names = [f"images/train/{i:07d}_frame_with_a_long_descriptive_name.jpg" for i in range(before_bytes // 50 + 1)]
    return [*names, f"labels/{tainted.replace('/', '_')}.txt", "z/last.txt"]


@pytest.mark.parametrize("form", sorted(NAME_FORMS))
def test_a_tainted_name_after_more_names_than_the_normaliser_reads_is_refused_and_never_kept(monkeypatch, form):
    """The normaliser's size cap scaled down (1 MiB of names costs ~20 s a search on 2 cores):
    the same code path as a tainted name after 1 MiB of names."""
    monkeypatch.setattr(taint, "MAX_VIEW_CHARS", 16384)
    monkeypatch.setattr(file_names, "CHUNK_CHARS", 4096)
    names = _many_names(NAME_FORMS[form].replace("/", "_") if form == "verbatim" else NAME_FORMS[form], 40_000)
    env = {NAME: VALUE.replace("/", "_")} if form == "verbatim" else ENV
    assert sum(map(len, names)) > 2 * taint.MAX_VIEW_CHARS
    with pytest.raises(TaoBrevError) as err:
        file_names.refuse_names(names, "input data", env)
    assert err.value.code == "SECRET_IN_IDENTIFIER" and f"file {len(names) - 1} of {len(names)}" in err.value.message
    stored = file_names.stored_names(names, env)
    assert stored[-2].startswith(file_names.DIGEST_PREFIX) and stored[:-2] == names[:-2] and stored[-1] == names[-1]
    assert names[-2] not in file_names.without_tainted({n: 1 for n in names}, env)
    assert file_names.tainted(names, env) == [names[-2]]


def test_chunks_cover_every_name_once_and_a_name_longer_than_a_chunk_alone():
    names = ["a" * 10, None, "b" * file_names.CHUNK_CHARS, "c", "d" * (file_names.CHUNK_CHARS // 2),
             "e" * (file_names.CHUNK_CHARS // 2)]
    runs = list(file_names._chunks(names))
    assert sorted(i for r in runs for i in r) == [0, 2, 3, 4, 5]
    assert [2] in runs and all(sum(len(names[i]) + 1 for i in r) <= file_names.CHUNK_CHARS or len(r) == 1
                               for r in runs)


def test_a_name_the_normaliser_cannot_examine_whole_counts_as_tainted():
    deep = "x" * 20
    for _ in range(taint.MAX_BACKSLASH_DEPTH + 3):
        deep = json.dumps(deep)
    assert file_names.tainted(["ok.jpg", deep], ENV) == [deep]
    assert file_names.stored_name(deep, ENV).startswith(file_names.DIGEST_PREFIX)


def test_results_archive_member_names_holding_a_value_are_kept_as_digests(tmp_path):
    import io
    import tarfile

    from tao_brev.secrets import archive_names

    src, out = tmp_path / "r.tar.gz", tmp_path / "clean.tar.gz"
    bad = f"ckpt_{VALUE.replace('/', '_')}.pth"
    env = {NAME: VALUE.replace("/", "_")}
    with tarfile.open(src, "w:gz") as tar:
        for name, data in ((f"train/{bad}", b"weights"), ("train/ok.pth", b"ok"),
                           *((f"train/f{i}.txt", b"x") for i in range(50))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("train/latest.pth")
        link.type, link.linkname = tarfile.SYMTYPE, bad
        tar.addfile(link)
    assert archive_names.tainted_members(src, env) == 2
    assert archive_names.rewrite_without_tainted(src, out, env) == 2
    with tarfile.open(out, "r:gz") as tar:
        names = tar.getnames()
        assert not any(env[NAME] in n for n in names) and "train/ok.pth" in names
        digest = file_names.stored_name(bad, env)
        assert tar.extractfile(f"train/{digest}").read() == b"weights"
        assert tar.getmember("train/latest.pth").linkname == digest
    assert archive_names.rewrite_without_tainted(out, tmp_path / "again.tar.gz", env) == 0
    assert not (tmp_path / "again.tar.gz").exists()
