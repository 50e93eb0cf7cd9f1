"""Round trips per verb, pinned: every `brev exec` is an ssh session to a cloud machine
(seconds, and a chance to fail). bench/bench_round_trips.py prints the same counts.

Invariant, on an exec-ready instance with the image pulled: submit makes 1 `brev exec`
(plus 1 `brev copy` for a credential file), poll_status.py JOB 1, teardown.py JOB 1 (plus
`brev delete` with --delete-instance, after 1 `brev copy` home of results that have no
destination), preflight at most 3 once the instance is ready,
and poll_status.py --all one per instance whatever the number of jobs, with one `docker
ps` and one `docker inspect` per instance.
"""

from __future__ import annotations

from conftest import TAO_IMAGE


class Counted:
    """What reached brev and docker between two points."""

    def __init__(self, sim):
        self.sim = sim
        self.execs, self.copies, self.audited = sim.exec_count(), self._brev("copy"), len(sim.audit())

    def _brev(self, verb: str) -> int:
        return sum(1 for r in self.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == [verb])

    def since(self) -> dict:
        docker = {}
        for record in self.sim.audit()[self.audited:]:
            if record["tool"] == "docker":
                verb = next((a for a in record["argv"] if not a.startswith("-")), "?")
                docker[verb] = docker.get(verb, 0) + 1
        return {"exec": self.sim.exec_count() - self.execs, "copy": self._brev("copy") - self.copies,
                "docker": docker}


def _spec(world, **simulate):
    return world.spec({"epoch_seconds": 0.02, **simulate})


def test_preflight_after_ready_submit_status_teardown(world):
    first = world.run("preflight.py", "--instance", "box")       # first contact: readiness probe
    assert first.code == 0, first
    count = Counted(world.sim)
    pre = world.run("preflight.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                    NGC_KEY="nvapi-" + "R" * 30)
    assert pre.code == 0 and count.since()["exec"] <= 3, (pre, count.since())

    count = Counted(world.sim)
    sub = world.submit("--env", "HF_TOKEN", spec=_spec(world), HF_TOKEN="hf_" + "x" * 34)
    assert sub.code == 0, sub
    assert {k: count.since()[k] for k in ("exec", "copy")} == {"exec": 1, "copy": 1}   # the credential file: a copy
    job = sub.json["job_id"]
    assert world.run("poll_status.py", job, "--wait", "--interval", "0.2", "--timeout", "60").code == 0

    count = Counted(world.sim)
    status = world.run("poll_status.py", job, "--logs", "50")
    assert status.code == 0 and status.json["state"] == "COMPLETE"
    assert count.since()["exec"] == 1 and count.since()["copy"] == 0

    count = Counted(world.sim)
    down = world.run("teardown.py", job, "--delete-instance", "--force")
    assert down.code == 0, down
    assert count.since()["exec"] == 1 and world.sim.world.instance("box") is None   # + brev delete
    assert count.since()["copy"] == 1   # no bucket: the results, archived in that exec, are copied home first


def test_poll_all_is_one_exec_one_ps_and_one_inspect_per_instance(world):
    boxes = ["box", "box-b", "box-c"]
    for name in boxes[1:]:
        world.sim.add_instance(name)
        world.sim.preload_image(name, TAO_IMAGE)
    for i in range(7):                           # 3, 2, 2 live jobs: the count follows instances, not jobs
        res = world.submit("--share-gpus", spec=_spec(world, hang=True), instance=boxes[i % 3])
        assert res.code == 0, res
    count = Counted(world.sim)
    answer = world.run("poll_status.py", "--all")
    assert answer.code == 0 and len(answer.json["jobs"]) == 7, answer
    seen = count.since()
    assert seen["exec"] == 3 and seen["copy"] == 0, seen
    assert seen["docker"] == {"ps": 3, "inspect": 3}, seen
