"""One brev process, read until it EXITS (not until its pipes close), every wait bounded."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time

KILL_WAIT_S = 5.0       # after SIGKILL of brev's group: how long to wait for it to be reaped
EXIT_POLL_S = 0.05      # without pidfd (macOS, Linux < 5.3): how often brev's exit is checked


def run_until_exit(proc: subprocess.Popen, timeout: float, stop_on=None) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``proc``, read until the PROCESS exits.

    brev's ssh config keeps a background master connection (``ControlMaster
    auto`` + ``ControlPersist 10m``, brevdev/brev-cli ``pkg/ssh/sshconfigurer.go``);
    the master is forked from the ssh that brev ran and can keep brev's stdout
    or stderr open long after brev exited. Waiting for end-of-file
    (``communicate()``) would wait for that child. So the pipes are read while
    brev runs; once brev has exited, everything it wrote is in the pipes: that
    is read without blocking, and the call ends. Every wait is bounded: past
    ``timeout`` seconds the process group is killed (:func:`_kill_group`) and
    ``subprocess.TimeoutExpired`` (with what was read as ``output`` / ``stderr``)
    is raised; an interrupt kills it too. ``stop_on``: a pattern that, once it
    appears in stderr, ends the call at once (the group is killed): brev waiting
    for something that never comes (a browser login).
    """
    assert proc.stdout is not None and proc.stderr is not None   # brev runs with both piped (Brev._spawn)
    deadline = time.monotonic() + timeout
    out, err = bytearray(), bytearray()
    pipes = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    selector = selectors.DefaultSelector()
    exit_fd = None
    try:
        for fd in pipes:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        try:   # readable when the process exits: no polling needed
            exit_fd = os.pidfd_open(proc.pid)
            selector.register(exit_fd, selectors.EVENT_READ)
        except (AttributeError, OSError):
            exit_fd = None
        while proc.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _kill_group(proc)
                raise subprocess.TimeoutExpired(proc.args, timeout, output=bytes(out), stderr=bytes(err))
            if stop_on is not None and stop_on.search(_text(err)):
                _kill_group(proc)
                break
            wait = remaining if exit_fd is not None else min(remaining, EXIT_POLL_S)
            for key, _events in selector.select(wait):
                if key.fd in pipes and not _read_available(key.fd, pipes[key.fd]):
                    selector.unregister(key.fd)   # end-of-file: nothing more from this pipe
        for fd, buf in pipes.items():   # brev has exited: what it wrote is in the pipes
            _read_available(fd, buf)
    except KeyboardInterrupt:   # Ctrl-C / SIGTERM: brev (and its ssh) must not outlive us
        _kill_group(proc)
        raise
    finally:
        selector.close()
        if exit_fd is not None:
            os.close(exit_fd)
        proc.stdout.close()
        proc.stderr.close()
    return proc.returncode, _text(out), _text(err)


def _read_available(fd: int, buf: bytearray) -> bool:
    """Append what can be read from ``fd`` now; False at end-of-file."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return True
        except OSError:
            return False
        if not chunk:
            return False
        buf.extend(chunk)


def _text(data: bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")


def _text_of(data) -> str:
    """Text of what a timed-out call had read (bytes, str or None)."""
    if data is None:
        return ""
    return data if isinstance(data, str) else _text(bytearray(data))


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL brev's process group (it runs in its own session) and reap brev,
    waiting at most KILL_WAIT_S: never for its pipes, which a detached child may hold."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=KILL_WAIT_S)
    except subprocess.TimeoutExpired:
        pass
