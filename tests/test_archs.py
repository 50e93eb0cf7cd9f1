"""Networks and actions: from nvidia-tao-core 7.3.0's schemas and tao-pytorch 7.0.1's entry points.

A name that exists in a newer TAO is never "corrected" to another network; only an
unmistakable typo of a known name is refused (archs.is_typo); bevfusion, which the 7.x image
cannot run, is refused with the image that runs it.
"""

from __future__ import annotations

import pytest

from conftest import TAO_IMAGE

STRICT = TAO_IMAGE


@pytest.fixture(scope="module")
def networks():
    from tao_brev import tao_schema_pkg

    found = tao_schema_pkg.networks("7.3.0", None)
    assert len(found) >= 41 and "dinov3" in found and "oneformer" in found   # the real package, here
    return found


def _verdict(networks, arch, action, image=STRICT):
    from tao_brev import archs

    return archs.check(arch, action, image, networks, "7.3.0")


@pytest.mark.parametrize("arch,action", [("dinov3", "train"), ("oneformer", "train"), ("codetr", "train"),
                                         ("clip", "train"), ("visual_changenet", "quantize"),
                                         ("rtdetr", "distill"), ("dino", "default_specs")])
def test_names_of_tao_7_are_accepted_and_never_corrected(networks, arch, action):
    verdict = _verdict(networks, arch, action)
    assert verdict.refusal is None and verdict.warnings == []


def test_a_network_with_a_schema_but_no_listed_actions_is_a_warning_naming_the_sources(networks):
    verdict = _verdict(networks, "classification_tf2", "train")
    assert verdict.refusal is None
    assert "nvidia-tao-core 7.3.0 has its schema" in verdict.warnings[0] and "tao-pytorch 7.0.1" in verdict.warnings[0]


@pytest.mark.parametrize("given,meant", [("visual_changent", "visual_changenet"), ("visual-changenet", "visual_changenet"),
                                         ("Segformer", "segformer"), ("mask2fromer", "mask2former"),
                                         ("deformable_dert", "deformable_detr")])
def test_an_unmistakable_typo_of_a_network_is_refused(networks, given, meant):
    verdict = _verdict(networks, given, "train")
    assert verdict.refusal is not None and verdict.refusal.closest == meant
    assert "unmistakable typo" in verdict.refusal.message(STRICT)


@pytest.mark.parametrize("given", ["dinov2", "rtdetrv2", "dinov4", "zzz_brand_new", "segfomer_v2", "yolo"])
def test_a_name_that_may_be_another_network_is_only_a_warning(networks, given):
    verdict = _verdict(networks, given, "train")
    assert verdict.refusal is None and given in verdict.warnings[0]


def test_the_typo_rule():
    from tao_brev.archs import is_typo

    known = ["dino", "dinov3", "nvdinov2", "rtdetr", "codetr", "mae", "mal", "segformer", "visual_changenet"]
    assert is_typo("dinov3", ["dino"]) is None                 # a prefix: another network
    assert is_typo("dinov2", ["dinov3"]) is None               # other digits: another version
    assert is_typo("codetr", ["rtdetr"]) is None               # two edits on a short name
    assert is_typo("mak", known) is None                       # two candidates (mae, mal)
    assert is_typo("ma", known) is None                        # too short to tell
    assert is_typo("sgeformer", known) == "segformer"          # two neighbours swapped: one edit
    assert is_typo("visual_chngnet", known) == "visual_changenet"   # two edits, a long name
    assert is_typo("visual_chngt", known) is None              # three edits
    assert is_typo("DINO", known) == "dino"


@pytest.mark.parametrize("action,meant", [("trian", "train"), ("evalute", "evaluate"), ("Train", "train")])
def test_an_action_typo_is_refused_and_an_unknown_action_warned(networks, action, meant):
    verdict = _verdict(networks, "visual_changenet", action)
    assert verdict.refusal is not None and verdict.refusal.closest == meant
    other = _verdict(networks, "visual_changenet", "calibrate")
    assert other.refusal is None and "tao-pytorch 7.0.1" in other.warnings[0] and "quantize" in other.warnings[0]


def test_other_images_never_refuse(networks):
    verdict = _verdict(networks, "visual_changent", "train", image="nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt")
    assert verdict.refusal is None and "'visual_changenet'" in verdict.warnings[0]


def test_bevfusion_is_refused_on_a_7x_image_with_the_image_that_runs_it(world):
    from test_submit_guards import base_args, fix_command, refused

    before = world.sim.exec_count()
    error = refused(world.run("submit.py", *base_args(world, arch="bevfusion"), "--dry-run"), "BAD_ARGUMENT", 2)
    assert "mmdet3d" in error["message"] and world.sim.exec_count() == before
    fixed = fix_command(error)
    assert fixed[fixed.index("--image") + 1] == "nvcr.io/nvidia/tao/tao-toolkit:5.5.0-pyt"


def test_dinov3_train_passes_submit_without_a_correction(world):
    from test_submit_guards import base_args

    res = world.run("submit.py", *base_args(world, arch="dinov3"), "--dry-run", "--no-spec-check")
    assert res.code == 0, res
    assert not any("dino'" in w for w in res.json["warnings"])
