"""The lint's edges, each from both sides (references/redaction.md): every well-known
token shape at its minimum length is found and redacted, one character shorter is not;
a shape glued to a longer word is not a token; Kubernetes env entries are paired across
comments and blank lines, in any key order, with block scalars; every credential-name
form of the module doc and the descriptor words that make a name not one."""

import pytest

from tao_brev.secrets import names, redact
from tao_brev.secrets.redact import is_secret_name, lint

ALNUM = "aB3dE5gH7jK9mN1pQ2rS4tU6vW8xY0zC2eF4hJ6kL8nP"
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def body(n, chars=ALNUM):
    return (chars * 4)[:n]


# (prefix, the body's alphabet, minimum body length, the finding's name)
SHAPES = [
    ("nvapi-", ALNUM, 16, "nvapi-"),
    ("hf_", ALNUM, 20, "hf_"),
    ("ghp_", ALNUM, 20, "ghp_"), ("gho_", ALNUM, 20, "gho_"), ("ghu_", ALNUM, 20, "ghu_"),
    ("ghs_", ALNUM, 20, "ghs_"), ("ghr_", ALNUM, 20, "ghr_"),
    ("github_pat_", ALNUM, 20, "github_pat_"),
    ("glpat-", ALNUM, 20, "glpat-"),
    ("npm_", ALNUM, 30, "npm_"),
    ("pypi-", ALNUM, 40, "pypi-"),
    ("AIza", ALNUM, 35, "AIza"),
    ("xoxa-", ALNUM, 10, "xoxa-"), ("xoxb-", ALNUM, 10, "xoxb-"), ("xoxp-", ALNUM, 10, "xoxp-"),
    ("xoxr-", ALNUM, 10, "xoxr-"),
    ("sk_live_", ALNUM, 20, "sk_live_"), ("rk_live_", ALNUM, 20, "rk_live_"),
    ("sk-", ALNUM, 20, "sk-"),
    ("sk-proj-", ALNUM, 20, "sk-"), ("sk-svcacct-", ALNUM, 20, "sk-"), ("sk-admin-", ALNUM, 20, "sk-"),
    ("sk-ant-", ALNUM, 20, "sk-"),
]
IDS = [s[0] for s in SHAPES]


def findings(text):
    return [(f.kind, f.name, f.line) for f in lint(text)]


@pytest.mark.parametrize("prefix, chars, n, name", SHAPES, ids=IDS)
def test_a_token_shape_at_its_minimum_length_is_found_and_redacted(prefix, chars, n, name):
    token = prefix + body(n, chars)
    text = f"log line\nthe key {token} was used"
    assert findings(text) == [("token-shape", name, 2)]
    assert redact.redact(text) == "log line\nthe key <redacted> was used"
    assert redact.redact_uri(f"s3://bucket/{token}/x") == "s3://bucket/<redacted>/x"


@pytest.mark.parametrize("prefix, chars, n, name", SHAPES, ids=IDS)
def test_one_character_shorter_is_not_a_token(prefix, chars, n, name):
    text = f"the key {prefix + body(n - 1, chars)} was used"
    assert lint(text) == [] and redact.redact(text) == text


@pytest.mark.parametrize("prefix, chars, n, name", SHAPES, ids=IDS)
def test_a_shape_inside_a_longer_word_is_not_a_token(prefix, chars, n, name):
    for glue in ("x", "7", "_", "-"):
        text = f"the file {glue}{prefix + body(n + 4, chars)} was used"
        assert lint(text) == [], glue


@pytest.mark.parametrize("prefix", ["AKIA", "ASIA"])
def test_aws_key_ids_are_exactly_sixteen_upper_case_characters(prefix):
    assert findings(f"id {prefix}{body(16, UPPER)} end") == [("token-shape", prefix, 1)]
    assert redact.redact(f"id={prefix}{body(16, UPPER)}") == "id=<redacted>"
    assert lint(f"id {prefix}{body(15, UPPER)} end") == []
    assert lint(f"id {prefix}{body(17, UPPER)} end") == []          # longer: not a key id
    assert lint(f"id {prefix}{body(16, UPPER)}x end") == []
    assert lint(f"id {prefix}{body(15, UPPER)}a end") == []          # lower case is not in a key id


def test_google_keys_end_where_their_35_characters_end():
    key = "AIza" + body(35)
    assert findings(f"k {key}.") == [("token-shape", "AIza", 1)]
    assert lint(f"k {key}-more") == [] and lint(f"k {key}_x") == []


