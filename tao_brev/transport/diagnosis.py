"""What a failed brev call says: an auth failure, the Brev API unreachable, a migrated account's
browser login, ssh refusing brev's key, brev starting a STOPPED instance by itself."""

from __future__ import annotations

import re
import subprocess

from ..errors import CODES, TransportError
from ..secrets import redact

# brev's own words when its token is missing/expired or it tries to prompt
# without a terminal (login.go); must not match ordinary remote output, which
# is never searched (only brev's stderr when no frame came back).
_AUTH_FAILURE = re.compile(r"\b401\b|unauthori[sz]ed|\bEOF\b|no tty|not a tty|"
                           r"not logged in|inappropriate ioctl|"
                           # auth.go shouldLogin's prompt (stdout): with the token gone and ssh failing,
                           # brev exec's error names only the failed lookup ("could not look up instance")
                           r"you are currently logged out", re.IGNORECASE)
# A Go HTTP client's transport error against the Brev API (`Get "https://brevapi.../workspaces": EOF`,
# `... read: connection reset by peer`, timeouts), or brev's HTTPResponseError text `URL STATUS BODY`
# (brev-cli pkg/store/http.go HTTPResponseError.Error) for a 5xx or 429: the API, not the login.
_API_TRANSIENT = re.compile(
    r'\b(?:Get|Post|Put|Patch|Delete|Head) "https?://[^"\s]+": (?:EOF|unexpected EOF|.*\bconnection reset\b|'
    r'.*\bi/o timeout\b|.*\bconnection refused\b|.*\bno such host\b|.*TLS handshake timeout|'
    r'.*context deadline exceeded|.*Client\.Timeout exceeded|http2: )'
    r'|\bhttps?://\S+ (?:429|50[0-9]) [A-Z]', re.IGNORECASE)
# brev-cli pkg/cmd/cmderrors/cmderrors.go DisplayAndHandleError: a NvidiaMigrationError makes brev run
# `brev login --auth nvidia` itself (stdin attached), which waits for a browser.
_NVIDIA_MIGRATION = re.compile(r"migrated to NVIDIA Auth|brev login --auth nvidia", re.IGNORECASE)
# ssh's words when sshd refuses brev's key: not a boot delay (brev's own wait for ssh,
# pkg/store/ssh.go SatisfactorySSHErrMessage, stops on it at once), so never retried.
_KEY_REJECTED = re.compile(r"Permission denied \(publickey[^)]*\)")


def _no_answer(instance: str, done: subprocess.CompletedProcess) -> TransportError:
    """The error for a ``brev exec`` that returned no frame: SSH_KEY_REJECTED when ssh
    said ``Permission denied (publickey)``, else TRANSPORT_FAILED with brev's stderr tail."""
    text = (done.stderr or "") + "\n" + (done.stdout or "")
    api = api_unreachable(done)
    if api is not None:
        return TransportError("BREV_API_UNREACHABLE", f"brev exec on {instance!r}: ssh failed and the Brev API did "
                              "not answer brev's instance lookup: " + redact.tail(api, 300), brev_exit=done.returncode)
    if _KEY_REJECTED.search(text):
        return TransportError("SSH_KEY_REJECTED", f"{instance}'s sshd refuses brev's ssh key: "
                              + redact.tail(done.stderr or done.stdout, 300),
                              CODES["SSH_KEY_REJECTED"].fix.replace("NAME", instance), brev_exit=done.returncode)
    return TransportError("TRANSPORT_FAILED", f"brev exec on {instance!r} returned no complete answer "
                          f"(exit {done.returncode}): " + redact.tail(done.stderr), brev_exit=done.returncode)


def _auth_failed(done: subprocess.CompletedProcess) -> bool:
    """brev failed for auth. Its errors go to stderr, or to stdout in some
    releases (cmderrors uses fmt.Println), so both are searched - but only
    when brev failed, and never stdout that holds a frame: a command that ran
    is not an auth failure and must not be repeated."""
    stdout = done.stdout or ""
    text = (done.stderr or "") + ("" if "TAOBREV" in stdout else stdout)
    return done.returncode != 0 and api_unreachable(done) is None and bool(_AUTH_FAILURE.search(text))


def api_unreachable(done: subprocess.CompletedProcess) -> str | None:
    """The line of a failed brev call that shows the Brev API itself did not answer (a Go
    transport error such as ``Get "https://.../workspaces": EOF``, a 5xx or 429), else None.
    Never an auth failure: brev's login prompt (``You are currently logged out``) wins."""
    if done.returncode == 0:
        return None
    stdout = done.stdout or ""
    text = (done.stderr or "") + "\n" + ("" if "TAOBREV" in stdout else stdout)
    if "currently logged out" in text.lower():
        return None
    return next((line.strip() for line in text.splitlines() if _API_TRANSIENT.search(line)), None)


def _auto_started(instance: str, brev_text: str) -> bool:
    """brev's own words (outside the frame) say it started the STOPPED instance
    (util.StartWorkspaceIfStopped: "Instance NAME is starting.")."""
    return bool(re.search(rf"\b{re.escape(instance)} is starting\b", brev_text, re.IGNORECASE))

