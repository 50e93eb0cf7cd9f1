"""Results of an S3-routed job, instance side: the shell that makes their MANIFEST and uploads them
through the carrier in one round trip, and the parser of that manifest.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Sequence

from .. import remote
from ..model.answer_types import ResultsLinksItem
from .carrier import Carrier, remove_on_exit
from .manifest import ManifestEntry

_MANIFEST_LINE = re.compile(r"^(\d+) (\\?)([0-9a-f]{64}) [ *](.*)$")  # text or binary mode


def aws_excludes(patterns: Sequence[str]) -> list[str]:
    """``aws s3 sync --exclude`` arguments covering ``manifest.is_excluded`` semantics.

    The AWS CLI matches each pattern against the path relative to the source
    with fnmatch (``*`` also matches ``/``); ``is_excluded`` matches the
    relative path, the file name and every parent directory. Pattern P
    becomes P (the path), ``*/P`` (a name at any depth), ``P/*`` and ``*/P/*``
    (a directory). Any over-reach is harmless: a manifest file that was not
    uploaded shows up as missing in the verification.
    """
    args: list[str] = []
    for pattern in patterns:
        pattern = pattern.strip().rstrip("/")
        if not pattern:
            continue
        for form in (pattern, f"*/{pattern}", f"{pattern}/*", f"*/{pattern}/*"):
            args += ["--exclude", form]
    return args


def results_script(carrier: Carrier, results_dir: str, destination: str, excludes: Sequence[str],
                   token: str) -> str:
    """One round trip: the results handed to the instance user (section ``own``,
    :func:`remote.own_results`), their MANIFEST (``manifest``), then the upload (``upload``).

    The manifest is made on the instance: one line per regular file,
    ``<size> <sha256sum output>`` (sha256sum escapes names holding a backslash,
    newline or CR and marks the line with a leading backslash); an unreadable
    file prints ``TAO_UNREADABLE <path>``; no results dir prints
    ``TAO_NO_RESULTS``. The credential file is removed on every path.

    Symbolic links (TAO writes ``*_latest.pth`` beside its checkpoints; a link
    can dangle) are recorded as links, never uploaded: ``TAO_LINK <1|0 target
    exists> <path>`` then ``TAO_LINK_TO <target>``. ``find -type f`` does not
    follow them, and ``aws s3 sync --no-follow-symlinks`` skips them before its
    existence check (aws-cli ``filegenerator.should_ignore_file``), so a dangling
    link no longer makes sync exit 2 ("File does not exist") and the manifest and
    the upload hold the same files. A link's target inside the results dir is a
    regular file of the manifest, uploaded and verified under its own name.
    """
    quoted = remote.rpath(results_dir)
    hash_files = ('for f; do s=$(stat -c %s -- "$f") && h=$(sha256sum -- "$f") '
                  '|| { printf "TAO_UNREADABLE %s\\n" "$f"; continue; }; printf "%s %s\\n" "$s" "$h"; done')
    list_links = ('for f; do if [ -e "$f" ]; then e=1; else e=0; fi; printf "TAO_LINK %s %s\\n" "$e" "$f"; '
                  'printf "TAO_LINK_TO %s\\n" "$(readlink -- "$f")"; done')
    manifest = (f"if [ -d {quoted} ]; then cd {quoted} && "
                f"find . -type f -exec sh -c {shlex.quote(hash_files)} sh {{}} + && "
                f"find . -type l -exec sh -c {shlex.quote(list_links)} sh {{}} +; else echo TAO_NO_RESULTS; fi")
    upload = carrier.run(results_dir, "/results", ["s3", "sync", "--only-show-errors", "--no-progress",
                                                   "--no-follow-symlinks", *aws_excludes(excludes), "/results",
                                                   destination],
                         read_only=True)
    upload = f"if [ -d {quoted} ]; then {upload}; fi"
    lines = [remove_on_exit([carrier.env_file])]
    if carrier.path_style:
        lines.append(carrier.prepare().rstrip("\n"))
    # the job wrote the results as root: hand them to the instance user first, or
    # a 0600 file is TAO_UNREADABLE to the manifest (the carrier image has chown)
    lines += [remote.section(token, "own", remote.own_results(carrier.image, results_dir)),
              remote.section(token, "manifest", manifest), remote.section(token, "upload", upload)]
    return "\n".join(lines)


@dataclass
class InstanceManifest:
    """What the instance reported: the files (a MANIFEST), unreadable paths, whether the dir exists."""

    entries: list[ManifestEntry]
    unreadable: list[str]
    present: bool
    links: list[ResultsLinksItem] = field(default_factory=list)   # {"path", "target", "dangling"}


def parse_manifest(text: str) -> InstanceManifest:
    """Read the ``manifest`` section of :func:`results_script` (paths made relative, sorted)."""
    entries: list[ManifestEntry] = []
    unreadable: list[str] = []
    links: list[ResultsLinksItem] = []
    present = True
    for line in text.splitlines():
        if line == "TAO_NO_RESULTS":
            present = False
        elif line.startswith("TAO_UNREADABLE "):
            unreadable.append(_relative(line[len("TAO_UNREADABLE "):]))
        elif line.startswith(("TAO_LINK 0 ", "TAO_LINK 1 ")):
            links.append({"path": _relative(line[len("TAO_LINK 0 "):]), "target": None,
                          "dangling": line[len("TAO_LINK ")] == "0"})
        elif line.startswith("TAO_LINK_TO ") and links and links[-1]["target"] is None:
            links[-1]["target"] = line[len("TAO_LINK_TO "):]
        else:
            match = _MANIFEST_LINE.match(line)
            if match:
                size, escaped, digest, path = match.groups()
                if escaped:
                    path = _unescape(path)
                entries.append({"path": _relative(path), "size": int(size), "sha256": digest})
    return InstanceManifest(sorted(entries, key=lambda e: e["path"]), sorted(unreadable), present,
                            sorted(links, key=lambda e: e["path"]))


def _relative(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _unescape(path: str) -> str:
    """Undo sha256sum's escaping (GNU coreutils): ``\\\\``, ``\\n``, ``\\r``."""
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), path)
