"""preflight's disk check in process: free space where Docker keeps images against what a pull
needs (the registry's layer sizes x the extract factor), and the headroom left for results."""

from __future__ import annotations

import json

from tao_brev.verbs.preflight import PreflightRequest, preflight, registry_bytes
from tests.unit.fake_brev import sections
from tests.unit.test_verbs_preflight_verb import expect_reach, healthy

GIB = 1024 ** 3
MISSING = (1, "Error: No such image: nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt")
MANIFEST = json.dumps({"schemaVersion": 2, "layers": [{"size": 6 * GIB}, {"size": 4 * GIB}]})


def disk_check(ctx, fake_brev, free: int, **answers):
    expect_reach(fake_brev)
    fake_brev.expect_exec("box", "docker manifest inspect", answer=sections(
        {**healthy(free), "manifest": MANIFEST, **answers}))
    answer, code = preflight(ctx, PreflightRequest(instance="box", image="images.tao_toolkit.pyt"))
    return answer, code, next(c for c in answer["checks"] if c["name"] == "disk")


def test_a_missing_image_that_will_not_fit_fails_with_disk_full(ctx, fake_brev):
    answer, code, disk = disk_check(ctx, fake_brev, free=12 * GIB, image=MISSING)
    assert code == 1 and disk["ok"] is False and disk["code"] == "DISK_FULL", disk
    assert disk["data"]["need_bytes"] > registry_bytes(MANIFEST) == 10 * GIB   # compressed layers grow on extract


def test_a_present_image_needs_no_room_but_little_headroom_warns(ctx, fake_brev):
    answer, code, disk = disk_check(ctx, fake_brev, free=2 * GIB, image="25000000000")
    assert disk["ok"] is True and disk["warning"] and disk["data"]["need_bytes"] == 0, disk
    assert code == 0 and "stay free for results" in disk["detail"]


def test_unreadable_free_space_is_a_warning_not_a_pass(ctx, fake_brev):
    answer, code, disk = disk_check(ctx, fake_brev, free=400 * GIB, image="25000000000",
                                    disk_results=(1, "df: /home/ubuntu/tao-results: No such file or directory"))
    assert disk["ok"] is True and disk["warning"] and "could not read free space" in disk["detail"], disk
