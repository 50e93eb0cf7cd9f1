"""Progress answers on status.json lines written by TAO's own logger (tests/tao_lines.py).

Train 3 epochs with validation every 2, evaluate, a run with ERROR-level lines, a resumed run;
every expectation is what the lines mean in tao-pytorch (tao_brev/tao_status.py cites them).
"""

from __future__ import annotations

import pytest

from tao_brev import progress, tao_status
from tao_lines import STEPS, TaoWriter, train_kpis, val_kpis


@pytest.fixture
def tao(tmp_path):
    writer = TaoWriter(tmp_path / "status.json")
    writer.start()
    return writer


def test_three_epochs_with_validation_every_two_count_completed_epochs(tao):
    tao.train(3, last=0, validation_interval=2, epoch_s=60)
    got = progress.summarize(tao.file(last=12), tao.now + 10, "train")
    # after current_epoch 0 ends: 1 of 3 epochs done (TAO writes epoch 0, max_epoch 2)
    assert (got["epoch"], got["num_epochs"], got["percent"]) == (1, 3, 33.3), got
    assert (got["step"], got["max_step"]) == (STEPS, 3 * STEPS)
    assert got["eta_s"] == 2 * 60 - 10 and got["eta_source"] == "time_per_epoch"
    assert got["kpi"] == train_kpis(0) and "step" not in got["kpi"] and "max_step" not in got["kpi"]
    assert got["status"] == "RUNNING" and "finished" not in got and "warnings" not in got
    tao.train(3, first=1, validation_interval=2, epoch_s=60)
    end = progress.summarize(tao.file(last=12), tao.now, "train")
    assert (end["epoch"], end["num_epochs"], end["percent"], end["eta_s"]) == (3, 3, 100.0, 0)
    assert end["finished"] is True and end["message"] == "Train finished successfully."
    assert end["status"] == "RUNNING"   # TAO 7's success: no SUCCESS line
    assert end["kpi"] == {**val_kpis(1), **train_kpis(2)}
    ended = progress.after_end(end, "COMPLETE", "train")   # no "cut off" note; TAO's word said as its last
    assert ended == {**{k: v for k, v in end.items() if k != "status"}, "eta_s": 0, "last_tao_status": "RUNNING"}
    table = progress.metrics(tao.file())
    # each dict once, on its epoch: validation only after epoch 2, the last train loss kept
    assert table["epochs"] == [{"epoch": 1, "kpi": train_kpis(0)},
                               {"epoch": 2, "kpi": {**val_kpis(1), **train_kpis(1)}},
                               {"epoch": 3, "kpi": train_kpis(2)}]
    assert table["best"]["train_loss"]["last"] == {"value": train_kpis(2)["train_loss"], "epoch": 3}


def test_mid_epoch_progress_keeps_its_epoch_and_eta_after_later_kpi_lines(tao):
    """The newest line that carries each field: the KPI lines after the epoch line carry no epoch."""
    tao.train(10, last=3, epoch_s=100)
    tao.now += 40   # 40 s into the 5th epoch, nothing written since the Train metrics line
    got = progress.summarize(tao.file(last=3), tao.now, "train")   # the window: no STARTED, 1 epoch line
    assert (got["epoch"], got["num_epochs"], got["percent"]) == (4, 10, 40.0)
    assert got["eta_s"] == 6 * 100 - 40 and got["since_update_s"] == 40


def test_evaluate_kpis_are_the_final_kpis_and_none_says_so(tmp_path):
    tao = TaoWriter(tmp_path / "status.json")
    tao.evaluate({"test_acc": 0.95, "test_miou": 0.81})
    got = progress.after_end(progress.summarize(tao.file("evaluate/status.json"), tao.now, "evaluate"),
                             "COMPLETE", "evaluate")
    assert got["finished"] is True and got["kpi"] == {"test_acc": 0.95, "test_miou": 0.81}
    assert "note" not in got and "epoch" not in got
    empty = TaoWriter(tmp_path / "empty.json")
    empty.evaluate(None)
    none = progress.after_end(progress.summarize(empty.file("evaluate/status.json"), empty.now, "evaluate"),
                              "COMPLETE", "evaluate", "vc-evaluate-1")
    assert "kpi" not in none and "wrote no KPIs" in none["note"]
    assert "poll_status.py vc-evaluate-1 --logs" in none["note"]


