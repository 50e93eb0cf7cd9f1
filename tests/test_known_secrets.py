"""tao_brev.secrets (guard, values, forms) and the guards around it: submit's refusals, brev's
argv and environment, bounded spec parsing, errors that never echo input, and
private state on disk."""

from __future__ import annotations

import base64
import json
import os
import shlex
import stat
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import EXAMPLE_SPEC, run_script
from tao_brev import fsio, yaml_bounded
from tao_brev.secrets import forms, guard as known_secrets, redact
from tao_brev.errors import TaoBrevError
from tao_brev.transport import Brev, brev_environment

SECRET = "Kq3/Vx+Tn8Lw2Rz6Pm4J"


@pytest.fixture(autouse=True)
def _fresh_registry():
    known_secrets.reset()
    yield
    known_secrets.reset()


def submit(state_env, *args, spec: Path | None = None, **env):
    return run_script("submit.py", "--instance", "box1", "--image", "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt",
                      "--network-arch", "visual_changenet", "--action", "train",
                      "--spec", str(spec or EXAMPLE_SPEC), "--inputs", "/data/levir_cd_tiny=levir_cd_tiny", *args,
                      env={**state_env, **env})   # the input the spec reads (/data/levir_cd_tiny)


def no_record(state_env) -> bool:
    jobs = Path(state_env["TAO_STATE_DIR"]) / "jobs"
    return not jobs.exists() or not list(jobs.glob("*.json"))


# -- submit refuses before anything is recorded or sent ------------------------------------------------
@pytest.mark.parametrize("name", ["BREV_API_TOKEN", "NGC_KEY", "NGC_API_KEY"])
def test_env_of_the_bundles_own_credential_needs_a_flag(state_env, name):
    res = submit(state_env, "--env", name, **{name: "nvapi-" + SECRET})
    assert res.code == 2 and res.json["error"]["code"] == "BUNDLE_CREDENTIAL_ENV", res
    assert "--allow-bundle-credential-env" in res.json["error"]["fix"]
    assert SECRET not in res.stdout + res.stderr and no_record(state_env)


def test_the_flag_lets_it_through_with_the_exposure_named(state_env):
    res = submit(state_env, "--env", "NGC_KEY", "--allow-bundle-credential-env", "--dry-run",
                 NGC_KEY="nvapi-" + SECRET)
    assert res.code == 0, res
    assert any("NGC_KEY" in w and "docker inspect" in w for w in res.json["warnings"])
    assert SECRET not in res.stdout + res.stderr


@pytest.mark.parametrize("name", ["HF_TOKEN", "MY_ODD_SETTING"])
def test_short_values_are_refused_for_env_names(state_env, name):
    res = submit(state_env, "--env", name, "--dry-run", **{name: "x7Kp2"})
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_TOO_SHORT", res
    assert name in res.json["error"]["message"] and "x7Kp2" not in res.stdout + res.stderr


def test_short_unrelated_variables_are_never_a_reason_to_refuse(state_env):
    res = submit(state_env, "--dry-run", SOME_OTHER_TOKEN="abc", GITHUB_PAT="x")
    assert res.code == 0, res


@pytest.mark.parametrize("flag, value", [("--instance", f"box-{SECRET[:8]}"), ("--network-arch", SECRET[:10]),
                                         ("--bucket", f"bkt-{SECRET[:8].lower()}")])
def test_an_identifier_holding_a_known_value_is_refused(state_env, flag, value):
    secret = value if flag == "--network-arch" else value.split("-", 1)[1]
    args = {"--instance": ["--instance", value], "--network-arch": [], "--bucket": ["--bucket", value]}[flag]
    if flag == "--network-arch":
        res = run_script("submit.py", "--instance", "box1", "--image", "img:1", "--network-arch", value,
                         "--action", "train", "--spec", str(EXAMPLE_SPEC), "--dry-run",
                         env={**state_env, "MYAPP_API_KEY": secret})
    else:
        res = submit(state_env, *args, "--dry-run", MYAPP_API_KEY=secret)
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_IDENTIFIER", res
    assert flag in res.json["error"]["message"] and "MYAPP_API_KEY" in res.json["error"]["message"]
    assert secret not in res.stdout + res.stderr and no_record(state_env)


def test_yaml_error_near_a_credential_gives_line_and_column_only(state_env, tmp_path):
    spec = tmp_path / "broken.yaml"
    spec.write_text(f'train:\n  num_epochs: 3\n  wandb_key: "{SECRET}\nmodel:\n  backbone: x\n')
    res = submit(state_env, "--dry-run", spec=spec)
    assert res.code == 2 and res.json["error"]["code"] == "BAD_SPEC", res
    message = res.json["error"]["message"]
    assert "line" in message and "column" in message
    assert SECRET not in res.stdout + res.stderr and SECRET[:6] not in res.stdout + res.stderr


def test_override_errors_name_the_key_not_the_value(state_env):
    res = submit(state_env, "--dry-run", "--", f"trainer.num_nodes=2{SECRET[:0]}")
    assert res.json["error"]["code"] == "MULTI_NODE_UNSUPPORTED" and "trainer.num_nodes" in res.json["error"]["message"]
    assert "=2" not in res.json["error"]["message"]


BILLION_LAUGHS = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x, x]"] +
                           [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]" for i in range(24)])


@pytest.mark.parametrize("text, why", [
    (BILLION_LAUGHS, "nodes once aliases are expanded"),
    ("a: &a [*a]\n", "recursive alias"),
    ("a: &a {b: *a}\n", "recursive alias"),
    ("x: " + "[" * 500 + "]" * 500 + "\n", "nest"),
])
def test_alias_bombs_and_deep_nesting_are_bad_spec(text, why):
    with pytest.raises(TaoBrevError) as err:
        yaml_bounded.load(text, "spec s.yaml")
    assert err.value.code == "BAD_SPEC" and why in err.value.message


def test_bounded_load_keeps_ordinary_anchors_and_merges():
    text = "base: &base {lr: 0.1, epochs: 3}\ntrain:\n  <<: *base\n  epochs: 5\nlist: [*base, *base]\n"
    assert yaml_bounded.load(text, "s") == {"base": {"lr": 0.1, "epochs": 3}, "train": {"lr": 0.1, "epochs": 5},
                                            "list": [{"lr": 0.1, "epochs": 3}] * 2}
    assert yaml_bounded.load("", "s") is None


def test_alias_bomb_spec_is_refused_by_submit(state_env, tmp_path):
    spec = tmp_path / "bomb.yaml"
    spec.write_text(BILLION_LAUGHS + "\n")
    res = submit(state_env, "--dry-run", spec=spec)
    assert res.code == 2 and res.json["error"]["code"] == "BAD_SPEC", res


