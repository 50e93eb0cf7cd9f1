"""submit's guards in process: every check before a record opens refuses bad input with its
code (exit 2 unless the table says otherwise), opens no record, sends nothing to brev, and never
echoes a credential's value."""

from __future__ import annotations

from pathlib import Path

import pytest

from tao_brev.errors import TaoBrevError
from tao_brev.verbs import submit
from tao_brev.verbs.submit import SubmitRequest
from tests.unit.jobs import SPEC
from tests.unit.leaks import SECRETS, assert_never_sent, with_secrets


def request(**kw) -> SubmitRequest:
    base = dict(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet", action="train",
                spec=str(SPEC), inputs=["~/tao-data/levir_cd_tiny=levir_cd_tiny"], no_spec_check=True)
    return SubmitRequest(**{**base, **kw})


def refused(ctx, fake_brev, **kw) -> TaoBrevError:
    with pytest.raises(TaoBrevError) as raised:
        submit.submit(ctx, request(**kw))
    assert fake_brev.calls == [] and ctx.records.list() == [], "a guard sent something or opened a record"
    assert_never_sent(fake_brev, raised.value.to_json(), str(raised.value.details))
    return raised.value


def test_a_misspelt_network_arch_names_the_closest_and_the_corrected_command(ctx, fake_brev):
    exc = refused(ctx, fake_brev, network_arch="visual_changnet", action="trian",
                  argv=["--instance", "box", "--network-arch", "visual_changnet", "--action", "trian"])
    assert exc.code == "BAD_ARGUMENT" and exc.exit_code == 2
    corrected = exc.details["answer"]["next"]   # every typo of the call at once
    assert "--network-arch visual_changenet" in corrected and "--action train" in corrected, corrected
    assert "--instance box" in corrected   # the rest of the call unchanged


def test_a_missing_spec_file_is_spec_not_found(ctx, fake_brev, tmp_path):
    exc = refused(ctx, fake_brev, spec=str(tmp_path / "nope.yaml"))
    assert exc.code == "SPEC_NOT_FOUND" and exc.exit_code == 2


@pytest.mark.parametrize("text, code", [
    ("- just\n- a list\n", "BAD_SPEC"),
    ("train:\n  num_nodes: 2\n", "MULTI_NODE_UNSUPPORTED"),
    ("a: [unclosed\n", "BAD_SPEC"),
])
def test_a_spec_the_bundle_cannot_send_is_refused(ctx, fake_brev, tmp_path, text, code):
    spec = tmp_path / "train.yaml"
    spec.write_text(text)
    assert refused(ctx, fake_brev, spec=str(spec)).code == code


def test_a_spec_holding_a_known_credential_value_is_refused_without_the_value(ctx, fake_brev, tmp_path):
    value = with_secrets(ctx, ["HF_TOKEN"])["HF_TOKEN"]
    spec = tmp_path / "train.yaml"
    spec.write_text(Path(SPEC).read_text() + f"\nwandb:\n  key: {value}\n")
    exc = refused(ctx, fake_brev, spec=str(spec))
    assert exc.code == "SECRET_IN_COMMAND" and exc.exit_code == 2


def test_an_override_holding_a_credential_value_is_refused(ctx, fake_brev):
    value = with_secrets(ctx, ["WANDB_API_KEY"])["WANDB_API_KEY"]
    exc = refused(ctx, fake_brev, overrides=[f"train.wandb.key={value}"])
    assert exc.code == "SECRET_IN_COMMAND"


def test_an_env_value_given_instead_of_a_name_is_bad_argument_and_not_echoed(ctx, fake_brev):
    exc = refused(ctx, fake_brev, env_names=[f"HF_TOKEN={SECRETS['HF_TOKEN']}"])
    assert exc.code == "BAD_ARGUMENT" and "NAME" in exc.message


def test_an_env_name_not_set_here_is_missing_credential(ctx, fake_brev):
    exc = refused(ctx, fake_brev, env_names=["MY_TOKEN_NOT_SET"])
    assert exc.code == "MISSING_CREDENTIAL" and "MY_TOKEN_NOT_SET" in exc.message


def test_the_bundle_s_own_credential_never_travels_as_a_job_env(ctx, fake_brev):
    with_secrets(ctx, ["NGC_KEY"])
    assert refused(ctx, fake_brev, env_names=["NGC_KEY"]).code == "BUNDLE_CREDENTIAL_ENV"


@pytest.mark.parametrize("inputs", [["./local-data=levir"], ["s3://bucket/x=levir"]])
def test_a_tier_a_input_that_is_not_on_the_instance_is_refused(ctx, fake_brev, inputs):
    exc = refused(ctx, fake_brev, inputs=inputs)
    assert exc.code == "BAD_ARGUMENT" and "--storage-tier B" in exc.fix


def test_an_unknown_storage_tier_is_refused(ctx, fake_brev):
    assert refused(ctx, fake_brev, storage_tier="D").code == "BAD_ARGUMENT"


def test_a_retry_of_an_unknown_job_is_refused(ctx, fake_brev):
    assert refused(ctx, fake_brev, retry_of="visual_changenet-train-abcdef").code == "UNKNOWN_JOB"
