"""A table-driven corpus for the secret lint and the value guard.

Each line of CORPUS is one case, ``TAG | expectation | text``:

* ``LEAK | kind name | text``: the lint reports exactly one finding of that kind
  and name; the redacted text no longer holds the secret ``{S}`` and lints clean.
* ``PASS | - | text``: ordinary text (ML configuration, commands, logs): no
  finding, and ``redact`` returns it unchanged.
* ``CRASH | - | text``: shapes that once crashed or could (flow collections
  after credential keys, unbalanced quotes, stray braces): never raise, and
  ``redact`` output lints clean.

``{S}`` is a shapeless secret (no known prefix), ``\\n`` a newline. ENCODINGS
checks the value guard: a known value, in each encoding a job or a tool may
print it, is found (outbound) and redacted (inbound), and its name - never the
value - is reported.
"""

from __future__ import annotations

import base64
import html
import json
import shlex
from urllib.parse import quote, quote_plus

import pytest

from tao_brev.secrets import guard as known_secrets, redact
from tao_brev.errors import TaoBrevError

S = "Zq9TkW4mLp7RvX2cN8"

CORPUS = r"""
# -- leaks: assignments, exports, overrides ----------------------------------------------------------
LEAK | assignment WANDB_API_KEY | WANDB_API_KEY={S} python train.py
LEAK | assignment HF_TOKEN | export HF_TOKEN='{S}'
LEAK | assignment KAGGLE_KEY | KAGGLE_KEY={S}
LEAK | assignment OPENAI_API_KEY | env OPENAI_API_KEY="{S}" ./run.sh
LEAK | assignment AZURE_STORAGE_CONNECTION_STRING | AZURE_STORAGE_CONNECTION_STRING={S}
LEAK | assignment PGPASSWORD | PGPASSWORD={S} psql -h db -U app
LEAK | assignment train.wandb.api_key | tao train -e spec.yaml train.wandb.api_key={S}
LEAK | assignment trainer.logger.api_token | python main.py +trainer.logger.api_token={S}
LEAK | assignment exp_manager.wandb_logger_kwargs.api_key | exp_manager.wandb_logger_kwargs.api_key={S}
LEAK | assignment authToken | authToken={S}
LEAK | assignment clientSecret | --set clientSecret={S}
LEAK | assignment db.password | db.password={S}
LEAK | assignment AWS_SESSION_TOKEN | docker run -e AWS_SESSION_TOKEN={S} img
LEAK | assignment SECRET_KEY_BASE | SECRET_KEY_BASE={S} rails s
LEAK | assignment API_KEY_PROD | API_KEY_PROD={S}
LEAK | assignment access_token | curl "https://api.example.com/v1/items?access_token={S}&page=2"
LEAK | assignment _authToken | //registry.npmjs.org/:_authToken={S}
LEAK | assignment MY_PASSWORD | sbatch --export=ALL,MY_PASSWORD={S},N=1 job.sh
LEAK | parameter-default NGC_API_KEY | echo ${NGC_API_KEY:-{S}}
LEAK | parameter-default DB_PASSWD | psql "${DB_PASSWD:={S}}"
# -- leaks: flags and logins ---------------------------------------------------------------------------
LEAK | flag --password | mytool --password {S}
LEAK | flag --token | hub --token={S} push
LEAK | flag --api-key | ngc config set --api-key "{S}"
LEAK | flag --secret | vault write --secret {S}
LEAK | flag --secret-key | minio-client --access-key admin --secret-key {S}
LEAK | flag --client-secret | az login --service-principal -u app --client-secret {S}
LEAK | flag --access-token | gh --access-token {S}
LEAK | flag --auth-token | ngrok --auth-token {S}
LEAK | flag --token | "args": ["--token", "{S}"]
LEAK | flag aws_secret_access_key | aws configure set aws_secret_access_key {S}
LEAK | flag aws_session_token | aws configure set aws_session_token {S} --profile p
LEAK | login-password -p | docker login nvcr.io -u '$oauthtoken' -p {S}
LEAK | login-password -p | podman login -u bot -p {S} quay.io
LEAK | login-password -p | helm registry login reg.example.com --username u -p {S}
LEAK | login-password -p | mysql -h db.internal -u root -p{S} appdb
LEAK | login-password -p | mysqldump -uroot -p{S} --all-databases
LEAK | login-password -p | sshpass -p {S} ssh user@gpu-node
LEAK | login-password -p | sshpass -p'{S}' scp a b:
LEAK | login-password -u | curl -u alice:{S} https://api.example.com
LEAK | login-password --user | curl --user 'bot:{S}' https://repo.example.com/x
LEAK | auth-header Authorization | curl -H "Authorization: Bearer {S}" https://api.ngc.nvidia.com
LEAK | auth-header Authorization | {"headers": {"Authorization": "Token {S}"}}
# -- leaks: mappings (YAML block and flow, JSON, camelCase) -------------------------------------------------
LEAK | mapping api_key | wandb: {enable: true, api_key: {S}}
LEAK | mapping api_key | wandb: {enable: true, project: tao, api_key: "{S}"}
LEAK | mapping key_password | ssl: {key_password: '{S}', verify: true}
LEAK | mapping password | database:\n  host: db\n  password: {S}\n
LEAK | mapping wandb_key | logger:\n  wandb_key: "{S}"\n
LEAK | mapping hf_token | hf_token: {S}
LEAK | mapping HF_TOKEN | environment:\n  HF_TOKEN: {S}\n
LEAK | mapping authToken | authToken: {S}
LEAK | mapping clientSecret | clientSecret: "{S}"
LEAK | mapping SecretAccessKey | {"Version": 1, "SecretAccessKey": "{S}", "Expiration": "2026-01-01"}
LEAK | mapping SessionToken | {"Credentials": {"SessionToken": "{S}"}}
LEAK | mapping private_key | "private_key": "{S}"
LEAK | mapping auth | {"auths": {"nvcr.io": {"auth": "{S}"}}}
LEAK | mapping apiKey | {"apiKey": "{S}", "model": "gpt"}
LEAK | mapping refreshToken | refreshToken: {S}
LEAK | mapping storage_account_key | - {storage_account_key: {S}}
LEAK | mapping secret | secret: {S}
LEAK | mapping aws_secret_access_key | aws_secret_access_key: /K7MDENG/bPxRfiCYEXAMPLEKEY
LEAK | mapping wandb_key | wandb_key: "{S}
LEAK | mapping api_key_id | api_key_id: {S}
LEAK | manifest-env WANDB_API_KEY | env:\n  - name: WANDB_API_KEY\n    value: {S}\n
LEAK | manifest-env HF_TOKEN | env:\n  - {name: HF_TOKEN, value: "{S}"}\n
LEAK | manifest-env DB_PASSWORD | [{"name": "DB_PASSWORD", "value": "{S}"}]
# -- leaks: URLs and presigned queries --------------------------------------------------------------------
LEAK | url-password https | git clone https://oauth2:{S}@gitlab.example.com/g/r.git
LEAK | url-password postgres | DATABASE=postgres://app:{S}@db:5432/app
LEAK | url-password git+https | pip install git+https://{S}1x@github.com/org/private.git
LEAK | presigned-url X-Amz-Signature | https://b.s3.amazonaws.com/k?X-Amz-Date=20260101T000000Z&X-Amz-Signature={S}
LEAK | presigned-url X-Amz-Security-Token | https://b.s3.amazonaws.com/k?X-Amz-Security-Token={S}
LEAK | presigned-url Signature | https://b.s3.amazonaws.com/k?Expires=1700000000&Signature={S}
LEAK | presigned-url sig | https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-01-01&sig={S}
# -- leaks: well-known token shapes (the value is the shape itself) -------------------------------------------
LEAK | token-shape nvapi- | model pulled with nvapi-Zq9TkW4mLp7RvX2cN8aa
LEAK | token-shape hf_ | token hf_Zq9TkW4mLp7RvX2cN8abcdefgh in the log
LEAK | token-shape ghp_ | remote ghp_Zq9TkW4mLp7RvX2cN8abcdefghij
LEAK | token-shape github_pat_ | github_pat_Zq9TkW4mLp7RvX2cN8abcd
LEAK | token-shape glpat- | glpat-Zq9TkW4mLp7RvX2cN8ab
LEAK | token-shape npm_ | npm_Zq9TkW4mLp7RvX2cN8abcdefghijklmnop
LEAK | token-shape pypi- | password = pypi-AgEIcHlwaS5vcmcCJGE4ZjY2ZDQ4LTk5ZjYtNGQ1Mi05ZjQ0LWQ4MTZj
LEAK | token-shape AKIA | aws key AKIAZQ9TKW4MLP7RVX2C here
LEAK | token-shape AIza | maps AIzaSyZq9TkW4mLp7RvX2cN8abcdefghijklmno
LEAK | token-shape xoxb- | slack xoxb-1234567890-Zq9TkW4mLp
LEAK | token-shape sk_live_ | stripe sk_live_Zq9TkW4mLp7RvX2cN8abcd
LEAK | token-shape sk- | OPENAI=sk-proj-Zq9TkW4mLp7RvX2cN8abcdefgh
LEAK | private-key RSA PRIVATE KEY | -----BEGIN RSA PRIVATE KEY-----\n{S}\n-----END RSA PRIVATE KEY-----
LEAK | private-key OPENSSH PRIVATE KEY | key: |\n  -----BEGIN OPENSSH PRIVATE KEY-----\n  {S}\n  -----END OPENSSH PRIVATE KEY-----\n
# -- false positives that must pass: tokenizer keys, ids, counts, floats ----------------------------------------
PASS | - | eos_token_id: 50256
PASS | - | eos_token_id: [2, 32000]
PASS | - | eos_token_id: [128001, 128009]
PASS | - | pad_token_id=128001
PASS | - | model.pad_token_id=128001 model.bos_token_id=128000
PASS | - | "bos_token_id": 151643, "eos_token_id": [151645, 151643], "pad_token_id": 151643
PASS | - | decoder_start_token_id: 50258
PASS | - | no_timestamps_token_id: 50363
PASS | - | image_token_index: 32000
PASS | - | pad_token: "[PAD]"
PASS | - | cls_token: "[CLS]"
PASS | - | mask_token: "[MASK]"
PASS | - | "eos_token": "</s>"
PASS | - | "bos_token": "<|begin_of_text|>"
PASS | - | eos_token: <|im_end|>
PASS | - | "unk_token": "<unk>"
PASS | - | pad_token: <pad>
PASS | - | "eos_token": {"__type": "AddedToken", "content": "<|endoftext|>", "lstrip": false}
PASS | - | eos_token: {content: </s>, lstrip: false, rstrip: false}
PASS | - | additional_special_tokens: ["<|im_start|>", "<|im_end|>"]
PASS | - | token_dropout: 0.1
PASS | - | token_dropout: true
PASS | - | attention_token_dropout_rate: 0.05
PASS | - | max_new_tokens: 512
PASS | - | num_tokens: 4096
PASS | - | max_token: 2048
PASS | - | token_type_ids: [0, 0, 1]
PASS | - | type_vocab_size: 2
PASS | - | token_len: 1000000
PASS | - | token_budget: 0.75
PASS | - | model_max_length: 1000000000000000019884624838656
PASS | - | tokenizer: {library: megatron, type: GPT2BPETokenizer, model: null, vocab_file: null, merge_file: null}
PASS | - | tokenizer_model: /models/tokenizer.model
PASS | - | TOKENIZERS_PARALLELISM=false python train.py
PASS | - | add_bos_token: true
PASS | - | use_auth_token: true
PASS | - | hf_token: null
PASS | - | token: ~
PASS | - | lr: 1.0e-4
PASS | - | secret_sauce_ratio: 3.14159
# -- false positives: files, paths, references, interpolations -------------------------------------------------
PASS | - | password_file: /run/secrets/db
PASS | - | token_path: ~/.cache/huggingface/token
PASS | - | credentials_file: /etc/gcloud/adc.json
PASS | - | api_key_file: ./keys/wandb.txt
PASS | - | AWS_SHARED_CREDENTIALS_FILE=/home/u/.aws/credentials
PASS | - | api_key_env: WANDB_API_KEY
PASS | - | secretKeyRef: {name: ngc, key: NGC_KEY}
PASS | - | api_key: ${oc.env:WANDB_API_KEY}
PASS | - | wandb: {enable: true, api_key: ${oc.env:WANDB_API_KEY}}
PASS | - | token: ${oc.env:HF_TOKEN,null}
PASS | - | api_key: ${secrets.wandb}
PASS | - | password: ${db.password}
PASS | - | hf_token: ${hf_token}
PASS | - | token: "{{ secrets.HF_TOKEN }}"
PASS | - | value: $(HF_TOKEN)
PASS | - | export NGC_KEY=$NGC_KEY
PASS | - | docker run -e HF_TOKEN=${HF_TOKEN} -e WANDB_API_KEY img
PASS | - | NGC_KEY=$(cat /run/secrets/ngc)
PASS | - | export HF_TOKEN="<your token here>"
PASS | - | password: <redacted>
PASS | - | echo ${NGC_KEY:?export NGC_KEY first}
PASS | - | export GOOGLE_APPLICATION_CREDENTIALS=/home/user/keys/adc.json
PASS | - | private_key: ~/.ssh/id_rsa
PASS | - | password: /run/secrets/db_password
PASS | - | token=os.environ["HF_TOKEN"]
PASS | - | python -c 'import os; login(token=os.getenv("HF_TOKEN"))'
PASS | - | password: <%= ENV["DB_PASSWORD"] %>
PASS | - | set HF_TOKEN=%HF_TOKEN%
PASS | - | $env:HF_TOKEN = $env:HF_TOKEN
PASS | - | password: !ENV ${DB_PASSWORD}
PASS | - | aws secretsmanager get-secret-value --secret-id arn:aws:secretsmanager:us-east-1:123456789012:secret:x
PASS | - | api_key: ???
PASS | - | api_key: EMPTY
# -- false positives: commands and prose ---------------------------------------------------------------------
PASS | - | ssh login-node ls -p dir
PASS | - | ssh login-node.cluster ls -p /scratch
PASS | - | srun --pty bash -l ; ls -p /data
PASS | - | docker run -p 8080:80 --name login-app img
PASS | - | docker login nvcr.io -u '$oauthtoken' --password-stdin < key.txt
PASS | - | printf %s "$NGC_KEY" | docker login nvcr.io -u '$oauthtoken' --password-stdin
PASS | - | docker build --secret id=npmrc,src=$HOME/.npmrc .
PASS | - | docker build --secret id=hf,env=HF_TOKEN -t img .
PASS | - | gh auth login --with-token < token.txt
PASS | - | mysql -h db -u root -p appdb
PASS | - | curl -u alice https://api.example.com
PASS | - | curl -u "$USER:$PASS" https://api.example.com
PASS | - | docker run -u 1000:1000 img
PASS | - | tool --token-file /run/secrets/t --password-stdin --no-password
PASS | - | ls /data/token=v1/run s3://bucket/results/x
PASS | - | git clone https://github.com/NVIDIA/tao_tutorials.git
PASS | - | ssh://git@github.com:org/repo.git http://host:8080/x https://user@host/x
PASS | - | pip install sk-learn-intelex-2024-01-build
PASS | - | secret: false
PASS | - | password: test2  # password for web client
PASS | - | if [ $TOKEN == abc ]; then echo; fi
PASS | - | Epoch 3/10: loss=0.2345 tokens/s=12345.6 lr=1e-4
PASS | - | {"keyword": "token classification", "task": "ner"}
PASS | - | encryption_key: tlt_encode
PASS | - | key: nvidia_tlt
PASS | - | monitor_key: val_loss
PASS | - | sort_key: created_at
# -- shapes that must never crash ---------------------------------------------------------------------------
CRASH | - | eos_token_id: [2, 32000]
CRASH | - | api_key: [a, b, c]
CRASH | - | password: {a: 1}
CRASH | - | token: [
CRASH | - | token: {
CRASH | - | token: "unterminated
CRASH | - | - name: [HF_TOKEN]\n  value: {x: 1}
CRASH | - | env:\n  - name: HF_TOKEN\n    value: [1, 2]\n
CRASH | - | value: |
CRASH | - | {name: , value: }
CRASH | - | {{{{}}}}}}]]][[[
CRASH | - | ${${${${
CRASH | - | $(((((
CRASH | - | --token
CRASH | - | --token=
CRASH | - | -p
CRASH | - | login -p
CRASH | - | curl -u
CRASH | - | curl -u :
CRASH | - | mysql -p
CRASH | - | https://:@
CRASH | - | Authorization: Bearer
CRASH | - | -----BEGIN PRIVATE KEY-----
CRASH | - | \\\\\\\\\\
CRASH | - | "\\"\\"\\"
CRASH | - | a=\\\nb=\\\nc=\\
CRASH | - | \r\n\r\n\r
CRASH | - | \x00\x01\x02 token=\x00
CRASH | - | 🔑 api_key: 🔑🔑🔑🔑🔑🔑🔑🔑
CRASH | - | aws configure set
"""


