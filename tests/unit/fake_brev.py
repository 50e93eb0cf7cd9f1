"""An in-process fake of ``brev`` for the unit layer, in the style of Fabric's ``MockRemote``.

A test declares a script of expected calls; each is a ``brev`` argv pattern (or, for
``brev exec``, the instance and a pattern of the remote command) and what it answers
(stdout, stderr, exit status). Every call the code under test makes must match a pending
expectation, and every expectation must be used: an unexpected call fails at once (it
raises inside the verb and is noted, so a verb that catches it still fails the test), a
missing one fails at the end (:meth:`FakeBrev.verify`, run by the ``fake_brev`` fixture).

The seam is the one place the transport starts a process: ``Brev._spawn`` builds the argv
and the environment, refuses known secret values on the command line, and hands the
process to ``run_until_exit``. The fake replaces only the process: ``subprocess`` as
``tao_brev.transport`` sees it (its ``Popen``) and ``transport.run_until_exit``. Everything
above it runs as in production: the exec framing with its nonce, retries, the login repeat,
``brev ls`` parsing, the secret checks of the argv, the environment brev gets.

``brev exec`` answers are framed here as the remote shell's wrapper would frame them
(``transport.frame``), so a test gives the remote command's own stdout, stderr and exit
status; :func:`sections` builds a ``remote.section`` answer from the section names the
command asks for.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import types
from dataclasses import dataclass, field
from typing import Callable, Union

_NONCE = re.compile(r"'(TAOBREV[0-9a-f]{20}):out'")
# transport.frame: ... exit 0; }; ( SCRIPT\n) </dev/null >"$__tb_o" ...
_SCRIPT = re.compile(r'\|\| \{ echo "mktemp failed" >&2; exit 0; \}; \( (.*)\n\) </dev/null >"\$__tb_o"', re.DOTALL)
_TOKEN = re.compile(r"printf '%s\\n' '(S[0-9a-f]{12})>")

Pattern = Union[str, "re.Pattern[str]"]
Answer = tuple  # (stdout, stderr, exit)


@dataclass
class Call:
    """One brev invocation the code under test made: its argv (without the binary) and,
    for ``brev exec``, the remote command as written (unframed) and the instance."""

    args: list
    env: dict
    timeout: float
    command: str | None = None
    instance: str | None = None


@dataclass
class Expectation:
    """An expected brev call and its answer.

    ``args``: the argv after ``brev``, each item a literal or a compiled pattern (fullmatch);
    for exec, ``instance`` and ``command`` (a pattern searched in the remote command, a literal
    is a substring). ``answer``: (stdout, stderr, exit) of the remote command for exec (framed
    here) or of brev itself; a callable ``answer(call)`` returns one; ``raw``: the exec answer
    is brev's own (no frame: a transport failure); ``banner``: what brev prints before the frame
    (a login banner, ``Instance NAME is starting.``); ``timeout``: the call does not end in time."""

    kind: str
    args: tuple = ()
    instance: str | None = None
    command: Pattern | None = None
    host: bool | None = None
    answer: Union[Answer, Callable[[Call], Answer]] = ("", "", 0)
    raw: bool = False
    banner: str = ""
    timeout: bool = False
    times: int = 1
    used: int = 0
    calls: list = field(default_factory=list)

    def matches(self, call: Call) -> bool:
        if self.kind == "exec":
            if call.args[:1] != ["exec"] or call.instance != self.instance:
                return False
            if self.host is not None and ("--host" in call.args) != self.host:
                return False
            if self.command is None:
                return True
            if isinstance(self.command, str):
                return self.command in call.command
            return bool(self.command.search(call.command))
        if len(self.args) != len(call.args):
            return False
        for want, got in zip(self.args, call.args):
            if isinstance(want, str) and want != got:
                return False
            if not isinstance(want, str) and not want.fullmatch(got):
                return False
        return True

    def describe(self) -> str:
        if self.kind == "exec":
            return f"brev exec {self.instance} <command matching {getattr(self.command, 'pattern', self.command)!r}>"
        return "brev " + " ".join(getattr(a, "pattern", a) for a in self.args)


class UnexpectedBrevCall(AssertionError):
    pass


class FakeBrev:
    """A script of expected brev calls (see the module's doc).

    ``ordered``: each call must match the first expectation not used up (as Fabric's
    MockRemote checks them); without it a call takes the first pending expectation it matches, so that the
    calls a verb makes concurrently (``poll --all``, ``--orphans``: instances in threads) need no
    order, while every call is still checked against a pattern and counted."""

    def __init__(self, ordered: bool = False):
        self.ordered = ordered
        self.expected: list[Expectation] = []
        self.calls: list[Call] = []
        self.unexpected: list[str] = []
        self._lock = threading.Lock()

    # -- declaring the script -----------------------------------------------
    def expect(self, *args: Pattern, stdout: str = "", stderr: str = "", exit: int = 0,
               answer=None, timeout: bool = False, times: int = 1) -> Expectation:
        """``brev ARGS...`` answering ``stdout``/``stderr``/``exit`` (or ``answer(call)``)."""
        exp = Expectation("brev", tuple(args), answer=answer or (stdout, stderr, exit), timeout=timeout,
                          times=times)
        self.expected.append(exp)
        return exp

    def expect_exec(self, instance: str, command: Pattern | None = None, stdout: str = "", stderr: str = "",
                    exit: int = 0, *, answer=None, raw: bool = False, banner: str = "", timeout: bool = False,
                    host: bool | None = None, times: int = 1) -> Expectation:
        """``brev exec [--host] INSTANCE <command>``: the remote command (matching ``command``)
        prints ``stdout``/``stderr`` and exits ``exit``; with ``raw`` those are brev's own."""
        exp = Expectation("exec", instance=instance, command=command, host=host,
                          answer=answer or (stdout, stderr, exit), raw=raw, banner=banner, timeout=timeout,
                          times=times)
        self.expected.append(exp)
        return exp

    def expect_ls(self, *instances: dict, times: int = 1) -> Expectation:
        """``brev ls --json`` listing ``instances`` (dicts: name, status, ... as brev prints them)."""
        return self.expect("ls", "--json", stdout=json.dumps({"workspaces": list(instances) or None}), times=times)

    # -- what the transport sees ---------------------------------------------
    def _answer(self, args: list, env: dict, timeout: float):
        call = Call(list(args), dict(env), timeout)
        if args[:1] == ["exec"]:
            call.instance = args[-2]
            found = _SCRIPT.search(args[-1])
            call.command = found.group(1) if found else args[-1]
        with self._lock:
            self.calls.append(call)
            pending = [e for e in self.expected if e.used < e.times]
            exp = next((e for e in pending[:1 if self.ordered else None] if e.matches(call)), None)
            if exp is None:
                shown = call.command if call.command is not None else " ".join(call.args)
                message = f"unexpected brev call: {' '.join(call.args[:-1]) if call.command else ''} {shown[:3000]}"
                if self.ordered and pending:
                    message += f" (the script expects {pending[0].describe()} next)"
                self.unexpected.append(message)
                raise UnexpectedBrevCall(message)
            exp.used += 1
            exp.calls.append(call)
        if exp.timeout:
            raise subprocess.TimeoutExpired(args, timeout, output=b"", stderr=b"")
        out, err, code = exp.answer(call) if callable(exp.answer) else exp.answer
        if exp.kind != "exec" or exp.raw:
            return code, out, err
        nonce = _NONCE.search(args[-1]).group(1)
        return 0, f"{exp.banner}{nonce}:out\n{out}\n{nonce}:err\n{err}\n{nonce}:rc {code}\n{call.instance}\n", ""

    def verify(self) -> None:
        """Fail when a call was unexpected or an expected one never came."""
        problems = list(self.unexpected)
        problems += [f"expected but not made ({e.times - e.used} left): {e.describe()}"
                     for e in self.expected if e.used < e.times]
        assert not problems, "\n".join(problems)

    def exec_commands(self, instance: str | None = None) -> list[str]:
        """The remote commands sent so far (unframed), optionally of one instance."""
        return [c.command for c in self.calls if c.command is not None and instance in (None, c.instance)]

    # -- installing it -------------------------------------------------------
    def install(self, monkeypatch) -> "FakeBrev":
        """Replace the brev process as ``tao_brev.transport`` starts it (``subprocess.Popen``
        there, and ``run_until_exit``); nothing else in the process is patched."""
        from tao_brev import transport

        fake = self

        class Process:
            def __init__(self, argv, stdin=None, stdout=None, stderr=None, env=None, start_new_session=False):
                assert stdin == subprocess.DEVNULL and start_new_session, "brev runs detached, stdin /dev/null"
                self.args = list(argv)
                self.env = dict(env or {})
                self.returncode = None

        def run_until_exit(proc, timeout, stop_on=None):
            code, out, err = fake._answer(proc.args[1:], proc.env, timeout)
            proc.returncode = code
            return code, out, err

        patched = types.SimpleNamespace(**{name: getattr(subprocess, name) for name in
                                           ("DEVNULL", "PIPE", "TimeoutExpired", "CompletedProcess")})
        patched.Popen = Process
        monkeypatch.setattr(transport, "subprocess", patched)
        monkeypatch.setattr(transport, "run_until_exit", run_until_exit)
        return self


def sections(answers: dict, default: tuple | None = None) -> Callable[[Call], Answer]:
    """An exec answer for a command made of ``remote.section`` parts: ``answers`` maps a
    section name to ``(status, text)`` (or a text: status 0; a text may be ``text(token)``, for
    output that carries the command's token itself); a section the command asks for and
    ``answers`` lacks gets ``default`` (None: it is left out, as when the script stopped)."""

    def answer(call: Call) -> Answer:
        token = _TOKEN.search(call.command).group(1)
        asked = re.findall(rf"'{token}>([^']+)'", call.command)
        parts = []
        for name in asked:
            given = answers.get(name, default)
            if given is None:
                continue
            status, text = (0, given) if isinstance(given, str) or callable(given) else given
            text = text(token) if callable(text) else text
            parts.append(f"{token}>{name}\n{text}\n{token}<{name} {status}")
        return "\n".join(parts) + "\n", "", 0

    return answer
