"""submit's guards on the spec and the overrides, before anything is recorded: the spec
file read within its cap, one node only, and no known credential value in the spec or an
override however TAO's readers (YAML, Hydra, OmegaConf interpolation) decode it."""

from __future__ import annotations

import errno
import re
from typing import TYPE_CHECKING, Any

from ... import yaml_bounded
from ...errors import TaoBrevError
from ...secrets import guard as known_secrets, interpolation, redact
from ...secrets.safe_read import UnsafeFile, read_bytes
from ...transport import refuse_secrets

if TYPE_CHECKING:   # type hints only: the CLI runner is the scripts' layer; guards import this module
    from ...context import Context
    from .plan import Plan, SubmitRequest

MAX_SPEC_BYTES = 64 * 1024   # the spec travels inside the command string (argv limit 128 KiB)


def guard_spec_file(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    """Guard: the spec file (``plan.spec_text``, ``plan.spec_data``)."""
    plan.spec_text, plan.spec_data = _read_spec(req.spec)


def guard_overrides(ctx: Context, req: SubmitRequest, plan: Plan) -> None:
    """Guard: the overrides ask for one node and hold no known value, nor do the spec's interpolations."""
    _refuse_multi_node_overrides(req.overrides)
    _refuse_secret_overrides(req.overrides, ctx.env)
    _refuse_interpolated_secrets(plan.spec_data, req.overrides, ctx.env)


def _read_spec(path: str) -> tuple[str, dict[str, Any]]:
    try:   # a regular file (a link to one is followed), opened without blocking, read up to the cap
        text = read_bytes(path, MAX_SPEC_BYTES, follow=True).decode("utf-8")
    except UnsafeFile as exc:
        if exc.errno == errno.EFBIG:
            raise TaoBrevError("BAD_SPEC", f"spec {path!r} is larger than {MAX_SPEC_BYTES} bytes",
                               "Keep large data out of the spec: put it in an input (--inputs) and reference "
                               "its path.") from None
        raise TaoBrevError("SPEC_NOT_FOUND", f"cannot read spec {path!r}: it {exc.strerror}",
                           "Pass --spec with the path of a TAO spec YAML file (a regular file).") from None
    except OSError as exc:
        raise TaoBrevError("SPEC_NOT_FOUND", f"cannot read spec {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TaoBrevError("BAD_SPEC", f"spec {path!r} is not UTF-8 text",
                           "Pass the TAO spec YAML file itself (UTF-8 text), not a binary or archive.") from None
    if len(text.encode()) > MAX_SPEC_BYTES:
        raise TaoBrevError("BAD_SPEC", f"spec {path!r} is larger than {MAX_SPEC_BYTES} bytes",
                           "Keep large data out of the spec: put it in an input (--inputs) and reference its path.")
    data = yaml_bounded.load(text, f"spec {path!r}")   # bounded; errors give line and column only
    if not isinstance(data, dict):
        raise TaoBrevError("BAD_SPEC", f"spec {path!r} is not a YAML mapping",
                           "A TAO spec is a mapping of sections (train:, model:, dataset:, ...).")
    # The raw text travels to the instance as spec.yaml, comments and all: every reading the
    # normaliser gives of it is searched (base64 in a comment), and a text it cannot examine whole
    # is refused, before the parsed strings are.
    known_secrets.refuse(text, f"spec {path}", decoded=True)
    refuse_secrets(text, f"spec {path}")   # known values (any encoding), then the lint
    known_secrets.refuse_parsed(data, f"spec {path}")   # ... and every key and string YAML decodes
    nodes = _node_counts(data)
    if any(n > 1 for n in nodes.values()):
        raise TaoBrevError("MULTI_NODE_UNSUPPORTED", f"spec {path!r} asks for several nodes: "
                           + ", ".join(f"{k}={v}" for k, v in nodes.items() if v > 1))
    return text, data


def _node_counts(node: object, prefix: str = "") -> dict[str, int]:
    """Every integer ``num_nodes`` in a spec (TAO's multi-node knob), by dotted key."""
    found: dict[str, int] = {}
    if isinstance(node, dict):
        for key, value in node.items():
            dotted = f"{prefix}{key}"
            if key == "num_nodes" and isinstance(value, int) and not isinstance(value, bool):
                found[dotted] = value
            found.update(_node_counts(value, dotted + "."))
    return found


def _refuse_multi_node_overrides(overrides: list[str]) -> None:
    for item in overrides:
        key, _, value = item.partition("=")
        if key.split(".")[-1] == "num_nodes" and value.strip().isdigit() and int(value) > 1:
            raise TaoBrevError("MULTI_NODE_UNSUPPORTED", f"override {key} asks for several nodes")


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.\[\]/@:-]{1,80}")