# -- brev: argv and environment ------------------------------------------------------------------------
def test_brev_argv_never_carries_a_known_value(tmp_path):
    env = {"PATH": os.environ["PATH"], "DB_PASSWORD": SECRET}
    brev = Brev(binary="definitely-not-brev", env=env, backoff_s=(0,))
    with pytest.raises(TaoBrevError) as err:
        brev.copy(f"/tmp/{SECRET}", "box:x")
    assert err.value.code == "SECRET_IN_COMMAND" and "DB_PASSWORD" in err.value.message
    assert SECRET not in err.value.message
    with pytest.raises(TaoBrevError) as err:
        brev.exec("box", f"echo {json.dumps(SECRET)[1:-1].replace('/', chr(92) + '/')}")
    assert err.value.code == "SECRET_IN_COMMAND"


def test_brev_runs_without_any_credential_or_watched_variable():
    env = {"PATH": "/bin", "HOME": "/home/u", "KAGGLE_KEY": SECRET, "clientSecret": SECRET + "x",
           "DATASET_MIRROR_CFG": SECRET + "y", "AWS_REGION": "us-east-1"}
    # + SSH_AUTH_SOCK: brev's exec starts no ssh-agent when it is set (transport.NO_AGENT_SOCKET)
    assert set(brev_environment(env)) == {"PATH", "HOME", "DATASET_MIRROR_CFG", "AWS_REGION", "SSH_AUTH_SOCK"}
    known_secrets.watch(["DATASET_MIRROR_CFG"])
    assert set(brev_environment(env)) == {"PATH", "HOME", "AWS_REGION", "SSH_AUTH_SOCK"}


def test_findings_and_errors_name_the_place_never_the_value():
    env = {"HF_TOKEN": SECRET}
    hits = known_secrets.find(f"a\nb {SECRET}\n", env)
    assert hits == [("HF_TOKEN", "verbatim", 2)]
    assert known_secrets.describe(hits) == "the value of HF_TOKEN (verbatim, line 2)"


# -- state on disk ---------------------------------------------------------------------------------------
def test_state_files_are_private_and_temp_files_unique(tmp_path):
    root = tmp_path / "state"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    fsio.private_dir(root)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    target = root / "x.json"
    fsio.atomic_write_json(target, {"a": 1})
    fsio.atomic_write_text(root / "y.log", "text")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "y.log").stat().st_mode) == 0o600
    with fsio.locked(target):
        pass
    assert stat.S_IMODE((root / ".x.json.lock").stat().st_mode) == 0o600
    assert sorted(p.name for p in root.iterdir()) == [".x.json.lock", "x.json", "y.log"]   # no temp file left


def test_a_planted_symlink_is_never_written_through(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "job.json").symlink_to(outside)
    assert fsio.create_json(tmp_path / "job.json", {"a": 1}) is False   # link(2) fails on the planted name: never through it
    lock = tmp_path / ".rec.json.lock"
    lock.symlink_to(outside)
    with pytest.raises(TaoBrevError) as err:   # fsio.locked: a link as the lock is UNSAFE_STATE_PATH
        with fsio.locked(tmp_path / "rec.json"):
            pass
    assert err.value.code == "UNSAFE_STATE_PATH" and outside.read_text() == "keep"


def test_records_and_sidecars_land_private(state_env, tmp_path):
    from tao_brev.records import RecordStore
    from tao_brev.sidecar import SidecarStore

    root = Path(state_env["TAO_STATE_DIR"])
    record = RecordStore(root).open(image="i", network_arch="a", action="t", storage_tier="A", results_root="/r")
    from tao_brev.secrets import proof as env_proof

    sidecars = SidecarStore(root)
    odd = {"ODD_NAME": "odd-value-123"}
    sidecars.update(record["id"], instance="box", env_names=["ODD_NAME"],
                    env_proof=env_proof.proof(root, odd, ["ODD_NAME"]))
    sidecars.save_logs(record["id"], "line\n")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    for path in root.rglob("*"):
        want = 0o700 if path.is_dir() else 0o600
        assert stat.S_IMODE(path.stat().st_mode) == want, path
    known_secrets.reset()
    known_secrets.observe_env(odd)
    sidecars.load(record["id"])      # a later verb reading the job learns its --env names, proven by the digest
    assert redact.redact_values("v=odd-value-123", odd) == "v=<redacted>"
    assert known_secrets.unset_watched() == []


# -- the known values are looked up once, and again whenever what they come from changes ------------
def test_redaction_follows_every_change_of_what_the_values_come_from(monkeypatch):
    """The index of known values is reused between strings (list --json redacts ~20 per record)
    but never stale: os.environ set, changed or unset, another observed environment, a watched
    name, a reset - each shows in the very next redaction."""
    first, second = "hf_" + "a1" * 15, "hf_" + "b2" * 15
    text = f"tokens {first} {second} {SECRET}"
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert known_secrets.redact_text(text) == text
    monkeypatch.setenv("HF_TOKEN", first)
    assert known_secrets.redact_text(text) == f"tokens <redacted> {second} {SECRET}"
    monkeypatch.setenv("HF_TOKEN", second)                          # same name, new value
    assert known_secrets.redact_text(text) == f"tokens {first} <redacted> {SECRET}"
    monkeypatch.delenv("HF_TOKEN")
    assert known_secrets.redact_text(text) == text
    env = {"MODEL_NAME": SECRET}
    known_secrets.observe_env(env)
    assert known_secrets.redact_text(text) == text                  # not a credential's name...
    known_secrets.watch(["MODEL_NAME"])
    assert known_secrets.redact_text(text) == f"tokens {first} {second} <redacted>"   # ...until --env names it
    env["MODEL_NAME"] = first                                       # the observed environment itself changes
    assert known_secrets.redact_text(text) == f"tokens <redacted> {second} {SECRET}"
    known_secrets.reset()
    assert known_secrets.redact_text(text) == text


def test_one_redactor_per_answer_redacts_as_redact_text_does(monkeypatch):
    monkeypatch.setenv("NGC_KEY", "nvapi-" + "Z" * 30)
    strings = ["plain", "", "key nvapi-" + "Z" * 30, "NGC_KEY=" + json.dumps("nvapi-" + "Z" * 30)[1:-1], "x" * 9]
    values = known_secrets.redactor()
    assert [values(s) for s in strings] == [known_secrets.redact_text(s) for s in strings]
    assert values(None) is None and values(7) == 7
    obj = {"message": strings[2], "results_dir": "/data/token=v1/run", "n": [1, None, ("a", strings[2])]}
    assert redact.redact_obj(obj) == {"message": "key <redacted>", "results_dir": "/data/token=v1/run",
                                      "n": [1, None, ("a", "key <redacted>")]}


# -- a value that is not UTF-8 (os.environ holds its bytes as PEP 383 surrogates) -------------
RAW = b"p\xe4ssw\xf6rd-latin1-Qz7/+"


def raw_forms() -> dict[str, str]:
    return {"latin-1": RAW.decode("latin-1"), "replaced": RAW.decode("utf-8", "replace"),
            "url": quote(RAW, safe=""), "base64": base64.b64encode(RAW).decode()}


