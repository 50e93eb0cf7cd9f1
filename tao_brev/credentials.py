"""How credential values reach the instance and the container without any argv.

The laptop's environment does not cross ``brev exec`` (ssh), a value on a
command line is readable with ``ps`` on both machines, and text piped into
``brev exec`` is read as instance names (and can be echoed in an error). The
carrier is therefore a FILE:

1. written locally with mode 0600 in a private temporary directory,
2. copied with ``brev copy`` (scp: only the two paths are on argv; scp keeps
   the 0600 mode) to ``~/.tao-cred-<job>-<random>`` on the instance,
3. read by the remote command (``docker run --env-file F`` or
   ``docker login --password-stdin < F``) and removed by that same command on
   every path (``trap 'rm -f F' EXIT``),
4. the local copy removed right after the copy (it exists only while ``brev
   copy`` runs). Its directory holds ``.owner``, locked (``flock``) by the
   writing process for as long as it lives: a process killed before its
   cleanup (SIGKILL) leaves the directory unlocked, and the next run of any
   script removes it (:func:`sweep_local`, called by ``cli.run``; a ``--help``,
   which only prints, does not list ``$TMPDIR`` for it).

Residual exposure (cannot be avoided, kept small): ``docker inspect`` on the
instance shows a container's environment to whoever can run docker there;
docker keeps the NGC login base64-encoded in ``~/.docker/config.json`` on the
instance (like any ``docker login``); ``brev login --token`` takes its token on
argv (brev's only headless login, used only after an auth failure).
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import sys
import tempfile
import uuid
from collections import namedtuple
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .errors import TaoBrevError
from .remote import check_env_name, rpath

if TYPE_CHECKING:   # an annotation only: the sweep every run starts with needs no transport
    from .transport import Brev

NGC_USER = "$oauthtoken"   # NGC's registry user is this literal string, never expanded
NGC_REGISTRY = "nvcr.io"
NGC_KEY_ENV = "NGC_KEY"
NGC_KEY_FILE_MISSING = "TAO_NGC_KEY_FILE_MISSING"   # printed by ngc_login_command when the file is gone
NGC_KEY_FILE_EMPTY = "TAO_NGC_KEY_FILE_EMPTY"       # printed by ngc_login_command when the file arrived empty


RemoteSecretFile = namedtuple("RemoteSecretFile", ["path"])
RemoteSecretFile.__doc__ = "A credential file on the instance: its ``~/`` path, removed after use."


def collect(env: Mapping[str, str], names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Values of ``names`` from the local ``env``; MISSING_CREDENTIAL names the absent ones."""
    values, missing = {}, []
    for name in names:
        check_env_name(name)
        value = env.get(name)
        if value is None or value == "":
            missing.append(name)
        else:
            values[name] = value
    if missing:
        raise TaoBrevError("MISSING_CREDENTIAL", f"not set in this environment: {', '.join(missing)}",
                           f"export {' '.join(missing)} in the shell that runs the script (never on its command line)")
    for name, value in values.items():
        if "\n" in value or "\r" in value:
            raise TaoBrevError("BAD_ARGUMENT", f"the value of {name} holds a newline; docker --env-file cannot carry it")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:   # os.environ's PEP 383 surrogates: bytes that are not UTF-8
            raise TaoBrevError("BAD_ARGUMENT", f"the value of {name} is not UTF-8 text; docker --env-file refuses "
                               "such a file (docker/cli opts/file.go: 'contains invalid utf8 bytes', and that "
                               "error prints the line's bytes)",
                               f"Export {name} as UTF-8 text (e.g. its base64), then submit again") from None
    return values


def env_file_text(values: dict[str, str]) -> str:
    """Docker ``--env-file`` format: one ``NAME=value`` a line, value taken verbatim."""
    return "".join(f"{name}={value}\n" for name, value in values.items())


LOCAL_PREFIX = "tao-cred-"
OWNER = ".owner"


def push(brev: Brev, instance: str, label: str, content: str) -> RemoteSecretFile:
    """Copy ``content`` to a fresh 0600 file on ``instance``; return its path.

    The remote command that reads it must remove it (``trap 'rm -f F' EXIT``).
    """
    remote = RemoteSecretFile(f"~/.tao-cred-{label}-{uuid.uuid4().hex[:10]}")

    local_dir = tempfile.mkdtemp(prefix=LOCAL_PREFIX)
    owner = None
    try:
        # Locked before it is named: a concurrent sweep_local (any script's start) acts only on a
        # directory whose .owner exists, so it never sees this one's unlocked.
        unnamed = os.path.join(local_dir, OWNER + ".new")
        owner = os.open(unnamed, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        fcntl.flock(owner, fcntl.LOCK_EX)   # released by the kernel however this process ends
        os.rename(unnamed, os.path.join(local_dir, OWNER))
        local = os.path.join(local_dir, "cred")
        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
        # scp's remote side is relative to the home directory: "NAME:.tao-cred-..."
        brev.copy(local, f"{instance}:{remote.path[2:]}")
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)
        if owner is not None:
            os.close(owner)
    return remote


