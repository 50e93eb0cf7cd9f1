"""The spec against TAO's own schema, before any GPU time (the container does it in seconds, paid).

What the container does (tao-pytorch ``nvidia_tao_pytorch/core/entrypoint.py:148-152`` turns
``-e spec.yaml`` into ``--config-path DIR --config-name spec.yaml``; each action script is
``@hydra_runner(..., schema=ExperimentConfig)``, e.g. ``cv/visual_changenet/scripts/train.py:93``;
``nvidia_tao_core/hydra/runner.py`` / tao-pytorch ``core/hydra/hydra_runner.py:94`` store the
schema under the spec's name), then hydra-core 1.3.2 (the image's pin,
tao-pytorch ``docker/requirements-pip.txt:19``):

1. ``OmegaConf.merge(schema, spec)`` (``hydra/_internal/config_loader_impl.py:469``; a failure is
   "Error merging 'spec.yaml' with schema", line 478) - an unknown key is ``Key 'X' not in 'Y'``,
   a value of the wrong type a ``ValidationError``;
2. ``OmegaConf.set_struct(cfg, True)`` (line 270), then each ``KEY=VALUE`` override as
   ``OmegaConf.update(cfg, key, value, merge=True)`` (line 390): an unknown key is "Could not
   override"; ``+KEY=V`` adds, ``++KEY=V`` adds or sets, ``~KEY`` deletes (lines 346-388);
   a word without ``=`` is a parse error of Hydra's override grammar (read here with hydra-core's
   own ``OverridesParser``: :func:`parse_override`).

:func:`check` repeats exactly that with the ``ExperimentConfig`` of the image's TAO version
(``nvidia_tao_core.config.<network_arch>.default_config``, from the ``nvidia-tao-core`` wheel of
that version: ``install.sh`` installs the default image's; another version is installed on demand
into ``$TAO_STATE_DIR/brev/tao-schemas/<version>/``, :mod:`tao_brev.tao_schema_pkg`). A finding
names file:line:column (or the override), the key path and the closest valid key, never a value.
``omegaconf`` and ``nvidia_tao_core`` are imported only here, on first use (``--help`` stays light).
"""

from __future__ import annotations

import copy
import difflib
import functools
import importlib.util
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import TaoBrevError
from .model.answer_types import SubmitAnswerFindingsItem, SubmitAnswerSpecCheck


# hydra-core's own override grammar (the image's pin, 1.3.2; a dependency: pyproject.toml), the one reading of
# an override. Imported where an override is read (importing hydra costs about 0.2 s CPU: its package
# __init__ loads hydra.utils and omegaconf), so a poll or a submit without overrides does not pay it.
# Without hydra-core the spec is not checked (spec_check).
if TYPE_CHECKING:
    from hydra.core.override_parser.overrides_parser import OverridesParser

# Actions whose script takes another schema than ExperimentConfig (tao-pytorch
# cv/dino/scripts/convert.py: DINODatasetConvertConfig, cv/bevfusion/scripts/dataset_convert.py, ...).
OTHER_SCHEMA_ACTIONS = ("convert", "dataset_convert", "default_specs")
MAX_FINDINGS = 10         # one refusal lists at most this many problems
KEYS_SHOWN = 12           # valid keys listed when none is close


@dataclass
class Finding:
    """One problem: where (``file:line:col`` or ``override N``), the key path, what, the closest key;
    ``override``: N (1-based) when it is the Nth override the user gave."""

    where: str
    key: str
    problem: str
    closest: str | None = None
    valid: list[str] = field(default_factory=list)
    override: int | None = None

    def text(self) -> str:
        hint = (f"; closest valid key: '{self.closest}'" if self.closest else
                f"; valid keys there: {', '.join(self.valid[:KEYS_SHOWN])}" if self.valid else "")
        return f"{self.where}: '{self.key}' {self.problem}{hint}"

    def to_json(self) -> SubmitAnswerFindingsItem:
        return {"where": self.where, "key": self.key, "problem": self.problem, "closest": self.closest,
                "override": self.override}


@dataclass
class SpecCheck:
    """The answer's ``spec_check``: ``checked`` True (passed) or False with ``reason``."""

    checked: bool
    schema: str | None = None        # "nvidia-tao-core 7.3.0 nvidia_tao_core.config.X.default_config.ExperimentConfig"
    reason: str | None = None        # why not checked
    config: object = None            # the merged DictConfig (train.num_gpus, ...) when checked
    left_out: list[str] = field(default_factory=list)   # top-level keys not checked ($TAO_BREV_SPEC_LEAVE_OUT)
    warnings: list[str] = field(default_factory=list)   # what was judged but not refused (tao_schema_values)
    resolved: dict[str, str] = field(default_factory=dict)   # {key: string} of the interpolations that resolve

    def to_json(self) -> SubmitAnswerSpecCheck:
        out: SubmitAnswerSpecCheck = {"checked": self.checked, "schema": self.schema}
        if self.reason:
            out["reason"] = self.reason
        if self.left_out:
            out["left_out"] = list(self.left_out)
        return out


