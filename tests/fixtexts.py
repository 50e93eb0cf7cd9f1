"""Every ``fix`` an answer gives that names a flag must be accepted by the parser
(and the argument checks of ``main``) of the script it names, in the context it is
given: ``teardown.py --orphans --delete --instance NAME`` must not advise "pass
--force", which ``--orphans`` rejects.

:func:`violations` takes the script and argv that produced an answer and the
answer itself, and returns what its fix texts get wrong:

* an explicit command (``poll_status.py JOB_ID --wait --teardown``) is run through
  that script's ``main()`` with its verbs replaced by a stub, placeholders
  (``JOB_ID``, ``NAME``, ``IMAGE``, ``USD``) filled in and missing required
  options supplied, so a flag that does not exist or that contradicts another
  one is reported;
* a flag named without a script ("pass --force") is added to the argv of the
  answer's own command and checked the same way (only flags that script has:
  others belong to docker, brev or another tool).

``conftest.run_script`` applies it to every answer of every test.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import importlib.util
import inspect
import os
import re
import sys
import types
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ("preflight.py", "submit.py", "poll_status.py", "teardown.py", "tao_job_record.py", "redact_secrets.py")
_SCRIPT = re.compile(r"\b(" + "|".join(re.escape(s) for s in SCRIPTS) + r")\b")
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
_PLACEHOLDERS = {"JOB_ID": "visual_changenet-train-1a2b3c", "IMAGE": "images.tao_toolkit.pyt", "USD": "2.5",
                 "S": "600", "PATH": "~/tao-results", "BUCKET": "tao-bucket", "GLOB": "*.tmp"}
_MODULES: dict = {}


class _Reached(Exception):
    """main() got past its argument checks and called a verb."""


def _module(script: str):
    if script not in _MODULES:
        spec = importlib.util.spec_from_file_location(f"_fixcheck_{script[:-3]}", ROOT / "scripts" / script)
        module = importlib.util.module_from_spec(spec)
        if str(ROOT / "scripts") not in sys.path:
            sys.path.insert(0, str(ROOT / "scripts"))
        with mock.patch.dict(os.environ, {"TAO_BREV_NO_REEXEC": "1"}):
            spec.loader.exec_module(module)
        _MODULES[script] = module
    return _MODULES[script]


def _parser(script: str) -> argparse.ArgumentParser | None:
    module = _module(script)
    return module.build_parser() if hasattr(module, "build_parser") else None


def _value_flags(script: str) -> set[str]:
    parser = _parser(script)
    if parser is None:
        return set()
    return {opt for action in parser._actions if action.nargs != 0 for opt in action.option_strings}


def _value(script: str, flag: str, word: str) -> str:
    """A value for ``flag`` from the word that follows it in the text: kept when the
    parser would take it, else one it takes (a choice, a number, a placeholder filled)."""
    parser = _parser(script)
    action = next((a for a in parser._actions if flag in a.option_strings), None) if parser else None
    if action is not None and action.choices:
        return word if word in action.choices else list(action.choices)[0]
    if action is not None and action.type in (int, float):
        return word if re.fullmatch(r"-?\d+(\.\d+)?", word) else "1"
    return word or "x"


def _flags(script: str) -> set[str]:
    parser = _parser(script)
    return {opt for action in parser._actions for opt in action.option_strings} if parser else set()


def _reach(*_args, **_kwargs):
    raise _Reached()


def _verb_stubs(script: str, module) -> list[tuple[object, str, object]]:
    """(owner, name, stub) for each verb the script imports, at its top or (for a fast
    start) inside main(): a function is replaced where main() finds it - in the script's
    globals and on the verb's module; an imported verb module by a namespace of stubs."""
    stubs = []
    tree = ast.parse((ROOT / "scripts" / script).read_text())
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tao_brev")):
            continue
        source = importlib.import_module(node.module)
        for alias in node.names:
            obj = getattr(source, alias.name, None) or importlib.import_module(f"{node.module}.{alias.name}")
            if inspect.isfunction(obj) and obj.__module__.startswith("tao_brev.verbs"):
                stub = _reach
            elif inspect.ismodule(obj) and obj.__name__.startswith("tao_brev.verbs"):
                stub = types.SimpleNamespace(**{n: _reach for n, f in vars(obj).items() if callable(f)})
            else:
                continue
            stubs.append((source, alias.name, stub))
            if getattr(module, alias.asname or alias.name, None) is obj:
                stubs.append((module, alias.asname or alias.name, stub))
    return stubs


