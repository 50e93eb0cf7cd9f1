"""The transport's promises, each checked where it is decided (in process, no brev run
unless the promise is about the process brev gets): brev's environment holds no
credential and keeps what brev needs; what counts as an auth failure, on either
stream; brev's "is starting" on either stream; a failed delete/start/copy/ls is never
ignored; one fresh login, then BREV_NOT_LOGGED_IN. The end-to-end checks against the
simulated brev are in test_transport.py.

brev's words are quoted from brevdev/brev-cli (pkg/cmd/login/login.go, pkg/auth/auth.go
shouldLogin's prompt, pkg/cmd/util StartWorkspaceIfStopped's "Instance NAME is starting.")."""

import os
import re
import subprocess

import pytest

from tao_brev import transport
from tao_brev.secrets import guard as known_secrets
from tao_brev.errors import TaoBrevError, TransportError
from tao_brev.transport import Brev, brev_environment

TOKEN = "brevtok-Q7w3Zx9Lm2Np5Rt8Vy4Kd6Hs1Fg0Jc"
CREDENTIALS = {
    "BREV_API_TOKEN": TOKEN,
    "NGC_KEY": "nvapi-ngc0000key1111value2222abcd",
    "NGC_API_KEY": "nvapi-ngc3333key4444value5555abcd",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2VjEXAMPLEsessiontoken",
    "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
}
# what brev needs to run (find ssh, its config in ~/.brev, a locale, an ssh agent, a proxy)
NEEDED = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/home/dev", "USER": "dev", "LANG": "C.UTF-8",
          "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock", "TMPDIR": "/tmp", "HTTPS_PROXY": "http://proxy:3128",
          "AWS_SHARED_CREDENTIALS_FILE": "/home/dev/.aws/credentials", "TAO_STATE_DIR": "/home/dev/.tao"}


@pytest.fixture(autouse=True)
def _fresh_known_secrets():
    known_secrets.reset()
    yield
    known_secrets.reset()


def test_brev_gets_what_it_needs_and_no_credential():
    env = {**NEEDED, **CREDENTIALS}
    assert brev_environment(env) == NEEDED


def test_an_env_value_of_the_job_never_reaches_brev_whatever_its_name():
    known_secrets.watch(["DATASET_MIRROR"])   # submit.py --env DATASET_MIRROR: its value is secret
    env = {**NEEDED, "DATASET_MIRROR": "s3-mirror-value-0123", "MY_CUSTOM_PASSWORD": "hunter2hunter2"}
    assert brev_environment(env) == NEEDED


def test_the_process_brev_runs_as_has_that_environment(monkeypatch):
    seen = []
    real_popen = subprocess.Popen

    def spy(argv, **kw):
        seen.append(kw["env"])
        return real_popen(["true"], **kw)

    monkeypatch.setattr(transport.subprocess, "Popen", spy)
    brev = Brev(binary="true", env={**NEEDED, "PATH": "/usr/bin:/bin", **CREDENTIALS})
    done = brev._spawn(["ls", "--json"], 30)
    assert done.returncode == 0 and len(seen) == 1
    assert seen[0] == {**NEEDED, "PATH": "/usr/bin:/bin"}


def done(code=1, stdout="", stderr=""):
    return subprocess.CompletedProcess(["brev"], code, stdout, stderr)


AUTH_WORDS = [
    "Error: 401 Unauthorized: token expired",
    "request failed: unauthorized",
    "access unauthorised",
    "Error: EOF",
    "the input device is not a TTY: no tty present",
    "stdin is not a tty",
    "you are not logged in, run brev login",
    "inappropriate ioctl for device",
    "You are currently logged out, would you like to log in? [Y/n]: ",
]


@pytest.mark.parametrize("stream", ["stderr", "stdout"])
@pytest.mark.parametrize("words", AUTH_WORDS)
def test_every_auth_failure_brev_prints_is_one_on_either_stream(words, stream):
    assert transport._auth_failed(done(1, **{stream: words})) is True
    assert transport._auth_failed(done(0, **{stream: words})) is False   # brev succeeded: not an auth failure