# -- YAML positions ----------------------------------------------------------

def key_positions(text: str) -> dict:
    """``{(key, ...): (line, column)}`` (1-based) of every mapping key of the YAML ``text``."""
    import yaml

    out: dict = {}

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for key_node, value in node.value:
                here = path + (str(key_node.value),)
                out.setdefault(here, (key_node.start_mark.line + 1, key_node.start_mark.column + 1))
                walk(value, here)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                out.setdefault(path + (index,), (item.start_mark.line + 1, item.start_mark.column + 1))
                walk(item, path + (index,))

    try:
        walk(yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)), ())
    except yaml.YAMLError:
        pass
    return out


_PART = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def parts(full_key: str) -> tuple:
    """omegaconf's ``full_key`` (``dataset.train_data_sources[0].image_dir``) as a path (list indices as ints)."""
    return tuple(int(index) if index else name for index, name in _PART.findall(full_key or ""))


def dotted(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(path))


def _where(label: str, positions: dict, path: tuple) -> str:
    for cut in range(len(path), 0, -1):   # the key itself, else its nearest parent in the file
        if path[:cut] in positions:
            line, col = positions[path[:cut]]
            return f"{label}:{line}:{col}"
    return label


# -- the schema --------------------------------------------------------------

def schema_class(module):
    """``ExperimentConfig`` of a ``default_config`` module, else its one ``*ExperimentConfig`` dataclass
    (nvidia-tao-core 7.3.0 config/clip/default_config.py names it CLIPExperimentConfig)."""
    found = getattr(module, "ExperimentConfig", None)
    if found is not None:
        return found
    named = [v for k, v in vars(module).items() if k.endswith("ExperimentConfig") and isinstance(v, type)
             and getattr(v, "__module__", "") == module.__name__]
    return named[0] if len(named) == 1 else None


def _node_kind(node) -> str:
    """What a schema node takes, in words (from omegaconf's node classes)."""
    name = type(node).__name__
    if isinstance(node, _Element):
        shape = node.element_type
        shown = shape.__name__ if isinstance(shape, type) else str(shape).replace("typing.", "")
        return f"list elements of type {shown}"
    if name == "DictConfig":
        shape = node._metadata.object_type
        return f"a mapping ({shape.__name__})" if isinstance(shape, type) and shape is not dict else "a mapping"
    return {"IntegerNode": "an integer", "FloatNode": "a number", "BooleanNode": "true or false",
            "StringNode": "a string", "ListConfig": "a list", "EnumNode": "one of its enum names",
            "BytesNode": "bytes", "PathNode": "a path"}.get(name, "a value of its type")


class _Element:
    """An element of a schema list that has none at that index: only its declared type is known."""

    def __init__(self, element_type):
        self.element_type = element_type


def _schema_node(schema, path: tuple):
    node = schema
    for part in path:
        if isinstance(node, _Element):
            return None
        try:
            if isinstance(part, int) and type(node).__name__ == "ListConfig" and part >= len(node):
                node = _Element(node._metadata.element_type)
                continue
            node = node._get_node(part)
        except Exception:   # no such key
            return None
        if node is None:
            return None
    return node


def _keys_at(schema, path: tuple) -> list:
    node = _schema_node(schema, path)
    return [str(k) for k in node.keys()] if node is not None and type(node).__name__ == "DictConfig" else []


def _closest(schema, path: tuple) -> tuple:
    """(closest valid dotted key or None, valid keys at the parent)."""
    keys = _keys_at(schema, path[:-1])
    match = difflib.get_close_matches(str(path[-1]), keys, n=1, cutoff=0.75)   # "stray" is not "train" (0.6)
    return (dotted(path[:-1] + (match[0],)) if match else None), keys


def _problem_of(exc, schema, path: tuple) -> Finding:
    """A Finding from omegaconf's exception (never its message: it holds the value)."""
    kind = type(exc).__name__
    key = dotted(path)
    parent = _schema_node(schema, path[:-1])
    where_type = getattr(getattr(parent, "_metadata", None), "object_type", None)
    in_what = f"in {where_type.__name__}" if isinstance(where_type, type) and where_type is not dict else "here"
    if kind in ("ConfigKeyError", "ConfigAttributeError") or _schema_node(schema, path) is None:
        closest, valid = _closest(schema, path)
        return Finding("", key, f"is not a key of TAO's schema ({in_what})", closest, valid)
    return Finding("", key, f"has a value of the wrong type: the schema takes {_node_kind(_schema_node(schema, path))}"
                   " (value not shown)")