def _temp_dir() -> str:
    """The directory ``tempfile.gettempdir()`` names, without importing tempfile (and shutil,
    bz2, lzma, random...) on every start, which sweep_local runs in: tempfile's own answer when
    it is loaded already; else the first of its candidates ($TMPDIR, $TEMP, $TMP, /tmp,
    /var/tmp, /usr/tmp, then the current directory) that is a directory this process may write."""
    if "tempfile" in sys.modules:
        return sys.modules["tempfile"].gettempdir()
    candidates = [os.environ.get(name) for name in ("TMPDIR", "TEMP", "TMP")]
    for candidate in [c for c in candidates if c] + ["/tmp", "/var/tmp", "/usr/tmp"]:
        if os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return os.path.abspath(candidate)
    return os.getcwd()


def sweep_local(tmp_dir: str | None = None) -> list[str]:
    """Remove the local credential directories (``$TMPDIR/tao-cred-*``) of this user whose
    writing process is gone (their ``.owner`` lock is free). Returns the removed paths;
    never raises. A directory without ``.owner`` holds no credential yet and is left alone."""
    removed: list[str] = []
    base = tmp_dir or _temp_dir()
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith(LOCAL_PREFIX)]
    except OSError:
        return removed
    for entry in entries:
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            fd = os.open(os.path.join(entry.path, OWNER), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)   # a FIFO: no wait
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # BlockingIOError: its writer is alive

                shutil.rmtree(entry.path, ignore_errors=True)
                removed.append(entry.path)
            finally:
                os.close(fd)
        except OSError:
            pass
    return removed


def discard(brev: Brev, instance: str, secret: RemoteSecretFile) -> bool:
    """Best-effort ``rm -f`` of a credential file whose consuming command never
    ran (its round trip failed in transport, so its trap never fired). True
    when the instance confirmed the removal; never raises."""
    try:
        return brev.exec(instance, f"rm -f {rpath(secret.path)}", timeout=60, idempotent=True).ok
    except TaoBrevError:
        return False


# -- NGC registry login ----------------------------------------------------------
def ngc_key(env: Mapping[str, str]) -> str | None:
    """``NGC_KEY`` from the local ``env``, or None when unset or blank.

    Raises BAD_ARGUMENT for a value with a newline: ``docker login
    --password-stdin`` takes the whole of stdin as the password, minus one
    trailing newline (docker/cli ``cli/command/registry/login.go``).
    """
    value = (env.get(NGC_KEY_ENV) or "").strip()
    if not value:
        return None
    if "\n" in value or "\r" in value:
        raise TaoBrevError("BAD_ARGUMENT", f"the value of {NGC_KEY_ENV} holds a newline; an NGC API key is one line",
                           f"Export {NGC_KEY_ENV} again with the key alone (nvapi-...).")
    return value


def push_ngc_key(brev: Brev, instance: str, env: Mapping[str, str]) -> RemoteSecretFile | None:
    """Copy ``NGC_KEY`` to a fresh 0600 file on ``instance`` (see :func:`push`);
    None when the key is not set. The command that reads it must start with
    :func:`remove_on_exit`."""
    key = ngc_key(env)
    return push(brev, instance, "ngc", key) if key else None


def remove_on_exit(secret: RemoteSecretFile) -> str:
    """``trap 'rm -f FILE' EXIT``: the remote shell removes the file when the
    command ends, on every path (success, failure, early exit)."""
    return f"trap {shlex.quote('rm -f ' + rpath(secret.path))} EXIT"


def ngc_login_command(secret: RemoteSecretFile) -> str:
    """``docker login nvcr.io -u '$oauthtoken' --password-stdin < FILE`` (remote sh).

    NGC's registry user is the literal ``$oauthtoken``: single quotes keep the
    remote shell from expanding it (NGC docs, "Accessing the NGC Container
    Registry"; a double-quoted ``"$oauthtoken"`` expands to nothing). The key
    goes on stdin from the file, never on argv. When the file is gone (an
    earlier run of the same command consumed it), prints
    :data:`NGC_KEY_FILE_MISSING`; when it arrived empty (the copy did not deliver
    the key), :data:`NGC_KEY_FILE_EMPTY` - both fail without calling docker, whose
    answer to an empty stdin (``Cannot perform an interactive login from a non TTY
    device``) would hide the cause.
    """
    path = rpath(secret.path)
    return (f"if [ -s {path} ]; then docker login {NGC_REGISTRY} -u {shlex.quote(NGC_USER)} --password-stdin "
            f"< {path}; elif [ -f {path} ]; then echo {NGC_KEY_FILE_EMPTY}; false; "
            f"else echo {NGC_KEY_FILE_MISSING}; false; fi")