@pytest.mark.parametrize("words", ["Error: 4011 instances", "EOFError in the remote script", "mytty",
                                   "connection reset by peer", "logged output", "authorized_keys updated"])
def test_other_failures_are_not_auth_failures(words):
    assert transport._auth_failed(done(1, stderr=words, stdout=words)) is False


def test_stdout_holding_a_frame_is_never_searched_for_auth_words():
    framed = "TAOBREV0123:out\nHTTP 401 unauthorized (the job's own output)\n"
    assert transport._auth_failed(done(1, stdout=framed)) is False
    assert transport._auth_failed(done(1, stdout=framed, stderr="Error: 401")) is True


class Scripted:
    """Brev._spawn answered from a list (brev's exit status, stdout, stderr); each exec's
    answer can hold the frame of the call's own nonce ({frame} is replaced by it)."""

    def __init__(self, *answers):
        self.answers, self.calls = list(answers), []

    def __call__(self, args, timeout, allow=None):
        self.calls.append(list(args))
        code, out, err = self.answers.pop(0)
        nonce = re.search(r"TAOBREV[0-9a-f]{20}", args[-1])
        if nonce and "{frame}" in out:
            out = out.replace("{frame}", f"{nonce.group()}:out\nhi\n\n{nonce.group()}:err\n\n{nonce.group()}:rc 0\n")
        return done(code, out, err)


def scripted_brev(*answers, **kw):
    brev = Brev(env={"PATH": "/usr/bin", "BREV_API_TOKEN": TOKEN}, sleep=lambda s: None, log=lambda m: None,
                backoff_s=(0.0,), **kw)
    brev._spawn = Scripted(*answers)
    return brev


@pytest.mark.parametrize("out, err, started", [
    ("Instance box is starting.\n{frame}box\n", "", True),          # stdout, before the frame
    ("{frame}box\n", "Instance box is starting.\n", True),          # stderr
    ("{frame}", "", False),
    ("Instance boxer is starting.\n{frame}", "", False),           # another instance's name
    ("{frame}", "Instance other is starting.\n", False),
])
def test_brev_starting_the_instance_is_seen_on_either_stream(out, err, started):
    told = []
    brev = scripted_brev((0, out, err), on_started=told.append)
    result = brev.exec("box", "echo hi")
    assert (result.ok, result.stdout, result.instance_started) == (True, "hi\n", started)
    assert told == (["box"] if started else [])


def test_the_jobs_own_output_saying_is_starting_is_not_brevs():
    brev = scripted_brev((0, "", ""))
    nonce_out = "Instance box is starting."

    def answer(args, timeout, allow=None):
        nonce = re.search(r"TAOBREV[0-9a-f]{20}", args[-1]).group()
        return done(0, f"{nonce}:out\n{nonce_out}\n\n{nonce}:err\n\n{nonce}:rc 0\n")

    brev._spawn = answer
    assert brev.exec("box", "echo hi").instance_started is False


@pytest.mark.parametrize("verb, call", [
    ("delete", lambda b: b.delete("box")),
    ("start", lambda b: b.start("box")),
    ("copy", lambda b: b.copy("box:/a", "/tmp/a")),
    ("ls", lambda b: b.ls()),
])
def test_a_failed_brev_command_is_never_ignored(verb, call):
    deleted = []
    brev = scripted_brev((1, "", f"Error: 500 Internal Server Error: {verb} failed"), on_deleted=deleted.append)
    brev.ready_instances.add("box")
    with pytest.raises(TaoBrevError) as failed:
        call(brev)
    assert failed.value.code == "BREV_FAILED" and "500 Internal Server Error" in failed.value.message
    assert brev._spawn.calls[0][0] == verb
    assert deleted == [] and brev.ready_instances == {"box"}   # nothing believed done


def test_a_delete_that_worked_is_told_and_forgets_the_ready_instance():
    deleted = []
    brev = scripted_brev((0, "box\n", ""), on_deleted=deleted.append)
    brev.ready_instances.add("box")
    brev.delete("box")
    assert brev._spawn.calls == [["delete", "box"]] and deleted == ["box"] and brev.ready_instances == set()


