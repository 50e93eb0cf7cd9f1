"""The documentation agents follow is checked against the code, so drift fails CI.

Invariant: every command an agent can copy from ``SKILL.md`` or
``references/*.md`` is accepted by the script it calls, every JSON answer shown
there validates against the script's schema, and every error code, flag and
link the documents name exists.

* Commands: every fenced ``bash``/``sh``/``shell``/``console`` block is split
  into logical lines (``\\`` continuations joined, heredoc bodies skipped,
  comments dropped); each call of one of our scripts (with or without a
  ``scripts/`` or ``@SKILL_DIR@/scripts/`` prefix) is parsed with that script's
  own argparse parser (``build_parser()``; for ``redact_secrets.py``, which has
  none, the parser its ``main`` builds), ``$VAR`` placeholders replaced by
  dummy values. An unknown flag or a missing required one fails.
* Inline mentions such as ``poll_status.py JOB_ID --logs 200`` (in the docs, in
  the error ``fix`` strings and in messages in the code) must name flags the
  script has.
* JSON: every fenced ``json`` block parses; a block preceded by
  ``<!-- schema: NAME -->`` validates against ``references/schemas/NAME.schema.json``
  and uses no top-level key the schema does not define (``none`` marks a block
  that is not a script answer). In the files this test owns every block is tagged.
* Commands are complete on their own (an agent's shell keeps no variable
  between calls): each names its script as ``@SKILL_DIR@/scripts/NAME.py`` (the
  token install.sh replaces with the installed copy's absolute path,
  scripts/_render_docs.py) and uses no shell variable but the credentials and
  settings a user exports.
* SKILL.md stays under 18,000 characters; the long answers and decision tables
  live in references/answers.md, checked like SKILL.md.
* The tagged shell blocks ``<!-- sim-test: tier-a-... -->`` of tiers.md run,
  rendered for this checkout, against the brev/docker simulator.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest
import yaml

from conftest import TAO_IMAGE, validate

ROOT = Path(__file__).resolve().parent.parent
SKILL = ROOT / "SKILL.md"
ANSWERS = ROOT / "references" / "answers.md"
DOCS = [SKILL, *sorted((ROOT / "references").glob("*.md"))]
# Documents written by the docs owner: stricter rules (every fenced block has a
# language, every json block a schema tag).
OWNED = {SKILL, *(ROOT / "references" / n for n in ("README.md", "brev-exec.md", "troubleshooting.md", "tiers.md",
                                                     "answers.md"))}
SCRIPTS = ("preflight.py", "submit.py", "poll_status.py", "teardown.py", "redact_secrets.py", "tao_job_record.py")
SHELL_LANGS = {"bash", "sh", "shell", "console"}
MAX_SKILL_LINES = 400
MAX_SKILL_CHARS = 18_000     # the TAO skill bank's gate is 20,000; the Agent Skills guidance about 5,000 tokens

# Reference files other engineers are still writing; a link to them may dangle
# until their branch lands. Remove a name once the file is in the tree.
PENDING_FILES = {"references/error-codes.md", "references/failure-classes.md"}

# Dummy values for $VAR placeholders (by name; anything else becomes "x1").
PLACEHOLDERS = {"JOB_ID": "visual_changenet-train-1a2b3c", "INSTANCE": "my-a100", "IMAGE": TAO_IMAGE,
                "SKILL_DIR": "/skills/tao-run-on-brev", "N": "5", "BUCKET": "my-bucket", "SPEC": "train.yaml"}

# Flags of other tools that the documents mention in inline code.
EXTERNAL_FLAGS = {"--password-stdin", "--env-file", "--nproc-per-node", "--token", "--json", "--host", "--yes",
                  "--rm", "--format", "--tail", "--name", "--label", "--filter", "--type", "--ipc", "--username",
                  "--clear", "--claude", "--codex", "--agents", "--local", "--dev", "--uninstall", "--check",
                  "--python", "--help"}


# -- reading the documents ----------------------------------------------------
@dataclass
class Block:
    path: Path
    line: int          # 1-based line of the opening fence
    lang: str
    tag: str | None    # the HTML comment right before the fence, e.g. "schema: submit"
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


_COMMENT = re.compile(r"^<!--\s*(.*?)\s*-->$")


def blocks(path: Path) -> list[Block]:
    out, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)", lines[i])
        if not fence:
            i += 1
            continue
        indent, marker, lang = fence.groups()
        prev = next((ln.strip() for ln in reversed(lines[:i]) if ln.strip()), "")
        tag = _COMMENT.match(prev).group(1) if _COMMENT.match(prev) else None
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(marker):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        out.append(Block(path, i + 1, lang.lower(), tag, "\n".join(body)))
        i = j + 1
    return out


ALL_BLOCKS = [b for doc in DOCS for b in blocks(doc)]


def logical_lines(text: str) -> list[str]:
    """Shell lines with continuations joined and heredoc bodies dropped."""
    out, pending, heredoc = [], "", None
    for raw in text.splitlines():
        if heredoc is not None:
            if raw.strip() == heredoc:
                heredoc = None
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        line = pending + raw
        pending = ""
        match = re.search(r"(?<!<)<<-?(?!<)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1", line)
        if match:
            heredoc = match.group(2)
        out.append(line)
    if pending:
        out.append(pending)
    return out


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_CONTROL = {";", "&&", "||", "|", "&", "(", ")", ";;", "|&", "$"}


def unquoted_tildes(line: str) -> list[int]:
    """Offsets of each `~` the LOCAL shell would expand (word start, or after `=` / `:`):
    an instance path such as `--inputs ~/data=NAME` must be quoted, or it names the laptop's home."""
    found, quote, prev = [], None, " "
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and prev.isspace():
            break
        elif ch == "~" and (prev.isspace() or prev in "=:"):
            found.append(i)
        prev = ch
    return found


