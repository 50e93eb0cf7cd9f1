"""Network archs and actions of the TAO PyTorch image, checked before any GPU time.

Known networks: the schemas of the image's own TAO version (nvidia-tao-core of that version,
``nvidia_tao_core/config/<network>/``), plus ``references/tao-pyt-archs.yaml``: the actions of
the newest public tao-pytorch release (its header names release, commit and files), networks
added after it (``newer``), and those the 7.x image cannot run (``not_runnable``).

:func:`check` answers a :class:`Verdict`: ``refusal`` (an :class:`Unknown`) only for an
unmistakable typo of a known name (:func:`is_typo`) or a network the image cannot run, and only
for a TAO 7 ``-pyt`` image (:func:`is_strict_image`); anything else unknown is a warning that
says what is known. ``verbs/submit.py`` raises the refusal as BAD_ARGUMENT.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TypedDict

ARCHS_FILE = Path(__file__).resolve().parent.parent / "references" / "tao-pyt-archs.yaml"
COMMON_ACTIONS = ("default_specs",)   # added to every arch by tao-pytorch core/entrypoint.py (README "Supported Commands")


@dataclass(frozen=True)
class Unknown:
    """``--<flag> <given>`` is refused; ``closest`` is the name it is a typo of (or None)."""

    flag: str            # "network-arch" or "action"
    given: str
    closest: str | None
    known: tuple         # the names it was checked against
    arch: str = ""       # for an action: the arch whose actions these are
    why: str = ""        # a known network the image cannot run: the fact, with its source
    image: str = ""      # ... and the image that can

    def message(self, image: str) -> str:
        if self.why:
            return f"--network-arch {self.given} cannot run in {image}: it {self.why}"
        where = "a known TAO network arch" if self.flag == "network-arch" else f"an action of {self.arch}"
        return (f"--{self.flag} {self.given!r} is not {where} (image {image}) and is an unmistakable typo of "
                f"{self.closest!r}")


@dataclass
class Verdict:
    refusal: Unknown | None = None
    warnings: list = field(default_factory=list)


class Table(TypedDict):
    """references/tao-pyt-archs.yaml as :func:`table` reads it."""
    archs: dict[str, tuple[str, ...]]         # arch -> actions
    newer: dict[str, tuple[str, ...]]
    not_runnable: dict[str, dict[str, str]]   # arch -> why, image
    strict_images: str
    source: dict[str, str]                    # repository, release, commit, actions_from


@lru_cache(maxsize=1)
def table() -> Table:
    """The reference file: ``archs`` / ``newer`` ({arch: actions}), ``not_runnable``, ``strict_images``, ``source``."""
    import yaml

    data = yaml.safe_load(ARCHS_FILE.read_text(encoding="utf-8"))
    actions = {str(k): tuple(map(str, v)) for k, v in data["archs"].items()}
    newer = {str(k): tuple(map(str, v)) for k, v in (data.get("newer") or {}).items()}
    return {"archs": actions, "newer": newer, "not_runnable": dict(data.get("not_runnable") or {}),
            "strict_images": str(data["strict_images"]), "source": dict(data["source"])}


def is_strict_image(image: str) -> bool:
    """True for a TAO 7 PyTorch image: tag ``7.*-pyt`` (``nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt``)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "tao" in name.lower() and fnmatch.fnmatchcase(tag, table()["strict_images"])


def distance(a: str, b: str) -> int:
    """Optimal string alignment distance (insert, delete, substitute, swap two neighbours: 1 each)."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(rows[i - 1][j] + 1, row[j - 1] + 1, rows[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[i - 2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def _digits(name: str) -> str:
    return "".join(c for c in name if c.isdigit())


def is_typo(given: str, known) -> str | None:
    """The known name ``given`` is an unmistakable typo of, else None. Rule: after lower-casing and
    reading '-' as '_', exactly one known name K is (a) equal, or (b) within 1 edit (2 when K is
    longer than 9 characters), has the same digits in the same order, and neither name is a prefix
    of the other. So dinov3 is never dino (a prefix), dinov2 never dinov3 (digits), codetr never
    rtdetr (2 edits), mae/mal never either (two candidates)."""
    norm = given.lower().replace("-", "_")
    if len(norm) < 3:
        return None
    exact = [k for k in known if k.lower() == norm]
    if exact:
        return exact[0]
    hits = [k for k in known if not (k.startswith(norm) or norm.startswith(k)) and _digits(k) == _digits(norm)
            and distance(norm, k) <= (2 if len(k) > 9 else 1)]
    return hits[0] if len(hits) == 1 else None


def _actions_of(network_arch: str) -> tuple | None:
    t = table()
    found = t["archs"].get(network_arch) or t["newer"].get(network_arch)
    return (*found, *COMMON_ACTIONS) if found else None


def _source(network_arch: str) -> str:
    t = table()
    if network_arch in t["newer"]:
        return "the TAO skill bank (references/tao-pyt-archs.yaml newer)"
    return f"tao-pytorch {t['source']['release']}"


def check(network_arch: str, action: str, image: str, schema_networks, schema_version: str | None) -> Verdict:
    """The verdict on a pair. ``schema_networks``: the networks of nvidia-tao-core ``schema_version``
    (None when that package is not available here)."""
    t = table()
    strict = is_strict_image(image)
    schema_networks = list(schema_networks or [])
    in_schema = f"nvidia-tao-core {schema_version}" if schema_version else "the schema package"
    blocked = t["not_runnable"].get(network_arch)
    if blocked and strict:
        if blocked.get("image"):
            return Verdict(Unknown("network-arch", network_arch, None, (), why=str(blocked["why"]),
                                   image=str(blocked["image"])))
        return Verdict(warnings=[f"--network-arch {network_arch} may not run in {image}: it {blocked['why']}"])
    actions = _actions_of(network_arch)
    if actions is None:
        known = sorted({*t["archs"], *t["newer"], *schema_networks})
        if network_arch in schema_networks:
            return Verdict(warnings=[f"--network-arch {network_arch}: {in_schema} has its schema, but its actions "
                                     f"are not listed by tao-pytorch {t['source']['release']} or the TAO skill "
                                     f"bank; --action {action} is not checked (it may run in another TAO image)"])
        typo = is_typo(network_arch, known)
        if typo and strict:
            return Verdict(Unknown("network-arch", network_arch, typo, tuple(known)))
        return Verdict(warnings=[f"--network-arch {network_arch!r} is not known here (not a schema of {in_schema}, "
                                 f"not a tao-pytorch {t['source']['release']} entry point); it may exist in a "
                                 f"newer image" + (f"; did you mean {typo!r}?" if typo else "")])
    if action in actions:
        return Verdict()
    typo = is_typo(action, actions)
    if typo and strict:
        return Verdict(Unknown("action", action, typo, actions, arch=network_arch))
    return Verdict(warnings=[f"--action {action!r} is not an action of {network_arch} in {_source(network_arch)} "
                             f"({', '.join(actions)}); it may exist in a newer image"
                             + (f"; did you mean {typo!r}?" if typo else "")])
