"""The paths a spec names under an input mount (tao_brev.spec_paths): checked on the instance in
the launch round trip, after staging and before ``docker run``; a name no input has is refused
before anything; ``--no-spec-check`` skips both. Simulator (tiers A and B) and pure parts."""

from __future__ import annotations

import shutil

import pytest

from conftest import EXAMPLE_DATA, validate
from tests.s3world import CARRIER, S3World, s3world  # noqa: F401  (fixture)

from tao_brev import spec_paths
from tao_brev.errors import TaoBrevError

MOUNTS = [("~/tao-data/levir", "/data/levir", True), ("~/ckpt", "/data/ckpt", True)]


def _runs(sim) -> int:
    return sum(1 for r in sim.audit() if r["tool"] == "docker" and r["argv"][:1] == ["run"])


def test_a_missing_folder_the_network_derives_is_refused_before_docker_run(world):
    data = world.put_dataset()
    shutil.rmtree(world.sim.instance_home("box") / "tao-data" / "levir_cd_tiny" / "label")
    world.put_dataset = lambda instance="box": data   # submit keeps the damaged copy
    before, runs = world.sim.exec_count(), _runs(world.sim)
    res = world.submit(spec=world.spec({"epoch_seconds": 0.01}))
    assert res.code == 1 and res.json["error"]["code"] == "SPEC_PATH_MISSING", res
    validate("submit", res.json)
    message = res.json["error"]["message"]
    assert "dataset.segment.root_dir + annotation_folder_name" in message and "/data/levir_cd_tiny/label" in message
    assert world.sim.exec_count() - before == 1 and _runs(world.sim) == runs       # the one round trip, no run
    assert res.json["state"] == "ERROR" and "--no-spec-check" in res.json["error"]["fix"]
    skipped = world.submit("--no-spec-check", spec=world.spec({"epoch_seconds": 0.01}))
    assert skipped.code == 0, skipped                                              # the check is skipped


def test_a_missing_split_list_names_its_key(world):
    spec = world.spec({"epoch_seconds": 0.01})
    text = spec.read_text().replace("validation_split: val", "validation_split: holdout")
    spec.write_text(text)
    res = world.submit(spec=spec)
    assert res.code == 1 and res.json["error"]["code"] == "SPEC_PATH_MISSING", res
    assert "dataset.segment.validation_split names /data/levir_cd_tiny/list/holdout.txt" in res.json["error"]["message"]


def test_an_override_wins_and_a_name_no_input_has_is_refused_before_anything(world):
    before = world.sim.exec_count()
    res = world.submit("--", "dataset.segment.root_dir=/data/other", spec=world.spec({"epoch_seconds": 0.01}))
    assert res.code == 2 and res.json["error"]["code"] == "SPEC_INPUT_UNKNOWN", res
    assert "dataset.segment.root_dir names /data/other" in res.json["error"]["message"]
    assert "levir_cd_tiny" in res.json["error"]["message"] and world.sim.exec_count() == before
    assert res.json.get("job_id") is None
    ok = world.submit("--no-spec-check", "--dry-run", "--", "dataset.segment.root_dir=/data/other",
                      spec=world.spec({"epoch_seconds": 0.01}))
    assert ok.code == 0 and "TAO_SPEC_PATH_MISSING" not in ok.json["plan"][-2]["script"], ok


def test_tier_b_checks_the_staged_copy(s3world, tmp_path):
    data = tmp_path / "levir_cd_tiny"
    shutil.copytree(EXAMPLE_DATA, data)
    shutil.rmtree(data / "B")
    res = s3world.submit("B", data)
    assert res.code == 1 and res.json["error"]["code"] == "SPEC_PATH_MISSING", res
    assert "/data/levir_cd_tiny/B" in res.json["error"]["message"] and res.execs == 1
    assert not any(r["tool"] == "docker" and r["argv"][:1] == ["run"] and res.json["job_id"] in r["argv"]
                   for r in s3world.sim.audit())
    s3world.assert_no_secret_anywhere()


