"""Who brev runs as: its environment (an API key in it, an ssh-agent never started) and the one
headless ``brev login --token`` after an auth failure."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING, Callable

from ..errors import TaoBrevError
from ..secrets import guard as known_secrets, redact
from .diagnosis import _auth_failed
from .settings import BREV_TIMEOUT_S

API_KEY_PREFIX = "bak-"   # brev-cli pkg/auth/auth.go BrevAPIKeyPrefix (PR #369)
# brev-cli pkg/cmd/exec/exec.go runSSHWithTimeout runs `if [ -z "$SSH_AUTH_SOCK" ]; then eval $(ssh-agent -s)`
# before each ssh and never kills that agent. Any NON-EMPTY value skips it; brev's ssh config names its
# key file (pkg/ssh/ssh.go: IdentityFile, IdentitiesOnly yes), so no agent is needed. A path that cannot
# exist (a child of /dev/null): ssh's agent lookup fails quietly (debug level) and no agent is ever started.
NO_AGENT_SOCKET = "/dev/null/tao-brev-no-ssh-agent"


def brev_environment(env: dict[str, str]) -> dict[str, str]:
    """The environment ``brev`` runs with: ours minus every credential variable
    (NGC, AWS, HF, W&B keys and the Brev token itself, which reaches brev only
    through ``brev login --token``), plus two facts of brev:

    * ``BREV_API_KEY`` = :func:`api_key` when one is known: brev reads it from its
      environment (brev-cli PR #464), so an API key never needs a command line;
    * ``SSH_AUTH_SOCK`` = NO_AGENT_SOCKET when ours is unset or empty: brev's exec
      starts (and leaks) one ssh-agent per call otherwise (exec.go runSSHWithTimeout).
    """
    secret = set(known_secrets.values(env).values())
    out = {name: value for name, value in env.items()
           if name not in secret and not known_secrets.is_credential_env_name(name)}
    key = api_key(env)
    if key:
        out["BREV_API_KEY"] = key
    if not (env.get("SSH_AUTH_SOCK") or "").strip():
        out["SSH_AUTH_SOCK"] = NO_AGENT_SOCKET
    return out


def api_key(env: dict[str, str]) -> str | None:
    """The Brev API key: ``BREV_API_KEY``, else a ``bak-`` value in ``BREV_API_TOKEN``
    (brev-cli pkg/auth/auth.go IsBrevAPIKey: the prefix after trimming), else None."""
    for name in ("BREV_API_KEY", "BREV_API_TOKEN"):
        value = (env.get(name) or "").strip()
        if value and (name == "BREV_API_KEY" or value.startswith(API_KEY_PREFIX)):
            return value
    return None



class LoginMixin:
    """The login half of :class:`tao_brev.transport.Brev` (its ``env``, ``log``, ``logins``, ``_spawn``)."""

    if TYPE_CHECKING:   # Brev's fields and process seam, which this half uses
        env: dict[str, str]
        log: Callable[[str], None]
        logins: int

        def _spawn(self, args: list[str], timeout: float,
                   allow: str | None = None) -> subprocess.CompletedProcess[str]: ...

    def _with_login(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Run brev; on an auth failure log in once with BREV_API_TOKEN and repeat once.
        With an API key (:func:`api_key`: brev reads it from its environment, PR #464)
        there is nothing to log in with: BREV_API_KEY_REJECTED."""
        done = self._spawn(args, timeout)
        if _auth_failed(done):
            if api_key(self.env):
                raise TaoBrevError("BREV_API_KEY_REJECTED", f"`brev {args[0]}` reports an auth failure with the "
                                   "Brev API key in its environment: " + redact.tail(done.stderr or done.stdout))
            self.login()
            done = self._spawn(args, timeout)
            if _auth_failed(done):
                raise TaoBrevError("BREV_NOT_LOGGED_IN", "brev still reports an auth failure after a fresh login: "
                                   + redact.tail(done.stderr or done.stdout))
        return done

    def login(self) -> None:
        """``brev login --token $BREV_API_TOKEN`` (headless). Raises
        BREV_NOT_LOGGED_IN without a token, BREV_LOGIN_FAILED when refused."""
        token = self.env.get("BREV_API_TOKEN", "").strip()
        if api_key(self.env):   # never `brev login --token bak-...` (LoginWithToken saves it as a refresh token)
            raise TaoBrevError("BREV_API_KEY_REJECTED", "brev reports an auth failure with the Brev API key in "
                               "its environment (BREV_API_KEY; a bak- key is never passed to --token)")
        if not token:
            raise TaoBrevError("BREV_NOT_LOGGED_IN", "brev is not logged in (or its token expired) "
                               "and BREV_API_TOKEN is not set")
        self.log("brev: logging in headlessly with BREV_API_TOKEN")
        self.logins += 1
        done = self._spawn(["login", "--token", token], BREV_TIMEOUT_S, allow=token)
        if done.returncode != 0:
            raise TaoBrevError("BREV_LOGIN_FAILED", "`brev login` with BREV_API_TOKEN failed: " + redact.tail(done.stderr, 600, token))

