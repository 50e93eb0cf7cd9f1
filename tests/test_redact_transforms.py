"""Redaction happens on the text as received, before any transform that could split a value
(``tao_brev/logcap.py``: the ``\\r`` progress collapse, the line cap; the saved log's escape
stripping, ``tao_brev/sidecar.py``). Table: values holding a control character (``\\r``,
``\\b``, ``\\t``, ESC; an environment value cannot hold NUL, a printed one can be split by it) x values split by one (a ``\\r``, an escape sequence, a backspace)
x where the value sits (alone, after a progress bar, inside a line longer than the cap)
x exits (the bounded log of an answer, the instance-filtered log, the saved log). Neither
the value nor any run of 8 of its characters survives.
"""

from __future__ import annotations

import pytest

from tao_brev import logcap
from tao_brev.secrets import guard as known_secrets

NAME = "XFORM_API_KEY"
BASE = "Wd3Kx8Pq5Mz1Rt7Nv4Bh6Lc2"

HELD = {   # the value itself holds the character
    "cr": BASE[:9] + "\r" + BASE[9:],
    "backspace": BASE[:9] + "\b" + BASE[9:],
    "tab": BASE[:9] + "\t" + BASE[9:],
    "esc": BASE[:9] + "\x1b" + BASE[9:],
    "plain": BASE,
}
SPLIT = {   # how the job prints the (plain) value: split by a control
    "as is": lambda v: v,
    "cr inside": lambda v: v[:10] + "\r" + v[10:],
    "colour inside": lambda v: v[:10] + "\x1b[1;31m" + v[10:] + "\x1b[0m",
    "backspace pair": lambda v: v[:10] + "x\b" + v[10:],
    "cursor moves": lambda v: v[:6] + "\x1b[2K\x1b[1G" + v[6:],
    "nul inside": lambda v: v[:12] + "\x00" + v[12:],
    "bell and tab inside": lambda v: v[:5] + "\a" + v[5:15] + "\t" + v[15:],
}
PLACES = {
    "alone": lambda s: s,
    "after a progress bar": lambda s: "epoch 1: 10%|#   |\repoch 1: 50%|##  |\r" + s,
    "before a progress bar": lambda s: s + "\repoch 1: 100%|####|",
    "inside a long line": lambda s: "x" * 5000 + " " + s + " " + "y" * 100,
    "at the end of a long line": lambda s: "z" * 5000 + s,
}


def _runs(value: str) -> list[str]:
    plain = "".join(c for c in value if c.isalnum())
    return [plain[i:i + 8] for i in range(0, len(plain) - 7)]


def _leaks(out: str, value: str) -> list[str]:
    flat = "".join(c for c in out if c.isalnum() or c == " ")
    return [r for r in _runs(value) if r in flat]


@pytest.fixture(autouse=True)
def _clean():
    known_secrets.reset()
    yield
    known_secrets.reset()


CASES = [(h, s, p) for h in HELD for s in SPLIT for p in PLACES if h == "plain" or s == "as is"]


@pytest.mark.parametrize("held, split, place", CASES, ids=[f"{h}-{s}-{p}" for h, s, p in CASES])
def test_bounded_logs_redact_before_collapse_and_cut(monkeypatch, held, split, place):
    value = HELD[held]
    monkeypatch.setenv(NAME, value)
    line = PLACES[place](SPLIT[split](value))
    text = "epoch 0 ok\n" + line + "\nepoch 2 ok\n"
    out, _cut = logcap.bound(text)
    out = known_secrets.redactor()(out)   # what the answer then redacts again (cli.emit)
    assert not _leaks(out, value), (out[-300:],)
    assert out.startswith("epoch 0 ok\n") and out.endswith("epoch 2 ok")


@pytest.mark.parametrize("held, split, place", CASES, ids=[f"{h}-{s}-{p}" for h, s, p in CASES])
def test_instance_filtered_logs_redact_before_collapse(monkeypatch, held, split, place):
    """The instance's filter cut the line (its marker), the rest arrives with the ``\\r`` in it."""
    value = HELD[held]
    monkeypatch.setenv(NAME, value)
    line = PLACES[place](SPLIT[split](value))[-3000:]
    text = f"TOK:cut:123 {line}\nlast\n"
    out, _cut = logcap.bound(text, token="TOK")
    out = known_secrets.redactor()(out)
    assert not _leaks(out, value), (out[-300:],)


@pytest.mark.parametrize("held", sorted(HELD))
def test_saved_log_redacts_before_stripping_escapes(monkeypatch, tmp_path, held):
    from tao_brev.secrets import proof as env_proof
    from tao_brev.sidecar import SidecarStore

    value = HELD[held]
    monkeypatch.setenv(NAME, value)
    store = SidecarStore(tmp_path / "state")
    store.update("a-b-123456", instance="box", env_names=[NAME],
                 env_proof=env_proof.proof(tmp_path / "state", {NAME: value}, [NAME]))
    for how, split in SPLIT.items():
        if held != "plain" and how != "as is":
            continue
        saved = store.save_logs("a-b-123456", "before\n" + split(value) + "\nafter\n").read_text()
        assert not _leaks(saved, value), saved
        assert "\x1b" not in saved and saved.startswith("before")


def test_ordinary_progress_output_is_collapsed_as_before():
    out, cut = logcap.bound("a\nepoch 1 10%\repoch 1 50%\repoch 1 100%\nb\n")
    assert out == "a\nepoch 1 100%\nb" and cut.progress_collapsed == 1 and not cut.any
    long = "p" * 3000 + "\r" + "q" * 100
    out, cut = logcap.bound(long)
    assert out == "q" * 100 and cut.progress_collapsed == 1 and cut.bytes_cut == 0
    out, cut = logcap.bound("r" * 3000 + "\r" + "s" * 2500)
    assert out.endswith("s" * 2048) and cut.bytes_cut == 452 and cut.progress_collapsed == 1
    out, cut = logcap.bound("t" * 9000)
    assert out.endswith("t" * 2048) and cut.bytes_cut == 9000 - 2048
