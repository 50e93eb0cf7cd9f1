"""install.sh, end to end, in a temporary HOME: install for each agent, run an
installed script with nothing but PATH, reinstall, --check (which runs every
script), CODEX_HOME, uninstall; the same from an unpacked archive of the bundle;
recovery from a broken environment with the dev dependencies on the oldest
claimed Python; the uv path; `pip install .` refused.

Invariant: an installed copy works from a clean environment - its scripts find
their isolated Python environment by themselves - and install.sh never reads
or stores a credential.

Creating the environment (venv + pip install of PyYAML, jsonschema, boto3) is
the slow part and needs the package index, so the whole module shares ONE
environment (module-scoped XDG_DATA_HOME) and the real pip cache; every later
install only re-checks it. The tests run in file order and build on each other.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import uuid
from pathlib import Path

import pytest
import yaml

from conftest import find_python

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from _render_docs import TOKEN  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NAME = "tao-run-on-brev"
TARGETS = {"--claude": ".claude/skills", "--codex": ".codex/skills", "--agents": ".agents/skills"}
# Credential values in the installer's environment: made at run time, so no file holds them by chance.
SENTINELS = {"NGC_KEY": "nvapi-" + uuid.uuid4().hex, "BREV_API_TOKEN": "brev-" + uuid.uuid4().hex,
             "AWS_SECRET_ACCESS_KEY": uuid.uuid4().hex + uuid.uuid4().hex[:8]}
pytestmark = pytest.mark.slow


def _bundle_items() -> list[str]:
    """The BUNDLE list of install.sh: what a copy and an archive contain."""
    match = re.search(r"^BUNDLE=\(([^)]*)\)", (ROOT / "install.sh").read_text(), re.M)
    assert match, "install.sh defines BUNDLE=(...)"
    return match.group(1).split()


def _without_uv(path: str) -> str:
    """PATH minus the directories that hold a uv: install.sh then takes its pip path."""
    return os.pathsep.join(d for d in path.split(os.pathsep) if d and not os.access(os.path.join(d, "uv"), os.X_OK))


def _uv_dir() -> str:
    """The directory of a uv executable (uv is in the test extra, so the venv has one)."""
    for candidate in (shutil.which("uv"), str(Path(sys.executable).parent / "uv")):
        if candidate and os.access(candidate, os.X_OK):
            return str(Path(candidate).parent)
    pytest.fail("no uv: it is in the test extra of pyproject.toml (bash install.sh --local --dev)", pytrace=False)


def _floor() -> str:
    """The oldest Python the bundle claims (requires-python)."""
    floor = subprocess.run([sys.executable, str(ROOT / "scripts" / "_pyproject.py"), "pythons"],
                           capture_output=True, text=True, check=True)
    return floor.stdout.split()[0]


def _pip_cache() -> str:
    if os.environ.get("PIP_CACHE_DIR"):
        return os.environ["PIP_CACHE_DIR"]
    done = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else str(Path.home() / ".cache" / "pip")


class Sandbox:
    """A fake user: HOME, XDG_DATA_HOME (the shared environment) and the install env."""

    def __init__(self, base: Path):
        self.base = base
        self.xdg = base / "xdg"
        self.home = base / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        network = ("SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")   # how this machine reaches the index
        keep = {k: v for k, v in os.environ.items() if k.startswith(("PIP_", "UV_")) or k in ("LANG", "TMPDIR", *network)
                or k.lower() in ("http_proxy", "https_proxy", "no_proxy", "all_proxy")}
        self.env = {**keep, "HOME": str(self.home), "XDG_DATA_HOME": str(self.xdg),
                    "PATH": _without_uv(os.environ["PATH"]),
                    "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(Path.home() / ".cache" / "uv"),
                    "PIP_CACHE_DIR": _pip_cache(), "PIP_DISABLE_PIP_VERSION_CHECK": "1", **SENTINELS}
        self.env.pop("PIP_REQUIRE_VIRTUALENV", None)
        self.env.pop("CODEX_HOME", None)

    @property
    def venv(self) -> Path:
        return self.xdg / NAME / "venv"

    def dest(self, flag: str, home: Path | None = None) -> Path:
        return (home or self.home) / TARGETS[flag] / NAME

    def install(self, *args: str, src: Path = ROOT, home: Path | None = None, timeout: float = 240, **extra_env):
        env = {**self.env, "HOME": str(home or self.home), **extra_env}
        return subprocess.run(["bash", str(src / "install.sh"), *args], env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)


def _bare_python_dir(base: Path) -> Path:
    """A bin dir whose python3 has none of the dependencies (a venv without pip):
    an installed script started with it works only if it finds its own environment."""
    bare = base / "bare"
    if not (bare / "bin" / "python3").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    assert subprocess.run([str(bare / "bin" / "python3"), "-c", "import yaml"], capture_output=True).returncode != 0
    return bare / "bin"


def run_installed(dest: Path, script: str, *args: str, path_dirs=(), cwd: Path | None = None, **env):
    """Run an installed script with a clean environment: PATH only (plus ``env``)."""
    path = os.pathsep.join([*map(str, path_dirs), "/usr/bin", "/bin"])
    return subprocess.run([str(dest / "scripts" / script), *args], env={"PATH": path, **env}, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL, cwd=cwd or dest)


def as_template(text: str, dest: Path) -> str:
    """An installed document with its own absolute path turned back into the repository's token."""
    return text.replace(str(dest), TOKEN)