def _cases(tag: str) -> list[tuple[str, str]]:
    out = []
    for raw in CORPUS.strip().splitlines():
        if not raw.strip() or raw.startswith("#"):
            continue
        case_tag, expect, text = (part.strip() for part in raw.split(" | ", 2))
        if case_tag == tag:
            text = text.encode().decode("unicode_escape").encode("latin-1", "ignore").decode("utf-8", "ignore") \
                if tag == "CRASH" else text.replace("\\n", "\n")
            out.append((expect, text.replace("{S}", S)))
    return out


LEAKS, PASSES, CRASHES = _cases("LEAK"), _cases("PASS"), _cases("CRASH")


def test_corpus_is_large_and_covers_every_kind():
    lines = [line for line in CORPUS.strip().splitlines() if line and not line.startswith("#")]
    assert len(lines) >= 150
    assert {expect.split()[0] for expect, _ in LEAKS} == set(redact.KINDS)
    assert len(PASSES) >= 60 and len(CRASHES) >= 25


@pytest.mark.parametrize("expect, text", LEAKS, ids=[t[:40] for _, t in LEAKS])
def test_leak_is_found_named_and_redacted(expect, text):
    kind, name = expect.split(" ", 1)
    findings = redact.lint(text)
    assert [(f.kind, f.name) for f in findings] == [(kind, name)], findings
    out = redact.redact(text)
    secret = S if S in text else None
    if secret:
        assert secret not in out
        assert secret not in json.dumps([f.to_json() for f in findings])
    assert redact.PLACEHOLDER in out
    assert redact.lint(out) == [] and redact.redact(out) == out


