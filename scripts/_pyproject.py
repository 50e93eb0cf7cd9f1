"""Read what install.sh and CI need from pyproject.toml, with the standard library only.

usage: _pyproject.py requirements [--extra NAME ...] [FILE]
       _pyproject.py pythons [FILE]
       _pyproject.py no-deps [FILE]

requirements  prints [project] dependencies, then those of each --extra
              (optional-dependencies), one per line.
no-deps       prints [tool.tao-run-on-brev] no-deps, one per line: packages
              install.sh installs with --no-deps after the dependencies.
pythons       prints the oldest and the newest Python the bundle claims,
              "MAJOR.MINOR MAJOR.MINOR": the floor of requires-python (">=X.Y")
              and the highest "Programming Language :: Python :: X.Y" classifier.
FILE defaults to the pyproject.toml next to this directory.

Runs on any Python 3 (install.sh calls it before any environment exists):
tomllib where it exists (3.11+), else the small reader below, which parses the
TOML subset pyproject.toml uses (tables, dotted keys, strings of all four kinds,
integers, decimal floats, booleans, arrays, inline tables, comments) and stops with the line
number at anything else, so a list is never read half.
Exit codes: 0 done, 2 the file is missing, not that TOML, or lacks the field.

It is also pyproject.toml's build backend, whose only answer is that the bundle
is not a pip package (see NOT_A_PACKAGE): `pip install .` stops with that message.
"""

import os
import re
import sys

USAGE = __doc__.split("\n\n")[1]
DEFAULT_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyproject.toml")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_INTEGER = re.compile(r"[+-]?[0-9](_?[0-9])*$")
_FLOAT = re.compile(r"[+-]?[0-9](_?[0-9])*(\.[0-9](_?[0-9])*)?([eE][+-]?[0-9](_?[0-9])*)?$")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}


class TomlError(ValueError):
    """The text is not in the TOML subset this reader understands."""