def tree_digest(path: Path) -> dict[str, str]:
    """relative path -> sha256 (symlinks: their target), to compare installs; the documents
    are compared as templates (each install writes its own path into them)."""
    out = {}
    for item in sorted(path.rglob("*")):
        rel = str(item.relative_to(path))
        if "__pycache__" in item.parts:        # bytecode written by running the scripts
            continue
        if item.is_symlink():
            out[rel] = "-> " + os.readlink(item)
        elif item.suffix == ".md":
            out[rel] = hashlib.sha256(as_template(item.read_text(encoding="utf-8"), path).encode()).hexdigest()
        elif item.is_file():
            out[rel] = hashlib.sha256(item.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def box(tmp_path_factory):
    """One sandbox for the module; its first install creates the one environment."""
    sandbox = Sandbox(tmp_path_factory.mktemp("install"))
    done = sandbox.install("--claude")
    assert done.returncode == 0, done.stderr
    assert (sandbox.venv / "bin" / "python").exists()
    sandbox.first_install = done
    return sandbox


# -- usage --------------------------------------------------------------------
def test_help_and_bad_usage():
    help_ = subprocess.run(["bash", str(ROOT / "install.sh"), "--help"], capture_output=True, text=True)
    assert help_.returncode == 0 and "usage: install.sh" in help_.stdout
    for flag in ("--claude", "--codex", "--agents", "--local", "--dev", "--uninstall", "--check", "--python"):
        assert flag in help_.stdout
    for bad in (["--bogus"], ["--python"], ["--check", "--uninstall"]):
        done = subprocess.run(["bash", str(ROOT / "install.sh"), *bad], capture_output=True, text=True,
                              env={"PATH": os.environ["PATH"], "HOME": "/nonexistent"})
        assert done.returncode == 2, (bad, done)
        assert done.stderr.startswith("install.sh: "), done.stderr


def test_install_sh_started_with_sh_reexecs_with_bash():
    done = subprocess.run(["/bin/sh", str(ROOT / "install.sh"), "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "usage: install.sh" in done.stdout, done


def test_every_bundle_item_exists():
    missing = [item for item in _bundle_items() if not (ROOT / item).exists()]
    assert not missing, f"install.sh BUNDLE names files that do not exist: {missing}"


# -- install from the checkout --------------------------------------------------------
def test_install_for_claude_copies_the_bundle_and_links_the_environment(box):
    dest = box.dest("--claude")
    assert (dest / "SKILL.md").is_file() and (dest / "LICENSE").is_file()
    assert os.readlink(dest / ".venv") == str(box.venv)
    for item in _bundle_items():
        assert (dest / item).exists(), item
    assert not (dest / ".git").exists() and not (dest / "bench").exists()
    assert all(os.access(p, os.X_OK) for p in (dest / "scripts").glob("*.py"))
    # bytecode: compiled at install for the code scripts run (read even with PYTHONDONTWRITEBYTECODE=1),
    # none copied from the source tree
    tag = subprocess.run([str(box.venv / "bin" / "python"), "-c", "import sys; print(sys.implementation.cache_tag)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    code = [p for d in ("tao_brev", "scripts") for p in (dest / d).rglob("*.py")]
    assert all((p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc").is_file() for p in code), code
    assert {p.parent.relative_to(dest) for p in dest.rglob("__pycache__")} <= {p.parent.relative_to(dest) for p in code}
    # the scripts start the environment's python themselves: no second interpreter start
    assert all(p.read_text().startswith(f"#!{box.venv / 'bin' / 'python'}\n")
               for p in (dest / "scripts").glob("[!_]*.py"))
    # the Agent Skills rule: the name in the front matter is the directory's name
    front = yaml.safe_load((dest / "SKILL.md").read_text().split("---\n")[1])
    assert front["name"] == dest.name
    assert "installed " + str(dest) in box.first_install.stderr
    assert not box.dest("--codex").exists() and not box.dest("--agents").exists()


def _installed_commands(doc: Path) -> list[tuple[str, list[str]]]:
    """(line, words) of every shell line of an installed document that runs one of the bundle's files."""
    import test_docs

    out = []
    for block in test_docs.blocks(doc):
        if block.lang not in test_docs.SHELL_LANGS:
            continue
        for line in test_docs.logical_lines(block.text):
            words = test_docs._words(line)
            if test_docs.script_calls(line) or any(os.path.basename(w) == "install.sh" for w in words):
                out.append((line, words))
    return out


def test_installed_documents_name_existing_absolute_script_paths(box):
    """An agent's shell keeps no variable between calls: every command of the installed SKILL.md
    (and of its references) names the installed scripts by absolute path, no placeholder left."""
    import test_docs

    dest = box.dest("--claude")
    docs = [dest / "SKILL.md", *sorted((dest / "references").glob("*.md"))]
    for doc in docs:
        assert TOKEN not in doc.read_text(encoding="utf-8"), doc
    assert as_template((dest / "SKILL.md").read_text(), dest) == (ROOT / "SKILL.md").read_text()
    named = []
    for doc in docs:
        for line, words in _installed_commands(doc):
            ours = [w for w in words if os.path.basename(w) in (*test_docs.SCRIPTS, "install.sh")]
            assert ours, line
            for word in ours:
                assert word.startswith(str(dest) + "/"), f"{doc.name}: {word} in `{line}` is not the installed path"
                assert os.access(word, os.X_OK) or word.endswith("install.sh"), word
                assert Path(word).is_file(), word
                named.append((doc.name, word))
    in_skill = {os.path.basename(w) for d, w in named if d == "SKILL.md"}
    assert in_skill >= {"install.sh", "preflight.py", "submit.py", "poll_status.py", "teardown.py",
                        "tao_job_record.py"}, in_skill


def test_check_reports_a_skill_md_that_names_another_directory(box, tmp_path):
    """A copy moved by hand (or a template copied in) still has commands naming another directory:
    --check says so, with exit 1, and a reinstall writes the right path again."""
    dest = box.dest("--claude")
    skill = dest / "SKILL.md"
    good = skill.read_text()
    try:
        for stale in (good.replace(str(dest), str(tmp_path / "moved-away")), (ROOT / "SKILL.md").read_text()):
            skill.write_text(stale)
            check = box.install("--check", "--claude")
            assert check.returncode == 1 and "SKILL.md STALE" in check.stdout, check
    finally:
        skill.write_text(good)
    assert box.install("--check", "--claude").returncode == 0


def test_a_home_with_a_space_gets_commands_that_still_run(box, tmp_path):
    """The path is written shell-quoted: the documented command runs as copied."""
    home = tmp_path / "home with space"
    done = box.install("--claude", home=home)
    assert done.returncode == 0, done.stderr
    dest = box.dest("--claude", home=home)
    text = (dest / "SKILL.md").read_text()
    assert f"'{dest}'/scripts/preflight.py" in text and TOKEN not in text
    check = box.install("--check", "--claude", home=home)
    assert check.returncode == 0 and "environment ok" in check.stdout, check
    line = next(line for line, words in _installed_commands(dest / "SKILL.md")
                if any(w.endswith("/tao_job_record.py") for w in words) and " list" in line)
    ran = subprocess.run(["bash", "-c", line], env={"PATH": "/usr/bin:/bin", "HOME": str(home),
                                                   "TAO_STATE_DIR": str(tmp_path / "state")},
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert ran.returncode == 0, ran


def test_installed_script_runs_with_only_path(box, tmp_path):
    dest = box.dest("--claude")
    done = run_installed(dest, "preflight.py", "--help")
    assert done.returncode == 0, done
    assert "usage: preflight.py" in done.stdout and "--instance" in done.stdout
    # with a python3 that lacks the dependencies first on PATH, a script that needs
    # PyYAML still works: its #! line names the environment's python
    spec = tmp_path / "train.yaml"
    shutil.copy(dest / "examples" / "visual_changenet" / "train.yaml", spec)
    dry = run_installed(dest, "submit.py", "--instance", "box", "--image", "images.tao_toolkit.pyt",
                        "--network-arch", "visual_changenet", "--action", "train", "--spec", str(spec),
                        "--inputs", "~/data=levir_cd_tiny", "--dry-run", path_dirs=[_bare_python_dir(tmp_path)], cwd=tmp_path,
                        HOME=str(tmp_path))
    assert dry.returncode == 0, dry
    assert '"dry_run": true' in dry.stdout
    # started explicitly by that python3, the script re-executes itself with the environment's
    by_hand = subprocess.run([str(_bare_python_dir(tmp_path) / "python3"), str(dest / "scripts" / "preflight.py"),
                              "--help"], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
    assert by_hand.returncode == 0 and "usage: preflight.py" in by_hand.stdout, by_hand
    lint = run_installed(dest, "redact_secrets.py", "lint", str(dest / "SKILL.md"))
    assert lint.returncode == 0, lint


def test_check_reports_the_install(box):
    done = box.install("--check")
    assert done.returncode == 0, done
    dest = box.dest("--claude")
    assert re.search(rf"^installed  {re.escape(str(dest))}  version \S+  python \S+, environment ok \(.*\)$",
                     done.stdout, re.M), done.stdout
    assert f"absent     {box.dest('--codex')}" in done.stdout
    # a broken environment is reported, with exit 1
    site = box.venv / "lib"
    yaml_dirs = [p for p in site.glob("python*/site-packages/yaml")]
    assert yaml_dirs
    hidden = yaml_dirs[0].with_name("yaml.hidden")
    yaml_dirs[0].rename(hidden)
    try:
        broken = box.install("--check", "--claude")
        assert broken.returncode == 1 and "environment BROKEN" in broken.stdout, broken
    finally:
        hidden.rename(yaml_dirs[0])


def test_reinstall_is_idempotent_and_replaces_stale_files(box):
    dest = box.dest("--claude")
    before = tree_digest(dest)
    venv_cfg = (box.venv / "pyvenv.cfg").stat()
    (dest / "scripts" / "stale.py").write_text("# left over from an old version\n")
    done = box.install("--claude")
    assert done.returncode == 0, done.stderr
    assert "creating the Python" not in done.stderr          # the environment is reused, not rebuilt
    assert (box.venv / "pyvenv.cfg").stat().st_mtime_ns == venv_cfg.st_mtime_ns
    assert tree_digest(dest) == before                       # same files, stale one gone
    assert not list(dest.parent.glob(f".{NAME}.*")), "temporary copy left behind"


def test_install_for_all_agents_then_check(box):
    done = box.install()
    assert done.returncode == 0, done.stderr
    for flag in TARGETS:
        assert (box.dest(flag) / "SKILL.md").is_file(), flag
        assert run_installed(box.dest(flag), "poll_status.py", "--help").returncode == 0
    check = box.install("--check")
    installed = [line for line in check.stdout.splitlines() if line.startswith("installed  ")]
    assert check.returncode == 0 and len(installed) == 3 and all("environment ok" in ln for ln in installed), check
    assert f"local      {ROOT}/.venv  python " in check.stdout   # this checkout's own (--local) install too


def test_a_symlinked_install_is_left_alone(box, tmp_path):
    linked = box.home / ".codex" / "skills" / NAME
    (box.home / ".codex" / "skills").mkdir(parents=True, exist_ok=True)
    if linked.exists():
        shutil.rmtree(linked)
    linked.symlink_to(ROOT)
    try:
        done = box.install("--codex")
        assert done.returncode == 0 and "skipped" in done.stderr, done
        assert linked.is_symlink() and os.readlink(linked) == str(ROOT)
    finally:
        linked.unlink()


def test_install_never_stores_or_prints_a_credential(box):
    outputs = box.first_install.stdout + box.first_install.stderr
    for value in SENTINELS.values():
        assert value not in outputs
        for flag in TARGETS:
            for path in box.dest(flag).rglob("*"):
                if path.is_file() and not path.is_symlink():
                    assert value.encode() not in path.read_bytes(), path
        assert value.encode() not in (box.venv / "pyvenv.cfg").read_bytes()


def test_check_runs_every_script(box):
    """--check answers ok only if every script answers --help; it names each one that does not."""
    dest = box.dest("--claude")
    scripts = sorted((dest / "scripts").glob("[!_]*.py"))
    assert len(scripts) >= 6
    saved = {path: path.read_text() for path in scripts}

    def breaks(path: Path) -> None:   # a script that dies at start-up, as one that misses its environment does
        shebang, rest = saved[path].split("\n", 1)
        path.write_text(f"{shebang}\nimport sys; sys.exit(1)\n{rest}")

    try:
        for path in scripts:
            breaks(path)
        every = box.install("--check", "--claude")
        assert every.returncode == 1, every
        listed = re.search(r"scripts BROKEN: (.*)\(they fail --help", every.stdout)
        assert listed and sorted(listed.group(1).split()) == [p.name for p in scripts], every.stdout
        for path in scripts:
            path.write_text(saved[path])
        breaks(dest / "scripts" / "redact_secrets.py")     # the one a --check of preflight.py alone missed
        one = box.install("--check", "--claude")
        assert one.returncode == 1 and "scripts BROKEN: redact_secrets.py (" in one.stdout, one
    finally:
        for path, text in saved.items():
            path.write_text(text)
    assert box.install("--check", "--claude").returncode == 0


def test_codex_home_is_where_codex_reads_its_skills(box, tmp_path):
    codex_home = tmp_path / "codex-home"
    done = box.install("--codex", CODEX_HOME=str(codex_home))
    assert done.returncode == 0, done.stderr
    dest = codex_home / "skills" / NAME
    assert (dest / "SKILL.md").is_file() and not box.dest("--codex").exists()
    assert run_installed(dest, "teardown.py", "--help").returncode == 0
    check = box.install("--check", "--codex", CODEX_HOME=str(codex_home))
    assert check.returncode == 0 and f"installed  {dest}  version" in check.stdout, check
    without = box.install("--check", "--codex")          # without CODEX_HOME: ~/.codex
    assert without.returncode == 1 and f"absent     {box.dest('--codex')}" in without.stdout, without
    assert "${CODEX_HOME:-~/.codex}/skills" in subprocess.run(["bash", str(ROOT / "install.sh"), "--help"],
                                                             capture_output=True, text=True).stdout
    gone = box.install("--uninstall", "--codex", CODEX_HOME=str(codex_home))
    assert gone.returncode == 0 and not dest.exists() and box.venv.exists()


# -- install from an unpacked archive of the bundle ------------------------------------
def _unpack(base: Path) -> Path:
    """The working tree's bundle files as a release tarball (git archive would miss
    uncommitted files), unpacked under ``base``."""
    base.mkdir(parents=True, exist_ok=True)
    tarball = base / f"{NAME}.tar.gz"

    def keep(info: tarfile.TarInfo):
        parts = Path(info.name).parts
        if any(p in ("__pycache__", ".pytest_cache", ".venv") or p.endswith(".pyc") for p in parts):
            return None
        return info

    with tarfile.open(tarball, "w:gz") as tar:
        for item in _bundle_items():
            tar.add(ROOT / item, arcname=f"{NAME}-release/{item}", filter=keep)
    with tarfile.open(tarball) as tar:
        # "data" (PEP 706, 3.12 and the security releases before): no links out of the tree, no devices;
        # 3.14 makes it the default and 3.13 warns without it
        extra = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(base / "unpacked", **extra)
    src = base / "unpacked" / f"{NAME}-release"
    assert (src / "install.sh").is_file() and not (src / ".git").exists()
    return src


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory):
    return _unpack(tmp_path_factory.mktemp("archive"))


def test_install_from_an_unpacked_archive(box, unpacked):
    done = box.install("--agents", src=unpacked)
    assert done.returncode == 0, done.stderr
    assert "creating the Python" not in done.stderr          # the shared environment is reused
    dest = box.dest("--agents")
    assert as_template((dest / "SKILL.md").read_text(), dest) == (ROOT / "SKILL.md").read_text()
    assert tree_digest(dest) == {k: v for k, v in tree_digest(box.dest("--claude")).items()}
    ran = run_installed(dest, "teardown.py", "--help")
    assert ran.returncode == 0 and "usage: teardown.py" in ran.stdout, ran
    again = box.install("--agents", src=unpacked)
    assert again.returncode == 0, again.stderr
    check = box.install("--check", "--agents", src=unpacked)
    assert check.returncode == 0 and "environment ok" in check.stdout, check
    assert not list(unpacked.rglob("*.egg-info")) and not (unpacked / "build").exists(), "install.sh littered the source"
    gone = box.install("--uninstall", "--agents", src=unpacked)
    assert gone.returncode == 0 and not dest.exists()
    assert box.venv.exists(), "the environment is shared with the --claude install"


def test_uninstall_one_keeps_the_environment_then_all_remove_it(box, unpacked):
    done = box.install("--uninstall", "--codex")
    assert done.returncode == 0, done.stderr
    assert not box.dest("--codex").exists() and box.dest("--claude").exists() and box.venv.exists()
    done = box.install("--uninstall")
    assert done.returncode == 0, done.stderr
    assert not any(box.dest(flag).exists() for flag in TARGETS)
    assert not (box.xdg / NAME).exists() and not box.xdg.exists()   # the data dir the first install made, too
    # the skill folders the installs created are gone too, and only those (install.sh created-dirs)
    assert not any(box.dest(flag).parent.exists() for flag in TARGETS), sorted(p.name for p in box.home.iterdir())
    assert "install.sh created it" in done.stderr
    check = box.install("--check", src=unpacked)        # a source without a .venv of its own: nothing left
    assert check.returncode == 1 and "absent" in check.stdout and "nothing installed" in check.stderr, check
    assert f"absent     {unpacked}/.venv" in check.stdout


# -- a broken environment, the oldest claimed Python, the dev dependencies -----------------
def test_a_venv_without_pip_is_recreated_with_the_dev_dependencies_on_the_oldest_python(tmp_path):
    """The state a failed `python -m venv` leaves (no ensurepip: a venv without pip) used to make
    every later run fail with "No module named pip" until removed by hand."""
    src = _unpack(tmp_path / "archive")
    oldest = find_python(_floor())
    subprocess.run([oldest, "-m", "venv", "--without-pip", str(src / ".venv")], check=True)
    box = Sandbox(tmp_path / "user")
    done = box.install("--local", "--dev", "--python", oldest, src=src, timeout=900)
    assert done.returncode == 0, done.stderr
    assert f"recreating the environment in {src}/.venv: it has no pip" in done.stderr, done.stderr
    assert "installing the dependencies with pip (" in done.stderr
    venv_python = str(src / ".venv" / "bin" / "python")
    # every dependency of the dev install is there, on that Python: moto's server extra and awscli
    # are what a regex reading of pyproject.toml dropped on 3.9 / 3.10
    probe = ("import sys, yaml, jsonschema, boto3, pytest, moto, flask, awscli, tomli; "
             "print('%d.%d' % sys.version_info[:2])")
    ran = subprocess.run([venv_python, "-c", probe], capture_output=True, text=True)
    assert ran.returncode == 0 and ran.stdout.strip() == _floor(), ran
    check = box.install("--local", "--check", src=src)
    assert check.returncode == 0 and f"python {_floor()}  environment ok" in check.stdout, check


# -- uv -----------------------------------------------------------------------------
def test_with_uv_on_path_the_environment_is_made_by_uv_and_recreated_when_its_python_is_gone(tmp_path):
    box = Sandbox(tmp_path)
    path = _uv_dir() + os.pathsep + box.env["PATH"]
    done = box.install("--agents", PATH=path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"creating the Python 3\.\d+ environment in \S+ \(with uv\)", done.stderr), done.stderr
    assert "installing the dependencies with uv (" in done.stderr
    no_pip = subprocess.run([str(box.venv / "bin" / "python"), "-m", "pip", "--version"], capture_output=True)
    assert no_pip.returncode != 0, "uv venv makes no pip: this environment was made by python -m venv"
    dest = box.dest("--agents")
    assert run_installed(dest, "submit.py", "--help").returncode == 0
    assert box.install("--check", "--agents", PATH=path).returncode == 0
    # its interpreter removed (a pyenv or Homebrew upgrade): recreated, and said so
    python = box.venv / "bin" / "python"
    python.unlink()
    python.symlink_to(tmp_path / "uninstalled" / "python3")
    again = box.install("--agents", PATH=path)
    assert again.returncode == 0, again.stderr
    assert f"recreating the environment in {box.venv}: its bin/python does not run" in again.stderr
    check = box.install("--check", "--agents", PATH=path)
    assert check.returncode == 0 and "environment ok" in check.stdout, check


# -- --check after a checkout install (--local) -----------------------------------------
def test_check_reports_the_checkout_install_alone_with_skill_dirs_and_broken(tmp_path):
    """``install.sh --local`` gives the checkout its own .venv: a later ``--check`` (no target flag)
    reports that install and its state, beside the skill dirs (absent or installed); ``--check
    --claude`` says where the install is; ``--local --check`` reports the checkout alone."""
    src = _unpack(tmp_path / "archive")
    box = Sandbox(tmp_path / "user")
    path = _uv_dir() + os.pathsep + box.env["PATH"]
    local = box.install("--local", src=src, PATH=path)
    assert local.returncode == 0, local.stderr
    check = box.install("--check", src=src)
    assert check.returncode == 0, check
    assert re.search(rf"^local      {re.escape(str(src))}/\.venv  python \S+  environment ok$", check.stdout, re.M), check
    assert all(f"absent     {box.dest(flag)}" in check.stdout for flag in TARGETS), check
    assert "nothing installed" not in check.stderr
    assert box.install("--local", "--check", src=src).returncode == 0
    one = box.install("--check", "--claude", src=src)               # a skill dir asked for by name: not there
    assert one.returncode == 1 and f"absent     {box.dest('--claude')}" in one.stdout, one
    assert f"the checkout {src} has its own install (install.sh --local --check)" in one.stderr, one
    # and a skill dir installed next to it: both reported
    assert box.install("--claude", src=src, PATH=path).returncode == 0
    both = box.install("--check", src=src)
    assert both.returncode == 0 and f"installed  {box.dest('--claude')}  version" in both.stdout, both
    assert f"local      {src}/.venv  python " in both.stdout
    installed = box.install("--check", src=box.dest("--claude"))    # from the installed copy: it is no checkout
    assert installed.returncode == 0 and "local  " not in installed.stdout, installed
    # a broken checkout environment is reported broken, with exit 1, whatever else works
    python = src / ".venv" / "bin" / "python"
    real = python.resolve()
    python.unlink()
    python.symlink_to(tmp_path / "uninstalled" / "python3")
    broken = box.install("--check", src=src)
    assert broken.returncode == 1 and f"local      {src}/.venv  environment BROKEN" in broken.stdout, broken
    python.unlink()
    python.symlink_to(real)
    # removed: reported absent, and with no skill dir left, nothing is installed
    assert box.install("--uninstall", "--local", src=src).returncode == 0
    assert box.install("--uninstall", src=src).returncode == 0
    gone = box.install("--check", src=src)
    assert gone.returncode == 1 and f"absent     {src}/.venv" in gone.stdout and "nothing installed" in gone.stderr
    alone = box.install("--local", "--check", src=src)
    assert alone.returncode == 1 and f"absent     {src}/.venv" in alone.stdout, alone


# -- pip install . ------------------------------------------------------------------
def test_pip_install_of_the_checkout_is_refused_with_the_way_to_install(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_REQUIRE_VIRTUALENV", None)
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--target", str(tmp_path / "t"),
                           str(ROOT)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0
    assert "not a pip package" in done.stdout + done.stderr and "bash install.sh" in done.stdout + done.stderr
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())
    assert not list(ROOT.glob("*.egg-info")) and not (ROOT / "build").exists()
