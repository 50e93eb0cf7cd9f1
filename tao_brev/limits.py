"""Size caps checked before anything is recorded or sent.

* an ``--env`` value: at most :data:`MAX_ENV_VALUE_BYTES` (64 KiB); a longer one is no
  credential, and every later redaction searches each of its encodings;
* the launch script: it travels as ONE argument of ``brev exec`` (``brev exec NAME
  SCRIPT``), and Linux refuses an argument longer than MAX_ARG_STRLEN (32 pages,
  131072 bytes: ``execve`` fails with E2BIG). The script is refused at
  :data:`MAX_SCRIPT_BYTES` (leaving room for the lines the launch adds: staging checks,
  the credential file) before a record opens, never after.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from .errors import TaoBrevError

MAX_ENV_VALUE_BYTES = 64 * 1024
MAX_ARG_STRLEN = 32 * 4096               # Linux include/uapi/linux/binfmts.h: MAX_ARG_STRLEN (PAGE_SIZE * 32)
MAX_SCRIPT_BYTES = MAX_ARG_STRLEN - 8 * 1024


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def refuse_long_env(names: Iterable[str], env: Mapping[str, str]) -> None:
    """VALUE_TOO_LONG when the value of one of ``names`` in ``env`` exceeds MAX_ENV_VALUE_BYTES
    (the message gives the name and the size, never the value)."""
    for name in names:
        value = env.get(name) if isinstance(name, str) else None
        if isinstance(value, str) and len(value) * 4 > MAX_ENV_VALUE_BYTES and _size(value) > MAX_ENV_VALUE_BYTES:
            raise TaoBrevError("VALUE_TOO_LONG", f"--env {name}: its value is {_size(value)} bytes, more than "
                               f"{MAX_ENV_VALUE_BYTES} (no credential is that long): nothing was recorded or sent",
                               f"Put large data in a file the job reads (--inputs); pass {name} a value of at most "
                               f"{MAX_ENV_VALUE_BYTES} bytes.")


def refuse_long_script(script: str, overrides: int) -> None:
    """VALUE_TOO_LONG when the launch script would exceed MAX_SCRIPT_BYTES (``execve``: E2BIG)."""
    size = _size(script)
    if size > MAX_SCRIPT_BYTES:
        raise TaoBrevError("VALUE_TOO_LONG", f"the launch script would be {size} bytes ({overrides} overrides and "
                           f"the spec), more than {MAX_SCRIPT_BYTES}: one argument of `brev exec` is at most "
                           f"{MAX_ARG_STRLEN} bytes (Linux MAX_ARG_STRLEN); nothing was recorded or sent",
                           "Move overrides into the spec file (it travels once) and keep the spec small "
                           "(data goes in --inputs).")
