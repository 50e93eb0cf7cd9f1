"""The guarantee at every exit: a secret value the process knows never leaves it and never survives
an output. Patterns (:mod:`tao_brev.secrets.lint`) only advise; this rests on the values the
process holds for certain (:mod:`tao_brev.secrets.values`), searched in every encoding
(:mod:`tao_brev.secrets.forms`).

Outbound (commands, scripts, files and argv the bundle sends): :func:`refuse` raises
SECRET_IN_COMMAND naming WHERE and WHICH variable, never the value; a spec or override is also
checked after parsing (:func:`refuse_parsed`); a name the bundle stores that holds a value stops
at SECRET_IN_IDENTIFIER (:func:`refuse_in_identifiers`); values shorter than
``MIN_VALUE_LENGTH`` are never searched as free text, so ``submit.py`` refuses them for its
``--env`` names and the bundle's own credentials (:func:`refuse_short`). Inbound (JSON answers,
stderr, records, sidecars, saved logs): :func:`redact_text` replaces each form with
``<redacted>``.

It also hands on the registry's functions and the searches: a caller that uses several of
them imports this one module.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping

from ..errors import TaoBrevError
from .forms import LONG_TEXT, encodings  # noqa: F401  (handed on)
from .names import BUNDLE_CREDENTIALS, MIN_VALUE_LENGTH  # noqa: F401  (handed on)
from .parsed import find_parsed, parsed_strings, refuse_parsed  # noqa: F401  (handed on)
from .withhold import UNCHECKED
from .search import find, json_forms_pattern, matcher, redact_text, redactor  # noqa: F401  (handed on)
from .values import (DEFAULT, Registry, held_value, is_credential_env_name, minted,  # noqa: F401  (handed on)
                     observe_env, reset, unprove, unproven, unset_watched, values, watch)


def describe(hits: list[tuple[str, str, int]], limit: int = 5) -> str:
    """``the value of HF_TOKEN (verbatim, line 3)``, ... (names and places, never values)."""
    parts = [f"the value of {name} ({how}, line {line})" if name != UNCHECKED else
             f"text the check could not examine whole ({how}, line {line}: refused, not passed)"
             for name, how, line in hits[:limit]]
    more = f" and {len(hits) - limit} more" if len(hits) > limit else ""
    return ", ".join(parts) + more


def refuse(text: str, where: str, env: Mapping[str, str] | None = None, registry: Registry | None = None,
           decoded: bool = False) -> None:
    """Raise SECRET_IN_COMMAND when ``text`` (about to leave this process as
    ``where``) holds a known secret value, in any encoding; ``decoded``: also in any reading
    the normaliser gives (``taint.examine``), and a text it cannot examine whole is refused."""
    hits = find(text, env, registry=registry, decoded=decoded)
    if hits:
        raise TaoBrevError("SECRET_IN_COMMAND", f"{where} holds {describe(hits)}",
                           "Refer to a credential by name only (--env NAME; ${oc.env:NAME} or $NAME in a spec); "
                           "never write its value into a spec, an override or a name.",
                           findings=[{"kind": "known-value", "name": n, "encoding": h, "line": ln}
                                     for n, h, ln in hits])


def refuse_argv(argv: list[str], where: str, env: Mapping[str, str] | None = None,
                allow: str | None = None) -> None:
    """:func:`refuse` for each argument of a command line; ``allow`` is the one
    value that may stand alone as an argument (``brev login --token``)."""
    for number, arg in enumerate(argv):
        if allow and arg == allow:
            continue
        refuse(arg, f"{where} (argument {number})", env)


def refuse_in_identifiers(identifiers: Mapping[str, str | None], env: Mapping[str, str] | None = None) -> None:
    """SECRET_IN_IDENTIFIER when a name the bundle stores and later reads back
    (instance, arch, action, results root, bucket, input names) holds a known
    value: redacting it would leave ``<redacted>`` in state that later verbs need."""
    for label, value in identifiers.items():
        hits = find(value or "", env, decoded=True)
        if hits:
            names = list(dict.fromkeys(name for name, _how, _line in hits))
            equal = [name for v, name in values(env).items() if v == value or v.strip() == value]
            var = (equal or names)[0]
            raise TaoBrevError(
                "SECRET_IN_IDENTIFIER",
                f"{label} {'equals' if equal else 'contains'} the value of {var} "
                f"(a variable this process treats as a credential: its name, or --env): {describe(hits)}",
                f"Pass a {label} that is not (and does not contain) the value of {var}; or, if {var} holds no "
                f"credential, unset it (`unset {var}`) or rename it in the shell that runs the script, then run "
                "the same command again. A credential's value in a name would leak wherever the name is shown.",
                findings=[{"kind": "known-value", "name": n, "encoding": h, "line": ln} for n, h, ln in hits],
                variable=var, argument=label)


# Flags whose value is a name the user gives (checked by :func:`refuse_in_argv` before a verb runs).
# Job ids are not here: one the record store holds was minted by the bundle (:func:`minted`), and
# one it does not hold stops at UNKNOWN_JOB before anything is sent.
IDENTIFIER_FLAGS = ("--instance", "--image", "--network-arch", "--action", "--results-root", "--results-dir", "--spec",
                    "--bucket", "--host", "--platform", "--upload-exclude", "--backend-ref", "--parent-job",
                    "--shm-size", "--gpus", "--message", "--fallback-instance")
# Names the bundle reads from the environment and stores or sends (the bucket is in the record's
# results root, the endpoint and region in every carrier command): a known value there is refused.
IDENTIFIER_ENV = ("S3_BUCKET_NAME", "TAO_RESULTS_ROOT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL",
                  "AWS_DEFAULT_REGION", "AWS_REGION", "CLOUD_REGION", "TAO_STATE_DIR", "TAO_SKILL_BANK_PATH",
                  "AWS_PROFILE")


def refuse_in_env_identifiers(env: Mapping[str, str]) -> None:
    """:func:`refuse_in_identifiers` for the IDENTIFIER_ENV names set in ``env`` (``S3_BUCKET_NAME``
    holding a credential: refused, never stored as ``s3://<redacted>/...``)."""
    for name in IDENTIFIER_ENV:
        if env.get(name):   # its own value is no reason (``--env S3_BUCKET_NAME`` makes it one)
            refuse_in_identifiers({name: env[name]}, {k: v for k, v in env.items() if k != name})


def env_names_in_argv(words: list[str]) -> list[str]:
    """The names given with ``--env NAME`` / ``--env=NAME`` in ``words`` (a script's argv, read
    before argparse runs: their values, from this process's environment, are then known to every
    exit, an argparse error echoing one included)."""
    names = []
    for i, word in enumerate(words):
        if word == "--env" and i + 1 < len(words):
            names.append(words[i + 1])
        elif word.startswith("--env="):
            names.append(word[len("--env="):])
    return [n for n in names if n and not n.startswith("-")]


def refuse_in_argv(argv: Iterable[str], env: Mapping[str, str] | None = None) -> None:
    """:func:`refuse_in_identifiers` for the IDENTIFIER_FLAGS of a script's ``argv``
    (``--flag value`` and ``--flag=value``), and the IDENTIFIER_ENV names of ``env``: a credential's
    value given as a name stops the verb before anything is sent, with an error naming the flag (or
    variable) and the variable whose value it holds."""
    words = [w for w in argv if isinstance(w, str)]
    DEFAULT.watch(env_names_in_argv(words))   # known before any answer (an argparse error) is printed
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if flag in IDENTIFIER_FLAGS and (eq or i + 1 < len(words)):
            refuse_in_identifiers({flag: value if eq else words[i + 1]}, env)
    refuse_in_env_identifiers(os.environ if env is None else env)   # S3_BUCKET_NAME, endpoints, roots


def refuse_short(names: Iterable[str], env: Mapping[str, str]) -> None:
    """SECRET_TOO_SHORT for a set value of ``names`` shorter than MIN_VALUE_LENGTH
    (it could not be found in free text, so it could not be redacted)."""
    short = sorted({n for n in names if 0 < len((env.get(n) or "").strip()) < MIN_VALUE_LENGTH})
    if short:
        raise TaoBrevError("SECRET_TOO_SHORT", f"{', '.join(short)} is shorter than {MIN_VALUE_LENGTH} characters: "
                           "a value that short cannot be told apart in logs, so it could not be redacted",
                           f"Use a credential of at least {MIN_VALUE_LENGTH} characters, or unset the variable.")
