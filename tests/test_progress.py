"""Training progress, metrics and stall detection (tao_brev/progress.py and the status verb).

Pure functions are tested with an injected clock on status files written by
TAO's own logger in the order TAO's training writes them (``tests/tao_lines.py``;
tests/test_progress_tao.py has the TAO cases) and on other shapes TAO archs
produce; the status verb end to end on the simulator, where a silent
job is made "old" by backdating its status file and log entries (never by
waiting on the wall clock).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, validate
from tao_brev import progress, remote
from tao_brev.progress import StatusFile

from tao_lines import T0, TaoWriter, train_kpis, val_kpis  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "sim"))
import tao_lightning  # noqa: E402  (the KPIs the simulator's TAO stand-in writes)


def stand_in_kpis(epochs_done: int) -> dict:
    """The stand-in's latest KPIs after ``epochs_done`` epochs with validation every epoch."""
    return {**tao_lightning.val_kpis(epochs_done - 1, {}), **tao_lightning.train_kpis(epochs_done - 1, {})}


def write_run(tmp_path: Path, epochs_done: int, num_epochs: int, epoch_s: float, **fields_filter) -> StatusFile:
    """A status.json as TAO writes it after ``epochs_done`` epochs of ``epoch_s`` seconds."""
    path = tmp_path / "status.json"
    path.unlink(missing_ok=True)
    tao = TaoWriter(path)
    tao.start()
    tao.train(num_epochs, last=epochs_done - 1, epoch_s=epoch_s, end=False)
    file = tao.file()
    if fields_filter.get("drop"):
        file.lines = [json.dumps({k: v for k, v in json.loads(ln).items() if k not in fields_filter["drop"]})
                      for ln in file.lines]
    return file


# -- progress from TAO's lines ------------------------------------------------------
@pytest.mark.parametrize("drop", [(), ("time_per_epoch", "eta"), ("time_per_epoch",)])
def test_progress_and_eta_within_one_epoch_of_the_truth(tmp_path, drop):
    epoch_s, done, total = 90.0, 4, 10
    file = write_run(tmp_path, done, total, epoch_s, drop=drop)
    for since in (0, 30, 89):   # the instance clock at several points of epoch 5
        now = file.mtime + since
        got = progress.summarize(file, now, "train")
        truth_remaining = (total - done) * epoch_s - since
        assert (got["epoch"], got["num_epochs"], got["percent"]) == (done, total, 40.0), got
        assert abs(got["eta_s"] - truth_remaining) <= epoch_s, (got, truth_remaining)
        assert got["since_update_s"] == since
        assert got["eta_source"] == ("time_per_epoch" if "time_per_epoch" not in drop else
                                     "eta_field" if "eta" not in drop else "observed_rate")
    assert got["time_per_epoch_s"] == pytest.approx(epoch_s, abs=1.0)
    assert got["kpi"] == {**val_kpis(done - 1), **train_kpis(done - 1)}   # validation + training, latest of each


def test_timedelta_strings_and_numbers():
    assert progress.seconds("0:01:02.500000") == 62.5
    assert progress.seconds("1 day, 2:00:00") == 93600
    assert progress.seconds("3 days, 0:00:01") == 259201
    assert progress.seconds(12) == 12.0 and progress.seconds("12.5") == 12.5
    assert progress.seconds("soon") is None and progress.seconds(float("nan")) is None


