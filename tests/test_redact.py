"""tao_brev.secrets.redact (lint, rules, literal) and scripts/redact_secrets.py.

The invariant is asserted in every case: the secret value never appears in a
finding (text or JSON) nor in the redacted output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tao_brev.secrets import literal as literals, redact, rules
from tao_brev.secrets.lint import _overlap
from tao_brev.secrets.redact import Finding, is_secret_name, lint, redact_obj, redact_uri, redact_values

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "redact_secrets.py"

NGC = "nvapi-FAKEfake0123456789abcdef"
PW = "FAKEhunter2secret"
HF = "hf_FAKEfake0123456789abcdefgh"
GHP = "ghp_FAKEfake0123456789abcdefghij"
GH_PAT = "github_pat_FAKEfake0123456789abcdef"
AKIA = "AKIAFAKEFAKE01234567"
SLACK = "xoxb-FAKE-0123456789"
SK = "sk-FAKEfake0123456789abcdef"

# (id, text, expected [(kind, name)], secret). secret is None for look-alikes.
CASES = [
    # -- NAME=literal --------------------------------------------------------
    ("plain", f"NGC_KEY={NGC}", [("assignment", "NGC_KEY")], NGC),
    ("export", f"export HF_TOKEN={PW}", [("assignment", "HF_TOKEN")], PW),
    ("export-quoted", f'export BREV_API_TOKEN="{PW}"', [("assignment", "BREV_API_TOKEN")], PW),
    ("docker-e", f"docker run -e AWS_SECRET_ACCESS_KEY={PW} img", [("assignment", "AWS_SECRET_ACCESS_KEY")], PW),
    ("docker-env-single-quoted", f"docker run --env WANDB_API_KEY='{PW}' img", [("assignment", "WANDB_API_KEY")], PW),
    ("docker-env-equals", f"docker run --env=NGC_API_KEY={PW} img", [("assignment", "NGC_API_KEY")], PW),
    ("sbatch-export", f"sbatch --export=ALL,NGC_KEY={PW},FOO=1 job.sh", [("assignment", "NGC_KEY")], PW),
    ("lowercase-password", f"db_password={PW} ./run", [("assignment", "db_password")], PW),
    ("dotted-override", f"tao train -e spec.yaml train.wandb.api_key={PW}",
     [("assignment", "train.wandb.api_key")], PW),
    ("url-query-token", f"curl 'https://api.example.com/v1?access_token={PW}&page=2'",
     [("assignment", "access_token")], PW),
    ("credential-word", f"MY_CREDENTIAL={PW}", [("assignment", "MY_CREDENTIAL")], PW),
    ("comma-in-value", f"PASSWORD={PW},more next", [("assignment", "PASSWORD")], PW),
    ("default-in-assignment", f"NGC_KEY=${{NGC_KEY:-{PW}}}", [("assignment", "NGC_KEY")], PW),
    ("parameter-default", f"echo ${{HF_TOKEN:-{PW}}}", [("parameter-default", "HF_TOKEN")], PW),
    # -- flags ---------------------------------------------------------------
    ("flag-space", f"brev login --token {PW}", [("flag", "--token")], PW),
    ("flag-equals", f"tool --password={PW} run", [("flag", "--password")], PW),
    ("flag-api-key", f'ngc config set --api-key "{PW}"', [("flag", "--api-key")], PW),
    ("flag-json-array", f'"args": ["--token", "{PW}", "--verbose"]', [("flag", "--token")], PW),
    ("login-p", f"docker login nvcr.io -u '$oauthtoken' -p {PW}", [("login-password", "-p")], PW),
    ("login-p-attached", f"mysql login -p{PW}", [("login-password", "-p")], PW),
    ("auth-header", f'curl -H "Authorization: Bearer {PW}" https://api.ngc.nvidia.com',
     [("auth-header", "Authorization")], PW),
    # -- manifests and mappings ----------------------------------------------
    ("k8s-block", f"env:\n  - name: NGC_KEY\n    value: {PW}\n", [("manifest-env", "NGC_KEY")], PW),
    ("k8s-block-value-first", f"env:\n  - value: \"{PW}\"\n    name: HF_TOKEN\n", [("manifest-env", "HF_TOKEN")], PW),
    ("k8s-block-scalar", f"env:\n  - name: NGC_KEY\n    value: |\n      {PW}\n  - name: X\n    value: y\n",
     [("manifest-env", "NGC_KEY")], PW),
    ("k8s-flow", f"env:\n  - {{name: NGC_KEY, value: {PW}}}\n", [("manifest-env", "NGC_KEY")], PW),
    ("k8s-json-inline", f'"env": [{{"name": "HF_TOKEN", "value": "{PW}"}}]', [("manifest-env", "HF_TOKEN")], PW),
    ("k8s-json-pretty", f'[\n  {{\n    "name": "NGC_KEY",\n    "value": "{PW}"\n  }}\n]',
     [("manifest-env", "NGC_KEY")], PW),
    ("json-key", f'{{"user": "alice", "api_key": "{PW}"}}', [("mapping", "api_key")], PW),
    ("json-password", f'{{"password": "{PW}"}}', [("mapping", "password")], PW),
    ("yaml-key", f"stringData:\n  NGC_KEY: {PW}\n", [("mapping", "NGC_KEY")], PW),
    # -- URLs ----------------------------------------------------------------
    ("presigned", f"https://b.s3.amazonaws.com/k?X-Amz-Credential={PW}&X-Amz-Signature=FAKEsig0123&x=1",
     [("presigned-url", "X-Amz-Credential"), ("presigned-url", "X-Amz-Signature")], PW),
    ("presigned-session", f"https://b/k?X-Amz-Security-Token={PW}", [("presigned-url", "X-Amz-Security-Token")], PW),
    ("url-userinfo", f"git clone https://oauth2:{PW}@gitlab.example.com/x.git", [("url-password", "https")], PW),
    # -- token shapes --------------------------------------------------------
    ("shape-nvapi", f"the key is {NGC} ok", [("token-shape", "nvapi-")], NGC),
    ("shape-hf", f"login with {HF}", [("token-shape", "hf_")], HF),
    ("shape-ghp", f"GH={GHP}", [("token-shape", "ghp_")], GHP),
    ("shape-github-pat", f"remote {GH_PAT}", [("token-shape", "github_pat_")], GH_PAT),
    ("shape-akia", f"aws s3 ls --profile x # key {AKIA}", [("token-shape", "AKIA")], AKIA),
    ("aws-configure-set", f"aws configure set aws_access_key_id {AKIA}", [("flag", "aws_access_key_id")], AKIA),
    ("shape-slack", f"post {SLACK}", [("token-shape", "xoxb-")], SLACK),
    ("shape-sk", f"OPENAI={SK}", [("token-shape", "sk-")], SK),
    ("shape-in-path", f"/data/{NGC}/run", [("token-shape", "nvapi-")], NGC),
    ("pem-private-key", f"key: |\n  -----BEGIN RSA PRIVATE KEY-----\n  {PW}\n  -----END RSA PRIVATE KEY-----\n",
     [("private-key", "RSA PRIVATE KEY")], PW),
    # -- look-alikes that must pass --------------------------------------------
    ("ref-dollar", "export NGC_KEY=$NGC_KEY", [], None),
    ("ref-braces", "docker run -e HF_TOKEN=${HF_TOKEN} img", [], None),
    ("ref-quoted", 'docker run -e "NGC_KEY=$NGC_KEY" img', [], None),
    ("ref-single-quoted-remote", "brev exec gpu1 'docker run -e NGC_KEY=$NGC_KEY img'", [], None),
    ("passthrough-e", "docker run -e NGC_KEY -e HF_TOKEN --env-file /run/env img", [], None),
    ("password-stdin", "printf %s \"$NGC_KEY\" | docker login nvcr.io -u '$oauthtoken' --password-stdin", [], None),
    ("oauthtoken-user", "docker login nvcr.io -u '$oauthtoken'", [], None),
    ("flag-ref", 'brev login --token "$BREV_API_TOKEN"', [], None),
    ("flag-then-flag", "tool --token --verbose", [], None),
    ("empty-values", 'NGC_KEY= HF_TOKEN="" export BREV_API_TOKEN=\'\'', [], None),
    ("command-substitution", "NGC_KEY=$(cat /run/secrets/ngc)", [], None),
    ("empty-default", "echo ${NGC_KEY:-} ${HF_TOKEN:?export HF_TOKEN first}", [], None),
    ("default-is-ref", "echo ${NGC_KEY:-$NGC_API_KEY}", [], None),
    ("tokenizers", "TOKENIZERS_PARALLELISM=false python train.py max_new_tokens=5", [], None),
    ("llm-token-ids", "tao train model.pad_token_id=0 model.use_cls_token=true", [], None),
    ("port-map", "docker run -p 8080:80 -p 127.0.0.1:6006:6006/tcp img", [], None),
    ("port-map-login-line", "docker run -p 8080:80 --name login-app img", [], None),
    ("path-segment", "ls /data/token=v1/run s3://bucket/results/x", [], None),
    ("shared-credentials-file", "export AWS_SHARED_CREDENTIALS_FILE=/home/u/.aws/credentials", [], None),
    ("k8s-secret-key-ref", "env:\n  - name: NGC_KEY\n    valueFrom:\n      secretKeyRef: {name: ngc, key: NGC_KEY}\n",
     [], None),
    ("k8s-dependent-env", "env:\n  - name: HF_TOKEN\n    value: $(HF_TOKEN)\n", [], None),
    ("k8s-non-secret", "env:\n  - name: TOKENIZERS_PARALLELISM\n    value: \"false\"\n  - name: LOG\n    value: x\n",
     [], None),
    ("url-no-password", "https://user@host/x git@github.com:org/repo.git http://host:8080/x", [], None),
    ("placeholder", "NGC_KEY=<redacted> --token <redacted> \"password\": \"<redacted>\"", [], None),
    ("doc-placeholder", 'export NGC_KEY="<your NGC key>"', [], None),
    ("not-a-token-shape", "pip install sk-learn-intelex-2024-01-build; ls /data/task-abcdefghijklmnopqrstuvwxyz",
     [], None),
    ("comparison", "if [ $TOKEN == abc ]; then echo; fi", [], None),
    ("spec-yaml", "train:\n  num_epochs: 10\n  max_new_tokens: 5\nmodel:\n  name: visual_changenet\n", [], None),
]


def _ids(cases):
    return [c[0] for c in cases]


@pytest.mark.parametrize("case_id, text, expected, secret", CASES, ids=_ids(CASES))
def test_lint_table(case_id, text, expected, secret):
    findings = lint(text)
    assert [(f.kind, f.name) for f in findings] == expected
    out = redact.redact(text)
    if secret is None:
        assert out == text, "a look-alike must pass through unchanged"
        return
    shown = "\n".join(str(f) for f in findings) + json.dumps([f.to_json() for f in findings])
    assert secret not in shown
    assert secret not in out
    assert "<redacted>" in out


@pytest.mark.parametrize("case_id, text, expected, secret", CASES, ids=_ids(CASES))
def test_redact_is_idempotent_and_clean(case_id, text, expected, secret):
    out = redact.redact(text)
    assert redact.redact(out) == out
    assert lint(out) == []


def test_table_is_large_and_covers_every_kind():
    assert len(CASES) >= 40
    assert {kind for case in CASES for kind, _ in case[2]} == set(redact.KINDS)


def test_redact_keeps_names_and_quotes():
    assert redact.redact(f"export NGC_KEY={NGC}") == "export NGC_KEY=<redacted>"
    assert redact.redact(f'{{"password": "{PW}"}}') == '{"password": "<redacted>"}'
    assert redact.redact(f'["--token", "{PW}"]') == '["--token", "<redacted>"]'
    assert redact.redact(f"https://u:{PW}@h/x") == "https://u:<redacted>@h/x"


# -- findings ------------------------------------------------------------------

def test_finding_text_and_json():
    finding = lint(f"# setup\n\nNGC_KEY={NGC}\n")[0]
    assert finding == Finding("assignment", "NGC_KEY", 3)
    assert str(finding) == "line 3: NGC_KEY=<literal> (inline credential assignment)"
    assert finding.to_json() == {"kind": "assignment", "name": "NGC_KEY", "line": 3, "message": str(finding)}
    with pytest.raises(AttributeError):
        finding.line = 4  # frozen


def test_one_finding_per_value():
    # the assignment and the nvapi- shape cover the same value: reported once
    assert [(f.kind, f.name) for f in lint(f"NGC_KEY={NGC}")] == [("assignment", "NGC_KEY")]


@pytest.mark.parametrize("name, expected", [
    ("NGC_KEY", True), ("NGC_API_KEY", True), ("BREV_API_TOKEN", True), ("AWS_ACCESS_KEY_ID", True),
    ("AWS_SECRET_ACCESS_KEY", True), ("AWS_SESSION_TOKEN", True), ("HF_TOKEN", True), ("apiKey", True),
    ("db_passwd", True), ("token", True), ("GCP_CREDENTIAL", True),
    ("TOKENIZERS_PARALLELISM", False), ("max_new_tokens", False), ("oauthtoken", False),
    ("secretKeyRef", False), ("AWS_SHARED_CREDENTIALS_FILE", False), ("S3_BUCKET_NAME", False),
    ("AWS_DEFAULT_REGION", False), ("KEY", False),
])
def test_is_secret_name(name, expected):
    assert is_secret_name(name) is expected


def test_secret_env_names_are_all_secret_names():
    assert all(is_secret_name(name) for name in redact.SECRET_ENV_NAMES)


# -- continued lines -----------------------------------------------------------

def test_continued_lines_report_first_physical_line():
    text = (f"echo start\n"
            f"docker run -d \\\n"
            f"  --gpus all \\\n"
            f"  -e NGC_KEY={PW} \\\n"
            f"  img\n"
            f"echo --password={PW}\n")
    assert [(f.name, f.line) for f in lint(text)] == [("NGC_KEY", 2), ("--password", 6)]
    out = redact.redact(text)
    assert PW not in out
    assert out.count("\n") == text.count("\n"), "unchanged physical lines are kept"
    assert "  -e NGC_KEY=<redacted> \\\n  img\n" in out


def test_value_split_by_a_continuation_is_redacted_whole():
    text = "export HF_TOKEN=FAKEfirst\\\nFAKEsecond rest\n"
    assert [(f.name, f.line) for f in lint(text)] == [("HF_TOKEN", 1)]
    out = redact.redact(text)
    assert "FAKEfirst" not in out and "FAKEsecond" not in out
    assert out == "export HF_TOKEN=<redacted> rest\n"


def test_escaped_backslash_is_not_a_continuation():
    text = "echo a\\\\\nHF_TOKEN=FAKEvalue1\n"
    assert [(f.name, f.line) for f in lint(text)] == [("HF_TOKEN", 2)]


def test_crlf_lines():
    text = f"docker run \\\r\n  -e NGC_KEY={PW} img\r\n"
    assert [(f.name, f.line) for f in lint(text)] == [("NGC_KEY", 1)]
    assert PW not in redact.redact(text)


# -- redact_values -------------------------------------------------------------

AWS_SECRET = "FAKE/aws+secret\"key0"
FAKE_ENV = {
    "NGC_KEY": NGC,
    "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
    "MY_DB_PASSWORD": "FAKEpw1234",
    "HF_TOKEN": "short",              # below MIN_VALUE_LENGTH: ignored
    "S3_BUCKET_NAME": "my-bucket-1",  # not a credential: kept
    "PATH": "/usr/bin:/bin",
}


def test_redact_values_replaces_env_values_anywhere():
    text = f"pulled with {NGC}; pw=FAKEpw1234 in s3://my-bucket-1/x with short PATH /usr/bin:/bin"
    out = redact_values(text, FAKE_ENV)
    assert NGC not in out and "FAKEpw1234" not in out
    assert "s3://my-bucket-1/x" in out and "short" in out and "/usr/bin:/bin" in out


def test_redact_values_catches_quoted_and_escaped_forms():
    url_form = "FAKE%2Faws%2Bsecret%22key0"
    json_form = json.dumps({"k": AWS_SECRET})
    out = redact_values(f"raw {AWS_SECRET} url {url_form} json {json_form}", FAKE_ENV)
    assert "aws+secret" not in out and "aws%2Bsecret" not in out and "aws+secret\\\"" not in out
    assert out.count("<redacted>") == 3


def test_redact_values_defaults_to_os_environ(monkeypatch):
    monkeypatch.setenv("NGC_KEY", "FAKEenvvalue1")
    assert redact_values("x FAKEenvvalue1 y") == "x <redacted> y"
    monkeypatch.setenv("NGC_KEY", "OTHERsnapshot2")  # a new snapshot, not a stale cache
    assert redact_values("FAKEenvvalue1 OTHERsnapshot2") == "FAKEenvvalue1 <redacted>"
    # eight characters of the value held make the line the value's (secrets.withhold.PART)
    assert redact_values("FAKEenvvalue1 OTHERsna").startswith("[tao-brev: withheld: this line held the value of NGC_KEY")


def test_redact_values_empty_and_no_secrets():
    assert redact_values("", FAKE_ENV) == ""
    assert redact_values("nothing here", {"PATH": "/bin"}) == "nothing here"


def test_redact_values_longest_value_first():
    env = {"NGC_KEY": "FAKEabcdef", "NGC_API_KEY": "FAKEabcdef-longer"}
    assert redact_values("FAKEabcdef-longer", env) == "<redacted>"


# -- redact_obj and redact_uri -------------------------------------------------

def test_redact_obj_keeps_paths_and_structure():
    obj = {
        "results_dir": "/data/token=v1/run",
        "s3": "s3://bucket/results/x",
        "image": "nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt",
        "id": "visual_changenet-train-1a2b3c",
        "count": 3, "ok": True, "none": None, "ratio": 0.5,
        "nested": {"list": ["~/runs/token=abc", "./x", {"HF_TOKEN": "$HF_TOKEN"}]},
    }
    assert redact_obj(obj, {}) == obj


def test_redact_obj_redacts_credentials_in_values_and_keys():
    obj = {
        "message": f"docker run -e NGC_KEY={PW} img",
        "url": f"https://u:{PW}@host/p?X-Amz-Signature=FAKEsig0123",
        "logs": [f"using {HF}", "epoch 1"],
        "path": f"/data/{NGC}/x",
        "env_echo": "value FAKEpw1234 leaked",
        NGC: "keys are redacted like values (a KPI named after one)",
        3: "a key that is no string stays",
    }
    out = redact_obj(obj, FAKE_ENV)
    text = json.dumps(out)
    for secret in (PW, HF, "FAKEsig0123", "FAKEpw1234", NGC):
        assert secret not in text
    assert set(out) == (set(obj) - {NGC}) | {"<redacted>"}
    assert out[3] == "a key that is no string stays"
    assert out["message"] == "docker run -e NGC_KEY=<redacted> img"
    assert out["logs"][1] == "epoch 1"
    assert out["path"] == "/data/<redacted>/x"


def test_redact_uri_is_gentle():
    assert redact_uri("/data/token=v1/run") == "/data/token=v1/run"
    assert redact_uri("s3://bucket/results/x?password=abc") == "s3://bucket/results/x?password=abc"
    assert redact_uri(f"https://u:{PW}@h/k?X-Amz-Signature=FAKEsig0123&a=1") == \
        "https://u:<redacted>@h/k?X-Amz-Signature=<redacted>&a=1"
    assert redact_uri(f"/models/{NGC}") == "/models/<redacted>"


# -- the CLI -------------------------------------------------------------------

def _cli(*args, stdin="", env_extra=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if not is_secret_name(k)}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, capture_output=True,
                          text=True, env=env, cwd=cwd or "/", timeout=60)


def test_cli_lint_file_with_findings(tmp_path):
    path = tmp_path / "cmd.sh"
    path.write_text(f"docker run \\\n  -e NGC_KEY={NGC} img\nbrev login --token {PW}\n")
    result = _cli("lint", str(path))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [f"{path}:1: NGC_KEY (assignment)", f"{path}:3: --token (flag)"]
    for secret in (NGC, PW):
        assert secret not in result.stdout + result.stderr


def test_cli_lint_clean_prints_nothing(tmp_path):
    path = tmp_path / "ok.sh"
    path.write_text("docker run -e NGC_KEY -e HF_TOKEN img\n")
    result = _cli("lint", str(path))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_cli_lint_stdin_and_dash():
    for args in (("lint",), ("lint", "-")):
        result = _cli(*args, stdin=f"export HF_TOKEN={PW}\n")
        assert result.returncode == 1
        assert result.stdout == "<stdin>:1: HF_TOKEN (assignment)\n"
        assert PW not in result.stdout + result.stderr


def test_cli_lint_several_files(tmp_path):
    clean, dirty = tmp_path / "a.sh", tmp_path / "b.yaml"
    clean.write_text("echo ok\n")
    dirty.write_text(f"env:\n  - name: NGC_KEY\n    value: {PW}\n")
    result = _cli("lint", str(clean), str(dirty))
    assert result.returncode == 1
    assert result.stdout == f"{dirty}:3: NGC_KEY (manifest-env)\n"


def test_cli_redact(tmp_path):
    path = tmp_path / "cmd.sh"
    path.write_text(f"export NGC_KEY={NGC}\necho FAKEenvonly99\n")
    result = _cli("redact", str(path), env_extra={"WANDB_API_KEY": "FAKEenvonly99"})
    assert result.returncode == 0
    assert result.stdout == "export NGC_KEY=<redacted>\necho <redacted>\n"
    assert NGC not in result.stdout + result.stderr


def test_cli_redact_stdin():
    result = _cli("redact", stdin=f'{{"password": "{PW}"}}')
    assert (result.returncode, result.stdout) == (0, '{"password": "<redacted>"}')


def test_cli_bad_input(tmp_path):
    assert _cli("lint", str(tmp_path / "missing.sh")).returncode == 2
    assert _cli("lint", str(tmp_path)).returncode == 2
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\xff\xfe\x00NGC_KEY=x")
    assert _cli("lint", str(binary)).returncode == 2
    assert _cli("scan").returncode == 2


def test_cli_help_documents_exit_codes_and_limits():
    result = _cli("--help")
    assert result.returncode == 0
    for words in ("lint", "redact", "Exit codes", "0 clean", "1 lint found", "2 bad input", "Not caught"):
        assert words in result.stdout


def test_tail_redacts_before_it_trims():
    """A credential cut in half by the trim would no longer be recognised."""
    secret = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    text = "x" * 50 + f" token={secret} " + "y" * 5
    out = redact.tail(text, 20)
    assert out.startswith("...") and len(out) <= 23
    assert not any(secret[i:i + 8] in out for i in range(len(secret) - 8))
    assert redact.tail("", 10) == "(no output)"
    assert redact.tail("pw is s3cr3tvalue!", 100, "s3cr3tvalue!") == "pw is <redacted>"


# -- the plain-text fast path: what no rule can find anything in is returned at once ---------------
# Every rule needs, around a value, a character outside the plain class (blank, =, quote, $, {,
# @, ?, &, \, newline...) - except the token shapes, which the fast path searches for itself.
PLAIN_WORDS = ["login", "mysql", "sshpass", "curl", "aws", "configure", "set", "-p", "-u", "--user", "--token",
               "name:", "value:", "Authorization:Bearer", "X-Amz-Signature", "Signature", "password",
               "NGC_KEY", "export", "secret", "-----BEGIN", "PRIVATE", "KEY-----", "http://u:p", "s3://b/k",
               "~/tao-results/job-1", "2026-11-30T13:51:14+00:00", "nvapi-", "hf_", "AKIA", "sk-", "task-"]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(PLAIN_WORDS) | st.text(alphabet="Aa0_.~/:+-zQ", max_size=24), max_size=8),
       st.sampled_from(["", "/", ":", "-", "_", ".", " ", "="]))
def test_plain_text_is_exactly_what_no_rule_finds_anything_in(words, joiner):
    text = joiner.join(words)
    if redact._plain(text):
        assert rules._scan(text, rules._TEXT_RULES) == [] and rules._scan(text, rules._URI_RULES) == []
        assert redact.redact(text) is text and redact.redact_uri(text) is text


def test_a_token_shape_or_any_other_character_leaves_the_fast_path():
    assert redact._plain("~/tao-results/visual_changenet-train-3d363d") and redact._plain("")
    for text in ("x/nvapi-" + "A" * 20, "AKIA" + "B" * 16, "a b", "a=b", "a@b", "a\nb", "a'b", 'a"b', "a$b", "a{b",
                 "a?b", "a&b", "a\\b", "a#b", "a,b", "a<b", "a\tb", "é"):
        assert not redact._plain(text), text


def test_the_memo_answers_as_the_scan_does():
    texts = ["export NGC_KEY=nvapi-" + "Q" * 40, "docker login -u x -p hunter2hunter2",
             "plain words only", "https://user:pa55word99@host/x?X-Amz-Signature=abc123def456"]
    for text in texts * 2:
        assert redact.redact(text) == redact._replace(text, rules._scan(text, rules._TEXT_RULES))
        assert redact.redact_uri(text) == redact._replace(text, rules._scan(text, rules._URI_RULES))


def test_one_obj_redactor_for_many_objects_answers_as_redact_obj(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "k" * 34)
    objects = [{"message": "export NGC_KEY=nvapi-" + "Q" * 40, "results_dir": "/data/token=v1/run",
                "log": "value hf_" + "k" * 34, "n": [1, None, True, 2.5, ("x", "a b")]},
               {"message": "export NGC_KEY=nvapi-" + "Q" * 40, "id": "visual_changenet-train-1a2b3c"},
               "s3://user:pa55word99x@host/x", ["docker login -u x -p hunter2hunter2"]] * 2
    redacted = redact.obj_redactor()
    assert [redacted(o) for o in objects] == [redact_obj(o) for o in objects]
    assert "k" * 34 not in json.dumps([redacted(o) for o in objects])


def test_an_obj_redactor_writes_the_json_text_of_what_it_answers(monkeypatch):
    """json_text (redact and encode in one walk, each distinct string once) is the text of the
    redacted object at every depth; a known value with a quote, a backslash or non-ASCII letters
    is gone in every form, the JSON-escaped one included; a small memo changes nothing."""
    from test_json_out import at_depth

    secret = 'k\\"y-\u00e9t\u00e9-' + "Z" * 12
    monkeypatch.setenv("WANDB_API_KEY", secret)
    monkeypatch.setattr(redact.ObjRedactor, "_MEMO_MAX", 3)
    objects = [{"message": "export NGC_KEY=nvapi-" + "Q" * 40, "results_dir": "/data/token=v1/run",
                "log": f"value {secret} end", "escaped": json.dumps(secret), "n": [1, None, True, 2.5, ("x", "a b")],
                "empty": [{}, []], 3: "int key", "k" + secret: "a key is redacted"},
               {"id": "visual_changenet-train-1a2b3c", "transitions": [{"state": "COMPLETE", "message": secret}]},
               "s3://user:pa55word99x@host/x", ["docker login -u x -p hunter2hunter2"], secret, 7] * 3
    redacted = redact.obj_redactor()
    for level in (0, 2):
        texts = [redacted.json_text(o, level) for o in objects]
        assert texts == [at_depth(redact_obj(o), level) for o in objects]
    whole = "".join(texts)
    assert json.dumps("k" + secret)[1:-1] not in whole
    assert [form for form in (secret, json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1],
                              json.dumps(json.dumps(secret))[1:-1]) if form in whole] == []
    assert whole.count("<redacted>") >= 15


# --- the YAML scalar after a key, touching findings, ${VAR:?message} ---------------------------

@pytest.mark.parametrize("line, redacted", [
    # a quoted value runs to its closing quote, whatever it holds (` #` is not a comment inside quotes)
    ('password: "ab #cdefgh123"', 'password: "<redacted>"'),
    ("password: 'ab #cdefgh123'", "password: '<redacted>'"),
    ('password: "ab #cdefgh123" # note', 'password: "<redacted>" # note'),
    ('password: "ab #cdefgh123",', 'password: "<redacted>",'),
    ('password: "ab #cdefgh123",# note', 'password: "<redacted>",# note'),
    ('password: "ab #cdefgh123" , # note', 'password: "<redacted>" , # note'),
    # anything else after the closing quote: the value is plain text up to ` #`, quotes and all
    ('password: "abcdefgh123", more text', "password: <redacted>"),
    ('password: "abcdefgh123" more', "password: <redacted>"),
    # plain values: up to ` #`, trailing blanks and one comma dropped, leading letters kept
    ("password: XXsecretvalue1", "password: <redacted>"),
    ("password: Xsecretvalue1 # note", "password: <redacted> # note"),
    ("password: abcdefgh123 ,", "password: <redacted> ,"),
    ("password: abc#defgh123", "password: <redacted>"),
    ("password:\tabcdefgh123", "password:\t<redacted>"),
    ("password:   abcdefgh123", "password:   <redacted>"),
    # nothing, a comment or a flow collection after the key: no scalar
    ("password:   # abcdefgh123", "password:   # abcdefgh123"),
    ("password: ,abcdefgh123", "password: ,abcdefgh123"),
    ("password: [abcdefgh123]", "password: [abcdefgh123]"),
])
def test_the_scalar_after_a_credential_key(line, redacted):
    assert redact.redact(line) == redacted
    assert len(lint(line)) == (line != redacted)


@pytest.mark.parametrize("entry", [
    '- name: NGC_KEY\n  value: "ab #cdefgh123"\n',
    '- name: NGC_KEY\n  value: XXsecretvalue1\n',
    '- name: NGC_KEY\n  value: "abcdefgh123", more text\n',
    '- name: "NGC_KEY"\n  value: Xsecretvalue1 # note\n',
    "- name: 'NGC_KEY'\n  value:    abcdefgh123\n",
    '- value: "ab #cdefgh123"\n  name: NGC_KEY\n',
])
def test_a_manifest_value_is_read_as_the_mapping_rule_reads_it(entry):
    out = redact.redact(entry)
    assert "cdefgh123" not in out and "secretvalue1" not in out, out
    assert [f.kind for f in lint(entry)] == ["manifest-env"]


def test_a_manifest_name_is_reported_unquoted_only_when_wholly_quoted():
    def names(name):
        return [f.name for f in lint("- name: %s\n  value: abcdefgh123\n" % name)]
    assert names('"NGC_KEY"') == names("'NGC_KEY'") == names("NGC_KEY") == ["NGC_KEY"]
    assert names('"NGC_KEY') == ['"NGC_KEY'] and names("'NGC_KEY\"") == ["'NGC_KEY\""]
    assert names('XNGC_KEYX') == [] and names('""') == [] and names("''") == []


def test_findings_that_touch_are_two_findings_and_one_placeholder():
    # the mapping's value is the PEM header; the private key's value starts where the header ends
    text = "private_key: -----BEGIN PRIVATE KEY-----\nMIIabcdefghijklmnop\n-----END PRIVATE KEY-----\n"
    assert [(f.kind, f.line) for f in lint(text)] == [("mapping", 1), ("private-key", 1)]
    assert redact.redact(text) == "private_key: <redacted>-----END PRIVATE KEY-----\n"
    assert redact._replace("abcdef", [rules._Hit("k", "", 1, 1, 3), rules._Hit("k", "", 1, 3, 5)]) == "a<redacted>f"
    assert redact._replace("abcdef", [rules._Hit("k", "", 1, 1, 3), rules._Hit("k", "", 1, 4, 5)]) == \
        "a<redacted>d<redacted>f"


@pytest.mark.parametrize("value, literal", [
    ("${NGC_KEY:?set NGC_KEY to your key first}", False),   # ? : the error message, never a value
    ("${NGC_KEY?set NGC_KEY to your key first}", False),
    ("${NGC_KEY:-abcdefgh123}", True), ("${NGC_KEY-abcdefgh123}", True),
    ("${NGC_KEY:=abcdefgh123}", True), ("${NGC_KEY:+abcdefgh123}", True), ("${NGC_KEY+abcdefgh123}", True),
])
def test_a_parameter_default_is_a_value_and_an_error_message_is_not(value, literal):
    assert literals._is_literal(value) is literal
    assert bool(lint("NGC_KEY=%s" % value)) is literal


def test_the_gentle_mode_replaces_what_it_promises_and_nothing_else():
    long_dir = "/data/" + "d" * 1100 + "/token=v1/run"
    for path in ("/data/token=v1/run", long_dir, "s3://bucket/password=abcdefgh123/x"):
        assert redact_uri(path) == path
    for path in ("s3://user:pa55word99x@host/x", "/data/" + "d" * 1100 + "/nvapi-" + "Q" * 30,
                 "https://h/x?X-Amz-Signature=abc123def456", "/k/-----BEGIN PRIVATE KEY-----MIIabcdefgh123"):
        assert "<redacted>" in redact_uri(path), path
        assert redact_uri(path) == redact._replace(path, rules._scan(path, rules._URI_RULES))


@pytest.mark.parametrize("line, found", [
    ('NGC_KEY=settings.v("ngc")', False),     # code: a call whose name ends in a letter or digit
    ('NGC_KEY=load_key2("ngc")', False),
    ('NGC_KEY=abcdefgh12-("x")', True),       # not a call: the word ends in a dash
    ('NGC_KEY=abcdefgh12 ("x")', True),
    ("NGC_KEY=ABCDEFGHIJ", True),             # upper-case letters only are letters too
    ("password: <redacted>abcd", False),      # what a placeholder leaves is too short
    ("password: <your key>abcdefgh", True),
    ("password: [PAD]<|im_end|></s>", False),
    # what a flag takes as its value
    ('args: ["--token", $TOKEN]', False),               # the array form takes a quoted string only
    ('args: ["--token", "abcdefgh123"]', True),
    ('train --token "--verbose-mode"', False),           # another flag, quoted, is not the value
    ("train --token --verbose-mode", False),
    ("train --token X-abcdefgh123", True),               # a dash later in the value is a value
    ("train --token 'X-abcdefgh123'", True),
    # -p counts after its command word only
    ("tool -p abcdefgh123; docker login -u x", False),
    ("docker login -u x -p abcdefgh123", True),
    ("tool -pabcdefgh123 && mysql -u root", False),
    ("mysql -u root -pabcdefgh123", True),
    ('mysql -u root -p"$MYSQL_PWD"', False),
    ('sshpass -p "$SSHPASS" ssh host', False),
    ("sshpass -p abcdefgh123 ssh host", True),
])
def test_what_an_assignment_a_mapping_or_a_flag_takes_as_its_value(line, found):
    assert bool(lint(line)) is found
    assert (redact.redact(line) != line) is found


@pytest.mark.parametrize("line, redacted", [
    ("curl -u user:abcdefgh123 https://h", "curl -u user:<redacted> https://h"),
    ('curl -u "user:abcdefgh123" https://h', 'curl -u "user:<redacted>" https://h'),
    ("curl --user=user:abcd:efgh1234 https://h", "curl --user=user:<redacted> https://h"),
    ("curl -u :abcdefgh123 https://h", "curl -u :<redacted> https://h"),
    ("curl -u user https://h:8443/x", "curl -u user https://h:8443/x"),   # no password: curl prompts
    ("tool -u x:abcdefgh123; curl https://h", "tool -u x:abcdefgh123; curl https://h"),
    ("aws configure set default.aws_secret_access_key abcdefgh123",
     "aws configure set default.aws_secret_access_key <redacted>"),
    ("aws configure set --profile p aws_session_token abcdefgh123",
     "aws configure set --profile p aws_session_token <redacted>"),
    ("aws configure set default.region us-east-1-abcdefgh", "aws configure set default.region us-east-1-abcdefgh"),
    ("env: {name: NGC_KEY, value: abcdefgh123 }", "env: {name: NGC_KEY, value: <redacted> }"),
    ("auth: {password: abcdefgh123 , user: x}", "auth: {password: <redacted> , user: x}"),
])
def test_where_a_value_starts_and_ends(line, redacted):
    assert redact.redact(line) == redacted
    assert bool(lint(line)) is (line != redacted)


def test_a_private_key_is_reported_on_the_line_it_starts():
    text = "a: 1\nb: 2\n-----BEGIN RSA PRIVATE KEY-----\nMIIabcdefghijklmnop\n-----END RSA PRIVATE KEY-----\n"
    assert [(f.kind, f.name, f.line) for f in lint(text)] == [("private-key", "RSA PRIVATE KEY", 3)]


@pytest.mark.parametrize("text", [
    # a block scalar's lines are those indented past its key; the next key at that column ends it
    "- value: |\n    abcdefgh123\n  name: NGC_KEY\n",
    "env:\n  - value: >-\n      abcdefgh123\n    name: NGC_KEY\n",
    # a comment or a blank line, at any column, neither ends nor starts an entry
    "- name: NGC_KEY\n# a comment\n  value: abcdefgh123\n",
    "- name: NGC_KEY\n\n  value: abcdefgh123\n",
    "-   name: NGC_KEY\n    # the key\n    value: abcdefgh123\n",
])
def test_a_manifest_entry_across_blocks_comments_and_blank_lines(text):
    assert "abcdefgh123" not in redact.redact(text)
    assert [(f.kind, f.name) for f in lint(text)] == [("manifest-env", "NGC_KEY")]


def test_a_block_value_ends_at_its_key_column():
    text = "- value: |\n    abcdefgh123\n  name: NGC_KEY\n- name: OTHER\n  value: plainvalue99\n"
    assert redact.redact(text) == "- value: |\n    <redacted>\n  name: NGC_KEY\n- name: OTHER\n  value: plainvalue99\n"
    assert [f.line for f in lint(text)] == [1]


@pytest.mark.parametrize("text, redacted, line", [
    ("export NGC_KEY=abcd\\\nefgh1234 && run", "export NGC_KEY=<redacted> && run", 1),     # one backslash joins
    ("x\nexport NGC_KEY=abcd\\\\\nefgh1234", "x\nexport NGC_KEY=abcd\\\\\nefgh1234", None),  # two: a literal one
    ("export NGC_KEY=abcdefgh\\\\\\\nijkl", "export NGC_KEY=<redacted>", 1),                # three: joins
    ("a\r\nexport NGC_KEY=abcdefgh123\r\nb", "a\r\nexport NGC_KEY=<redacted>\r\nb", 2),
])
def test_backslash_continued_lines_are_one_line(text, redacted, line):
    assert redact.redact(text) == redacted
    assert [f.line for f in lint(text)] == ([line] if line else [])


def test_a_backslash_at_the_end_of_the_text_is_kept():
    assert redact.redact("export NGC_KEY=abcdefgh123\\") == "export NGC_KEY=<redacted>"
    assert [f.line for f in lint("x\nexport NGC_KEY=abcdefgh123\\")] == [2]
    assert redact.redact("a \\\nexport NGC_KEY=abcdefgh123 \\") == "a \\\nexport NGC_KEY=<redacted> \\"


@pytest.mark.parametrize("url, redacted, names", [
    ("https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKID&Signature=abcdefgh123%3D&Expires=1",
     "https://b.s3.amazonaws.com/k?AWSAccessKeyId=AKID&Signature=<redacted>&Expires=1", ["Signature"]),
    ("https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=abcdefgh123%2B&se=x",
     "https://a.blob.core.windows.net/c/b?sv=2022-11-02&sig=<redacted>&se=x", ["sig"]),
    ("https://h/k?x-amz-security-token=abcdefgh123&a=1", "https://h/k?x-amz-security-token=<redacted>&a=1",
     ["x-amz-security-token"]),
    ("https://h/k?mysig=abcdefgh123", "https://h/k?mysig=abcdefgh123", []),   # a parameter ending in sig
    # a token as the URL user: 20+ characters, letters and digits both
    ("https://abcdefghij0123456789@github.com/o/r.git", "https://<redacted>@github.com/o/r.git", ["https"]),
    ("https://abc_defghij-0123456789@h/x", "https://<redacted>@h/x", ["https"]),
    ("https://abcdefghijklmnopqrstuvwxyz@h/x", "https://abcdefghijklmnopqrstuvwxyz@h/x", []),
    ("https://01234567890123456789012@h/x", "https://01234567890123456789012@h/x", []),
    ("https://abcdefghij012345678@h/x", "https://abcdefghij012345678@h/x", []),         # 19 characters
])
def test_presigned_queries_and_token_users(url, redacted, names):
    assert redact_uri(url) == redacted and redact.redact(url) == redacted
    assert [f.name for f in lint(url)] == names


@pytest.mark.parametrize("thing", [None, 123, 1.5, b"NGC_KEY=abcdefgh123", ["NGC_KEY=abcdefgh123"], True])
def test_anything_but_a_string_is_linted_as_empty_and_kept_as_it_is(thing):
    assert lint(thing) == [] and redact.redact(thing) is thing and redact_uri(thing) is thing


def test_every_token_shape_finding_is_named_by_its_prefix():
    shapes = {"nvapi-": "nvapi-" + "a" * 20, "hf_": "hf_" + "a" * 20, "ghs_": "ghs_" + "a" * 20,
              "github_pat_": "github_pat_" + "a" * 20, "glpat-": "glpat-" + "a" * 20, "npm_": "npm_" + "a" * 30,
              "pypi-": "pypi-" + "a" * 40, "ASIA": "ASIA" + "A" * 16, "AIza": "AIza" + "a" * 35,
              "xoxp-": "xoxp-" + "a" * 10, "rk_live_": "rk_live_" + "a" * 20, "sk-": "sk-ant-" + "a" * 20}
    for prefix, token in shapes.items():
        assert [(f.kind, f.name) for f in lint("x " + token + " y")] == [("token-shape", prefix)], prefix


def test_a_user_flag_without_a_value_does_not_end_the_scan():
    line = "curl -u | curl -u x:abcdefgh123 https://h"
    assert redact.redact(line) == "curl -u | curl -u x:<redacted> https://h" and len(lint(line)) == 1


def test_spans_overlap_when_they_share_a_character():
    def hit(start, end):
        return rules._Hit("k", "", 1, start, end)
    for a, b, shared in [((1, 3), (3, 5), False), ((3, 5), (1, 3), False), ((1, 4), (3, 5), True),
                         ((3, 5), (1, 4), True), ((1, 9), (3, 5), True), ((3, 5), (1, 9), True),
                         ((1, 2), (4, 5), False), ((2, 3), (2, 3), True)]:
        assert _overlap(hit(*a), hit(*b)) is shared, (a, b)


@pytest.mark.parametrize("text, lines", [
    ("NGC_KEY= ; HF_TOKEN=abcdefgh123", [1]),                 # a name without a value does not end the scan
    ("export A=1 \\\nNGC_KEY=abcdefgh123", [1]),             # the blank before the backslash stays
    ("\n-----BEGIN PRIVATE KEY-----\nMIIabcdefghijklmnop\n-----END PRIVATE KEY-----", [2]),
    ("- name: NGC_KEY\n  other: x\n  value: abcdefgh123\n", [3]),   # another key at the entry's column
])
def test_scans_go_on_past_what_they_skip(text, lines):
    assert [f.line for f in lint(text)] == lines
    assert "abcdefgh123" not in redact.redact(text) and "MIIabc" not in redact.redact(text)


def test_json_text_starts_at_the_outermost_level_unless_asked():
    from test_json_out import at_depth

    obj = {"a": [1, {"b": "x"}], "message": "export NGC_KEY=abcdefgh123"}
    redacted = redact.obj_redactor()
    assert redacted.json_text(obj) == json.dumps(redact_obj(obj), indent=2) == at_depth(redact_obj(obj), 0)
    assert redacted.json_text(obj).startswith('{\n  "a": [\n    1,') and "<redacted>" in redacted.json_text(obj)
    assert redacted.json_text(obj, 1) == at_depth(redact_obj(obj), 1) != redacted.json_text(obj)


def test_a_token_user_in_capitals_is_a_token_user():
    assert redact_uri("https://ABCDEFGHIJ0123456789@h/x") == "https://<redacted>@h/x"


@pytest.mark.parametrize("name, secret", [
    ("API_KEY_PROD", True), ("API_KEY_PROD_FILE", False), ("SECRET_KEY_BASE_PATH", False),
    ("NGC_KEY_2_DIR", False), ("AWS_ACCESS_KEY_ID_OLD", True), ("AWS_ACCESS_KEY_ID_OLD_REF", False),
])
def test_every_word_after_the_credential_word_must_name_the_value(name, secret):
    assert is_secret_name(name) is secret


@pytest.mark.parametrize("text", [
    '{\n  "password": "abcdefgh123",\n  "user": "x"\n}',
    '{\n  "auth": "dXNlcjpwYXNzd29yZDEyMw=="\n}',
    '{\n  "Credentials": {\n    "SecretAccessKey": "abcdefgh123/XYZ",\n    "Expiration": "2026"\n  }\n}',
])
def test_a_quoted_key_on_a_line_of_its_own(text):
    out = redact.redact(text)
    assert "abcdefgh123" not in out and "dXNlcjpw" not in out and out.count("<redacted>") == 1
    assert [f.kind for f in lint(text)] == ["mapping"]