PARSE_ONLY = ("tao_job_record.py", "redact_secrets.py")   # their main() does the work itself: parser only


def rejection(script: str, argv: list[str]) -> str | None:
    """None when ``script``'s main() accepts ``argv`` (it reaches a verb), else why not."""
    from tao_brev.errors import TaoBrevError

    if script in PARSE_ONLY:
        parser = _parser(script)
        if parser is None:
            return None
        with mock.patch("sys.stdout"), mock.patch("sys.stderr") as err:
            try:
                parser.parse_args(list(argv))
            except SystemExit as exc:
                return None if exc.code == 0 else "".join(str(c.args[0]) for c in err.write.call_args_list).strip()
        return None
    module = _module(script)
    with contextlib.ExitStack() as stack:
        for owner, name, stub in _verb_stubs(script, module):
            stack.enter_context(mock.patch.object(owner, name, stub))
        err = stack.enter_context(mock.patch("sys.stderr"))
        stack.enter_context(mock.patch("sys.stdout"))
        try:
            module.main(list(argv))
        except _Reached:
            return None
        except TaoBrevError as exc:
            return exc.message
        except SystemExit as exc:
            if exc.code == 0:
                return None
            return "".join(str(c.args[0]) for c in err.write.call_args_list).strip() or f"exit {exc.code}"
    return None


def _fill(token: str, instance: str) -> str:
    word = token.strip("$<>{}")
    if word in ("NAME", "INSTANCE"):
        return instance
    return _PLACEHOLDERS.get(word, token)


def commands(text: str, instance: str = "box") -> list[tuple[str, list[str], tuple[int, int]]]:
    """(script, argv, span) of each explicit script command in ``text``: the script
    name, then the words that are its arguments (flags, their values, placeholders,
    ids), up to the first word of prose."""
    found = []
    for match in _SCRIPT.finditer(text):
        script = match.group(1)
        takes_value = _value_flags(script)
        argv, pos, expect_value = [], match.end(), False
        for word in re.finditer(r"[^\s]+", text[match.end():]):
            token = word.group(0)
            clean = token.rstrip(".,;:)`\"'")
            if expect_value:
                argv.append(_value(script, argv[-1], _fill(clean, instance)))
                expect_value = False
            elif clean.startswith("--") and _FLAG.fullmatch(clean.split("=", 1)[0]):
                argv.append(clean)
                expect_value = "=" not in clean and clean in takes_value
            elif re.fullmatch(r"\$?[A-Z][A-Z_]*|[a-z0-9][a-z0-9_.]*-[a-z0-9_.-]+|lint|scan|redact|show|list|mark|"
                              r"--", clean) and not argv[-1:] == ["--"]:
                argv.append(_fill(clean, instance))
            else:
                break
            pos = match.end() + word.end()
            if clean != token:   # punctuation ends the command
                break
        found.append((script, argv, (match.start(), pos)))
    return found


def _complete(script: str, argv: list[str], instance: str) -> tuple[list[str], str | None]:
    """argv with the options argparse says are missing supplied; and main()'s verdict."""
    why = rejection(script, argv)
    for _ in range(3):
        missing = re.search(r"the following arguments are required: (.*)", why or "")
        if not missing:
            break
        for opt in re.findall(r"--[a-z][a-z0-9-]*", missing.group(1)):
            argv = [*argv, opt, instance if opt == "--instance" else "x"]
        why = rejection(script, argv)
    return argv, why


def fix_texts(answer) -> list[str]:
    """Every fix / advice text in an answer (nested answers included)."""
    out = []
    if isinstance(answer, dict):
        for key, value in answer.items():
            if key in ("fix", "advice") and isinstance(value, str):
                out.append(value)
            else:
                out += fix_texts(value)
    elif isinstance(answer, list):
        for item in answer:
            out += fix_texts(item)
    return out