def test_sk_learn_style_names_are_not_keys():
    assert lint("pip install sk-learn-extra scikit-learn") == []
    assert lint("sk-ant-short and sk-proj-short") == []


def test_several_shapes_in_one_text_are_each_named():
    text = f"a nvapi-{body(20)} b\nc hf_{body(22)} d ASIA{body(16, UPPER)}"
    assert findings(text) == [("token-shape", "nvapi-", 1), ("token-shape", "hf_", 2), ("token-shape", "ASIA", 2)]
    assert redact.redact(text) == "a <redacted> b\nc <redacted> d <redacted>"


# -- Kubernetes env entries across lines ---------------------------------------------
LIT = "Zq8-literal-value-0123xy"   # a literal value (no token shape: only the pairing finds it)


@pytest.mark.parametrize("manifest", [
    f"env:\n# c\n- name: NGC_KEY\n  value: {LIT}\n",
    f"env:\n- name: NGC_KEY\n  # the key\n  value: {LIT}\n",
    f"env:\n- name: NGC_KEY\n\n  value: {LIT}\n",
    f"env:\n\n# one\n\n- name: NGC_KEY\n\n  # two\n\n  value: {LIT}\n",
    f"env:\n- value: {LIT}\n  # before its name\n  name: NGC_KEY\n",
    f"env:\n  - name: \"NGC_KEY\"\n    value: '{LIT}'\n",
    f'"env": [\n  {{\n    "name": "NGC_KEY",\n    "value": "{LIT}"\n  }}\n]\n',
], ids=["comment-before", "comment-between", "blank-between", "comments-and-blanks", "value-first", "quoted",
        "json"])
def test_a_manifest_env_entry_is_paired_across_comments_and_blank_lines(manifest):
    found = [f for f in lint(manifest) if f.kind == "manifest-env"]
    assert [f.name for f in found] == ["NGC_KEY"]
    assert found[0].line == next(i for i, ln in enumerate(manifest.split("\n"), 1) if LIT in ln)
    redacted = redact.redact(manifest)
    assert LIT not in redacted and "<redacted>" in redacted and "NGC_KEY" in redacted


def test_a_block_scalar_value_is_paired_across_blank_lines():
    manifest = f"env:\n- name: HF_TOKEN\n  value: |\n\n    {LIT}\n- name: OTHER\n  value: x\n"
    assert [(f.kind, f.name, f.line) for f in lint(manifest)] == [("manifest-env", "HF_TOKEN", 3)]
    assert LIT not in redact.redact(manifest)
    folded = f"env:\n- name: HF_TOKEN\n  value: >-\n    {LIT}\n"
    assert LIT not in redact.redact(folded)


@pytest.mark.parametrize("manifest", [
    f"env:\n- name: DATA_DIR\n  value: {LIT}\n",                    # not a credential name
    f"env:\n- name: NGC_KEY\n- value: {LIT}\n",                      # the value is the next item's
    f"env:\n- name: NGC_KEY\n  valueFrom:\n    secretKeyRef: {{name: ngc, key: key}}\n",
    f"env:\n- name: NGC_KEY\n  value: $(NGC_KEY)\n",                 # a reference, not a literal
    f"env:\n- name: NGC_KEY\n  value: short\n",                      # below the minimum length
    f"- name: NGC_KEY\nspec:\n  value: {LIT}\n",                     # a dedent ends the entry
    f"- name: NGC_KEY\n    value: {LIT}\n",                          # another column: another entry
])
def test_what_is_not_a_literal_credential_entry(manifest):
    assert [f for f in lint(manifest) if f.kind == "manifest-env"] == []


def test_two_entries_are_told_apart():
    manifest = f"env:\n- name: PLAIN\n  value: {LIT}\n- name: WANDB_API_KEY\n  value: {LIT}x\n"
    assert [(f.name, f.line) for f in lint(manifest)] == [("WANDB_API_KEY", 5)]
    assert redact.redact(manifest) == f"env:\n- name: PLAIN\n  value: {LIT}\n- name: WANDB_API_KEY\n  value: <redacted>\n"


