"""The spec check against TAO's REAL schema (nvidia-tao-core 7.3.0, installed by install.sh).

Nothing here is skipped: the package installs on every Python the bundle claims (a
py3-none-any wheel), so a missing package fails these tests. Each refusal is proven to
happen before any ``brev exec`` (the simulator saw none) and to name file:line:column and
the key, never the value.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLE_SPEC, ROOT, TAO_IMAGE, validate

FIXTURES = ROOT / "tests" / "fixtures" / "tao_specs"
SECRETLESS_VALUE = "zebra_value_913"     # a value that must never appear in an answer


def _check(path: Path, network: str = "visual_changenet", action: str = "train", overrides=(),
           image: str = TAO_IMAGE, state_root: Path = Path("/nonexistent-state"), env=None):
    from tao_brev import spec_check, yaml_bounded

    text = path.read_text()
    return spec_check.check(network_arch=network, action=action, image=image, spec_path=str(path),
                            spec_text=text, spec_data=yaml_bounded.load(text, "spec"), overrides=list(overrides),
                            state_root=state_root, env=env or {}, skip=False, fix="FIX")


def test_the_package_is_the_default_images_version_and_the_pyproject_pin():
    from scripts import _pyproject
    from tao_brev import bank, tao_schema_pkg

    default = bank.resolve_image("images.tao_toolkit.pyt", {})["image"]
    version = tao_schema_pkg.image_version(default)
    assert version == "7.3.0"
    assert _pyproject.no_deps(_pyproject.load(ROOT / "pyproject.toml")) == [f"nvidia-tao-core=={version}"]
    assert tao_schema_pkg.installed_version() == version        # install.sh put it here (never skipped)


# -- every spec in the repository passes the real check ---------------------------------------------
def _repository_specs():
    found = [(EXAMPLE_SPEC, "visual_changenet", "train")]
    for path in sorted(FIXTURES.glob("*.yaml")):
        network, action = path.name.split(".")[:2]
        found.append((path, network, action))
    return found


def test_the_fixtures_cover_at_least_ten_networks_and_each_names_its_public_source():
    specs = _repository_specs()
    assert len({network for _p, network, _a in specs}) >= 10
    for path, _network, _action in specs[1:]:
        assert re.match(r"# Source: tao-pytorch 7\.0\.1 .*experiment_specs/", path.read_text()), path


# Values TAO's public examples leave for the user's command line: evaluate / inference read their ??? checkpoint
# (tao-pytorch core/initialize_experiments.py:123,152); classification_pyt's train data module reads
# dataset.train_dataset.images_dir etc. (cv/classification_pyt/dataloader/pl_classification_data_module.py:54),
# which the example writes as ${root_dir}/..., a key its schema (7.3.0) has only under dataset.
VALUES_THE_EXAMPLE_LEAVES_OUT = {
    "dino.evaluate.yaml": ["evaluate.checkpoint=/results/model.pth"],
    "rtdetr.inference.yaml": ["inference.checkpoint=/results/model.pth"],
    "classification_pyt.train.yaml": [f"dataset.{split}_dataset.images_dir=/data/images/{split}"
                                      for split in ("train", "val", "test")],
}


@pytest.mark.parametrize("path,network,action", _repository_specs(), ids=lambda v: getattr(v, "name", v))
def test_every_repository_spec_passes_the_real_schema(path, network, action):
    needed = VALUES_THE_EXAMPLE_LEAVES_OUT.get(path.name, [])
    if needed:   # as in TAO: the container stops on these (MissingMandatoryValue / InterpolationKeyError)
        from tao_brev.errors import TaoBrevError
        with pytest.raises(TaoBrevError) as info:
            _check(path, network, action)
        found = sorted(f["key"] for f in info.value.details["answer"]["findings"])
        assert found == sorted(item.split("=", 1)[0] for item in needed), found
    result = _check(path, network, action, overrides=needed)
    assert result.checked and result.schema.startswith(f"nvidia-tao-core 7.3.0 nvidia_tao_core.config.{network}.")
    assert result.config.results_dir == "/results"             # the bundle's own override applied too


# -- refusals: file:line:column, key path, closest key; never the value -----------------------------
def _spec_with(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(EXAMPLE_SPEC.read_text())
    edit(data)
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _line_of(path: Path, key: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(key + ":"))


def test_betas_is_refused_with_its_line_and_the_valid_keys(tmp_path):
    from tao_brev.errors import TaoBrevError

    path = _spec_with(tmp_path, lambda d: d["train"]["optim"].update(betas=[0.9, 0.999]))
    with pytest.raises(TaoBrevError) as info:
        _check(path)
    error = info.value
    assert error.code == "BAD_SPEC" and error.exit_code == 2
    finding = error.details["answer"]["findings"][0]
    assert finding["key"] == "train.optim.betas" and finding["where"] == f"{path}:{_line_of(path, 'betas')}:5"
    assert "CNOptimConfig" in finding["problem"] and "weight_decay" in error.message   # the keys it does take
    assert "0.999" not in error.message


def test_a_dotted_key_at_the_top_is_named_with_its_line_and_how_to_write_it(tmp_path):
    """YAML reads ``train.optim.betas: [..]`` as ONE key; TAO's merge refuses it (omegaconf
    ConfigKeyError, full_key 'train.optim.betas'): the finding names that key and its line, never the value."""
    from tao_brev.errors import TaoBrevError

    path = _spec_with(tmp_path, lambda d: d.update({"train.optim.betas": [0.9, 0.999], "train.optim.lr": 0.5}))
    with pytest.raises(TaoBrevError) as info:
        _check(path)
    findings = {f["key"]: f for f in info.value.details["answer"]["findings"]}
    assert set(findings) == {"train.optim.betas", "train.optim.lr"}   # each named: the merge goes on past one
    betas = findings["train.optim.betas"]
    assert betas["where"] == f"{path}:{_line_of(path, 'train.optim.betas')}:1"
    assert "dots in its name" in betas["problem"] and "KEY=VALUE" in betas["problem"]
    assert "0.999" not in info.value.message


def test_a_stray_top_level_key_and_a_near_miss_name_the_closest_key(tmp_path):
    from tao_brev.errors import TaoBrevError

    def edit(d):
        d["stray_key"] = SECRETLESS_VALUE
        d["stray"] = 1                                                    # difflib's 0.6 would say 'train'
        d["train"]["num_epoch"] = 3
    path = _spec_with(tmp_path, edit)
    with pytest.raises(TaoBrevError) as info:
        _check(path)
    findings = {f["key"]: f for f in info.value.details["answer"]["findings"]}
    assert findings["stray_key"]["where"] == f"{path}:{_line_of(path, 'stray_key')}:1"
    assert findings["stray_key"]["closest"] is None and findings["stray"]["closest"] is None   # valid keys instead
    assert findings["train.num_epoch"]["closest"] == "train.num_epochs"
    assert SECRETLESS_VALUE not in str(info.value.message) + str(info.value.details)


def test_a_wrong_type_names_the_type_the_schema_takes_never_the_value(tmp_path):
    from tao_brev.errors import TaoBrevError

    path = _spec_with(tmp_path, lambda d: d["train"].update(num_epochs=SECRETLESS_VALUE))
    with pytest.raises(TaoBrevError) as info:
        _check(path)
    finding = info.value.details["answer"]["findings"][0]
    assert finding["key"] == "train.num_epochs" and "an integer" in finding["problem"]
    assert SECRETLESS_VALUE not in info.value.message + str(info.value.details)


@pytest.mark.parametrize("override,key,problem", [
    ("train.num_epochz=3", "train.num_epochz", "not a key"),
    (f"train.num_epochs={SECRETLESS_VALUE}", "train.num_epochs", "an integer"),
    ("train.num_epochs", "train.num_epochs", "no '=VALUE'"),
    ("stray=1", "stray", "not a key"),
    ("+train.seed=3", "train.seed", "already exists"),
])
def test_overrides_are_applied_as_hydra_applies_them(override, key, problem):
    from tao_brev.errors import TaoBrevError

    with pytest.raises(TaoBrevError) as info:
        _check(EXAMPLE_SPEC, overrides=["train.seed=7", override])
    finding = info.value.details["answer"]["findings"][0]
    assert finding["where"] == "override 2" and finding["key"] == key and problem in finding["problem"]
    assert SECRETLESS_VALUE not in info.value.message


def test_good_overrides_pass_and_set_the_merged_values():
    result = _check(EXAMPLE_SPEC, overrides=["train.num_epochs=5", "train.optim.lr=1e-3", "+train.extra_note=x",
                                             "model.decode_head.feature_strides=[4,8,16,32]"])
    assert result.config.train.num_epochs == 5 and result.config.train.optim.lr == 0.001
    assert list(result.config.model.decode_head.feature_strides) == [4, 8, 16, 32]


@pytest.mark.parametrize("text,value", [("3", 3), ("-2", -2), ("1e-3", 0.001), ("0.5", 0.5), ("TRUE", True),
                                        ("null", None), ("'007'", "007"), ("[0,1]", [0, 1]), ("abc", "abc")])
def test_override_values_are_typed_as_hydras_grammar_types_them(text, value):
    from tao_brev.tao_schema import override_value

    assert override_value(text) == value


# -- what is not checked says so ---------------------------------------------------------------------
def test_another_version_is_checked_from_its_per_version_cache(tmp_path):
    import nvidia_tao_core

    from tao_brev import tao_schema_pkg

    cache = tao_schema_pkg.cache_dir(tmp_path, "7.2.9")
    cache.mkdir(parents=True)
    shutil.copytree(Path(nvidia_tao_core.__file__).parent / "config", cache / "nvidia_tao_core" / "config")
    shutil.copy(Path(nvidia_tao_core.__file__), cache / "nvidia_tao_core" / "__init__.py")
    path = tmp_path / "spec.yaml"
    path.write_text(EXAMPLE_SPEC.read_text())
    try:
        result = _check(path, image="nvcr.io/nvidia/tao/tao-toolkit:7.2.9-pyt", state_root=tmp_path)
        assert result.checked and result.schema.startswith("nvidia-tao-core 7.2.9 ")
        assert str(cache) in str(__import__("sys").modules["nvidia_tao_core"].__file__)
    finally:   # the environment's own package again for the other tests
        import sys
        sys.path.remove(str(cache))
        for name in [m for m in sys.modules if m.startswith("nvidia_tao_core")]:
            del sys.modules[name]


def test_a_version_that_cannot_be_installed_is_a_warning_not_a_refusal(tmp_path):
    index = tmp_path / "empty-index"
    index.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PIP_INDEX_URL": index.as_uri(), "HOME": str(tmp_path)}
    result = _check(EXAMPLE_SPEC, image="nvcr.io/nvidia/tao/tao-toolkit:7.9.9-pyt", state_root=tmp_path, env=env)
    assert not result.checked and "7.9.9" in result.reason and "could not be installed" in result.reason
    assert not (tmp_path / "brev" / "tao-schemas" / "7.9.9").exists()     # nothing half-installed left


@pytest.mark.parametrize("image,why", [("ubuntu:22.04", "not a numbered TAO toolkit -pyt image"),
                                       ("nvcr.io/nvidia/tao/tao-toolkit:7.3.0-deploy", "not a numbered")])
def test_an_image_of_unknown_schema_is_not_checked_and_says_so(image, why):
    result = _check(EXAMPLE_SPEC, image=image)
    assert not result.checked and why in result.reason


def test_convert_actions_take_another_schema_and_are_not_checked():
    result = _check(EXAMPLE_SPEC, network="dino", action="convert")
    assert not result.checked and "another schema" in result.reason


# -- end to end: refused before any brev exec ---------------------------------------------------------
def _submit(world, spec: Path, *extra: str):
    data = world.put_dataset("box")
    return world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
                     "visual_changenet", "--action", "train", "--spec", str(spec), "--inputs",
                     f"{data}=levir_cd_tiny", *extra, TAO_BREV_SPEC_LEAVE_OUT="")


@pytest.mark.parametrize("case", ["betas", "stray", "wrong_type", "unknown_override", "bare_override"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_each_mistake_is_refused_before_any_brev_exec(world, tmp_path, case, dry_run):
    spec, extra = EXAMPLE_SPEC, []
    if case == "betas":
        spec = _spec_with(tmp_path, lambda d: d["train"]["optim"].update(betas=[0.9, 0.999]))
    elif case == "stray":
        spec = _spec_with(tmp_path, lambda d: d.update(stray_key=1))
    elif case == "wrong_type":
        spec = _spec_with(tmp_path, lambda d: d["train"].update(num_epochs=SECRETLESS_VALUE))
    else:
        extra = ["--", "train.num_epochz=2" if case == "unknown_override" else "train.num_epochs"]
    before = world.sim.exec_count()
    res = _submit(world, spec, *(["--dry-run"] if dry_run else []), *extra)
    assert res.code == 2, res
    error = res.json["error"]
    assert error["code"] == "BAD_SPEC" and SECRETLESS_VALUE not in res.stdout
    validate("error", res.json)
    where = res.json["findings"][0]["where"]
    assert where.startswith("override ") if extra else re.fullmatch(re.escape(str(spec)) + r":\d+:\d+", where)
    assert world.sim.exec_count() == before                              # no brev exec at all
    assert not list((Path(world.env["TAO_STATE_DIR"]) / "jobs").glob("*.json"))   # nothing recorded
    if case == "unknown_override":   # the closest key is known: the corrected call is next, and it passes
        assert res.json["next"].endswith("-- train.num_epochs=2") and "train.num_epochs" in error["fix"], res
        words = shlex.split(res.json["next"])
        again = world.run(Path(words[0]).name, *words[1:])
        assert again.code == 0 and (again.json.get("dry_run") or again.json.get("job_id")), again
    else:
        assert "--no-spec-check" in error["fix"] and res.json["next"] is None


def test_the_shipped_example_passes_and_the_answer_names_the_schema(world):
    res = _submit(world, EXAMPLE_SPEC, "--dry-run")
    assert res.code == 0, res
    assert res.json["spec_check"] == {"checked": True, "schema": "nvidia-tao-core 7.3.0 nvidia_tao_core.config."
                                      "visual_changenet.default_config.ExperimentConfig"}


def test_no_spec_check_skips_it_and_the_answer_says_so(world, tmp_path):
    spec = _spec_with(tmp_path, lambda d: d.update(stray_key=1))
    res = _submit(world, spec, "--dry-run", "--no-spec-check")
    assert res.code == 0, res
    assert res.json["spec_check"]["checked"] is False and "--no-spec-check" in res.json["spec_check"]["reason"]
    assert any(w.startswith("spec not checked: --no-spec-check") for w in res.json["warnings"])


def _wheel_of_the_installed_package(directory: Path, version: str) -> Path:
    """A real py3-none-any wheel of nvidia_tao_core's config modules, as version ``version`` (offline)."""
    import base64
    import hashlib
    import zipfile

    import nvidia_tao_core

    source = Path(nvidia_tao_core.__file__).parent
    dist = f"nvidia_tao_core-{version}.dist-info"
    files = {f"nvidia_tao_core/{p.relative_to(source)}": p.read_bytes()
             for p in sorted(source.rglob("*.py")) if p.parts[len(source.parts)] in ("__init__.py", "config")}
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: nvidia-tao-core\nVersion: {version}\n".encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
              f"{len(data)}" for name, data in files.items()] + [f"{dist}/RECORD,,"]
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = directory / f"nvidia_tao_core-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return wheel