def test_a_credential_that_is_not_utf8_answers_and_stays_a_known_value(world):
    """A Latin-1 password in a credential-named variable: every script still answers one JSON
    document (no traceback), and a job given it by --env has it redacted in every form."""
    value = os.fsdecode(RAW)
    for script, args in [("poll_status.py", ["--all"]), ("teardown.py", ["--orphans"]),
                         ("tao_job_record.py", ["list", "--json"]), ("preflight.py", ["--instance", "box"])]:
        res = world.run(script, *args, MY_DB_PASSWORD=value)
        assert res.code in (0, 1, 2, 3) and "Traceback" not in res.stderr, (script, res)
        json.loads(res.stdout)
    # docker --env-file refuses bytes that are not UTF-8 (docker/cli opts/file.go) and its error prints
    # them: submit refuses such a value itself, before anything is sent, naming it only
    execs = world.sim.exec_count()
    sub = world.submit("--env", "MY_DB_PASSWORD", MY_DB_PASSWORD=value)
    assert sub.code == 2 and sub.json["error"]["code"] == "BAD_ARGUMENT", sub
    assert "MY_DB_PASSWORD is not UTF-8" in sub.json["error"]["message"] and world.sim.exec_count() == execs
    assert [how for how, form in raw_forms().items() if form in sub.stdout + sub.stderr] == []


def test_a_value_that_is_not_utf8_is_redacted_in_the_forms_a_reader_shows_it():
    value = os.fsdecode(RAW)
    text = " | ".join(raw_forms().values()) + " | " + value
    assert known_secrets.redact_text(text, {"MY_DB_PASSWORD": value}) == " | ".join(["<redacted>"] * 5)


def test_a_later_shell_without_the_env_values_never_prints_the_job_output(world):
    """Redaction rests on the values: a poll or teardown from a shell that lacks a job's --env
    values withholds what the job printed (logs, log evidence, the saved log) and says which
    variables to export; with them exported, the same poll shows the logs, redacted."""
    value = "mRq4/Zt+8sYp2Wn6Kv0Lb5Gh-later"
    spec = world.spec({"print_env": ["DATASET_MIRROR_CFG"], "exit_code": 3, "epoch_seconds": 0.01})
    sub = world.submit("--env", "DATASET_MIRROR_CFG", spec=spec, DATASET_MIRROR_CFG=value)
    assert sub.code == 0, sub
    job_id = sub.json["job_id"]
    world.sim.wait_container("box", job_id)
    forms = (value, quote(value, safe=""), base64.b64encode(value.encode()).decode())

    later = world.run("poll_status.py", job_id, "--logs", "50")            # a new shell: no value
    assert later.json["state"] == "ERROR" and later.json["withheld"]["names"] == ["DATASET_MIRROR_CFG"], later
    assert "withheld" in later.json["logs"] and "logs" in later.json["withheld"]["fields"]
    assert all(line.startswith(("ExitCode=", "OOMKilled=", "State.Error=", "[tao-brev: withheld"))
               for line in later.json["hint"]["evidence"]), later.json["hint"]
    same = world.run("poll_status.py", job_id, "--logs", "50", DATASET_MIRROR_CFG=value)
    assert "withheld" not in same.json and "<redacted>" in same.json["logs"], same
    down = world.run("teardown.py", job_id)                                 # saves the log: not without the value
    assert down.code == 0, down
    saved = world.run("poll_status.py", job_id, "--logs", "50", DATASET_MIRROR_CFG=value)
    assert "the log was not saved" in saved.json["logs"], saved.json
    for res in (later, same, down, saved):
        assert not any(form in res.stdout + res.stderr for form in forms)


# -- every spelling a parser decodes, and every encoding a reader may use ---------------------------
# Values with characters every encoding treats differently ('/', '+', a quote, a backslash, non-ASCII).
ODD_VALUES = {"WANDB_API_KEY": "Xr7/Qm+Lk2Vw9Np4Tz6Bc8Hd3Jf", "MIRROR_DB_PASSWORD": "it's-a\\b/c+dé9Zq",
              "HF_TOKEN": "hfTok3nPlainAlnum42"}


def _every_byte(value: str, fmt: str) -> str:
    return "".join(fmt % b for b in value.encode())


ENCODED = {   # computed here from the standard library, not by the bundle
    "hex": lambda v: v.encode().hex(), "HEX": lambda v: v.encode().hex().upper(),
    "base32": lambda v: base64.b32encode(v.encode()).decode(),
    "base32-unpadded": lambda v: base64.b32encode(v.encode()).decode().rstrip("="),
    "base32-lower": lambda v: base64.b32encode(v.encode()).decode().rstrip("=").lower(),
    "base64url": lambda v: base64.urlsafe_b64encode(v.encode()).decode(),
    "base64url-unpadded": lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="),
    "percent-every-byte": lambda v: _every_byte(v, "%%%02X"),
    "percent-every-byte-lower": lambda v: _every_byte(v, "%%%02x"),
    "upper-cased": lambda v: v.upper(), "lower-cased": lambda v: v.lower(),
}


@pytest.mark.parametrize("how", ENCODED)
@pytest.mark.parametrize("name", ODD_VALUES)
def test_every_encoding_is_found_and_redacted_never_printed(name, how):
    form = ENCODED[how](ODD_VALUES[name])
    text = f"line one\nwandb url=https://x.example/?k={form}&n=1 done\n"
    hits = known_secrets.find(text, ODD_VALUES)
    assert hits and hits[0][0] == name and hits[0][2] == 2, hits
    assert form not in known_secrets.redact_text(text, ODD_VALUES)
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse(text, "spec s.yaml", ODD_VALUES)
    assert name in err.value.message and form not in err.value.message and ODD_VALUES[name] not in err.value.message


def _yaml_escaped(value: str, fmt: str) -> str:
    return "".join(fmt % ord(c) for c in value)


SPELLINGS = {   # YAML text of the key `train.wandb.key` whose PARSED value is exactly the value
    "line-continuation": lambda v: f'"{_dq(v[:5])}\\\n      {_dq(v[5:])}"',
    "continuation-twice": lambda v: f'"{_dq(v[:3])}\\\n  {_dq(v[3:7])}\\\n  {_dq(v[7:])}"',
    "x-escapes": lambda v: '"' + _yaml_escaped(v[:6], "\\x%02x") + _dq(v[6:]) + '"' if v.isascii() else
    '"' + _yaml_escaped(v, "\\u%04x") + '"',
    "u-escapes": lambda v: '"' + _dq(v[:2]) + _yaml_escaped(v[2:], "\\u%04X") + '"',
    "U-escapes": lambda v: '"' + _yaml_escaped(v, "\\U%08x") + '"',
    "single-quoted": lambda v: "'" + v.replace("'", "''") + "'",
    "folded-block": lambda v: f">-\n      {v}",
    "literal-block": lambda v: f"|-\n      {v}",
    "literal-block-keep": lambda v: f"|+\n      {v}\n",
    "binary": lambda v: "!!binary |\n      " + "\n      ".join(
        [base64.b64encode(v.encode()).decode()[i:i + 8] for i in range(0, 40, 8)]),
    "str-tag": lambda v: '!!str "' + _yaml_escaped(v, "\\u%04x") + '"',
}