@pytest.mark.parametrize("lines, want", [
    # pointpillars' loop (train_utils.py:89-94): kpi on the epoch line, 0-based epoch, max_epoch =
    # total_epochs, no step: epoch 1 of max_epoch 4 is 2 of 4 done
    (['{"epoch": 0, "max_epoch": 4, "time_per_epoch": 10, "kpi": {"loss": 2.0}, "status": "RUNNING"}',
      '{"epoch": 1, "max_epoch": 4, "time_per_epoch": 10, "kpi": {"loss": 1.5}, "status": "RUNNING"}'],
     {"epoch": 2, "num_epochs": 4, "percent": 50.0, "kpi": {"loss": 1.5}, "eta_s": 20}),
    # TAOStatusLogger (loggers.py:124-130, it has step): max_epoch is num_epochs - 1
    (['{"epoch": 1, "step": 50, "max_epoch": 4, "max_step": 125, "time_per_epoch": 10, "status": "RUNNING"}'],
     {"epoch": 2, "num_epochs": 5, "percent": 40.0, "eta_s": 30, "step": 50, "max_step": 125}),
    # no max_epoch: no percent, no ETA, still the epoch
    (['{"epoch": 7, "time_per_epoch": "0:00:05", "status": "RUNNING"}'],
     {"epoch": 7, "num_epochs": None, "eta_s": None}),
    # a line being written (no newline yet, cut) is skipped, counted
    (['{"epoch": 2, "max_epoch": 4, "time_per_epoch": "0:00:10", "status": "RUNNING"}', '{"epoch": 3, "max_'],
     {"epoch": 3, "unreadable_lines": 1, "eta_s": 10}),
    # evaluate of an older TAO: STARTED then SUCCESS with KPIs, no epochs
    (['{"status": "STARTED", "message": "Starting evaluate."}',
      '{"status": "SUCCESS", "kpi": {"mAP": 0.71}, "message": "Evaluation finished successfully."}'],
     {"status": "SUCCESS", "kpi": {"mAP": 0.71}, "finished": True}),
    # an ERROR-level line after three epochs, loss gone to NaN (python json writes NaN): not the end
    (['{"epoch": 2, "step": 75, "max_epoch": 5, "time_per_epoch": "0:00:10", "kpi": {"loss": NaN}, '
      '"status": "RUNNING"}', '{"status": "FAILURE", "message": "loss is nan"}'],
     {"status": "FAILURE", "eta_s": 30, "kpi": {"loss": "nan"}, "warnings": ["loss is nan"]}),
])
def test_other_progress_shapes(lines, want):
    got = progress.summarize(StatusFile("train/status.json", int(T0), 100, lines), T0, "train")
    assert got["available"] is True
    for key, value in want.items():
        assert got.get(key) == value, (key, got)


def test_missing_or_empty_status_file_is_normal():
    missing = progress.summarize(None, T0, "evaluate")
    assert missing["available"] is False and "evaluate" in missing["note"]
    empty = progress.summarize(StatusFile("status.json", int(T0), 0, []), T0, "train")
    assert empty["available"] is False and empty["note"]
    files = [StatusFile("evaluate/status.json", 1, 1), StatusFile("status.json", 1, 1)]
    assert progress.pick(files, "train").path == "status.json"      # older archs: directly in results_dir
    assert progress.pick(files, "evaluate").path == "evaluate/status.json"


# -- metrics ----------------------------------------------------------------------
def test_metrics_credit_each_epoch_its_own_kpis_and_find_the_best(tmp_path):
    file = write_run(tmp_path, 6, 6, 10.0)
    got = progress.metrics(file, last=3)
    assert [row["epoch"] for row in got["epochs"]] == [4, 5, 6] and got["truncated"] is True
    for row in got["epochs"]:
        assert row["kpi"] == {**val_kpis(row["epoch"] - 1), **train_kpis(row["epoch"] - 1)}, row
    assert got["best"]["val_acc"]["goal"] == "max" and got["best"]["val_acc"]["best"]["epoch"] == 6
    assert got["best"]["train_loss"]["goal"] == "min" and got["best"]["train_loss"]["best"]["epoch"] == 6


def test_metrics_of_a_diverging_run():
    lines = []
    for epoch in range(0, 4):   # TAO's epochs 0..3: 1..4 done
        kpis = tao_lightning.train_kpis(epoch, {"diverge": True})
        lines.append(json.dumps({"epoch": epoch, "max_epoch": 9, "kpi": kpis, "status": "RUNNING"}))
    lines.append(json.dumps({"kpi": {"learning_rate": 0.001}, "status": "RUNNING"}))
    got = progress.metrics(StatusFile("train/status.json", 1, 1, lines), last=10)
    loss = got["best"]["train_loss"]
    assert loss["best"]["epoch"] == 1 and loss["last"]["epoch"] == 4 and loss["last"]["value"] > loss["best"]["value"]
    assert got["best"]["learning_rate"]["goal"] is None and got["best"]["learning_rate"]["best"] is None