def violations(script: str, argv: list[str], answer, instance: str | None = None) -> list[str]:
    """What the fix texts of ``answer`` (produced by ``script argv``) get wrong."""
    if script not in SCRIPTS or not isinstance(answer, (dict, list)):
        return []
    if instance is None:
        instance = argv[argv.index("--instance") + 1] if "--instance" in argv[:-1] else "box"
    wrong = []
    for text in fix_texts(answer):
        spans = []
        for named, args, span in commands(text, instance):
            spans.append(span)
            if not any(a.startswith("--") and a != "--" for a in args):
                continue   # a script named without a flag ("delete it with teardown.py"): nothing to check
            _, why = _complete(named, args, instance)
            if why:
                wrong.append(f"fix {text!r}: `{named} {' '.join(args)}` is rejected: {why}")
        outside = "".join(ch if not any(a <= i < b for a, b in spans) else " " for i, ch in enumerate(text))
        own = _flags(script)
        for found in re.finditer(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?:[ =]([^\s,;)]+))?", outside):
            flag, word = found.group(1), (found.group(2) or "").strip("`'\".")
            if flag not in own or flag in argv:
                continue
            extra = [flag] + ([_value(script, flag, _fill(word, instance))] if flag in _value_flags(script) else [])
            _, why = _complete(script, [*argv, *extra], instance)
            if why:
                wrong.append(f"fix {text!r} (answer of `{script} {' '.join(argv)}`): adding {flag} is rejected: "
                             f"{why}")
    return wrong


# -- ``next`` (tao_brev/nextstep.py): every answer of the four verbs names the command to run next ----

NEXT_SCRIPTS = ("preflight.py", "submit.py", "poll_status.py", "teardown.py")
_PLACEHOLDER_WORD = re.compile(r"^(JOB_ID|JOB|NAME|INSTANCE|IMAGE|USD|BUCKET|SPEC|ID)$|<[^>]*>|\$\{?[A-Z]")


def next_command(text: str) -> tuple[str | None, list[str], str | None]:
    """(script, argv, why wrong) of a ``next`` string: one of the bundle's scripts by its absolute
    path (or ``bash /abs/install.sh ...``), and the words after it."""
    import shlex

    try:
        words = shlex.split(text)
    except ValueError as exc:
        return None, [], f"not one shell command ({exc})"
    if not words:
        return None, [], "empty"
    bad = [w for w in words if _PLACEHOLDER_WORD.search(w)]
    if bad:
        return None, words, f"holds placeholders {bad}"
    if words[0] == "bash" and len(words) > 1:
        path = Path(words[1])
        if path.name != "install.sh" or not path.is_absolute():
            return None, words, "a bash command that is not <absolute bundle path>/install.sh"
        return "install.sh", words[2:], None
    path = Path(words[0])
    if not path.is_absolute() or path.parent.name != "scripts" or path.name not in SCRIPTS:
        return None, words, "does not start with the absolute path of one of the bundle's scripts"
    if not path.is_file():
        return None, words, f"{path} does not exist"
    return path.name, words[1:], None


def _placeholder_fixes(answer, job_id: str | None = None) -> list[str]:
    """Fix / advice texts that say ``JOB_ID`` inside an object (or under one) that names its job."""
    if isinstance(answer, list):
        return [bad for item in answer for bad in _placeholder_fixes(item, job_id)]
    if not isinstance(answer, dict):
        return []
    job_id = answer.get("job_id") if isinstance(answer.get("job_id"), str) else job_id
    found = []
    for key, value in answer.items():
        if key in ("fix", "advice") and isinstance(value, str):
            if job_id and re.search(r"\bJOB_ID\b", value):
                found.append(value)
        else:
            found += _placeholder_fixes(value, job_id)
    return found


# Values a following command of the same script keeps (a rerun of preflight / submit / teardown;
# a poll that waits again keeps how it waits).
KEPT = {"preflight.py": ("--instance", "--image", "--storage-tier", "--bucket", "--results-root", "--exec-timeout"),
        "submit.py": ("--instance", "--image", "--network-arch", "--action", "--storage-tier", "--bucket",
                      "--results-root", "--gpus", "--shm-size", "--price-per-hour"),
        "teardown.py": ("--instance", "--price-per-hour"),
        "poll_status.py": ("--interval", "--timeout", "--stall-after", "--price-per-hour")}


