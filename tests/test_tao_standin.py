"""The TAO stand-in behaves as the TAO 7 PyTorch container (tests/sim/tao_standin.py, tao_lightning.py).

Each expectation names the tao-pytorch source it comes from; the container runs in the docker
simulator, the spec is merged with nvidia-tao-core 7.3.0's real ExperimentConfig.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLE_SPEC
from tests.sim.simctl import TAO_IMAGE, Simulator


@pytest.fixture
def sim(tmp_path):
    simulator = Simulator(tmp_path / "sim")
    simulator.add_instance("box")
    simulator.add_instance("eight", gpus=["NVIDIA A100-SXM4-80GB"] * 8)
    for name in ("box", "eight"):
        simulator.preload_image(name, TAO_IMAGE)
        (simulator.instance_home(name) / "data" / "levir").mkdir(parents=True)
    yield simulator
    simulator.close()


def spec(sim, name="spec.yaml", instance="box", simulate=None, text=None, **train) -> str:
    """The shipped example spec (its dataset at /data/levir) with train overrides, in ~/data."""
    data = yaml.safe_load(EXAMPLE_SPEC.read_text())
    data["dataset"]["segment"]["root_dir"] = "/data/levir"
    data["train"].update(train)
    data["simulate"] = {"epoch_seconds": 0.01, **(simulate or {})}
    path = sim.instance_home(instance) / "data" / name
    path.write_text(text if text is not None else yaml.safe_dump(data))
    return f"/data/{name}"


def run(sim, name, spec_path, *overrides, action="train", instance="box", gpus="--gpus all",
        arch="visual_changenet") -> dict:
    """Run the TAO image to its end; its exit code, logs and results dir (host path)."""
    cmd = (f"docker run -d --name job-{name} {gpus} -v ~/data:/data -v ~/results:/results {TAO_IMAGE} "
           f"{arch} {action} -e {spec_path} " + " ".join(overrides))
    started = subprocess.run(["brev", "exec", instance, cmd], env=sim.env(), stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=60)
    assert started.returncode == 0, started.stderr
    state = sim.wait_container(instance, f"job-{name}")["State"]
    return {"code": state["ExitCode"], "logs": sim.container_logs(instance, f"job-{name}"),
            "results": sim.instance_home(instance) / "results"}


def status_lines(results: Path, action="train") -> list[dict]:
    return [json.loads(line) for line in (results / action / "status.json").read_text().splitlines()]


def epochs_run(lines: list[dict]) -> list[int]:
    return [x["epoch"] for x in lines if "epoch" in x]


def test_resume_from_latest_in_the_same_results_dir_runs_only_the_later_epochs(sim):
    first = run(sim, "a", spec(sim, num_epochs=3))
    assert first["code"] == 0, first["logs"]
    train = first["results"] / "train"
    assert os.readlink(train / "changenet_model_segment_latest.pth") == "model_epoch_002_step_00075.pth"
    again = run(sim, "b", spec(sim, "longer.yaml", num_epochs=5))
    assert again["code"] == 0, again["logs"]
    lines = status_lines(again["results"])
    # core/initialize_experiments.py:66-73: the results dir's *_latest.pth, resolved
    resuming = [x for x in lines if x.get("message", "").startswith("Resuming training")]
    assert [(x["status"], x["message"]) for x in resuming] == [
        ("RUNNING", "Resuming training from checkpoint: /results/train/model_epoch_002_step_00075.pth")]
    assert epochs_run(lines) == [0, 1, 2, 3, 4]   # the same status.json, appended (append=True)
    resumed = [x for x in lines if "epoch" in x][3:]
    assert [(x["epoch"], x["step"], x["max_epoch"]) for x in resumed] == [(3, 100, 4), (4, 125, 4)]
    assert sorted(p.name for p in train.glob("model_epoch_*.pth"))[-2:] == ["model_epoch_003_step_00100.pth",
                                                                            "model_epoch_004_step_00125.pth"]
    assert os.readlink(train / "changenet_model_segment_latest.pth") == "model_epoch_004_step_00125.pth"


def test_resume_from_the_spec_s_checkpoint_path_in_a_fresh_results_dir(sim):
    assert run(sim, "a", spec(sim, num_epochs=2), "results_dir=/results/one")["code"] == 0
    path = "/results/one/train/model_epoch_001_step_00050.pth"
    done = run(sim, "b", spec(sim, "resume.yaml", num_epochs=4, resume_training_checkpoint_path=path),
               "results_dir=/results/two")
    assert done["code"] == 0, done["logs"]
    lines = status_lines(done["results"] / "two")
    assert epochs_run(lines) == [2, 3]
    assert f"Resuming training from checkpoint: {path}" in [x.get("message") for x in lines]
    assert lines[-1]["message"] == "Train finished successfully." and lines[-1]["status"] == "RUNNING"


def test_a_missing_resume_checkpoint_fails_as_lightning_reports_it(sim):
    done = run(sim, "a", spec(sim, resume_training_checkpoint_path="/results/none.pth"))
    assert done["code"] == 1
    last = status_lines(done["results"])[-1]
    # lightning_fabric torch_io.load_checkpoint; monitor_status's FileNotFoundError clause (workflow.py:98-103)
    assert (last["status"], last["message"]) == ("FAILURE", "File system error: Checkpoint file not found: "
                                                            "/results/none.pth")
    assert "Execution status: FAIL" in done["logs"]


def test_a_finished_run_resumed_again_runs_nothing(sim):
    assert run(sim, "a", spec(sim, num_epochs=2))["code"] == 0
    again = run(sim, "b", spec(sim, num_epochs=2))
    assert again["code"] == 0 and "`Trainer.fit` stopped: `max_epochs=2` reached." in again["logs"]
    assert epochs_run(status_lines(again["results"])) == [0, 1]


def test_checkpoints_every_checkpoint_interval_and_validation_every_validation_interval(sim):
    done = run(sim, "a", spec(sim, num_epochs=3, checkpoint_interval=2, validation_interval=2))
    assert done["code"] == 0
    train = done["results"] / "train"
    # ModelCheckpoint(every_n_epochs=2): (current_epoch + 1) % 2 == 0 -> epoch 1 only
    assert [p.name for p in train.glob("model_epoch_*.pth")] == ["model_epoch_001_step_00050.pth"]
    lines = status_lines(done["results"])
    messages = [x["message"] for x in lines]
    assert messages.count("Eval metrics generated.") == 1 and messages.count("Train metrics generated.") == 3
    eval_at = messages.index("Eval metrics generated.")
    assert lines[eval_at + 1]["epoch"] == 1 and lines[eval_at + 1]["kpi"] == lines[eval_at]["kpi"]


def test_schema_merge_errors_exit_1_with_hydra_s_text(sim):
    text = EXAMPLE_SPEC.read_text().replace("    weight_decay: 0.01\n", "    weight_decay: 0.01\n    betas: [0, 1]\n")
    done = run(sim, "a", spec(sim, "betas.yaml", text=text))
    assert done["code"] == 1
    # Hydra config_loader_impl.py _load_single_config, printed by run_and_report with its cause
    want = "Error merging 'betas.yaml' with schema\nKey 'betas' not in 'CNOptimConfig'\n    full_key: train.optim.betas"
    assert want in done["logs"]
    assert not (done["results"] / "train" / "status.json").exists()   # Hydra fails before monitor_status
    unknown = run(sim, "b", spec(sim), "train.no_such_key=1")
    assert unknown["code"] == 1 and "Could not override 'train.no_such_key'." in unknown["logs"]
    bare = run(sim, "c", spec(sim), "train.num_epochs")
    assert bare["code"] == 1 and "Error parsing override 'train.num_epochs'\nmissing EQUAL at '<EOF>'" in bare["logs"]
    typed = run(sim, "d", spec(sim), "train.num_epochs=many")
    assert typed["code"] == 1 and "Error merging override train.num_epochs=many" in typed["logs"]


def test_num_gpus_beyond_the_visible_gpus_fails_as_lightning_does(sim):
    done = run(sim, "a", spec(sim, num_gpus=2))
    assert done["code"] == 1
    # lightning_fabric/utilities/device_parser.py _sanitize_gpu_ids
    assert "MisconfigurationException: You requested gpu: [0, 1]\n But your machine only has: [0]" in done["logs"]
    eight = run(sim, "b", spec(sim, instance="eight", num_gpus=8), instance="eight")
    assert eight["code"] == 0, eight["logs"]
    ran = yaml.safe_load((eight["results"] / "train" / "experiment.yaml").read_text())
    assert ran["train"]["num_gpus"] == 8 and "Initializing distributed: GLOBAL_RANK: 7, MEMBER: 8/8" in eight["logs"]
    one = run(sim, "c", spec(sim, "one.yaml", instance="eight"), "results_dir=/results/one", instance="eight")
    assert one["code"] == 0 and "Initializing distributed" not in one["logs"]   # 8 GPUs granted, 1 used


def test_error_level_log_calls_are_failure_lines_while_training_goes_on(sim):
    done = run(sim, "a", spec(sim, num_epochs=3, simulate={"log_errors": {1: "Unable to log the graph"}}))
    assert done["code"] == 0
    lines = status_lines(done["results"])
    failures = [x for x in lines if x["status"] == "FAILURE"]
    assert [(x["message"], x["verbosity"]) for x in failures] == [("Unable to log the graph", "ERROR")]
    assert epochs_run(lines) == [0, 1, 2] and lines[-1]["message"] == "Train finished successfully."


def test_evaluate_writes_its_kpis_and_no_kpis_when_the_model_writes_none(sim):
    assert run(sim, "a", spec(sim, num_epochs=1))["code"] == 0
    ckpt = "evaluate.checkpoint=/results/train/model_epoch_000_step_00025.pth"
    done = run(sim, "b", spec(sim), ckpt, action="evaluate")
    assert done["code"] == 0, done["logs"]
    lines = status_lines(done["results"], "evaluate")
    assert lines[-2]["message"] == "Test metrics generated." and "test_miou" in lines[-2]["kpi"]
    assert lines[-1]["message"] == "Evaluate finished successfully."
    none = run(sim, "c", spec(sim, "nokpi.yaml", simulate={"evaluate_kpis": False}), ckpt,
               "results_dir=/results/nokpi", action="evaluate")
    assert none["code"] == 0 and not any("kpi" in x for x in status_lines(none["results"] / "nokpi", "evaluate"))
    missing = run(sim, "d", spec(sim), "results_dir=/results/m", action="evaluate")
    assert missing["code"] == 1
    assert status_lines(missing["results"] / "m", "evaluate")[-1]["message"].startswith(
        "Configuration error: Missing mandatory value: evaluate.checkpoint")


def test_progress_of_a_resumed_run_read_from_the_stand_in_s_status_file(sim):
    """End to end: the status.json the stand-in's resumed run appended, through tao_brev.progress."""
    from tao_brev import progress

    assert run(sim, "a", spec(sim, num_epochs=3))["code"] == 0
    again = run(sim, "b", spec(sim, "longer.yaml", num_epochs=5))
    path = again["results"] / "train" / "status.json"
    lines = path.read_text().splitlines()
    file = progress.StatusFile("train/status.json", int(path.stat().st_mtime), path.stat().st_size, lines[-12:])
    got = progress.after_end(progress.summarize(file, path.stat().st_mtime, "train"), "COMPLETE", "train")
    assert (got["epoch"], got["num_epochs"], got["percent"], got["eta_s"]) == (5, 5, 100.0, 0)
    assert got["resumed_from"] == "/results/train/model_epoch_002_step_00075.pth" and "note" not in got
    table = progress.metrics(progress.StatusFile("train/status.json", 1, 1, lines))
    assert [row["epoch"] for row in table["epochs"]] == [1, 2, 3, 4, 5]
    assert all({"val_loss", "train_loss"} <= set(row["kpi"]) for row in table["epochs"])


