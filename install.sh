#!/usr/bin/env bash
# Install the tao-run-on-brev skill bundle for agents, with its Python
# dependencies in an isolated environment that the scripts find by themselves.
#
# usage: install.sh [--claude] [--codex] [--agents] [--local] [--dev]
#                   [--uninstall] [--check] [--python PY] [-h|--help]
#
#   --claude     install to ~/.claude/skills/tao-run-on-brev
#   --codex      install to ${CODEX_HOME:-~/.codex}/skills/tao-run-on-brev
#   --agents     install to ~/.agents/skills/tao-run-on-brev
#                (no target flag = all three)
#   --local      do not copy: give THIS directory its own .venv (development,
#                demo, CI); with --check / --uninstall: check / remove that .venv
#   --dev        also install the test and dev extras (pytest, moto server,
#                awscli, uv; mutmut on Python 3.10+)
#   --uninstall  remove the chosen installs (and the shared environment when
#                no install is left)
#   --check      report what is installed, where, and whether it works: the
#                environment imports its dependencies, every script answers
#                --help, and SKILL.md names the scripts of that install
#                (exit 0 only if at least one install was found and all found work);
#                without a target flag, the checkout's own .venv (--local) too
#   --python PY  the interpreter to build the environment with (default python3,
#                >= 3.9: the floor of requires-python in pyproject.toml)
#
# Works from a git checkout or an unpacked archive of the bundle alike.
# The repository's SKILL.md and references/*.md are templates whose commands
# name their scripts as @SKILL_DIR@/scripts/NAME.py: each installed copy gets its
# own absolute path written in (scripts/_render_docs.py), so every command an
# agent copies is complete on its own. --local leaves the checkout's files as
# they are (read @SKILL_DIR@ as the checkout's path there).
# The environment is shared: ${XDG_DATA_HOME:-~/.local/share}/tao-run-on-brev/venv,
# linked as <install>/.venv. The installed scripts start that environment's python
# directly (their #! line names it; scripts/_bootstrap.py re-executes a script started
# by any other python with it), and their bytecode is compiled at install time, so a
# start reads it even with PYTHONDONTWRITEBYTECODE=1; --local compiles the checkout's
# (an edited file is compiled again on its next run, as usual). Only the
# dependencies of pyproject.toml are installed into it (the bundle's own code stays
# in the install), so a second run with everything in
# place needs no network. With `uv` on PATH the environment is made by
# `uv venv` + `uv pip install` (no ensurepip needed, faster); else by
# `PY -m venv` + pip. An environment that cannot be used (no runnable python,
# no pip for the pip path, a Python older than 3.9 or not the --python asked
# for) is recreated, and the output says why. Idempotent: running it again
# refreshes the files and the environment. It never asks for, reads or stores
# credentials. The bundle is not a pip package: `pip install .` refuses.
# Exit codes: 0 done, 1 a step failed, 2 bad usage.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"   # started with sh: the rest needs bash
set -euo pipefail

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME="tao-run-on-brev"
PY="python3"
PY_GIVEN=0
MIN_PY="3.9"   # pyproject.toml requires-python (tests/test_install.py checks they agree)
SHARED="${XDG_DATA_HOME:-$HOME/.local/share}/$NAME"
VENV="$SHARED/venv"
CODEX_DIR="${CODEX_HOME:-$HOME/.codex}"   # Codex reads its skills from $CODEX_HOME/skills
case "$CODEX_DIR" in /*) ;; *) CODEX_DIR="$PWD/$CODEX_DIR" ;; esac
ALL_TARGETS=("$HOME/.claude/skills/$NAME" "$CODEX_DIR/skills/$NAME" "$HOME/.agents/skills/$NAME")
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
targets_given=${#targets[@]}
if [ ${#targets[@]} -eq 0 ]; then targets=("${ALL_TARGETS[@]}"); fi

# Files that make the bundle (a checkout or an unpacked archive alike).
BUNDLE=(SKILL.md README.md ARCHITECTURE.md LICENSE pyproject.toml versions.yaml install.sh scripts references evals tao_brev examples tests)

requirements() { # prints pyproject's dependencies (+ the test and dev extras with --dev), one per line
  local extra=()
  if [ "$dev" = 1 ]; then extra=(--extra test --extra dev); fi
  "$PY" -I "$SRC/scripts/_pyproject.py" requirements ${extra[@]+"${extra[@]}"} "$SRC/pyproject.toml"
}

py_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }

py_recent() { # $1 = python: does it run, and is it at least MIN_PY?
  "$1" -c "import sys; sys.exit(sys.version_info[:2] < (${MIN_PY/./, }))" 2>/dev/null
}

venv_problem() { # $1 = venv dir, $2 = wanted X.Y, $3 = pip|uv; prints why it cannot be used (nothing if it can)
  local venv="$1" have
  if [ ! -e "$venv" ] && [ ! -L "$venv" ]; then echo "absent"; return; fi
  have="$(py_version "$venv/bin/python" || true)"
  if [ -z "$have" ]; then echo "its bin/python does not run (was its Python removed or moved?)"; return; fi
  if ! py_recent "$venv/bin/python"; then echo "it has Python $have, older than $MIN_PY"; return; fi
  if [ "$PY_GIVEN" = 1 ] && [ "$have" != "$2" ]; then echo "it has Python $have, not the $2 of --python"; return; fi
  if [ "$3" = pip ] && ! "$venv/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "it has no pip (a venv made without ensurepip, or by uv)"; return
  fi
}

make_venv() { # $1 = venv dir
  local venv="$1" reqfile want pyexe problem tool=pip
  py_recent "$PY" || die "$PY is missing or older than Python $MIN_PY (pass --python PY)"
  want="$(py_version "$PY")"
  pyexe="$("$PY" -c 'import sys; print(sys.executable)')"
  if command -v uv >/dev/null 2>&1; then tool=uv; fi
  problem="$(venv_problem "$venv" "$want" "$tool")"
  if [ -n "$problem" ]; then
    if [ "$problem" = absent ]; then
      say "creating the Python $want environment in $venv (with $tool)"
    else
      say "recreating the environment in $venv: $problem (now Python $want, with $tool)"
    fi
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    if [ "$tool" = uv ] && ! uv venv --quiet --python "$pyexe" "$venv" >&2; then
      say "install.sh: warning: uv venv failed; trying $PY -m venv"
      rm -rf "$venv"; tool=pip
    fi
    if [ "$tool" = pip ]; then
      if ! "$PY" -m venv "$venv"; then
        rm -rf "$venv"   # a half-made environment (no pip) must not poison the next run
        die "could not create a virtual environment with $PY (on Debian/Ubuntu: apt install python3-venv; or put uv on PATH)"
      fi
      "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2 \
        || say "install.sh: warning: could not upgrade pip in $venv; continuing with the bundled one"
    fi
  fi
  reqfile="$(mktemp "${TMPDIR:-/tmp}/$NAME-req.XXXXXX")"
  if ! requirements >"$reqfile"; then
    rm -f "$reqfile"; die "cannot read the dependencies from $SRC/pyproject.toml"
  fi
  say "installing the dependencies with $tool ($(paste -sd ' ' "$reqfile"))"
  if [ "$tool" = uv ]; then
    uv pip install --quiet --python "$venv/bin/python" -r "$reqfile" >&2 || {
      rm -f "$reqfile"; die "uv could not install the dependencies into $venv (network or index problem?)"; }
  elif ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$reqfile" >&2; then
    rm -f "$reqfile"; die "pip could not install the dependencies into $venv (network or index problem?)"
  fi
  rm -f "$reqfile"
  install_no_deps "$venv" "$tool"
}

install_no_deps() { # $1 = venv, $2 = pip|uv: pyproject's [tool.tao-run-on-brev] no-deps (TAO's schemas), --no-deps
  local venv="$1" tool="$2" pkgs
  pkgs="$("$PY" -I "$SRC/scripts/_pyproject.py" no-deps "$SRC/pyproject.toml" | paste -sd ' ')" \
    || die "cannot read [tool.tao-run-on-brev] no-deps from $SRC/pyproject.toml"
  [ -n "$pkgs" ] || return 0
  say "installing without their dependencies ($pkgs): submit.py checks specs against TAO's schemas with them"
  # shellcheck disable=SC2086  # one word per requirement
  if [ "$tool" = uv ]; then
    uv pip install --quiet --no-deps --python "$venv/bin/python" $pkgs >&2 && return 0
  elif "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps $pkgs >&2; then
    return 0
  fi
  say "install.sh: warning: could not install $pkgs: submit.py will warn that it cannot check specs against TAO's schema"
}

docs_stale() { # $1 = install dir; succeeds when its SKILL.md does not name its own scripts (a moved copy, a template)
  grep -qF '@SKILL_DIR@' "$1/SKILL.md" && return 0
  grep -qF "$1/scripts/preflight.py" "$1/SKILL.md" && return 1
  grep -qF "'$1'/scripts/preflight.py" "$1/SKILL.md" && return 1
  return 0
}

venv_works() { # $1 = python
  "$1" -c 'import yaml, jsonschema, boto3' 2>/dev/null
}

precompile() { # $1 = python, $2 = bundle dir: write the bytecode of the bundle's code (start-up time)
  "$1" -m compileall -q "$2/tao_brev" "$2/scripts" >/dev/null \
    || say "install.sh: warning: could not precompile $2 (the scripts still work, only start slower)"
}

point_at_venv() { # $1 = bundle dir: the scripts' #! line names the environment's python (no re-exec)
  local python="$VENV/bin/python" script
  # the kernel reads at most 127 bytes of a #! line and splits it at blanks: keep env python3 then
  if [ ${#python} -gt 120 ] || [[ "$python" =~ [[:space:]] ]]; then return 0; fi
  for script in "$1"/scripts/[!_]*.py; do
    sed -i.bak "1s|^#!.*python3\{0,1\}\$|#!$python|" "$script" && rm -f "$script.bak"
  done
}

broken_scripts() { # $1 = bundle dir; prints the scripts that do not answer --help in a clean environment
  local script
  for script in "$1"/scripts/[!_]*.py; do
    env -i PATH="$PATH" HOME="$HOME" PYTHONDONTWRITEBYTECODE=1 "$script" --help >/dev/null 2>&1 \
      || printf '%s ' "$(basename "$script")"
  done
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
  # the absolute path of the copy into its documents (it is what agents run)
  "$PY" -I "$tmp/scripts/_render_docs.py" "$tmp" "$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")" \
    || { rm -rf "$tmp"; die "could not write $dest into its SKILL.md"; }
  point_at_venv "$tmp"
  ln -s "$VENV" "$tmp/.venv"
  rm -rf "$dest"
  mv "$tmp" "$dest"
  precompile "$VENV/bin/python" "$dest"   # after the move: the bytecode names the files where they stay
}

check_local() { # the checkout's own install (install.sh --local): prints its state; 0 ok, 1 broken, 2 absent
  local failing
  if ! [ -e "$SRC/.venv" ] && ! [ -L "$SRC/.venv" ]; then
    printf 'absent     %s/.venv  (the checkout install: install.sh --local)\n' "$SRC"; return 2
  fi
  if ! [ -x "$SRC/.venv/bin/python" ] || ! venv_works "$SRC/.venv/bin/python"; then
    printf 'local      %s/.venv  environment BROKEN (run install.sh --local)\n' "$SRC"; return 1
  fi
  failing="$(broken_scripts "$SRC")"
  if [ -n "$failing" ]; then
    printf 'local      %s/.venv  scripts BROKEN: %s(they fail --help; run install.sh --local)\n' "$SRC" "$failing"
    return 1
  fi
  printf 'local      %s/.venv  python %s  environment ok\n' "$SRC" "$(py_version "$SRC/.venv/bin/python")"
}

is_target() { # $1 = dir: one of the skill dirs (an installed copy, whose .venv is the shared one)
  local dest
  for dest in "${ALL_TARGETS[@]}"; do [ "$(cd "$dest" 2>/dev/null && pwd -P)" = "$(cd "$1" && pwd -P)" ] && return 0; done
  return 1
}

if [ "$check" = 1 ]; then
  found=0 broken=0
  if [ "$local_only" = 1 ]; then
    rc=0; check_local || rc=$?
    exit $((rc != 0))
  fi
  # no target flag: every install there is, the checkout's own .venv (install.sh --local) included
  if [ "$targets_given" = 0 ] && ! is_target "$SRC"; then
    rc=0; check_local || rc=$?
    if [ "$rc" != 2 ]; then found=$((found + 1)); fi
    if [ "$rc" = 1 ]; then broken=1; fi
  fi
  for dest in "${targets[@]}"; do
    if [ -f "$dest/SKILL.md" ] && [ -x "$dest/scripts/preflight.py" ]; then
      found=$((found + 1))
      version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' "$dest/tao_brev/__init__.py" 2>/dev/null)
      failing=""
      if ! venv_works "$dest/.venv/bin/python"; then
        state="environment BROKEN (rerun install.sh)"; broken=1
      elif failing="$(broken_scripts "$dest")" && [ -n "$failing" ]; then
        state="scripts BROKEN: ${failing}(they fail --help; rerun install.sh)"; broken=1
      elif docs_stale "$dest"; then
        state="SKILL.md STALE: its commands do not name the scripts of $dest (moved? rerun install.sh)"; broken=1
      else
        state="python $(py_version "$dest/.venv/bin/python"), environment ok ($(cd "$dest/.venv" && pwd -P))"
      fi
      printf 'installed  %s  version %s  %s\n' "$dest" "${version:-?}" "$state"
    else
      printf 'absent     %s\n' "$dest"
    fi
  done
  if [ "$found" = 0 ]; then
    if [ "$targets_given" != 0 ] && { [ -e "$SRC/.venv" ] || [ -L "$SRC/.venv" ]; } && ! is_target "$SRC"; then
      say "install.sh: not installed there; the checkout $SRC has its own install (install.sh --local --check)"
    else
      say "install.sh: nothing installed (run install.sh, or install.sh --local for this checkout)"
    fi
    exit 1
  fi
  exit "$broken"
fi

# The folders an install created (e.g. ~/.claude/skills, ~/.local/share when missing), one per line in
# $SHARED/created-dirs, so --uninstall removes them again once they are empty - and nothing else.
CREATED="$SHARED/created-dirs"
note_created_dirs() {
  local dir="$1" missing=()
  while [ -n "$dir" ] && [ "$dir" != "/" ] && [ ! -e "$dir" ]; do missing+=("$dir"); dir="$(dirname "$dir")"; done
  [ "${#missing[@]}" -gt 0 ] || return 0
  mkdir -p "$SHARED"
  for dir in "${missing[@]}"; do grep -qxF "$dir" "$CREATED" 2>/dev/null || printf '%s\n' "$dir" >> "$CREATED"; done
}
remove_created_dirs() {   # deepest first; rmdir leaves a folder that holds anything else
  [ -f "$CREATED" ] || return 0
  local dir kept=()
  while IFS= read -r dir; do
    if [ -d "$dir" ] && rmdir "$dir" 2>/dev/null; then say "removed $dir (install.sh created it)"
    elif [ -d "$dir" ]; then kept+=("$dir"); fi
  done < <(awk '{ print length, $0 }' "$CREATED" | sort -rn | cut -d' ' -f2-)
  if [ "${#kept[@]}" -gt 0 ]; then printf '%s\n' "${kept[@]}" > "$CREATED"; else rm -f "$CREATED"; fi
}

if [ "$uninstall" = 1 ]; then
  if [ "$local_only" = 1 ]; then
    if [ -e "$SRC/.venv" ] || [ -L "$SRC/.venv" ]; then rm -rf "$SRC/.venv"; say "removed $SRC/.venv"; fi
    exit 0
  fi
  for dest in "${targets[@]}"; do
    if [ -e "$dest" ] || [ -L "$dest" ]; then rm -rf "$dest"; say "removed $dest"; fi
  done
  remove_created_dirs
  left=0
  for dest in "${ALL_TARGETS[@]}"; do
    if [ -e "$dest" ] || [ -L "$dest" ]; then left=1; fi
  done
  if [ "$left" = 0 ] && [ -d "$SHARED" ]; then
    created_list="$(mktemp)"   # the folders above $SHARED that install made, listed inside it
    if [ -f "$CREATED" ]; then cp "$CREATED" "$created_list"; fi
    rm -rf "$SHARED"; say "removed $SHARED"
    CREATED="$created_list" remove_created_dirs
    rm -f "$created_list"
  fi
  exit 0
fi

if [ "$local_only" = 1 ]; then
  make_venv "$SRC/.venv"
  precompile "$SRC/.venv/bin/python" "$SRC"
  say "ready: $SRC (scripts use $SRC/.venv)"
  exit 0
fi

note_created_dirs "$SHARED"   # e.g. ~/.local/share on a fresh home: --uninstall removes it again
make_venv "$VENV"
for dest in "${targets[@]}"; do
  if [ -L "$dest" ]; then   # a developer's link to a checkout: not ours to replace
    say "skipped $dest: it is a symlink to $(readlink "$dest") (remove it to install a copy there)"
    continue
  fi
  note_created_dirs "$(dirname "$dest")"
  mkdir -p "$(dirname "$dest")"
  copy_bundle "$dest"
  failing="$(broken_scripts "$dest")"
  [ -z "$failing" ] || die "installed $dest, but these scripts fail --help there: $failing"
  say "installed $dest"
done
