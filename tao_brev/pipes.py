"""A reader that stops reading (``| head -1``) ends a script quietly.

Python ignores SIGPIPE, so a write to a pipe whose reader left raises
``BrokenPipeError`` - a traceback, or a second failure while answering it.
The bundle's rule (references/error-codes.md): when stdout's reader is gone,
the script ends at once and silently, the way a process killed by SIGPIPE
ends (``cat``, ``grep``): no traceback, no message, the wait status of a
death by SIGPIPE (exit status 141 in a shell, -13 in ``subprocess``). What
the run did stays done: records are written before answers are printed.

Only stdout's own reader counts: a ``BrokenPipeError`` from a pipe to a child
process (``brev``) is an ordinary failure, so :func:`stdout_closed` asks the
kernel whether stdout's reader is gone before the run ends this way. Stderr
(progress) losing its reader is ignored: progress is optional.
"""

from __future__ import annotations

import os
import select
import signal
import sys


def stdout_closed(fd: int = 1) -> bool:
    """True when ``fd`` is a pipe whose reading end is closed (poll reports POLLERR)."""
    try:
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _fd, event in poller.poll(0))
    except (OSError, ValueError):
        return False


def end_as_sigpipe() -> None:
    """End this process now, as a death by SIGPIPE (nothing more is written anywhere)."""
    try:   # Python flushes stdout at exit: make that flush harmless should the signal be late
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
    except OSError:
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGPIPE])
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + signal.SIGPIPE)   # not reached: the signal ends the process


def write_stdout(text: str) -> None:
    """Write and flush ``text`` on stdout; a reader that left ends the process (:func:`end_as_sigpipe`)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        end_as_sigpipe()


def flush_stdout() -> None:
    """Flush what ``print`` buffered; a reader that left ends the process quietly."""
    write_stdout("")
