"""Facts of today's brev that the simulated ``brev`` (brev_sim.py) follows, each
beside the brev-cli source it comes from (function names; later PRs by number):

* ``pkg/cmd/exec/exec.go`` runSSHWithTimeout: ``if [ -z "$SSH_AUTH_SOCK" ]; then
  eval $(ssh-agent -s) > /dev/null; fi && ssh ...``: every ssh of ``brev exec``
  (the first one and the one after its lookup) starts a daemonised ssh-agent when
  SSH_AUTH_SOCK is unset or empty, and nothing kills it (:func:`maybe_start_agent`).
* API keys: ``brev login --api-key KEY --org-id ORG`` (``pkg/cmd/login/login.go``
  doApiKeyLogin, ``pkg/auth/auth.go`` LoginWithAPIKey; PR #369) and ``BREV_API_KEY``
  read from the environment (PR #464). With a key, ``brev ls`` lists the whole org
  (``pkg/cmd/ls/ls.go`` RunWorkspaces: ``cliAuth.IsAPIKey()``), teammates' instances
  included (:func:`org_rows`).
* ``pkg/cmd/cmderrors/cmderrors.go`` DisplayAndHandleError: a migrated account
  (``pkg/store/user.go`` GetCurrentUser -> NvidiaMigrationError) makes brev print
  "This account has been migrated to NVIDIA Auth..." and run ``brev login --auth
  nvidia``, which waits for a browser (:func:`nvidia_migration`).
* ``pkg/store/http.go`` HTTPResponseError.Error / Go's net/http: what a Brev API
  that does not answer looks like (:data:`API_EOF`, :func:`api_status_error`).
"""

from __future__ import annotations

import os
import sys
import time

from simstate import pid_alive

AGENT_MARK = "sim-ssh-agent"          # in the argv of a simulated leaked ssh-agent
API_KEY_PREFIX = "bak-"               # pkg/auth/auth.go BrevAPIKeyPrefix
MISSING_ORG = "api key auth requires an org id; run brev login --api-key <api-key> --org-id <org-id>"  # auth.go
API_URL = "https://brevapi.us-west-2-prod.control-plane.brev.dev"                  # pkg/config/config.go
MIGRATED = "\n This account has been migrated to NVIDIA Auth. Attempting to log in with NVIDIA account..."


def api_eof(path: str = "/api/organizations/org-sim/workspaces") -> str:
    """Go net/http's error for a connection the API closed: ``Get "URL": EOF``."""
    return f'Get "{API_URL}{path}": EOF'


def api_status_error(status: str = "503 Service Unavailable",
                     path: str = "/api/organizations/org-sim/workspaces") -> str:
    """brev's HTTPResponseError text without a JSON body: ``URL STATUS BODY``."""
    return f"{API_URL}{path} {status} upstream connect error"


def maybe_start_agent(world) -> int | None:
    """runSSHWithTimeout's ``eval $(ssh-agent -s)`` when SSH_AUTH_SOCK is unset or empty:
    a daemon detached from brev (ssh-agent forks into the background), recorded in the state."""
    import subprocess
    if os.environ.get("SSH_AUTH_SOCK"):
        return None
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)", AGENT_MARK, str(world.root)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    with world.edit_state() as state:
        state.setdefault("ssh_agents", []).append(agent.pid)
    return agent.pid


def agent_alive(pid: int | None, root) -> bool:
    """``pid`` is a live simulated ssh-agent of the world at ``root`` (not a reused pid)."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = fh.read().split(b"\0")
    except OSError:
        return False
    return AGENT_MARK.encode() in argv and str(root).encode() in argv


def env_api_key_problem(auth: dict) -> tuple[bool, str | None]:
    """(an API key from the environment is in use, its error or None): BREV_API_KEY (PR #464)."""
    key = (os.environ.get("BREV_API_KEY") or "").strip()
    if not key:
        return False, None
    if not key.startswith(API_KEY_PREFIX) or key != auth.get("api_key"):
        return True, f"{API_URL}/api/organizations/{auth.get('org_id') or 'org-sim'}/workspaces 401 Unauthorized"
    return True, None


def api_key_mode(auth: dict) -> bool:
    """Calls authenticate with an API key: BREV_API_KEY in the environment (PR #464) or one
    saved by ``brev login --api-key`` (auth.go IsAPIKeyAuthStore)."""
    return bool((os.environ.get("BREV_API_KEY") or "").strip()) or bool(auth.get("saved_api_key"))


def login_api_key(auth: dict, key: str, org_id: str | None, other_flags: bool) -> str:
    """login.go doApiKeyLogin + auth.go LoginWithAPIKey; returns the success line, raises ValueError."""
    if other_flags:
        raise ValueError("api-key cannot be used with token, skip-browser, email, or auth flags")
    key = key.strip()
    if not (org_id or "").strip():
        raise ValueError(MISSING_ORG)
    if not key.startswith(API_KEY_PREFIX):
        raise ValueError(f"api key must start with {API_KEY_PREFIX}")
    auth.update(saved_api_key=key, org_id=org_id.strip(), logged_in=True)
    return f"API key saved for org {org_id.strip()}"


def org_rows(state: dict, api_key: bool, show_all: bool) -> list[dict]:
    """Teammates' instances (``Simulator.add_org_instance``): listed by ``brev ls`` only with an
    API key or ``--all`` (ls.go RunWorkspaces; a user token lists FilterForUserWorkspaces)."""
    if not (api_key or show_all):
        return []
    return [dict(row) for row in state.get("org_instances") or []]


def nvidia_migration(auth: dict, hang_s: float) -> bool:
    """cmderrors.go: the migration line on stderr, then ``brev login --auth nvidia`` (stdout:
    the login link) waits for a browser that never comes. Returns False for other accounts."""
    if not auth.get("nvidia_migrated"):
        return False
    sys.stderr.write(MIGRATED + "\n")
    sys.stderr.flush()
    sys.stdout.write("Login here: https://login.nvidia.com/device?code=SIM-CODE\n")
    sys.stdout.flush()
    time.sleep(hang_s)
    return True


def shared_name(state: dict, name: str) -> bool:
    """util.go selectWorkspaceByNameOrID (API key auth): the org holds another instance of this
    name - brev's lookup then fails with "multiple instances found with id/name NAME"."""
    return api_key_mode(state["auth"]) and any(row.get("name") == name and row.get("status") != "FAILURE"
                                               for row in state.get("org_instances") or [])
