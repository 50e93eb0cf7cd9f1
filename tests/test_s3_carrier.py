"""tao_brev/s3/carrier.py: the AWS CLI image pin and the carrier's docker command."""

from __future__ import annotations

from tao_brev import s3 as staging
from tests.s3world import CARRIER


def test_carrier_pin_falls_back_to_the_bundle_when_a_bank_lacks_it(tmp_path):
    (tmp_path / "versions.yaml").write_text("images:\n  tao_toolkit:\n    pyt: nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt\n")
    assert staging.carrier_image({"TAO_SKILL_BANK_PATH": str(tmp_path)}) == CARRIER
    (tmp_path / "versions.yaml").write_text("images:\n  s3_transfer: amazon/aws-cli:2.22.0\n")
    assert staging.carrier_image({"TAO_SKILL_BANK_PATH": str(tmp_path)}) == "amazon/aws-cli:2.22.0"


def test_carrier_command_shape():
    plain = staging.Carrier(CARRIER, "~/.tao-cred-j-s3-ab12", "j")
    cmd = plain.run("~/tao-jobs/j/inputs", "/inputs", ["s3", "sync", "s3://b/p q/", "/inputs/x"])
    assert cmd.startswith("docker run --rm --network host --env-file \"$HOME\"/.tao-cred-j-s3-ab12 ")
    assert "AWS_CONFIG_FILE" not in cmd and plain.prepare() == ""
    assert cmd.endswith(f"{CARRIER} s3 sync 's3://b/p q/' /inputs/x")
    path_style = staging.Carrier(CARRIER, "~/.tao-cred-j-s3-ab12", "j", path_style=True)
    assert "-e AWS_CONFIG_FILE=/tao-aws/config" in path_style.run("~/r", "/results", ["s3", "ls"], read_only=True)
    assert "addressing_style = path" in path_style.prepare()
