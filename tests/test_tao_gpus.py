"""--gpus and the spec's num_gpus / gpu_ids agree: no job bills GPUs it cannot use.

TAO's launcher reads <task>.num_gpus / gpu_ids (tao-pytorch core/entrypoint.py:163-204);
submit sets them to the GPUs it hands the container, or refuses a disagreement with the fix.
"""

from __future__ import annotations

import pytest

from conftest import TAO_IMAGE


def _plan(gpus="all", action="train", spec=None, overrides=(), config=None):
    from tao_brev import tao_gpus

    spec = {"train": {"num_gpus": 1, "gpu_ids": [0]}} if spec is None else spec

    def rerun(set_flags=None, to_overrides=(), add=()):
        return f"RERUN set={set_flags} over={list(to_overrides)}"
    return tao_gpus.plan(gpus=gpus, action=action, config=config, spec_data=spec, overrides=list(overrides),
                         rerun=rerun)


def test_all_gpus_set_from_the_instance_replacing_the_spec_with_a_warning():
    plan = _plan("all")
    assert plan.host_keys == ("train.num_gpus", "train.gpu_ids") and plan.overrides == []
    assert "train.num_gpus, train.gpu_ids of the spec: not used" in plan.warnings[0]
    # the answer shows what the instance sets in each key, a count for one, a list of ids for the other
    assert plan.to_json()["overrides"] == ["train.num_gpus=<the instance's GPU count N>",
                                           "train.gpu_ids=<[0,...,N-1] for its N GPUs>"]


def test_named_gpus_that_agree_are_passed_as_overrides():
    plan = _plan("0", spec={"train": {"num_gpus": 1}})
    assert plan.overrides == ["train.num_gpus=1"] and plan.host_keys == ()
    assert _plan("2,3", spec={"evaluate": {"num_gpus": 2}}, action="evaluate").overrides == ["evaluate.num_gpus=2"]


@pytest.mark.parametrize("gpus,spec", [("0,1", {"train": {"num_gpus": 1, "gpu_ids": [0]}}),
                                       ("0,1", {"train": {"num_gpus": 3, "gpu_ids": [0, 1, 2]}}),
                                       ("2,3", {"train": {"num_gpus": 2, "gpu_ids": [2, 3]}})])
def test_named_gpus_replace_the_specs_values_with_a_warning(gpus, spec):
    plan = _plan(gpus, spec=spec)
    assert "train.num_gpus=2" in plan.overrides and "train.gpu_ids=[0,1]" in plan.overrides
    assert "of the spec replaced by the 2 GPU(s)" in plan.warnings[0]


@pytest.mark.parametrize("override,fragment", [("train.num_gpus=1", "asks for 1"), ("train.gpu_ids=[0,1,2]", "asks for 3"),
                                               ("train.gpu_ids=[2,3]", "outside 0..1")])
def test_an_override_that_disagrees_with_named_gpus_is_refused_with_both_fixes(override, fragment):
    from tao_brev.errors import TaoBrevError

    with pytest.raises(TaoBrevError) as info:
        _plan("0,1", overrides=[override])
    assert info.value.code == "BAD_ARGUMENT" and fragment in info.value.message
    assert f"drop the override {override}" in info.value.fix
    assert ("'--gpus'" in info.value.fix) == (fragment != "outside 0..1")


def test_an_override_that_agrees_is_kept_and_not_doubled():
    plan = _plan("0,1", overrides=["train.num_gpus=2"])
    assert plan.overrides == ["train.gpu_ids=[0,1]"]


@pytest.mark.parametrize("override", ["train.num_gpus='2'", 'train.num_gpus="2"'])
def test_a_count_quoted_as_a_string_agrees_as_omegaconf_converts_it(override):
    """Hydra reads '2' as a string; omegaconf's IntegerNode makes it 2 in the schema's int field (it was
    refused: "asks for None")."""
    assert _plan("0,1", overrides=[override]).overrides == ["train.gpu_ids=[0,1]"]


def test_a_num_gpus_that_is_no_count_is_refused_saying_so():
    from tao_brev.errors import TaoBrevError

    with pytest.raises(TaoBrevError) as info:
        _plan("0,1", overrides=["train.num_gpus=two"])
    assert "asks for a value that is no GPU count" in info.value.message, info.value.message