# -- stalls ---------------------------------------------------------------------
def test_stall_threshold_defaults():
    assert progress.stall_threshold(120, 5000) == (120.0, "flag")
    assert progress.stall_threshold(None, 10) == (progress.STALL_FLOOR_S, "time_per_epoch")
    assert progress.stall_threshold(None, 2000) == (3 * 2000, "time_per_epoch")
    assert progress.stall_threshold(None, None) == (progress.STALL_FALLBACK_S, "fallback")


def test_stall_uses_the_latest_sign_of_life_on_the_instance_clock(tmp_path):
    file = write_run(tmp_path, 1, 10, 600.0)     # 600 s per epoch -> default threshold 1800 s
    started = "2026-11-30T10:00:00.000000000Z"
    log = f"{progress.iso(file.mtime + 100).replace('+00:00', '.5Z')} Epoch 2/10"
    fresh = progress.summarize(file, file.mtime + 1000, "train")
    quiet = progress.assess_stall("j", file.mtime + 1000, fresh, started, last_log=log)
    assert quiet["stalled"] is False and quiet["idle_s"] == 899 and quiet["last_log_line"] == "Epoch 2/10"
    late = progress.summarize(file, file.mtime + 2000, "train")
    hung = progress.assess_stall("j", file.mtime + 2000, late, started, last_log=log)
    assert hung["stalled"] is True and hung["threshold_s"] == 1800 and hung["threshold_source"] == "time_per_epoch"
    assert "teardown.py j" in hung["advice"] and hung["last_progress_at"]
    flagged = progress.assess_stall("j", file.mtime + 2000, late, started, explicit=5000, last_log=log)
    assert flagged["stalled"] is False and flagged["threshold_source"] == "flag"
    # before any status line or log line: the container start, against the fallback
    nothing = progress.summarize(None, progress.rfc3339_epoch(started) + 3601, "train")
    assert progress.assess_stall("j", progress.rfc3339_epoch(started) + 3601, nothing, started)["stalled"] is True


# -- the remote output ------------------------------------------------------------
def test_parse_jobs_output():
    tok = "Sabc"
    text = "\n".join([
        f"{tok}:J\tjob-a\t{{\"Status\":\"running\"}}", f"{tok}:F 100 20 train/status.json", '{"epoch": 1}',
        f"{tok}:LONG 99999", f"{tok}:J\tjob-b\t{{\"Status\":\"exited\",\"ExitCode\":1}}", f"{tok}:T",
        "Traceback (most recent call last):", "Error: No such container: 0123456789ab"])
    jobs, noise = progress.parse_jobs(text, tok)
    assert jobs["job-a"].files[0].lines == ['{"epoch": 1}'] and jobs["job-a"].files[0].long_lines == 1
    assert jobs["job-b"].files == [] and "Traceback" in jobs["job-b"].tail
    assert noise == ""
    _, noise = progress.parse_jobs("Cannot connect to the Docker daemon", tok)
    assert "Cannot connect" in noise


def test_the_all_jobs_script_does_not_grow_with_the_jobs():
    script = remote.progress_functions("S" + "0" * 12) + remote.read_all_jobs()
    assert "Env" not in script and "tao-job" in script and len(script) < 2500


# -- end to end on the simulator ------------------------------------------------------
def _status_path(world, job_id: str) -> Path:
    return world.sim.instance_home("box") / "tao-results" / job_id / "train" / "status.json"