def _dq(text: str) -> str:
    """``text`` inside a YAML double-quoted scalar."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("name", ODD_VALUES)
def test_a_spec_spelling_the_value_so_yaml_decodes_it_is_refused_naming_the_key(name, spelling):
    value = ODD_VALUES[name]
    text = f"train:\n  num_epochs: 3\n  wandb:\n    key: {SPELLINGS[spelling](value)}\n"
    data = yaml_bounded.load(text, "spec s.yaml")
    assert value in known_secrets.parsed_strings(data)[-1][1]    # the spelling really decodes to the value
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse_parsed(data, "spec s.yaml", ODD_VALUES)
    assert err.value.code == "SECRET_IN_COMMAND"
    assert name in err.value.message and "train.wandb.key" in err.value.message, err.value.message
    assert value not in str(err.value.to_json()) and err.value.details["findings"][0]["path"] == "train.wandb.key"


@pytest.mark.parametrize("text, where", [
    ('train:\n  "\\x{first:02x}{rest}": 1\n', "train.<redacted> (the key)"),      # the key itself
    ("callbacks:\n  - {{name: w, args: ['{quoted}']}}\n", "callbacks[0].args[0]"),  # flow style, in a list
    ('base: &b {{k: "\\u{first:04x}{rest}"}}\ntrain:\n  <<: *b\n', "base.k"),       # an anchor, merged later
    ('7: "\\x{first:02x}{rest}"\n', "7"),                                          # a key that is no string
])
def test_keys_lists_flow_style_and_aliases_are_searched_too(text, where):
    value = ODD_VALUES["WANDB_API_KEY"]
    text = text.format(first=ord(value[0]), rest=_dq(value[1:]), quoted=value.replace("'", "''"))
    data = yaml_bounded.load(text, "s")
    hits = known_secrets.find_parsed(data, ODD_VALUES)
    assert hits and hits[0][0] == "WANDB_API_KEY" and hits[0][2] == where, hits
    assert value not in str(hits)


def test_a_spec_without_any_value_passes_the_parsed_check():
    data = yaml_bounded.load(EXAMPLE_SPEC.read_text(), "s")
    assert known_secrets.find_parsed(data, ODD_VALUES) == []
    known_secrets.refuse_parsed(data, "spec", ODD_VALUES)   # does not raise
    assert known_secrets.find_parsed({"a": ODD_VALUES["HF_TOKEN"][:-1], "b": 12345678, "c": None}, ODD_VALUES) == []


@pytest.mark.parametrize("spec_value", ['"\\x{first:02x}{rest}"', '"{head}\\\n   {tail}"', "{hex}", "'{b32}'"])
def test_submit_refuses_a_spec_whose_parsed_value_is_a_credential(state_env, tmp_path, spec_value):
    value = ODD_VALUES["WANDB_API_KEY"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(EXAMPLE_SPEC.read_text() + "logging:\n  wandb:\n    key: " + spec_value.format(
        first=ord(value[0]), rest=value[1:], head=value[:9], tail=value[9:], hex=value.encode().hex(),
        b32=base64.b32encode(value.encode()).decode()) + "\n")
    res = submit(state_env, "--dry-run", spec=spec, WANDB_API_KEY=value)
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_COMMAND", res
    assert "WANDB_API_KEY" in res.json["error"]["message"]
    assert value not in res.stdout + res.stderr and no_record(state_env)


OVERRIDES = {   # KEY=VALUE words whose value Hydra or YAML decodes to the value
    "hydra-single-quoted": lambda v: "cfg.mirror='" + v.replace("\\", "\\\\").replace("'", "\\'") + "'",
    "hydra-double-quoted": lambda v: 'cfg.mirror="' + v.replace("\\", "\\\\").replace('"', '\\"') + '"',
    "hydra-escapes": lambda v: "cfg.mirror=" + "".join("\\" + c if c in "\\'\", []{}=:" else c for c in v[:4])
    + "\\" + v[4] + v[5:].replace("\\", "\\\\").replace("'", "\\'"),
    "yaml-x-escapes": lambda v: 'cfg.mirror="' + _yaml_escaped(v, "\\x%02x" if v.isascii() else "\\u%04x") + '"',
    "yaml-continuation": lambda v: 'cfg.mirror="' + _dq(v[:4]) + '\\\n  ' + _dq(v[4:]) + '"',
    "yaml-single-doubled": lambda v: "cfg.mirror='" + v.replace("'", "''") + "'",
    "in-a-list": lambda v: "cfg.mirrors=[a,'" + v.replace("\\", "\\\\").replace("'", "\\'") + "']",
    "hex": lambda v: "cfg.mirror=" + v.encode().hex(),
    "base32": lambda v: "cfg.mirror=" + base64.b32encode(v.encode()).decode().rstrip("="),
    "percent": lambda v: "++cfg.mirror=" + _every_byte(v, "%%%02X"),
}


@pytest.mark.parametrize("spelling", OVERRIDES)
@pytest.mark.parametrize("name", ODD_VALUES)
def test_an_override_spelling_the_value_is_refused_naming_its_key(name, spelling):
    from tao_brev.verbs import submit as submit_verb

    item = OVERRIDES[spelling](ODD_VALUES[name])
    with pytest.raises(TaoBrevError) as err:
        submit_verb._refuse_secret_overrides(["train.num_epochs=3", item], ODD_VALUES)
    message = err.value.message
    assert err.value.code == "SECRET_IN_COMMAND" and message.startswith("override 2") and name in message, message
    assert ODD_VALUES[name] not in str(err.value.to_json())


def test_overrides_without_a_value_pass():
    from tao_brev.verbs import submit as submit_verb

    submit_verb._refuse_secret_overrides(["train.num_epochs=3", "model.backbone='resnet\\'s'", "a.b=[1,2]",
                                          '~x.y', 'k="\\x41\\x42"', "+p=a\\,b"], ODD_VALUES)


def test_submit_refuses_a_hydra_quoted_override(state_env):
    value = ODD_VALUES["WANDB_API_KEY"]
    res = submit(state_env, "--dry-run", "--", "train.num_epochs=3", f"cfg.note=\"{value[:5]}\\x{ord(value[5]):02x}"
                 f"{value[6:]}\"", WANDB_API_KEY=value)
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_COMMAND", res
    assert "override 2" in res.json["error"]["message"] and "cfg.note" in res.json["error"]["message"]
    assert value not in res.stdout + res.stderr and no_record(state_env)


# -- names: a credential word followed by how the value is written -----------------------------------
@pytest.mark.parametrize("name", ["HF_TOKEN_B64", "GITHUB_TOKEN_BASE64", "MY_SECRET_JSON", "hfTokenB64",
                                  "signingKeyPem", "DB_PASSWORD_HEX", "API_KEY_JSON_B64", "KAGGLE_KEY_JSON",
                                  "WANDB_API_KEY_BASE64URL", "SERVICE_ACCOUNT_SECRET_YAML", "hf-token-b32",
                                  "NPM_TOKEN_TXT", "CLIENT_SECRET_ENCODED", "GCP_CREDENTIALS_JSON"])
def test_a_credential_name_with_an_encoding_suffix_is_a_credential(name):
    assert known_secrets.is_credential_env_name(name)
    value = "Zq8/Lm+Pw3Nx5Rt7"
    assert known_secrets.redact_text(f"x {value} y", {name: value}) == "x <redacted> y"


@pytest.mark.parametrize("name", ["AWS_SHARED_CREDENTIALS_FILE", "SSH_AUTH_SOCK", "KEY", "KEY_JSON", "PAD_TOKEN_STR",
                                  "MAX_TOKENS_JSON", "CONFIG_JSON", "DATA_B64", "TOKENIZER_JSON", "TOKEN_FILE",
                                  "GITHUB_TOKEN_PATH", "HF_HOME", "SPEC_YAML"])
def test_a_format_suffix_alone_makes_no_credential(name):
    assert not known_secrets.is_credential_env_name(name)


def test_the_trie_pattern_matches_exactly_as_a_flat_alternation():
    """The regex of all forms is a trie; it must find what the plain longest-first alternation finds."""
    import random
    import re

    rng = random.Random(7)
    for _ in range(200):
        values = {f"A{i}_TOKEN": "k" + "".join(rng.choice("ab/+%=\\\"x'é") for _ in range(rng.randint(8, 14)))
                  for i in range(3)}
        pattern, owners = known_secrets.DEFAULT.index(values)
        forms = sorted(owners, key=lambda f: (-len(f), f))
        flat = re.compile("|".join(map(re.escape, forms)))
        text = "".join(rng.choice([rng.choice(forms), rng.choice("ab/+%=x\\ ") * 3]) for _ in range(30))
        assert pattern.sub("<r>", text) == flat.sub("<r>", text)
        long = text * (known_secrets.LONG_TEXT // len(text) + 2) + "k" * 3000   # narrowed to the forms it has
        assert known_secrets.redact_text(long, values) == flat.sub(redact.PLACEHOLDER, long)
        assert known_secrets.redactor(values)(long) == flat.sub(redact.PLACEHOLDER, long)
        assert known_secrets.redact_text("q" * 5000, values) == "q" * 5000


SECOND_DECODINGS = {   # a parsed string that a program reading the spec decodes once more
    "partly-url-encoded": lambda v: "https://m.example/?k=%" + f"{ord(v[0]):02X}" + quote(v[1:], safe=""),
    "literal-backslash-escapes": lambda v: "".join(f"\\x{ord(c):02x}" if c.isascii() else c for c in v),
    "html-entities": lambda v: "".join(f"&#x{ord(c):x};" for c in v[:3]) + v[3:].replace("&", "&amp;"),
    "json-in-a-string": lambda v: json.dumps({"mirror": {"k": "".join(f"\\u{ord(c):04x}" for c in v)}})
    .replace("\\\\u", "\\u"),
}


@pytest.mark.parametrize("how", SECOND_DECODINGS)
@pytest.mark.parametrize("name", ODD_VALUES)
def test_a_string_a_program_decodes_once_more_is_searched_decoded(name, how):
    value = ODD_VALUES[name]
    text = "train:\n  cfg: " + json.dumps(SECOND_DECODINGS[how](value)) + "\n"
    data = yaml_bounded.load(text, "s")
    hits = known_secrets.find_parsed(data, ODD_VALUES)
    assert hits and hits[0][0] == name and hits[0][2] == "train.cfg", (how, hits)
    assert value not in str(hits)


@pytest.mark.parametrize("before", ["", "u", "us", "user:", "Bearer ", '{"auth": "'])
@pytest.mark.parametrize("after", ["", "x", '"}'])
@pytest.mark.parametrize("name", ODD_VALUES)
def test_a_value_inside_a_longer_base64_text_is_found_and_redacted(name, before, after):
    value = ODD_VALUES[name]
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        blob = encode((before + value + after).encode()).decode()
        text = f"Authorization: Basic {blob}"
        assert known_secrets.find(text, ODD_VALUES)[0][0] == name
        shown = known_secrets.redact_text(text, ODD_VALUES)
        left = shown.split("<redacted>")
        assert len(left) == 2 and len(left[0]) - len("Authorization: Basic ") <= 4 * (len(before) // 3 + 1)
        assert len(left[1]) <= 4 * (len(after) // 3 + 2)   # at most the groups shared with what follows


def test_an_override_key_that_hydra_would_not_read_is_not_repeated():
    from tao_brev.verbs import submit as submit_verb

    value = ODD_VALUES["WANDB_API_KEY"]
    odd_key = 'cfg."' + value[:4]
    with pytest.raises(TaoBrevError) as err:
        submit_verb._refuse_secret_overrides([f"{odd_key}=" + value.replace("/", "\\/").replace("+", "\\+")],
                                             ODD_VALUES)
    assert "(its key)" in err.value.message and value[:4] not in err.value.message


INTERPOLATED = {   # (spec text, overrides): the value split across keys and joined by OmegaConf interpolation
    "absolute": (lambda a, b: f"train:\n  a: '{a}'\n  key: '${{train.a}}{b}'\n", lambda a, b: []),
    "relative": (lambda a, b: f"train:\n  a: '{a}'\n  key: '${{.a}}{b}'\n", lambda a, b: []),
    "two-levels-up": (lambda a, b: f"a: '{a}'\ntrain:\n  w:\n    key: '${{...a}}{b}'\n", lambda a, b: []),
    "list-item": (lambda a, b: f"parts: ['{a}', '{b}']\ntrain:\n  key: '${{parts.0}}${{parts[1]}}'\n",
                  lambda a, b: []),
    "chained": (lambda a, b: f"x: '{a}'\ny: '${{x}}'\ntrain:\n  key: '${{y}}{b}'\n", lambda a, b: []),
    "override-sets-a-part": (lambda a, b: f"train:\n  key: '${{cfg.p}}{b}'\n", lambda a, b: [f"cfg.p={a}"]),
    "override-uses-the-spec": (lambda a, b: f"cfg:\n  p: '{a}'\n", lambda a, b: [f"train.key=${{cfg.p}}{b}"]),
    # OmegaConf's other spellings (omegaconf 2.3 grammar): resolvers, blanks, brackets, nesting, escapes
    "oc.select-two": (lambda a, b: f"x: {{p: '{a}'}}\ny: '{b}'\ntrain:\n  key: '${{oc.select:x.p}}${{oc.select:y}}'\n",
                      lambda a, b: []),
    "oc.select-blanks": (lambda a, b: f"x: '{a}'\ntrain:\n  key: '${{oc.select: x }}{b}'\n", lambda a, b: []),
    "oc.select-default": (lambda a, b: f"train:\n  key: '${{oc.select:missing,{a}}}{b}'\n", lambda a, b: []),
    "oc.select-quoted-default": (lambda a, b: f"train:\n  key: \"${{oc.select:nope, '{a}'}}{b}\"\n",
                                 lambda a, b: []),
    "oc.select-default-interpolated": (lambda a, b: f"x: '{a}'\ntrain:\n  key: '${{oc.select:no,${{x}}}}{b}'\n",
                                       lambda a, b: []),
    "oc.select-relative": (lambda a, b: f"train:\n  a: '{a}'\n  key: '${{oc.select:.a}}{b}'\n", lambda a, b: []),
    "bracket-bare": (lambda a, b: f"x: {{p: '{a}'}}\ny: '{b}'\ntrain:\n  key: '${{x[p]}}${{y}}'\n", lambda a, b: []),
    "bracket-quoted": (lambda a, b: f"x: {{p: '{a}'}}\ntrain:\n  key: \"${{x['p']}}{b}\"\n", lambda a, b: []),
    "bracket-index": (lambda a, b: f"x: ['{a}']\ntrain:\n  key: '${{x[0]}}{b}'\n", lambda a, b: []),
    "blanks": (lambda a, b: f"x: '{a}'\ntrain:\n  key: '${{ x }}{b}'\n", lambda a, b: []),
    "relative-blanks": (lambda a, b: f"train:\n  a: '{a}'\n  key: '${{ .a }}{b}'\n", lambda a, b: []),
    "two-dots": (lambda a, b: f"a: '{a}'\ntrain:\n  key: '${{..a}}{b}'\n", lambda a, b: []),
    "nested-key": (lambda a, b: f"n: p\nx: {{p: '{a}'}}\ntrain:\n  key: '${{x.${{n}}}}{b}'\n", lambda a, b: []),
    "oc.decode": (lambda a, b: f"train:\n  key: '${{oc.decode:\"''{a}''\"}}{b}'\n", lambda a, b: []),
    "oc.decode-of-a-reference": (lambda a, b: f"x: \"'{a}'\"\ntrain:\n  key: '${{oc.decode:${{x}}}}{b}'\n",
                                 lambda a, b: []),
    "oc.env-default": (lambda a, b: f"train:\n  key: '${{oc.env:NOT_SET_HERE,{a}}}{b}'\n", lambda a, b: []),
    "unknown-resolver-holds-a-part": (lambda a, b: f"train:\n  key: '${{tao.anything:{a}}}{b}'\n", lambda a, b: []),
    "split-around-a-resolver": (lambda a, b: f"train:\n  key: '{a[:3]}${{my.res:1,2}}{a[3:]}{b}'\n",
                                lambda a, b: []),
    "override-oc.select": (lambda a, b: f"x: '{a}'\n", lambda a, b: [f"train.key=${{oc.select:x}}{b}"]),
    "override-oc.select-two": (lambda a, b: f"train:\n  x: {{p: '{a}'}}\n  y: '{b}'\n",
                               lambda a, b: ["train.key=${oc.select:train.x.p}${oc.select:train.y}"]),
    "override-default": (lambda a, b: "x: 1\n", lambda a, b: [f"train.key=${{oc.select:nope,{a}}}{b}"]),
    "override-brackets-blanks": (lambda a, b: f"x: {{p: '{a}'}}\n", lambda a, b: [f"train.key='${{ x[p] }}{b}'"]),
}


@pytest.mark.parametrize("case", INTERPOLATED)
def test_a_value_split_across_keys_and_joined_by_interpolation_is_refused(case):
    from tao_brev.verbs import submit as submit_verb

    value = ODD_VALUES["WANDB_API_KEY"]
    a, b = value[:6], value[6:]
    spec_text, overrides = INTERPOLATED[case]
    data = yaml_bounded.load(spec_text(a, b), "s")
    known_secrets.refuse_parsed(data, "spec", ODD_VALUES)                    # no key holds it by itself
    submit_verb._refuse_secret_overrides(overrides(a, b), ODD_VALUES)
    with pytest.raises(TaoBrevError) as err:
        submit_verb._refuse_interpolated_secrets(data, overrides(a, b), ODD_VALUES)
    path = err.value.details["findings"][0]["path"]
    assert "WANDB_API_KEY" in err.value.message and path in ("train.key", "train.w.key"), err.value.message
    assert value not in str(err.value.to_json())


@pytest.mark.parametrize("spec_text, overrides", [
    ("results_dir: /r\ntrain:\n  epochs: 3\n  out: '${results_dir}/x'\n  e: '${train.epochs}'\n", []),
    ("train:\n  home: '${oc.env:HOME}/data'\n  key: '${oc.env:WANDB_API_KEY}'\n  n: '${oc.select:train.m,5}'\n", []),
    ("train:\n  a: 1\n  b: '${.a}${ .a }${oc.decode:\"[1, 2]\"}${tao.custom:x,y}'\n  c: '\\${literal}'\n",
     ["train.q=${train.a}", "train.r=${oc.select:train.b,none}"]),
])
def test_legitimate_interpolations_pass(spec_text, overrides):
    from tao_brev.verbs import submit as submit_verb

    submit_verb._refuse_interpolated_secrets(yaml_bounded.load(spec_text, "s"), overrides, ODD_VALUES)


def test_interpolation_loops_and_doublings_stop():
    from tao_brev.verbs import submit as submit_verb

    bomb = "a: 'xy'\n" + "".join(f"{chr(98 + i)}: '${{{chr(97 + i)}}}${{{chr(97 + i)}}}'\n" for i in range(24))
    loop = "p: '${q}'\nq: '${p}'\nr: '${missing.key}'\n"
    for text in (bomb, loop):
        submit_verb._refuse_interpolated_secrets(yaml_bounded.load(text, "s"), ["z=${p}"], ODD_VALUES)
    with pytest.raises(TaoBrevError) as err:   # nesting deeper than the stack: refused, not a crash
        submit_verb._refuse_interpolated_secrets({"k": "${" * 5000 + "x" + "}" * 5000}, [], ODD_VALUES)
    assert err.value.code == "BAD_SPEC" and "'k'" in err.value.message


def test_submit_refuses_a_value_joined_by_interpolation(state_env, tmp_path):
    value = ODD_VALUES["WANDB_API_KEY"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(EXAMPLE_SPEC.read_text() + f"logging:\n  part: '{value[:7]}'\n")
    res = submit(state_env, "--dry-run", "--", f"logging.key=${{logging.part}}{value[7:]}", spec=spec,
                 WANDB_API_KEY=value)
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_COMMAND", res
    assert "logging.key" in res.json["error"]["message"] and value not in res.stdout + res.stderr
    assert no_record(state_env)


@pytest.mark.parametrize("dry_run", [["--dry-run"], []])
def test_submit_refuses_a_value_joined_by_resolvers(state_env, tmp_path, dry_run):
    value = ODD_VALUES["WANDB_API_KEY"]
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"train:\n  x: {{p: '{value[:9]}'}}\n  y: '{value[9:]}'\n"
                    "  wandb_key: '${oc.select:train.x.p}${oc.select:train.y}'\n")
    res = submit(state_env, "--env", "WANDB_API_KEY", *dry_run, "--",
                 "train.z=${oc.select:train.x.p}${oc.select:train.y}", spec=spec, WANDB_API_KEY=value)
    assert res.code == 2 and res.json["error"]["code"] == "SECRET_IN_COMMAND", res
    message = res.json["error"]["message"]
    assert "WANDB_API_KEY" in message and "train.wandb_key" in message and "train.z" in message, message
    assert value not in res.stdout + res.stderr and no_record(state_env)


# -- identifiers: what the bundle minted is no secret; what the user named collides by name ---------------
@pytest.mark.parametrize("name", ["TAO_JOB_KEY", "LAST_RUN_TOKEN", "jobSecret", "RUN_PASSWORD"])
def test_a_value_equal_to_a_minted_job_id_is_neither_refused_nor_redacted(name, tmp_path):
    from tao_brev.records import RecordStore

    job_id = RecordStore(tmp_path).open(image="img:1", network_arch="visual_changenet", action="train",
                                        storage_tier="A", results_root="~/r")["id"]
    env = {name: job_id, "OTHER_TOKEN": f"x-{job_id}-y"}
    command = f"docker logs --tail 20 {job_id}"
    known_secrets.refuse(command, "a command", env)                  # the id alone: nothing to refuse
    assert known_secrets.redact_text(command, env) == command
    with pytest.raises(TaoBrevError) as err:                         # a value that only CONTAINS it stays secret
        known_secrets.refuse(f"echo x-{job_id}-y", "a command", env)
    assert err.value.code == "SECRET_IN_COMMAND" and "OTHER_TOKEN" in err.value.message
    shaped = "visual_changenet-train-0a1b2c"                          # job-id shaped, never minted: still secret
    with pytest.raises(TaoBrevError):
        known_secrets.refuse(f"docker logs {shaped}", "a command", {name: shaped})


def test_a_job_id_the_store_holds_is_minted_in_a_later_process(tmp_path):
    from tao_brev.records import RecordStore

    job_id = RecordStore(tmp_path).open(image="img:1", network_arch="dino", action="evaluate",
                                        storage_tier="A", results_root="~/r")["id"]
    done = run_script("tao_job_record.py", "show", job_id,
                      env={**os.environ, "TAO_STATE_DIR": str(tmp_path), "MY_JOB_TOKEN": job_id})
    assert done.code == 0 and done.json["id"] == job_id and done.json["results_dir"] == f"~/r/{job_id}"
    assert "<redacted>" not in done.stdout


@pytest.mark.parametrize("flag, value, var", [
    ("--instance", "trainbox-0042", "BOX_SECRET"),
    ("--image", "nvcr.io/nvidia/tao/tao-toolkit:6.0.0-pyt", "IMAGE_SECRET"),
    ("--results-root", "~/results-private-7", "RESULTS_KEY"),
    ("--network-arch", "visual_changenet", "archPassword"),
])
def test_a_user_given_name_equal_to_a_credential_names_the_variable_and_the_fix(flag, value, var):
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse_in_argv(["--spec", "s.yaml", flag, value], {var: value})
    exc = err.value
    assert exc.code == "SECRET_IN_IDENTIFIER" and exc.details["variable"] == var and exc.details["argument"] == flag
    assert f"{flag} equals the value of {var}" in exc.message and value not in exc.message + exc.fix
    assert f"unset {var}" in exc.fix and flag in exc.fix
    with pytest.raises(TaoBrevError) as err:                         # --flag=value, and a name that contains it
        known_secrets.refuse_in_argv([f"{flag}=pre-{value}"], {var: value})
    assert f"{flag} contains the value of {var}" in err.value.message
    known_secrets.refuse_in_argv([flag, value], {"UNRELATED": value})   # a name that is no credential's: fine
    known_secrets.refuse_in_argv(["--timeout", value], {var: value})    # not a name flag: other guards decide


def test_json_forms_pattern_finds_every_form_inside_json_text_written_with_ensure_ascii(monkeypatch):
    """What record_listing relies on: JSON escaping with ensure_ascii is character by character, so
    a string holding any form of a known value holds its escaped form in the JSON text, wherever it
    sits in the string and whatever surrounds it; and no value known: no pattern."""
    for name in list(os.environ):
        if known_secrets.is_credential_env_name(name) or name in redact.SECRET_ENV_NAMES:
            monkeypatch.delenv(name)
    known_secrets.reset()
    assert known_secrets.json_forms_pattern() is None
    value = 'p\u00e4ss"w\\rd/\t\U0001f600-' + "k" * 9
    monkeypatch.setenv("MY_SERVICE_TOKEN", value)
    pattern = known_secrets.json_forms_pattern()
    forms = [form for form, _ in known_secrets.encodings(value, "MY_SERVICE_TOKEN")]
    assert len(forms) > 20
    for form in forms:
        for before, after in (("", ""), ("a\u00e9\"", "\\\n\u2028"), ("\U0001f600", "x")):
            text = json.dumps({"k": [f"{before}{form}{after}"]}, indent=2)
            assert pattern.search(text), form
    assert pattern.search(json.dumps({"k": "kkkkkkkkk and nothing else"})) is None
    known_secrets.reset()


@pytest.mark.parametrize("listing", [["list"], ["list", "--json"]])
def test_a_listing_shows_job_ids_a_variable_equals(listing, tmp_path):
    """``tao_job_record.py list`` (TSV, and JSON from its cache too) names every id the store holds,
    even when a credential-named variable of the listing's shell equals one."""
    from tao_brev.records import RecordStore

    ids = [RecordStore(tmp_path).open(image="img:1", network_arch=arch, action="train", storage_tier="A",
                                      results_root="~/r")["id"] for arch in ("dino", "visual_changenet")]
    env = {**os.environ, "TAO_STATE_DIR": str(tmp_path), "LAST_JOB_TOKEN": ids[0]}
    for _run in range(2):   # the second listing answers from the cache
        done = run_script("tao_job_record.py", *listing, env=env)
        assert done.code == 0 and all(job in done.stdout for job in ids) and "<redacted>" not in done.stdout, done