def test_an_override_that_disagrees_with_all_gpus_is_refused_naming_the_gpus():
    from tao_brev.errors import TaoBrevError

    with pytest.raises(TaoBrevError) as info:
        _plan("all", overrides=["train.num_gpus=2"])
    assert "every GPU" in info.value.message and "'--gpus': '0,1'" in info.value.fix


def test_actions_on_one_gpu_and_unknown_keys_add_nothing():
    assert _plan("all", action="export").overrides == [] and _plan("all", action="export").host_keys == ()
    assert _plan("all", action="export", config={}).warnings == []
    checked = _plan("all", spec={"train": {"num_epochs": 1}}, config={"train": {"num_epochs": 1}})
    assert checked.host_keys == () and checked.overrides == [] and "uses 1 GPU" in checked.warnings[0]


@pytest.mark.parametrize("gpus", ["0,0", "1,1", "0,1,0", "2,02", "3,3,3"])
def test_a_gpu_id_named_twice_is_refused_with_each_id_once(gpus):
    """docker --gpus '"device=0,0"' hands ONE GPU: TAO told num_gpus=2 would start a rank on a missing GPU."""
    from tao_brev.errors import TaoBrevError

    for action in ("train", "export"):
        with pytest.raises(TaoBrevError) as info:
            _plan(gpus, action=action)
        assert info.value.code == "BAD_ARGUMENT" and "more than once" in info.value.message
        once = ",".join(dict.fromkeys(str(int(i)) for i in gpus.split(",")))
        assert f"'--gpus': '{once}'" in info.value.fix


@pytest.mark.parametrize("gpus", ["0,1", "1,0", "0,10", "all"])
def test_distinct_ids_are_not_refused(gpus):
    assert _plan(gpus).warnings is not None


@pytest.mark.parametrize("spec", [{"train": {"num_epochs": 1}}, {}, {"train": None}])
def test_unchecked_many_gpus_still_hand_tao_the_count(spec):
    """No schema (--no-spec-check) and no key in the spec: the launcher reads the command line for every
    network, so the keys are added anyway, never 1 of N billed GPUs."""
    every = _plan("all", spec=spec)
    assert every.host_keys == ("train.num_gpus", "train.gpu_ids") and "schema could not be read" in every.warnings[-1]
    named = _plan("0,1", spec=spec, action="evaluate")
    assert named.overrides == ["evaluate.num_gpus=2", "evaluate.gpu_ids=[0,1]"] and named.host_keys == ()
    assert _plan("3", spec=spec).overrides == [] and _plan("3", spec=spec).warnings == []   # TAO's default: 1 GPU


def test_unchecked_overrides_that_disagree_are_still_refused():
    from tao_brev.errors import TaoBrevError

    spec = {"train": {"num_epochs": 1}}
    with pytest.raises(TaoBrevError):
        _plan("all", spec=spec, overrides=["train.num_gpus=2"])
    with pytest.raises(TaoBrevError):
        _plan("0,1", spec=spec, overrides=["train.gpu_ids=[0]"])
    assert _plan("0,1", spec=spec, overrides=["train.num_gpus=2"]).overrides == ["train.gpu_ids=[0,1]"]


def _docker_run_words(world, instance: str) -> list:
    runs = [r["argv"] for r in world.sim.audit() if r["tool"] == "docker" and r["instance"] == instance
            and r["argv"][:1] == ["run"] and TAO_IMAGE in r["argv"]]
    assert len(runs) == 1, runs
    return runs[0]


def test_all_gpus_on_an_8_gpu_instance_trains_on_8_never_1(world):
    world.sim.add_instance("big", gpus=("NVIDIA H100 80GB HBM3",) * 8)
    world.sim.preload_image("big", TAO_IMAGE)
    spec = world.spec({"epoch_seconds": 0.05})          # the example: train.num_gpus: 1
    data = world.put_dataset("big")
    res = world.run("submit.py", "--instance", "big", "--image", "images.tao_toolkit.pyt", "--network-arch",
                    "visual_changenet", "--action", "train", "--spec", str(spec), "--inputs", f"{data}=levir_cd_tiny")
    assert res.code == 0, res
    words = _docker_run_words(world, "big")
    assert "train.num_gpus=8" in words and "train.gpu_ids=[0,1,2,3,4,5,6,7]" in words
    assert any("of the spec: not used, the instance's GPU count is" in w for w in res.json["warnings"])
    assert res.json["gpu_overrides"] == ["train.num_gpus=8", "train.gpu_ids=[0,1,2,3,4,5,6,7]"]   # what ran