def test_another_version_is_installed_on_demand_with_pip_no_deps_into_the_cache(tmp_path):
    import os
    import sys

    from tao_brev import tao_schema_pkg

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel_of_the_installed_package(wheels, "7.2.8")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    cache = tao_schema_pkg.cache_dir(tmp_path, "7.2.8")
    try:
        result = _check(EXAMPLE_SPEC, image="nvcr.io/nvidia/tao/tao-toolkit:7.2.8-pyt", state_root=tmp_path, env=env)
        assert result.checked and result.schema.startswith("nvidia-tao-core 7.2.8 "), result.reason
        assert (cache / "nvidia_tao_core" / "config" / "visual_changenet" / "default_config.py").is_file()
        assert not list(cache.parent.glob(".7.2.8.*"))                   # the temporary target was renamed
    finally:
        if str(cache) in sys.path:
            sys.path.remove(str(cache))
        for name in [m for m in sys.modules if m.startswith("nvidia_tao_core")]:
            del sys.modules[name]


def test_a_problem_inside_a_list_names_the_element_and_its_line(tmp_path):
    from tao_brev.errors import TaoBrevError

    source = FIXTURES / "dino.train.yaml"
    data = yaml.safe_load(source.read_text())
    data["dataset"]["train_data_sources"][0]["image_dir"] = [SECRETLESS_VALUE]     # Dict[str, str] takes a string
    path = tmp_path / "dino.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(TaoBrevError) as info:
        _check(path, network="dino")
    finding = info.value.details["answer"]["findings"][0]
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith("- image_dir"))
    assert finding["key"] == "dataset.train_data_sources[0]" and finding["where"] == f"{path}:{line}:5"
    assert "Dict[str, str]" in finding["problem"] and SECRETLESS_VALUE not in str(info.value.details)