# -- credential names ----------------------------------------------------------------
CREDENTIAL_NAMES = [
    # single credential words
    "SECRET", "my_secrets", "PASSWORD", "passwords", "db_passwd", "ssh_passphrase", "HF_TOKEN", "credential",
    "GOOGLE_CREDENTIALS", "apikey", "secretkey", "accesskey", "privatekey", "authkey", "authtoken",
    "accessToken", "apiToken", "sessionToken", "refresh_token_v", "bearertoken", "idtoken", "identityToken",
    "clientSecret",
    # one word ending in a credential word
    "PGPASSWORD", "mysqlpasswd", "gpgpassphrase", "openaiapikey", "awssecretkey", "s3accesskey", "rsaprivatekey",
    # two words
    "api_key", "AccessKey", "Secret_Key", "private.key", "account_key", "auth_key", "ngc_key", "master_key",
    "signing_key", "connection_string", "wandb_key", "kaggle_key", "openai_key", "comet_key", "neptune_key",
    "hf_key", "huggingface_key", "anthropic_key", "cohere_key", "pinecone_key", "replicate_key",
    # upper-case environment names ending in _KEY, also dotted
    "KAGGLE_KEY", "MY_SERVICE_KEY", "cfg.MY_KEY",
    # value words after the credential word
    "AWS_ACCESS_KEY_ID", "accessKeyIds", "SECRET_KEY_BASE", "API_KEY_PROD", "api_key_2", "token_value",
    "password_val", "secret_data", "api_key_string", "apikey_str", "secret_base64", "token_hex",
    "password_raw", "password_plain", "secret_plaintext", "api_key_production", "token_dev", "token_staging",
    "token_test", "token_live", "token_new", "token_old", "token_current", "token_primary", "token_secondary",
    "token_v", "train.wandb.api_key", "a.b.password",
]
NOT_CREDENTIAL_NAMES = [
    "pad_token", "eos_token_id", "max_new_tokens", "num_token", "image_token", "special_token", "n_token",
    "password_file", "token_path", "secretKeyRef", "token_id", "password_ids", "token_dropout", "key",
    "KEY", "monkey", "no_password", "NO_TOKEN", "keyboard", "api", "access", "primary_key_column",
    "AWS_SHARED_CREDENTIALS_FILE", "ssh_auth_sock", "", "my_KEY", "tokenizer",
]


@pytest.mark.parametrize("name", CREDENTIAL_NAMES)
def test_credential_names(name):
    assert is_secret_name(name) is True
    assert findings(f"{name}={LIT}") == [("assignment", name, 1)]
    assert redact.redact(f"export {name}={LIT}") == f"export {name}=<redacted>"


@pytest.mark.parametrize("name", NOT_CREDENTIAL_NAMES)
def test_names_that_are_not_credentials(name):
    assert is_secret_name(name) is False
    if name:
        assert [f for f in lint(f"{name}={LIT}") if f.kind == "assignment"] == []


def test_every_token_role_before_token_is_not_a_credential():
    for role in names._TOKEN_ROLES:
        assert is_secret_name(f"{role}_token") is False, role
        assert is_secret_name(f"{role}_password") is True, role


def test_words_of_a_name():
    assert redact.name_words("AWS_SECRET_ACCESS_KEY") == ("aws", "secret", "access", "key")
    assert redact.name_words("clientSecret") == ("client", "secret")
    assert redact.name_words("SecretAccessKey") == ("secret", "access", "key")
    assert redact.name_words("HTTPServer2-key.v") == ("http", "server", "2", "key", "v")
    assert redact.name_words("") == () and redact.name_words(None) == ()


# -- keys, names, objects, tails ----------------------------------------------------------------
@pytest.mark.parametrize("key", ["auth", "Auth", "AUTH"])
def test_dockers_auth_key_is_a_credential_key_in_any_case(key):
    text = f'{{"auths": {{"nvcr.io": {{"{key}": "JG9hdXRodG9rZW46bnZhcGktc2VjcmV0"}}}}}}'
    assert findings(text) == [("mapping", key, 1)]
    assert "JG9hdXRo" not in redact.redact(text)
    assert lint('{"author": "JG9hdXRodG9rZW46bnZhcGktc2VjcmV0"}') == []


def test_long_names_are_shown_bounded():
    for n, shown in ((80, None), (81, 77)):
        name = "x" * (n - len("_password")) + "_password"
        found = lint(f"{name}={LIT}")
        assert [f.name for f in found] == [name if shown is None else name[:shown] + "..."]