def test_error_level_lines_are_warnings_while_training_goes_on(tao):
    tao.train(5, last=2, epoch_s=50, errors={2: "Unable to write the TensorBoard graph"})
    tao.write("Dataloader worker 3 is slow", status="FAILURE", verbosity="ERROR")
    got = progress.summarize(tao.file(last=12), tao.now, "train")
    assert got["status"] == "FAILURE" and got["warnings"] == ["Unable to write the TensorBoard graph",
                                                                "Dataloader worker 3 is slow"]
    assert (got["epoch"], got["num_epochs"]) == (3, 5) and got["eta_s"] == 2 * 50   # not 0: not the end
    assert progress.after_end(got, None) == got   # still running: no note
    tao.train(5, first=3, epoch_s=50)
    done = progress.summarize(tao.file(), tao.now, "train")
    assert done["finished"] is True and done["eta_s"] == 0 and len(done["warnings"]) == 2
    table = progress.metrics(tao.file())
    assert [row["epoch"] for row in table["epochs"]] == [1, 2, 3, 4, 5]   # FAILURE lines repeat a dict: no row
    assert table["epochs"][2]["kpi"] == {**val_kpis(2), **train_kpis(2)}


def test_a_resumed_run_counts_on_from_its_checkpoint(tao):
    tao.train(5, last=2, epoch_s=30, end=False)   # killed after 3 epochs: no end lines
    cut = progress.after_end(progress.summarize(tao.file(), tao.now, "train"), "ERROR")
    assert cut["eta_s"] is None and "ended ERROR" in cut["note"]
    tao.restart()   # the resumed job: same results dir, a new process appends to status.json
    tao.start()
    ckpt = "/results/train/model_epoch_002_step_00075.pth"
    tao.train(5, first=3, last=3, epoch_s=30, resume=ckpt)
    got = progress.summarize(tao.file(last=12), tao.now, "train")
    assert (got["epoch"], got["num_epochs"], got["percent"], got["step"]) == (4, 5, 80.0, 4 * STEPS)
    assert got["resumed_from"] == ckpt and got["eta_s"] == 30
    tao.train(5, first=4, epoch_s=30)
    table = progress.metrics(tao.file())
    assert [row["epoch"] for row in table["epochs"]] == [1, 2, 3, 4, 5]
    assert [row["kpi"]["train_loss"] for row in table["epochs"]] == [train_kpis(e)["train_loss"] for e in range(5)]


def test_a_re_run_epoch_replaces_its_row():
    lines = [{"epoch": 0, "max_epoch": 2, "kpi": {"loss": 2.0}}, {"epoch": 1, "max_epoch": 2, "kpi": {"loss": 1.5}},
             {"message": "Resuming training from checkpoint: /r/model_epoch_000_step_00025.pth"},
             {"epoch": 1, "max_epoch": 2, "kpi": {"loss": 1.4}}]
    rows = tao_status.epoch_rows(lines, progress.line_kpi)
    assert rows == [(1, {"loss": 2.0}), (2, {"loss": 1.4})]


def test_an_end_without_tao_s_end_is_noted():
    running = {"available": True, "status": "RUNNING", "message": "Train metrics generated.", "eta_s": 50,
               "eta_source": "time_per_epoch", "epoch": 2, "num_epochs": 4}
    exited = progress.after_end(running, "COMPLETE", "train")
    assert exited["eta_s"] is None and "no \"finished successfully\" line" in exited["note"]
    failed = progress.after_end({**running, "status": "FAILURE", "message": "File system error: Checkpoint file "
                                 "not found: /results/x.pth"}, "ERROR", "train")
    assert failed["note"].startswith("the job ended ERROR; TAO's last status line is FAILURE: File system error")
    assert progress.after_end({**running, "status": "SUCCESS"}, "COMPLETE") != running   # older TAO: not finished
    older = progress.summarize(progress.StatusFile("status.json", 1, 1, ['{"status": "SUCCESS"}']), 1, "train")
    assert older["finished"] is True


