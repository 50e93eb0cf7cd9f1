"""Instance names as brev accepts them, one instance per name, and the secret check of a remote script."""

from __future__ import annotations

import re
from typing import TypedDict

from ..errors import TaoBrevError
from ..secrets import guard as known_secrets, redact

# Instance names as brev accepts them; anything else never reaches a command line.
INSTANCE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


class BrevInstance(TypedDict, total=False):
    """An entry of ``brev ls --json`` (brev-cli's workspace): the keys the bundle reads."""
    name: str
    id: str
    status: str
    instance_type: str
    shell_status: str
    build_status: str
    health_status: str
    gpu: str


def pick_instance(listed: list[BrevInstance], name: str) -> BrevInstance | None:
    """The one entry of ``listed`` named ``name`` (None: none); INSTANCE_AMBIGUOUS naming
    each one's id and status when there are several."""
    found = [w for w in listed if w.get("name") == name]
    if len(found) > 1:
        ids = ", ".join(f"{w.get('id') or '?'} ({w.get('status') or '?'})" for w in found)
        raise TaoBrevError("INSTANCE_AMBIGUOUS", f"{len(found)} instances are named {name} in `brev ls --json`: "
                           f"ids {ids}", ids=[w.get("id") for w in found])
    return found[0] if found else None



def refuse_secrets(text: str, what: str, env: dict[str, str] | None = None) -> None:
    """Check ``text`` before it is sent; raise SECRET_IN_COMMAND naming where
    (variable/flag and line), never the value: first every secret value this
    process knows, in any encoding (the guarantee, ``known_secrets``), then
    the lint's literal credentials (advice)."""
    known_secrets.refuse(text, what, env)
    findings = redact.lint(text)
    if findings:
        raise TaoBrevError("SECRET_IN_COMMAND", f"{what} holds a literal credential: "
                           + "; ".join(str(f) for f in findings),
                           findings=[f.to_json() for f in findings])


def check_instance(name: str) -> str:
    """Reject instance names that are not plain brev names (BAD_NAME)."""
    if not isinstance(name, str) or not INSTANCE_RE.fullmatch(name):
        raise TaoBrevError("BAD_NAME", f"invalid instance name: {name!r}")
    return name
