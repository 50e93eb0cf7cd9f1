"""Instance-type facts from brev itself: the hourly price and whether the type can stop.

Source: ``brev search gpu --json`` and ``brev search cpu --json`` (brev-cli
pkg/cmd/gpusearch/gpusearch.go: an array of GPUInstanceInfo, ``type``,
``price_per_hour`` in USD - ProcessInstances parses the API's ``base_price.amount`` -
and ``stoppable``). Both lists are cached with the time they were fetched in
``$TAO_STATE_DIR/brev/instance-types.json``; a cache older than CACHE_MAX_AGE_S is
fetched again when a caller may call brev (``lookup``). When brev cannot be asked
the cache is used whatever its age (its date is named), then
``references/prices.yaml`` - a fallback of approximate public list prices, and every
answer priced from it says so.

Nothing here fails a verb: brev's errors become a line on stderr and an unknown (None).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Optional, TypedDict

from .context import Context
from .errors import TaoBrevError
from .fsio import atomic_write_json, private_dir
from .secrets import safe_read
from .isotime import parse_ts
from .run_state import warn
from .transport import BrevSearchRow

PRICES_FILE = Path(__file__).resolve().parent.parent / "references" / "prices.yaml"
CACHE_MAX_AGE_S = 24 * 3600.0     # brev's prices change rarely; a day-old list is asked again
MISS_REFETCH_AGE_S = 600.0        # a type missing from a list at least this old: ask brev once more
KINDS = ("gpu", "cpu")


class TypeFacts(TypedDict):
    """One instance type as brev search lists it: USD per hour, whether it can stop, ``gpu`` or ``cpu``."""
    usd_per_hour: float
    stoppable: bool
    kind: str


class Catalog(TypedDict, total=False):
    """brev's lists as cached (``instance-types.json``): when fetched, from what, each type's facts."""
    fetched_at: str
    source: str
    types: dict[str, TypeFacts]


def cache_path(ctx: Context) -> Path:
    return ctx.state_root / "brev" / "instance-types.json"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _age_s(cache: Catalog) -> Optional[float]:
    at = parse_ts(cache.get("fetched_at"))
    return None if at is None else (_now() - at).total_seconds()


def read_cache(ctx: Context) -> Catalog:
    """The cached lists (``{"fetched_at", "types": {type: {usd_per_hour, stoppable, kind}}}``), or {}:
    read within its cap, a regular file only, JSON of bounded depth and integers (``safe_read``). A cache
    that is not that (a directory, a FIFO, nested too deep, not UTF-8, a field of the wrong shape) is
    treated as absent - brev is asked again - and its bad entries are never used."""
    try:
        data = safe_read.loads(safe_read.read_text(cache_path(ctx), state_root=ctx.state_root))
    except (OSError, ValueError, TaoBrevError):
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("types"), dict) or \
            not isinstance(data.get("fetched_at"), str) or parse_ts(data["fetched_at"]) is None:
        return {}
    types = {name: entry for name, entry in data["types"].items() if _good_entry(entry)}
    return {**data, "types": types}


def _good_entry(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    price = entry.get("usd_per_hour")
    return (isinstance(price, (int, float)) and not isinstance(price, bool) and 0 <= price < 1e6
            and isinstance(entry.get("stoppable"), bool) and entry.get("kind") in KINDS)


def types_from_rows(rows: list[BrevSearchRow], kind: str) -> dict[str, TypeFacts]:
    """``{type: {"usd_per_hour", "stoppable", "kind"}}`` from brev search rows (one row per GPU
    of a type: the first row of a type wins); rows without a type or a numeric USD price
    (``price_per_hour``, else ``base_price.amount``) are skipped."""
    out: dict[str, TypeFacts] = {}
    for row in rows:
        name, price = row.get("type"), row.get("price_per_hour", _api_price(row.get("base_price")))
        if not isinstance(name, str) or not name or name in out:
            continue
        if isinstance(price, bool) or not isinstance(price, (int, float)) or price < 0:
            continue
        out[name] = {"usd_per_hour": float(price), "stoppable": row.get("stoppable") is True, "kind": kind}
    return out


def _api_price(base_price: object) -> Optional[float]:
    """The API's ``base_price`` ``{"currency": "USD", "amount": "1.006"}`` (gpusearch.go BasePrice), which
    ProcessInstances turns into ``price_per_hour``: read too, for a listing that carries only it."""
    if not isinstance(base_price, dict) or str(base_price.get("currency", "USD")).upper() != "USD":
        return None
    try:
        return float(base_price["amount"])
    except (KeyError, TypeError, ValueError):   # no amount, null, not a number
        return None


def fetch(ctx: Context) -> Catalog:
    """Ask brev (both kinds) and cache the answer; raises TaoBrevError when brev fails."""
    table: dict[str, TypeFacts] = {}
    for kind in KINDS:
        table.update({k: v for k, v in types_from_rows(ctx.brev.search(kind), kind).items() if k not in table})
    cache: Catalog = {"fetched_at": _now().isoformat(timespec="seconds"), "source": "brev search gpu|cpu --json",
             "types": table}
    try:
        private_dir(cache_path(ctx).parent)
        atomic_write_json(cache_path(ctx), cache)
    except OSError as exc:   # e.g. a directory in the cache's place: this answer uses the list all the same
        warn(f"instance types: could not cache brev's list in {cache_path(ctx)} ({safe_read.describe(exc)})")
    return cache


def catalog(ctx: Context, lookup: bool, want: Optional[str] = None) -> Catalog:
    """The cached lists, fetched first when ``lookup`` and they are missing, older than
    CACHE_MAX_AGE_S, or lack ``want`` while older than MISS_REFETCH_AGE_S. {} when none."""
    cache = read_cache(ctx)
    age = _age_s(cache) if cache else None
    stale = age is None or age > CACHE_MAX_AGE_S or age < 0
    missing = want is not None and want not in cache.get("types", {}) and (age is None or age > MISS_REFETCH_AGE_S)
    if lookup and (stale or missing):
        try:
            return fetch(ctx)
        except TaoBrevError as exc:
            warn(f"instance types: brev search failed ({exc.code}); "
                + (f"using the list fetched {cache['fetched_at']}" if cache else "no cached list"))
    return cache


def type_facts(ctx: Context, instance_type: Optional[str], lookup: bool = True) -> tuple[Optional[TypeFacts], Catalog]:
    """(the type's entry or None, the catalog it came from)."""
    if not instance_type:
        return None, {}
    cache = catalog(ctx, lookup, want=instance_type)
    return (cache.get("types") or {}).get(instance_type), cache


def load_prices(path: Path = PRICES_FILE) -> dict[str, float]:
    """``{instance_type: usd_per_hour}`` from ``references/prices.yaml`` ({} when unreadable)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text()) or {}
        table = data.get("usd_per_hour") or {}
        return {str(k): float(v) for k, v in table.items() if isinstance(v, (int, float)) and v >= 0}
    except (OSError, yaml.YAMLError, AttributeError, TypeError, ValueError) as exc:
        warn(f"cost: ignoring {path.name}: {exc}")
        return {}


def price(ctx: Context, explicit: Optional[float], instance_type: Optional[str],
          lookup: bool = True) -> tuple[Optional[float], Optional[str], Optional[str]]:
    """(USD per hour, source, a note naming it) - source ``flag`` (``--price-per-hour``),
    ``brev search`` (its fetch date in the note), ``prices.yaml`` (a fallback, said so), or
    (None, None, why none)."""
    if explicit is not None:
        return explicit, "flag", "--price-per-hour"
    entry, cache = type_facts(ctx, instance_type, lookup)
    if entry is not None:
        return entry["usd_per_hour"], "brev search", (f"brev search {entry['kind']} --json, fetched "
                                                      f"{cache.get('fetched_at')}")
    table = load_prices()
    why = "brev search did not list it" if cache else "brev search could not be asked"
    if instance_type and instance_type in table:
        return table[instance_type], "prices.yaml", (f"references/prices.yaml, a FALLBACK ({why}): an approximate "
                                                     f"public list price of {instance_type}, not brev's")
    if not instance_type:
        return None, None, "instance type unknown (pass --price-per-hour USD)"
    return None, None, f"no price for {instance_type}: {why} and prices.yaml has none (pass --price-per-hour USD)"


def stoppable(ctx: Context, instance_type: Optional[str], lookup: bool = True) -> Optional[bool]:
    """Whether brev can stop an instance of this type (brev search's ``stoppable``); None: unknown."""
    entry, _cache = type_facts(ctx, instance_type, lookup)
    return None if entry is None else entry["stoppable"]