def substitute(line: str) -> str:
    return _VAR.sub(lambda m: PLACEHOLDERS.get(m.group(1) or m.group(2), "x1"), line)


def script_calls(line: str) -> list[tuple[str, list[str]]]:
    """(script, argv) for every call of one of our scripts in one logical shell line."""
    lexer = shlex.shlex(substitute(line), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    calls, i = [], 0
    while i < len(tokens):
        name = os.path.basename(tokens[i])
        if name not in SCRIPTS:
            i += 1
            continue
        argv, i = [], i + 1
        while i < len(tokens) and tokens[i] not in _CONTROL:
            tok = tokens[i]
            if set(tok) <= set("<>&"):          # a redirection: drop it and its target
                if argv and argv[-1].isdigit() and argv[-1] in ("0", "1", "2"):
                    argv.pop()                  # the fd of 2>/dev/null
                i += 2
                continue
            argv.append(tok)
            i += 1
        calls.append((name, argv))
    return calls


def test_instance_paths_in_commands_are_quoted():
    bad = [f"{b.where}: {line.strip()}" for b in ALL_BLOCKS if b.lang in SHELL_LANGS
           for line in logical_lines(b.text) if script_calls(line) and unquoted_tildes(line)]
    assert not bad, "quote ~/ instance paths (the local shell expands an unquoted ~ to the laptop's home):\n" + \
        "\n".join(bad)


def doc_commands() -> list[tuple[str, str, str, list[str]]]:
    found = []
    for block in ALL_BLOCKS:
        if block.lang not in SHELL_LANGS:
            continue
        for line in logical_lines(block.text):
            for script, argv in script_calls(line):
                found.append((block.where, line.strip(), script, argv))
    return found


# -- the scripts' parsers -------------------------------------------------------
if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))
_MODULES: dict = {}


def script_module(name: str):
    if name not in _MODULES:
        spec = importlib.util.spec_from_file_location(f"_doc_{name[:-3]}", ROOT / "scripts" / name)
        module = importlib.util.module_from_spec(spec)
        with mock.patch.dict(os.environ, {"TAO_BREV_NO_REEXEC": "1"}):   # importing must never re-exec
            spec.loader.exec_module(module)
        _MODULES[name] = module
    return _MODULES[name]


class _Parsed(Exception):
    pass


def captured_parser(name: str) -> argparse.ArgumentParser:
    """build_parser() of the script, or the parser its main() builds (redact_secrets.py)."""
    module = script_module(name)
    if hasattr(module, "build_parser"):
        return module.build_parser()

    def grab(self, *args, **kwargs):
        raise _Parsed(self)

    with mock.patch.object(argparse.ArgumentParser, "parse_args", grab):
        try:
            module.main([])
        except _Parsed as caught:
            return caught.args[0]
    raise AssertionError(f"{name}: main() built no parser")  # pragma: no cover