def _nested(path: tuple, value) -> dict:
    for part in reversed(path):
        value = {part: value}
    return value   # _failing_path walks mappings only: no list index here


def _failing_path(omegaconf, schema, data, prefix: tuple = ()) -> tuple:
    """The deepest key path of ``data`` whose value alone fails the merge (errors without a key)."""
    if isinstance(data, dict):
        for key, value in data.items():
            here = prefix + (str(key),)
            try:
                omegaconf.OmegaConf.merge(schema, omegaconf.OmegaConf.create(_nested(here, value)))
            except omegaconf.errors.OmegaConfBaseException:
                return _failing_path(omegaconf, schema, value, here) or here
    return ()


def _drop(data: dict, path: tuple) -> bool:
    node: Any = data   # a dict or list on the way down, None once the path leaves the document
    for part in path[:-1]:
        node = (node.get(part) if isinstance(node, dict) else
                node[part] if isinstance(node, list) and isinstance(part, int) and part < len(node) else None)
    last: Any = path[-1] if path else None   # a key or an index
    if isinstance(node, dict) and last in node or isinstance(node, list) and isinstance(last, int) and last < len(node):
        del node[last]
        return True
    return False


def merge_spec(omegaconf, schema, data: dict, label: str, text: str) -> tuple:
    """(merged DictConfig or None, findings) of ``OmegaConf.merge(schema, spec)``; each failing key
    is dropped and the merge repeated, so one refusal lists every problem (at most MAX_FINDINGS)."""
    data = copy.deepcopy(data)
    data.pop("hydra", None)   # hydra-core config_loader_impl.py:455-466: a primary config's hydra node is set aside
    positions = key_positions(text)
    findings: list = []
    while len(findings) < MAX_FINDINGS:
        try:
            return omegaconf.OmegaConf.merge(schema, omegaconf.OmegaConf.create(data)), findings
        except omegaconf.errors.OmegaConfBaseException as exc:
            full = str(getattr(exc, "full_key", "") or "")
            if "." in full and full in data:   # `train.optim.lr: 1` at the top: ONE key to YAML, not a path
                data.pop(full)
                findings.append(Finding(_where(label, positions, (full,)), full,
                                        "is one top-level key with dots in its name (YAML does not split it), "
                                        "not a key of TAO's schema: nest it under its parents, or pass it as "
                                        "the override KEY=VALUE"))
                continue
            path = parts(full) or _failing_path(omegaconf, schema, data)
            if not path or not _drop(data, path):
                findings.append(Finding(label, "(the spec)", "does not merge with TAO's schema"))
                return None, findings
            found = _problem_of(exc, schema, path)
            found.where = _where(label, positions, path)
            findings.append(found)
    return None, findings


# -- overrides (Hydra's grammar, the part TAO specs use) ---------------------

def hydra_available() -> bool:
    """hydra-core's override grammar can be used here (the spec check needs it); nothing is imported."""
    return importlib.util.find_spec("hydra") is not None