def _wait_for_epoch(world, job_id: str, epoch: int, deadline_s: float = 60) -> list[dict]:
    """Block until ``epoch`` epochs are done in the job's status.json (TAO writes the 0-based
    ``epoch - 1``), its Train metrics line written (an event, not a timing assertion)."""
    path = _status_path(world, job_id)
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if path.exists():
            # Only whole lines: the stand-in may have created the file, or be mid-line, when it is read.
            lines = [json.loads(ln) for ln in path.read_text().split("\n")[:-1] if ln.strip()]
            written = bool(lines) and lines[-1].get("message") == "Train metrics generated."
            if any(x.get("epoch") == epoch - 1 for x in lines) and written:
                return lines
        time.sleep(0.05)
    raise AssertionError(f"{job_id} never reached epoch {epoch}")


def _hung_job(world, after_epoch: int = 2, epochs: int = 5) -> str:
    res = world.submit("--share-gpus",   # several live jobs on one instance, on purpose
                       spec=world.spec({"epoch_seconds": 0.05, "hang_after_epoch": after_epoch}, num_epochs=epochs))
    assert res.code == 0, res
    return res.json["job_id"]


def _age(world, job_id: str, seconds: float) -> None:
    path = _status_path(world, job_id)
    old = path.stat().st_mtime - seconds
    os.utime(path, (old, old))
    world.sim.backdate_container_logs("box", job_id, seconds)


def test_progress_mid_run_matches_the_status_lines_in_one_round_trip(world):
    job_id = _hung_job(world)
    lines = _wait_for_epoch(world, job_id, 2)
    before = world.sim.exec_count()
    res = world.run("poll_status.py", job_id)
    assert res.code == 0 and world.sim.exec_count() - before == 1, res
    validate("poll_status", res.json)
    got = res.json["progress"]
    epoch_line = [x for x in lines if "epoch" in x][-1]
    assert res.json["state"] == "RUNNING" and res.json["stalled"] is False
    assert (got["epoch"], got["num_epochs"], got["percent"]) == (2, 5, 40.0)
    assert (got["step"], got["max_step"]) == (2 * tao_lightning.STEPS_PER_EPOCH, 5 * tao_lightning.STEPS_PER_EPOCH)
    assert got["time_per_epoch_s"] == pytest.approx(progress.seconds(epoch_line["time_per_epoch"]), abs=1e-3)
    assert got["kpi"] == stand_in_kpis(2) and got["file"] == "train/status.json"
    assert res.json["stall"]["last_log_line"].startswith("Epoch 2/5") or "Epoch" in res.json["stall"]["last_log_line"]


def test_metrics_are_bounded(world):
    job_id = _hung_job(world, after_epoch=4, epochs=6)
    _wait_for_epoch(world, job_id, 4)
    res = world.run("poll_status.py", job_id, "--metrics", "2")
    assert res.code == 0, res
    validate("poll_status", res.json)
    table = res.json["metrics"]
    assert [r["epoch"] for r in table["epochs"]] == [3, 4] and table["epochs_read"] == 4
    assert table["best"]["val_acc"]["best"] == {"value": stand_in_kpis(4)["val_acc"], "epoch": 4}
    assert world.run("poll_status.py", job_id, "--metrics", "0").code == 2


def test_complete_answer_carries_the_final_kpis(world):
    res = world.submit(spec=world.spec({"epoch_seconds": 0.02}, num_epochs=3))
    job_id = res.json["job_id"]
    done = world.run("poll_status.py", job_id, "--wait", "--interval", "0.2", "--timeout", "60")
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    validate("poll_status", done.json)
    assert done.json["final_kpi"] == stand_in_kpis(3) and done.json["progress"]["percent"] == 100.0
    assert done.json["progress"]["finished"] is True and "note" not in done.json["progress"]
    assert world.run("teardown.py", job_id).code == 0
    after = world.run("poll_status.py", job_id)   # the container is gone: the kept progress answers
    assert after.json["final_kpi"] == stand_in_kpis(3), after


