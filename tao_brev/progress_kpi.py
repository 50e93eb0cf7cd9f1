"""A status line's KPIs (TAO's ``kpi``, mmlab's loose numbers, ``graphical``), cleaned and bounded,
and which way each KPI is better (``--metrics``' ``best``)."""

from __future__ import annotations

import math
import re

from . import tao_status
from .logcap import cut_redacted
from .tao_status import Kpi, StatusLine

MAX_KPIS = 24                   # KPI names kept per line
_LOWER_IS_BETTER = re.compile(r"loss|err|mse|mae|rmse|wer|cer|perplexity|distance|fpr|fnr|miss", re.I)
_HIGHER_IS_BETTER = re.compile(r"acc|map|\bap|ap\d|_ap|precision|recall|f1|iou|dice|auc|score|psnr|ssim|tpr", re.I)
_NOT_A_GOAL = re.compile(r"^(lr|learning_rate|.*_lr)$|epoch|step|iter|time", re.I)

def _kpi_value(value: object) -> float | str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        if math.isfinite(value):
            return round(value, 6) if isinstance(value, float) else value
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        try:
            return _kpi_value(float(value))
        except ValueError:
            return cut_redacted(value, 80)
    return None


def clean_kpi(kpi: object) -> Kpi:
    """A line's ``kpi``: numbers kept (non-finite as "nan"/"inf"/"-inf"), strings cut to 80
    characters, other values dropped; at most MAX_KPIS names of up to 64 characters."""
    if not isinstance(kpi, dict):
        return {}
    out: Kpi = {}
    for key, value in kpi.items():
        cleaned = _kpi_value(value)
        if cleaned is not None and len(out) < MAX_KPIS:
            out[cut_redacted(str(key), 64)] = cleaned
    return out


# Fields of a status line that are not metrics (TAO's logger fields, progress and mmlab bookkeeping).
_NOT_KPI_FIELDS = frozenset({"date", "time", "status", "verbosity", "message", "epoch", "max_epoch", "time_per_epoch",
                             "eta", "kpi", "graphical", "categorical", "mode", "phase", "iter", "cur_iter",
                             "max_iter", "max_iters", "step", "max_step", "time_per_step", "global_step", "memory",
                             "data_time"})


def line_kpi(item: StatusLine) -> Kpi:
    """A line's metrics: ``kpi``, else numbers under ``graphical`` and numbers at the top
    level (TAO's mmlab loggers write ``loss`` and ``lr`` there), ``kpi`` winning."""
    loose = {k: v for k, v in item.items() if k not in _NOT_KPI_FIELDS and isinstance(v, (int, float))}
    raw = item.get("graphical")
    graphical = {k: v for k, v in raw.items() if isinstance(v, (int, float))} if isinstance(raw, dict) else {}
    merged = {**clean_kpi(loose), **clean_kpi(graphical), **clean_kpi(item.get("kpi"))}
    return dict(list(merged.items())[:MAX_KPIS])


def goal(name: str) -> str | None:
    """``min`` / ``max`` for a KPI name (a heuristic from its name), None when unknown."""
    if _NOT_A_GOAL.search(name):
        return None
    if _LOWER_IS_BETTER.search(name):
        return "min"
    if _HIGHER_IS_BETTER.search(name):
        return "max"
    return None


def epoch_table(items: list[StatusLine]) -> list[tuple[int, Kpi]]:
    """[(completed epochs, {kpi: value})]: :func:`tao_brev.tao_status.epoch_rows` (each KPI dict
    counted once, on the epoch it belongs to)."""
    return tao_status.epoch_rows(items, line_kpi)


