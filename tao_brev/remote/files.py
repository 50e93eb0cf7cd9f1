"""Files the remote scripts write: a heredoc written verbatim, its byte-for-byte check, and the
script as lines a person reads (``--dry-run``)."""

from __future__ import annotations

import hashlib
import re
import uuid

from .quoting import rpath

WRITE_FAILED_EXIT = 9   # a launch script's exit status when a file it writes did not arrive intact


def heredoc_file(target: str, content: str) -> str:
    """Write ``content`` verbatim to instance path ``target`` (quoted heredoc: no
    expansion). A failed write (a full disk: ``cannot create temp file for
    here-document: No space left on device``, leaving an empty file) prints
    ``TAO_WRITE_FAILED`` and exits WRITE_FAILED_EXIT."""
    delim = "TAO_EOF_" + uuid.uuid4().hex[:12]
    return (f"cat > {rpath(target)} <<'{delim}' || {{ echo TAO_WRITE_FAILED {rpath(target)}; "
            f"exit {WRITE_FAILED_EXIT}; }}\n{_heredoc_text(content)}{delim}\n")


_HEREDOC_START = re.compile(r"<<'(TAO_EOF_[0-9a-f]+)'")
_DOCKER_RUN_BREAK = re.compile(r" (?=--?[a-z])")
READABLE_WIDTH = 120


def readable_lines(script: str) -> list[str]:
    """A remote script as lines a person (or an agent) reads: one command per line, the body of
    each file the script writes (a heredoc) summed up in one line, and a long ``docker run``
    broken before each flag (``\\`` continuations). For plans (``--dry-run``); the script
    itself is what runs."""
    out: list[str] = []
    lines = script.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        start = _HEREDOC_START.search(line)
        if start:
            out.append(line)
            body = 0
            i += 1
            while i < len(lines) and lines[i] != start.group(1):
                body, i = body + 1, i + 1
            out.append(f"    ... {body} line(s) of the file's content (as sent, byte for byte) ...")
            out.append(start.group(1))
        elif line.startswith("docker run ") and len(line) > READABLE_WIDTH:
            parts = _DOCKER_RUN_BREAK.split(line)
            out += [part + " \\" for part in parts[:-1]] + [parts[-1]]
            out[-len(parts) + 1:] = ["    " + part for part in out[-len(parts) + 1:]]
        else:
            out.append(line)
        i += 1
    return out


def _heredoc_text(content: str) -> str:
    return content if content.endswith("\n") else content + "\n"


def verify_file(target: str, content: str) -> str:
    """Shell lines that check instance file ``target`` holds exactly what
    :func:`heredoc_file` wrote (byte size and sha256), else print
    ``TAO_SPEC_UNVERIFIED`` with the size found and exit WRITE_FAILED_EXIT."""
    data = _heredoc_text(content).encode("utf-8")
    path, size, digest = rpath(target), len(data), hashlib.sha256(data).hexdigest()
    fail = (f'{{ echo "TAO_SPEC_UNVERIFIED {target}: $(wc -c < {path} 2>/dev/null || echo ?) bytes on the '
            f'instance, {size} sent"; exit {WRITE_FAILED_EXIT}; }}')
    return (f"__tb_sum=$( (sha256sum || shasum -a 256) < {path}) || {fail}\n"
            f'[ "$(wc -c < {path})" -eq {size} ] && [ "${{__tb_sum%% *}}" = {digest} ] || {fail}')

