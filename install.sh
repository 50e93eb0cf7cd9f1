#!/usr/bin/env bash
# Install the tao-run-on-brev skill bundle for agents, with its Python
# dependencies in an isolated environment that the scripts find by themselves.
#
# usage: install.sh [--claude] [--codex] [--agents] [--local] [--dev]
#                   [--uninstall] [--check] [--python PY] [-h|--help]
#
#   --claude     install to ~/.claude/skills/tao-run-on-brev
#   --codex      install to ~/.codex/skills/tao-run-on-brev
#   --agents     install to ~/.agents/skills/tao-run-on-brev
#                (no target flag = all three)
#   --local      do not copy: give THIS directory its own .venv (development,
#                demo, CI); with --check / --uninstall: check / remove that .venv
#   --dev        also install the test extras (pytest, moto server, awscli)
#   --uninstall  remove the chosen installs (and the shared environment when
#                no install is left)
#   --check      report what is installed, where, and whether it works
#                (exit 0 only if at least one install was found and all found work)
#   --python PY  the interpreter to build the environment with (default python3, >= 3.9)
#
# Works from a git checkout or an unpacked archive of the bundle alike.
# The environment is shared: ${XDG_DATA_HOME:-~/.local/share}/tao-run-on-brev/venv,
# linked as <install>/.venv; scripts/_bootstrap.py re-executes every script with
# it. Only the dependencies of pyproject.toml are installed into it (the
# bundle's own code stays in the install), so a second run with everything in
# place needs no network. Idempotent: running it again refreshes the files and
# the environment. It never asks for, reads or stores credentials.
# Exit codes: 0 done, 1 a step failed, 2 bad usage.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"   # started with sh: the rest needs bash
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME="tao-run-on-brev"
PY="python3"
PY_GIVEN=0
SHARED="${XDG_DATA_HOME:-$HOME/.local/share}/$NAME"
VENV="$SHARED/venv"
ALL_TARGETS=("$HOME/.claude/skills/$NAME" "$HOME/.codex/skills/$NAME" "$HOME/.agents/skills/$NAME")
targets=()
local_only=0 dev=0 uninstall=0 check=0

# The header above (line 2 up to the first line that is not a comment), without the leading '# '.
usage() { sed -n '2,/^[^#]/p' "$SRC/install.sh" | sed -e '$d' -e 's/^# \{0,1\}//'; }
say() { printf '%s\n' "$*" >&2; }
die() { say "install.sh: $1"; exit "${2:-1}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --claude) targets+=("${ALL_TARGETS[0]}") ;;
    --codex) targets+=("${ALL_TARGETS[1]}") ;;
    --agents) targets+=("${ALL_TARGETS[2]}") ;;
    --local) local_only=1 ;;
    --dev) dev=1 ;;
    --uninstall) uninstall=1 ;;
    --check) check=1 ;;
    --python)
      [ $# -ge 2 ] && [ -n "$2" ] || die "--python needs an interpreter (see --help)" 2
      shift; PY="$1"; PY_GIVEN=1 ;;
    --python=*) PY="${1#--python=}"; PY_GIVEN=1; [ -n "$PY" ] || die "--python needs an interpreter" 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (see install.sh --help)" 2 ;;
  esac
  shift
