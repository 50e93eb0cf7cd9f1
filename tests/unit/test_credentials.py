"""credentials in process: values reach the instance in a copied 0600 file only, never on argv;
the local copy is gone once brev copy returns; a killed run's leftovers are swept."""

from __future__ import annotations

import fcntl
import os
import re
import stat

import pytest

from tao_brev import credentials
from tao_brev.errors import TaoBrevError
from tests.unit.leaks import SECRETS, assert_never_sent


def test_collect_names_the_missing_variables_and_never_a_value():
    with pytest.raises(TaoBrevError) as raised:
        credentials.collect({"HF_TOKEN": SECRETS["HF_TOKEN"], "WANDB_API_KEY": ""}, ["HF_TOKEN", "WANDB_API_KEY"])
    exc = raised.value
    assert exc.code == "MISSING_CREDENTIAL" and "WANDB_API_KEY" in exc.message and "HF_TOKEN" not in exc.message
    assert SECRETS["HF_TOKEN"] not in exc.message + exc.fix


def test_a_value_docker_env_file_cannot_carry_is_bad_input_without_the_value():
    value = SECRETS["HF_TOKEN"] + "\nX=1"
    with pytest.raises(TaoBrevError) as raised:
        credentials.collect({"HF_TOKEN": value}, ["HF_TOKEN"])
    assert raised.value.code == "BAD_ARGUMENT" and value.splitlines()[0] not in raised.value.message


def test_a_bad_variable_name_is_refused():
    with pytest.raises(TaoBrevError) as raised:
        credentials.collect({"A B": "x" * 20}, ["A B"])
    assert raised.value.exit_code == 2


def test_the_env_file_is_one_name_value_a_line_verbatim():
    assert credentials.env_file_text({"A": "x=y z", "B": "'q'"}) == "A=x=y z\nB='q'\n"


def test_push_copies_a_0600_file_whose_path_alone_is_on_the_command_line(ctx, fake_brev):
    seen = {}

    def copy(call):
        local = call.args[1]
        seen.update(path=local, text=open(local).read(), mode=stat.S_IMODE(os.stat(local).st_mode),
                    dir=os.listdir(os.path.dirname(local)))
        return "", "", 0
    fake_brev.expect("copy", re.compile(r"/.+/cred"), re.compile(r"box:\.tao-cred-job1-[0-9a-f]{10}"), answer=copy)
    secret = credentials.push(ctx.brev, "box", "job1", "HF_TOKEN=" + SECRETS["HF_TOKEN"] + "\n")
    assert re.fullmatch(r"~/\.tao-cred-job1-[0-9a-f]{10}", secret.path)
    assert seen["text"] == "HF_TOKEN=" + SECRETS["HF_TOKEN"] + "\n" and seen["mode"] == 0o600
    assert sorted(seen["dir"]) == [".owner", "cred"]     # locked by its writer while brev copy runs
    assert not os.path.exists(os.path.dirname(seen["path"]))   # gone once the copy returned
    assert_never_sent(fake_brev)


def test_a_failed_copy_raises_and_leaves_no_local_copy(ctx, fake_brev):
    paths = []
    fake_brev.expect("copy", re.compile(".+"), re.compile("box:.+"),
                     answer=lambda call: (paths.append(call.args[1]), ("", "scp: Connection closed\n", 1))[1])
    with pytest.raises(TaoBrevError):
        credentials.push(ctx.brev, "box", "job1", "K=" + SECRETS["WANDB_API_KEY"])
    assert paths and not os.path.exists(os.path.dirname(paths[0]))
    assert_never_sent(fake_brev)


def leftover(base, locked: bool | None):
    """A credential dir a run left: ``locked`` (its writer alive), unlocked (killed), None (no .owner yet)."""
    path = base / f"{credentials.LOCAL_PREFIX}{len(os.listdir(base))}"
    path.mkdir()
    (path / "cred").write_text("K=v")
    fd = None
    if locked is not None:
        fd = os.open(path / credentials.OWNER, os.O_WRONLY | os.O_CREAT, 0o600)
        if locked:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            os.close(fd)
            fd = None
    return path, fd


def test_sweep_removes_only_the_dirs_whose_writer_is_gone(tmp_path):
    killed, _ = leftover(tmp_path, locked=False)
    alive, fd = leftover(tmp_path, locked=True)
    unnamed, _ = leftover(tmp_path, locked=None)
    other = tmp_path / "not-ours"
    other.mkdir()
    try:
        removed = credentials.sweep_local(str(tmp_path))
    finally:
        os.close(fd)
    assert removed == [str(killed)] and not killed.exists()
    assert alive.exists() and unnamed.exists() and other.exists()


def test_discard_asks_the_instance_to_remove_the_file_and_says_whether_it_did(ctx, fake_brev):
    gone = credentials.RemoteSecretFile("~/.tao-cred-job1-0123456789")
    rm = fake_brev.expect_exec("box", 'rm -f "$HOME"/.tao-cred-job1-0123456789')
    assert credentials.discard(ctx.brev, "box", gone) is True and rm.used == 1
    fake_brev.expect_exec("box", "rm -f", raw=True, stderr="ssh: connect to host box: Connection refused\n", exit=255,
                          times=3)
    assert credentials.discard(ctx.brev, "box", gone) is False   # never raises


def test_the_ngc_login_reads_the_key_from_the_file_with_the_literal_oauthtoken_user():
    secret = credentials.RemoteSecretFile("~/.tao-cred-ngc-0123456789")
    command = credentials.ngc_login_command(secret)
    assert "docker login nvcr.io -u '$oauthtoken' --password-stdin < \"$HOME\"/.tao-cred-ngc-0123456789" in command
    assert credentials.NGC_KEY_FILE_MISSING in command and credentials.NGC_KEY_FILE_EMPTY in command
    assert credentials.remove_on_exit(secret) == "trap 'rm -f \"$HOME\"/.tao-cred-ngc-0123456789' EXIT"


def test_the_ngc_key_is_one_line_or_bad_input(ctx, fake_brev):
    assert credentials.ngc_key({"NGC_KEY": "  "}) is None
    assert credentials.push_ngc_key(ctx.brev, "box", {}) is None and fake_brev.calls == []
    with pytest.raises(TaoBrevError) as raised:
        credentials.ngc_key({"NGC_KEY": SECRETS["NGC_KEY"] + "\nmore"})
    assert raised.value.code == "BAD_ARGUMENT" and SECRETS["NGC_KEY"] not in raised.value.message