@pytest.mark.parametrize("expect, text", PASSES, ids=[t[:40] for _, t in PASSES])
def test_ordinary_text_passes_unchanged(expect, text):
    assert redact.lint(text) == []
    assert redact.redact(text) == text


@pytest.mark.parametrize("expect, text", CRASHES, ids=[repr(t[:30]) for _, t in CRASHES])
def test_odd_shapes_never_raise(expect, text):
    findings = redact.lint(text)
    assert all(f.kind in redact.KINDS and 1 <= f.line <= text.count("\n") + 1 for f in findings)
    out = redact.redact(text)
    assert redact.lint(out) == []
    redact.redact_uri(text)
    redact.redact_obj({"a": [text, {"b": text}]})


# -- the value guard: a known value in every encoding --------------------------------------------------------------
AWS = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
ODD = 'Zq9/Tk W4+mL"p7\\Rv&X2=c%N8'           # every character an encoder changes
NGC = "nvapi-Zq9TkW4mLp7RvX2cN8aaBBccDD"


def _lower(escaped: str) -> str:
    import re
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), escaped)


ENCODINGS = [
    ("verbatim", lambda v: v),
    ("url-upper", lambda v: quote(v, safe="")),
    ("url-lower", lambda v: _lower(quote(v, safe=""))),
    ("url-keep-slash", lambda v: quote(v, safe="/")),
    ("url-keep-slash-lower", lambda v: _lower(quote(v, safe="/"))),
    ("url-plus", lambda v: quote_plus(v, safe="")),
    ("url-plus-lower", lambda v: _lower(quote_plus(v))),
    ("json", lambda v: json.dumps(v)[1:-1]),
    ("json-escaped-slash", lambda v: json.dumps(v)[1:-1].replace("/", "\\/")),
    ("json-in-json", lambda v: json.dumps(json.dumps(v))[1:-1]),
    ("python-repr", lambda v: repr(v)[1:-1]),
    ("base64", lambda v: base64.b64encode(v.encode()).decode()),
    ("base64-urlsafe", lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("=")),
    ("shell-quoted", lambda v: shlex.quote(v)),
    ("html", lambda v: html.escape(v)),
]