def parse(name: str, argv: list[str]):
    """Parse argv as the script would; raise AssertionError with the parser's complaint."""
    from tao_brev.errors import TaoBrevError

    parser = captured_parser(name)
    try:
        with mock.patch("sys.stdout"), mock.patch("sys.stderr") as err:
            return parser.parse_args(argv)
    except TaoBrevError as exc:
        raise AssertionError(exc.message) from None
    except SystemExit as exc:
        if exc.code == 0:     # --help
            return None
        raise AssertionError("".join(str(c.args[0]) for c in err.write.call_args_list).strip()) from None


def option_strings(name: str) -> set[str]:
    """Every option string of a script's parser, its subcommands' included."""
    found, todo = set(), [captured_parser(name)]
    while todo:
        parser = todo.pop()
        for action in parser._actions:
            found.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


ALL_OPTIONS = set().union(*(option_strings(s) for s in SCRIPTS))


# -- commands -------------------------------------------------------------------
COMMANDS = doc_commands()


# -- commands complete on their own ----------------------------------------------
sys.path.insert(0, str(ROOT / "scripts"))
from _render_docs import TOKEN, render_text  # noqa: E402

# Variables a user exports for the scripts (read from the environment, never set by a
# documented command): a command may name these; any other $VAR is one an earlier
# shell call was meant to set, which an agent's next call no longer has.
# The example values the documents use instead of variables.
DOC_INSTANCE, DOC_JOB_ID = "my-a100", "visual_changenet-train-af819d"
EXPORTED = {"NGC_KEY", "BREV_API_TOKEN", "S3_BUCKET_NAME", "TAO_STATE_DIR", "TAO_RESULTS_ROOT", "TAO_SKILL_BANK_PATH",
            "HOME", "PATH"}


def _shell_lines(docs) -> list[tuple[str, str]]:
    return [(b.where, line) for b in ALL_BLOCKS if b.path in docs and b.lang in SHELL_LANGS
            for line in logical_lines(b.text)]


def _words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return list(lexer)


def test_every_command_names_its_script_by_the_bundle_path():
    """`@SKILL_DIR@/scripts/NAME.py`, never `$SKILL_DIR/...` or a relative `scripts/...`:
    install.sh writes the absolute path in, so the command works in any fresh shell."""
    bad = []
    for where, line in _shell_lines(set(DOCS)):
        for word in _words(line):
            name = os.path.basename(word)
            if name in SCRIPTS or name == "install.sh":
                expected = f"{TOKEN}/{'' if name == 'install.sh' else 'scripts/'}{name}"
                if word != expected:
                    bad.append(f"{where}: {word!r} in `{line.strip()}`")
    assert not bad, f"name scripts as {TOKEN}/scripts/NAME.py:\n" + "\n".join(bad)


def test_commands_rely_on_no_variable_set_by_an_earlier_call():
    """The lines an agent runs here: a call of one of our scripts, or of brev (not remote scripts shown)."""
    found = []
    for where, line in _shell_lines(set(DOCS)):
        code = line.split(" #")[0]
        if not script_calls(line) and _words(code)[:1] != ["brev"]:
            continue
        for match in _VAR.finditer(code):
            name = match.group(1) or match.group(2)
            if name not in EXPORTED and f"{name}=" not in code:    # set in this same call: fine
                found.append(f"{where}: ${name} in `{line.strip()}`")
    assert not found, "a fresh shell has none of these (write the value, or the exported variable):\n" + \
        "\n".join(found)


def test_the_bundle_path_token_is_never_inside_quotes():
    """install.sh writes the path shell-quoted when it must (a space in HOME): inside quotes that
    quoting would become part of the word."""
    inside = []
    for where, line in _shell_lines(set(DOCS)):
        quote = None
        for i, ch in enumerate(line):
            if quote:
                if ch == quote:
                    quote = None
                elif line.startswith(TOKEN, i):
                    inside.append(f"{where}: `{line.strip()}`")
            elif ch in "'\"":
                quote = ch
    assert not inside, inside


def test_the_checks_above_can_fail():
    assert _words("$SKILL_DIR/scripts/x.py --a") == ["$SKILL_DIR/scripts/x.py", "--a"]
    assert render_text(f"{TOKEN}/scripts/submit.py", "/a b/c") == "'/a b/c'/scripts/submit.py"
    assert render_text(f"{TOKEN}/scripts/submit.py", "/home/u/.claude/skills/x") == \
        "/home/u/.claude/skills/x/scripts/submit.py"
    assert [m.group(2) for m in _VAR.finditer("poll_status.py $JOB_ID")] == ["JOB_ID"]


