"""Member names of a results archive kept in the state dir (``brev/results/<job_id>.tar.gz``,
``verbs/keep.py``): a name holding a known value is kept only as its digest, like every other
state file keeps a tainted file name (:func:`file_names.stored_name`). Every member name and
link target is checked (:func:`file_names.tainted`: all of them, fail closed); when one holds a
value the archive is written again with each such path component replaced by
``sha256:<hex>`` (contents unchanged), and the caller records the new archive's sha256.
A PAX member carries its long name again in its extended header (``path``, ``linkpath``), which
``tarfile`` writes back in priority over the new name: the rewritten member's extended header is
rebuilt from the cleaned name, and any other extended record whose key or text holds a value is
dropped, so no original header text survives (GNU long names and ustar prefixes are rewritten
from the name alike).
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Mapping

from .file_names import stored_name, tainted


_PATH_RECORDS = ("path", "linkpath")   # PAX records of the name and link target (POSIX pax)


def _parts(member: tarfile.TarInfo) -> list[str]:
    return [*member.name.split("/"), *((member.linkname.split("/")) if member.linkname else []),
            *(f"{k}={v}" for k, v in member.pax_headers.items() if k not in _PATH_RECORDS)]


def tainted_members(archive: Path, env: Mapping[str, str] | None = None) -> int:
    """How many members of ``archive`` (gzip tar) have a name or link target holding a known value."""
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
    held = set(tainted(sorted({p for m in members for p in _parts(m) if p}), env))
    return sum(1 for m in members if any(p in held for p in _parts(m)))


def rewrite_without_tainted(archive: Path, out: Path, env: Mapping[str, str] | None = None) -> int:
    """Write ``archive`` to ``out`` with every path component (of a name or link target) that holds
    a known value replaced by its digest; the number of members renamed (0: ``out`` not written)."""
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        held = set(tainted(sorted({p for m in members for p in _parts(m) if p}), env))
        if not held:
            return 0
        renamed = 0

        def clean(path: str) -> str:
            return "/".join(stored_name(p, env) if p in held else p for p in path.split("/"))

        with tarfile.open(out, "w:gz") as dst:
            for member in members:
                new = member.name
                member_changed = any(p in held for p in _parts(member))
                if member_changed:
                    new = clean(member.name)
                    member.linkname = clean(member.linkname) if member.linkname else member.linkname
                    member.pax_headers = {k: v for k, v in member.pax_headers.items()
                                          if k not in _PATH_RECORDS and f"{k}={v}" not in held}
                    renamed += 1
                member.name = new
                dst.addfile(member, tar.extractfile(member) if member.isfile() else None)
    return renamed