def test_key_paths_read_list_indices():
    from tao_brev.tao_schema import dotted, parts

    assert parts("dataset.train_data_sources[0].image_dir") == ("dataset", "train_data_sources", 0, "image_dir")
    assert dotted(("dataset", "sources", 2, "x")) == "dataset.sources[2].x" and parts("") == ()


# -- the values the action reads (tao_brev/tao_schema_values.py): a ??? still missing, a ${...} that dangles ------
def _edited_spec(tmp_path: Path, name: str, edit) -> Path:
    data = yaml.safe_load(EXAMPLE_SPEC.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def test_an_evaluate_without_its_mandatory_checkpoint_is_refused_with_the_key(tmp_path):
    """nvidia-tao-core: evaluate.checkpoint is ??? (MISSING); tao-pytorch core/initialize_experiments.py
    initialize_evaluation_experiment reads cfg["evaluate"]["checkpoint"] and nothing fills it."""
    from tao_brev.errors import TaoBrevError
    with pytest.raises(TaoBrevError) as info:
        _check(EXAMPLE_SPEC, action="evaluate")
    assert info.value.code == "BAD_SPEC"
    keys = [f["key"] for f in info.value.details["answer"]["findings"]]
    assert keys == ["evaluate.checkpoint"], keys                    # not export.*, inference.*: not read
    assert "evaluate.checkpoint=VALUE" in info.value.message
    ok = _check(EXAMPLE_SPEC, action="evaluate", overrides=["evaluate.checkpoint=/results/model.pth"])
    assert ok.checked
    assert _check(EXAMPLE_SPEC, action="train").checked             # train does not read evaluate.*


def test_a_placeholder_in_the_spec_is_judged_as_tao_s_merge_judges_it(tmp_path):
    """omegaconf's merge (hydra-core config_loader_impl.py:469) keeps the schema's value where the spec says
    ???: a key with a default passes; one mandatory in the schema stays missing and is refused, at its line."""
    from tao_brev.errors import TaoBrevError
    spec = _edited_spec(tmp_path, "s.yaml", lambda d: (d["train"].update(pretrained_model_path="???"),
                                                     d.update(evaluate={"checkpoint": "???"})))
    assert _check(spec).checked                                        # train: the schema's null stands
    with pytest.raises(TaoBrevError) as info:
        _check(spec, action="evaluate")
    finding = info.value.details["answer"]["findings"][0]
    assert finding["key"] == "evaluate.checkpoint" and re.search(r"s\.yaml:\d+:\d+$", finding["where"]), finding


def test_values_tao_fills_itself_are_not_refused(tmp_path):
    """core/utilities.py update_results_dir derives <action>.results_dir; the bundle's override sets results_dir."""
    spec = _edited_spec(tmp_path, "r.yaml", lambda d: (d.update(results_dir="???"), d["train"].update(results_dir="???")))
    assert _check(spec).checked


@pytest.mark.parametrize("target", ["${train.no_such_key}", "${nowhere}", "${evaluate.checkpoint}",
                                    # beside a resolver call: OmegaConf resolves every interpolation of a string
                                    "${oc.env:HOME}/${nowhere.key}", "${nowhere.key}/${oc.env:HOME}",
                                    "${now:%Y}-${.no_such_sibling}", "${oc.env:A,b}${results_dir}/${train.nope}"])
def test_a_dangling_interpolation_is_refused_without_its_text(tmp_path, target):
    from tao_brev.errors import TaoBrevError
    spec = _edited_spec(tmp_path, "i.yaml", lambda d: d["train"].update(pretrained_model_path=target))
    with pytest.raises(TaoBrevError) as info:
        _check(spec)
    finding = info.value.details["answer"]["findings"][0]
    assert info.value.code == "BAD_SPEC" and finding["key"] == "train.pretrained_model_path", finding
    assert target not in str(info.value.details) + info.value.message


def test_interpolations_that_resolve_or_call_a_resolver_pass_and_other_actions_only_warn(tmp_path):
    def edit(d):
        d["train"]["pretrained_model_path"] = "${results_dir}/pretrained.pth"       # resolves
        d["train"]["seed"] = "${oc.env:SEED_FROM_THE_CONTAINER,7}"                 # the container's environment
        d["train"]["resume_training_checkpoint_path"] = "${oc.env:HOME}/${results_dir}/${.seed}.pth"   # both kinds
        d.setdefault("export", {})["onnx_file"] = "${export.no_such}"             # another action's section
    result = _check(_edited_spec(tmp_path, "ok.yaml", edit))
    assert result.checked and result.resolved["train.pretrained_model_path"].endswith("/pretrained.pth")
    assert any("export.onnx_file" in w and "not refused" in w for w in result.warnings), result.warnings


def test_a_path_inside_an_interpolation_is_checked_like_a_plain_spec_path(tmp_path):
    from tao_brev import spec_paths
    from tao_brev.errors import TaoBrevError

    def edit(d):
        d["dataset"]["segment"]["root_dir"] = "/data/levir_cd_tiny"
        d["train"]["pretrained_model_path"] = "${dataset.segment.root_dir}/../elsewhere/model.pth"
    spec = _edited_spec(tmp_path, "p.yaml", edit)
    result = _check(spec)
    data = yaml.safe_load(spec.read_text())
    mounts = [("/h/levir", "/data/levir_cd_tiny", True)]
    with pytest.raises(TaoBrevError) as info:   # /data/elsewhere is no input: refused like a plain path
        spec_paths.named(data, [], mounts, "visual_changenet", "train", result.resolved)
    assert info.value.code == "SPEC_INPUT_UNKNOWN" and "train.pretrained_model_path" in info.value.message
    edit2 = dict(result.resolved, **{"train.pretrained_model_path": "/data/levir_cd_tiny/model.pth"})
    found = spec_paths.named(data, [], mounts, "visual_changenet", "train", edit2)
    assert ("train.pretrained_model_path", "/data/levir_cd_tiny/model.pth") in found


# -- the override reading is hydra-core's alone; a finding names its override by number ------------------------
def test_override_values_are_hydras_own_typing_without_a_second_reading():
    from tao_brev import tao_schema
    assert tao_schema.override_value("int(3)") == 3 and tao_schema.override_value("'a,b'") == "a,b"
    assert not hasattr(tao_schema, "_KEY") and tao_schema.hydra_available()


def test_a_finding_names_its_override_by_index_not_by_text():
    from tao_brev.errors import TaoBrevError
    with pytest.raises(TaoBrevError) as info:
        _check(EXAMPLE_SPEC, overrides=["train.seed=7", "train.num_epoch=3"])
    finding = info.value.details["answer"]["findings"][0]
    assert finding["override"] == 2 and finding["closest"] == "train.num_epochs", finding
    with pytest.raises(TaoBrevError) as info:
        _check(EXAMPLE_SPEC, overrides=["bare_key"])
    assert info.value.details["answer"]["findings"][0]["override"] == 1
