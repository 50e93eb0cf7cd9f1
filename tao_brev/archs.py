"""Network archs and actions of the TAO PyTorch image, checked before any GPU time.

A typo in ``--network-arch`` or ``--action`` otherwise fails only inside the
container, on the paid GPU. The list lives in ``references/tao-pyt-archs.yaml``
(read from NVIDIA/tao_pytorch_backend; its header names the release and the
files). :func:`check` says what is wrong with a pair; ``verbs/submit.py``
refuses it for a TAO 7 ``-pyt`` image (:func:`is_strict_image`) and only warns
for any other image.
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

ARCHS_FILE = Path(__file__).resolve().parent.parent / "references" / "tao-pyt-archs.yaml"


@dataclass(frozen=True)
class Unknown:
    """``--<flag> <given>`` is not in the list; ``closest`` is the best guess or None."""

    flag: str            # "network-arch" or "action"
    given: str
    closest: str | None
    known: tuple         # the names it was checked against
    arch: str = ""       # for an action: the arch whose actions these are

    def message(self, image: str) -> str:
        where = "the TAO PyTorch network archs" if self.flag == "network-arch" else f"the actions of {self.arch}"
        guess = f"; did you mean {self.closest!r}?" if self.closest else ""
        return f"--{self.flag} {self.given!r} is not one of {where} (image {image}){guess}"


@lru_cache(maxsize=1)
def table() -> dict:
    """``{"archs": {arch: [actions]}, "strict_images": pattern, "source": {...}}`` from the reference file."""
    import yaml

    data = yaml.safe_load(ARCHS_FILE.read_text(encoding="utf-8"))
    return {"archs": {str(k): tuple(map(str, v)) for k, v in data["archs"].items()},
            "strict_images": str(data["strict_images"]), "source": dict(data["source"])}


def is_strict_image(image: str) -> bool:
    """True for a TAO 7 PyTorch image: tag ``7.*-pyt`` (``nvcr.io/nvidia/tao/tao-toolkit:7.3.0-pyt``)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "tao" in name.lower() and fnmatch.fnmatchcase(tag, table()["strict_images"])


def closest(name: str, known) -> str | None:
    """The most similar known name (difflib ratio >= 0.6), else None."""
    found = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return found[0] if found else None


def check(network_arch: str, action: str) -> Unknown | None:
    """The first unknown name of the pair (the arch first, then its action), or None when both are listed."""
    archs = table()["archs"]
    if network_arch not in archs:
        return Unknown("network-arch", network_arch, closest(network_arch, archs), tuple(sorted(archs)))
    actions = archs[network_arch]
    if action not in actions:
        return Unknown("action", action, closest(action, actions), actions, arch=network_arch)
    return None
