#!/usr/bin/env python3
"""Mutation score of the guarantee modules, one module at a time (a contributor's tool).

usage: .venv/bin/python dev/mutation.py [MODULE ...] [--report] [--survivors] [--json FILE]

For each MODULE (default: every module of [tool.mutation.modules] in pyproject.toml):
stages the checkout under .mutation/<module>/ (links to the tree and a pyproject.toml whose
[tool.mutmut] mutates only tao_brev/<path>.py for each of the module's "paths" (default: the
module's own name; e.g. "secrets/redact") and selects only that module's focused tests,
minus the tests carrying the module's exclude_markers), runs `mutmut run` there
with ONE worker under `nice -n 15`, then prints per module:
  score = killed / (mutants - equivalents), and every surviving mutant with its diff.
Killed counts mutmut's "killed" and "timeout"; "survived", "no tests" (no focused test
reaches the function), "suspicious" and "not checked" (an interrupted run) count as not
killed; an interrupted run also prints the score of the mutants it checked.

Equivalent mutants (they cannot change behaviour) are listed in dev/mutation_equivalents.toml
as [[equivalent]] tables: module, function, the mutant's changed lines (`change`, as printed
under the survivor) and `reason`. A survivor matches by module, function and change (not by
mutmut's number, which moves when a function changes); matched ones are subtracted from the
denominator and listed; entries that match no mutant are reported as stale.

  --report      do not run: score the results already under .mutation/
  --survivors   keep the staged results: check the mutants of functions changed since the last
                run (mutmut regenerates those and keeps the other results), then rerun every
                mutant not killed (after adding tests or simplifying code; a full run re-checks all)
  --json FILE   also write the figures and survivors as JSON to FILE

Exit codes: 0 ran (whatever the score), 2 bad input (unknown module, no mutmut), 1 mutmut failed.
Needs mutmut (pyproject's dev extra, Python 3.10+: bash install.sh --local --dev).
Takes minutes per module: one worker, focused tests only.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE_ROOT = ROOT / ".mutation"

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib


def load_pyproject():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return text, tomllib.loads(text)


def toml_value(value):
    """Strings, numbers, booleans and lists of them: their JSON spelling is valid TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def source_paths(module, spec):
    """The files a module's score covers: tao_brev/<path>.py for each of its "paths" (default: [module])."""
    return ["tao_brev/%s.py" % path for path in spec.get("paths", [module])]


def staged_pyproject(text, data, module, spec):
    """pyproject.toml for the stage of MODULE: its [tool.mutmut] narrowed to the module."""
    conf = dict(data["tool"]["mutmut"])
    conf["only_mutate"] = source_paths(module, spec)
    conf["pytest_add_cli_args_test_selection"] = sorted(
        {str(p.relative_to(ROOT)) for pattern in spec["tests"] for p in ROOT.glob(pattern)})
    markers = ["real_docker"] + list(spec.get("exclude_markers", []))
    # a later -m replaces addopts' -m
    conf["pytest_add_cli_args"] = list(conf.get("pytest_add_cli_args", [])) + [
        "-m", " and ".join("not %s" % m for m in markers)]
    for test in spec.get("deselect", []):
        conf["pytest_add_cli_args"] += ["--deselect", test]
    section = "[tool.mutmut]\n" + "".join("%s = %s\n" % (k, toml_value(v)) for k, v in conf.items())
    # replace the [tool.mutmut] table (up to the next table header) with the narrowed one
    return re.sub(r"(?ms)^\[tool\.mutmut\]\n.*?(?=^\[)", lambda _m: section + "\n", text, count=1)


def stage(module, spec, text, data):
    where = STAGE_ROOT / module
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    for name in ["tao_brev", "tests"] + list(data["tool"]["mutmut"].get("also_copy", [])):
        if (ROOT / name).exists():
            (where / name).symlink_to(ROOT / name)
    (where / "pyproject.toml").write_text(staged_pyproject(text, data, module, spec), encoding="utf-8")
    return where


def mutmut_exe():
    exe = Path(sys.executable).parent / "mutmut"
    if not exe.exists():
        sys.exit("dev/mutation.py: no mutmut next to %s (bash install.sh --local --dev, Python 3.10+)"
                 % sys.executable)
    return exe