class _Reader:
    """Recursive descent over the whole text; ``pos`` is an index into it."""

    def __init__(self, text):
        self.text, self.pos = text, 0

    def fail(self, what):
        line = self.text.count("\n", 0, self.pos) + 1
        raise TomlError("line %d: %s" % (line, what))

    def peek(self, n=1):
        return self.text[self.pos:self.pos + n]

    def expect(self, token, what):
        """Step over ``token`` here, or fail with ``what``."""
        if self.peek(len(token)) != token:
            self.fail(what)
        self.pos += len(token)

    def skip_space(self, newlines=False, comments=False):
        chars = " \t\r\n" if newlines else " \t"
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if char in chars:
                self.pos += 1
            elif char == "#" and comments:
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end
            else:
                break

    def end_of_line(self):
        self.skip_space(comments=True)
        if self.pos < len(self.text) and self.peek() not in "\r\n":
            self.fail("unexpected %r after a value" % self.peek())

    def key(self):
        """A dotted key as a list of parts."""
        parts = []
        while True:
            self.skip_space()
            if self.peek() in ('"', "'"):
                parts.append(self.string())
            else:
                match = _BARE_KEY.match(self.text, self.pos)
                if not match:
                    self.fail("expected a key")
                parts.append(match.group())
                self.pos = match.end()
            self.skip_space()
            if self.peek() != ".":
                return parts
            self.pos += 1

    def string(self):
        quote = self.peek()
        multi = self.peek(3) == quote * 3
        self.pos += 3 if multi else 1
        if multi and self.peek() == "\n":       # a newline right after the opening quotes is dropped
            self.pos += 1
        elif multi and self.peek(2) == "\r\n":
            self.pos += 2
        out = []
        while True:
            if self.pos >= len(self.text):
                self.fail("unterminated string")
            if multi and self.peek(3) == quote * 3:
                end = self.pos
                while end < len(self.text) and self.text[end] == quote:
                    end += 1
                run = end - self.pos
                if run > 5:
                    self.fail("too many quotes at the end of a string")
                self.pos += run                  # up to two quotes may end the content: """a"""""
                return "".join(out) + quote * (run - 3)
            char = self.text[self.pos]
            if not multi and char == quote:
                self.pos += 1
                return "".join(out)
            if not multi and char == "\n":
                self.fail("newline in a one-line string")
            if char == "\\" and quote == '"':
                out.append(self.escape(multi))
                continue
            out.append(char)
            self.pos += 1

    def escape(self, multi):
        self.pos += 1
        char = self.peek()
        if char in _ESCAPES:
            self.pos += 1
            return _ESCAPES[char]
        if char in ("u", "U"):
            width = 4 if char == "u" else 8
            digits = self.text[self.pos + 1:self.pos + 1 + width]
            if not re.match(r"[0-9A-Fa-f]{%d}$" % width, digits):
                self.fail("bad unicode escape")
            self.pos += 1 + width
            return chr(int(digits, 16))
        if multi and char in " \t\r\n":        # line-ending backslash: drop the newline and the indent
            rest = self.text[self.pos:]
            stripped = rest.lstrip(" \t")
            if not stripped.startswith(("\n", "\r\n")):
                self.fail("bad escape")
            self.skip_space(newlines=True)
            return ""
        self.fail("bad escape \\%s" % char)

    def value(self):
        char = self.peek()
        if char in ('"', "'"):
            return self.string()
        if char == "[":
            return self.array()
        if char == "{":
            return self.inline_table()
        match = re.compile(r"[A-Za-z0-9_:.+-]+").match(self.text, self.pos)
        if not match:
            self.fail("expected a value")
        self.pos = match.end()
        word = match.group()
        if word in ("true", "false"):
            return word == "true"
        if _INTEGER.match(word):
            return int(word.replace("_", ""))
        if _FLOAT.match(word):
            return float(word.replace("_", ""))
        self.fail("unsupported value %r (this reader takes strings, numbers, booleans, arrays, tables)" % word)

    def array(self):
        self.pos += 1
        items = []
        while True:
            self.skip_space(newlines=True, comments=True)
            if self.peek() == "]":
                self.pos += 1
                return items
            items.append(self.value())
            self.skip_space(newlines=True, comments=True)
            if self.peek() == ",":
                self.pos += 1
            elif self.peek() != "]":
                self.fail("expected ',' or ']' in an array")

    def inline_table(self):
        self.pos += 1
        table = {}
        self.skip_space()
        if self.peek() == "}":
            self.pos += 1
            return table
        while True:
            parts = self.key()
            self.expect("=", "expected '='")
            self.skip_space()
            _assign(table, parts, self.value(), self.fail)
            self.skip_space()
            if self.peek() == "}":
                self.pos += 1
                return table
            if self.peek() != ",":
                self.fail("expected ',' or '}' in an inline table")
            self.pos += 1

    def document(self):
        root = {}
        table = root
        while True:
            self.skip_space(newlines=True, comments=True)
            if self.pos >= len(self.text):
                return root
            if self.peek(2) == "[[":
                self.pos += 2
                parts = self.key()
                self.expect("]]", "expected ']]'")
                array = _walk(root, parts[:-1], self.fail).setdefault(parts[-1], [])
                if not isinstance(array, list):
                    self.fail("%s is not an array of tables" % ".".join(parts))
                table = {}
                array.append(table)
            elif self.peek() == "[":
                self.pos += 1
                parts = self.key()
                self.expect("]", "expected ']'")
                table = _walk(root, parts, self.fail)
            else:
                parts = self.key()
                self.expect("=", "expected '=' after a key")
                self.skip_space()
                _assign(table, parts, self.value(), self.fail)
            self.end_of_line()


def _walk(table, parts, fail):
    for part in parts:
        table = table.setdefault(part, {})
        if isinstance(table, list):
            table = table[-1]
        if not isinstance(table, dict):
            fail("%s is not a table" % ".".join(parts))
    return table


