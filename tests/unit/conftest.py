"""The in-process layer: verbs called as functions, brev answered by ``fake_brev.FakeBrev``.

No process is started here: each verb runs in the test's own process, against a private
state dir, with a fake clock (``sleep`` advances it) and a script of expected brev calls."""

from __future__ import annotations

import os
import stat

import pytest

from tests.unit.fake_brev import FakeBrev


class Clock:
    """Monotonic seconds that move only when the code under test sleeps."""

    def __init__(self, start: float = 1000.0):
        self.now = start
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_brev(monkeypatch):
    """The expected brev calls of one test; its calls are checked when the test ends."""
    from tao_brev.secrets import values as known_secrets

    known_secrets.reset()   # the values a previous test's Context observed
    fake = FakeBrev().install(monkeypatch)
    yield fake
    fake.verify()
    known_secrets.reset()


@pytest.fixture
def unit_env(tmp_path):
    """A shell's environment with a private TAO_STATE_DIR and ``brev`` on PATH (a file the fake
    stands in for: the transport finds it, never runs it), and no credential of the caller's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    brev = bin_dir / "brev"
    brev.write_text("#!/bin/sh\necho 'the in-process fake answers brev; this file never runs' >&2\nexit 97\n")
    brev.chmod(brev.stat().st_mode | stat.S_IXUSR)
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update(PATH=f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin", TAO_STATE_DIR=str(tmp_path / "state"),
               TAO_BREV_NO_REEXEC="1", TAO_BREV_RETRY_BACKOFF_S="0")
    return env


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def ctx(fake_brev, unit_env, clock):
    """The verbs' Context over the fake: this test's environment, clock and sleep."""
    from tao_brev.context import Context

    return Context(env=unit_env, sleep=clock.sleep, clock=clock)