def run_mutmut(where, names=()):
    log = where / "mutmut.log"
    print("mutation: %s: mutmut run (log: %s)" % (where.name, log.relative_to(ROOT)), file=sys.stderr)
    with open(log, "a", encoding="utf-8") as out:
        proc = subprocess.run(["nice", "-n", "15", str(mutmut_exe()), "run", "--max-children", "1"]
                              + list(names), cwd=str(where), stdout=out, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        print(tail, file=sys.stderr)
        sys.exit("dev/mutation.py: mutmut failed for %s (exit %d; log %s)" % (where.name, proc.returncode, log))


def results(where, module, spec):
    """{mutant name: status} from mutmut's meta files of the module's source paths (None: none ran)."""
    from mutmut.stats import status_by_exit_code
    metas = [where / "mutants" / (path + ".meta") for path in source_paths(module, spec)]
    if not any(meta.exists() for meta in metas):
        return None
    out = {}
    for meta in metas:
        if meta.exists():
            codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
            out.update((name, status_by_exit_code[code]) for name, code in codes.items())
    return out


def source_of(name):
    """tao_brev.secrets.redact.x_tail__mutmut_3 -> tao_brev/secrets/redact.py (the mutated file); a
    package's own code: tao_brev.transport.x_run__mutmut_1 -> tao_brev/transport/__init__.py."""
    base = name.rsplit(".", 1)[0].replace(".", "/")
    return base + ".py" if (ROOT / (base + ".py")).is_file() else base + "/__init__.py"


def diffs(where, names):
    """{mutant name: the changed lines ("-old" / "+new")} read with mutmut's own diff."""
    if not names:
        return {}
    from mutmut import configuration
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    old = os.getcwd()
    os.chdir(str(where))
    try:
        configuration.reset_config()
        out = {}
        for name in names:
            diff = get_diff_for_mutant(name, path=source_of(name))
            out[name] = "\n".join(line.rstrip() for line in diff.splitlines()
                                  if line[:1] in "+-" and not line.startswith(("+++", "---")))
        return out
    finally:
        os.chdir(old)
        configuration.reset_config()


def function_of(name):
    """tao_brev.transport.x_brev_environment__mutmut_3 -> brev_environment (methods: Class.meth)."""
    base = name.rsplit(".", 1)[-1].rsplit("__mutmut_", 1)[0]
    if base.startswith("x_"):
        return base[2:]
    return ".".join(p for p in base.split("\u01c1")[1:] if p)


def norm(change):
    return "\n".join(" ".join(line.split()) for line in change.strip().splitlines())


def load_equivalents(data):
    path = ROOT / data["tool"]["mutation"].get("equivalents", "dev/mutation_equivalents.toml")
    if not path.exists():
        return []
    return tomllib.loads(path.read_text(encoding="utf-8")).get("equivalent", [])


def score(module, spec, where, equivalents):
    status = results(where, module, spec)
    if status is None:
        return None
    killed = sorted(n for n, s in status.items() if s in ("killed", "timeout", "caught by type check"))
    rest = sorted((n for n in status if n not in killed), key=lambda n: (function_of(n), int(n.rsplit("_", 1)[1])))
    changes = diffs(where, rest)
    mine = [e for e in equivalents if e["module"] == module]
    used, equivalent, survivors = set(), [], []
    for name in rest:
        match = next((i for i, e in enumerate(mine) if e["function"] == function_of(name)
                      and norm(e["change"]) == norm(changes[name])), None)
        entry = {"mutant": name, "status": status[name], "change": changes[name]}
        if match is None:
            survivors.append(entry)
        else:
            used.add(match)
            equivalent.append(dict(entry, reason=mine[match]["reason"]))
    counted = len(status) - len(equivalent)
    unchecked = sum(s["status"] == "not checked" for s in survivors)
    checked = counted - unchecked
    return {
        "module": module,
        "mutants": len(status),
        "killed": len(killed),
        "equivalent": equivalent,
        "survivors": survivors,
        "not_checked": unchecked,
        "stale_equivalents": [e for i, e in enumerate(mine) if i not in used],
        "score": round(100.0 * len(killed) / counted, 1) if counted else 100.0,
        # an interrupted run: the score of the mutants it did check
        "score_checked": round(100.0 * len(killed) / checked, 1) if checked else None,
    }


def print_report(reports):
    print("%-14s %8s %7s %11s %9s %12s %7s" % ("module", "mutants", "killed", "equivalent", "survived",
                                               "not checked", "score"))
    for r in reports:
        partial = (" (%.1f%% of those checked)" % r["score_checked"]) if r["not_checked"] else ""
        print("%-14s %8d %7d %11d %9d %12d %6.1f%%%s" % (
            r["module"], r["mutants"], r["killed"], len(r["equivalent"]), len(r["survivors"]) - r["not_checked"],
            r["not_checked"], r["score"], partial))
    for r in reports:
        for s in r["survivors"]:
            if s["status"] == "not checked":
                continue
            print("\nSURVIVED (%s) %s\n%s" % (s["status"], s["mutant"], s["change"]))
        for e in r["equivalent"]:
            print("\nequivalent %s: %s\n%s" % (e["mutant"], e["reason"], e["change"]))
        for e in r["stale_equivalents"]:
            print("\nSTALE equivalent entry (matches no mutant of %s.%s):\n%s" % (r["module"], e["function"], e["change"]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("modules", nargs="*", metavar="MODULE")
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--survivors", action="store_true")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    text, data = load_pyproject()
    modules = data["tool"]["mutation"]["modules"]
    unknown = [m for m in args.modules if m not in modules]
    if unknown:
        print("dev/mutation.py: unknown module(s) %s; known: %s" % (", ".join(unknown), ", ".join(modules)),
              file=sys.stderr)
        return 2
    missing = ["%s: %s" % (m, path) for m in args.modules or list(modules)
               for path in source_paths(m, modules[m]) if not (ROOT / path).is_file()]
    if missing:   # mutmut would mutate nothing there and stop with "could not find any test case"
        print("dev/mutation.py: [tool.mutation.modules] names files that do not exist: %s (a module that became a "
              "package lists its files as \"paths\")" % "; ".join(missing), file=sys.stderr)
        return 2
    equivalents = load_equivalents(data)
    reports = []
    for module in args.modules or list(modules):
        where = STAGE_ROOT / module
        if not args.report:
            if args.survivors and results(where, module, modules[module]):
                run_mutmut(where)   # mutants of functions changed since the last run (mutmut keeps the rest)
                left = [n for n, s in results(where, module, modules[module]).items()
                        if s not in ("killed", "timeout")]
                if left:
                    run_mutmut(where, left)
            else:
                run_mutmut(stage(module, modules[module], text, data))
        report = score(module, modules[module], where, equivalents)
        if report is None:
            print("dev/mutation.py: no results for %s (run it without --report first)" % module, file=sys.stderr)
            continue
        reports.append(report)
    print_report(reports)
    if args.json:
        Path(args.json).write_text(json.dumps(reports, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
