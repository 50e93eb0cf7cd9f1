"""preflight's NGC check in process: the login and entitlement rule of the TAO skill bank
contract read from the combined round trip, with the key in a copied file and nowhere else."""

from __future__ import annotations

import re

from tao_brev.verbs.preflight import PreflightRequest, preflight
from tests.unit.fake_brev import sections
from tests.unit.leaks import assert_never_sent, printed, with_secrets
from tests.unit.test_verbs_preflight_verb import expect_reach, healthy

DENIED = "unauthorized: authentication required"


def ngc_answer(fake_brev, **answers):
    return fake_brev.expect_exec("box", "docker manifest inspect", answer=sections({**healthy(), **answers}))


def expect_key_copy(fake_brev):
    return fake_brev.expect("copy", re.compile(r"/.+/cred"), re.compile(r"box:\.tao-cred-ngc-[0-9a-f]{10}"))


def check(answer, name):
    return next(c for c in answer["checks"] if c["name"] == name)


MISSING = (1, "Error: No such image: nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt")


def test_a_manifest_refused_after_a_login_is_not_entitled_and_fails_when_a_pull_is_needed(ctx, fake_brev):
    values = with_secrets(ctx, ["NGC_KEY"])
    expect_reach(fake_brev)
    expect_key_copy(fake_brev)
    ngc_answer(fake_brev, image=MISSING, ngc_login="Login Succeeded", manifest=(1, DENIED))
    answer, code = preflight(ctx, PreflightRequest(instance="box", image="images.tao_toolkit.pyt"))
    ngc = check(answer, "ngc_auth")
    assert code == 1 and ngc["ok"] is False and ngc["code"] == "NGC_NOT_ENTITLED", ngc
    assert_never_sent(fake_brev, printed(answer), values=values.values())


def test_an_image_already_present_makes_an_ngc_refusal_a_warning(ctx, fake_brev):
    with_secrets(ctx, ["NGC_KEY"])
    expect_reach(fake_brev)
    expect_key_copy(fake_brev)
    ngc_answer(fake_brev, image="25000000000", ngc_login="Login Succeeded", manifest=(1, DENIED))
    answer, code = preflight(ctx, PreflightRequest(instance="box", image="images.tao_toolkit.pyt"))
    ngc = check(answer, "ngc_auth")
    assert code == 0 and ngc["ok"] is True and ngc["warning"] and ngc["detail"].startswith("NOT_ENTITLED"), ngc


def test_a_manifest_refused_without_any_login_is_not_authenticated(ctx, fake_brev):
    expect_reach(fake_brev)
    ngc_answer(fake_brev, image=MISSING, manifest=(1, DENIED))
    answer, code = preflight(ctx, PreflightRequest(instance="box", image="images.tao_toolkit.pyt"))
    ngc = check(answer, "ngc_auth")
    assert code == 1 and ngc["ok"] is False and ngc["code"] == "NGC_NOT_AUTHENTICATED", ngc
    assert "NGC_KEY" in ngc["fix"]
    assert not any(c.args[:1] == ["copy"] for c in fake_brev.calls)   # no key: nothing to copy


def test_a_key_file_the_copy_did_not_deliver_is_said_so(ctx, fake_brev):
    values = with_secrets(ctx, ["NGC_KEY"])
    expect_reach(fake_brev)
    expect_key_copy(fake_brev)
    ngc_answer(fake_brev, image=MISSING, ngc_login=(1, "TAO_NGC_KEY_FILE_EMPTY"), manifest=(1, DENIED))
    answer, code = preflight(ctx, PreflightRequest(instance="box", image="images.tao_toolkit.pyt"))
    ngc = check(answer, "ngc_auth")
    assert code == 1 and ngc["ok"] is False and "reached the instance empty" in ngc["detail"], ngc
    assert_never_sent(fake_brev, printed(answer), values=values.values())
