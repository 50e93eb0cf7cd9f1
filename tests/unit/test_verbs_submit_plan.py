"""submit's plan in process: ``--dry-run`` shows every step and the exact launch script with one
read-only brev call (``brev ls``: the instance's status) and no record; each fix's command is this submit's own command line, changed."""

from __future__ import annotations

import shlex

from tao_brev.verbs import submit
from tao_brev.verbs.submit import SubmitRequest
from tests.unit.jobs import IMAGE, SPEC, entry
from tests.unit.leaks import assert_never_sent, printed, with_secrets


def request(**kw) -> SubmitRequest:
    base = dict(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet", action="train",
                spec=str(SPEC), inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"], no_spec_check=True)
    return SubmitRequest(**{**base, **kw})


def test_a_dry_run_with_env_names_plans_their_copy_and_shows_no_value(ctx, fake_brev):
    values = with_secrets(ctx, ["HF_TOKEN", "WANDB_API_KEY"])
    fake_brev.expect_ls(entry())
    answer, code = submit.submit(ctx, request(dry_run=True, env_names=["HF_TOKEN", "WANDB_API_KEY"],
                                              overrides=["train.num_epochs=3"]))
    assert code == 0 and answer["dry_run"] is True and answer["job_id"] is None, answer
    steps = [s["step"] for s in answer["plan"]]
    assert steps == ["open_record", "copy_credentials", "launch", "mark_running"]
    copy = answer["plan"][1]["what"]
    assert "HF_TOKEN, WANDB_API_KEY" in copy and "0600" in copy
    script = answer["plan"][2]["script"]
    assert f"{IMAGE} visual_changenet train -e /tao/job/spec.yaml" in script and "train.num_epochs=3" in script
    assert [c.args for c in fake_brev.calls] == [["ls", "--json"]] and ctx.records.list() == []
    assert_never_sent(fake_brev, printed(answer), answer, values=values.values())


def test_a_dry_run_mounts_each_input_read_only_under_data(ctx, fake_brev):
    fake_brev.expect_ls(entry())
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


def test_a_dry_run_on_a_stopped_instance_says_so_and_next_starts_it(ctx, fake_brev):
    """The dry run answers what the submit would meet: a STOPPED instance is refused without --start
    (INSTANCE_NOT_RUNNING, whose fix is this submit with --start), so ``next`` is that submit."""
    from tao_brev import nextstep

    argv = ["--instance", "box", "--image", "images.tao_toolkit.pyt", "--network-arch", "visual_changenet",
            "--action", "train", "--spec", str(SPEC), "--inputs", "~/tao-data/levir_cd_tiny=levir_cd_tiny",
            "--dry-run", "--", "train.num_epochs=3"]
    fake_brev.expect_ls(entry(status="STOPPED"))
    answer, code = submit.submit(ctx, request(dry_run=True, argv=argv))
    assert code == 0 and answer["instance_status"] == "STOPPED", answer
    assert "STOPPED" in answer["instance_note"] and "INSTANCE_NOT_RUNNING" in answer["instance_note"]
    assert answer["instance_note"] in answer["warnings"]
    words = shlex.split(nextstep.submit(answer, 0, argv)["next"])
    assert words[0].endswith("scripts/submit.py") and "--dry-run" not in words
    assert words[words.index("--") - 1] == "--start" and words[-1] == "train.num_epochs=3", words
    # the refusal this dry run foresaw names the same submit in its fix
    fake_brev.expect_ls(entry(status="STOPPED"))
    import pytest

    from tao_brev.errors import TaoBrevError

    with pytest.raises(TaoBrevError) as refused:
        submit.submit(ctx, request(argv=[w for w in argv if w != "--dry-run"]))
    assert refused.value.code == "INSTANCE_NOT_RUNNING"
    fixed = refused.value.fix.rsplit(": ", 1)[1]
    assert shlex.split(fixed)[1:] == words[1:], (fixed, words)


def test_a_dry_run_without_brev_still_plans_and_says_the_status_is_unknown(ctx, fake_brev):
    fake_brev.expect("ls", "--json", stderr="brev: not logged in\n", exit=1)
    answer, code = submit.submit(ctx, request(dry_run=True))
    assert code == 0 and answer["ok"] is True and answer["instance_status"] is None, answer
    assert "not read" in answer["instance_note"]