def test_the_documents_show_every_script_at_least_once():
    shown = {script for _, _, script, _ in COMMANDS}
    assert shown >= {"preflight.py", "submit.py", "poll_status.py", "teardown.py", "tao_job_record.py"}, shown


@pytest.mark.parametrize("where,line,script,argv", COMMANDS, ids=[f"{c[0]}:{c[2]}" for c in COMMANDS])
def test_documented_command_parses(where, line, script, argv):
    try:
        parse(script, argv)
    except AssertionError as exc:
        pytest.fail(f"{where}: `{line}`\n  {script} rejects {argv}: {exc}")


def test_the_extractor_sees_through_shell_syntax():
    text = ("OUT=$($SKILL_DIR/scripts/submit.py --instance $INSTANCE \\\n  --spec ./a.yaml 2>/dev/null | jq .)\n"
            "cat <<'EOF'\nteardown.py --bogus\nEOF\n"
            "redact_secrets.py lint <<<word\n"
            "scripts/poll_status.py \"$JOB_ID\" --logs 5 # comment --bogus\n")
    calls = [c for line in logical_lines(text) for c in script_calls(line)]
    assert calls == [("submit.py", ["--instance", "my-a100", "--spec", "./a.yaml"]),
                     ("redact_secrets.py", ["lint"]),
                     ("poll_status.py", ["visual_changenet-train-1a2b3c", "--logs", "5"])]
    assert unquoted_tildes("submit.py --inputs ~/d=x") and unquoted_tildes("submit.py --results-root=~/r")
    assert not unquoted_tildes("submit.py --inputs '~/d=x' \"~/e\" a~b # ~/comment")


@pytest.mark.parametrize("script,argv", [
    ("submit.py", ["--instance", "box", "--image", "x/y:z", "--network-arch", "a", "--action", "train"]),  # no --spec
    ("preflight.py", ["--instance", "box", "--pull-image"]),
    ("teardown.py", ["JOB", "--delete-instance", "--keep-instance"]),
    ("redact_secrets.py", ["scan"]),
    ("tao_job_record.py", ["mark", "JOB"]),
])
def test_the_check_rejects_bad_calls(script, argv):
    with pytest.raises(AssertionError):
        parse(script, argv)


# Inline mentions: `poll_status.py JOB_ID --logs 200` in prose, fix strings, messages.
_MENTION = re.compile(r"\b(" + "|".join(re.escape(s) for s in SCRIPTS) + r")\b([^`\"'\n),;]*)")


def mentions(text: str) -> list[tuple[str, str]]:
    out = []
    for match in _MENTION.finditer(text):
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", match.group(2)):
            out.append((match.group(1), flag))
    return out


