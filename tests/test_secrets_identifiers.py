"""Every identifier submit stores (the record, the sidecar's ``submit_argv`` that recovery runs
again, the results routing) that holds the value of an ``--env`` variable is refused with
SECRET_IN_IDENTIFIER before anything is recorded: never stored as ``<redacted>`` (a resubmit
would then fail). The variable's name is no credential name, so only ``--env`` makes its
value known (after the argv check the CLI runs first). Table: identifier x spelling.
"""

from __future__ import annotations

import base64
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import EXAMPLE_SPEC, run_script
from tao_brev.errors import TaoBrevError
from tao_brev.secrets import guard as known_secrets
from tao_brev.verbs.submit import guards
from tao_brev.verbs.submit.plan import SubmitRequest

VALUE = "Kq7Wm2Zt9Rx4Lp8Vn3Hd6"
NAME = "MIRROR_SETTING"   # no credential name: known only through --env
SPELLINGS = {"verbatim": VALUE, "base64": base64.b64encode(VALUE.encode()).decode().rstrip("=")}


def _spec_at(tmp_path: Path, word: str) -> str:
    path = tmp_path / f"specs-{word}" / "train.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EXAMPLE_SPEC.read_text())
    return str(path)


CASES = {   # flag -> (extra argv, replaced argv) builder: (tmp_path, word) -> {flag: value}
    "--spec": lambda tmp, w: {"--spec": _spec_at(tmp, w)},
    "--results-root": lambda tmp, w: {"--results-root": f"~/results-{w}"},
    "--instance": lambda tmp, w: {"--instance": f"box-{w}"},
    "--image": lambda tmp, w: {"--image": f"nvcr.io/nvidia/tao/tao-toolkit:{w}"},
    "--network-arch": lambda tmp, w: {"--network-arch": f"arch_{w}"},
    "--action": lambda tmp, w: {"--action": f"act_{w}"},
    "--shm-size": lambda tmp, w: {"--shm-size": f"{w}g"},
    "--gpus": lambda tmp, w: {"--gpus": f"device={w}"},
    "--upload-exclude": lambda tmp, w: {"--upload-exclude": f"*{w}*"},
    "--inputs": lambda tmp, w: {"--inputs": f"~/data-{w}=data"},
    "--fallback-instance": lambda tmp, w: {"--fallback-instance": f"fb@{w}", "--recover": "1"},
}
SPELLINGS["percent-encoded"] = "".join(f"%{b:02X}" for b in VALUE.encode())


def _argv(tmp_path: Path, flags: dict) -> list[str]:
    base = {"--instance": "box", "--image": "images.tao_toolkit.pyt", "--network-arch": "visual_changenet",
            "--action": "train", "--spec": str(EXAMPLE_SPEC)}
    base.update(flags)
    words = [w for flag, value in base.items() for w in (flag, value)]
    return [*words, "--env", NAME, "--dry-run", "--no-spec-check"]


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("flag", sorted(CASES))
def test_a_flag_holding_an_env_value_is_refused_before_anything_is_recorded(state_env, tmp_path, flag, spelling):
    res = run_script("submit.py", *_argv(tmp_path, CASES[flag](tmp_path, SPELLINGS[spelling])),
                     env={**state_env, NAME: VALUE})
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_IDENTIFIER", (flag, res.stdout[-600:])
    assert NAME in res.json["error"]["message"] and VALUE not in res.stdout + res.stderr
    assert "<redacted>" not in res.stdout
    state = Path(state_env["TAO_STATE_DIR"])
    assert not (state / "jobs").exists() or not any((state / "jobs").iterdir())


# Answers printed before a verb runs (argparse's, a bad name's): the --env values are known by then.
EARLY = {   # argv words (after the common ones) -> the refusal's code
    "price": (["--price-per-hour", VALUE], "BAD_ARGUMENT"),
    "storage tier": (["--storage-tier", VALUE], "BAD_ARGUMENT"),
    "budget": (["--budget-s", VALUE], "BAD_ARGUMENT"),
    "recover": (["--recover", VALUE], "BAD_ARGUMENT"),
    "env given as --env=": (["--env=" + NAME, "--budget-s", "x" + VALUE], "BAD_ARGUMENT"),
    "fallback at": (["--fallback-instance", f"fb@{VALUE}", "--recover", "1"], "SECRET_IN_IDENTIFIER"),
    "fallback percent": (["--fallback-instance", "fb-" + SPELLINGS["percent-encoded"], "--recover", "1"],
                         "SECRET_IN_IDENTIFIER"),
}


