"""Which names are credential names: the words of an identifier and the rules that make a
variable, flag or key name a credential (``HF_TOKEN``, ``clientSecret``, ``PGPASSWORD``), and the
bundle's own credential variables. The first module of the secrets package: it imports none of it.

A name is a credential name when its words (split at ``_ . -``, camelCase and
digits) hold a credential word - SECRET, PASSWORD, PASSWD, PASSPHRASE, TOKEN,
CREDENTIAL(S), API KEY, ACCESS KEY, SECRET KEY, PRIVATE KEY, ACCOUNT KEY, AUTH
KEY, NGC KEY, or one word ending in PASSWORD / APIKEY / ... (``PGPASSWORD``,
``authtoken``) - and no descriptor word follows it (``_file``, ``_path``,
``_id`` after TOKEN, ``_dropout``, ``_ref``, ``_stdin``, ... : anything but a
value word such as ``_value``, ``_id`` after KEY, an environment or a number),
and TOKEN is not a tokenizer role (``pad_token``, ``eos_token``, ``num_token``).
"""

from __future__ import annotations

import re

from functools import lru_cache


PLACEHOLDER = "<redacted>"
# Shorter values are never treated as secrets in free text: not searched for
# as known values, not reported by the lint (demo defaults such as
# ``password: test2`` in public configs). submit.py refuses --env values and
# the bundle's credentials shorter than this instead.
MIN_VALUE_LENGTH = 8

# The bundle's own credential variables (always secret, whatever their value's shape).
SECRET_ENV_NAMES = ("BREV_API_TOKEN", "NGC_KEY", "NGC_API_KEY", "AWS_ACCESS_KEY_ID",
                    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "ACCESS_KEY", "SECRET_KEY",
                    "HF_TOKEN", "WANDB_API_KEY")
# The bundle's own credentials: they never reach a container unless submit.py
# is told so (--allow-bundle-credential-env).
BUNDLE_CREDENTIALS = ("BREV_API_TOKEN", "NGC_KEY", "NGC_API_KEY")

# Words of a name: ``AWS_SECRET_ACCESS_KEY`` -> aws secret access key,
# ``clientSecret`` -> client secret, ``SecretAccessKey`` -> secret access key.
_WORD_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# One word that is a credential by itself.
_CREDENTIAL_WORDS = frozenset({
    "secret", "secrets", "password", "passwords", "passwd", "passphrase", "token", "credential", "credentials",
    "apikey", "secretkey", "accesskey", "privatekey", "authkey", "authtoken", "accesstoken", "apitoken",
    "sessiontoken", "refreshtoken", "bearertoken", "idtoken", "identitytoken", "clientsecret"})
_CREDENTIAL_SUFFIXES = ("password", "passwd", "passphrase", "apikey", "secretkey", "accesskey", "privatekey")
# Two words that are a credential together (``api_key``, ``AccessKey``).
_CREDENTIAL_PAIRS = frozenset({("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
                               ("account", "key"), ("auth", "key"), ("ngc", "key"), ("master", "key"),
                               ("signing", "key"), ("connection", "string"),
                               # services whose API key is commonly written <service>_key
                               ("wandb", "key"), ("kaggle", "key"), ("openai", "key"), ("comet", "key"),
                               ("neptune", "key"), ("hf", "key"), ("huggingface", "key"), ("anthropic", "key"),
                               ("cohere", "key"), ("pinecone", "key"), ("replicate", "key")})
# An upper-case environment-style name ending in _KEY (``KAGGLE_KEY``) is a credential.
_ENV_KEY_RE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_KEY")
# Words after the credential word that still name the value itself
# (``AWS_ACCESS_KEY_ID``, ``SECRET_KEY_BASE``, ``API_KEY_PROD``); any other
# word makes the name a descriptor (``password_file``, ``token_dropout``).
_VALUE_TAILS = frozenset({"value", "val", "data", "string", "str", "b64", "base64", "hex", "raw", "plain",
                          "plaintext", "base", "prod", "production", "dev", "staging", "test", "live", "new",
                          "old", "current", "primary", "secondary", "v"})
# Words before TOKEN that make it a tokenizer or counting term, not a credential.
_TOKEN_ROLES = frozenset({
    "pad", "eos", "bos", "unk", "sep", "cls", "mask", "start", "end", "image", "img", "video", "audio",
    "vision", "special", "additional", "placeholder", "sot", "eot", "boi", "eoi", "boa", "eoa", "bov", "eov",
    "im", "think", "tool", "prefix", "suffix", "middle", "fim", "eod", "eom", "eoh", "num", "max", "min", "n",
    "stop", "patch", "box", "point", "quad", "obj", "object", "region", "frame", "lang", "timestamp", "split",
    "newline", "blank", "dummy", "added", "vocab", "merge", "subword"})


def name_words(name: str) -> tuple[str, ...]:
    """The lower-case words of an identifier (snake, kebab, dotted, camelCase)."""
    return tuple(w.lower() for w in _WORD_RE.findall(name or ""))


def _credential_end(words: tuple[str, ...]) -> tuple[int, str] | None:
    """(index of the last word of the LAST credential word/pair, that word), or None."""
    found = None
    for i, word in enumerate(words):
        if word in _CREDENTIAL_WORDS or word.endswith(_CREDENTIAL_SUFFIXES):
            found = (i, word)
        elif i and (words[i - 1], word) in _CREDENTIAL_PAIRS:
            found = (i, word)
    return found


@lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True if ``name`` names a credential (see the module doc): ``HF_TOKEN``,
    ``clientSecret``, ``PGPASSWORD``, ``AWS_ACCESS_KEY_ID``; not
    ``pad_token_id``, ``password_file``, ``max_new_tokens``, ``secretKeyRef``."""
    words = name_words(name)
    found = _credential_end(words)
    if found is None and _ENV_KEY_RE.fullmatch(name.rsplit(".", 1)[-1]):
        found = (len(words) - 1, "key")
    if found is None or words[0] == "no":
        return False
    end, word = found
    if word == "token" and end and words[end - 1] in _TOKEN_ROLES:
        return False
    for tail in words[end + 1:]:
        if tail.isdigit() or tail in _VALUE_TAILS or (tail in ("id", "ids") and word.endswith("key")):
            continue
        return False
    return True