def test_start_and_copy_pass_their_arguments_and_timeouts():
    seen = []
    brev = scripted_brev()
    brev._spawn = lambda args, timeout, allow=None: seen.append((args, timeout)) or done(0, "ok")
    brev.start("box", timeout=42)
    brev.copy("box:/r", "/tmp/r", timeout=7)
    brev.copy("/tmp/x", "box:/x")
    assert seen == [(["start", "box"], 42), (["copy", "box:/r", "/tmp/r"], 7),
                    (["copy", "/tmp/x", "box:/x"], transport.FIRST_EXEC_TIMEOUT_S)]


def test_still_unauthorized_after_a_fresh_login_is_brev_not_logged_in():
    brev = scripted_brev((1, "", "Error: 401 Unauthorized"), (0, "logged in", ""), (1, "", "Error: 401 Unauthorized"))
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.code == "BREV_NOT_LOGGED_IN" and "after a fresh login" in failed.value.message
    assert [c[0] for c in brev._spawn.calls] == ["ls", "login", "ls"] and brev.logins == 1


def test_one_login_then_the_repeat_answers():
    brev = scripted_brev((1, "", "Error: 401 Unauthorized"), (0, "logged in", ""), (0, '{"workspaces": null}', ""))
    assert brev.ls() == []
    assert brev._spawn.calls[1] == ["login", "--token", TOKEN] and brev.logins == 1


def test_a_refused_login_is_login_failed_without_the_token():
    brev = scripted_brev((1, "", "Error: 401 Unauthorized"), (1, "", f"bad token {TOKEN}"))
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.code == "BREV_LOGIN_FAILED" and TOKEN not in failed.value.message
    assert "<redacted>" in failed.value.message


@pytest.mark.parametrize("token", ["", "   "])
def test_no_token_is_brev_not_logged_in_without_a_login(token):
    brev = scripted_brev((1, "", "Error: 401 Unauthorized"))
    brev.env["BREV_API_TOKEN"] = token
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.code == "BREV_NOT_LOGGED_IN" and brev.logins == 0 and len(brev._spawn.calls) == 1


@pytest.mark.parametrize("stdout, shape", [
    ('{"workspaces": [{"name": "a"}, "junk", {"name": "b"}]}', ["a", "b"]),
    ('[{"name": "old"}]', ["old"]),
    ('{"workspaces": null}', []),
])
def test_ls_reads_every_shape_brev_prints(stdout, shape):
    brev = scripted_brev((0, stdout, ""))
    assert [w["name"] for w in brev.ls()] == shape


@pytest.mark.parametrize("stdout", ["not json", '"a string"', "42"])
def test_ls_that_prints_something_else_is_brev_failed(stdout):
    brev = scripted_brev((0, stdout, ""))
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.code == "BREV_FAILED"


def test_instance_finds_by_exact_name():
    brev = scripted_brev((0, '[{"name": "box-2"}, {"name": "box"}]', ""), (0, '[{"name": "box-2"}]', ""))
    assert brev.instance("box") == {"name": "box"}
    assert brev.instance("box") is None


def test_exec_without_a_frame_is_transport_failed_and_a_read_is_retried_with_its_backoff():
    waits = []
    brev = scripted_brev((1, "", "ssh: connect to host: Connection reset"), (0, "{frame}", ""))
    brev.sleep, brev.backoff_s = waits.append, (3.0, 9.0)
    result = brev.exec("box", "echo hi", idempotent=True)
    assert (result.stdout, result.attempts, waits, brev.exec_calls) == ("hi\n", 2, [3.0], 2)
    brev = scripted_brev((1, "", "ssh: Connection reset"))
    with pytest.raises(TransportError) as failed:
        brev.exec("box", "echo hi")
    assert failed.value.code == "TRANSPORT_FAILED" and "Connection reset" in failed.value.message


def test_a_refused_key_is_not_retried():
    brev = scripted_brev((255, "", "dev@box: Permission denied (publickey,password)."))
    with pytest.raises(TransportError) as failed:
        brev.exec("box", "echo hi", idempotent=True)
    assert failed.value.code == "SSH_KEY_REJECTED" and len(brev._spawn.calls) == 1