@pytest.mark.parametrize("job_id, minted", [
    ("visual_changenet-train-3d363d", True), ("visual-changenet-train-eval-abcdef", True),
    ("job-job-0a1b2c", True),
    ("0123456789abcdef0123456789abcdef01234567", False),    # a 40-hex key: no dashes
    ("nvapi-AbCdEfGhIjKlMnOp-0a1b2c3", False), ("a-b-ABCDEF", False), ("a-b-0a1b2", False),
    ("hf_abcdefghijklmnopqrst", False), ("-a-b-0a1b2c", False), ("a.-b-0a1b2c", False),
])
def test_only_ids_of_the_minted_shape_are_exempt(monkeypatch, job_id, minted):
    monkeypatch.setattr(known_secrets.DEFAULT, "_minted", set())
    monkeypatch.setenv("MY_SERVICE_TOKEN", job_id)
    known_secrets.minted([job_id])
    assert (job_id in known_secrets.DEFAULT._minted) is minted
    assert (known_secrets.redact_text(f"x {job_id} y") == f"x {job_id} y") is minted


def test_a_value_inside_a_longer_single_quoted_word_is_found():
    value = "Sec'retValue123xyz"
    word = shlex.join(["--spec", f"/tmp/sp/{value}.yaml"])
    assert value not in word and known_secrets.find(word, {"MY_SERVICE_TOKEN": value})
    assert value.replace("'", "'\"'\"'") in word


