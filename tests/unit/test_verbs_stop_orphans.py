"""teardown --orphans --stop in process: the idle orphans of ours that can stop are stopped."""

from __future__ import annotations

from tao_brev.verbs import stop_orphans
from tests.unit.test_verbs_orphans import idle_box_and_devbox


def test_orphans_stop_stops_the_owned_idle_ones(ctx, fake_brev):
    idle_box_and_devbox(ctx, fake_brev)
    stop = fake_brev.expect("stop", "box", stdout="box\n")
    answer, code = stop_orphans.stop_orphans(ctx)
    assert code == 0 and answer["ok"] is True and answer["stopped"] == ["box"] and stop.used == 1, answer
    found = {o["instance"]: o for o in answer["orphans"]}
    assert found["box"]["stop"]["stopped"] is True and "stop" not in found["devbox"]
