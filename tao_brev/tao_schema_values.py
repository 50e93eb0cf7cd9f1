"""The merged spec's values TAO reads but cannot have: a mandatory ``???`` still missing, an interpolation that
cannot resolve (both fail only inside the container, after the instance, the pull and the start were paid).

Judged as TAO does (tao-pytorch, the hydra runner and the action scripts):

* Hydra hands the task function the merged config unresolved (hydra-core 1.3.2 ``core/utils.py`` run_job
  resolves only the ``hydra`` node; ``OmegaConf.save`` of ``experiment.yaml`` in tao-pytorch
  ``core/decorators/workflow.py`` monitor_status is ``resolve=False``): a ``???`` or a ``${...}`` fails
  when the job reads that key (omegaconf raises MissingMandatoryValue / InterpolationKeyError /
  InterpolationToMissingValueError).
* Which keys an action reads: its own section's keys - ``core/initialize_experiments.py``
  initialize_evaluation_experiment reads ``cfg["evaluate"]["checkpoint"]`` (line 123; "TODO ... look at
  latest_checkpoint just like train?": nothing fills it), initialize_inference_experiment
  ``cfg["inference"]["checkpoint"]`` (line 152), e.g. ``cv/dino/scripts/export.py:87,93``
  ``export.checkpoint`` / ``export.onnx_file`` - and the top-level values every action reads
  (``results_dir``, ``encryption_key``: ``cv/dino/scripts/evaluate.py`` main). A ``???`` in another
  action's section, or nested deeper in this one (e.g. ``gen_trt_engine.tensorrt.calibration.*``, read
  only for INT8), is not read: not refused.
* Values TAO fills itself are never refused: ``<action>.results_dir`` (``core/utilities.py``
  update_results_dir, called by monitor_status, derives it from ``results_dir``) and ``results_dir``
  (the bundle's own override sets it: ``spec_check.BUNDLE_OVERRIDE``).
* An interpolation is judged only when it names keys (``${a.b}``): one that calls a resolver
  (``${oc.env:X}``, ``${hydra:...}``, ``${now:...}``) resolves in the container's environment, never
  here; a string holding both (``${oc.env:HOME}/${a.b}``) has each key-only interpolation in it judged
  on its own (OmegaConf resolves every one of them: a dangling one stops the container). One that cannot resolve is refused outside another action's section (a warning there: that
  action is not run). One that resolves to a string is handed on (:func:`resolved_strings`) so that
  the paths it names are checked like plain spec paths (``spec_paths.named``).

No value is ever shown: a finding names the key, never the value or the interpolation's text.
"""

from __future__ import annotations

import copy
import re

from typing import Any

from .tao_schema import Finding, dotted

# Top-level sections of TAO's ExperimentConfig that belong to one action (nvidia-tao-core config/<network>/
# default_config.py: ExperimentConfig's fields named after the action that reads them)
ACTION_SECTIONS = ("train", "evaluate", "inference", "export", "gen_trt_engine", "prune", "distill", "quantize",
                   "retrain", "calibrate", "dataset_convert", "convert", "annotate", "auto_label", "augment",
                   "analyze", "validate", "default_specs")
FILLED_BY_TAO = ("results_dir",)   # <action>.results_dir: update_results_dir; results_dir: the bundle's override
_RESOLVER = re.compile(r"\$\{\s*[A-Za-z_][\w.-]*\s*:")   # ${name: ...}: a resolver call, judged in the container
_KEY_ONLY = re.compile(r"\$\{\s*(\.*[A-Za-z_][\w.\[\]-]*)\s*\}")   # ${a.b}, ${.sibling}: names keys only


def _children(node):
    """(key, child node) of a DictConfig / ListConfig."""
    if type(node).__name__ == "DictConfig":
        return [(str(k), node._get_node(k)) for k in node.keys()]
    if type(node).__name__ == "ListConfig":
        return [(i, node._get_node(i)) for i in range(len(node))]
    return []