def test_a_spec_path_holding_a_credential_is_refused_before_anything_is_sent():
    value = "Sec'retValue123xyz"
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse_in_argv(["--spec", f"/tmp/sp/{value}.yaml"], {"MY_SERVICE_TOKEN": value})
    assert err.value.code == "SECRET_IN_IDENTIFIER" and value not in err.value.message + err.value.fix


# -- the proof kept: unproven names, held values, identifiers from the environment -----------------
def test_unproven_names_are_withheld_and_reset_forgets_them(monkeypatch):
    monkeypatch.delenv("JOB_CFG", raising=False)
    assert known_secrets.unset_watched() == []
    known_secrets.unprove("JOB_CFG", "unset in this shell")
    known_secrets.unprove("JOB_CFG", "a second reason is not kept")
    known_secrets.unprove("*", "the job's sidecar is damaged")
    assert known_secrets.unproven() == {"JOB_CFG": "unset in this shell", "*": "the job's sidecar is damaged"}
    assert known_secrets.unset_watched() == ["*", "JOB_CFG"]
    known_secrets.reset()
    assert known_secrets.unproven() == {} and known_secrets.unset_watched() == []


def test_held_value_reads_the_process_then_the_observed_environment(monkeypatch):
    monkeypatch.setenv("HELD_A", "from-process")
    monkeypatch.setenv("HELD_B", "")
    known_secrets.observe_env({"HELD_B": "from-verb", "HELD_C": "only-verb"})
    assert known_secrets.held_value("HELD_A") == "from-process"
    assert known_secrets.held_value("HELD_B") == "from-verb"     # empty counts as unset
    assert known_secrets.held_value("HELD_C") == "only-verb"
    assert known_secrets.held_value("HELD_NONE") is None


