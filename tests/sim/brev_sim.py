"""Simulated ``brev`` CLI (ROOT/bin/brev), as unkind as the real one.

Every behaviour below comes from references/brev-exec.md ("The facts"),
read from brevdev/brev-cli: ``pkg/cmd/exec/exec.go`` (argument parsing, stdin
names, the echoed instance name, the retry after ANY non-zero ssh exit),
``pkg/cmd/util/ssh.go`` (WaitForSSHToBeAvailable: up to 40 probes;
StartWorkspaceIfStopped), ``pkg/cmd/ls/ls.go`` (``--json`` shape),
``pkg/cmd/delete/delete.go``, ``pkg/cmd/stop/stop.go``, ``pkg/cmd/gpusearch/gpusearch.go``
(tests/sim/catalog.py), ``pkg/cmd/login/login.go``, ``main.go`` +
``pkg/cmd/cmderrors`` (an error is one message and exit status 1).

"ssh" is simulated: the command string runs as ``bash -c COMMAND`` in the
instance home with a clean environment and stdin from /dev/null. Faults added
with ``simctl.Simulator.add_fault`` are consumed one per ssh connection.

Also from brev-cli: ``pkg/ssh/sshconfigurer.go`` (ControlMaster auto +
ControlPersist 10m: a detached master outlives the first ssh and can hold
brev's pipes), ``pkg/store/ssh.go`` SatisfactorySSHErrMessage (brev's wait for
ssh retries only "Connection refused"/"timed out"; ``Permission denied
(publickey)`` ends it at once), ``pkg/auth/auth.go`` shouldLogin (a logged-out
brev prints ``You are currently logged out, would you like to log in? [Y/n]: ``
on stdout and reads the answer from stdin: EOF from /dev/null).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import brev_today
import catalog
from containers import ContainerStore
from pflag import FlagError, FlagSpec, parse
from simstate import MASTER_MARK, STATE_ENV, World, is_char_device, master_alive

VERSION = "v0.6.316"
LOGIN_PROMPT = "You are currently logged out, would you like to log in? [Y/n]: "   # auth.go shouldLogin
# pkg/store/ssh.go SatisfactorySSHErrMessage: the only ssh errors brev's wait for ssh retries on
SATISFACTORY_SSH_ERRORS = ("Connection refused", "Operation timed out", "Warning:", "Connection timed out")
STATUSES = ("RUNNING", "STARTING", "STOPPING", "DEPLOYING", "STOPPED", "DELETING", "FAILURE", "UNHEALTHY")


class BrevError(Exception):
    """A command failed: cmderrors.DisplayAndHandleError prints the message, main exits 1."""


def out(text: str, end: str = "\n") -> None:
    sys.stdout.write(text + end)
    sys.stdout.flush()


def err(text: str, end: str = "\n") -> None:
    sys.stderr.write(text + end)
    sys.stderr.flush()


def stdout_piped() -> bool:
    """exec.go isPiped(): stdout is not a character device."""
    return not is_char_device(1)


def fake_ip(inst: dict) -> str:
    import hashlib
    h = hashlib.sha256(str(inst.get("id")).encode()).digest()
    return f"10.{h[0]}.{h[1]}.{h[2] or 1}"


def multierror(errors: list[str]) -> str:
    """hashicorp/go-multierror's default format."""
    head = "1 error occurred:" if len(errors) == 1 else f"{len(errors)} errors occurred:"
    return head + "\n" + "".join(f"\t* {e}\n" for e in errors) + "\n"