# ---------------------------------------------------------------- pure parts
def test_named_walks_lists_and_overrides_and_skips_what_tao_resolves():
    spec = {"dataset": {"train": [{"image_dir": "/data/levir/img"}, {"image_dir": "${oc.env:X}/a"}],
                        "plain": "relative/path", "n": 3,
                        "shards": "/data/levir/part-*.json", "one": "/data/levir/x[0].png"},
            "evaluate": {"checkpoint": "/data/ckpt/model.pth"}, "results_dir": "/results"}
    found = spec_paths.named(spec, ["evaluate.checkpoint=/data/ckpt/other.pth", "x.y='/data/levir/q'"], MOUNTS)
    assert found == [("dataset.train[0].image_dir", "/data/levir/img"), ("evaluate.checkpoint", "/data/ckpt/other.pth"),
                     ("x.y", "/data/levir/q")]
    lines = spec_paths.check_lines(found, spec_paths.host_paths(MOUNTS))
    assert lines.splitlines()[0] == ("test -e \"$HOME\"/tao-data/levir/img || { echo 'TAO_SPEC_PATH_MISSING 0'; "
                                     "exit 12; }")
    assert spec_paths.describe(found, "x\nTAO_SPEC_PATH_MISSING 1\n").startswith(
        "spec key evaluate.checkpoint names /data/ckpt/other.pth")
    assert "missing" in spec_paths.describe(found, "TAO_SPEC_PATH_MISSING 7")
    assert spec_paths.named({"root": "/data/levir"}, [], MOUNTS) == [("root", "/data/levir")]
    assert spec_paths.check_lines([("root", "/data/levir")], spec_paths.host_paths(MOUNTS)).startswith(
        "test -e \"$HOME\"/tao-data/levir ||")


@pytest.mark.parametrize("value", ["/data/levir/../etc/x", "/data/levir/../../data/nope", "/data//nope/x",
                                   "/data/./nope", "/data/levir/./../nope/"])
def test_a_path_is_read_as_the_container_opens_it(value):
    """``..``, ``.`` and ``//`` resolved (posixpath.normpath, as open() in the container walks them): a path
    that leaves its input for an unmounted name is refused; one that stays in an input is checked there."""
    with pytest.raises(TaoBrevError) as failed:
        spec_paths.named({"root": value}, [], MOUNTS)
    assert failed.value.code == "SPEC_INPUT_UNKNOWN" and f"root names {value}" in failed.value.message
    for kept in ("/data//levir/img", "/data/levir/./img", "/data/levir/x/../img"):
        found = spec_paths.named({"root": kept}, [], MOUNTS)
        assert found == [("root", kept)] and spec_paths.check_lines(found, spec_paths.host_paths(MOUNTS)).startswith(
            'test -e "$HOME"/tao-data/levir/img ||'), found


def test_an_unmounted_name_is_refused_naming_the_key_only():
    with pytest.raises(TaoBrevError) as failed:
        spec_paths.named({"a": {"b": "/data/nope/x", "token": "not-shown-value"}}, [], MOUNTS)
    assert failed.value.code == "SPEC_INPUT_UNKNOWN" and "a.b names /data/nope/x" in failed.value.message
    assert "not-shown-value" not in failed.value.message and "ckpt, levir" in failed.value.message


@pytest.mark.parametrize("action, keys", [
    ("train", {"root_dir + image_folder_name", "root_dir + change_image_folder_name",
               "root_dir + annotation_folder_name", "train_split", "validation_split"}),
    ("evaluate", {"root_dir + image_folder_name", "root_dir + change_image_folder_name",
                  "root_dir + annotation_folder_name", "test_split"}),
    ("inference", {"root_dir + image_folder_name", "root_dir + change_image_folder_name", "predict_split"}),
])
def test_visual_changenet_folders_and_split_lists_by_action(action, keys):
    spec = {"dataset": {"segment": {"root_dir": "/data/levir", "train_split": "train", "validation_split": "val",
                                    "test_split": "test", "predict_split": "test", "image_folder_name": "A1"}}}
    found = dict(spec_paths.named(spec, [], MOUNTS, "visual_changenet", action))
    derived = {k.split("dataset.segment.", 1)[1] for k in found if k != "dataset.segment.root_dir"}
    assert derived == keys
    assert found["dataset.segment.root_dir + image_folder_name"] == "/data/levir/A1"   # the spec's folder name
    assert spec_paths.named(spec, [], MOUNTS, "dino", action) == [("dataset.segment.root_dir", "/data/levir")]
