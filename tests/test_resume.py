"""``submit.py --resume-from JOB_ID`` (tao_brev.resume): a new train job continues from an
ended job's last checkpoint, as real TAO resumes (tao-pytorch core/initialize_experiments.py:66:
``train.resume_training_checkpoint_path`` or a ``*_latest.pth`` of the job's own results dir).

End to end on the brev/docker simulator: tier A on the same instance (the old results dir
mounted at /resume), tier B from the old job's verified S3 results on another instance
(the checkpoint copied and sha256-checked), the refusals before anything is recorded, and
the advice of stalled and infrastructure-failed jobs, whose command is run as given.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest

from conftest import validate
from test_robustness import records, sidecars
from tests.s3world import CARRIER, S3World, s3world  # noqa: F401  (fixture)

from tao_brev import docker_state, resume, resume_advice
from tao_brev.model import JobSidecar

WAIT = ("--wait", "--interval", "0.2", "--timeout", "60")
KEY = "train.resume_training_checkpoint_path"


def _ids(world) -> set:
    return set(p.stem for p in (records(world).jobs_dir).glob("*.json"))


def _brev_copies(sim) -> int:
    return sum(1 for r in sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["copy"])


def _docker_runs(sim, job_id: str) -> list[list[str]]:
    return [r["argv"] for r in sim.audit() if r["tool"] == "docker" and r["argv"][:1] == ["run"]
            and job_id in r["argv"]]


def _checkpoints(sim, job_id: str, instance: str = "box") -> list[str]:
    out = sim.instance_home(instance) / "tao-results" / job_id / "train"
    return sorted(p.name for p in out.glob("model_epoch_*.pth")) if out.is_dir() else []


def _status_lines(sim, job_id: str, instance: str = "box") -> list[dict]:
    path = sim.instance_home(instance) / "tao-results" / job_id / "train" / "status.json"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cut_short(world, epochs: int = 3, after: int = 2, **extra) -> str:
    """A train job of ``epochs`` epochs that hangs after epoch ``after`` and is torn down (CANCELED)."""
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "hang_after_epoch": after}, num_epochs=epochs),
                       **extra)
    assert sub.code == 0, sub
    job = sub.json["job_id"]
    from conftest import wait_until
    wait_until(lambda: len(_checkpoints(world.sim, job)) >= after, "the first epochs' checkpoints")
    down = world.run("teardown.py", job)
    assert down.code == 0, down
    return job


# ---------------------------------------------------------------- tier A, same instance
def test_tier_a_resume_on_the_same_instance_runs_only_the_epochs_after_the_checkpoint(world):
    old = _cut_short(world)
    before = _checkpoints(world.sim, old)
    assert before == ["model_epoch_000_step_00025.pth", "model_epoch_001_step_00050.pth"], before

    execs = world.sim.exec_count()
    sub = world.submit("--resume-from", old, spec=world.spec({"epoch_seconds": 0.02}, num_epochs=3))
    assert sub.code == 0, sub
    assert world.sim.exec_count() - execs == 1                               # the same one round trip
    validate("submit", sub.json)
    new = sub.json["job_id"]
    assert sub.json["resume_from"]["job_id"] == old and sub.json["resume_from"]["source"] == "instance"
    chosen = sub.json["resume_from"]["checkpoint"]
    assert chosen["path"] == "train/model_epoch_001_step_00050.pth"          # the _latest link's target
    assert chosen["link"] == "train/changenet_model_segment_latest.pth"
    run = _docker_runs(world.sim, new)[0]
    home = str(world.sim.instance_home("box"))
    assert f"{home}/tao-results/{old}:/resume:ro" in run
    assert f"{KEY}=/resume/train/model_epoch_001_step_00050.pth" in run
    record = records(world).load(new)
    assert record["retry_of"] == old                                        # the record's link (bank schema)
    assert sidecars(world).load(new).resume_from["checkpoint"]["path"] == chosen["path"]

    done = world.run("poll_status.py", new, *WAIT)
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert _checkpoints(world.sim, new) == ["model_epoch_002_step_00075.pth"]   # only the epoch after it
    assert _checkpoints(world.sim, old) == before                              # the old results untouched
    assert any("Resuming training from checkpoint: /resume/train/model_epoch_001_step_00050.pth"
               in (line.get("message") or "") for line in _status_lines(world.sim, new))


def test_without_a_valid_link_the_highest_epoch_and_step_is_taken(world):
    old = _cut_short(world)
    link = world.sim.instance_home("box") / "tao-results" / old / "train" / "changenet_model_segment_latest.pth"
    link.unlink()
    link.symlink_to("model_epoch_999_step_99999.pth")   # dangling (old checkpoints cleaned up)
    sub = world.submit("--resume-from", old, spec=world.spec({"epoch_seconds": 0.02}, num_epochs=3))
    assert sub.code == 0, sub
    assert sub.json["resume_from"]["checkpoint"] == {"path": "train/model_epoch_001_step_00050.pth",
                                                     "size": sub.json["resume_from"]["checkpoint"]["size"],
                                                     "link": None}


def test_no_checkpoint_on_the_instance_refuses_the_launch(world):
    old = _cut_short(world)
    for path in (world.sim.instance_home("box") / "tao-results" / old / "train").glob("*.pth"):
        path.unlink()
    sub = world.submit("--resume-from", old, spec=world.spec({"epoch_seconds": 0.02}))
    assert sub.code == 1 and sub.json["error"]["code"] == "RESUME_CHECKPOINT_MISSING", sub
    assert sub.json["state"] == "ERROR" and not _docker_runs(world.sim, sub.json["job_id"])
    assert "--resume-from" not in sub.json["error"]["fix"].split("Train from the start instead: ")[1].split(";")[0]


# ---------------------------------------------------------------- refusals, before anything is recorded
def test_refusals_name_the_reason_and_record_nothing(world):
    live = world.submit(spec=world.spec({"epoch_seconds": 0.02, "hang": True}))
    assert live.code == 0, live
    job = live.json["job_id"]
    known = _ids(world)

    def refused(*extra, spec=None):
        res = world.submit("--resume-from", job, *extra, spec=spec or world.spec({"epoch_seconds": 0.02}))
        assert res.code == 2 and res.json["error"]["code"] == "RESUME_NOT_POSSIBLE", res
        validate("submit", res.json)
        return res.json["error"]

    assert "has not ended" in refused()["message"]
    assert "teardown.py" in refused()["fix"]
    # (an evaluate reads its mandatory evaluate.checkpoint: given, so that the resume refusal is what is left)
    assert "only a train job" in refused("--action", "evaluate", "--", "evaluate.checkpoint=/results/m.pth")["message"]
    assert world.run("teardown.py", job).code == 0
    spec = world.spec({"epoch_seconds": 0.02}, resume_training_checkpoint_path="/data/levir_cd_tiny/x.pth")
    assert f"the spec sets {KEY}" in refused(spec=spec)["message"]
    assert f"an override sets {KEY}" in refused("--", f"{KEY}=/data/levir_cd_tiny/x.pth")["message"]
    assert _ids(world) == known                                     # nothing recorded


def test_another_instance_without_s3_results_names_the_instance_that_holds_them(world):
    old = _cut_short(world)
    world.sim.add_instance("box-b")
    world.sim.preload_image("box-b", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt")
    res = world.submit("--resume-from", old, spec=world.spec({"epoch_seconds": 0.02}), instance="box-b")
    assert res.code == 2 and res.json["error"]["code"] == "RESUME_NOT_POSSIBLE", res
    assert "box only" in res.json["error"]["message"] and "--instance box " in res.json["error"]["fix"] + " "


# ---------------------------------------------------------------- tier B, from S3, another instance
def test_tier_b_resume_from_s3_results_on_another_instance(s3world):
    import shutil

    from conftest import EXAMPLE_DATA, wait_until
    world = s3world.world
    data = world.tmp_path / "levir"
    shutil.copytree(EXAMPLE_DATA, data)
    spec = world.spec({"epoch_seconds": 0.02, "hang_after_epoch": 2}, num_epochs=3)
    first = s3world.run("submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train", "--spec", str(spec),
                        "--storage-tier", "B", "--inputs", f"{data}=levir_cd_tiny", schema="submit")
    assert first.code == 0, first
    old = first.json["job_id"]
    wait_until(lambda: len(_checkpoints(world.sim, old)) >= 2, "two checkpoints")
    down = s3world.run("teardown.py", old, "--delete-instance", schema="teardown")
    assert down.code == 0, down
    side = sidecars(world).load(old).results
    assert side["verified"] and side["latest_checkpoint"]["path"] == "train/model_epoch_001_step_00050.pth"
    assert side["latest_checkpoint"]["link"] == "train/changenet_model_segment_latest.pth"
    from pathlib import Path
    saved = json.loads((Path(world.env["TAO_STATE_DIR"]) / "brev" / "manifests" / f"{old}.json").read_text())
    assert {"path": "train/changenet_model_segment_latest.pth", "target": "model_epoch_001_step_00050.pth",
            "dangling": False} in saved["links"]                              # the link with its target
    assert "train/model_epoch_001_step_00050.pth" in {entry["path"] for entry in saved["files"]}

    world.sim.add_instance("box-b")
    world.sim.preload_image("box-b", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt")
    again = s3world.run("submit.py", "--instance", "box-b", "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train",
                        "--spec", str(world.spec({"epoch_seconds": 0.02}, num_epochs=3)),
                        "--storage-tier", "B", "--inputs", f"{data}=levir_cd_tiny", "--resume-from", old,
                        schema="submit")
    assert again.code == 0, again
    new = again.json["job_id"]
    assert again.json["resume_from"]["source"] == "s3"
    staged = world.sim.instance_home("box-b") / "tao-jobs" / new / "resume" / "train" / "model_epoch_001_step_00050.pth"
    assert staged.is_file()
    run = _docker_runs(world.sim, new)[0]
    assert f"{KEY}=/resume/train/model_epoch_001_step_00050.pth" in run
    done = s3world.run("poll_status.py", new, *WAIT, schema="poll_status")
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert _checkpoints(world.sim, new, "box-b") == ["model_epoch_002_step_00075.pth"]
    s3world.assert_no_secret_anywhere()


def test_tier_a_resumes_from_s3_on_another_instance_and_a_damaged_checkpoint_refuses(s3world):
    world = s3world.world
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.01}, num_epochs=2))   # tier A, results to S3
    old = sub.json["job_id"]
    assert s3world.run("poll_status.py", old, *WAIT).code == 0
    assert s3world.run("teardown.py", old, "--delete-instance").code == 0
    world.sim.add_instance("box-b")
    world.sim.preload_image("box-b", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt")
    spec = world.spec({"epoch_seconds": 0.01}, num_epochs=3)
    dry = world.submit("--resume-from", old, "--dry-run", spec=spec, instance="box-b")
    assert [step["step"] for step in dry.json["plan"]][:2] == ["open_record", "copy_s3_credentials"], dry
    execs, copies = world.sim.exec_count(), _brev_copies(world.sim)
    good = world.submit("--resume-from", old, spec=spec, instance="box-b")   # tier A, from S3: the carrier's file
    assert good.code == 0 and good.json["resume_from"]["source"] == "s3", good
    assert (world.sim.exec_count() - execs, _brev_copies(world.sim) - copies) == (1, 1)
    assert s3world.run("poll_status.py", good.json["job_id"], *WAIT).json["state"] == "COMPLETE"
    assert _checkpoints(world.sim, good.json["job_id"], "box-b") == ["model_epoch_002_step_00075.pth"]
    key = f"results/{old}/train/model_epoch_001_step_00050.pth"
    s3world.s3.put_object(Bucket=s3world.bucket, Key=key, Body=b"not the verified bytes!")
    res = world.submit("--resume-from", old, spec=world.spec({"epoch_seconds": 0.01}), instance="box-b")
    assert res.code == 1 and res.json["error"]["code"] == "RESUME_CHECKPOINT_MISSING", res
    assert not _docker_runs(world.sim, res.json["job_id"])


# ---------------------------------------------------------------- the advice, run as given
def test_an_infrastructure_failure_advises_the_exact_resume_command_and_it_works(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "xid": True}, num_epochs=3))
    old = sub.json["job_id"]
    failed = world.run("poll_status.py", old, *WAIT)
    assert failed.code == 1 and failed.json["hint"]["err_class"] == "ERR_INFRA", failed
    advice = failed.json["hint"]["advice"]
    assert "--retry-of" not in advice and resume_advice.RESUME_WORDS not in advice, advice
    command = advice.split("resubmit: ", 1)[1].split(" (continues", 1)[0]
    words = shlex.split(command)
    assert words[0].endswith("/scripts/submit.py") and words[-2:] == ["--resume-from", old], words
    assert command in failed.json["error"]["fix"]
    again = world.run("submit.py", *words[1:])
    assert again.code == 0 and again.json["resume_from"]["checkpoint"]["path"] == \
        "train/model_epoch_000_step_00025.pth", again


def test_a_stall_advises_the_exact_resume_command(world):
    sub = world.submit(spec=world.spec({"epoch_seconds": 0.02, "hang_after_epoch": 1}))
    job = sub.json["job_id"]
    from conftest import wait_until
    wait_until(lambda: _checkpoints(world.sim, job), "a checkpoint")
    stalled = world.run("poll_status.py", job, "--stall-after", "1", "--wait", "--interval", "1.2",
                        "--timeout", "30")
    assert stalled.json["error"]["code"] == "JOB_STALLED", stalled
    advice = stalled.json["stall"]["advice"]
    assert "--retry-of" not in advice and f"--resume-from {job}" in advice and "/scripts/submit.py" in advice


# ---------------------------------------------------------------- pure parts
def test_only_an_ended_train_job_of_the_same_network_and_one_link_are_accepted():
    from tao_brev.verbs.submit import SubmitRequest

    req = SubmitRequest("box", "img", "visual_changenet", "train", "s.yaml", resume_from="vc-train-1")
    done = {"id": "vc-train-1", "action": "train", "network_arch": "visual_changenet", "terminal_state": "ERROR"}
    assert resume._unfit(req, done) is None
    assert "dino" in resume._unfit(req, {**done, "network_arch": "dino"})
    assert "only a train job" in resume._unfit(req, {**done, "action": "evaluate"})
    assert "has not ended" in resume._unfit(req, {**done, "terminal_state": None})
    req.retry_of = "vc-train-2"
    assert "names another job" in resume._unfit(req, done)
    req.retry_of = "vc-train-1"
    assert resume._unfit(req, done) is None


def test_link_targets_resolve_as_the_container_wrote_them():
    assert resume.link_target("train/m_latest.pth", "model_epoch_001_step_00050.pth") == \
        "train/model_epoch_001_step_00050.pth"
    assert resume.link_target("train/m_latest.pth", "/results/train/a.pth") == "train/a.pth"
    assert resume.link_target("m_latest.pth", "a.pth") == "a.pth"
    assert resume.link_target("train/m_latest.pth", "/elsewhere/a.pth") is None
    assert resume.link_target("train/m_latest.pth", "../../a.pth") is None
    assert resume.link_target("train/m_latest.pth", None) is None


def test_latest_checkpoint_prefers_a_verified_link_target_then_the_highest_epoch_and_step():
    files = [{"path": f"train/model_epoch_{e:03d}_step_{s:05d}.pth", "size": e, "sha256": f"{e:x}" * 64}
             for e, s in ((0, 25), (1, 50), (10, 275), (2, 75))]
    link = {"path": "train/x_latest.pth", "target": "model_epoch_001_step_00050.pth", "dangling": False}
    assert resume.latest_checkpoint(files, [link])["path"] == "train/model_epoch_001_step_00050.pth"
    assert resume.latest_checkpoint(files, [link])["link"] == "train/x_latest.pth"
    dangling = {**link, "target": "model_epoch_099_step_99999.pth"}
    assert resume.latest_checkpoint(files, [dangling]) == {"path": "train/model_epoch_010_step_00275.pth",
                                                           "size": 10, "sha256": "a" * 64, "link": None}
    other = {"path": "train/best.pth", "target": "model_epoch_000_step_00025.pth", "dangling": False}
    assert resume.latest_checkpoint(files, [other])["path"] == "train/model_epoch_010_step_00275.pth"
    assert resume.latest_checkpoint([{"path": "train/status.json", "size": 1, "sha256": "0" * 64}], []) is None
    older = [{"path": "model_epoch_003.pth", "size": 1, "sha256": "0" * 64},
             {"path": "model_epoch_012.pth", "size": 1, "sha256": "0" * 64}]
    assert resume.latest_checkpoint(older, [])["path"] == "model_epoch_012.pth"
    top = {"path": "y_latest.pth", "target": "model_epoch_003.pth", "dangling": False}
    trained = {"path": "train/y_latest.pth", "target": "../model_epoch_012.pth", "dangling": False}
    assert resume.latest_checkpoint(older, [top, trained])["path"] == "model_epoch_012.pth"   # train/ first


def test_the_advice_placeholder_becomes_the_jobs_own_command():
    record = {"id": "visual_changenet-train-abc123", "action": "train"}
    sidecar = JobSidecar(submit_argv=["--instance", "box", "--spec", "/abs/s.yaml", "--", "train.num_epochs=3"])
    text = f"then resubmit: {docker_state.RESUME}; teardown.py JOB_ID"
    filled = resume_advice.fill(text, record, sidecar)
    words = shlex.split(filled.split("resubmit: ")[1].split(" (continues")[0])
    assert words[1:] == ["--instance", "box", "--spec", "/abs/s.yaml", "--resume-from", record["id"], "--",
                         "train.num_epochs=3"]
    assert filled.endswith(f"teardown.py {record['id']}")
    evaluate = resume_advice.fill(text, {**record, "action": "evaluate"}, sidecar)
    assert "--retry-of visual_changenet-train-abc123" in evaluate and "checkpoint" not in evaluate
    unknown = resume_advice.fill(text, record, JobSidecar())
    assert f"--resume-from {record['id']}" in unknown and "same flags" in unknown
    owned = resume_advice.fill(text, record, replace(sidecar, ephemeral=True, results={"kind": "ephemeral"}))
    assert owned.endswith(f"teardown.py {record['id']} --keep-instance to resume on it)")
    assert "--keep-instance" not in resume_advice.fill(text, record, replace(sidecar, ephemeral=True,
                                                                      results={"kind": "s3"}))
    assert resume_advice.fill("nothing to fill", record, sidecar) == "nothing to fill"
    assert resume_advice.fill(None, record, sidecar) is None


def test_resubmit_words_drop_the_one_off_flags(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.yaml").write_text("a: 1\n")
    words = resume_advice.resubmit_words(["--instance", "box", "--spec", "s.yaml", "--retry-of", "x-train-1",
                                   "--resume-from=y", "--dry-run", "--start", "--", "a=1"])
    assert words == ["--instance", "box", "--spec", str(tmp_path / "s.yaml"), "--", "a=1"]


@pytest.mark.parametrize("out, parsed", [
    ("TAO_RESUME_CHECKPOINT train/a.pth 12 train/x_latest.pth\nabc", {"path": "train/a.pth", "size": 12,
                                                                     "link": "train/x_latest.pth"}),
    ("TAO_RESUME_CHECKPOINT train/a.pth 12 \n", {"path": "train/a.pth", "size": 12, "link": None}),
    ("TAO_RESUME_CHECKPOINT train/a.pth ?\n", None),
    ("nothing\n", None),
])
def test_the_launch_scripts_choice_is_read_back(out, parsed):
    assert resume.parse_marker(out) == parsed


# ---------------------------------------------------------------- the launch script's choice, on a real sh
def _choose(tmp_path, build) -> tuple[int, str]:
    import subprocess

    results = tmp_path / "res"
    (results / "train").mkdir(parents=True)
    build(results)
    script = resume.instance_lines(str(results)) + '\necho "CHOSEN=$__tb_resume"'
    done = subprocess.run(["sh", "-c", "set -e\n" + script], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    return done.returncode, done.stdout


def _ckpt(results, *names):
    for name in names:
        (results / name).write_bytes(b"ckpt")


@pytest.mark.parametrize("build, chosen", [
    (lambda r: (_ckpt(r, "train/model_epoch_000_step_00025.pth", "train/model_epoch_001_step_00050.pth"),
                (r / "train/m_latest.pth").symlink_to("model_epoch_000_step_00025.pth")),
     "train/model_epoch_000_step_00025.pth"),                       # the link wins over a newer file
    (lambda r: (_ckpt(r, "train/model_epoch_001_step_00050.pth"),
                (r / "train/m_latest.pth").symlink_to("/results/train/model_epoch_001_step_00050.pth")),
     "train/model_epoch_001_step_00050.pth"),                       # absolute, as the container saw it
    (lambda r: _ckpt(r, "train/model_epoch_002_step_00075.pth", "train/model_epoch_010_step_00275.pth",
                     "train/model_epoch_009_step_00250.pth"),
     "train/model_epoch_010_step_00275.pth"),                       # no link: highest epoch, numerically
    (lambda r: (_ckpt(r, "train/model_epoch_003_step_00100.pth"),
                (r / "train/m_latest.pth").symlink_to("model_epoch_999_step_99999.pth")),
     "train/model_epoch_003_step_00100.pth"),                       # dangling link: the fallback
    (lambda r: (_ckpt(r, "train/model_epoch_003_step_00100.pth", "train/m_latest.pth")),
     "train/m_latest.pth"),                                         # a copy, not a link (Lightning's fallback)
    (lambda r: (_ckpt(r, "model_epoch_004.pth", "model_epoch_012.pth")), "model_epoch_012.pth"),   # older archs
    (lambda r: ((r / "mine").mkdir(), _ckpt(r, "mine/model_epoch_002_step_00075.pth"),
                (r / "mine/m_latest.pth").symlink_to("model_epoch_002_step_00075.pth")),
     "mine/model_epoch_002_step_00075.pth"),                        # train.results_dir of the spec's own
    (lambda r: ((r / "mine").mkdir(), _ckpt(r, "mine/model_epoch_003_step_00100.pth")),
     "mine/model_epoch_003_step_00100.pth"),
    (lambda r: ((r / "train/model_epoch_005_step_00150.pth").write_bytes(b""),
                _ckpt(r, "train/model_epoch_004_step_00125.pth")),
     "train/model_epoch_004_step_00125.pth"),                       # an empty file is no checkpoint
])
def test_the_instance_picks_the_link_target_else_the_highest_epoch(tmp_path, build, chosen):
    code, out = _choose(tmp_path, build)
    assert code == 0 and f"CHOSEN={chosen}" in out, out
    assert f"{resume.MARKER} {chosen} 4" in out


@pytest.mark.parametrize("build", [
    lambda r: None,
    lambda r: (r / "train/m_latest.pth").symlink_to("../../../etc/passwd"),
    lambda r: (r / "train/m_latest.pth").symlink_to("/etc/hostname"),
    lambda r: _ckpt(r, "train/model_epoch_001_step_1 2.pth"),
])
def test_no_usable_checkpoint_stops_the_script(tmp_path, build):
    code, out = _choose(tmp_path, build)
    assert code == resume.RESUME_FAILED_EXIT and resume.MISSING in out and "CHOSEN" not in out, out


def test_a_dry_run_shows_the_resume_and_records_nothing(world):
    old = _cut_short(world)
    known = _ids(world)
    dry = world.submit("--resume-from", old, "--dry-run", spec=world.spec({"epoch_seconds": 0.02}))
    assert dry.code == 0 and dry.json["dry_run"], dry
    validate("submit", dry.json)
    assert dry.json["resume_from"] == {"job_id": old, "source": "instance", "override_key": KEY,
                                       "container_dir": "/resume"}
    script = next(step for step in dry.json["plan"] if step["step"] == "launch")["script"]
    assert resume.MARKER in script and f'"{KEY}=/resume/$__tb_resume"' in script
    assert _ids(world) == known and "--dry-run" not in dry.json["next"]


def test_the_archive_a_teardown_keeps_home_holds_the_latest_link_as_a_link(world):
    import tarfile

    sub = world.submit("--ephemeral", spec=world.spec({"epoch_seconds": 0.01}, num_epochs=2))
    job = sub.json["job_id"]
    assert world.run("poll_status.py", job, *WAIT).code == 0
    down = world.run("teardown.py", job, "--delete-instance")
    assert down.code == 0, down
    with tarfile.open(down.json["results_saved_to"]) as tar:
        link = tar.getmember(f"{job}/train/changenet_model_segment_latest.pth")
        assert link.issym() and link.linkname == "model_epoch_001_step_00050.pth"
        assert tar.getmember(f"{job}/train/{link.linkname}").isfile()


def test_a_checkpoint_verified_in_s3_is_checked_again_on_the_instance(tmp_path):
    import hashlib
    import subprocess

    results = tmp_path / "res"
    (results / "train").mkdir(parents=True)
    (results / "train" / "model_epoch_001_step_00050.pth").write_bytes(b"ckpt")
    verified = {"path": "train/model_epoch_001_step_00050.pth", "size": 4,
                "sha256": hashlib.sha256(b"ckpt").hexdigest()}
    for stored, code in ((verified, 0), ({**verified, "sha256": "0" * 64}, resume.RESUME_FAILED_EXIT),
                         ({**verified, "path": "train/other.pth", "sha256": "0" * 64}, 0)):
        done = subprocess.run(["sh", "-c", "set -e\n" + resume.instance_lines(str(results), stored)],
                              capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
        assert done.returncode == code, (stored, done.stdout)
        assert ("differs from its verified sha256" in done.stdout) == bool(code)


def test_a_job_that_never_ran_is_no_resume_source(world):
    world.sim.add_instance("bare")   # the image is not on it: the launch is refused, nothing ran
    refused = world.submit(spec=world.spec({"epoch_seconds": 0.01}), instance="bare")
    assert refused.code == 1 and refused.json["error"]["code"] == "IMAGE_NOT_PULLED", refused
    res = world.submit("--resume-from", refused.json["job_id"], spec=world.spec({"epoch_seconds": 0.01}),
                       instance="bare")
    assert res.code == 2 and res.json["error"]["code"] == "RESUME_NOT_POSSIBLE", res
    assert "never ran" in res.json["error"]["message"]


def test_a_manifest_saved_before_links_were_recorded_still_reads(tmp_path):
    from types import SimpleNamespace

    from tao_brev import results_manifest as results

    ctx = SimpleNamespace(state_root=tmp_path)
    assert results.load_manifest(ctx, "j") is None and results.load_links(ctx, "j") == []
    results.save_manifest(ctx, "j", [{"path": "a", "size": 1, "sha256": "0" * 64}],
                          [{"path": "x_latest.pth", "target": "a", "dangling": False}])
    assert results.load_manifest(ctx, "j")[0]["path"] == "a" and results.load_links(ctx, "j")[0]["target"] == "a"
    results.manifest_path(ctx, "j").write_text(json.dumps([{"path": "b", "size": 2, "sha256": "1" * 64}]))
    assert results.load_manifest(ctx, "j")[0]["path"] == "b" and results.load_links(ctx, "j") == []
    results.manifest_path(ctx, "j").write_text("7")
    assert results.load_manifest(ctx, "j") is None


def test_a_job_this_bundle_holds_no_results_for_is_refused_plainly():
    from types import SimpleNamespace

    from tao_brev.errors import TaoBrevError
    from tao_brev.verbs.submit import SubmitRequest

    record = {"id": "vc-train-1", "action": "train", "network_arch": "visual_changenet", "terminal_state": "COMPLETE"}
    ctx = SimpleNamespace(records=SimpleNamespace(load=lambda _id: record),
                          sidecars=SimpleNamespace(load=lambda _id: JobSidecar()), env={})
    req = SubmitRequest("box", "img", "visual_changenet", "train", "s.yaml", resume_from="vc-train-1")
    with pytest.raises(TaoBrevError) as failed:
        resume.plan(ctx, req)
    assert failed.value.code == "RESUME_NOT_POSSIBLE" and "not submitted by submit.py" in failed.value.message
    assert "train from the start" in failed.value.fix and "--resume-from" not in failed.value.fix


def test_a_deleted_instance_resumes_from_the_archive_a_teardown_kept_home(world):
    old = _cut_short(world)
    down = world.run("teardown.py", old, "--delete-instance")   # results only there: archived home first
    assert down.code == 0 and down.json["instance_deleted"], down
    world.sim.add_instance("box-b")
    world.sim.preload_image("box-b", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt")
    spec = world.spec({"epoch_seconds": 0.02}, num_epochs=3)
    dry = world.submit("--resume-from", old, "--dry-run", spec=spec, instance="box-b")
    assert "copy_checkpoint" in [step["step"] for step in dry.json["plan"]], dry
    copies = _brev_copies(world.sim)
    sub = world.submit("--resume-from", old, spec=spec, instance="box-b")
    assert sub.code == 0 and sub.json["resume_from"]["source"] == "home", sub
    validate("submit", sub.json)
    assert sub.json["resume_from"]["checkpoint"]["path"] == "train/model_epoch_001_step_00050.pth"
    assert sub.json["resume_from"]["checkpoint"]["link"] == "train/changenet_model_segment_latest.pth"
    assert _brev_copies(world.sim) - copies == 1                                 # the checkpoint only
    home = world.sim.instance_home("box-b")
    assert not list(home.glob(".tao-resume-*"))                                  # moved into the job dir
    done = world.run("poll_status.py", sub.json["job_id"], *WAIT)
    assert done.code == 0 and done.json["state"] == "COMPLETE", done
    assert _checkpoints(world.sim, sub.json["job_id"], "box-b") == ["model_epoch_002_step_00075.pth"]


def test_a_kept_archive_that_changed_is_no_resume_source(world):
    old = _cut_short(world)
    down = world.run("teardown.py", old, "--delete-instance")
    assert down.code == 0, down
    with open(down.json["results_saved_to"], "ab") as archive:
        archive.write(b"x")
    world.sim.add_instance("box-b")
    res = world.submit("--resume-from", old, spec=world.spec({"epoch_seconds": 0.02}), instance="box-b")
    assert res.code == 2 and res.json["error"]["code"] == "RESUME_NOT_POSSIBLE", res
    assert "sha256 differs" in res.json["error"]["message"]


def test_on_the_same_instance_a_checkpoint_verified_in_s3_must_still_match(s3world):
    world = s3world.world
    old = _cut_short(world)                        # tier A, results routed to the bucket: verified at teardown
    assert sidecars(world).load(old).results["verified"]
    spec = world.spec({"epoch_seconds": 0.02}, num_epochs=3)
    ckpt = world.sim.instance_home("box") / "tao-results" / old / "train" / "model_epoch_001_step_00050.pth"
    original = ckpt.read_bytes()
    ckpt.write_bytes(b"changed since its upload")
    bad = world.submit("--resume-from", old, spec=spec)
    assert bad.code == 1 and bad.json["error"]["code"] == "RESUME_CHECKPOINT_MISSING", bad
    assert "differs from its verified sha256" in bad.json["error"]["message"]
    ckpt.write_bytes(original)
    good = world.submit("--resume-from", old, spec=spec)
    assert good.code == 0 and good.json["resume_from"]["source"] == "instance", good
    assert s3world.run("poll_status.py", good.json["job_id"], *WAIT).json["state"] == "COMPLETE"
    assert _checkpoints(world.sim, good.json["job_id"]) == ["model_epoch_002_step_00075.pth"]
