"""The secret values this process knows: the registry behind the guarantee.

Its sources, read at each check:

1. the bundle's credential variables (``names.SECRET_ENV_NAMES``: BREV_API_TOKEN,
   NGC_KEY / NGC_API_KEY, the AWS keys, HF_TOKEN, WANDB_API_KEY, ...);
2. every environment variable whose name looks like a credential
   (:func:`is_credential_env_name`: ``names.is_secret_name`` - camelCase
   included - plus ``*_KEY``, ``*PASSWORD``, ``*_PWD``, ``*_PAT``, ``*_AUTH``,
   ``*_DSN``, ``*_SAS``, ``*_CONNECTION_STRING``), except values that are
   absolute paths (they name a file; the file is the secret);
3. every ``--env NAME`` of a submit and the ``--env`` names a job's sidecar
   remembers (:meth:`Registry.watch`): a later verb redacts those values whenever they
   are set in ITS environment (an agent's next shell may not have them).

The environments searched are ``os.environ`` and the environment of the
running verb (:meth:`Registry.observe_env`, called by ``cli.Context``), or only the
mapping a caller passes. A :class:`Registry` holds what a run learnt (observed
environments, watched and unproven names, minted ids) and the search index of
its values; :data:`DEFAULT` is the process's own, and the module-level functions
are its methods.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Iterable, Mapping
from urllib.parse import unquote

from .forms import Searcher, index_of
from .names import MIN_VALUE_LENGTH, SECRET_ENV_NAMES, is_secret_name, name_words

# Last words that make an environment variable's name a credential (``KAGGLE_KEY``).
_ENV_LAST_WORDS = frozenset({"key", "pwd", "pass", "passcode", "auth", "pat", "dsn", "sas", "cookie", "hmac",
                             "salt", "pin"})
_ENV_ANY_WORDS = frozenset({"webhook", "webhooks"})   # SLACK_WEBHOOK_URL: the URL is the secret
# A last word that says how the value is written, not what it is (``HF_TOKEN_B64``,
# ``GITHUB_TOKEN_BASE64``, ``MY_SECRET_JSON``, ``signingKeyPem``): the name without it decides.
# After ``_``, ``-``, ``.`` or at a camelCase step; never FILE/PATH/DIR (a path names a file).
_FORMAT_SUFFIX_RE = re.compile(
    r"(?:[_.\-]+|(?<=[a-z0-9])(?=[A-Z]))(?i:base64url|base64|b64url|b64|base32|b32|base58|b58|base85|b85|"
    r"hex|json|yaml|yml|toml|xml|ini|pem|der|crt|jwk|jwt|p12|pfx|pkcs12|raw|enc|encoded|encrypted|txt|text|"
    r"str|string|bin|binary|gz|gzip|asc|armored|armor|utf8|ascii|plain|plaintext|value|val|data)$")
# A URL with a password in an environment value (DATABASE_URL=postgres://u:PASSWORD@h/db): the password is known.
_URL_PASSWORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:(?P<password>[^\s/@]+)@")


def is_credential_env_name(name: str) -> bool:
    """True for the bundle's credential variables and every name that looks
    like a credential: ``HF_TOKEN``, ``clientSecret``, ``PGPASSWORD``,
    ``KAGGLE_KEY``, ``MYSQL_PWD``, ``AZURE_STORAGE_CONNECTION_STRING``, and
    such a name followed by a word saying how the value is written
    (``HF_TOKEN_B64``, ``GITHUB_TOKEN_BASE64``, ``MY_SECRET_JSON``,
    ``signingKeyPem``); not ``AWS_SHARED_CREDENTIALS_FILE``, ``SSH_AUTH_SOCK``, ``KEY``."""
    return _is_credential_env_name(name) if isinstance(name, str) else False


@lru_cache(maxsize=4096)
def _is_credential_env_name(name: str) -> bool:
    if name in SECRET_ENV_NAMES or is_secret_name(name):
        return True
    words = name_words(name)
    if (len(words) >= 2 and words[-1] in _ENV_LAST_WORDS) or any(w in _ENV_ANY_WORDS for w in words):
        return True
    bare = _FORMAT_SUFFIX_RE.sub("", name)   # HF_TOKEN_B64 -> HF_TOKEN (once per call: JSON_B64 peels twice)
    return bool(bare) and bare != name and _is_credential_env_name(bare)


# records.RecordStore.open: f"{slug(network_arch)}-{slug(action)}-{uuid4().hex[:6]}" (slugs: letters,
# digits, . _ -, no leading or trailing . or -)
MINTED_ID_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?-[A-Za-z0-9](?:[A-Za-z0-9._-]*"
                               r"[A-Za-z0-9_])?-[0-9a-f]{6}")


class Registry:
    """Every secret value known: the environments observed, the ``--env`` names watched or
    unproven, the ids the bundle minted, and the search index of the last lookup."""

    def __init__(self) -> None:
        self._observed: list[Mapping[str, str]] = []   # the running verb's environment (latest Context)
        self._watched: set[str] = set()                # --env names: secret whatever their name says
        self._unproven: dict[str, str] = {}            # --env names of a job whose values are not proven here
        self._minted: set[str] = set()                 # identifiers the bundle minted itself (job ids)
        # The index of the last lookup without an explicit env, with copies of what it was built from:
        # os.environ's items, the observed environments, the watched names. Reused while all three
        # compare equal (dict/set equality, at C speed: no rescan, no re-encoding per string);
        # observe_env/watch/reset/minted also drop it.
        self._last: list = []

    def minted(self, ids: Iterable[str]) -> None:
        """The bundle minted these identifiers itself: job ids (``<network_arch>-<action>-<6 hex>``,
        ``records.RecordStore.open`` from a random uuid; every id the record store holds). A
        variable whose value EQUALS one holds no secret the user keeps (whatever its name says):
        that value is neither refused in commands nor redacted from answers and records. A value
        that only contains, or is contained in, such an id stays secret. Only ids of the minted
        shape count (:data:`MINTED_ID_RE`: at least two dashes, six lower-case hex digits last): a
        file name in the store's jobs directory is text anyone can write, and a credential of
        another shape (a 40-hex key, ``nvapi-...``) never becomes an exception by it."""
        new = {i for i in ids or () if isinstance(i, str) and MINTED_ID_RE.fullmatch(i)} - self._minted
        if new:
            self._minted.update(new)
            self._last.clear()

    def minted_ids(self) -> frozenset[str]:
        """The ids of :func:`minted`."""
        return frozenset(self._minted)

    def observe_env(self, env: Mapping[str, str]) -> None:
        """Search ``env`` (the running verb's environment) too, from now on."""
        if env is not os.environ:
            self._observed[:] = [env]
        self._last.clear()

    def watch(self, names: Iterable[str] | None) -> None:
        """Treat the values of ``names`` (``--env`` names) as secrets wherever set."""
        self._watched.update(n for n in names or () if isinstance(n, str) and n)
        self._last.clear()

    def unset_watched(self, env: Mapping[str, str] | None = None) -> list[str]:
        """The ``--env`` names whose value this process cannot know: watched names unset or empty in
        its environment and in the observed ones, and every name a job's sidecar could not prove
        (:func:`unprove`; ``*`` when a sidecar is lost or damaged and the names are not known).
        Text a job printed may hold those values, and nothing here can find them. Sorted."""
        envs = [env] if env is not None else [os.environ, *self._observed]
        unset = {n for n in self._watched if not any(source.get(n) for source in envs)}
        return sorted(unset | set(self._unproven))

    def unprove(self, name: str, why: str) -> None:
        """A job was given ``name`` by ``--env`` and this process cannot prove it holds that value
        (``proof.verdicts``: unset, another value, no digest; ``*``: the job's names are not
        known): every answer of this run withholds what a job printed."""
        self._unproven.setdefault(name, why)

    def unproven(self) -> dict[str, str]:
        """{name: why} of :func:`unprove` (``*``: the names themselves are not known)."""
        return dict(self._unproven)

    def held_value(self, name: str) -> str | None:
        """The value of ``name`` in this process's environment or an observed one (None: unset or empty)."""
        for source in (os.environ, *self._observed):
            value = source.get(name)
            if value:
                return value
        return None

    def reset(self) -> None:
        """Forget observed environments and watched names (tests)."""
        self._observed.clear()
        self._watched.clear()
        self._unproven.clear()
        self._last.clear()

    def values(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """{value: variable name} of every secret value known (see the module doc)."""
        envs = [env] if env is not None else [os.environ, *self._observed]
        found: dict[str, str] = {}
        watched = frozenset(self._watched)
        for source in envs:
            for value, name in _scan(_snapshot(source), watched):
                if value.strip() not in self._minted:   # an id the bundle minted is no secret (:func:`minted`)
                    found.setdefault(value, name)
        return found

    def index(self, env: Mapping[str, str] | None) -> tuple[Searcher | None, dict[str, tuple[str, str]]]:
        """(one regex of every form, {form: (variable name, encoding)})."""
        if env is not None:
            return index_of(tuple(sorted(self.values(env).items())))
        environ = getattr(os.environ, "_data", None)
        if not isinstance(environ, dict):   # not CPython's os.environ: no cheap snapshot to compare
            return index_of(tuple(sorted(self.values().items())))
        last = self._last
        if last and last[0] == environ and last[2] == self._watched and len(last[1]) == len(self._observed) \
                and all(seen == now for seen, now in zip(last[1], self._observed)):
            return last[3]
        index = index_of(tuple(sorted(self.values().items())))
        self._last[:] = [dict(environ), [dict(e) for e in self._observed], set(self._watched), index]
        return index


def _snapshot(env: Mapping[str, str]) -> tuple:
    """The items of ``env``, read at C speed (``os.environ`` decodes each item in Python)."""
    if env is os.environ:
        data = getattr(os.environ, "_data", None)
        if isinstance(data, dict):
            return tuple(data.items())
    return tuple(env.items())


@lru_cache(maxsize=64)
def _scan(items: tuple, watched: frozenset) -> tuple[tuple[str, str], ...]:
    found = []
    for name, value in items:
        if isinstance(name, bytes):
            name, value = os.fsdecode(name), os.fsdecode(value)
        if not isinstance(value, str) or len(value.strip()) < MIN_VALUE_LENGTH:
            continue
        explicit = name in watched or name in SECRET_ENV_NAMES
        if explicit or (is_credential_env_name(name) and not value.startswith("/")):
            found.append((value, name))
        for m in _URL_PASSWORD_RE.finditer(value):
            password = unquote(m.group("password"))
            if len(password) >= MIN_VALUE_LENGTH and not password.startswith("$"):
                found.append((password, f"{name} (URL password)"))
    return tuple(found)


DEFAULT = Registry()   # the process's registry: what the module-level functions use
minted = DEFAULT.minted
observe_env = DEFAULT.observe_env
watch = DEFAULT.watch
unset_watched = DEFAULT.unset_watched
unprove = DEFAULT.unprove
unproven = DEFAULT.unproven
held_value = DEFAULT.held_value
reset = DEFAULT.reset
values = DEFAULT.values