def test_the_dry_run_plan_shows_the_gpu_overrides(world):
    from test_submit_guards import base_args

    res = world.run("submit.py", *base_args(world), "--gpus", "0", "--dry-run")
    assert res.code == 0, res
    launch = next(step for step in res.json["plan"] if step["step"] == "launch")
    assert launch["gpu_overrides"] == ["train.num_gpus=1", "train.gpu_ids=[0]"]
    assert "train.num_gpus=1 train.gpu_ids=[0]" in launch["script"].replace("'", "")


def test_duplicate_gpu_ids_are_refused_before_anything_is_launched(world):
    from test_submit_guards import base_args

    res = world.run("submit.py", *base_args(world), "--gpus", "1,1", "--dry-run")
    err = res.json["error"]
    assert res.code == 2 and res.json["ok"] is False and err["code"] == "BAD_ARGUMENT", res
    assert "more than once" in err["message"] and "--gpus 1 " in err["fix"].replace("'", "") + " "
    assert not [r for r in world.sim.audit() if r["tool"] == "docker" and r["argv"][:1] == ["run"]]


def test_no_spec_check_on_8_gpus_trains_on_8(world):
    import yaml

    world.sim.add_instance("eight", gpus=("NVIDIA A100-SXM4-80GB",) * 8)
    world.sim.preload_image("eight", TAO_IMAGE)
    spec = world.spec({"epoch_seconds": 0.05})
    data = yaml.safe_load(spec.read_text())
    data["train"].pop("num_gpus", None)
    data["train"].pop("gpu_ids", None)
    spec.write_text(yaml.safe_dump(data))
    ds = world.put_dataset("eight")
    res = world.run("submit.py", "--instance", "eight", "--image", "images.tao_toolkit.pyt", "--network-arch",
                    "visual_changenet", "--action", "train", "--spec", str(spec), "--inputs", f"{ds}=levir_cd_tiny",
                    "--no-spec-check")
    assert res.code == 0, res
    words = _docker_run_words(world, "eight")
    assert "train.num_gpus=8" in words and "train.gpu_ids=[0,1,2,3,4,5,6,7]" in words
    assert any("schema could not be read" in w for w in res.json["warnings"])


def _first_gpu_words(args: list[str]) -> tuple[int | None, str | None]:
    """What TAO's entrypoint reads of the GPUs from a launch's arguments: the first "num_gpus=" and the
    first "gpu_ids=" found in all of them joined, whatever section they belong to (tao-pytorch 7.0.1
    nvidia_tao_pytorch/core/entrypoint.py:163-178)."""
    joined = " " + " ".join(args)
    count = joined.split("num_gpus=")[1].split()[0] if "num_gpus=" in joined else None
    ids = joined.split("gpu_ids=")[1].split()[0] if "gpu_ids=" in joined else None
    return (int(count) if count is not None else None), ids


def test_the_entrypoint_reads_the_bundles_gpu_keys_before_a_users_other_section(world):
    world.sim.add_instance("eight", gpus=["NVIDIA A100-SXM4-80GB"] * 8, instance_type="p4d.24xlarge")
    world.sim.preload_image("eight", TAO_IMAGE)
    sub = world.submit("--", "evaluate.num_gpus=1", "evaluate.gpu_ids=[0]", instance="eight",
                       spec=world.spec({"epoch_seconds": 0.02}))
    assert sub.code == 0, sub
    run = [r["argv"] for r in world.sim.audit() if r["tool"] == "docker" and r["argv"][:2] == ["run", "-d"]][-1]
    assert _first_gpu_words(run[run.index("-e") + 2:]) == (8, "[0,1,2,3,4,5,6,7]"), run
