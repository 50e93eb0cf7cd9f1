"""submit's plan in process: ``--dry-run`` shows every step and the exact launch script with no
brev call and no record; each fix's command is this submit's own command line, changed."""

from __future__ import annotations

import shlex

from tao_brev.verbs import submit
from tao_brev.verbs.submit import SubmitRequest
from tests.unit.jobs import IMAGE, SPEC
from tests.unit.leaks import assert_never_sent, printed, with_secrets


def request(**kw) -> SubmitRequest:
    base = dict(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet", action="train",
                spec=str(SPEC), inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"], no_spec_check=True)
    return SubmitRequest(**{**base, **kw})


def test_a_dry_run_with_env_names_plans_their_copy_and_shows_no_value(ctx, fake_brev):
    values = with_secrets(ctx, ["HF_TOKEN", "WANDB_API_KEY"])
    answer, code = submit.submit(ctx, request(dry_run=True, env_names=["HF_TOKEN", "WANDB_API_KEY"],
                                              overrides=["train.num_epochs=3"]))
    assert code == 0 and answer["dry_run"] is True and answer["job_id"] is None, answer
    steps = [s["step"] for s in answer["plan"]]
    assert steps == ["open_record", "copy_credentials", "launch", "mark_running"]
    copy = answer["plan"][1]["what"]
    assert "HF_TOKEN, WANDB_API_KEY" in copy and "0600" in copy
    script = answer["plan"][2]["script"]
    assert f"{IMAGE} visual_changenet train -e /tao/job/spec.yaml" in script and "train.num_epochs=3" in script
    assert fake_brev.calls == [] and ctx.records.list() == []
    assert_never_sent(fake_brev, printed(answer), answer, values=values.values())


def test_a_dry_run_mounts_each_input_read_only_under_data(ctx, fake_brev):
    answer, code = submit.submit(ctx, request(dry_run=True, inputs=["~/tao-data/levir_cd_tiny=levir",
                                                                     "/mnt/extra=extra"]))
    script = next(s for s in answer["plan"] if s["step"] == "launch")["script"]
    assert code == 0 and "/data/levir:ro" in script and "/data/extra:ro" in script, script


def test_rerun_is_the_submit_command_line_changed_and_quoted():
    req = request(argv=["--instance", "box", "--spec", "my spec.yaml", "--env", "HF_TOKEN", "--",
                        "train.num_epochs=3"])
    assert req.rerun() == "submit.py --instance box --spec 'my spec.yaml' --env HF_TOKEN -- train.num_epochs=3"
    changed = req.rerun(set_flags={"--instance": "gpu2"}, env_names=[], add=("--start",))
    assert shlex.split(changed) == ["submit.py", "--instance", "gpu2", "--spec", "my spec.yaml", "--start", "--",
                                    "train.num_epochs=3"]
    assert shlex.split(req.rerun(drop=("--spec",))) == ["submit.py", "--instance", "box", "--env", "HF_TOKEN", "--",
                                                       "train.num_epochs=3"]


def test_rerun_without_argv_is_built_from_the_request():
    words = shlex.split(request().rerun())
    assert words[:3] == ["submit.py", "--instance", "box"] and "--network-arch" in words and str(SPEC) in words