def test_identifiers_from_the_environment_are_refused_when_they_hold_a_value():
    env = {"WANDB_API_KEY": "Zp4/Wq+Lm7Rt2Xy9", "S3_BUCKET_NAME": "bkt-Zp4/Wq+Lm7Rt2Xy9"}
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse_in_env_identifiers(env)
    assert err.value.code == "SECRET_IN_IDENTIFIER" and "S3_BUCKET_NAME" in err.value.message
    assert "WANDB_API_KEY" in err.value.message and "Zp4/Wq" not in err.value.message
    known_secrets.refuse_in_env_identifiers({**env, "S3_BUCKET_NAME": "my-bucket"})
    for name in ("AWS_ENDPOINT_URL", "TAO_RESULTS_ROOT", "AWS_REGION"):
        with pytest.raises(TaoBrevError):
            known_secrets.refuse_in_env_identifiers({**env, "S3_BUCKET_NAME": "b", name: "x%2FZp4/Wq+Lm7Rt2Xy9"})


def test_every_script_refuses_an_env_identifier_and_an_upload_exclude_holding_a_value():
    env = {"WANDB_API_KEY": "Zp4/Wq+Lm7Rt2Xy9"}
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse_in_argv(["--upload-exclude", "*Zp4/Wq+Lm7Rt2Xy9*"], env)
    assert err.value.details["argument"] == "--upload-exclude"
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse_in_argv(["--instance", "box"], {**env, "S3_BUCKET_NAME": "Zp4/Wq+Lm7Rt2Xy9"})
    assert err.value.details["argument"] == "S3_BUCKET_NAME"
    known_secrets.refuse_in_argv(["--upload-exclude", "*.tmp"], env)