def _code_mentions() -> list[tuple[str, str, str]]:
    found = []
    from tao_brev.errors import CODES

    for code, entry in CODES.items():
        for script, flag in mentions(entry.fix + " " + entry.meaning):
            found.append((f"errors.CODES[{code}]", script, flag))
    for path in sorted([*(ROOT / "tao_brev").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for script, flag in mentions(line):
                found.append((f"{path.relative_to(ROOT)}:{number}", script, flag))
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for span in re.findall(r"`([^`\n]+)`", text):
            for script, flag in mentions(span):
                found.append((str(doc.relative_to(ROOT)), script, flag))
    return sorted(set(found))


# Flags that messages in the code promise but the scripts do not have yet
# (reported; xfail(strict) so this test turns red - and the docs get updated -
# the day they land).
PROMISED: set[tuple[str, str]] = set()


def _mention_params():
    params = []
    for where, script, flag in _code_mentions():
        marks = [pytest.mark.xfail(strict=True, reason=f"{script} {flag} is promised by a message but not "
                                                         "implemented; when it lands, remove it from PROMISED "
                                                         "and document it in SKILL.md")] \
            if (script, flag) in PROMISED else []
        params.append(pytest.param(where, script, flag, marks=marks, id=f"{where}:{script}{flag}"))
    return params


@pytest.mark.parametrize("where,script,flag", _mention_params())
def test_mentioned_flag_exists(where, script, flag):
    assert flag in option_strings(script), f"{where} mentions `{script} ... {flag}`, which {script} does not accept"


def test_bare_flags_in_the_documents_exist():
    """An inline `--flag` in SKILL.md is one of our scripts' flags or a known flag of another tool."""
    unknown = []
    for doc in [d for d in DOCS if d in OWNED]:
        for span in re.findall(r"`([^`\n]+)`", doc.read_text(encoding="utf-8")):
            if _MENTION.search(span) or span.startswith(("docker ", "brev ", "bash ", "torchrun")):
                continue
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span):
                if flag not in ALL_OPTIONS and flag not in EXTERNAL_FLAGS:
                    unknown.append(f"{doc.relative_to(ROOT)}: `{span}`")
    assert not unknown, "flags no script has:\n" + "\n".join(unknown)


# -- JSON examples --------------------------------------------------------------
JSON_BLOCKS = [b for b in ALL_BLOCKS if b.lang == "json"]


def _schema_tag(block: Block) -> str | None:
    match = re.match(r"^schema:\s*([a-z_]+)$", block.tag or "")
    return match.group(1) if match else None


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=[b.where for b in JSON_BLOCKS])
def test_json_example_parses_and_validates(block):
    try:
        data = json.loads(block.text)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{block.where}: not JSON: {exc}")
    name = _schema_tag(block)
    if block.path in OWNED:
        assert name, f"{block.where}: tag the block with <!-- schema: NAME --> (or <!-- schema: none -->)"
    if name in (None, "none"):
        return
    schema_path = ROOT / "references" / "schemas" / f"{name}.schema.json"
    assert schema_path.exists(), f"{block.where}: no schema {schema_path.name}"
    validate(name, data)
    known = set(json.loads(schema_path.read_text()).get("properties", {}))
    if known and isinstance(data, dict):
        extra = set(data) - known
        assert not extra, f"{block.where}: keys the {name} schema does not define: {sorted(extra)}"


def test_the_answers_page_shows_an_answer_of_every_verb_and_skill_the_submit_one():
    tags = {_schema_tag(b) for b in JSON_BLOCKS if b.path == ANSWERS}
    assert tags >= {"preflight", "submit", "poll_status", "teardown"}, tags
    assert "submit" in {_schema_tag(b) for b in JSON_BLOCKS if b.path == SKILL}


def test_owned_documents_tag_every_fence_with_a_language():
    bare = [b.where for b in ALL_BLOCKS if b.path in OWNED and not b.lang]
    assert not bare, f"fenced blocks without a language: {bare}"


# -- front matter, size, links, vocabulary ----------------------------------------
def front_matter() -> dict:
    text = SKILL.read_text(encoding="utf-8")
    match = re.match(r"^---\n(.*?)\n---\n", text, re.DOTALL)
    assert match, "SKILL.md must start with a --- YAML front matter block ---"
    data = yaml.safe_load(match.group(1))
    assert isinstance(data, dict)
    return data


def test_front_matter_follows_the_agent_skills_format():
    import tao_brev

    meta = front_matter()
    for key in ("name", "description", "license", "compatibility", "allowed-tools", "metadata"):
        assert key in meta, f"front matter lacks {key}"
    assert meta["name"] == "tao-run-on-brev"
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", meta["name"]) and len(meta["name"]) <= 64
    assert 0 < len(meta["description"]) <= 1024
    for phrase in ("run on Brev", "Brev GPU instance", "TAO on Brev", "submit job to Brev"):
        assert phrase in meta["description"], phrase
    assert meta["license"] == "Apache-2.0"
    assert 0 < len(meta["compatibility"]) <= 500
    for needle in ("brev", "PyYAML", "jsonschema", "boto3", "3.9"):
        assert needle in meta["compatibility"], needle
    assert isinstance(meta["allowed-tools"], (str, list))
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in meta["metadata"].items()), \
        "metadata must map strings to strings (quote the version)"
    assert meta["metadata"]["version"] == tao_brev.__version__


def test_versions_agree_and_the_license_is_apache():
    import tao_brev

    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(rf'^version = "{re.escape(tao_brev.__version__)}"$', pyproject, re.M)
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text


def test_skill_is_short():
    text = SKILL.read_text(encoding="utf-8")
    lines = text.count("\n")
    assert lines < MAX_SKILL_LINES, f"SKILL.md has {lines} lines; move details to references/"
    assert len(text) < MAX_SKILL_CHARS, f"SKILL.md has {len(text)} characters; move details to references/"


