"""Bounded logs (tao_brev/logcap.py): per-line caps keeping the end, carriage-return progress
collapsed, a capped whole, said where the full log is; on the instance and here; secrets cut in
two leave nothing behind."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import validate
from tao_brev import logcap
from tao_brev.secrets import guard as known_secrets

SECRET = "hf_" + "Zq9" * 12 + "Wx"          # 41 characters, as HF tokens are
TQDM = "".join(f"\rEpoch 1: {i % 100:3d}%|{'#' * (i % 40):<40}| {i}/1000000" for i in range(120_000))


def big_log() -> str:
    """A 40 KiB line, then an ~8 MiB tqdm line without a newline."""
    return "first line\n" + "x" * 40 * 1024 + "END-OF-40K\n" + TQDM


def substrings(value: str, n: int = 8) -> list[str]:
    return [value[i:i + n] for i in range(len(value) - n + 1)]


@pytest.fixture
def secret_known(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", SECRET)
    known_secrets.reset()
    yield
    monkeypatch.delenv("HF_TOKEN")
    known_secrets.reset()


def test_long_lines_keep_their_end_progress_its_last_state_and_the_whole_is_capped():
    text, cut = logcap.bound(big_log(), lines=20)
    assert len(text.encode()) <= logcap.LOG_BYTES
    lines = text.split("\n")
    assert lines[0] == "first line"
    assert lines[1].startswith(f"[tao-brev: {40 * 1024 + 10 - logcap.LINE_BYTES} bytes cut] ")
    assert lines[1].endswith("END-OF-40K") and len(lines[1]) < logcap.LINE_BYTES + 40
    assert lines[2] == TQDM.rsplit("\r", 1)[1]                       # what a terminal shows last
    assert (cut.lines, cut.lines_cut, cut.progress_collapsed) == (3, 1, 1)
    # the total cap keeps the LAST lines and says how many earlier ones are not shown
    many = "\n".join(f"line {i} " + "y" * 1000 for i in range(200))
    text, cut = logcap.bound(many)
    assert len(text.encode()) <= logcap.LOG_BYTES + 200 and text.endswith("line 199 " + "y" * 1000)
    assert text.startswith(f"[tao-brev: {cut.lines_dropped} earlier line(s) not shown") and cut.lines_dropped > 150
    assert logcap.bound(many, lines=5)[1].lines_dropped == 0          # lines not asked for are not "dropped"


def _on_instance(command: str, token: str = "Stok", **caps) -> subprocess.CompletedProcess:
    """The instance side: the filter as the remote shell runs it (awk in the C locale)."""
    return subprocess.run(["bash", "-c", logcap.remote_command(command, token, **caps)], capture_output=True)


def test_the_instance_cuts_before_anything_crosses_the_network_and_keeps_the_exit_status(tmp_path):
    log = tmp_path / "log"
    log.write_text(big_log())
    done = _on_instance(f"cat {log}")
    assert done.returncode == 0 and len(done.stdout) < logcap.LINE_BYTES * 3   # not 8 MiB
    text, cut = logcap.bound(done.stdout.decode(), lines=20, token="Stok")
    assert text == logcap.bound(big_log(), lines=20)[0]                     # the same answer either way
    assert cut.lines_cut == 1 and cut.bytes_cut == 40 * 1024 + 10 - logcap.LINE_BYTES
    assert _on_instance(f"cat {log}; false").returncode == 1                 # docker logs' own status
    gone = _on_instance("sh -c 'echo Error: No such container: x >&2; exit 3'")
    assert gone.returncode == 3 and gone.stdout == b"Error: No such container: x\n"   # stderr kept, in order
    many = tmp_path / "many"
    many.write_text("".join(f"line {i} {'y' * 1000}\n" for i in range(200)))
    done = _on_instance(f"cat {many}")
    assert len(done.stdout) <= logcap.LOG_BYTES + 100
    text, cut = logcap.bound(done.stdout.decode(), token="Stok")
    assert text.endswith("line 199 " + "y" * 1000) and cut.lines_dropped == 200 - cut.lines


def test_a_secret_cut_in_two_leaves_no_part_behind_here_or_on_the_instance(secret_known, tmp_path):
    for at in range(1, len(SECRET)):   # every position of the cut inside the value
        line = "A" * 5000 + SECRET[:at] + SECRET[at:] + "B" * (logcap.LINE_BYTES - (len(SECRET) - at))
        local, _ = logcap.bound(line + "\n")
        log = tmp_path / "log"
        log.write_text(line + "\n")
        remote, _ = logcap.bound(_on_instance(f"cat {log}").stdout.decode(), token="Stok")
        for text in (local, remote):
            assert not [s for s in substrings(SECRET, 4) if s in text], (at, text[:120])
    assert logcap.strip_partial_prefix(SECRET[30:] + "tail") == "tail"
    assert logcap.strip_partial_prefix("plain text") == "plain text"


MULTIBYTE = {"2-byte": "é", "3-byte": "€", "4-byte": "😀", "mixed": "é€😀ж中"}


@pytest.mark.parametrize("shift", range(4))
@pytest.mark.parametrize("kind", MULTIBYTE)
def test_cuts_keep_whole_characters_here_and_on_the_instance(tmp_path, kind, shift):
    """Each cut (a line's last LINE_BYTES bytes, here and by awk in the C locale; a line's first
    bytes for remote_head) lands on a character boundary: no U+FFFD, at most LINE_BYTES bytes,
    the same text either way, the bytes cut counted exactly."""
    chars = MULTIBYTE[kind]
    line = "a" * shift + (chars * 4000)[:3000] + "END"
    size = len(line.encode())
    log = tmp_path / "log"
    log.write_text(f"{line}\nshort\n", encoding="utf-8")
    received = _on_instance(f"cat {log}").stdout
    remote, remote_cut = logcap.bound(received.decode("utf-8", "replace"), token="Stok")
    local, local_cut = logcap.bound(f"{line}\nshort\n")
    assert remote == local and "\ufffd" not in remote, (kind, shift)
    kept = local.split("\n")[0].split("] ", 1)[1]
    assert line.endswith(kept) and len(kept.encode()) <= logcap.LINE_BYTES
    assert len(kept.encode()) > logcap.LINE_BYTES - 4                       # at most one character short
    assert remote_cut.bytes_cut == local_cut.bytes_cut == size - len(kept.encode())
    head = subprocess.run(["bash", "-c", logcap.remote_head(f"cat {log}", "Stok", 1001 + shift)],
                          capture_output=True).stdout.decode("utf-8", "replace").split("\n")[0]
    assert "\ufffd" not in head and line.startswith(head) and 1001 + shift - 4 < len(head.encode()) <= 1001 + shift


def test_a_secret_with_multibyte_characters_cut_anywhere_leaves_no_piece(monkeypatch, tmp_path):
    secret = "tök€n-😀-" + "Zq9ж" * 8
    monkeypatch.setenv("HF_TOKEN", secret)
    known_secrets.reset()
    try:
        for at in range(1, len(secret)):
            line = "é" * 3000 + secret + "€" * ((logcap.LINE_BYTES - len(secret[at:].encode())) // 3)
            log = tmp_path / "log"
            log.write_text(line + "\n", encoding="utf-8")
            remote, _ = logcap.bound(_on_instance(f"cat {log}").stdout.decode("utf-8", "replace"), token="Stok")
            local, _ = logcap.bound(line + "\n")
            for text in (local, remote):
                assert not [s for s in substrings(secret) if s in text] and "\ufffd" not in text, (at, text[:80])
    finally:
        known_secrets.reset()


def test_the_whole_answer_is_capped_after_redaction():
    answer = {"ok": True, "logs": "z" * 300_000, "jobs": [{"job_id": f"j-{i}", "message": "m" * 200}
                                                         for i in range(3000)]}
    capped = logcap.cap_answer(answer)
    assert len(json.dumps(capped, indent=2).encode()) <= logcap.ANSWER_BYTES
    assert capped["answer_cut"]["items_dropped"] > 0 and capped["logs"].endswith("z" * 100)
    assert logcap.cap_answer({"ok": True}) == {"ok": True}


# -- through the scripts: poll --logs, --all, teardown's saved log ------------------------------------
def test_a_job_printing_an_8_mib_progress_line_answers_within_the_cap(world, secret_known):
    spec = world.spec({"epoch_seconds": 0.01, "long_lines": {"env": "HF_TOKEN"}})
    job_id = world.submit("--env", "HF_TOKEN", spec=spec, HF_TOKEN=SECRET).json["job_id"]
    waited = world.run("poll_status.py", job_id, "--wait", "--interval", "0.1", HF_TOKEN=SECRET)
    assert waited.json["state"] == "COMPLETE", waited
    polled = world.run("poll_status.py", job_id, "--logs", "20", HF_TOKEN=SECRET)
    assert polled.code == 0 and len(polled.stdout.encode()) <= logcap.ANSWER_BYTES, len(polled.stdout)
    validate("poll_status", polled.json)
    logs = polled.json["logs"].split("\n")
    assert logs[-1] == TQDM_LAST(), logs[-1][-200:]
    cut = polled.json["logs_cut"]
    assert cut["lines_cut"] >= 1 and cut["full_log"].startswith("brev exec box 'docker logs ")
    assert not [s for s in substrings(SECRET) if s in polled.stdout + polled.stderr]
    everything = world.run("poll_status.py", "--all", HF_TOKEN=SECRET)
    assert len(everything.stdout.encode()) <= logcap.ANSWER_BYTES and everything.json is not None
    down = world.run("teardown.py", job_id, HF_TOKEN=SECRET)
    assert down.code == 0, down
    saved = (world.tmp_path / "state" / "brev" / "logs" / f"{job_id}.log").read_text()
    assert len(saved.encode()) <= logcap.SAVED_LOG_BYTES and saved.rstrip("\n").endswith(TQDM_LAST())
    assert not [s for s in substrings(SECRET) if s in saved]
    after = world.run("poll_status.py", job_id, "--logs", "20", HF_TOKEN=SECRET)
    assert len(after.stdout.encode()) <= logcap.ANSWER_BYTES and after.json["logs"].endswith(TQDM_LAST())
    assert after.json["logs_cut"]["full_log"].endswith(f"{job_id}.log"), after.json["logs_cut"]


def TQDM_LAST() -> str:   # noqa: N802 - the sim's last progress state (tests/sim/tao_standin.py)
    step, total = 0, 0
    chunk = ""
    while total < 8 * 1024 * 1024:
        chunk = f"Epoch 1: {step % 100:3d}%|{'#' * (step % 40):<40}| {step}/1000000 [00:01<00:02, 9.9it/s]"
        total, step = total + len(chunk) + 1, step + 1
    return chunk


@pytest.mark.parametrize("kind", MULTIBYTE)
def test_byte_cuts_of_a_stream_on_the_instance_keep_whole_characters(kind):
    """``tail -c`` / ``head -c`` on the instance (remote_tail_bytes / remote_head_bytes) cut at every
    offset through 2-, 3- and 4-byte characters: the kept bytes decode cleanly, are the input's end
    (start) and are at most 3 bytes short of the limit (one character cut in two, left out whole)."""
    text = ("ab" + MULTIBYTE[kind] * 7 + "\nz" + MULTIBYTE[kind] * 5 + "\n").encode()
    for limit in range(1, len(text) + 2):
        tail = subprocess.run(["sh", "-c", logcap.remote_tail_bytes(limit)], input=text, capture_output=True).stdout
        head = subprocess.run(["sh", "-c", logcap.remote_head_bytes(limit)], input=text, capture_output=True).stdout
        kept_tail, kept_head = tail.decode("utf-8"), head.decode("utf-8")   # strict: no character cut in two
        assert text.endswith(tail) and min(limit, len(text)) - 3 <= len(tail) <= limit, (kind, limit, tail)
        assert text.startswith(head) and min(limit, len(text)) - 3 <= len(head) <= limit, (kind, limit, head)
        assert "\ufffd" not in kept_tail + kept_head