def test_the_first_answer_marks_the_instance_ready_once():
    ready = []
    brev = scripted_brev((0, "{frame}", ""), (0, "{frame}", ""), on_ready=ready.append)
    assert brev.timeout_for("box") == transport.FIRST_EXEC_TIMEOUT_S
    brev.exec("box", "echo hi")
    assert ready == ["box"]                          # told at the first answer, not later
    brev.exec("box", "echo hi")
    assert ready == ["box"] and brev.timeout_for("box") == transport.EXEC_TIMEOUT_S


def test_exec_on_the_host_passes_brevs_host_flag():
    brev = scripted_brev((0, "{frame}", ""), (0, "{frame}", ""))
    brev.exec("box", "echo hi", host=True)
    brev.exec("box", "echo hi")
    assert brev._spawn.calls[0][:3] == ["exec", "--host", "box"] and brev._spawn.calls[1][:2] == ["exec", "box"]


@pytest.mark.parametrize("name", ["box\n", "box;x", "-box", "", "b" * 64, None])
def test_instance_names_that_are_not_plain_never_reach_brev(name):
    brev = scripted_brev()
    with pytest.raises(TaoBrevError) as failed:
        brev.exec(name, "echo hi")
    assert failed.value.code == "BAD_NAME" and brev._spawn.calls == []
    assert transport.check_instance("b" * 63) == "b" * 63


# -- what each failure says (the answer an agent reads) -----------------------------------
def logged_brev(*answers, **kw):
    logs = []
    brev = scripted_brev(*answers, **kw)
    brev.log = logs.append
    return brev, logs


def test_the_login_answers_say_what_happened():
    brev, logs = logged_brev((1, "", "Error: 401"), (0, "", ""), (0, "[]", ""), (1, "", "Error: 401"), (0, "", ""),
                             (0, "[]", ""))
    brev.ls()
    brev.ls()
    assert brev.logins == 2 and logs == ["brev: logging in headlessly with BREV_API_TOKEN"] * 2
    brev = scripted_brev((1, "", "Error: 401"))
    brev.env.pop("BREV_API_TOKEN")
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.message == "brev is not logged in (or its token expired) and BREV_API_TOKEN is not set"
    long_refusal = "x" * 700 + TOKEN + "y" * 10
    brev = scripted_brev((1, "", "Error: 401"), (1, "", long_refusal))
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.message == "`brev login` with BREV_API_TOKEN failed: ..." + ("x" * 700 + "<redacted>" + "y" * 10)[-600:]
    brev = scripted_brev((1, "", "Error: 401"), (0, "", ""), (1, "", "Error: 401 again"))
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.message == "brev still reports an auth failure after a fresh login: Error: 401 again"
    brev = scripted_brev((1, "You are currently logged out", ""), (0, "", ""), (1, "You are currently logged out", ""))
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.message.endswith("after a fresh login: You are currently logged out")


@pytest.mark.parametrize("call, message", [
    (lambda b: b.delete("box"), "brev delete box failed: boom"),
    (lambda b: b.start("box"), "brev start box failed: boom"),
    (lambda b: b.copy("a", "box:b"), "brev copy failed: boom"),
    (lambda b: b.ls(), "brev ls --json failed: boom"),
])
def test_a_failed_brev_command_names_itself_and_brevs_words(call, message):
    brev = scripted_brev((1, "out", "boom"))
    with pytest.raises(TaoBrevError) as failed:
        call(brev)
    assert failed.value.message == message


def test_ls_asks_for_json_and_says_what_it_got_instead():
    brev = scripted_brev((0, "Error: not json", ""), (0, '"x"', ""))
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.message == "brev ls --json did not print JSON: Error: not json"
    with pytest.raises(TaoBrevError) as failed:
        brev.ls()
    assert failed.value.message == "brev ls --json printed an unexpected shape"
    assert [c for c in brev._spawn.calls] == [["ls", "--json"], ["ls", "--json"]]