def _given(argv: list[str], flags) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if name in flags and (eq or i + 1 < len(argv)):
            out.setdefault(name, []).append(value if eq else argv[i + 1])
    return out


def dropped_values(script: str, argv: list[str], named: str, args: list[str]) -> list[str]:
    """``--flag value`` pairs of this run that a next command of the same script lost (a poll: only
    one that waits again). A --stall-after the next changes on purpose is not lost."""
    if named != script or "--help" in args or (named == "poll_status.py" and "--wait" not in args):
        return []
    flags = KEPT.get(named, ())
    given, kept = _given(argv, flags), _given(args, flags)
    return [f"{flag} {value}" for flag, values in given.items() for value in values
            if value not in kept.get(flag, [])]


def next_violations(script: str, argv: list[str], answer) -> list[str]:
    """What is wrong with the ``next`` of an answer of ``script argv`` (schema: common.schema.json)."""
    if script not in NEXT_SCRIPTS or not isinstance(answer, dict):
        return []
    where = f"answer of `{script} {' '.join(argv)}`"
    generic = _placeholder_fixes(answer)
    if generic:
        return [f"{where}: fix texts name placeholders where the answer knows the real value: {generic}"]
    if "next" not in answer:
        return [f"{where} has no `next`: {str(answer)[:600]}"]
    nxt = answer["next"]
    if nxt is None:
        note = answer.get("next_note")
        return [] if isinstance(note, str) and note.strip() else [f"{where}: next is null without a next_note"]
    if not isinstance(nxt, str):
        return [f"{where}: next is neither a string nor null: {nxt!r}"]
    named, args, why = next_command(nxt)
    if why:
        return [f"{where}: next {nxt!r} {why}"]
    if named == "install.sh":
        return [] if args[:1] == ["--local"] else [f"{where}: next {nxt!r}: install.sh without --local"]
    if (named, args) == (script, list(argv)):
        return []   # "the same command again" (an interrupt, a retry): as valid as the caller's own call
    if "--wait" in args and "--timeout" not in [a.split("=", 1)[0] for a in args]:
        return [f"{where}: next {nxt!r} waits with no --timeout: an agent's shell would block until the job ends"]
    message = (answer.get("error") or {}).get("message", "") if answer.get("ok") is False else ""
    # a corrected call (BAD_ARGUMENT / UNKNOWN_INSTANCE naming the wrong value) changes that value on purpose
    dropped = [d for d in dropped_values(script, argv, named, args)
               if not (answer.get("error", {}).get("code") in ("BAD_ARGUMENT", "UNKNOWN_INSTANCE")
                       and d.split(" ", 1)[1] in message)
               and d.split(" ", 1)[-1] not in (answer.get("did_you_mean") or {})]   # a typo corrected on purpose
    if dropped:
        return [f"{where}: next {nxt!r} drops what this run was given: {dropped}"]
    rejected = rejection(named, args)
    return [f"{where}: next {nxt!r} is rejected by {named}: {rejected}"] if rejected else []


def script_of(args) -> tuple[str | None, list[str]]:
    """(script, its argv) when a process's argv runs one of the bundle's scripts (any copy of it)."""
    if isinstance(args, (str, bytes, os.PathLike)):
        return None, []
    words = [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args]
    for i, word in enumerate(words[:3]):
        path = Path(word)
        if path.name in SCRIPTS and path.parent.name == "scripts":
            return path.name, words[i + 1:]
    return None, []


def answer_violations(args, stdout) -> list[str]:
    """Everything :func:`violations` and :func:`next_violations` find in the answer a process
    running one of the bundle's scripts printed (nothing to check when it is not one JSON answer)."""
    import json

    script, argv = script_of(args)
    if script is None or not stdout:
        return []
    text = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout
    try:
        answer = json.loads(text)
    except ValueError:
        return []
    return violations(script, argv, answer) + next_violations(script, argv, answer)