@pytest.fixture(autouse=True)
def _fresh_registry():
    known_secrets.reset()
    yield
    known_secrets.reset()


@pytest.mark.parametrize("name, value", [("AWS_SECRET_ACCESS_KEY", AWS), ("KAGGLE_KEY", ODD),
                                         ("azureStorageConnectionString", ODD), ("PGPASSWORD", AWS)])
@pytest.mark.parametrize("how, encode", ENCODINGS, ids=[e[0] for e in ENCODINGS])
def test_known_value_in_every_encoding_is_found_and_redacted(name, value, how, encode):
    env = {name: value, "PATH": "/usr/bin"}
    form = encode(value)
    text = f'{{"log": "job printed {form} here"}}\nline two'
    hits = known_secrets.find(text, env)
    assert hits and hits[0][0] == name and hits[0][2] == 1
    out = redact.redact_values(text, env)
    assert form not in out and "<redacted>" in out and "line two" in out
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse(text, "remote script", env)
    assert err.value.code == "SECRET_IN_COMMAND" and name in err.value.message
    assert form not in err.value.message + json.dumps(err.value.details)


def test_ngc_login_base64_is_a_known_form():
    env = {"NGC_KEY": NGC}
    docker_auth = base64.b64encode(f"$oauthtoken:{NGC}".encode()).decode()
    assert redact.redact_values(f'"auth": "{docker_auth}"', env) == '"auth": "<redacted>"'