def test_pointpillars_runs_its_own_loop_and_progress_reads_it(sim):
    """pointpillars/scripts/train.py + tools/train_utils/train_utils.py: status.json in results_dir,
    max_epoch = total_epochs, checkpoint_epoch_<N>.pth, no _latest link, resume from the spec's path."""
    from tao_brev import progress

    text = "results_dir: /results/pp\ntrain:\n  num_epochs: 3\nsimulate:\n  epoch_seconds: 0.01\n"
    done = run(sim, "pp", spec(sim, "pp.yaml", text=text), arch="pointpillars")
    assert done["code"] == 0, done["logs"]
    out = done["results"] / "pp"
    names = sorted(p.name for p in out.glob("checkpoint_epoch_*.pth"))
    assert names == [f"checkpoint_epoch_{n}.pth" for n in (1, 2, 3)]
    assert not list(out.glob("*_latest.pth"))
    lines = [json.loads(x) for x in (out / "status.json").read_text().splitlines()]
    assert [(x["epoch"], x["max_epoch"]) for x in lines if "epoch" in x] == [(0, 3), (1, 3), (2, 3)]
    assert lines[-1]["message"] == "Training finished successfully."
    file = progress.StatusFile("status.json", 1, 1, (out / "status.json").read_text().splitlines())
    got = progress.summarize(file, None, "train")
    assert (got["epoch"], got["num_epochs"], got["percent"], got["finished"]) == (3, 3, 100.0, True)
    assert [row["epoch"] for row in progress.metrics(file)["epochs"]] == [1, 2, 3]
    more = text.replace("num_epochs: 3", "num_epochs: 5\n"
                        "  resume_training_checkpoint_path: /results/pp/checkpoint_epoch_3.pth")
    again = run(sim, "pp2", spec(sim, "pp2.yaml", text=more), "results_dir=/results/pp2", arch="pointpillars")
    assert again["code"] == 0, again["logs"]
    resumed = [json.loads(x) for x in (done["results"] / "pp2" / "status.json").read_text().splitlines()]
    assert [x["epoch"] for x in resumed if "epoch" in x] == [3, 4]


