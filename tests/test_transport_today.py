"""the transport package against today's brev, one focused test per branch (a guarantee module):
the ssh-agent brev's exec would leak (exec.go runSSHWithTimeout), API keys (auth.go
IsBrevAPIKey, PR #369; BREV_API_KEY from the environment, PR #464), the Brev API's
transient errors (pkg/store/http.go HTTPResponseError; Go net/http), the NVIDIA-auth
migration (cmderrors.go), names shared in an org (ls.go RunWorkspaces), STOPPED
instances (util/ssh.go StartWorkspaceIfStopped) and colon-free copy paths (copy.go
parseWorkspacePath)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from tao_brev import transport
from tao_brev.errors import TaoBrevError, TransportError
from tao_brev.transport import (NO_AGENT_SOCKET, Brev, api_key, api_unreachable, brev_environment, pick_instance,
                                run_until_exit, safe_copy)

KEY = "bak-Key0123456789abcdefghijklmnopq"
TOKEN = "brevtok-Q7w3Zx9Lm2Np5Rt8Vy4Kd6Hs1Fg0Jc"
EOF_LINE = 'Get "https://brevapi.us-west-2-prod.control-plane.brev.dev/api/organizations/o/workspaces": EOF'


def done(code=1, out="", err=""):
    return subprocess.CompletedProcess(["brev"], code, out, err)


# -- the ssh-agent ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", [None, "", "   "])
def test_an_unset_or_empty_agent_socket_becomes_one_that_cannot_exist(value):
    env = {"PATH": "/bin"} if value is None else {"PATH": "/bin", "SSH_AUTH_SOCK": value}
    assert brev_environment(env)["SSH_AUTH_SOCK"] == NO_AGENT_SOCKET
    assert not os.path.exists(NO_AGENT_SOCKET) and NO_AGENT_SOCKET.startswith("/dev/null/")


def test_the_users_own_agent_socket_is_kept():
    assert brev_environment({"SSH_AUTH_SOCK": "/run/user/1000/agent.sock"})["SSH_AUTH_SOCK"] == \
        "/run/user/1000/agent.sock"


# -- API keys ------------------------------------------------------------------------------------
def test_brev_api_key_reaches_brev_only_through_its_environment():
    env = brev_environment({"BREV_API_KEY": f" {KEY} ", "BREV_API_TOKEN": TOKEN, "NGC_KEY": "nvapi-x" * 3})
    assert env["BREV_API_KEY"] == KEY and "BREV_API_TOKEN" not in env and "NGC_KEY" not in env


def test_a_bak_value_in_brev_api_token_is_an_api_key_and_a_token_is_not():
    assert api_key({"BREV_API_TOKEN": KEY}) == KEY
    assert brev_environment({"BREV_API_TOKEN": KEY})["BREV_API_KEY"] == KEY
    assert api_key({"BREV_API_TOKEN": TOKEN}) is None and "BREV_API_KEY" not in brev_environment(
        {"BREV_API_TOKEN": TOKEN})
    assert api_key({"BREV_API_KEY": "", "BREV_API_TOKEN": "  "}) is None
    assert api_key({"BREV_API_KEY": "k-without-prefix"}) == "k-without-prefix"   # brev judges it, not us
    assert api_key({"BREV_API_KEY": KEY, "BREV_API_TOKEN": "bak-other0123456789abcdef"}) == KEY


def test_with_an_api_key_an_auth_failure_is_never_a_token_login(monkeypatch):
    brev = Brev(env={"BREV_API_KEY": KEY, "BREV_API_TOKEN": TOKEN, "PATH": "/bin"})
    calls = []
    monkeypatch.setattr(brev, "_spawn", lambda args, timeout, allow=None: calls.append(args) or done(
        err="Error: 401 Unauthorized"))
    with pytest.raises(TaoBrevError) as refused:
        brev.ls()
    assert refused.value.code == "BREV_API_KEY_REJECTED" and refused.value.exit_code == 3
    assert refused.value.message == ("`brev ls` reports an auth failure with the Brev API key in its environment: "
                                     "Error: 401 Unauthorized")
    assert calls == [["ls", "--json"]] and brev.logins == 0


def test_login_with_a_bak_token_refuses_before_any_command_line(monkeypatch):
    brev = Brev(env={"BREV_API_TOKEN": KEY, "PATH": "/bin"})
    monkeypatch.setattr(brev, "_spawn", lambda *a, **k: pytest.fail("no brev login --token bak-..."))
    with pytest.raises(TaoBrevError) as refused:
        brev.login()
    assert refused.value.code == "BREV_API_KEY_REJECTED" and refused.value.message == (
        "brev reports an auth failure with the Brev API key in its environment (BREV_API_KEY; a bak- key is never "
        "passed to --token)")


# -- the Brev API's transient errors ---------------------------------------------------------------
@pytest.mark.parametrize("err", [
    EOF_LINE,
    'Get "https://brevapi.example/api/me": read tcp 10.0.0.2:5->1.2.3.4:443: read: connection reset by peer',
    'Post "https://brevapi.example/x": dial tcp: lookup brevapi.example: no such host',
    'Get "https://brevapi.example/x": net/http: TLS handshake timeout',
    'Get "https://brevapi.example/x": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
    "https://brevapi.example/api/organizations/o/workspaces 503 Service Unavailable upstream",
    "https://brevapi.example/api/organizations/o/workspaces 429 Too Many Requests",
    "https://brevapi.example/api/organizations/o/workspaces 502 Bad Gateway <html>",
])
def test_the_apis_own_failures_are_recognised_and_are_not_auth_failures(err):
    failed = done(err="some context\n" + err)
    assert api_unreachable(failed) == err.strip()
    assert transport._auth_failed(failed) is False


@pytest.mark.parametrize("failed", [
    done(err="Error: EOF"),                                                        # the prompt read EOF: a login
    done(out="You are currently logged out, would you like to log in? [Y/n]: ", err=EOF_LINE),
    done(err="https://brevapi.example/api/me 401 Unauthorized"),
    done(err="kex_exchange_identification: read: Connection reset by peer"),      # ssh, not the API
    done(code=0, err=EOF_LINE),                                                    # brev succeeded
    done(out="TAOBREVx:out\n" + EOF_LINE, err=""),                                 # remote output, never searched
])
def test_logins_ssh_and_remote_output_are_not_the_api(failed):
    assert api_unreachable(failed) is None


def test_a_transient_api_error_is_retried_with_backoff_then_answered(monkeypatch):
    sleeps, logs, answers = [], [], [done(err=EOF_LINE), done(err=EOF_LINE), done(0, '{"workspaces": null}')]
    brev = Brev(env={"PATH": "/bin"}, sleep=sleeps.append, log=logs.append, backoff_s=(2.0, 5.0))
    monkeypatch.setattr(brev, "_spawn", lambda args, timeout, allow=None: answers.pop(0))
    assert brev.ls() == [] and sleeps == [2.0, 5.0] and brev.logins == 0
    assert logs[0].startswith("brev ls: the Brev API did not answer (Get ") and logs[0].endswith(
        "retrying in 2 s (attempt 2/3)") and logs[1].endswith("retrying in 5 s (attempt 3/3)")


def test_a_persistent_api_failure_is_unreachable_never_a_login(monkeypatch):
    sleeps = []
    brev = Brev(env={"PATH": "/bin", "BREV_API_TOKEN": TOKEN}, sleep=sleeps.append, log=lambda m: None,
                backoff_s=(0.0,))
    calls = []
    monkeypatch.setattr(brev, "_spawn", lambda args, timeout, allow=None: calls.append(args) or done(err=EOF_LINE))
    with pytest.raises(TaoBrevError) as failed:
        brev.delete("box")
    assert failed.value.code == "BREV_API_UNREACHABLE" and failed.value.exit_code == 3
    assert len(calls) == 1 + transport.API_RETRIES and all(c[0] == "delete" for c in calls) and brev.logins == 0
    assert failed.value.message == f"`brev delete`: the Brev API did not answer after 3 attempts: {EOF_LINE}"
    assert sleeps == [0.0, 0.0]


def test_the_api_failure_quoted_in_a_message_or_a_log_line_is_cut(monkeypatch):
    long_line = 'Get "https://brevapi.example/' + "p" * 400 + '": EOF'
    logs = []
    brev = Brev(env={"PATH": "/bin"}, sleep=lambda s: None, log=logs.append, backoff_s=(0.0,))
    monkeypatch.setattr(brev, "_spawn", lambda args, timeout, allow=None: done(err=long_line))
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    from tao_brev.secrets import redact
    assert failed.value.message.endswith(": " + redact.tail(long_line, 300)) and len(redact.tail(long_line, 300)) < 320
    assert f"({redact.tail(long_line, 160)});" in logs[0] and redact.tail(long_line, 161) != redact.tail(long_line, 160)


def test_an_exec_whose_lookup_met_the_api_down_says_so(monkeypatch):
    from tao_brev.secrets import redact

    brev = Brev(env={"PATH": "/bin"}, sleep=lambda s: None, log=lambda m: None)
    line = f'ssh connection failed and could not look up "box": {EOF_LINE}' + " x" * 200
    monkeypatch.setattr(brev, "_spawn", lambda args, timeout, allow=None: done(
        code=1, err="Connection failed, checking instance status...\n" + line))
    with pytest.raises(TransportError) as failed:
        brev.exec("box", "echo hi")
    assert failed.value.code == "BREV_API_UNREACHABLE" and brev.logins == 0 and failed.value.details == {"brev_exit": 1}
    assert failed.value.message == ("brev exec on 'box': ssh failed and the Brev API did not answer brev's instance "
                                    "lookup: " + redact.tail(line.strip(), 300))
    assert redact.tail(line.strip(), 301) != redact.tail(line.strip(), 300)


def test_the_nvidia_auth_migration_ends_the_call_at_once(tmp_path):
    fake = tmp_path / "brev"
    fake.write_text(f"#!{sys.executable}\nimport sys, time\n"
                    "sys.stderr.write('\\n This account has been migrated to NVIDIA Auth. Attempting to log in "
                    "with NVIDIA account...\\n'); sys.stderr.flush(); time.sleep(60)\n")
    fake.chmod(0o755)
    brev = Brev(env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    began = time.monotonic()
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.code == "BREV_NVIDIA_LOGIN_REQUIRED" and time.monotonic() - began < 30
    assert failed.value.message == ("`brev ls`: the Brev account was migrated to NVIDIA sign-in and brev began a "
                                    "browser login (`brev login --auth nvidia`), which cannot finish headlessly; it "
                                    "was stopped")


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_timed_out_exec_that_brev_said_it_was_starting_bills(tmp_path, stream):
    fake = tmp_path / "brev"
    fake.write_text(f"#!{sys.executable}\nimport sys, time\n"
                    f"sys.{stream}.write('Instance box is starting. \\n'); sys.{stream}.flush(); time.sleep(60)\n")
    fake.chmod(0o755)
    heard = []
    brev = Brev(env={"PATH": f"{tmp_path}:/usr/bin:/bin"}, on_started=heard.append)   # no brev ls: status unknown
    with pytest.raises(TransportError) as timed_out:
        brev.exec("box", "echo ok", timeout=1.5)
    assert "brev was starting the STOPPED instance box" in timed_out.value.message and heard == ["box"]


def test_run_until_exit_stops_on_the_pattern_only_when_it_appears():
    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('fine', file=sys.stderr)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert run_until_exit(proc, 30, stop_on=transport._NVIDIA_MIGRATION) == (0, "", "fine\n")


# -- names shared in an org, STOPPED instances -----------------------------------------------------
def test_one_name_two_instances_is_refused_with_both_ids():
    rows = [{"name": "box", "id": "a1", "status": "RUNNING"}, {"name": "box", "id": "b2", "status": "STOPPED"},
            {"name": "other", "id": "c3"}]
    with pytest.raises(TaoBrevError) as refused:
        pick_instance(rows, "box")
    assert refused.value.code == "INSTANCE_AMBIGUOUS" and "a1 (RUNNING)" in refused.value.message
    assert "b2 (STOPPED)" in refused.value.message and refused.value.details["ids"] == ["a1", "b2"]
    assert pick_instance(rows, "other")["id"] == "c3" and pick_instance(rows, "none") is None


def test_ls_remembers_each_status_and_marks_a_shared_name(monkeypatch):
    brev = Brev(env={"PATH": "/bin"})
    listing = ('{"workspaces": [{"name": "box", "status": "stopped"}, {"name": "dup", "status": "RUNNING"}, '
               '{"name": "dup", "status": "RUNNING"}, {"name": "bare"}]}')
    monkeypatch.setattr(brev, "_spawn", lambda args, timeout, allow=None: done(0, listing))
    brev.ls()
    assert brev.statuses == {"box": "STOPPED", "dup": "AMBIGUOUS", "bare": ""}


def _recording(monkeypatch, brev, answer):
    seen = []
    monkeypatch.setattr(brev, "_spawn", lambda args, timeout, allow=None: seen.append(timeout) or answer(args))
    return seen


def test_an_exec_on_an_instance_listed_stopped_or_shared_is_refused_before_brev_runs(monkeypatch):
    brev = Brev(env={"PATH": "/bin"})
    seen = _recording(monkeypatch, brev, lambda args: pytest.fail("brev must not run"))
    for status, code, message in (
            ("STOPPED", "INSTANCE_STOPPED", "box is STOPPED (brev ls); not started: brev exec would start it"),
            ("AMBIGUOUS", "INSTANCE_AMBIGUOUS", "several instances are named box in `brev ls --json`; not run on any")):
        brev.statuses = {"box": status}
        with pytest.raises(TaoBrevError) as refused:
            brev.exec("box", "echo hi")
        assert (refused.value.code, refused.value.message, refused.value.details) == (code, message, {"instance": "box"})
    assert seen == [] and brev.exec_calls == 0


def test_an_exec_allowed_to_start_waits_for_brevs_own_start_and_then_knows_it_runs(monkeypatch):
    brev = Brev(env={"PATH": "/bin"})
    brev.statuses = {"box": "STOPPED"}

    def answer(args):
        nonce = re.search(r"TAOBREV[0-9a-f]{20}", args[-1]).group(0)
        said = "Instance box is starting. \n" if not seen[1:] else ""   # brev says so only when it starts it
        return done(0, f"{said}{nonce}:out\nok\n\n{nonce}:err\n\n{nonce}:rc 0\nbox\n")
    seen = _recording(monkeypatch, brev, answer)
    result = brev.exec("box", "echo ok", start=True, timeout=10)
    assert seen == [10 + transport.BREV_START_WAIT_S] and result.instance_started is True
    assert brev.statuses["box"] == "RUNNING" and "box" in brev.started
    assert transport.BREV_START_WAIT_S == 2 * 600 + 41 * 11   # util/ssh.go: 2 PollUntil 10 min, 41 ssh probes
    again = brev.exec("box", "echo ok", timeout=10)   # woken earlier in this process: still reported
    assert again.instance_started is True and seen[-1] == 10


def test_a_timeout_while_brev_starts_the_instance_says_it_bills(monkeypatch):
    heard = []
    brev = Brev(env={"PATH": "/bin"}, on_started=heard.append)
    brev.statuses = {"box": "STOPPED"}
    err = brev._timed_out(["exec", "box", "script"], 5.0, "")
    assert err.code == "TRANSPORT_TIMEOUT" and heard == ["box"] and err.message == (
        "`brev exec` did not answer within 5 s; brev was starting the STOPPED instance box (it may be RUNNING now, "
        "and it BILLS from its start): poll again, or stop or delete it if nothing needs it")
    brev.statuses = {}
    told = brev._timed_out(["exec", "box", "script"], 5.0, "Instance box is starting. \n")
    assert "starting the STOPPED instance box" in told.message and "box" in brev.started
    asked = Brev(env={"PATH": "/bin"})._timed_out(["start", "-d", "box"], 60.0, "")
    assert "starting the STOPPED instance box (" in asked.message and "BILLS" in asked.message
    other = Brev(env={"PATH": "/bin"})
    other.statuses = {"--json": "STOPPED", "box:/r": "STOPPED"}   # no name a non-exec, non-start call could carry
    assert other._timed_out(["ls", "--json"], 60.0, "").message == "`brev ls` did not answer within 60 s"
    assert other._timed_out(["copy", "box:/r", "/tmp/r"], 7.0, "").message == "`brev copy` did not answer within 7 s"
    assert other._timed_out(["--version"], 9.0, "").message == "`brev --version` did not answer within 9 s"


# -- brev copy and colons --------------------------------------------------------------------------
def test_a_colon_free_copy_goes_through_unchanged():
    calls = []
    safe_copy(lambda a, b: calls.append((a, b)), "box:~/x/results.tar", "/tmp/plain/results.tar")
    assert calls == [("box:~/x/results.tar", "/tmp/plain/results.tar")]


def test_a_download_to_a_path_with_a_colon_goes_through_a_colon_free_file(tmp_path):
    target = tmp_path / "runs-2026-12-01T10:30" / "part"
    target.parent.mkdir()
    calls = []

    def copy(src, dst):
        calls.append((src, dst))
        open(dst, "w").write("payload")
    safe_copy(copy, "box:~/tao-results/j/archive.tar", str(target))
    assert target.read_text() == "payload" and ":" not in calls[0][1] and calls[0][0].startswith("box:")
    assert not os.path.exists(calls[0][1])   # the temporary directory is gone


def test_a_download_into_an_existing_directory_keeps_the_remote_name(tmp_path):
    folder = tmp_path / "a:b"
    folder.mkdir()
    safe_copy(lambda src, dst: open(dst, "w").write("x"), "box:~/r/archive.tar", str(folder))
    assert (folder / "archive.tar").read_text() == "x"
    safe_copy(lambda src, dst: os.mkdir(dst), "box:~/r/resultsX/", str(folder))   # scp -r of a directory
    assert (folder / "resultsX").is_dir()


def test_an_upload_from_a_path_with_a_colon_sends_a_colon_free_copy(tmp_path):
    source = tmp_path / "k:ey"
    source.write_text("secret-file")
    sent = []
    safe_copy(lambda src, dst: sent.append((src, open(src).read(), dst)), str(source), "box:~/.ngc-key")
    assert sent[0][1:] == ("secret-file", "box:~/.ngc-key") and ":" not in sent[0][0]
    folder = tmp_path / "d:ir"
    folder.mkdir()
    (folder / "f").write_text("1")
    safe_copy(lambda src, dst: sent.append((src, sorted(os.listdir(src)), dst)), str(folder), "box:~/d")
    assert sent[1][1:] == (["f"], "box:~/d")


@pytest.mark.parametrize("src, dst, code, message", [
    ("/a", "/b", "BAD_ARGUMENT", "brev copy needs exactly one NAME:path side (got '/a', '/b')"),
    ("box:/a", "box:/b", "BAD_ARGUMENT", "brev copy needs exactly one NAME:path side (got 'box:/a', 'box:/b')"),
    ("box:/a:b", "/tmp/x", "BAD_NAME", "a remote path with ':' cannot be copied (brev splits on it): '/a:b'")])
def test_copies_brev_cannot_do_are_refused_before_brev_runs(src, dst, code, message):
    with pytest.raises(TaoBrevError) as refused:
        safe_copy(lambda a, b: pytest.fail("brev must not run"), src, dst)
    assert (refused.value.code, refused.value.message) == (code, message)


def test_the_staged_copy_lives_under_the_colon_free_directory_even_when_the_default_has_one(tmp_path, monkeypatch):
    colon = tmp_path / "t:mp"
    colon.mkdir()
    monkeypatch.setattr(transport.copying.tempfile, "tempdir", str(colon))   # what mkdtemp uses without dir=
    target = tmp_path / "x:y"
    seen = []
    safe_copy(lambda src, dst: seen.append(dst) or open(dst, "w").write("1"), "box:~/f", str(target))
    assert ":" not in seen[0] and os.path.basename(seen[0]) == transport.STAGED_NAME and target.read_text() == "1"


def test_text_of_what_a_timed_out_call_read():
    assert (transport._text_of(None), transport._text_of("s"), transport._text_of(b"b\xff")) == ("", "s", "b\ufffd")


def test_an_unwritable_temporary_directory_is_skipped(monkeypatch):
    monkeypatch.setattr(transport.os, "access", lambda path, mode: path == "/var/tmp")
    assert transport.colon_free_tmp() == "/var/tmp"


def test_an_instance_without_id_or_status_is_still_named():
    with pytest.raises(TaoBrevError) as refused:
        pick_instance([{"name": "box"}, {"name": "box"}], "box")
    assert refused.value.message == "2 instances are named box in `brev ls --json`: ids ? (?), ? (?)"


def test_the_temporary_directory_is_colon_free_even_when_tmpdir_is_not(tmp_path, monkeypatch):
    (tmp_path / "t:1").mkdir()
    monkeypatch.setattr(transport.copying.tempfile, "gettempdir", lambda: str(tmp_path / "t:1"))
    assert ":" not in transport.colon_free_tmp()
    monkeypatch.setattr(transport.os.path, "isdir", lambda p: p == "/tmp")
    assert transport.colon_free_tmp() == "/tmp"
    monkeypatch.setattr(transport.os.path, "isdir", lambda p: False)
    with pytest.raises(TaoBrevError) as none:
        transport.colon_free_tmp()
    assert (none.value.code, none.value.message) == (
        "BAD_STATE_DIR", "no temporary directory without ':' in its path ($TMPDIR, /tmp, /var/tmp)")