def test_an_unusual_env_name_is_secret_once_watched():
    env = {"DATASET_MIRROR": "mirror-Zq9TkW4mLp7Rv"}
    assert redact.redact_values("at mirror-Zq9TkW4mLp7Rv", env) == "at mirror-Zq9TkW4mLp7Rv"
    known_secrets.watch(["DATASET_MIRROR"])
    assert redact.redact_values("at mirror-Zq9TkW4mLp7Rv", env) == "at <redacted>"


@pytest.mark.parametrize("name, expected", [
    ("KAGGLE_KEY", True), ("OPENAI_KEY", True), ("AZURE_STORAGE_KEY", True), ("PGPASSWORD", True),
    ("AZURE_STORAGE_CONNECTION_STRING", True), ("MYSQL_PWD", True), ("GH_PAT", True), ("SENTRY_DSN", True),
    ("authToken", True), ("clientSecret", True), ("myApiKey", True), ("WANDB_API_KEY", True),
    ("AWS_ACCESS_KEY_ID", True), ("DOCKER_AUTH", True), ("SLACK_WEBHOOK_URL", True), ("GITHUB_WEBHOOK_HMAC", True),
    ("AWS_SHARED_CREDENTIALS_FILE", False), ("SSH_AUTH_SOCK", False), ("KEY", False), ("PATH", False),
    ("TOKENIZERS_PARALLELISM", False), ("AWS_DEFAULT_REGION", False), ("S3_BUCKET_NAME", False),
    ("HF_TOKEN_PATH", False), ("KEYBOARD_LAYOUT", False), ("TAO_STATE_DIR", False),
])
def test_credential_env_names(name, expected):
    assert known_secrets.is_credential_env_name(name) is expected


