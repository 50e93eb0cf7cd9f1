"""The framing that makes brev exec output trustworthy (pure functions; the
end-to-end behaviour against the simulated brev is in test_transport.py)."""

import subprocess

from tao_brev.transport import frame, unframe

NONCE = "TAOBREVtest0123456789"


def run_sh(script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", frame(script, NONCE)], capture_output=True, text=True, stdin=subprocess.DEVNULL)


def test_frame_exits_zero_and_reports_the_real_status():
    done = run_sh("echo out; echo err >&2; exit 7")
    assert done.returncode == 0
    assert unframe(done.stdout, NONCE) == (7, "out\n", "err\n")


def test_output_without_trailing_newline_is_kept_exactly():
    done = run_sh("printf 'a\\nb'")
    assert unframe(done.stdout, NONCE) == (0, "a\nb", "")


def test_exit_inside_script_does_not_skip_the_frame():
    done = run_sh("echo before; exit 3; echo never")
    assert unframe(done.stdout, NONCE) == (3, "before\n", "")


def test_noise_around_the_frame_is_ignored():
    body = run_sh("echo payload").stdout
    noisy = "Welcome to Ubuntu (banner)\n" + body + "my-instance\n"
    assert unframe(noisy, NONCE) == (0, "payload\n", "")


def test_second_execution_keeps_only_the_last_complete_frame():
    first_partial = f"{NONCE}:out\nhalf a line"
    second = run_sh("echo full").stdout
    assert unframe(first_partial + second + "box\n", NONCE) == (0, "full\n", "")


def test_payload_that_mimics_markers_of_another_nonce_is_data():
    done = run_sh("echo 'TAOBREVother:rc 0'")
    assert unframe(done.stdout, NONCE) == (0, "TAOBREVother:rc 0\n", "")


def test_no_frame_or_truncated_frame_is_none():
    assert unframe("ssh: connect to host x port 22: Connection refused\n", NONCE) is None
    assert unframe(f"{NONCE}:out\nabc\n{NONCE}:err\n", NONCE) is None


def test_script_reads_no_stdin_and_heredocs_work():
    script = "cat <<'EOF'\nline with ) and $HOME and `x`\nEOF\ncat"
    done = run_sh(script)
    code, out, _ = unframe(done.stdout, NONCE)
    assert code == 0 and out == "line with ) and $HOME and `x`\n"