def test_owned_documents_hold_no_literal_credential():
    """What an agent copies from the documents passes the bundle's own secret lint."""
    from tao_brev.secrets import redact

    findings = [f"{doc.relative_to(ROOT)}: {finding}" for doc in sorted(OWNED)
                for finding in redact.lint(doc.read_text(encoding="utf-8"))]
    assert not findings, findings


def test_relative_links_resolve():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            rel = os.path.relpath(path, ROOT)
            if not path.exists() and rel not in PENDING_FILES:
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_references_index_lists_every_reference():
    index = (ROOT / "references" / "README.md").read_text(encoding="utf-8")
    for doc in (ROOT / "references").glob("*.md"):
        if doc.name != "README.md":
            assert f"]({doc.name})" in index, f"references/README.md does not list {doc.name}"
    assert "](schemas/)" in index


# Backticked ALL_CAPS words that are not error codes.
VOCABULARY = {
    # states, classes, tiers
    "PENDING", "RUNNING", "COMPLETE", "ERROR", "CANCELED", "UNKNOWN", "ERR_INFRA", "ERR_PROGRAM",
    "STOPPED", "STARTING", "DEPLOYING", "STOPPING", "DELETING", "FAILURE", "UNHEALTHY", "READY",
    # environment variables
    "BREV_API_TOKEN", "BREV_API_KEY", "SSH_AUTH_SOCK", "NGC_KEY", "NGC_API_KEY", "HF_TOKEN", "WANDB_API_KEY", "S3_BUCKET_NAME", "TAO_STATE_DIR",
    "TAO_RESULTS_ROOT", "TAO_SKILL_BANK_PATH", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL", "AWS_DEFAULT_REGION", "ACCESS_KEY", "SECRET_KEY", "S3_ENDPOINT_URL", "CLOUD_REGION",
    "OMP_NUM_THREADS", "TAO_BREV_SIM_STATE", "PATH", "HOME", "XDG_DATA_HOME", "SKILL_DIR", "JOB_ID", "INSTANCE",
    "IMAGE", "NAME", "AWS_", "PIP_CACHE_DIR",
    # markers printed by the NGC snippet and by the remote scripts
    "NGC_LOGIN_OK", "NGC_LOGIN_FAILED", "IMAGE_VISIBLE", "IMAGE_NOT_VISIBLE", "PULL_STARTED",
    "TAO_ALREADY_SUBMITTED", "TAO_IMAGE_MISSING", "TAO_INPUT_MISSING", "AUTH_OK", "NOT_AUTHENTICATED", "NOT_ENTITLED",
    "TAO_RESULTS_URI", "TAO_INPUT_URI_", "TAO_BREV_RETRY_BACKOFF_S", "TAO_BREV_NO_REEXEC",
    "RESULTS ARE EPHEMERAL", "EPHEMERAL", "TAOBREV",
}


def test_every_error_code_named_in_the_documents_exists():
    from tao_brev.errors import CODES

    unknown = []
    for doc in [d for d in DOCS if d in OWNED]:
        for word in re.findall(r"`([A-Z][A-Z0-9_]*_[A-Z0-9_]*\*?)`", doc.read_text(encoding="utf-8")):
            word = word.rstrip("*")
            if word not in CODES and word not in VOCABULARY and not word.endswith("_"):
                unknown.append(f"{doc.relative_to(ROOT)}: {word}")
    assert not unknown, "not error codes (add to errors.CODES or to VOCABULARY here):\n" + "\n".join(unknown)


def test_exit_codes_in_the_decision_tables_match_the_error_codes():
    """In the `| exit | code | do next |` tables (SKILL.md, references/answers.md), every error code
    of a row exits as that row says."""
    from tao_brev.errors import CODES

    wrong, rows = [], 0
    for line in (SKILL.read_text(encoding="utf-8") + ANSWERS.read_text(encoding="utf-8")).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].isdigit():
            continue
        rows += 1
        for code in re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[1]):
            if code in CODES and CODES[code].exit_code != int(cells[0]):
                wrong.append(f"{code}: table says exit {cells[0]}, errors.py says {CODES[code].exit_code}")
    assert rows >= 20 and not wrong, wrong


