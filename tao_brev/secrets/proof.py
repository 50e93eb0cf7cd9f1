"""The proof, kept: which ``--env`` values a job was given, as keyed digests.

Redaction rests on values the process knows for certain. A later verb (poll,
teardown) does not know the values a job was given: an agent's next shell may
hold another value under the same name (a rotated key, ``x``, blanks) or none.
So submit keeps, per ``--env`` name, ``HMAC-SHA256(key, name NUL value)`` in the
job's sidecar (``env_proof``), with a per-state-dir key of 32 random bytes in
``$TAO_STATE_DIR/brev/env-proof.key`` (0600, created once, never sent). A later
verb treats a job's value as known only when the value in ITS environment gives
the same digest; when the name is unset there, gives another digest, or no digest
(or no key, or no sidecar) is there to compare with, the value is UNPROVEN and the
text that job printed is withheld (``values.unprove``): fail closed.

Digests never leave the state dir; the key never leaves this module.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from pathlib import Path
from typing import Callable, Mapping, TypedDict

from ..errors import TaoBrevError
from ..fsio import create_json, private_dir
from ..model.sidecar_parts import EnvProof
from . import safe_read

KEY_FILE = "env-proof.key"      # under $TAO_STATE_DIR/brev/
ALGORITHM = "hmac-sha256"


class ProvenSidecar(TypedDict, total=False):
    """What :func:`verdicts` reads of a job's sidecar document: read as found (a damaged one may hold
    anything there, and proves nothing)."""
    env_names: object   # the --env names: a list of str
    env_proof: object   # an EnvProof


KEY_BYTES = 32
MAX_KEY_FILE_BYTES = 4096


def key_path(state_root: Path) -> Path:
    return state_root / "brev" / KEY_FILE


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def digest(key: bytes, name: str, value: str) -> str:
    """hex HMAC-SHA256 of ``name NUL value`` under ``key`` (64 hex characters)."""
    return hmac.new(key, _bytes(name) + b"\0" + _bytes(value), hashlib.sha256).hexdigest()


def load_key(state_root: Path) -> bytes | None:
    """The state dir's key, or None when it is missing, damaged or not a private regular file."""
    try:
        text = safe_read.read_text(key_path(state_root), MAX_KEY_FILE_BYTES, state_root=state_root)
        data = json.loads(text)
        key = bytes.fromhex(data["key"]) if isinstance(data, dict) and isinstance(data.get("key"), str) else b""
    except (OSError, ValueError, TaoBrevError, UnicodeDecodeError):
        return None
    return key if len(key) == KEY_BYTES else None


def ensure_key(state_root: Path) -> bytes:
    """The state dir's key, created (0600, exclusively) when there is none. Raises
    UNSAFE_STATE_PATH when a file is there that is not a key this bundle wrote."""
    key = load_key(state_root)
    if key is not None:
        return key
    path = key_path(state_root)
    if os.path.lexists(path):
        raise TaoBrevError("UNSAFE_STATE_PATH", f"{path} is not a key this bundle wrote (damaged, a link, or not "
                           "a private regular file): the --env values of a job could not be proven later",
                           f"Move {path} away (a new key is made; the jobs it proved are then shown withheld "
                           "until torn down), then run the same command again.")
    private_dir(path.parent)
    create_json(path, {"alg": ALGORITHM, "key": os.urandom(KEY_BYTES).hex()})
    key = load_key(state_root)
    if key is None:
        raise TaoBrevError("UNSAFE_STATE_PATH", f"{path} could not be read back after it was written")
    return key


def names_mac(key: bytes, names: list[str]) -> str:
    """hex HMAC-SHA256 of the job's ``--env`` name list exactly as its sidecar holds it (order kept)."""
    return hmac.new(key, b"env-names\0" + b"\0".join(_bytes(n) for n in names), hashlib.sha256).hexdigest()


def proof(state_root: Path, env: Mapping[str, str], names: list[str]) -> EnvProof:
    """The sidecar's ``env_proof`` for a submit: ``{"alg", "names": hex, "digests": {name: hex}}``: the
    MAC of the name list (the sidecar's ``env_names``, so a list emptied or changed later is seen) and
    the digest of each set name's value."""
    key = ensure_key(state_root)
    return {"alg": ALGORITHM, "names": names_mac(key, list(names)),
            "digests": {n: digest(key, n, env[n]) for n in names if env.get(n)}}


def verdicts(state_root: Path, sidecar: ProvenSidecar,
             value_of: Callable[[str], str | None]) -> tuple[list[str], dict[str, str]]:
    """``(proven names, {unproven name: why})`` for a job's sidecar; ``value_of(name)`` is the value
    this process holds (None: unset). A sidecar whose ``env_names`` is missing, or is not the list
    its ``env_proof`` was made for (emptied, changed, or no proof kept), proves nothing:
    ``{"*": why}`` (the job's names are not known)."""
    listed = sidecar.get("env_names") if isinstance(sidecar, dict) else None
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        return [], {"*": "the job's sidecar does not say which --env names it was given"}
    names = [n for n in listed if n]
    proof_data = sidecar.get("env_proof")
    digests = proof_data.get("digests") if isinstance(proof_data, dict) else None
    if not isinstance(proof_data, dict) or not isinstance(digests, dict) or proof_data.get("alg") != ALGORITHM:
        if not names:
            return [], {"*": "no proof of the job's --env names was kept"}
        return [], {n: "no digest of the value the job was given was kept" for n in names}
    key = load_key(state_root)
    if key is None and not names:
        return [], {"*": f"the state dir's key ({KEY_FILE}) is missing or damaged"}
    mac = proof_data.get("names")
    if key is not None and not (isinstance(mac, str) and hmac.compare_digest(names_mac(key, listed), mac)):
        return [], {"*": "the job's sidecar lists other --env names than its proof was made for (damaged)"}
    if not names:
        return [], {}
    key = load_key(state_root)
    proven, unproven = [], {}
    for name in names:
        value, kept = value_of(name), digests.get(name)
        if not isinstance(kept, str):
            unproven[name] = "no digest of the value the job was given was kept"
        elif key is None:
            unproven[name] = f"the state dir's key ({KEY_FILE}) is missing or damaged"
        elif not value:
            unproven[name] = "unset in this shell"
        elif not hmac.compare_digest(digest(key, name, value), kept):
            unproven[name] = "this shell holds another value than the job was given"
        else:
            proven.append(name)
    return proven, unproven
