#!/usr/bin/env python3
"""Lint or redact literal credentials in commands, scripts, manifests and records.

usage: redact_secrets.py lint   [FILE ...]   # stdin when no FILE or '-'
       redact_secrets.py redact [FILE ...]

lint    prints one finding per line, FILE:LINE: NAME (kind), to stdout; the
        value is never printed. Prints nothing when clean.
redact  prints the text with every literal credential replaced by <redacted>
        (names and flags kept), and with the values of the credential
        variables set in this environment replaced too.

Exit codes: 0 clean (lint) or done (redact); 1 lint found a literal
credential; 2 bad input (unknown mode, unreadable FILE); 3 no Python >= 3.9
to run on (the bundle's .venv is missing and python3 is older).

Same command line as the TAO skill bank's scripts/redact_secrets.py, e.g.
  redact_secrets.py lint <<<"$REMOTE_CMD"   # creds as -e VAR, never values

Caught (advice, by shape and name; never raises): NAME=literal for
credential names (SECRET PASSWORD TOKEN API_KEY ACCESS_KEY ... camelCase too;
not *_file/*_path/*_id-of-token descriptors nor tokenizer keys such as
pad_token), ${NAME:-literal}, credential flags (--password --token --secret
...), -p after login, mysql -pX, sshpass -p, curl -u user:X, aws configure
set, Authorization headers, Kubernetes env value: literals, credential keys in
JSON/YAML and flow mappings, presigned-URL signatures, URL userinfo, PEM
private keys, known token shapes (nvapi- hf_ ghp_ github_pat_ glpat- npm_
pypi- AKIA AIza xox sk-). Literals shorter than 8 characters, references
(${oc.env:X}, $VAR, $(cmd)) and special tokens ([PAD], </s>) pass.
Not caught: secrets split across variables or built at run time, encoded
values, secrets under names without a credential word, a literal piped to
--password-stdin, secrets in binary files or in files named by path. redact
also replaces every secret value set in this shell's environment, in every
encoding. See references/redaction.md.
"""

import sys

import _bootstrap

_bootstrap.setup(needs=(), json_answer=False)   # the standard library is enough; stdout is text, not JSON

import argparse  # noqa: E402

from tao_brev.cli import help_formatter  # noqa: E402  (argparse's own, without its shutil import)

EXIT_CLEAN, EXIT_FINDINGS, EXIT_BAD_INPUT = 0, 1, 2
STDIN = "-"
_PARAGRAPHS = __doc__.strip().split("\n\n")  # title, usage (argparse prints its own), the rest


def _read(name: str) -> tuple[str, str]:
    """(label, text) of one input; raises OSError or UnicodeDecodeError."""
    if name == STDIN:
        return "<stdin>", sys.stdin.read()
    from pathlib import Path

    return name, Path(name).read_text(encoding="utf-8")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="redact_secrets.py", description=_PARAGRAPHS[0],
        epilog="\n\n".join(_PARAGRAPHS[2:]), formatter_class=help_formatter)
    parser.add_argument("mode", choices=("lint", "redact"))
    parser.add_argument("files", nargs="*", metavar="FILE", help="files to read; stdin if none or '-'")
    args = parser.parse_args(argv)
    from tao_brev.secrets import redact

    sources = []
    for name in args.files or [STDIN]:
        try:
            sources.append(_read(name))
        except (OSError, UnicodeDecodeError) as exc:
            reason = getattr(exc, "strerror", None) or "not UTF-8 text"
            print(f"redact_secrets.py: cannot read {name}: {reason}", file=sys.stderr)
            return EXIT_BAD_INPUT

    if args.mode == "redact":
        for _, text in sources:
            sys.stdout.write(redact.redact_values(redact.redact(text)))
        return EXIT_CLEAN

    total = 0
    for label, text in sources:
        for finding in redact.lint(text):
            print(f"{label}:{finding.line}: {finding.name} ({finding.kind})")
            total += 1
    if total:
        print(f"{total} literal credential(s): pass credentials as $VAR / -e VAR, "
              "--password-stdin or valueFrom.secretKeyRef, never as values.", file=sys.stderr)
        return EXIT_FINDINGS
    return EXIT_CLEAN


if __name__ == "__main__":
    from tao_brev import pipes

    try:
        status = main()
        pipes.flush_stdout()
    except BrokenPipeError:   # `| head`: the reader left; end as a death by SIGPIPE would (tao_brev/pipes.py)
        pipes.end_as_sigpipe()
    sys.exit(status)
