"""What a verb needs from the outside world: the environment, the clock, the state stores and
brev. Scripts build one once their arguments are read (``cli.Context`` hands it on); tests build
their own (``env``, ``sleep``, ``clock``, a ``Brev`` of their own).

The verbs' other link to the run, ``run_state``'s ``say``, ``warn``, ``note_job``,
``note_state`` and ``deferred_interrupts``, is handed on here too (one import line a verb)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from .secrets import values as known_secrets
from .records import RecordStore, now_iso, state_root
from .run_state import deferred_interrupts, note_instance_started, note_job, note_state, say, warn  # noqa: F401
from .sidecar import SidecarStore
from .transport import Brev


class Context:
    """The service locator of a run: ``env`` (default: a copy of ``os.environ``; its secret
    values are redacted from every output from now on), ``sleep`` and ``clock`` (seconds),
    and the stores and brev made from them."""

    def __init__(self, env: dict[str, str] | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic, _brev: Brev | None = None):
        self.env = dict(os.environ) if env is None else env
        self.sleep = sleep
        self.clock = clock
        self._brev = _brev
        known_secrets.observe_env(self.env)   # its secret values are redacted from every output

    @property
    def state_root(self) -> Path:
        return state_root(self.env)

    @property
    def records(self) -> RecordStore:
        return RecordStore(self.state_root)

    @property
    def sidecars(self) -> SidecarStore:
        return SidecarStore(self.state_root)

    @property
    def brev(self) -> Brev:
        if self._brev is None:
            sidecars = self.sidecars
            self._brev = Brev(env=self.env, sleep=self.sleep, clock=self.clock, log=say,
                              ready_instances=sidecars.ready_instances(),
                              on_ready=lambda name: sidecars.note_instance(name, exec_ready_at=now_iso()),
                              on_deleted=lambda name: sidecars.note_instance(name, exec_ready_at=None),
                              on_started=note_instance_started)
        return self._brev