def test_all_carries_progress_for_every_job_with_one_exec_per_instance(world):
    world.sim.add_instance("box2")
    world.sim.preload_image("box2", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt")
    first = _hung_job(world, after_epoch=1)
    _wait_for_epoch(world, first, 1)
    before = world.sim.exec_count()
    one = world.run("poll_status.py", "--all")
    assert one.code == 0 and world.sim.exec_count() - before == 1, one
    script_one = world.sim.remote_commands("box")[-1]
    more = [_hung_job(world, after_epoch=1) for _ in range(2)]
    other = world.submit(spec=world.spec({"epoch_seconds": 0.05, "hang_after_epoch": 1}), instance="box2")
    more.append(other.json["job_id"])
    for job_id in more[:2]:
        _wait_for_epoch(world, job_id, 1)
    before = world.sim.exec_count()
    res = world.run("poll_status.py", "--all")
    assert res.code == 0 and world.sim.exec_count() - before == 2, res
    validate("poll_status", res.json)
    assert len(world.sim.remote_commands("box")[-1]) == len(script_one)   # not one byte more for 2 more jobs
    by_id = {j["job_id"]: j for j in res.json["jobs"]}
    for job_id in [first, *more[:2]]:
        assert by_id[job_id]["state"] == "RUNNING" and by_id[job_id]["progress"]["epoch"] == 1, by_id[job_id]
        assert by_id[job_id]["stalled"] is False
    docker_calls = [r for r in world.sim.audit() if r["tool"] == "docker"][-6:]
    assert not any("logs" in r["argv"] for r in docker_calls)   # no per-job docker call for running jobs


def test_a_hung_job_is_reported_stalled_and_wait_ends_on_it(world):
    job_id = _hung_job(world, after_epoch=1)
    _wait_for_epoch(world, job_id, 1)
    _age(world, job_id, 4000)
    res = world.run("poll_status.py", job_id)
    assert res.code == 0 and res.json["stalled"] is True, res
    validate("poll_status", res.json)
    stall = res.json["stall"]
    assert stall["idle_s"] >= 3999 and stall["threshold_source"] == "time_per_epoch" and stall["advice"]
    assert stall["last_log_line"] and stall["last_status_at"] and stall["last_log_at"]
    waited = world.run("poll_status.py", job_id, "--wait", "--interval", "0.2", "--timeout", "60")
    assert waited.code == 1 and waited.json["error"]["code"] == "JOB_STALLED", waited
    validate("poll_status", waited.json)
    kept = world.run("poll_status.py", job_id, "--wait", "--interval", "0.2", "--timeout", "60", "--teardown")
    assert kept.code == 1 and "teardown_skipped" in kept.json and world.sim.container("box", job_id), kept
    validate("poll_status", kept.json)
    assert world.run("poll_status.py", job_id, "--stall-after", "5000").json["stalled"] is False


def test_wait_teardown_with_explicit_stall_after_removes_the_hung_job(world):
    job_id = _hung_job(world, after_epoch=1)
    _wait_for_epoch(world, job_id, 1)
    _age(world, job_id, 900)
    res = world.run("poll_status.py", job_id, "--wait", "--interval", "0.2", "--timeout", "60", "--teardown",
                    "--stall-after", "600")
    # the stop that --stall-after asked for happened: ok, exit 0, one state everywhere (CANCELED)
    assert res.code == 0 and res.json["ok"] is True and "error" not in res.json, res
    validate("poll_status", res.json)
    assert res.json["state"] == res.json["teardown"]["state"] == "CANCELED"
    assert res.json["stalled_s"] >= 899 and res.json["cost"]["stalled_s"] == res.json["stalled_s"]
    story = res.json["stall_teardown"]
    assert story["stalled_s"] == res.json["stalled_s"] and story["state"] == "CANCELED" and story["logs_saved_to"]
    assert story["results_dir_on_instance"] == res.json["teardown"]["results_dir"]
    assert "--stall-after" not in (res.json.get("next") or "")       # never the command that just ran
    assert res.json["teardown"]["container_removed"] is True
    assert world.sim.container("box", job_id) is None
    assert world.run("poll_status.py", job_id).json["terminal_state"] == "CANCELED"


def test_mmlab_shaped_lines_per_iteration_with_top_level_metrics():
    """TAO's mmlab loggers: the current epoch on every iteration line, no max_epoch,
    loss and lr at the top level, time_per_epoch as HH:MM:SS, a validation kpi."""
    lines = [json.dumps({"epoch": e, "lr": 0.01, "loss": 1.0 / e, "time_per_epoch": "00:02:00", "eta": eta,
                         "graphical": {"loss": 1.0 / e}, "status": "RUNNING"})
             for e, eta in ((1, "0:08:00"), (1, "0:07:00"), (2, "0:06:00"))]
    lines.insert(2, json.dumps({"epoch": 1, "phase": "val", "accuracy_top-1": 71.5, "kpi": {"accuracy_top-1": 71.5},
                                "status": "RUNNING"}))
    file = StatusFile("train/status.json", int(T0), 1, lines)
    got = progress.summarize(file, T0 + 60, "train")
    assert got["epoch"] == 2 and got["num_epochs"] is None and "percent" not in got
    assert got["eta_s"] == 300 and got["eta_source"] == "eta_field"
    assert got["kpi"] == {"lr": 0.01, "loss": 0.5, "accuracy_top-1": 71.5}
    table = progress.metrics(file)
    assert [(r["epoch"], r["kpi"]["loss"]) for r in table["epochs"]] == [(1, 1.0), (2, 0.5)]
    assert table["best"]["accuracy_top-1"]["best"] == {"value": 71.5, "epoch": 1}


def test_all_judges_stalls_only_from_a_status_file():
    started = "2026-11-30T10:00:00Z"
    later = progress.rfc3339_epoch(started) + 99_999
    nothing = progress.summarize(None, later, "train")
    assert progress.assess_stall("j", later, nothing, started, status_only=True) is None
    assert progress.assess_stall("j", later, nothing, started)["stalled"] is True


def test_three_epochs_validated_every_two_with_error_lines_complete_with_their_warnings(world):
    res = world.submit(spec=world.spec({"epoch_seconds": 0.02, "log_errors": {1: "Unable to log the graph"}},
                                       num_epochs=3, validation_interval=2))
    done = world.run("poll_status.py", res.json["job_id"], "--wait", "--interval", "0.2", "--timeout", "60",
                     "--metrics", "10")
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    validate("poll_status", done.json)
    got = done.json["progress"]
    assert got["warnings"] == ["Unable to log the graph"] and got["finished"] is True
    assert (got["epoch"], got["num_epochs"], got["percent"]) == (3, 3, 100.0)
    train, val = tao_lightning.train_kpis, tao_lightning.val_kpis
    assert done.json["metrics"]["epochs"] == [{"epoch": 1, "kpi": train(0, {})},
                                              {"epoch": 2, "kpi": {**val(1, {}), **train(1, {})}},
                                              {"epoch": 3, "kpi": train(2, {})}]
    assert done.json["final_kpi"] == {**val(1, {}), **train(2, {})}


@pytest.mark.parametrize("kpis", [True, False])
def test_evaluate_kpis_are_the_final_kpis_or_the_answer_says_none(world, kpis):
    data = world.put_dataset()
    (world.sim.instance_home("box") / "tao-data" / "levir_cd_tiny" / "model.pth").write_bytes(b"weights")
    spec = world.spec({"epoch_seconds": 0.02, "evaluate_kpis": kpis})
    sub = world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
                    "visual_changenet", "--action", "evaluate", "--spec", str(spec), "--inputs",
                    f"{data}=levir_cd_tiny", "--", "evaluate.checkpoint=/data/levir_cd_tiny/model.pth")
    assert sub.code == 0, sub
    done = world.run("poll_status.py", sub.json["job_id"], "--wait", "--interval", "0.2", "--timeout", "60")
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    validate("poll_status", done.json)
    assert done.json["progress"]["file"] == "evaluate/status.json"
    if kpis:
        assert done.json["final_kpi"] == tao_lightning.test_kpis("visual_changenet", {"task": "segment"})
        assert "note" not in done.json["progress"]
    else:
        assert "final_kpi" not in done.json and "wrote no KPIs" in done.json["progress"]["note"]