def _override_views(item: str) -> tuple[str, list[object]]:
    """(key, [value as each reader may decode it]) of a ``KEY=VALUE`` override.

    TAO's launchers hand overrides to Hydra, whose grammar drops quotes and
    backslash escapes (``key='a\\'b'``, ``key=a\\,b``; hydra-core's
    hydra/grammar/OverrideLexer.g4: quoted values, ESC), and a value may be read as YAML
    later (``"\\x41"`` escapes, ``''`` doubling). The views: the text as
    written, quotes dropped with escapes decoded, quotes dropped with
    backslashes kept, and the YAML document of the first two when they parse.
    Generous by design: a view only matters when it holds a known value."""
    key, _, value = item.partition("=")
    key = key.lstrip("+~").strip()
    if not _PLAIN_KEY.fullmatch(key):   # no key Hydra reads (quotes, escapes, blanks): not repeated
        key = "(its key)"
    views: list[object] = [value]
    decoded, kept = _hydra_unquote(value)
    views += [decoded, kept]
    for text in (value, decoded):
        try:
            views.append(yaml_bounded.load(text, "override"))
        except TaoBrevError:
            pass
    return key, views


def _refuse_interpolated_secrets(spec: dict[str, Any], overrides: list[str], env: dict[str, str]) -> None:
    """SECRET_IN_COMMAND when a string of the spec or an override's value, once its
    OmegaConf interpolations are evaluated as TAO's loader evaluates them (:mod:`tao_brev.interpolation`:
    references of any spelling, ``oc.select`` with its default, ``oc.decode``, nested; an
    override ``a=abc`` counts as the key it sets), holds a known value: a value split across
    keys is still the value. The finding names the variable and the key's path, never the value."""
    scalars: dict[tuple, str] = {}
    interpolation.leaves(spec, (), scalars)
    for item in overrides:
        key, views = _override_views(item)
        decoded = views[1]   # quotes dropped, escapes decoded: what Hydra sets
        assert isinstance(decoded, str), "_override_views' second view is the decoded text"
        scalars[interpolation.segments(key)] = decoded
    readings: list[dict[str, str]] = []   # readings[n]: each string's n-th possible value
    memo: dict = {}
    for path, text in scalars.items():
        if "${" in text:
            try:
                outs = [out for out in interpolation.alternatives(scalars, path, memo) if out != text]
            except RecursionError:   # thousands of nested ${: OmegaConf's parser gives up too
                shown = known_secrets.redact_text(interpolation.dotted(path)[:80], env)
                raise TaoBrevError("BAD_SPEC", f"{shown!r} nests interpolations too deeply to be "
                                   "checked for credentials", "Nest interpolations a few levels at most.") from None
            readings += [{} for _ in range(len(outs) - len(readings))]
            for number, out in enumerate(outs):
                readings[number][interpolation.dotted(path)] = out
    for resolved in readings:
        known_secrets.refuse_parsed(resolved, "a string of the spec or an override, its interpolations "
                                    "resolved,", env)


def _hydra_unquote(value: str) -> tuple[str, str]:
    """``value`` with its quotes dropped: (backslash escapes decoded, backslashes kept)."""
    decoded: list[str] = []
    kept: list[str] = []
    quote = ""
    i = 0
    while i < len(value):
        char = value[i]
        if char == "\\" and i + 1 < len(value):
            decoded.append(value[i + 1])
            kept.append(value[i:i + 2] if value[i + 1] not in "'\"" else value[i + 1])
            i += 2
            continue
        if char in "'\"" and (not quote or quote == char):
            quote = "" if quote else char
        else:
            decoded.append(char)
            kept.append(char)
        i += 1
    return "".join(decoded), "".join(kept)


def _refuse_secret_overrides(overrides: list[str], env: dict[str, str]) -> None:
    """Check each ``-- KEY=VALUE`` override on its own, so the finding names it:
    known secret values first (as written, then as parsed: :func:`_override_views`),
    then the lint."""
    for number, item in enumerate(overrides, 1):
        known_secrets.refuse(item, f"override {number}", env)
        key, views = _override_views(item)
        for view in views:
            known_secrets.refuse_parsed({key: view}, f"override {number}", env)
        known_secrets.refuse(item, f"override {number}", env, decoded=True)   # every reading of its raw text
        findings = redact.lint(item)
        if findings:
            raise TaoBrevError("SECRET_IN_COMMAND", f"override {number} ({findings[0].name}) holds a literal "
                               "credential", findings=[f.to_json() for f in findings])