def test_no_answer_says_why_with_brevs_exit_and_a_bounded_tail():
    brev = scripted_brev((1, "", "e" * 700 + "Connection reset"))
    with pytest.raises(TransportError) as failed:
        brev.exec("box", "echo hi")
    assert failed.value.message == ("brev exec on 'box' returned no complete answer (exit 1): ..."
                                    + ("e" * 700 + "Connection reset")[-600:])
    assert failed.value.details["brev_exit"] == 1
    refusal = "r" * 400 + "dev@box: Permission denied (publickey)."
    for out, err in ((refusal, ""), ("", refusal)):   # ssh's refusal on either stream
        brev = scripted_brev((255, out, err))
        with pytest.raises(TransportError) as failed:
            brev.exec("box", "echo hi", idempotent=True)
        assert failed.value.code == "SSH_KEY_REJECTED" and failed.value.details["brev_exit"] == 255
        assert failed.value.message == "box's sshd refuses brev's ssh key: ..." + refusal[-300:]
        assert "box" in failed.value.fix and "NAME" not in failed.value.fix


def test_a_retried_read_says_so_once_per_wait():
    brev, logs = logged_brev((1, "", "reset 1"), (1, "", "reset 2"), (1, "", "reset 3"))
    brev.backoff_s = (2.0, 5.0)
    with pytest.raises(TransportError):
        brev.exec("box", "echo hi", idempotent=True)
    assert logs == ["brev exec on box: brev exec on 'box' returned no complete answer (exit 1): reset 1; "
                    "retrying in 2 s (attempt 2/3)",
                    "brev exec on box: brev exec on 'box' returned no complete answer (exit 1): reset 2; "
                    "retrying in 5 s (attempt 3/3)"]


def test_run_passes_its_options_and_raises_on_a_failing_command():
    brev = scripted_brev((1, "", "reset"), (0, "{frame}", ""))
    assert brev.run("box", "echo hi", idempotent=True).attempts == 2

    def failing(args, timeout, allow=None):
        nonce = re.search(r"TAOBREV[0-9a-f]{20}", args[-1]).group()
        return done(0, f"{nonce}:out\nout\n\n{nonce}:err\nboom\n\n{nonce}:rc 3\n")

    brev._spawn = failing
    with pytest.raises(Exception) as failed:
        brev.run("box", "false")
    assert failed.value.code == "REMOTE_COMMAND_FAILED" and failed.value.message == "command on box exited 3: boom"
    assert failed.value.details["exit_status"] == 3


def test_brevs_start_notice_is_matched_whatever_its_case():
    assert transport._auto_started("box", "INSTANCE BOX IS STARTING.") is True
    assert transport._auto_started("box", "Instance box is starting") is True
    assert transport._auto_started("box", "Instance box is startingly") is False
    assert transport._auto_started("b.x", "Instance bax is starting.") is False   # the name is literal


# -- framing and reading brev's pipes ---------------------------------------------------------
def test_the_last_complete_of_several_frames_wins():
    nonce = "TAOBREV" + "0" * 20
    frame_of = lambda out, rc: f"{nonce}:out\n{out}\n\n{nonce}:err\n\n{nonce}:rc {rc}\n"   # noqa: E731
    text = frame_of("one", 1) + frame_of("two", 2) + f"{nonce}:out\nthree, cut"
    assert transport.unframe(text, nonce) == (2, "two\n", "")
    assert transport.unframe(frame_of("one", 1) + frame_of("two", 2) + frame_of("three", 3), nonce) == (3, "three\n", "")


def test_reading_a_pipe_until_it_would_block_or_ends(monkeypatch):
    chunks = [b"ab", b"cd", BlockingIOError(), b"", OSError(9, "bad fd")]

    def read(fd, n):
        assert n >= 4096
        item = chunks.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    monkeypatch.setattr(transport.os, "read", read)
    buf = bytearray()
    assert transport._read_available(5, buf) is True and buf == b"abcd"   # would block: more may come
    assert transport._read_available(5, buf) is False                      # end of file
    assert transport._read_available(5, buf) is False and buf == b"abcd"  # a broken pipe ends it too