def test_tao_status_functions_on_odd_lines():
    assert tao_status.epochs_done({"epoch": 4}) == 4 and tao_status.epochs_done({"epoch": True}) is None
    assert tao_status.epochs_done({"epoch": 0, "max_epoch": 9}) == 1
    assert tao_status.num_epochs({"max_epoch": -1}) is None and tao_status.num_epochs({"max_epoch": 0}) is None
    assert tao_status.num_epochs({"max_epoch": 9}) == 9 and tao_status.num_epochs({"max_epoch": 9, "step": 1}) == 10
    assert tao_status.num_epochs({"max_epoch": 0, "max_step": 5}) == 1
    assert tao_status.warnings([{"status": "FAILURE"}]) == ["FAILURE line without a message"]
    assert tao_status.warnings([{"status": "FAILURE", "message": "x" * 500}]) == ["x" * 200]
    assert len(tao_status.warnings([{"status": "FAILURE", "message": str(i)} for i in range(9)])) == 5
    assert tao_status.is_eval({"message": "Validation metrics generated."}, {"loss": 1})
    assert not tao_status.is_eval({"message": "Train and Val metrics generated."}, {"loss": 1})
    assert tao_status.is_eval({}, {"val_loss": 1}) and not tao_status.is_eval({}, {})
    assert tao_status.resumed_from([{"message": "Starting"}]) is None


def test_a_metrics_line_counts_even_when_its_dict_equals_the_last_one():
    """Two epochs with the same train loss: the second "Train metrics generated." is a new value,
    the epoch line between them only repeats it; a dict before any epoch line waits for one."""
    lines = [{"message": "Train metrics generated.", "kpi": {"loss": 3.0}},   # the window starts mid-run
             {"epoch": 0, "max_epoch": 1, "step": 5, "kpi": {"loss": 3.0}},
             {"message": "Train metrics generated.", "kpi": {"loss": 1.0}},
             {"epoch": 1, "max_epoch": 1, "step": 10, "kpi": {"loss": 1.0}},
             {"message": "Train metrics generated.", "kpi": {"loss": 1.0}},
             {"message": "Training loop complete.", "kpi": {"loss": 1.0}}]
    assert tao_status.epoch_rows(lines, progress.line_kpi) == [(1, {"loss": 1.0}), (2, {"loss": 1.0})]
    assert tao_status.epoch_rows(lines[:2], progress.line_kpi) == [(1, {"loss": 3.0})]


def test_a_run_resumed_after_a_finished_one_is_not_finished_by_the_older_end(tao):
    tao.train(3, epoch_s=20, errors={1: "an old warning"})      # finished, in the same results dir
    tao.restart()
    tao.start()
    tao.train(5, first=3, last=3, epoch_s=20, resume="/results/train/model_epoch_002_step_00075.pth")
    got = progress.summarize(tao.file(), tao.now, "train")
    assert "finished" not in got and "warnings" not in got and got["eta_s"] == 20
    assert (got["epoch"], got["num_epochs"], got["percent"]) == (4, 5, 80.0)
    assert len(tao_status.current_run([{"status": "STARTED", "message": "Starting Training Loop."}, {}])) == 2


@pytest.mark.parametrize("mode,message", [("train", "User/System interruption: Train was interrupted"),
                                          ("evaluate", "User/System interruption: Evaluate was interrupted"),
                                          ("inference", "user/system interruption: Inference was interrupted"),
                                          ("dataset_convert", "Dataset convert was interrupted")])
def test_a_caught_interrupt_is_never_finished(tmp_path, mode, message):
    """tao-pytorch core/decorators/workflow.py:68-73 catches KeyboardInterrupt / SystemError, writes this
    FAILURE line and exits 0: exit 0 then is not a success, before or after a "finished successfully" line."""
    cut = TaoWriter(tmp_path / "cut.json")
    cut.start(mode=mode)
    cut.train(3, last=0, epoch_s=20)
    cut.write(message, status="FAILURE")
    got = progress.summarize(cut.file("cut.json"), cut.now, mode)
    assert got["interrupted"] is True and "finished" not in got, got
    ended = progress.after_end(got, "COMPLETE", mode)
    assert ended["eta_s"] is None and "did NOT finish" in ended["note"] and "workflow.py:68-73" in ended["note"]
    late = TaoWriter(tmp_path / "late.json")   # an interrupt after the end (e.g. in the cloud upload that follows)
    late.start(mode=mode)
    late.train(1, epoch_s=20)
    assert progress.summarize(late.file("late.json"), late.now, mode)["finished"] is True
    late.write(message, status="FAILURE")
    after = progress.summarize(late.file("late.json"), late.now, mode)
    assert after["interrupted"] is True and "finished" not in after