def test_the_fallback_writer_writes_what_nvidia_tao_core_s_status_logger_writes(tmp_path):
    """The real-Docker tier's image has no nvidia-tao-core: its writer must write the same lines."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "sim"))
    import tao_standin
    from nvidia_tao_core.loggers import logging as core_logging

    core = core_logging.StatusLogger(filename=str(tmp_path / "core.json"), is_master=True, verbosity=1)
    own = tao_standin.FileStatusLogger(tmp_path / "own.json")
    for logger, status in ((core, core_logging.Status.RUNNING), (own, "RUNNING")):
        logger.kpi = {"val_loss": 0.5}
        logger.write(data={"epoch": 0, "max_epoch": 2}, status_level=status, message="Training loop in progress")
    core_line, own_line = (json.loads((tmp_path / n).read_text()) for n in ("core.json", "own.json"))
    assert list(core_line) == list(own_line)
    assert {k: v for k, v in core_line.items() if k != "time"} == {k: v for k, v in own_line.items() if k != "time"}


def test_a_gpu_lost_mid_run_fails_with_cuda_s_unknown_error(sim):
    done = run(sim, "a", spec(sim, simulate={"nvml_lost": True}))
    assert done["code"] == 1
    assert "Failed to initialize NVML: Unknown Error" in done["logs"] and "RuntimeError: CUDA error: unknown error" \
        in done["logs"]


def test_the_job_s_status_logger_takes_loose_fields_as_the_leaky_job_writes_them(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).parent / "sim"))
    import tao_standin

    status = tao_standin.Status(tmp_path / "status.json")
    status.kpi = {"acc": 0.5}
    status.write(message="loaded", loss_x=0.25)
    line = json.loads((tmp_path / "status.json").read_text())
    assert (line["loss_x"], line["kpi"], line["message"], line["status"]) == (0.25, {"acc": 0.5}, "loaded", "RUNNING")