def test_objects_are_redacted_string_by_string_paths_gently(monkeypatch):
    monkeypatch.delenv("NGC_KEY", raising=False)
    env = {"NGC_KEY": "ngc-known-value-9f3e7a1c5b"}
    obj = {"msg": "token=abcdefgh12345678 and ngc-known-value-9f3e7a1c5b", "n": 3, "ok": True, "none": None,
           "dir": "s3://bucket/token=abcdefgh12345678/run", "list": ["token=abcdefgh12345678", 7],
           "tuple": ("token=abcdefgh12345678", "/data/ngc-known-value-9f3e7a1c5b/x"),
           "nested": {"inner": ["export HF_TOKEN=" + LIT]}}
    want = {"msg": "token=<redacted> and <redacted>", "n": 3, "ok": True, "none": None,
            "dir": "s3://bucket/token=abcdefgh12345678/run", "list": ["token=<redacted>", 7],
            "tuple": ("token=<redacted>", "/data/<redacted>/x"),
            "nested": {"inner": ["export HF_TOKEN=<redacted>"]}}
    assert redact.redact_obj(obj, env) == want
    many = redact.obj_redactor(env)
    assert [many(obj), many(obj)] == [want, want] and many("plain") == "plain"
    assert many("ngc-known-value-9f3e7a1c5b") == "<redacted>"


def test_a_tail_is_the_end_of_the_text_redacted_first():
    assert redact.tail("x" * 600) == "x" * 600
    assert redact.tail("x" * 601) == "..." + "x" * 600
    assert redact.tail("y" * 50, 10) == "..." + "y" * 10
    assert redact.tail("  ") == "(no output)" and redact.tail(None) == "(no output)"
    assert redact.tail("key hunter2hunter2 end", 600, "hunter2hunter2") == "key <redacted> end"
    secret = "nvapi-" + body(30)
    assert redact.tail("z" * 20 + " " + secret, 10) == "...<redacted>"   # redacted before the trim


# -- YAML scalars, references, literals ---------------------------------------------------------
@pytest.mark.parametrize("line, redacted", [
    ("password: Zq8literal0123  # why", "password: <redacted>  # why"),
    ('password: "Zq8literal0123", # c', 'password: "<redacted>", # c'),
    ("password: 'Zq8literal0123'", "password: '<redacted>'"),
    ("password:\t \tZq8literal0123,", "password:\t \t<redacted>,"),
    ("password: Zq8literal0123 ,", "password: <redacted> ,"),
    ('password: "abc" junk12345', "password: <redacted>"),
    ("password: abcdefgh", "password: <redacted>"),
    ("- password: Zq8literal0123#not-a-comment", "- password: <redacted>"),
])
def test_yaml_values_are_cut_at_comments_commas_and_quotes(line, redacted):
    assert redact.redact(line) == redacted and [f.kind for f in lint(line)] == ["mapping"]


@pytest.mark.parametrize("line", [
    "password: # only a comment", "password: {a: bbbbbbbbbb}", "password: [aaaaaaaaaa]", "password: ,",
    'password: "abcdefg"', "password: 'abcdefg'", "password: abcdefg", "password: !!!!!!!!!", "password:",
    "GOOGLE_APPLICATION_CREDENTIALS=/home/u/key.json", "password: ${oc.env:PW}", "TOKEN=${A}${B}",
    "TOKEN=${TOKEN:?set it}",
])
def test_what_is_not_a_literal(line):
    assert lint(line) == [] and redact.redact(line) == line


@pytest.mark.parametrize("line, name", [
    ("password: ${oc.env:PW,Zq8-literal-default}", "password"),
    ("TOKEN=${T-Zq8-literal-default}", "TOKEN"),
    ("TOKEN=${T:=Zq8-literal-default}", "TOKEN"),
    ("TOKEN=${T+Zq8-literal-default}", "TOKEN"),
])
def test_a_literal_default_inside_a_reference_is_a_literal(line, name):
    assert [f.name for f in lint(line)] == [name] and "Zq8-literal-default" not in redact.redact(line)


def test_paths_in_objects_are_redacted_gently_long_texts_too():
    path = "/data/run?token=abcdefgh12345678"
    assert redact.redact(path) == "/data/run?token=<redacted>"
    assert redact.redact_obj({"k": path, "m": "x " + path}) == {"k": path, "m": "x /data/run?token=<redacted>"}
    long_uri = "s3://bucket/" + "d/" * 600 + "token=abcdefgh12345678/" + "nvapi-" + body(20)
    assert redact.redact_uri(long_uri) == long_uri[:-26] + "<redacted>"
    long_text = "x " * 600 + "TOKEN=abcdefgh12345678 nvapi-" + body(20)
    assert redact.redact(long_text) == "x " * 600 + "TOKEN=<redacted> <redacted>"
    assert [f.kind for f in lint(long_text)] == ["assignment", "token-shape"]