done
if [ "$uninstall" = 1 ] && [ "$check" = 1 ]; then die "--uninstall and --check exclude each other" 2; fi
if [ ${#targets[@]} -eq 0 ]; then targets=("${ALL_TARGETS[@]}"); fi

# Files that make the bundle (a checkout or an unpacked archive alike).
BUNDLE=(SKILL.md README.md ARCHITECTURE.md LICENSE pyproject.toml versions.yaml install.sh scripts references tao_brev examples tests)

requirements() { # $1 = python; prints pyproject's dependencies (+ the test extra with --dev), one per line
  "$1" - "$SRC/pyproject.toml" "$dev" <<'PY'
import re
import sys

text = open(sys.argv[1], encoding="utf-8").read()
try:  # Python >= 3.11
    import tomllib
    project = tomllib.loads(text)["project"]
    reqs = list(project.get("dependencies", []))
    if sys.argv[2] == "1":
        reqs += project.get("optional-dependencies", {}).get("test", [])
except ImportError:  # 3.9 / 3.10: the two arrays are plain lists of "..." strings
    def array(key):
        match = re.search(r"(?ms)^%s\s*=\s*\[(.*?)\]" % re.escape(key), text)
        return re.findall(r'"([^"]+)"', match.group(1)) if match else []
    reqs = array("dependencies") + (array("test") if sys.argv[2] == "1" else [])
if not reqs:
    sys.exit("no dependencies found in " + sys.argv[1])
print("\n".join(reqs))
PY
}

py_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }

make_venv() { # $1 = venv dir
  local venv="$1" reqfile want have
  "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null \
    || die "$PY is missing or older than Python 3.9 (pass --python PY)"
  want="$(py_version "$PY")"
  have="$(py_version "$venv/bin/python" || true)"
  if [ -z "$have" ] || { [ "$PY_GIVEN" = 1 ] && [ "$have" != "$want" ]; }; then
    say "creating the Python $want environment in $venv"
    mkdir -p "$(dirname "$venv")"
    "$PY" -m venv --clear "$venv" \
      || die "could not create a virtual environment with $PY (on Debian/Ubuntu: apt install python3-venv)"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2 \
      || say "install.sh: warning: could not upgrade pip in $venv; continuing with the bundled one"
  fi
  reqfile="$(mktemp "${TMPDIR:-/tmp}/$NAME-req.XXXXXX")"
  if ! requirements "$venv/bin/python" >"$reqfile"; then
    rm -f "$reqfile"; die "cannot read the dependencies from $SRC/pyproject.toml"
  fi
  say "installing the dependencies ($(paste -sd ' ' "$reqfile"))"
  if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$reqfile" >&2; then
    rm -f "$reqfile"; die "pip could not install the dependencies into $venv (network or index problem?)"
  fi
  rm -f "$reqfile"
}

venv_works() { # $1 = python
  "$1" -c 'import yaml, jsonschema, boto3' 2>/dev/null
}

script_works() { # $1 = bundle dir: its preflight.py answers --help in a clean environment
  env -i PATH="$PATH" HOME="$HOME" PYTHONDONTWRITEBYTECODE=1 "$1/scripts/preflight.py" --help >/dev/null 2>&1
}

copy_bundle() { # $1 = destination; the copy replaces it whole (no stale files survive)
  local dest="$1" tmp item
  tmp="$(mktemp -d "$(dirname "$dest")/.$NAME.XXXXXX")"
  for item in "${BUNDLE[@]}"; do
    if [ -e "$SRC/$item" ]; then cp -R "$SRC/$item" "$tmp/"; fi
  done
  [ -f "$tmp/SKILL.md" ] && [ -f "$tmp/scripts/preflight.py" ] \
    || { rm -rf "$tmp"; die "$SRC does not look like the $NAME bundle (no SKILL.md or scripts/)"; }
  find "$tmp" \( -name __pycache__ -o -name '*.pyc' -o -name .pytest_cache \) -prune -exec rm -rf {} + 2>/dev/null || true
  chmod +x "$tmp"/scripts/*.py "$tmp/install.sh"
  ln -s "$VENV" "$tmp/.venv"
  rm -rf "$dest"
  mv "$tmp" "$dest"
}

if [ "$check" = 1 ]; then
  found=0 broken=0
  if [ "$local_only" = 1 ]; then
    if [ -x "$SRC/.venv/bin/python" ] && venv_works "$SRC/.venv/bin/python"; then
      printf 'local      %s/.venv  python %s  environment ok\n' "$SRC" "$(py_version "$SRC/.venv/bin/python")"; exit 0
    fi
    printf 'local      %s/.venv  absent or BROKEN (run install.sh --local)\n' "$SRC"; exit 1
  fi
  for dest in "${targets[@]}"; do
    if [ -f "$dest/SKILL.md" ] && [ -x "$dest/scripts/preflight.py" ]; then
      found=$((found + 1))
      version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$dest/tao_brev/__init__.py" 2>/dev/null)
      if ! venv_works "$dest/.venv/bin/python"; then
        state="environment BROKEN (rerun install.sh)"; broken=1
      elif ! script_works "$dest"; then
        state="scripts BROKEN (rerun install.sh)"; broken=1
      else
        state="python $(py_version "$dest/.venv/bin/python"), environment ok ($(cd "$dest/.venv" && pwd -P))"
      fi
      printf 'installed  %s  version %s  %s\n' "$dest" "${version:-?}" "$state"
    else
      printf 'absent     %s\n' "$dest"
    fi
  done
  if [ "$found" = 0 ]; then say "install.sh: nothing installed (run install.sh)"; exit 1; fi
  exit "$broken"
fi

if [ "$uninstall" = 1 ]; then
  if [ "$local_only" = 1 ]; then
    if [ -e "$SRC/.venv" ] || [ -L "$SRC/.venv" ]; then rm -rf "$SRC/.venv"; say "removed $SRC/.venv"; fi
    exit 0
  fi
  for dest in "${targets[@]}"; do
    if [ -e "$dest" ] || [ -L "$dest" ]; then rm -rf "$dest"; say "removed $dest"; fi
  done
  left=0
  for dest in "${ALL_TARGETS[@]}"; do
    if [ -e "$dest" ] || [ -L "$dest" ]; then left=1; fi
  done
  if [ "$left" = 0 ] && [ -d "$SHARED" ]; then rm -rf "$SHARED"; say "removed $SHARED"; fi
  exit 0
fi

if [ "$local_only" = 1 ]; then
  make_venv "$SRC/.venv"
  say "ready: $SRC (scripts use $SRC/.venv)"
  exit 0
fi

make_venv "$VENV"
for dest in "${targets[@]}"; do
  if [ -L "$dest" ]; then   # a developer's link to a checkout: not ours to replace
    say "skipped $dest: it is a symlink to $(readlink "$dest") (remove it to install a copy there)"
    continue
  fi
  mkdir -p "$(dirname "$dest")"
  copy_bundle "$dest"
  script_works "$dest" || die "installed $dest, but scripts/preflight.py --help fails there"
  say "installed $dest"
done