@functools.lru_cache(maxsize=None)
def _hydra_parser() -> OverridesParser:
    """hydra-core's own override parser (``OverridesParser.create()``), made once; only once hydra_available()."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    return OverridesParser.create()


def override_value(text: str):
    """A Hydra override value as hydra-core's grammar types it (int, float, true/false, null, else a
    string; quoted: a string; [..] / {..}: a list / dict); the text itself where Hydra refuses it (or
    without hydra-core: no second reading)."""
    if not hydra_available():
        return text.strip()
    try:
        return _hydra_parser().parse_override(f"k={text.strip()}").value()
    except Exception:   # OverrideParseException: the caller's check reports it
        return text.strip()


_PREFIX = {"ADD": "+", "FORCE_ADD": "++", "DEL": "~", "CHANGE": ""}
# Overrides whose reading by hydra-core's grammar is known (tests/test_tao_schema.py compares each with hydra's
# own parse): the bundle's own ``results_dir=/results`` (spec_check.BUNDLE_OVERRIDE), so that a submit without
# overrides of its own checks its spec without importing hydra.
KNOWN_READINGS: dict[str, tuple[str, str, str, bool]] = {"results_dir=/results": ("", "results_dir", "/results", True)}


def parse_override(item: str, where: str):
    """(prefix, key, value, has_value) of one override as hydra-core 1.3.2's grammar reads it (value typed by
    Hydra: ``int(3)`` is 3, ``{lr:0.1}`` a dict, ``k=`` the empty string), or a Finding where Hydra refuses it:
    a parse error (``k=a=b``, ``k=x,``), a sweep (``a,b``, ``choice()``, ``range()``, ``interval()``: "requires
    --multirun", ``config_loader_impl.py`` validate_sweep_overrides_legal), a config group or ``@package``
    (line 338: TAO's specs have none)."""
    if item in KNOWN_READINGS:
        return KNOWN_READINGS[item]
    parser = _hydra_parser()
    raw_key = item.partition("=")[0]
    try:
        parsed = parser.parse_override(item)
    except Exception:   # hydra's OverrideParseException; its message holds the value: never shown
        return Finding(where, raw_key.lstrip("+~").strip()[:60] or "(empty)",
                       "is refused by Hydra's override grammar (hydra-core 1.3.2; value not shown): quote a value "
                       "holding '=' or ending in ',', e.g. KEY='a=b'")
    key = parsed.key_or_group or "(empty)"
    if parsed.is_sweep_override():
        return Finding(where, key, "is a sweep (a,b / choice() / range() / interval()): Hydra refuses it without "
                       "--multirun and TAO runs one job; give one value (quote a value holding ',')")
    if parsed.package is not None or "/" in key:
        return Finding(where, key, "is a config group override: TAO's specs have no config groups (Hydra: "
                       "\"looks like a config group override\"); use KEY=VALUE")
    return _PREFIX.get(parsed.type.name, ""), key, parsed.value(), parsed.value() is not None or "=" in item


def apply_overrides(omegaconf, cfg, overrides: list, label_of, index_of=lambda number: number) -> list:
    """Findings of each override parsed and applied as Hydra applies it (``label_of(i)`` names override i,
    ``index_of(i)`` is its Finding's ``override``): hydra-core 1.3.2 ``config_loader_impl.py:336-395``
    ``_apply_overrides_to_config``. ``hydra.*`` keys set Hydra's own config (e.g. ``hydra.job.chdir``),
    not TAO's schema: not checked here."""
    omegaconf.OmegaConf.set_struct(cfg, True)
    findings = []
    for number, item in enumerate(overrides, 1):
        found = _apply_one(omegaconf, cfg, item, label_of(number))
        if found is not None:
            found.override = index_of(number)
            findings.append(found)
    return findings


def _apply_one(omegaconf, cfg, item: str, where: str):
    """One override applied to ``cfg`` (a Finding where Hydra would refuse it, else None)."""
    OmegaConf, errors = omegaconf.OmegaConf, omegaconf.errors
    parsed = parse_override(item, where)
    if isinstance(parsed, Finding):
        return parsed
    prefix, key, value, has_value = parsed
    if not has_value and prefix != "~":
        return Finding(where, key, "has no '=VALUE' (Hydra reads KEY=VALUE; the container refuses a bare key)")
    if key == "hydra" or key.startswith("hydra."):
        return None
    path = tuple(key.split("."))
    try:
        # selected only where Hydra selects (lines 349, 371): a plain KEY=VALUE never reads the old value (an
        # interpolation there is replaced, never resolved)
        current = OmegaConf.select(cfg, key, throw_on_missing=False) if prefix in ("~", "+") else None
        if prefix == "~":
            if current is None:
                raise errors.ConfigKeyError(f"no {key}")
            if value is not None and value != current:   # line 355: only a matching value is deleted
                return Finding(where, key, "holds another value than the one named: Hydra deletes only a match "
                               "(drop '=VALUE')")
            try:
                with omegaconf.open_dict(cfg):
                    parent = OmegaConf.select(cfg, ".".join(path[:-1])) if len(path) > 1 else cfg
                    del parent[path[-1]]
            except errors.OmegaConfBaseException:
                return Finding(where, key, "cannot be deleted: TAO's schema defines it")
        elif prefix == "+" and current is not None and not isinstance(value, (dict, list)):
            return Finding(where, key, "already exists: '+' only adds (drop the '+' to set it)")
        else:
            OmegaConf.update(cfg, key, value, merge=True, force_add=bool(prefix))
    except errors.OmegaConfBaseException as exc:
        found = _problem_of(exc, cfg, path)
        found.where = where
        return found
    return None


def refuse(findings: list, spec_label: str, schema_name: str, fix: str) -> TaoBrevError:
    """BAD_SPEC listing the findings (where, key, closest; never a value)."""
    count = f"{len(findings)} problems (all in findings); the first: " if len(findings) > 1 else ""
    return TaoBrevError("BAD_SPEC", f"the spec does not pass TAO's schema ({schema_name}), as the container would "
                        f"refuse it within seconds of starting: {count}{findings[0].text()}", fix,
                        answer={"findings": [f.to_json() for f in findings]})
