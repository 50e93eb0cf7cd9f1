"""The transport's timeouts, retries and backoff (brev's own waits cited)."""

from __future__ import annotations

from ..errors import TaoBrevError

FIRST_EXEC_TIMEOUT_S = 600.0   # a fresh instance: sshd start + first contact (seed: ">= 600 s")
EXEC_TIMEOUT_S = 180.0         # an instance already proven exec-ready
BREV_TIMEOUT_S = 60.0          # ls, login, start/stop/delete requests
READ_RETRIES = 2               # extra attempts for idempotent commands after a transport failure
BACKOFF_S = (2.0, 5.0)         # waits before those attempts
BACKOFF_ENV = "TAO_BREV_RETRY_BACKOFF_S"   # overrides BACKOFF_S: "2,5", or "0" in tests
API_RETRIES = 2           # extra attempts of a brev call the Brev API answered with a transient error
# brev-cli pkg/cmd/exec/exec.go runExecCommand on a STOPPED instance: util.StartWorkspaceIfStopped
# (PollUntil RUNNING, pollTimeout 10 min), PollUntil RUNNING again (10 min), then
# util.WaitForSSHToBeAvailable (up to 41 probes of `ssh -o ConnectTimeout=10`, 1 s apart): brev's own
# start wait before it runs the command.
BREV_START_WAIT_S = 2 * 600.0 + 41 * (10.0 + 1.0)


def backoff_from_env(env: dict[str, str]) -> tuple[float, ...]:
    """The waits between read retries: ``$TAO_BREV_RETRY_BACKOFF_S`` or BACKOFF_S."""
    raw = (env.get(BACKOFF_ENV) or "").strip()
    if not raw:
        return BACKOFF_S
    try:
        waits = tuple(float(part) for part in raw.split(","))
    except ValueError:
        waits = ()
    if not waits or not all(0 <= w <= 3600 for w in waits):
        raise TaoBrevError("BAD_ARGUMENT", f"{BACKOFF_ENV} must be seconds between 0 and 3600, comma-separated "
                           f"(e.g. 2,5); got {raw!r}", f"Unset {BACKOFF_ENV} or set it like 2,5.")
    return waits
