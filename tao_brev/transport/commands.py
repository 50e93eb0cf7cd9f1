"""The other brev commands: ``ls --json`` (statuses noted), delete, start, stop, ``search --json``, copy."""

from __future__ import annotations

import json
import subprocess
from typing import TYPE_CHECKING, Callable, TypedDict, cast

from ..errors import TaoBrevError
from ..secrets import redact
from ..vocabulary import InstanceStatus
from .copying import safe_copy
from .names import BrevInstance, check_instance, pick_instance
from .settings import BREV_TIMEOUT_S, FIRST_EXEC_TIMEOUT_S


class BrevPrice(TypedDict, total=False):
    """``base_price`` of a ``brev search --json`` row (gpusearch.go BasePrice)."""
    currency: str
    amount: str


class BrevSearchRow(TypedDict, total=False):
    """A row of ``brev search gpu|cpu --json`` (brev-cli's GPUInstanceInfo): the keys the bundle reads."""
    type: str
    price_per_hour: float
    base_price: BrevPrice
    stoppable: bool


class CommandsMixin:
    """brev's other commands on :class:`tao_brev.transport.Brev` (its ``_call``)."""

    if TYPE_CHECKING:   # Brev's fields and API call, which these commands use
        ready_instances: set[str]
        statuses: dict[str, str]
        on_deleted: Callable[[str], None] | None

        def _call(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]: ...

    def ls(self) -> list[BrevInstance]:
        """Instances from ``brev ls --json`` (an object with ``workspaces``,
        which is null when there are none; older releases printed a bare list)."""
        done = self._call(["ls", "--json"], BREV_TIMEOUT_S)
        if done.returncode != 0:
            raise TaoBrevError("BREV_FAILED", "brev ls --json failed: " + redact.tail(done.stderr))
        try:
            data = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise TaoBrevError("BREV_FAILED", "brev ls --json did not print JSON: " + redact.tail(done.stdout)) from None
        if isinstance(data, dict):
            data = data.get("workspaces") or []
        if not isinstance(data, list):
            raise TaoBrevError("BREV_FAILED", "brev ls --json printed an unexpected shape")
        listed = [cast(BrevInstance, w) for w in data if isinstance(w, dict)]   # brev's JSON: the keys we read
        names = [str(w.get("name")) for w in listed]
        self.statuses = {str(w.get("name")): ("AMBIGUOUS" if names.count(str(w.get("name"))) > 1
                                              else str(w.get("status") or "").upper()) for w in listed}
        return listed

    def instance(self, name: str) -> BrevInstance | None:
        """The ``brev ls --json`` entry named ``name``, or None. Raises INSTANCE_AMBIGUOUS
        (naming every id) when several carry the name: with an API key brev lists the
        whole org (brev-cli pkg/cmd/ls/ls.go RunWorkspaces), teammates' instances included."""
        check_instance(name)
        return pick_instance(self.ls(), name)

    def _simple(self, args: list[str], what: str, timeout: float = BREV_TIMEOUT_S) -> str:
        done = self._call(args, timeout)
        if done.returncode != 0:
            raise TaoBrevError("BREV_FAILED", f"{what} failed: " + redact.tail(done.stderr))
        return done.stdout

    def delete(self, name: str) -> None:
        """``brev delete NAME`` (it has no --yes flag; the name is echoed when piped)."""
        self._simple(["delete", check_instance(name)], f"brev delete {name}")
        self.ready_instances.discard(name)
        if self.on_deleted:
            self.on_deleted(name)

    def start(self, name: str, timeout: float = FIRST_EXEC_TIMEOUT_S) -> None:
        self._simple(["start", check_instance(name)], f"brev start {name}", timeout)

    def stop(self, name: str) -> None:
        """``brev stop NAME``. Raises BREV_FAILED with brev's message; a type that cannot stop is
        refused by brev itself: ``instance "NAME" does not support stop.`` (brev-cli
        pkg/cmd/stop/stop.go validateWorkspaceStoppable)."""
        self._simple(["stop", check_instance(name)], f"brev stop {name}")
        self.ready_instances.discard(name)

    def search(self, kind: str) -> list[BrevSearchRow]:
        """The rows of ``brev search gpu|cpu --json``: a JSON array of brev-cli's GPUInstanceInfo
        (pkg/cmd/gpusearch/gpusearch.go: ``type``, ``price_per_hour`` USD, ``stoppable``, ...).
        Raises BREV_FAILED when brev fails or prints no array."""
        if kind not in ("gpu", "cpu"):
            raise ValueError(kind)
        text = self._simple(["search", kind, "--json"], f"brev search {kind} --json")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if not isinstance(data, list):
            raise TaoBrevError("BREV_FAILED", f"brev search {kind} --json did not print a JSON array: "
                               + redact.tail(text))
        return [cast(BrevSearchRow, row) for row in data if isinstance(row, dict)]   # brev's JSON: the keys we read

    def copy(self, src: str, dst: str, timeout: float | None = None, start: bool = False) -> None:
        """``brev copy SRC DST`` (scp), one side written ``NAME:path``, the other a local path.

        brev splits EVERY argument on ':' (brev-cli pkg/cmd/copy/copy.go parseWorkspacePath),
        so a local path with a colon (``runs-10:30/``) would be taken for an instance path:
        such a side is copied through a colon-free temporary path, then moved (:func:`safe_copy`).
        A remote path with a colon cannot be copied at all (BAD_NAME).

        brev copy starts a STOPPED instance (copy.go prepareWorkspace -> startWorkspaceIfStopped),
        as brev exec does: one the last ``brev ls`` listed STOPPED is refused (INSTANCE_STOPPED)
        unless ``start``."""
        for side in (src, dst):
            name = side.partition(":")[0] if ":" in side else None
            if name and not start and self.statuses.get(name) == InstanceStatus.STOPPED:
                raise TaoBrevError("INSTANCE_STOPPED", f"{name} is STOPPED (brev ls); not started: brev copy "
                                   "would start it", instance=name)
        safe_copy(lambda a, b: self._simple(["copy", a, b], "brev copy", timeout or FIRST_EXEC_TIMEOUT_S),
                  src, dst)