def test_a_long_form_and_a_long_text_are_redacted_in_place():
    value = "Lq9/" + "xY7+" * 100
    out = known_secrets.redact_text("a " * 600 + value + " b", {"MY_API_KEY": value})
    assert value not in out and out.endswith("<redacted> b")


def test_an_env_identifier_is_not_refused_for_its_own_value():
    known_secrets.watch(["S3_BUCKET_NAME"])
    known_secrets.refuse_in_env_identifiers({"S3_BUCKET_NAME": "my-bucket-name-01"})


def test_long_forms_are_found_with_find_not_compiled(monkeypatch):
    """Forms longer than LONG_FORM stay out of the trie regex (a 64 KiB value compiled costs seconds):
    sub, search and finditer find them with str.find, leftmost, a shorter form inside a longer hit once."""
    long_a, long_b = "A" * 300 + "tail-a", "B" * 300
    pattern = forms.pattern_of(tuple(sorted([long_a, long_b, "shortform1"], key=lambda f: (-len(f), f))))
    assert isinstance(pattern, forms.Forms)
    text = f"x {long_b} y shortform1 {long_a} {long_a}"
    assert pattern.sub("<r>", text) == "x <r> y <r> <r> <r>"
    assert [(m.group()[:1], m.start()) for m in pattern.finditer(text)] == [
        ("B", 2), ("A", text.index(long_a)), ("A", text.rindex(long_a)), ("s", text.index("shortform1"))]
    assert pattern.search(text).start() == 2 and pattern.search("only shortform1").group() == "shortform1"
    assert pattern.search("nothing") is None
    only_long = forms.pattern_of((long_a,))
    assert only_long.sub("<r>", "no") == "no" and only_long.search("no") is None
    assert list(only_long.finditer(long_a + long_a)) and len(list(only_long.finditer(long_a + long_a))) == 2
    overlap = forms.pattern_of(("A" * 301, "A" * 300 + "Z"))
    assert [m.start() for m in overlap.finditer("A" * 301 + "Z")] == [0]
    assert known_secrets.find(f"l1\nv {long_a}", {"MY_API_KEY": long_a})[0][2] == 2


def test_a_registry_of_its_own_is_apart_from_the_process_one(monkeypatch):
    """values.Registry is an object: one passed explicitly knows what it was told, DEFAULT does not
    learn it, and a registry of its own does not learn what DEFAULT watches."""
    known_secrets.reset()
    monkeypatch.setenv("JOB_CFG_APART", "value-of-cfg-1234")
    own = known_secrets.Registry()
    own.watch(["JOB_CFG_APART"])
    assert known_secrets.find("a value-of-cfg-1234 b") == []
    assert known_secrets.find("a value-of-cfg-1234 b", registry=own) == [("JOB_CFG_APART", "verbatim", 1)]
    assert known_secrets.redact_text("x value-of-cfg-1234", registry=own) == "x <redacted>"
    assert known_secrets.redactor(registry=own)("value-of-cfg-1234") == "<redacted>"
    assert known_secrets.matcher(registry=own) is not None and known_secrets.matcher({}) is None
    assert known_secrets.find_parsed({"k": "value-of-cfg-1234"}, registry=own) == [("JOB_CFG_APART", "verbatim", "k")]
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse("value-of-cfg-1234", "the spec", registry=own)
    assert err.value.code == "SECRET_IN_COMMAND"
    known_secrets.refuse("value-of-cfg-1234", "the spec")   # DEFAULT does not watch the name
    try:
        known_secrets.watch(["JOB_CFG_APART"])
        assert known_secrets.find("value-of-cfg-1234") and own.unset_watched() == []
        assert known_secrets.Registry().values() == {v: n for v, n in known_secrets.values().items()
                                                       if n != "JOB_CFG_APART"}
    finally:
        known_secrets.reset()