def test_troubleshooting_maps_each_docker_message_to_the_code_the_bundle_reports():
    """A troubleshooting heading that quotes docker's message and says `<!-- maps-to: CODE -->`
    must be classified that way by tao_brev.docker_state.docker_error_code."""
    from tao_brev.docker_state import docker_error_code

    text = (ROOT / "references" / "troubleshooting.md").read_text(encoding="utf-8")
    pairs = re.findall(r"^#+ [^\n]*?`([^`\n]+)`[^\n]*\n+<!-- maps-to: ([A-Z_]+) -->", text, re.M)
    assert len(pairs) >= 4, pairs
    wrong = [(msg, code, docker_error_code(msg)) for msg, code in pairs if docker_error_code(msg) != code]
    assert not wrong, wrong


def test_troubleshooting_auth_messages_trigger_the_headless_login():
    """Every message under a `<!-- brev-auth -->` heading makes the transport log in again."""
    from tao_brev.transport import _AUTH_FAILURE

    text = (ROOT / "references" / "troubleshooting.md").read_text(encoding="utf-8")
    headings = re.findall(r"^#+ ([^\n]*)\n+<!-- brev-auth -->", text, re.M)
    messages = [m for h in headings for m in re.findall(r"`([^`]+)`", h)]
    assert messages and all(_AUTH_FAILURE.search(m) for m in messages), messages


# -- the tier A walk-through of tiers.md, run against the simulator ----------------------
def _snippet(tag: str) -> str:
    found = [b for b in ALL_BLOCKS if b.tag == f"sim-test: {tag}"]
    assert len(found) == 1, f"expected one block tagged sim-test: {tag}"
    return found[0].text


def _last_json(stdout: str) -> dict:
    start = max(i for i, line in enumerate(stdout.splitlines()) if line.startswith("{"))
    return json.loads("\n".join(stdout.splitlines()[start:]))


def test_tier_a_walk_through_copies_data_in_and_results_home(tmp_path, state_env):
    """The documented commands, rendered for this checkout as install.sh renders an installed copy,
    run as a shell would: copy the example data in, submit, wait, copy results home."""
    import yaml as _yaml

    from conftest import EXAMPLE_SPEC
    from tests.sim.simctl import Simulator

    work = tmp_path / "work"
    work.mkdir()
    spec = _yaml.safe_load(EXAMPLE_SPEC.read_text())
    spec["simulate"] = {"epoch_seconds": 0.05}
    (work / "train.yaml").write_text(_yaml.safe_dump(spec))
    with Simulator(tmp_path / "sim") as sim:
        sim.add_instance(DOC_INSTANCE)
        sim.preload_image(DOC_INSTANCE, TAO_IMAGE)
        env = sim.env(state_env)

        def shell(tag: str, job_id: str | None = None) -> subprocess.CompletedProcess:
            script = render_text(_snippet(tag), str(ROOT))
            if job_id:
                assert DOC_JOB_ID in script
                script = script.replace(DOC_JOB_ID, job_id)
            assert TOKEN not in script and "$" not in script, script   # complete on its own
            return subprocess.run(["bash", "-c", script], env=env, cwd=work, capture_output=True,
                                  text=True, timeout=180, stdin=subprocess.DEVNULL)

        submitted = shell("tier-a-submit")
        assert submitted.returncode == 0, submitted
        answer = _last_json(submitted.stdout)
        validate("submit", answer)
        for block in [b for b in JSON_BLOCKS if _schema_tag(b) == "submit" and b.path in (SKILL, ANSWERS)]:
            shown = json.loads(block.text)
            assert set(shown) <= set(answer), f"{block.where}: the submit example shows keys a real answer lacks: " \
                                              f"{sorted(set(shown) - set(answer))}"
        assert answer["state"] == "RUNNING" and answer["storage_tier"] == "A"
        assert (sim.instance_home(DOC_INSTANCE) / "levir_cd_tiny" / "A").is_dir()     # not nested, not renamed
        job_id = answer["job_id"]
        waited = subprocess.run([sys.executable, str(ROOT / "scripts" / "poll_status.py"), job_id, "--wait",
                                 "--interval", "0.2", "--timeout", "60"], env=env, capture_output=True, text=True,
                                timeout=120, stdin=subprocess.DEVNULL)
        assert waited.returncode == 0 and json.loads(waited.stdout)["state"] == "COMPLETE", waited
        home = shell("tier-a-results", job_id)
        assert home.returncode == 0, home
        assert sorted(p.name for p in (work / job_id / "train").glob("*.pth")), list(work.rglob("*"))