class Brev:
    """One invocation of the brev CLI."""

    GLOBAL = FlagSpec.make(bools="version help", values="user", short="h=help")

    def __init__(self, world: World, argv: list[str]):
        self.world = world
        self.argv = argv
        self.audited = False
        self.auth_failure: str | None = None   # brev exec: the API would refuse (checked after an ssh failure)

    # bookkeeping -----------------------------------------------------------
    def audit(self, **extra) -> None:
        if not self.audited:
            self.audited = True
            self.world.audit("brev", self.argv, extra.pop("instance", None), **extra)

    def read_stdin_names(self) -> tuple[list[str], str | None]:
        """exec.go getInstanceNames: piped stdin is read as instance names, one per line."""
        if is_char_device(0):
            return [], None
        text = sys.stdin.read()
        return [line.strip() for line in text.splitlines() if line.strip()], text

    def auth_problem(self) -> str | None:
        """Headless login state: None when an API call is authorised, else brev's error
        (no tty to prompt on, or a 401 from the API). Counts one authenticated call."""
        with self.world.edit_state() as state:
            auth = state["auth"]
            from_env, key_problem = brev_today.env_api_key_problem(auth)   # BREV_API_KEY (brev-cli PR #464)
            if from_env:
                return key_problem
            if not auth.get("logged_in"):
                return ("Error: EOF\n(brev tried to prompt for login, but there is no tty: "
                        "run `brev login --token <token>`)")
            limit = auth.get("expires_after_calls")
            auth["calls"] = int(auth.get("calls") or 0) + 1
            if limit is not None and auth["calls"] > int(limit):
                auth["expired"] = True
            if auth.get("expired"):
                return "Error: 401 Unauthorized: token expired, run brev login"
        return None

    def require_auth(self) -> None:
        problem = self.auth_problem()
        if problem:
            if problem.startswith("Error: EOF"):
                out(LOGIN_PROMPT, end="")   # auth.go shouldLogin prompts on stdout, then reads EOF
            raise BrevError(problem)
        self.current_user()

    def current_user(self) -> None:
        """store/user.go GetCurrentUser (not with an API key): a migrated account's
        NvidiaMigrationError makes brev run `brev login --auth nvidia` (cmderrors.go)."""
        auth = self.world.state()["auth"]
        if not brev_today.api_key_mode(auth) and brev_today.nvidia_migration(auth, self.world.settings()["hang_s"]):
            raise BrevError("This account has an NVIDIA login available\n"
                            "Please run 'brev login --auth nvidia' to log in with your NVIDIA account")

    def take_brev_fault(self, command: str) -> None:
        """A failure the Brev API answers for this command (``simctl.add_brev_fault``)."""
        fault = self.consume("brev_faults", lambda f: f["command"] == command)
        if fault is not None:
            raise BrevError(fault["message"])

    def flags(self, args: list[str], spec: FlagSpec) -> tuple[dict, list[str]]:
        merged = FlagSpec(spec.bools | self.GLOBAL.bools, spec.values | self.GLOBAL.values, spec.multi,
                          {**self.GLOBAL.short, **spec.short})
        try:
            return parse(args, merged)
        except FlagError as exc:
            raise BrevError(str(exc)) from None

    def lookup(self, name: str) -> dict:
        inst = self.world.find_instance(name)
        if inst is None:
            raise BrevError(f"dev environment with id/name {name} not found")
        return inst

    # entry ---------------------------------------------------------------------
    def run(self) -> int:
        try:
            flags, rest = parse(self.argv, self.GLOBAL, interspersed=False)
        except FlagError as exc:
            raise BrevError(str(exc)) from None
        if flags.get("version") and not rest:
            out(f"Current Version: {VERSION}")
            return 0
        if not rest:
            out("brev client for managing dev environments\n\nUsage:\n  brev [command]")
            return 0
        command, args = rest[0], rest[1:]
        handler = getattr(self, "cmd_" + command, None)
        if handler is None:
            raise BrevError(f'unknown command "{command}" for "brev"')
        return handler(args)

    # exec ------------------------------------------------------------------------
    def cmd_exec(self, args: list[str]) -> int:
        import shutil
        flags, positionals = self.flags(args, FlagSpec.make(bools="host"))
        if not positionals:
            self.audit()
            raise BrevError("requires at least 1 arg(s), only received 0")
        command_arg, names = positionals[-1], positionals[:-1]
        stdin_names, stdin_text = self.read_stdin_names()
        names += stdin_names
        file_content = None
        if command_arg.startswith("@"):
            try:
                file_content = Path(command_arg[1:]).read_text()
            except OSError:
                self.audit(stdin_text=stdin_text)
                raise BrevError(f"open {command_arg[1:]}: no such file or directory")
        self.audit(stdin_text=stdin_text, file_content=file_content, host=bool(flags.get("host")),
                   instances=names)
        if not names:
            raise BrevError("instance name required: provide as argument or pipe from another command")
        command = file_content if file_content is not None else command_arg
        if command == "":
            raise BrevError("command is required")
        # Real brev exec fires ssh first and calls the API only after an ssh failure
        # (exec.go runExecCommand); when the token is gone then, the lookup prompts
        # (stdout) and fails, and brev's error names only the lookup. The simulator
        # does exactly that when the ssh fails; when it would connect, it refuses up
        # front with the EOF/401 error (stricter than brev, which would run it).
        self.auth_failure = self.auth_problem()
        if self.auth_failure and not any(self.ssh_would_fail(name, command) for name in names):
            if self.auth_failure.startswith("Error: EOF"):
                out(LOGIN_PROMPT, end="")
            raise BrevError(self.auth_failure)
        for name in names:   # deleted elsewhere after `brev ls` listed it: the lookup then fails as for any
            inst = self.world.instance(name)   # unknown name (``vanish_at_exec``, a test set-up)
            if inst and inst.get("vanish_at_exec"):
                shutil.rmtree(self.world.instance_dir(name), ignore_errors=True)
        errors = []
        for name in names:
            if len(names) > 1:
                err(f"\n=== {name} ===")
            try:
                self.exec_on(name, command, bool(flags.get("host")))
            except BrevError as exc:
                if len(names) == 1:
                    raise
                err(f"Error on {name}: {exc}")
                errors.append(str(exc))
                continue
            if stdout_piped():
                out(name)
        if errors:
            raise BrevError(multierror(errors))
        return 0

    def exec_on(self, name: str, command: str, host: bool) -> None:
        """exec.go runExecCommand: fire ssh; on ANY failure look the instance up and run again."""
        code = self.ssh(name, command, host)
        if code == 0:
            return
        err("Connection failed, checking instance status...")
        if self.auth_failure:   # GetUserWorkspaceByNameOrIDErr needs the API: prompt, EOF, lookup fails
            if self.auth_failure.startswith("Error: EOF") or "expired" in self.auth_failure:
                out(LOGIN_PROMPT, end="")
            raise BrevError(f'ssh connection failed and could not look up instance "{name}": exit status {code}\n'
                            f"Please check your instances with: brev ls")
        self.current_user()
        fault = self.consume("brev_faults", lambda f: f["command"] == "exec")   # the lookup's API call
        inst = self.world.find_instance(name) if fault is None else None
        if inst is not None and brev_today.shared_name(self.world.state(), inst["name"]):
            raise BrevError(f'ssh connection failed and could not look up instance "{name}": multiple instances '
                            f"found with id/name {name}\nPlease check your instances with: brev ls")
        if inst is None:
            cause = fault["message"] if fault else f"exit status {code}"
            raise BrevError(f'ssh connection failed and could not look up instance "{name}": {cause}\n'
                            f"Please check your instances with: brev ls")
        if inst["status"] == "STOPPED":
            self.start(inst)
            problem = self.wait_for_ssh(inst["name"])
            if problem:
                raise BrevError("\n" + problem)
        elif inst["status"] != "RUNNING":
            raise BrevError(f'instance "{name}" is in state "{inst["status"]}" — please check with: brev ls')
        else:
            problem = self.wait_for_ssh(inst["name"])
            if problem:
                raise BrevError(f'could not connect to instance "{name}": \n{problem}\nPlease check with: brev ls')
        code = self.ssh(inst["name"], command, host)
        if code != 0:
            raise BrevError(f"exit status {code}")

    def start(self, inst: dict, wait: bool = True) -> None:
        """util.StartWorkspaceIfStopped + PollUntil RUNNING (scaled by settings); ``wait=False``:
        start.go with --detached returns once the start was asked for."""
        settings = self.world.settings()
        with self.world.edit_instance(inst["name"]) as data:
            data["status"] = "STARTING"
            data["ready_at"] = time.time() + float(settings["start_delay_s"])
        out(f"Instance {inst['name']} is starting. \n")
        while wait and (self.world.instance(inst["name"]) or {}).get("status") != "RUNNING":
            time.sleep(float(settings["start_poll_s"]))

    def ssh_problem(self, name: str, attempt: bool = True) -> str | None:
        """Why an ssh connection to ``name`` fails right now, in ssh's words; None if it connects.
        ``attempt=False``: only look (an ``ssh_refusals`` count is spent by real attempts only)."""
        inst = self.world.instance(name)
        if inst is None:
            return f"ssh: Could not resolve hostname {name.lower()}: Name or service not known"
        if inst["status"] != "RUNNING":
            return f"ssh: connect to host {fake_ip(inst)} port 22: Connection timed out"
        refused = f"ssh: connect to host {fake_ip(inst)} port 22: Connection refused"
        if int(inst.get("ssh_refusals") or 0) > 0 and not attempt:
            return refused
        if int(inst.get("ssh_refusals") or 0) > 0:     # counted, not timed: the same on a loaded machine
            with self.world.edit_instance(name) as data:
                left = int(data.get("ssh_refusals") or 0)
                data["ssh_refusals"] = max(left - 1, 0)
            if left > 0:
                return refused
        if time.time() < float(inst.get("running_since") or 0) + float(inst.get("ssh_delay_s") or 0):
            return refused
        if inst.get("ssh_key_rejected"):   # sshd answers, but not for brev's key
            return f"{self.world.settings().get('ssh_user', 'ubuntu')}@{fake_ip(inst)}: Permission denied (publickey)."
        return None

    def ssh_would_fail(self, name: str, command: str) -> bool:
        """The next ssh connection for ``command`` to ``name`` fails (no side effect)."""
        inst = self.world.find_instance(name)
        if inst is None or self.ssh_problem(inst["name"], attempt=False):
            return True
        return any(f["remaining"] > 0 and f["match"] in command and f["kind"] != "reset_after"
                   for f in self.world.state()["faults"])

    def wait_for_ssh(self, name: str) -> str | None:
        """util.WaitForSSHToBeAvailable: probe until ssh connects, at most ``ssh_probe_limit`` retries."""
        settings = self.world.settings()
        for counter in range(int(settings["ssh_probe_limit"]) + 1):
            problem = self.ssh_problem(name)
            if problem is None:
                return None
            if counter == int(settings["ssh_probe_limit"]) or not any(
                    s in problem for s in SATISFACTORY_SSH_ERRORS):   # e.g. publickey: no point waiting
                return problem
            time.sleep(float(settings["ssh_probe_interval_s"]))
        return None

    def control_master(self, name: str) -> None:
        """ControlMaster auto + ControlPersist (sshconfigurer.go): the first connection to an
        instance forks a detached master (own session: a kill of brev's group misses it) that
        inherits this ssh's stdout/stderr and keeps them open for ``control_persist_s``."""
        import subprocess
        settings = self.world.settings()
        linger = float(settings.get("control_persist_s") or 0)
        if linger <= 0:
            return
        with self.world.edit_state() as state:
            if master_alive(state["ssh_masters"].get(name), self.world.root):
                return   # later connections reuse the master: their pipes are not held
            holds = settings.get("control_master_holds", "stderr")
            keep = lambda stream: None if holds in (stream, "both") else subprocess.DEVNULL  # noqa: E731
            master = subprocess.Popen(
                [sys.executable, "-c", "import sys, time; time.sleep(float(sys.argv[1]))", str(linger),
                 MASTER_MARK, str(self.world.root)],
                stdin=subprocess.DEVNULL, stdout=keep("stdout"), stderr=keep("stderr"), start_new_session=True)
            state["ssh_masters"][name] = master.pid

    def consume(self, key: str, matches) -> dict | None:
        """Take one use of the first fault in ``state[key]`` with uses left that ``matches``;
        the decrement is saved before the fault is acted on."""
        if not any(f["remaining"] > 0 and matches(f) for f in self.world.state()[key]):
            return None
        with self.world.edit_state() as state:
            for fault in state[key]:
                if fault["remaining"] > 0 and matches(fault):
                    fault["remaining"] -= 1
                    return dict(fault)
        return None

    def take_fault(self, command: str) -> str | None:
        fault = self.consume("faults", lambda f: f["match"] in command)
        return fault["kind"] if fault else None

    def ssh(self, name: str, command: str, host: bool) -> int:
        """``ssh -T -o ConnectTimeout=5 -o LogLevel=ERROR ALIAS 'COMMAND'`` against the simulated host,
        after runSSHWithTimeout's ``eval $(ssh-agent -s)`` when SSH_AUTH_SOCK is empty (a leaked agent)."""
        import real_host
        import subprocess
        brev_today.maybe_start_agent(self.world)
        problem = self.ssh_problem(name)
        if problem:
            err(problem)
            return 255
        inst = self.world.instance(name)
        ip = fake_ip(inst)
        self.control_master(name)
        fault = self.take_fault(command)
        if fault == "hang":
            time.sleep(float(self.world.settings()["hang_s"]))
            err(f"Connection to {ip} port 22 timed out")
            return 255
        if fault == "reset_before":
            err(f"kex_exchange_identification: read: Connection reset by peer\nConnection reset by {ip} port 22")
            return 255
        if inst.get("banner"):
            out(inst["banner"], end="" if inst["banner"].endswith("\n") else "\n")
        self.world.audit("remote-shell", ["bash", "-c", command], name, host=host,
                         stdin_is_tty_or_chardev=True)  # ssh -T: stdin is /dev/null
        lost = subprocess.DEVNULL if fault == "reset_after" else None
        as_user = real_host.run_as(inst) if inst.get("remote_user") else {}
        code = subprocess.run(["bash", "-c", command], cwd=self.world.instance_home(name),
                              env=self.world.remote_env(name), stdin=subprocess.DEVNULL,
                              stdout=lost, stderr=lost, **as_user).returncode
        if fault == "reset_after":
            err(f"client_loop: send disconnect: Connection reset by peer\nConnection to {ip} closed by remote host.")
            return 255
        return code if code >= 0 else 255

    # ls ----------------------------------------------------------------------------
    def cmd_ls(self, args: list[str]) -> int:
        flags, _ = self.flags(args, FlagSpec.make(bools="json all", values="org", short="o=org"))
        self.audit()
        self.require_auth()
        self.take_brev_fault("ls")
        if flags.get("org") and brev_today.api_key_mode(self.world.state()["auth"]):   # ls.go getOrgForRunLs
            raise BrevError("api key auth is scoped to the org saved during login; --org is not supported")
        rows = []
        for name in self.world.instance_names():
            inst = self.world.instance(name)
            if inst.get("build_done_after_ls") is not None:   # a build a test lets finish after N listings
                with self.world.edit_instance(name) as data:
                    left = data["build_done_after_ls"] - 1
                    data.update(build_done_after_ls=left if left > 0 else None,
                                **({} if left > 0 else {"build_status": "COMPLETED"}))
                inst = self.world.instance(name)
            status = inst["status"]
            if status == "RUNNING" and inst.get("health_status") == "UNHEALTHY":
                status = "UNHEALTHY"
            ready = inst["status"] == "RUNNING" and inst.get("build_status") == "COMPLETED"
            rows.append({"name": name, "id": inst["id"], "status": status,
                         "build_status": inst.get("build_status", "COMPLETED"),
                         "shell_status": "READY" if ready else "NOT READY",
                         "health_status": inst.get("health_status", "HEALTHY"),
                         "instance_type": inst.get("instance_type", ""),
                         "instance_kind": inst.get("instance_kind", "gpu"),
                         # ls.go getGPUForInstance: the search list's GPU name of the type ("A100"), else "-"
                         "gpu": (catalog.types(self.world.state()).get(inst.get("instance_type") or "") or {})
                         .get("gpu_name") or "-"})
        state = self.world.state()
        rows += brev_today.org_rows(state, brev_today.api_key_mode(state["auth"]), bool(flags.get("all")))
        if flags.get("json"):
            out(json.dumps({"workspaces": rows or None}, indent=2))
            return 0
        if not rows:
            out("No instances in org sim-org")
            return 0
        out(f"You have {len(rows)} instances in Org sim-org")
        table = [["NAME", "STATUS", "BUILD", "SHELL", "ID", "MACHINE"]] + [
            [r["name"], r["status"], r["build_status"], r["shell_status"], r["id"], r["instance_type"]] for r in rows]
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        for row in table:
            out(" " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
        return 0

    # lifecycle -----------------------------------------------------------------------
    def names_from(self, positionals: list[str]) -> list[str]:
        names, text = self.read_stdin_names()
        self.audit(stdin_text=text)
        return positionals + names

    def cmd_delete(self, args: list[str]) -> int:
        import real_host
        import shutil
        _, positionals = self.flags(args, FlagSpec.make())
        names = self.names_from(positionals)
        self.require_auth()
        self.take_brev_fault("delete")
        errors = []
        for name in names:
            try:
                inst = self.lookup(name)
            except BrevError as exc:
                errors.append(str(exc))
                continue
            if inst.get("remote_user"):
                real_host.end_vm(inst, remove=True)
            ContainerStore(self.world.docker_dir(inst["name"])).kill_all(remove=True)
            shutil.rmtree(self.world.instance_dir(inst["name"]), ignore_errors=True)
            if stdout_piped():
                out(inst["name"])
            else:
                out(f"Deleting instance {inst['name']}. This can take a few minutes. Run 'brev ls' to check status")
        if errors:
            raise BrevError(multierror(errors))
        return 0

    def cmd_stop(self, args: list[str]) -> int:
        import real_host
        _, positionals = self.flags(args, FlagSpec.make(bools="all"))
        names = self.names_from(positionals)
        self.require_auth()
        self.take_brev_fault("stop")
        errors = []   # stop.go: each name's error collected (multierror), the others still stopped
        for name in names:
            try:
                inst = self.lookup(name)
                if not catalog.stoppable(self.world.state(), inst):   # stop.go validateWorkspaceStoppable
                    raise BrevError(f'instance "{inst["name"]}" does not support stop.')
            except BrevError as exc:
                errors.append(str(exc))
                continue
            if inst.get("remote_user"):
                real_host.end_vm(inst, remove=False)
            ContainerStore(self.world.docker_dir(inst["name"])).kill_all(remove=False)
            with self.world.edit_instance(inst["name"]) as data:
                data["status"] = "STOPPED"
            out(inst["name"] if stdout_piped() else f"Instance {inst['name']} is stopping.")
        if errors:
            raise BrevError(multierror(errors))
        return 0

    # search ---------------------------------------------------------------------------
    def cmd_search(self, args: list[str]) -> int:
        """brev-cli pkg/cmd/gpusearch/gpusearch.go: ``search [gpu|cpu]`` (gpu the default),
        ``--json`` an array of GPUInstanceInfo, ``[]`` when none match (tests/sim/catalog.py)."""
        flags, positionals = self.flags(args, FlagSpec.make(
            bools="json stoppable rebootable flex-ports descending wide",
            values="gpu-name min-vram min-total-vram min-capability sort provider arch min-ram min-disk "
                   "min-vcpu max-boot-time", short="g=gpu-name s=sort"))
        self.audit()
        self.require_auth()
        self.take_brev_fault("search")
        kind = positionals[0] if positionals else "gpu"
        if kind not in ("gpu", "cpu"):
            raise BrevError(f'unknown command "{kind}" for "brev search"')
        rows = catalog.rows(self.world.state(), kind, stoppable_only=bool(flags.get("stoppable")))
        if flags.get("json"):
            out(json.dumps(rows, indent=2))
            return 0
        for r in rows:
            out(f"{r['type']}  {r['gpu_name']}  {r['gpu_count']}  ${r['price_per_hour']:.2f}/hr  "
                f"{'S' if r['stoppable'] else '-'}")
        return 0

    def cmd_start(self, args: list[str]) -> int:
        flags, positionals = self.flags(args, FlagSpec.make(bools="detached", values="org", short="d=detached"))
        names = self.names_from(positionals)
        self.require_auth()
        self.take_brev_fault("start")
        for name in names:
            inst = self.world.find_instance(name)
            if inst is None:   # start.go maybeStartWithLocalPath: not an instance, not a path: prints, exits 0
                out("tried to start with local path but path not found")
                continue
            if inst["status"] != "STOPPED":   # start.go startStopppedWorkspace
                raise BrevError(f"Instance is not stopped status={inst['status']}")
            self.start(inst, wait=not flags.get("detached"))
            if stdout_piped():
                out(inst["name"])
        return 0

    def cmd_create(self, args: list[str]) -> int:
        flags, positionals = self.flags(args, FlagSpec.make(
            bools="detached dry-run", values="gpu-name type count startup-script timeout", short="d=detached"))
        names = self.names_from(positionals)
        self.require_auth()
        if not names:
            raise BrevError("instance name required")
        for name in names:
            if self.world.instance(name) is not None:
                raise BrevError(f"instance {name} already exists")
            if flags.get("dry-run"):
                continue
            self.world.create_instance(
                name, gpus=[flags["gpu-name"]] if flags.get("gpu-name") else ["NVIDIA A100-SXM4-80GB"],
                instance_type=flags.get("type", "a2-highgpu-1g"),
                ssh_delay_s=float(self.world.settings().get("create_ssh_delay_s", 0.0)))
            if stdout_piped():
                out(name)
        return 0

    # auth ------------------------------------------------------------------------------
    def cmd_login(self, args: list[str]) -> int:
        flags, _ = self.flags(args, FlagSpec.make(bools="skip-browser",
                                                  values="token auth-provider api-key org-id auth email"))
        self.audit()
        if flags.get("api-key") is not None:   # login.go doApiKeyLogin (PR #369)
            with self.world.edit_state() as state:
                try:
                    line = brev_today.login_api_key(state["auth"], flags["api-key"], flags.get("org-id"),
                                                    any(k in flags for k in ("token", "skip-browser", "email", "auth")))
                except ValueError as exc:
                    raise BrevError(str(exc)) from None
            out(line)
            return 0
        if flags.get("org-id") is not None:
            raise BrevError("org-id can only be used with api-key")
        token = flags.get("token")
        if token is None:
            raise BrevError("Error: EOF\n(brev login tried to prompt, but there is no tty: use --token)")
        with self.world.edit_state() as state:
            auth = state["auth"]
            if token != auth.get("token"):
                raise BrevError("Error: 401 Unauthorized: invalid token")
            auth.update(logged_in=True, expired=False, calls=0)
        out("Successfully logged in.")
        return 0

    def cmd_logout(self, args: list[str]) -> int:
        self.flags(args, FlagSpec.make())
        self.audit()
        with self.world.edit_state() as state:
            state["auth"]["logged_in"] = False
        out("Logged out.")
        return 0

    # copy ------------------------------------------------------------------------------
    def cmd_copy(self, args: list[str]) -> int:
        """``brev copy SRC DST``: one side NAME:/path or NAME:relative (to the instance home); scp -r semantics."""
        import real_host
        import shutil
        _, positionals = self.flags(args, FlagSpec.make(bools="host"))
        self.audit()
        if len(positionals) != 2:
            raise BrevError(f"accepts 2 arg(s), received {len(positionals)}")
        self.require_auth()
        sides = [self.split_remote(p) for p in positionals]
        remote = [s for s in sides if s[0]]
        if len(remote) != 1:
            raise BrevError("exactly one of source or destination must be an instance path "
                            "(format: instance_name:/path)")
        self.take_brev_fault("copy")
        name = remote[0][0]
        inst = self.world.find_instance(name)
        if inst is None:
            raise BrevError(f"instance with id/name {name} not found")
        if inst["status"] == "STOPPED":   # copy.go prepareWorkspace -> startWorkspaceIfStopped
            self.start(inst)
            inst = self.lookup(name)
        elif inst["status"] != "RUNNING":   # copy.go pollUntil RUNNING has no deadline: it waits
            raise BrevError("Workspace is not running")
        problem = self.ssh_problem(inst["name"])
        if problem:
            err(problem)
            raise BrevError("exit status 1")
        src, dst = (self.host_path(inst["name"], side) for side in sides)
        if not src.exists():
            err(f"scp: {positionals[0]}: No such file or directory")
            raise BrevError("exit status 1")
        target = dst / src.name if dst.is_dir() else dst
        if not target.parent.is_dir():  # scp creates the last component only
            err(f"scp: {positionals[1]}: No such file or directory")
            raise BrevError("exit status 1")
        fault = None if src.is_dir() else self.take_copy_fault(" ".join(positionals))
        if fault == "fail":   # brev-cli pkg/cmd/copy/copy.go runSCP: scp's failure and its output, exit 1
            raise BrevError("scp failed: exit status 255\nOutput: client_loop: send disconnect: Broken pipe")
        if src.is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)
        elif fault == "empty":
            target.write_bytes(b"")   # the file arrives, its content does not
            target.chmod(src.stat().st_mode & 0o777)
        else:
            shutil.copy2(src, target)
        if inst.get("remote_user") and remote[0] is sides[1]:
            real_host.chown_tree(inst, target)   # scp wrote it as the instance user
        return 0

    def take_copy_fault(self, args: str) -> str | None:
        fault = self.consume("copy_faults", lambda f: f["match"] in args)
        return fault["kind"] if fault else None

    # refresh ----------------------------------------------------------------------------
    def cmd_refresh(self, args: list[str]) -> int:
        """``brev refresh``: rewrites brev's ssh config (refresh.go); the instance's
        authorized keys are not brev's to change, so a rejected key stays rejected."""
        self.flags(args, FlagSpec.make())
        self.audit()
        self.require_auth()
        out("refreshing brev...\nbrev has been refreshed")
        return 0

    @staticmethod
    def split_remote(arg: str) -> tuple[str | None, str]:
        """copy.go parseWorkspacePath: no ':' = a local path; else split on EVERY ':' and
        exactly two parts are (instance, path) - even ``/home/u/runs-10:30/x``."""
        if ":" not in arg:
            return None, arg
        parts = arg.split(":")
        if len(parts) != 2:
            raise BrevError("invalid instance path format, use instance_name:/path")
        return parts[0], parts[1]

    def host_path(self, name: str, side: tuple[str | None, str]) -> Path:
        """Remote paths: relative or ~ = instance home; /home/<user>/... = instance home; else host path."""
        instance, path = side
        if instance is None:
            return Path(path).resolve()
        home = self.world.instance_home(instance)
        user_home = f"/home/{self.world.settings().get('ssh_user', 'ubuntu')}"
        if path in ("", "~"):
            return home
        if path.startswith("~/"):
            return home / path[2:]
        if path == user_home or path.startswith(user_home + "/"):
            return home / path[len(user_home):].lstrip("/")
        return Path(path) if path.startswith("/") else home / path


def main(argv: list[str], root: str | None = None) -> int:
    world = World(os.environ.get(STATE_ENV) or root or ".")
    brev = Brev(world, argv)
    try:
        return brev.run()
    except BrevError as exc:
        brev.audit()
        message = str(exc).rstrip("\n")
        stream = sys.stdout if world.settings().get("brev_error_stream") == "stdout" else sys.stderr
        stream.write(message + "\n")
        stream.flush()
        return 1
    finally:
        brev.audit()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