# -- commands ---------------------------------------------------------------------------------
@pytest.mark.parametrize("line, redacted, name", [
    ("docker login -u me -p Zq8literal0123 nvcr.io", "docker login -u me -p <redacted> nvcr.io", "-p"),
    ("docker run -p 8080:80 img && docker login -p Zq8literal0123", "docker run -p 8080:80 img && docker login -p <redacted>",
     "-p"),
    ("mysql -u root -pZq8literal0123 db", "mysql -u root -p<redacted> db", "-p"),
    ("sshpass -p Zq8literal0123 ssh host", "sshpass -p <redacted> ssh host", "-p"),
    ("curl -u me:Zq8literal0123 https://x", "curl -u me:<redacted> https://x", "-u"),
    ("curl -s -u me https://x --user you:Zq8literal0123", "curl -s -u me https://x --user you:<redacted>", "--user"),
    ("aws configure set aws_secret_access_key Zq8literal0123", "aws configure set aws_secret_access_key <redacted>",
     "aws_secret_access_key"),
    ("tool --verbose --password Zq8literal0123", "tool --verbose --password <redacted>", "--password"),
    ('["--token", "Zq8literal0123"]', '["--token", "<redacted>"]', "--token"),
    ("A=os.getenv('X') PASSWORD=Zq8literal0123", "A=os.getenv('X') PASSWORD=<redacted>", "PASSWORD"),
    ("PASSWORD=os.getenv('X') TOKEN=Zq8literal0123", "PASSWORD=os.getenv('X') TOKEN=<redacted>", "TOKEN"),
])
def test_credentials_on_command_lines(line, redacted, name):
    assert redact.redact(line) == redacted and [f.name for f in lint(line)] == [name]


@pytest.mark.parametrize("line", [
    "docker run -p 8080:80 -p 127.0.0.1:9000:9000/tcp img", "mysql -p db", "curl -u me https://x",
    "curl https://x -u me:short", "PASSWORD=os.getenv('X')", "TOKEN=vault.read(path)", "tool --password -",
    "aws configure set region Zq8literal0123", "docker build --secret id=npm,src=/run/npmrc .",
])
def test_commands_without_a_literal_credential(line):
    assert lint(line) == []


# -- shapes of issue 28 (advice): each found and redacted, its near miss passed -------------------
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
NEW_SHAPES = [
    # (id, text, kind, name, redacted text)
    ("jwt-after-authorization", f"Authorization: {JWT}", "token-shape", "eyJ", "Authorization: <redacted>"),
    ("jwt-in-json", f'{{"headers": {{"Authorization": "{JWT}"}}}}', "token-shape", "eyJ",
     '{"headers": {"Authorization": "<redacted>"}}'),
    ("slack-webhook", "POST https://hooks.slack.com/services/T0000AAAA/B1111BBBB/XXXXXXXXXXXXXXXXXXXXXXXX",
     "token-shape", "hooks.slack.com/", "POST https://<redacted>"),
    ("discord-webhook", "url=https://discord.com/api/webhooks/123456789012345678/abcdefghijklmnopqrstuvwxyz_-12",
     "token-shape", "discord.com/api/webhooks/", "url=https://<redacted>"),
    ("discordapp-webhook", "https://discordapp.com/api/webhooks/12345/abcdefghijklmnopqrstuvwxyz",
     "token-shape", "discordapp.com/api/webhooks/", "https://<redacted>"),
    ("wandb-login", 'wandb.login(key="0123456789abcdef0123456789abcdef01234567")', "assignment", "key",
     'wandb.login(key="<redacted>")'),
    ("login-bare-key", "client.login(key=Zq8sK2mN4pR6tV8x, relogin=True)", "assignment",
     "key", "client.login(key=<redacted>, relogin=True)"),
    ("login-last-kwarg", "api.authenticate(user, password=Zq8sK2mN4pR6tV8x)", "assignment", "password",
     "api.authenticate(user, password=<redacted>)"),
    ("yaml-next-line", "db:\n  password:\n    Zq8sK2mN4pR6tV8x\n  port: 5432", "mapping", "password",
     "db:\n  password:\n    <redacted>\n  port: 5432"),
    ("yaml-block-scalar", "wandb:\n  api_key: |\n    Zq8sK2mN4pR6tV8x\n", "mapping", "api_key",
     "wandb:\n  api_key: |\n    <redacted>\n"),
    ("yaml-next-line-after-blank", "token:\n\n   Zq8sK2mN4pR6tV8x", "mapping", "token", "token:\n\n   <redacted>"),
    ("gcs-signed-url", "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&"
     "X-Goog-Signature=abcdef0123456789abcdef&x=1", "presigned-url", "X-Goog-Signature",
     "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=<redacted>&x=1"),
    ("gcs-credential", "?X-Goog-Credential=svc%40proj.iam.gserviceaccount.com%2F20240101", "presigned-url",
     "X-Goog-Credential", "?X-Goog-Credential=<redacted>"),
    ("netrc-one-line", "machine api.wandb.ai login user password Zq8sK2mN4pR6tV8x", "login-password", "password",
     "machine api.wandb.ai login user password <redacted>"),
    ("netrc-default", "default login anonymous password Zq8sK2mN4pR6tV8x", "login-password", "password",
     "default login anonymous password <redacted>"),
    ("netrc-multi-line", "machine h\n  login u\n  password Zq8sK2mN4pR6tV8x", "login-password", "password",
     "machine h\n  login u\n  password <redacted>"),
]


