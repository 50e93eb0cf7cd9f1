"""Command-line flag parsing the way spf13/pflag + cobra do it (brev and docker both use them).

- ``--name value``, ``--name=value``, ``-n value``, ``-nvalue``, bundled short
  booleans ``-dit``; a flag that takes a value consumes the next argument even
  when it starts with ``-`` (so ``-u --password-stdin`` sets the user).
- ``--`` ends flag parsing and is dropped; it does not group the words after it.
- Interspersed (cobra default): flags may follow positionals. Docker's ``run``
  disables that: everything after the image belongs to the command.
- Errors use pflag's wording: ``unknown flag: --x``,
  ``unknown shorthand flag: 'x' in -x``, ``flag needs an argument: --x``.
"""

from __future__ import annotations


class FlagError(Exception):
    """A pflag parse error; the message is pflag's."""


class FlagSpec:
    """The flags a command takes. A plain class: each simulated call is a new Python, and a dataclass
    (inspect, ast) or a NamedTuple (typing) would cost every call milliseconds of imports."""
    __slots__ = ("bools", "values", "multi", "short")

    def __init__(self, bools: set[str], values: set[str], multi: set[str], short: dict[str, str]):
        self.bools = bools
        self.values = values      # last one wins
        self.multi = multi        # repeatable, collected in order
        self.short = short

    @classmethod
    def make(cls, bools: str = "", values: str = "", multi: str = "", short: str = "") -> "FlagSpec":
        """Build from space-separated names; ``short`` is ``"d=detach e=env"``."""
        return cls(set(bools.split()), set(values.split()), set(multi.split()),
                   dict(pair.split("=", 1) for pair in short.split()))


def parse(args: list[str], spec: FlagSpec, interspersed: bool = True) -> tuple[dict, list[str]]:
    """Return (flags, positionals). Booleans map to True/False, multi flags to lists."""
    flags: dict = {name: [] for name in spec.multi}
    positionals: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positionals.extend(args[i:])
            break
        if arg.startswith("--") and len(arg) > 2:
            name, has_value, value = arg[2:].partition("=")
            if name in spec.bools:
                flags[name] = _bool(value, arg) if has_value else True
            elif name in spec.values or name in spec.multi:
                if not has_value:
                    if i >= len(args):
                        raise FlagError(f"flag needs an argument: --{name}")
                    value = args[i]
                    i += 1
                _store(flags, spec, name, value)
            else:
                raise FlagError(f"unknown flag: --{name}")
        elif arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            j = 0
            while j < len(letters):
                letter = letters[j]
                name = spec.short.get(letter)
                if name is None:
                    raise FlagError(f"unknown shorthand flag: '{letter}' in -{letters}")
                rest = letters[j + 1:]
                if name in spec.bools:
                    if rest.startswith("="):
                        flags[name] = _bool(rest[1:], arg)
                        break
                    flags[name] = True
                    j += 1
                    continue
                if rest:
                    value = rest[1:] if rest.startswith("=") else rest
                elif i < len(args):
                    value = args[i]
                    i += 1
                else:
                    raise FlagError(f"flag needs an argument: '{letter}' in -{letter}")
                _store(flags, spec, name, value)
                break
        else:
            positionals.append(arg)
            if not interspersed:
                positionals.extend(args[i:])
                break
    return flags, positionals


def _store(flags: dict, spec: FlagSpec, name: str, value: str) -> None:
    if name in spec.multi:
        flags[name].append(value)
    else:
        flags[name] = value


def _bool(value: str, arg: str) -> bool:
    if value.lower() in ("1", "t", "true"):
        return True
    if value.lower() in ("0", "f", "false"):
        return False
    raise FlagError(f'invalid argument "{value}" for "{arg.split("=")[0]}" flag: '
                    f'strconv.ParseBool: parsing "{value}": invalid syntax')
