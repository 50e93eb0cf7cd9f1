"""A suggested wait covers the job: every ``--timeout`` a ``next`` or ``fix`` names is at least the
known ETA (``progress.eta_s``) plus a margin, at most nextstep.WAIT_TIMEOUT_MAX_S; a WAIT_TIMEOUT's
fix and next name the same command."""
import shlex

import pytest

from tao_brev import nextstep
from tao_brev.vocabulary import JobState


def _timeout(cmd: str) -> int:
    words = shlex.split(cmd)
    if "--timeout" in words:
        return int(words[words.index("--timeout") + 1])
    return int(next(w for w in words if w.startswith("--timeout=")).split("=", 1)[1])


@pytest.mark.parametrize("eta", [576, 95, 1200, 40])
@pytest.mark.parametrize("argv", [["J"], ["J", "--wait", "--interval", "20", "--timeout", "100"],
                                  ["J", "--wait", "--timeout=60"]])
def test_running_poll_next_covers_eta(eta, argv):
    answer = {"ok": True, "job_id": "J", "state": JobState.RUNNING, "progress": {"eta_s": eta}}
    nxt = nextstep.poll(answer, 0, argv)["next"]
    assert _timeout(nxt) >= min(eta + 40, nextstep.WAIT_TIMEOUT_MAX_S)
    assert _timeout(nxt) <= max(nextstep.WAIT_TIMEOUT_MAX_S, 100)
    assert shlex.split(nxt).count("--timeout") + nxt.count("--timeout=") == 1


def test_eta_beyond_the_max_is_bounded():
    answer = {"ok": True, "job_id": "J", "state": JobState.RUNNING, "progress": {"eta_s": 90000}}
    assert _timeout(nextstep.poll(answer, 0, ["J"])["next"]) == nextstep.WAIT_TIMEOUT_MAX_S


def test_unknown_eta_keeps_the_given_timeout():
    answer = {"ok": True, "job_id": "J", "state": JobState.RUNNING, "progress": {"eta_s": None}}
    assert _timeout(nextstep.poll(answer, 0, ["J", "--wait", "--timeout", "77"])["next"]) == 77


@pytest.mark.parametrize("argv", [["J", "--wait", "--interval", "20", "--timeout", "100"],
                                  ["ROOT", "--wait", "--recover", "2", "--timeout", "100"]])
def test_wait_timeout_fix_and_next_agree_and_cover(argv):
    answer = {"ok": False, "job_id": "J", "state": JobState.RUNNING, "progress": {"eta_s": 576},
              "error": {"code": "WAIT_TIMEOUT", "message": "still RUNNING", "fix": "Poll again later"}}
    out = nextstep.poll(answer, 1, argv)
    assert _timeout(out["next"]) >= 576 + 40
    assert out["next"] in out["error"]["fix"]
    assert shlex.split(out["next"])[1] == argv[0]


@pytest.mark.parametrize("given, want", [("0", 0), ("0.5", 1), ("7", 7), ("89.2", 90)])
def test_a_wait_that_ran_out_is_the_same_wait_again_never_a_shorter_one(given, want):
    answer = {"ok": True, "job_id": "J", "state": JobState.RUNNING, "waited_out": True, "progress": {"eta_s": None}}
    argv = ["J", "--wait", "--interval", "30", "--timeout", given]
    assert _timeout(nextstep.poll(answer, 0, argv)["next"]) == want