def test_a_process_writing_more_than_a_pipe_holds_is_read_whole(tmp_path):
    proc = subprocess.Popen(["sh", "-c", "for i in 1 2 3 4; do head -c 100000 /dev/zero; sleep 0.05; done; "
                             "head -c 70000 /dev/zero >&2"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    code, out, err = transport.run_until_exit(proc, 120)   # the bound is a hang guard only
    assert (code, len(out), len(err)) == (0, 400000, 70000)


def _exited(script):
    proc = subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    proc.wait()   # exited before it is read: all it wrote waits in the pipes
    return proc


def test_what_an_exited_process_left_in_its_pipes_is_read():
    assert transport.run_until_exit(_exited("printf out; printf err >&2; exit 3"), 120) == (3, "out", "err")


@pytest.mark.parametrize("pidfd", ["missing", "refused"])
def test_without_pidfd_the_exit_is_polled(monkeypatch, pidfd):
    def refused(pid):
        raise OSError(38, "Function not implemented")
    if pidfd == "missing":   # macOS, Pythons before 3.9
        monkeypatch.delattr(transport.os, "pidfd_open", raising=False)
    else:                    # Linux before 5.3, a seccomp filter
        monkeypatch.setattr(transport.os, "pidfd_open", refused)
    proc = subprocess.Popen(["sh", "-c", "sleep 0.2; printf done"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    assert transport.run_until_exit(proc, 120) == (0, "done", "")


def test_without_pidfd_an_exit_is_seen_while_a_child_holds_the_pipes(monkeypatch):
    monkeypatch.delattr(transport.os, "pidfd_open", raising=False)
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 0.3; exit 4"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:   # polled: the exit is seen although the sleep keeps the pipes open and silent (waiting would time out)
        assert transport.run_until_exit(proc, 20) == (4, "", "")
    finally:
        transport._kill_group(proc)


def test_an_interrupt_while_reading_kills_the_process_group(monkeypatch):
    proc = subprocess.Popen(["sh", "-c", "echo x; sleep 60"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)

    def interrupted(fd, buf):
        raise KeyboardInterrupt
    monkeypatch.setattr(transport.process, "_read_available", interrupted)
    monkeypatch.setattr(transport.os, "pidfd_open", lambda pid: (_ for _ in ()).throw(OSError(38, "no")))
    with pytest.raises(KeyboardInterrupt):
        transport.run_until_exit(proc, 20)
    assert proc.poll() is not None


def test_reading_a_process_leaves_no_descriptor_open():
    def open_fds():
        return set(os.listdir("/proc/self/fd"))
    before = open_fds()
    for _ in range(3):
        proc = _exited("printf x")
        transport.run_until_exit(proc, 120)
        proc.stdout.close()
        proc.stderr.close()
    assert open_fds() == before


def test_brevs_bytes_are_text_even_when_not_utf8():
    assert transport._text(bytearray(b"ok \xff\xfe end \xc3\xa9")) == "ok \ufffd\ufffd end \u00e9"


# -- the process plumbing, in process ----------------------------------------------------------
@pytest.mark.parametrize("script, expected", [
    ("echo out; echo err >&2; exit 7", (7, "out\n", "err\n")),
    ("printf 'a\\n\\nb'; printf 'e' >&2", (0, "a\n\nb", "e")),
    ("exit 0", (0, "", "")),
])
def test_a_framed_script_reports_its_status_and_streams_under_sh(script, expected):
    nonce = "TAOBREV" + "1" * 20
    done_sh = subprocess.run(["sh", "-c", transport.frame(script, nonce)], capture_output=True, text=True, timeout=60)
    assert done_sh.returncode == 0 and done_sh.stderr == ""
    assert transport.unframe("banner\n" + done_sh.stdout + "box\n", nonce) == expected


def test_brev_must_be_on_path(tmp_path):
    with pytest.raises(TaoBrevError) as failed:
        Brev(binary="brev", env={"PATH": str(tmp_path)}).path()
    assert (failed.value.code, failed.value.message) == ("BREV_NOT_FOUND", "`brev` is not on PATH")
    (tmp_path / "brev").write_text("#!/bin/sh\n")
    (tmp_path / "brev").chmod(0o755)
    assert Brev(binary="brev", env={"PATH": str(tmp_path)}).path() == str(tmp_path / "brev")


def test_a_known_secret_never_reaches_brevs_command_line_but_the_login_token_may(monkeypatch):
    seen = []
    real_popen = subprocess.Popen
    monkeypatch.setattr(transport.subprocess, "Popen", lambda argv, **kw: seen.append(argv) or real_popen(["true"], **kw))
    ngc = CREDENTIALS["NGC_KEY"]
    brev = Brev(binary="true", env={"PATH": "/usr/bin:/bin", "NGC_KEY": ngc, "BREV_API_TOKEN": TOKEN})
    with pytest.raises(TaoBrevError) as failed:
        brev._spawn(["exec", "box", f"echo {ngc}"], 30)
    assert failed.value.code == "SECRET_IN_COMMAND" and ngc not in failed.value.message and seen == []
    with pytest.raises(TaoBrevError):
        brev._spawn(["login", "--token", TOKEN], 30)   # only login --token may carry the token
    assert brev._spawn(["login", "--token", TOKEN], 30, allow=TOKEN).returncode == 0 and len(seen) == 1


def test_a_brev_that_does_not_answer_in_time_is_transport_timeout():
    brev = Brev(binary="sleep", env={"PATH": "/usr/bin:/bin"})
    with pytest.raises(TransportError) as failed:
        brev._spawn(["30"], 1)
    assert failed.value.code == "TRANSPORT_TIMEOUT" and failed.value.message == "`brev 30` did not answer within 1 s"
    assert failed.value.details["timeout_s"] == 1


def test_scripts_with_a_secret_are_refused_before_brev_runs():
    ngc = CREDENTIALS["NGC_KEY"]
    brev = scripted_brev()
    brev.env["NGC_KEY"] = ngc
    with pytest.raises(TaoBrevError) as failed:
        brev.exec("box", f"docker login -p {ngc}")
    assert failed.value.code == "SECRET_IN_COMMAND" and ngc not in failed.value.message
    with pytest.raises(TaoBrevError) as failed:
        transport.refuse_secrets("export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz0123", "remote command for box", {})
    assert failed.value.message == ("remote command for box holds a literal credential: line 1: HF_TOKEN=<literal> "
                                    "(inline credential assignment)")
    assert failed.value.details["findings"] == [{"kind": "assignment", "name": "HF_TOKEN", "line": 1,
                                                 "message": "line 1: HF_TOKEN=<literal> (inline credential assignment)"}]
    assert brev._spawn.calls == []
    transport.refuse_secrets("echo $HF_TOKEN", "x", {})   # a reference is fine


def test_exec_waits_as_long_as_the_instance_needs():
    seen = []
    brev = scripted_brev()
    answer = Scripted((0, "{frame}", ""), (0, "{frame}", ""), (0, "{frame}", ""))
    brev._spawn = lambda args, timeout, allow=None: seen.append(timeout) or answer(args, timeout)
    brev.exec("box", "echo hi")
    brev.exec("box", "echo hi")
    brev.exec("box", "echo hi", timeout=5)
    assert seen == [transport.FIRST_EXEC_TIMEOUT_S, transport.EXEC_TIMEOUT_S, 5] and brev.exec_calls == 3


def test_the_elapsed_time_comes_from_the_injected_clock():
    ticks = iter([10.0, 12.5])
    brev = scripted_brev((0, "{frame}", ""))
    brev.clock = lambda: next(ticks)
    assert brev.exec("box", "echo hi").elapsed_s == 2.5


def test_the_waits_come_from_the_environment_unless_given():
    assert Brev(env={transport.BACKOFF_ENV: "1,2"}).backoff_s == (1.0, 2.0)
    assert Brev(env={transport.BACKOFF_ENV: "1,2"}, backoff_s=(9.0,)).backoff_s == (9.0,)
    assert Brev(env={}).backoff_s == transport.BACKOFF_S


# -- what the transport refuses to send, and its settings ---------------------------------------
def test_a_remote_command_holding_a_known_value_is_refused_before_brev_runs(monkeypatch):
    value = "abcdefgh12345678zz"          # no token shape: only the value this process holds finds it
    monkeypatch.setenv("MY_SERVICE_TOKEN", value)
    brev = scripted_brev()
    with pytest.raises(TaoBrevError) as failed:
        brev.exec("box", f"echo {value}")
    assert failed.value.code == "SECRET_IN_COMMAND" and "remote command for box" in failed.value.message
    assert value not in failed.value.message and brev._spawn.calls == []
    with pytest.raises(TaoBrevError) as linted:          # a literal credential: the lint's advice names each
        brev.exec("box", "export NGC_KEY=zyxwvuts98765432 HF_TOKEN=qwertyuiop123456")
    assert linted.value.code == "SECRET_IN_COMMAND" and brev._spawn.calls == []
    assert linted.value.message == ("remote command for box holds a literal credential: line 1: NGC_KEY=<literal> "
                                    "(inline credential assignment); line 1: HF_TOKEN=<literal> (inline credential "
                                    "assignment)")


def test_a_value_known_only_to_the_callers_environment_is_refused():
    value = "abcdefgh12345678zz"
    with pytest.raises(TaoBrevError) as failed:
        transport.refuse_secrets(f"echo {value}", "submit command", {"MY_SERVICE_TOKEN": value})
    assert failed.value.code == "SECRET_IN_COMMAND" and failed.value.message.startswith("submit command")


def test_an_argument_holding_a_known_value_never_reaches_brev(monkeypatch):
    value = "abcdefgh12345678zz"
    brev = Brev(env={"PATH": "/usr/bin", "MY_SERVICE_TOKEN": value}, sleep=lambda s: None, log=lambda m: None)
    monkeypatch.setattr(transport.subprocess, "Popen", lambda *a, **k: pytest.fail("brev was started"))
    with pytest.raises(TaoBrevError) as failed:
        brev._spawn(["copy", f"/tmp/{value}", "box:x"], 5)
    assert failed.value.code == "SECRET_IN_COMMAND" and "`brev copy` command line" in failed.value.message


def test_brev_reads_no_input(monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def popen(argv, **kw):
        seen.update(kw)
        raise Stop
    monkeypatch.setattr(transport.subprocess, "Popen", popen)
    with pytest.raises(Stop):
        Brev(env={"PATH": "/usr/bin"}, binary="true", sleep=lambda s: None, log=lambda m: None)._spawn(["ls"], 5)
    assert seen["stdin"] is subprocess.DEVNULL and seen["start_new_session"] is True


@pytest.mark.parametrize("raw, waits", [("3600", (3600.0,)), ("0,3600", (0.0, 3600.0)), ("2.5", (2.5,))])
def test_backoff_accepts_waits_up_to_an_hour(raw, waits):
    assert transport.backoff_from_env({transport.BACKOFF_ENV: raw}) == waits


@pytest.mark.parametrize("raw", ["3600.5", "3601", "-1", "x", ",", "2,,5"])
def test_backoff_refuses_anything_else_and_says_how(raw):
    with pytest.raises(TaoBrevError) as failed:
        transport.backoff_from_env({transport.BACKOFF_ENV: raw})
    assert failed.value.code == "BAD_ARGUMENT" and repr(raw) in failed.value.message
    assert failed.value.fix == f"Unset {transport.BACKOFF_ENV} or set it like 2,5."


def test_the_last_wait_repeats_when_retries_outnumber_the_waits():
    slept = []
    brev = scripted_brev((255, "", "Connection reset by peer"), (255, "", "Connection reset by peer"),
                         (0, "{frame}", ""))
    brev.sleep = slept.append
    brev.backoff_s = (3.0,)
    assert brev.exec("box", "echo hi", idempotent=True).ok and slept == [3.0, 3.0]


def test_brevs_environment_drops_credential_named_variables():
    env = transport.brev_environment({"PATH": "/usr/bin", "HOME": "/h", "MY_SERVICE_TOKEN": "x" * 20,
                                      "clientSecret": "y" * 20, "NGC_KEY": "z" * 20, "LANG": "C",
                                      "SHORT_TOKEN": "abc"})   # too short to be searched: dropped by its name
    assert env == {"PATH": "/usr/bin", "HOME": "/h", "LANG": "C", "SSH_AUTH_SOCK": transport.NO_AGENT_SOCKET}


def test_a_bad_instance_name_is_named_in_the_error():
    with pytest.raises(TaoBrevError) as failed:
        transport.check_instance("box;rm")
    assert failed.value.code == "BAD_NAME" and "'box;rm'" in failed.value.message