def test_only_a_failure_line_that_says_interrupted_unfinishes_a_run(tao):
    tao.train(2, epoch_s=20, errors={1: "the loader was interrupted"})   # an ERROR while training goes on
    lines = [{"status": "RUNNING", "message": "Train finished successfully."}]
    assert tao_status.finished(lines + [{"status": "RUNNING", "message": "Train was interrupted"}])   # not FAILURE
    assert tao_status.finished(lines + [{"status": "FAILURE", "message": "CUDA error: out of memory"}])
    assert tao_status.finished(lines + [{"status": "FAILURE", "verbosity": "ERROR", "message": "Train was interrupted"}])
    assert tao_status.interrupted([{"status": "FAILURE", "verbosity": "INFO", "message": "the loader was interrupted "
                                    "by a timeout; retrying"}]) is None
    assert not tao_status.finished(lines + [{"status": "FAILURE", "message": "User/System interruption: x"}])
    assert tao_status.interrupted([{"status": "FAILURE", "message": "Train was interrupted"}] + lines) is None
    assert tao_status.interrupted([{"status": "SUCCESS"}, {"status": "FAILURE", "message": "Export was interrupted"}]) \
        == "Export was interrupted"
    got = progress.summarize(tao.file(), tao.now, "train")
    assert got["finished"] is True and "interrupted" not in got
    ended = progress.after_end(got, "COMPLETE", "train")
    assert ended == {**{k: v for k, v in got.items() if k != "status"}, "eta_s": 0, "last_tao_status": "RUNNING"}
    assert progress.after_end(ended, "COMPLETE", "train") == ended   # the same when applied again


def test_an_interrupted_run_that_exited_0_is_an_error_that_says_it_did_not_finish(world, tmp_path):
    """The breaker's end as TAO makes it: epoch 1 of 3, the caught interrupt's FAILURE line, exit 0."""
    import json
    import os
    import signal

    import yaml
    from conftest import EXAMPLE_SPEC, wait_until
    from tests.sim.containers import ContainerStore, now_iso

    data = yaml.safe_load(EXAMPLE_SPEC.read_text())
    data["simulate"] = {"epoch_seconds": 0.05, "hang_after_epoch": 1}
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(data))
    ds = world.put_dataset("box")
    sub = world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch",
                    "visual_changenet", "--action", "train", "--spec", str(spec), "--inputs", f"{ds}=levir_cd_tiny")
    assert sub.code == 0, sub
    job = sub.json["job_id"]
    home = world.sim.instance_home("box")
    wait_until(lambda: any('"epoch": 0' in p.read_text() for p in home.rglob(f"{job}/**/status.json")), "epoch 1")
    store = ContainerStore(world.sim.world.docker_dir("box"))
    proc = store.proc(store.find(job))
    for pid in (proc.get("supervisor_pid"), proc.get("pid")):
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (TypeError, ProcessLookupError):
            pass
    # written once the stand-in is dead, so no line of its own can follow it
    with sorted(home.rglob(f"{job}/**/status.json"))[0].open("a") as f:
        f.write(json.dumps({"date": "12/2/2026", "time": "1:0:0", "status": "FAILURE", "verbosity": "INFO",
                            "message": "User/System interruption: Train was interrupted"}) + "\n")
    world.sim.set_container_state("box", job, Status="exited", ExitCode=0, FinishedAt=now_iso())
    res = world.run("poll_status.py", job)
    got = res.json["progress"]
    assert got["interrupted"] is True and "finished" not in got and got["eta_s"] is None, got
    assert "interruption" in got["note"], got
    # the exit 0 is no success: ERROR, ERR_PROGRAM (nothing recovers it by itself), the resume advice
    assert res.json["state"] == "ERROR" and "final_kpi" not in res.json, res   # a poll that read it: exit 0
    assert res.json["hint"]["err_class"] == "ERR_PROGRAM" and "interrupt" in res.json["hint"]["reason"], res
    assert "--resume-from" in res.json["hint"]["advice"] and "did NOT finish" in res.json["message"], res
    listed = world.run("poll_status.py", "--all")
    assert [j["state"] for j in listed.json["jobs"] if j["job_id"] == job] in ([], ["ERROR"]), listed
