"""Names, instance paths and sections: the quoting every remote string is built with.

Names that reach the shell are checked (:func:`check_name`), values are :func:`shlex.quote`-d;
``~/`` becomes ``"$HOME"/`` so it expands on the instance, not on the laptop. A script with
several answers is made of *sections*, framed by markers carrying a random token and parsed
back by :func:`parse_sections`.
"""

from __future__ import annotations

import re
import shlex
import uuid
from dataclasses import dataclass

from ..errors import TaoBrevError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
GPUS_RE = re.compile(r"^(all|[0-9]+(,[0-9]+)*)$")
SHM_RE = re.compile(r"^[0-9]+[bkmgBKMG]?$")

JOBS_ROOT = "~/tao-jobs"            # per-job scratch on the instance (spec, staged inputs)
RESULTS_ROOT = "~/tao-results"      # default instance results root
CONTAINER_JOB_DIR = "/tao/job"      # the job dir inside the container (spec lives here)
CONTAINER_RESULTS_DIR = "/results"  # the results dir inside the container
CONTAINER_DATA_DIR = "/data"        # inputs inside the container: /data/<NAME>


def check_name(value: str, what: str) -> str:
    """Names that reach a remote shell unquoted-safe: [A-Za-z0-9._-]. Raises BAD_NAME."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise TaoBrevError("BAD_NAME", f"invalid {what}: {value!r} (allowed: letters, digits, '.', '_', '-')")
    return value


def check_env_name(value: str) -> str:
    """An environment variable name (``--env NAME``). ``NAME=value`` is refused
    without repeating the value (it may be a credential). Raises BAD_ARGUMENT / BAD_NAME."""
    if isinstance(value, str) and "=" in value:
        name = value.partition("=")[0]
        raise TaoBrevError("BAD_ARGUMENT", f"--env takes a variable NAME only, got {name}=<value, not shown>",
                           f"Pass only the name and export the value in the shell that runs the script: "
                           f"export {name}=... (never on a command line), then --env {name}.")
    if not isinstance(value, str) or not ENV_NAME_RE.fullmatch(value):
        raise TaoBrevError("BAD_NAME", f"invalid environment variable name: {value!r}")
    return value


def rpath(path: str) -> str:
    """Quote an instance path for the remote shell: ``~/x`` -> ``"$HOME"/'x'``.

    Only ``~/...`` and absolute paths without ``..`` are accepted (a relative
    bind mount is a Docker volume name, not a path). Raises BAD_ARGUMENT.
    """
    if path == "~":
        return '"$HOME"'
    if ".." in path.split("/"):
        raise TaoBrevError("BAD_ARGUMENT", f"instance path must not contain '..' (got {path!r})")
    if path.startswith("~/"):
        rest = path[2:].rstrip("/")
        return '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"'
    if path.startswith("/"):
        return shlex.quote(path)
    raise TaoBrevError("BAD_ARGUMENT", f"instance path must be absolute or start with ~/ (got {path!r})")


def join(*parts: str) -> str:
    """Join instance path parts (``~/a`` + ``b`` -> ``~/a/b``)."""
    return "/".join(p.strip("/") if i else p.rstrip("/") for i, p in enumerate(parts))


def job_dir(job_id: str) -> str:
    return join(JOBS_ROOT, job_id)


# -- sections ---------------------------------------------------------------
@dataclass
class Section:
    name: str
    exit_code: int
    output: str


def section(token: str, name: str, command: str) -> str:
    """``command`` with stdout+stderr merged, framed as section ``name``."""
    return (f"printf '%s\\n' '{token}>{name}'; {{ {command}\n}} 2>&1; "
            f"printf '\\n%s %s\\n' '{token}<{name}' \"$?\"")


def new_token() -> str:
    return "S" + uuid.uuid4().hex[:12]


def parse_sections(text: str, token: str) -> dict[str, Section]:
    """Sections of ``text`` by name; a repeated name keeps the last one."""
    out: dict[str, Section] = {}
    pattern = re.compile(rf"^{token}>([^\n]+)\n(.*?)\n{token}<\1 (\d+)$", re.DOTALL | re.MULTILINE)
    for match in pattern.finditer(text):
        out[match.group(1)] = Section(match.group(1), int(match.group(3)), match.group(2))
    return out

