"""Progress lines of a transfer or a verification (``[upload] 3/15 files, 1.0/9.0 MiB``), on stderr by default."""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional


def stderr(line: str) -> None:
    """The default progress sink: one line on stderr, flushed."""
    print(line, file=sys.stderr, flush=True)


class Progress:
    """Throttled progress lines (at most one a second, plus the last)."""

    def __init__(self, emit: Optional[Callable[[str], None]], verb: str, files: int, total: int):
        self.emit, self.verb, self.files, self.total = emit, verb, files, total
        self.done_files = 0
        self.done_bytes = 0
        self.lock = threading.Lock()
        self.last = 0.0

    def add(self, nbytes: int = 0, files: int = 0) -> None:
        if self.emit is None:
            return
        with self.lock:
            self.done_bytes += nbytes
            self.done_files += files
            now = time.monotonic()
            if now - self.last >= 1.0:
                self.last = now
                self._line(self.emit)

    def finish(self) -> None:
        if self.emit is not None:
            self._line(self.emit)

    def _line(self, emit: Callable[[str], None]) -> None:
        emit(f"[{self.verb}] {self.done_files}/{self.files} files, "
             f"{self.done_bytes / 2**20:.1f}/{self.total / 2**20:.1f} MiB")