def test_a_password_inside_a_url_valued_variable_is_known():
    env = {"DATABASE_URL": "postgresql://app:pg%2FZq9TkW4mLp@db.internal:5432/app"}
    assert redact.redact_values("auth failed for pg/Zq9TkW4mLp", env) == "auth failed for <redacted>"
    assert known_secrets.find("x pg/Zq9TkW4mLp", env)[0][0] == "DATABASE_URL (URL password)"


def test_short_values_and_paths_are_not_free_text_secrets():
    env = {"HF_TOKEN": "abc1234", "GOOGLE_APPLICATION_CREDENTIALS": "/home/u/adc.json", "MY_TOKEN": "tok-12345678"}
    assert set(known_secrets.values(env).values()) == {"MY_TOKEN"}
    with pytest.raises(TaoBrevError) as err:
        known_secrets.refuse_short(["HF_TOKEN", "MY_TOKEN", "UNSET"], env)
    assert err.value.code == "SECRET_TOO_SHORT" and "HF_TOKEN" in err.value.message
    assert "abc1234" not in err.value.message


# Lines built to make a backtracking regex quadratic (or worse): each is scanned in linear time, so
# these finish at once; a quadratic rule would keep the suite busy for hours instead.
LONG = [
    "password: a" + " " * 200_000 + "b",
    "token=" + "a" * 500_000,
    '{"a": "' + "x" * 500_000 + '", "password": "Zq9TkW4mLp7RvX2cN8"}',
    "-----BEGIN PRIVATE KEY-----\n" + "a" * 200_000,
    "a\\\n" * 50_000,
    "sshpass " * 50_000,
    "https://" + "a" * 200_000,
    "{" * 100_000 + "api_key: Zq9TkW4mLp7RvX2cN8" + "}" * 100_000,
]


@pytest.mark.parametrize("text", LONG, ids=[f"long-{i}" for i in range(len(LONG))])
def test_long_adversarial_lines_are_scanned_whole(text):
    findings = redact.lint(text)
    out = redact.redact(text)
    assert S not in out and redact.lint(out) == []
    if S in text:
        assert findings
