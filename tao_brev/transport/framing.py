"""The exec framing: a remote script wrapped to exit 0 with its stdout, stderr and status
between nonce markers, and the last complete frame read back (brev may run a command twice)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass
class RemoteResult:
    """What a remote command did: its real exit status, stdout, stderr (str)."""

    exit_code: int
    stdout: str
    stderr: str
    elapsed_s: float
    attempts: int = 1
    instance_started: bool = False   # brev started the STOPPED instance to run this command

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def frame(script: str, nonce: str) -> str:
    """Wrap ``script`` so the remote shell always exits 0 and reports the
    script's stdout, stderr and exit status between ``nonce`` markers (POSIX sh).

    The captures live in /dev/shm when it is writable (RAM), so a full disk
    on the instance does not silently empty the answer."""
    return (
        '__tb_t=/dev/shm; [ -d "$__tb_t" ] && [ -w "$__tb_t" ] || __tb_t="${TMPDIR:-/tmp}"; '
        '__tb_o=$(mktemp "$__tb_t/taobrev.XXXXXX") && __tb_e=$(mktemp "$__tb_t/taobrev.XXXXXX") '
        '|| { echo "mktemp failed" >&2; exit 0; }; '
        f"( {script}\n) </dev/null >\"$__tb_o\" 2>\"$__tb_e\"; __tb_rc=$?; "
        f"printf '%s\\n' '{nonce}:out'; cat \"$__tb_o\"; "
        f"printf '\\n%s\\n' '{nonce}:err'; cat \"$__tb_e\"; "
        f"printf '\\n%s %s\\n' '{nonce}:rc' \"$__tb_rc\"; "
        'rm -f "$__tb_o" "$__tb_e"; exit 0'
    )


def _last_frame(stdout: str, nonce: str) -> tuple[int, tuple[int, str, str]] | None:
    """(offset, (status, out, err)) of the LAST complete frame of ``nonce``.

    brev may run a command twice (its retry), so stdout can hold a partial
    or complete first run before the second; each run's frame is parsed on
    its own and the last complete one wins."""
    marker = f"{nonce}:out\n"
    tail = re.compile(rf"(.*)\n{nonce}:err\n(.*)\n{nonce}:rc (\d+)\n", re.DOTALL)
    starts = [m.start() for m in re.finditer(re.escape(marker), stdout)]
    for i in reversed(range(len(starts))):
        end = starts[i + 1] if i + 1 < len(starts) else len(stdout)
        match = tail.match(stdout, starts[i] + len(marker), end)
        if match:
            return starts[i], (int(match.group(3)), match.group(1), match.group(2))
    return None


def unframe(stdout: str, nonce: str) -> tuple[int, str, str] | None:
    """Parse the LAST complete frame of ``nonce`` in brev's stdout, or None."""
    found = _last_frame(stdout, nonce)
    return found[1] if found else None
