"""Overrides read with Hydra's own grammar (hydra-core 1.3.2, the pin of TAO 7 images: tao-pytorch
docker/requirements-pip.txt:19) and applied as hydra/_internal/config_loader_impl.py:336-395 does.

Each expectation is what real Hydra 1.3.2 + nvidia-tao-core 7.3.0 does when composing the example spec
(compared case by case with hydra's own ``compose``): what it refuses is refused before launch
(BAD_SPEC), what it accepts is accepted.
"""

from __future__ import annotations

import sys

import pytest

from conftest import EXAMPLE_SPEC
from tao_brev import tao_schema


def _dry(world, *overrides):
    data = world.put_dataset("box")
    return world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
                     "visual_changenet", "--action", "train", "--spec", str(EXAMPLE_SPEC), "--inputs",
                     f"{data}=levir_cd_tiny", "--dry-run", "--", *overrides)


REFUSED = {  # override -> a word of the finding
    "dataset.segment.data_name=LEVIR=CD": "grammar",          # '=' in an unquoted value: a parse error
    "model.backbone.type=fan_small_12_p4_hybrid,": "grammar",  # a trailing ','
    "dataset.segment.data_name=choice(LEVIR-CD,x)": "sweep",  # "requires --multirun"
    "dataset.segment.data_name=LEVIR-CD,x": "sweep",          # "Ambiguous value"
    "train.num_epochs=range(1,3)": "sweep",
    "train.optim.lr=interval(0,1)": "sweep",
    "train.seed=glob(*)": "sweep",
    "train.num_epochs=tag(a,choice(1,2))": "sweep",
    "train.num_epochs=shuffle(1,2)": "sweep",
    "@train=x": "config group",
    "train/optim=x": "config group",
    "~train.optim.momentum=0.5": "deletes only a match",     # the spec's value is 0.9
    "+train.num_epochs=4": "already exists",
    "train.num_epochs=float(3)": "wrong type",
}
ACCEPTED = ["train.optim={lr:0.1}", "train.optim={lr:0.1,momentum:0.8}", "+train.optim={lr:0.1}",
            "hydra.job.chdir=False", "train.num_epochs=int(3)", "train.num_epochs=str(3)",
            "dataset.segment.data_name=", "dataset.segment.data_name='LEVIR=CD'", "dataset.segment.data_name=LEVIR\\,CD",
            "dataset.segment.data_name=a b", "++train.num_epochs=4"]


@pytest.mark.parametrize("override", list(REFUSED))
def test_what_real_hydra_refuses_is_refused_before_launch(world, override):
    res = _dry(world, override)
    assert res.code == 2 and res.json["error"]["code"] == "BAD_SPEC", res
    finding = res.json["findings"][0]
    assert finding["where"] == "override 1" and REFUSED[override] in finding["problem"], finding


@pytest.mark.parametrize("override", ACCEPTED)
def test_what_real_hydra_accepts_is_accepted(world, override):
    res = _dry(world, override)
    assert res.code == 0, res
    assert res.json["spec_check"]["checked"] is True


def test_a_refused_override_never_shows_its_value(world):
    res = _dry(world, "dataset.segment.data_name=Zq1Wm9Lk=Vw2Np7", "train.seed=Tz6Bc8,")
    text = str(res.json["findings"]) + res.json["error"]["message"]   # the fix repeats the command, as typed
    assert res.code == 2 and len(res.json["findings"]) == 2, res
    assert "Zq1Wm9Lk" not in text and "Vw2Np7" not in text and "Tz6Bc8" not in text


@pytest.mark.parametrize("item,want", [
    ("train.optim={lr:0.1}", ("", "train.optim", {"lr": 0.1}, True)),
    ("train.num_epochs=int(3)", ("", "train.num_epochs", 3, True)),
    ("k=", ("", "k", "", True)),
    ("~a.b", ("~", "a.b", None, False)),
    ("~a.b=1", ("~", "a.b", 1, True)),
    ("+a=1", ("+", "a", 1, True)),
    ("++a='x,y'", ("++", "a", "x,y", True)),
])
def test_parse_override_types_values_as_hydra_does(item, want):
    assert tao_schema.parse_override(item, "override 1") == want


def test_without_hydra_core_the_spec_is_not_checked_and_no_second_reading_runs(monkeypatch, tmp_path):
    """hydra-core is a dependency; an install without it answers "not checked" (never a reading of its own)."""
    from tao_brev import spec_check
    monkeypatch.setitem(sys.modules, "hydra", None)   # as if not installed: find_spec finds nothing, import fails
    result = spec_check.check(network_arch="visual_changenet", action="train", image="nvcr.io/nvidia/tao/tao-toolkit:"
                              "7.3.0-pyt", spec_path="s.yaml", spec_text="train: {}\n", spec_data={"train": {}},
                              overrides=["train.no_such_key=1"], state_root=tmp_path, env={}, skip=False, fix="F")
    assert not result.checked and "hydra-core" in result.reason
    assert tao_schema.override_value("3") == "3"                     # hydra's typing only


def test_the_known_readings_are_hydra_s_own():
    """The overrides read without hydra-core (KNOWN_READINGS: the bundle's own) read as hydra-core reads them."""
    from tao_brev import spec_check
    assert spec_check.BUNDLE_OVERRIDE in tao_schema.KNOWN_READINGS
    for item, reading in list(tao_schema.KNOWN_READINGS.items()):
        known = tao_schema.KNOWN_READINGS.pop(item)
        try:
            assert tao_schema.parse_override(item, "override 1") == reading
        finally:
            tao_schema.KNOWN_READINGS[item] = known


def test_a_submit_without_overrides_checks_its_spec_without_importing_hydra(tmp_path):
    """hydra-core costs ~0.2 s CPU to import: read only for the overrides a user gave."""
    code = ("import sys, yaml; from pathlib import Path; from tao_brev import spec_check; "
            f"p = Path({str(EXAMPLE_SPEC)!r}); text = p.read_text(); "
            "r = spec_check.check(network_arch='visual_changenet', action='train', "
            "image='nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt', spec_path=str(p), spec_text=text, "
            f"spec_data=yaml.safe_load(text), overrides=[], state_root=Path({str(tmp_path)!r}), env={{}}, skip=False, fix='F'); "
            "print(r.checked, 'hydra' in sys.modules)")
    import subprocess
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tao_schema.__file__.rsplit("/tao_brev/", 1)[0])
    assert done.stdout.split() == ["True", "False"], done.stderr[-2000:]
