"""Write an installed copy's absolute path into its documents (install.sh calls it).

usage: _render_docs.py BUNDLE_DIR [SKILL_DIR]

The repository keeps SKILL.md and references/*.md as templates: every command
names its script as ``@SKILL_DIR@/scripts/NAME.py``. An agent's shell keeps no
variable between calls, so the installed copy must name the real directory in
each command instead of a ``$SKILL_DIR`` set once. This replaces the token in
BUNDLE_DIR's SKILL.md and references/*.md with SKILL_DIR (default: BUNDLE_DIR),
made absolute and quoted for a POSIX shell when it needs quoting (a path with a
space stays one word). Files without the token are left as they are.

Runs on any Python 3 with the standard library only (install.sh calls it with
the interpreter it builds the environment with).
Exit codes: 0 done, 2 bad usage (no such directory, a path with a newline).
"""

import os
import shlex
import sys

TOKEN = "@SKILL_DIR@"


def documents(bundle_dir):
    """The files that may hold the token: SKILL.md and references/*.md."""
    found = [os.path.join(bundle_dir, "SKILL.md")]
    refs = os.path.join(bundle_dir, "references")
    if os.path.isdir(refs):
        found += [os.path.join(refs, name) for name in sorted(os.listdir(refs)) if name.endswith(".md")]
    return [path for path in found if os.path.isfile(path)]


def render_text(text, skill_dir):
    """``text`` with every token replaced by the shell-quoted absolute ``skill_dir``."""
    if "\n" in skill_dir:
        raise ValueError("a directory name with a newline cannot be written into a command")
    return text.replace(TOKEN, shlex.quote(os.path.abspath(skill_dir)))


def render(bundle_dir, skill_dir=None):
    """Render the documents of ``bundle_dir`` in place; returns the paths changed."""
    changed = []
    for path in documents(bundle_dir):
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if TOKEN not in text:
            continue
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(render_text(text, skill_dir or bundle_dir))
        changed.append(path)
    return changed


def main(argv):
    if len(argv) not in (1, 2) or argv[0] in ("-h", "--help") or not os.path.isdir(argv[0]):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    try:
        render(argv[0], argv[1] if len(argv) == 2 else None)
    except ValueError as exc:
        sys.stderr.write("_render_docs.py: %s\n" % exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