@pytest.mark.parametrize("case", sorted(EARLY))
def test_no_early_refusal_echoes_an_env_value(state_env, tmp_path, case):
    words, code = EARLY[case]
    res = run_script("submit.py", *_argv(tmp_path, {}), *words, env={**state_env, NAME: VALUE})
    assert res.code == 2 and res.json["error"]["code"] == code, res.stdout[-600:]
    out = res.stdout + res.stderr
    assert VALUE not in out and SPELLINGS["percent-encoded"] not in out, out[-600:]


@pytest.fixture
def watched():
    known_secrets.reset()
    known_secrets.watch([NAME])
    yield
    known_secrets.reset()


def _request(**kw) -> SubmitRequest:
    base = dict(instance="box", image="images.tao_toolkit.pyt", network_arch="visual_changenet", action="train",
                spec="/s/train.yaml")
    base.update(kw)
    return SubmitRequest(**base)


@pytest.mark.parametrize("field, value", [
    ("spec", f"/data/{VALUE}/train.yaml"), ("results_root", f"~/r/{VALUE}"), ("bucket", f"b-{VALUE}"),
    ("retry_of", f"x-{VALUE}"), ("resume_from", f"x-{VALUE}"), ("upload_excludes", [f"*{VALUE}*"]),
    ("inputs", [f"~/{VALUE}=d"]), ("env_names", [NAME, f"X{VALUE}"]), ("storage_tier", VALUE),
    ("recover", {"policy": VALUE}), ("argv", ["--spec", f"/d/{VALUE}.yaml", "--", "train.x=1"]),
])
def test_every_stored_field_of_the_request_is_swept(watched, field, value):
    names = guards.stored_identifiers(_request(**{field: value}))
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse_in_identifiers(names, {NAME: VALUE})
    assert err.value.code == "SECRET_IN_IDENTIFIER" and VALUE not in err.value.message


def test_overrides_after_the_separator_are_left_to_the_spec_guard(watched):
    names = guards.stored_identifiers(_request(argv=["--spec", "/s.yaml", "--", f"train.note={VALUE}"]))
    assert not any(VALUE in v for v in names.values())


@pytest.mark.parametrize("where", ["image", "instance_root", "bucket", "endpoint_url", "region", "carrier_image",
                                   "input_uri"])
def test_routed_identifiers_holding_a_value_are_refused(where):
    held = f"x-{VALUE}-y"
    routing = SimpleNamespace(record_root="s3://b/results", bucket=held if where == "bucket" else "b",
                              instance_root=held if where == "instance_root" else "~/tao-results",
                              results_dir=lambda job: f"~/tao-results/{job}")
    settings = SimpleNamespace(endpoint_url=held if where == "endpoint_url" else "https://s3.example",
                               region=held if where == "region" else "us-east-1", bucket="b")
    stage = SimpleNamespace(settings=settings, carrier_image=held if where == "carrier_image" else "amazon/aws-cli",
                            inputs=[SimpleNamespace(name="d", uri=held if where == "input_uri" else "s3://b/inputs/d/")])
    plan = SimpleNamespace(image=held if where == "image" else "nvcr.io/nvidia/tao:6", routing=routing, stage=stage)
    ctx = SimpleNamespace(env={NAME: VALUE})
    known_secrets.reset()
    known_secrets.watch([NAME])
    try:
        with pytest.raises(TaoBrevError) as err:
            guards._routed_identifiers(ctx, _request(), plan)
        assert err.value.code == "SECRET_IN_IDENTIFIER"
        plan.image, routing.bucket, routing.instance_root = "nvcr.io/nvidia/tao:6", "b", "~/tao-results"
        settings.endpoint_url, settings.region, stage.carrier_image = "https://s3.example", "us-east-1", "aws-cli"
        stage.inputs[0].uri = "s3://b/inputs/d/"
        guards._routed_identifiers(ctx, _request(), plan)   # nothing held: passes
    finally:
        known_secrets.reset()