def _interpolations(node, path: tuple = ()):
    """(path, node) of every interpolation under ``node`` (not descending into one)."""
    for key, child in _children(node):
        here = path + (key,)
        if child._is_interpolation():
            yield here, child
        else:
            yield from _interpolations(child, here)


def _other_action(path: tuple, action: str) -> bool:
    return bool(path) and path[0] in ACTION_SECTIONS and path[0] != action


def _resolve(omegaconf, cfg, path: tuple):
    """(value, None) or (None, the omegaconf error's class name) of the interpolation at ``path``."""
    try:
        return omegaconf.OmegaConf.select(cfg, dotted(path), throw_on_resolution_failure=True,
                                          throw_on_missing=True), None
    except omegaconf.errors.OmegaConfBaseException as exc:
        return None, type(exc).__name__


def _each_key_only(omegaconf, cfg, path: tuple, text: str):
    """The omegaconf error's class name of the first key-only interpolation in ``text`` (a string that
    also calls a resolver) that cannot resolve where ``text`` stands, else None: each is set alone at
    ``path`` in a copy of ``cfg`` and resolved there (relative ones keep their meaning)."""
    for ref in _KEY_ONLY.findall(text):
        probe = copy.deepcopy(cfg)
        parent = probe if len(path) == 1 else omegaconf.OmegaConf.select(probe, dotted(path[:-1]))
        with omegaconf.open_dict(parent):
            parent[path[-1]] = "${" + ref + "}"
        _value, error = _resolve(omegaconf, probe, path)
        if error is not None:
            return error
    return None


def missing_values(omegaconf, cfg, action: str, where_of) -> list:
    """Findings for each mandatory ``???`` ``action`` reads that is still missing (module doc)."""
    found = []
    spots: list[tuple[tuple[str, ...], Any]] = [((key,), child) for key, child in _children(cfg) if not _children(child)]
    section = cfg._get_node(action) if action in cfg else None
    spots += [((action, key), child) for key, child in _children(section) if not _children(child)] if section is \
        not None else []
    for path, child in spots:
        if path[-1] in FILLED_BY_TAO or child._is_interpolation() or not child._is_missing():
            continue
        key = dotted(path)
        found.append(Finding(where_of(path), key, f"is mandatory in TAO's schema (???) and `{action}` reads it: "
                             f"set it in the spec or pass the override {key}=VALUE (the container would stop "
                             "with MissingMandatoryValue)"))
    return found


def dangling(omegaconf, cfg, action: str, where_of) -> tuple[list, list]:
    """(findings, warnings): each key-only interpolation that cannot resolve (an unknown key, a missing value),
    refused where ``action`` reads it, a warning in another action's section."""
    findings, warnings = [], []
    for path, child in _interpolations(cfg):
        text = str(child._value())
        error = (_each_key_only(omegaconf, cfg, path, text) if _RESOLVER.search(text) else
                 _resolve(omegaconf, cfg, path)[1])
        if error is None:
            continue
        key = dotted(path)
        what = ("names a value that is still missing (???)" if "Missing" in error else
                "names a key the merged spec does not have")
        if _other_action(path, action):
            warnings.append(f"spec key {key} is an interpolation (${{...}}) that {what}: `{path[0]}` reads it, "
                            f"not `{action}`; not refused")
            continue
        findings.append(Finding(where_of(path), key, f"is an interpolation (${{...}}; not shown) that {what}: the "
                                f"container would stop with {error} when `{action}` reads it; point it at a key "
                                "that exists or give the value itself"))
    return findings, warnings


def resolved_strings(omegaconf, cfg, action: str) -> dict:
    """{dotted key: value} of every key-only interpolation ``action`` reads that resolves to a string."""
    out = {}
    for path, child in _interpolations(cfg):
        if _RESOLVER.search(str(child._value())) or _other_action(path, action):
            continue
        value, error = _resolve(omegaconf, cfg, path)
        if error is None and isinstance(value, str):
            out[dotted(path)] = value
    return out