def test_the_skill_lifecycle_runs_as_written(tmp_path, state_env):
    """SKILL.md's own commands, rendered as install.sh renders them and each run in a FRESH shell
    (an agent keeps no variable between calls), on the simulator: pull, copy the example data in,
    submit the example spec, look, wait, bring the results home, tear down, list orphans, records."""
    import uuid

    from tests.sim.simctl import Simulator

    lines = [render_text(line, str(ROOT)) for _, line in _shell_lines({SKILL})]

    def pick(*needles: str, without: str = "\0") -> str:
        found = [ln for ln in lines if all(n in ln for n in needles) and without not in ln]
        assert found, f"SKILL.md has no command with {needles}"
        return found[0]

    work = tmp_path / "work"
    work.mkdir()
    key = "nvapi-" + uuid.uuid4().hex          # a throw-away key the simulated registry accepts
    with Simulator(tmp_path / "sim") as sim:
        sim.add_instance(DOC_INSTANCE)
        sim.set_ngc_key(key)
        env = {**sim.env(state_env), "NGC_KEY": key}
        env.pop("TAO_BREV_NO_REEXEC")           # as a user runs them: each script finds its environment
        job = {"id": DOC_JOB_ID}

        def run(line: str, schema: str | None = None, code: int = 0) -> dict | None:
            line = line.replace(DOC_JOB_ID, job["id"])
            assert TOKEN not in line and "$" not in line, line
            done = subprocess.run(["bash", "-c", line], env=env, cwd=work, capture_output=True, text=True,
                                  timeout=180, stdin=subprocess.DEVNULL)
            assert done.returncode == code, (line, done.stdout[-2000:], done.stderr[-2000:])
            if schema is None:
                return None
            answer = json.loads(done.stdout)
            validate(schema, answer)
            return answer

        pulled = run(pick("preflight.py", "--pull", without="nohup"), "preflight")
        assert pulled["ok"], pulled
        assert run(pick("preflight.py", "images.tao_toolkit.pyt", without="--pull"), "preflight")["ok"]
        run(pick("brev copy", "examples/data/levir_cd_tiny"))
        assert (sim.instance_home(DOC_INSTANCE) / "levir_cd_tiny" / "A").is_dir()
        def bare(line: str) -> str:     # the command of a documented line, for the job just submitted
            return line.split(" #")[0].strip().replace(DOC_JOB_ID, job["id"])

        submitted = run(pick("submit.py", "examples/visual_changenet/train.yaml"), "submit")
        assert submitted["state"] == "RUNNING", submitted
        job["id"] = submitted["job_id"]
        one_look = pick("poll_status.py", DOC_JOB_ID, without="--")
        assert submitted["next"] == bare(one_look), "submit's next is the document's next step"
        assert run(one_look, "poll_status")["ok"]
        assert "logs" in run(pick("poll_status.py", "--logs 50"), "poll_status")
        waited = run(pick("poll_status.py", "--wait", without="--teardown"), "poll_status")
        assert waited["state"] == "COMPLETE" and waited["next"] == bare(pick("teardown.py", DOC_JOB_ID, without="--"))
        run(pick("brev copy", "tao-results"))        # results only on the instance: home BEFORE running next
        assert sorted((work / job["id"] / "train").glob("*.pth")), list(work.rglob("*"))
        torn = run(waited["next"], "teardown")       # "every answer carries next: run it"
        assert torn["ok"] and torn["deleted"] == [], torn          # a reused instance stays
        assert torn["next"] == bare(pick("teardown.py", "--orphans", without="--delete"))
        listed = run(torn["next"], "teardown")
        orphan = {o["instance"]: o for o in listed["orphans"]}[DOC_INSTANCE]
        assert (orphan["ours"], orphan["owned"], orphan["jobs"]) == (True, False, [job["id"]]), orphan
        assert listed["deleted"] == [] and sim.instance_home(DOC_INSTANCE).is_dir()
        run(pick("tao_job_record.py", "list"))
        assert run(pick("tao_job_record.py", "show"), "job_record")["id"] == job["id"]


def test_inputs_repeated_are_all_kept():
    """``--inputs A --inputs B`` mounts both (argparse's "extend"; it used to keep only the last)."""
    args = captured_parser("submit.py").parse_args(
        ["--instance", "box", "--image", "i", "--network-arch", "a", "--action", "train", "--spec", "s.yaml",
         "--inputs", "~/a=a", "--inputs", "~/b=b", "~/c=c"])
    assert args.inputs == ["~/a=a", "~/b=b", "~/c=c"]