@pytest.mark.parametrize("case_id, text, kind, name, redacted", NEW_SHAPES, ids=[c[0] for c in NEW_SHAPES])
def test_issue_28_shapes_are_found_and_redacted(case_id, text, kind, name, redacted):
    found = lint(text)
    assert [(f.kind, f.name) for f in found][:1] == [(kind, name)], found
    assert redact.redact(text) == redacted
    assert lint(redact.redact(text)) == []


NEAR_MISSES = [
    "Authorization: required for this endpoint",
    "eyJhbGciOiJIUzI1NiJ9 alone is a header, not a token",
    "https://hooks.slack.com/services/ (the docs page)",
    "https://discord.com/api/webhooks/ is the endpoint",
    "wandb.login(key=os.environ['WANDB_API_KEY'])",
    "wandb.login(key=read_key('wandb'))",
    "login(user, key)",
    "key=Zq8sK2mN4pR6tV8x outside any login call is no credential name",
    "password:\n  other_key: 1",
    "password:\n  - item_in_a_list_here",
    "password:\nZq8sK2mN4pR6tV8x_not_deeper",
    "password:\n  ${oc.env:DB_PASSWORD}",
    "db:\n  password: |\n    ${DB_PASSWORD}\n",
    "?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Date=20240101T000000Z",
    "Wrong password provided",
    "the password is required here",
    "machine h login u password $NETRC_PASSWORD",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_issue_28_near_misses_pass(text):
    assert lint(text) == [] and redact.redact(text) == text


def test_redact_uri_removes_webhooks_and_gcs_signatures_from_paths():
    assert redact.redact_uri("https://hooks.slack.com/services/T0000AAAA/B1111BBBB/XXXXXXXXXXXXXXXX") == \
        "https://<redacted>"
    assert redact.redact_uri("gs://b/o?X-Goog-Signature=abcdef0123456789") == "gs://b/o?X-Goog-Signature=<redacted>"


def test_a_next_line_value_is_a_text_rule_only_and_needs_a_next_line():
    text = "password:\n  Zq8sK2mN4pR6tV8x"
    assert redact.redact_uri(text) == text                     # the gentle mode for paths and URIs: not there
    assert lint("password:\n\n   \n") == [] and lint("password:") == []
    assert lint("model_name:\n  Zq8sK2mN4pR6tV8x") == []
    assert [f.line for f in lint("a: 1\npassword:\n  Zq8sK2mN4pR6tV8x")] == [3]


def test_a_login_keyword_keeps_the_calls_own_parenthesis_and_skips_calls():
    assert redact.redact('login(key="Zq8sK2mN4pR6tV8x")') == 'login(key="<redacted>")'
    assert redact.redact("login(key=Zq8sK2mN4pR6tV8x)") == "login(key=<redacted>)"
    assert lint("login(key=get_key(name))") == []
    assert lint("connect(host, key=)") == []