def _assign(table, parts, value, fail):
    target = _walk(table, parts[:-1], fail)
    if parts[-1] in target:
        fail("%s is defined twice" % ".".join(parts))
    target[parts[-1]] = value


def parse(text):
    """The document as nested dicts/lists (the subset described above); raises TomlError."""
    return _Reader(text).document()


def load(path, use_tomllib=True):
    """pyproject.toml as a dict: tomllib when present (and wanted), else :func:`parse`."""
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if use_tomllib:
        try:
            import tomllib
        except ImportError:
            pass
        else:
            return tomllib.loads(text)
    return parse(text)


def requirements(data, extras=()):
    """Dependencies, then those of each extra named, as one list of requirement strings."""
    project = data.get("project", {})
    reqs = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise TomlError("no optional-dependencies named %r" % extra)
        reqs += optional[extra]
    if not reqs or not all(isinstance(r, str) for r in reqs):
        raise TomlError("[project] dependencies is missing or not a list of strings")
    return reqs


def no_deps(data):
    """[tool.tao-run-on-brev] no-deps: packages installed without their declared dependencies."""
    reqs = data.get("tool", {}).get("tao-run-on-brev", {}).get("no-deps", [])
    if not isinstance(reqs, list) or not all(isinstance(r, str) for r in reqs):
        raise TomlError("[tool.tao-run-on-brev] no-deps is not a list of strings")
    return reqs


def pythons(data):
    """(oldest, newest) claimed: the floor of requires-python and the highest version classifier."""
    project = data.get("project", {})
    floor = re.match(r"\s*>=\s*(3\.\d+)\s*$", project.get("requires-python", ""))
    if not floor:
        raise TomlError("requires-python is not of the form '>=3.N'")
    versions = [c.rsplit("::", 1)[1].strip() for c in project.get("classifiers", [])
                if re.match(r"Programming Language :: Python :: 3\.\d+$", c)]
    if not versions:
        raise TomlError("no 'Programming Language :: Python :: 3.N' classifier")
    newest = max(versions, key=lambda v: tuple(int(n) for n in v.split(".")))
    return floor.group(1), newest


NOT_A_PACKAGE = (
    "tao-run-on-brev is not a pip package: it is a skill bundle (SKILL.md, scripts/, references/, "
    "versions.yaml) that runs from its own directory. Install it with `bash install.sh` "
    "(agents' skill folders) or `bash install.sh --local` (this checkout); see README.md.")


def _refuse(*_args, **_kwargs):
    """Every PEP 517/660 hook: pip shows this message and stops."""
    raise SystemExit(NOT_A_PACKAGE)


get_requires_for_build_wheel = get_requires_for_build_sdist = get_requires_for_build_editable = _refuse
build_wheel = build_sdist = build_editable = _refuse
prepare_metadata_for_build_wheel = prepare_metadata_for_build_editable = _refuse


def main(argv):
    args = list(argv)
    if not args or args[0] not in ("requirements", "pythons", "no-deps") or "-h" in args or "--help" in args:
        print(USAGE, file=sys.stderr if args and args[0] not in ("-h", "--help") else sys.stdout)
        return 0 if args and args[0] in ("-h", "--help") else 2
    mode, rest, extras = args.pop(0), [], []
    while args:
        arg = args.pop(0)
        if arg == "--extra" and args:
            extras.append(args.pop(0))
        elif arg.startswith("-"):
            print("_pyproject.py: unknown option %s\n%s" % (arg, USAGE), file=sys.stderr)
            return 2
        else:
            rest.append(arg)
    path = rest[0] if rest else DEFAULT_FILE
    try:
        data = load(path)
        lines = (requirements(data, extras) if mode == "requirements" else no_deps(data) if mode == "no-deps"
                 else [" ".join(pythons(data))])
    except (OSError, UnicodeDecodeError, ValueError) as exc:   # tomllib.TOMLDecodeError is a ValueError
        print("_pyproject.py: %s: %s" % (path, exc), file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
