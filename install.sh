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
#   --local      do not copy: give THIS checkout its .venv (development, demo, CI)
#   --dev        also install the test extras (pytest, moto server, awscli)
#   --uninstall  remove the chosen installs (and the shared environment when
#                no install is left)
#   --check      report what is installed, where, and whether it works
#   --python PY  the interpreter to build the environment with (default python3, >= 3.9)
#
# The environment is shared: ${XDG_DATA_HOME:-~/.local/share}/tao-run-on-brev/venv,
# linked as <install>/.venv; scripts/_bootstrap.py re-executes every script with
# it. Idempotent: running it again refreshes the files and the environment.
# It never asks for, reads or stores credentials.
# Exit codes: 0 done, 1 a step failed, 2 bad usage.
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME="tao-run-on-brev"
PY="python3"
SHARED="${XDG_DATA_HOME:-$HOME/.local/share}/$NAME"
VENV="$SHARED/venv"
targets=()
local_only=0 dev=0 uninstall=0 check=0

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }
say() { printf '%s\n' "$*" >&2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --claude) targets+=("$HOME/.claude/skills/$NAME") ;;
    --codex) targets+=("$HOME/.codex/skills/$NAME") ;;
    --agents) targets+=("$HOME/.agents/skills/$NAME") ;;
    --local) local_only=1 ;;
    --dev) dev=1 ;;
    --uninstall) uninstall=1 ;;
    --check) check=1 ;;
    --python) shift; PY="${1:?--python needs an interpreter}" ;;
    -h|--help) usage; exit 0 ;;
    *) say "install.sh: unknown option $1"; usage >&2; exit 2 ;;
  esac
  shift
done
if [ ${#targets[@]} -eq 0 ]; then
  targets=("$HOME/.claude/skills/$NAME" "$HOME/.codex/skills/$NAME" "$HOME/.agents/skills/$NAME")
fi

# Files that make the bundle (a checkout or an unpacked archive alike).
BUNDLE=(SKILL.md README.md LICENSE pyproject.toml versions.yaml install.sh scripts references tao_brev examples tests)

make_venv() { # $1 = venv dir
  local venv="$1" extras=""
  [ "$dev" = 1 ] && extras="[test]"
  if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
    say "install.sh: $PY is missing or older than Python 3.9"; exit 1
  fi
  if [ ! -x "$venv/bin/python" ]; then
    say "creating the Python environment in $venv"
    mkdir -p "$(dirname "$venv")"
    "$PY" -m venv "$venv"
  fi
  say "installing the dependencies (PyYAML, jsonschema, boto3${extras:+, test extras})"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$SRC$extras" >&2
}

venv_works() { # $1 = python
  "$1" -c 'import yaml, jsonschema, boto3' 2>/dev/null
}

copy_bundle() { # $1 = destination
  local dest="$1" tmp
  tmp="$(mktemp -d "$(dirname "$dest")/.$NAME.XXXXXX")"
  for item in "${BUNDLE[@]}"; do
    [ -e "$SRC/$item" ] && cp -R "$SRC/$item" "$tmp/"
  done
  find "$tmp" \( -name __pycache__ -o -name '*.pyc' -o -name .pytest_cache \) -prune -exec rm -rf {} + 2>/dev/null || true
  chmod +x "$tmp"/scripts/*.py
  ln -s "$VENV" "$tmp/.venv"
  rm -rf "$dest"
  mv "$tmp" "$dest"
}

if [ "$check" = 1 ]; then
  status=0
  for dest in "${targets[@]}"; do
    if [ -f "$dest/SKILL.md" ] && [ -x "$dest/scripts/preflight.py" ]; then
      version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$dest/tao_brev/__init__.py" 2>/dev/null)
      if venv_works "$dest/.venv/bin/python"; then env_state="environment ok"; else env_state="environment BROKEN (rerun install.sh)"; status=1; fi
      printf 'installed  %s  version %s  %s\n' "$dest" "${version:-?}" "$env_state"
    else
      printf 'absent     %s\n' "$dest"
    fi
  done
  if [ -x "$SRC/.venv/bin/python" ]; then printf 'local      %s/.venv\n' "$SRC"; fi
  exit "$status"
fi

if [ "$uninstall" = 1 ]; then
  for dest in "${targets[@]}"; do
    if [ -e "$dest" ] || [ -L "$dest" ]; then rm -rf "$dest"; say "removed $dest"; fi
  done
  left=0
  for dest in "$HOME/.claude/skills/$NAME" "$HOME/.codex/skills/$NAME" "$HOME/.agents/skills/$NAME"; do
    [ -e "$dest" ] && left=1
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
  mkdir -p "$(dirname "$dest")"
  copy_bundle "$dest"
  say "installed $dest"
done
