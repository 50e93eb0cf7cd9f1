"""Docker container state -> the fixed status vocabulary, and failure hints.

ONE table, :data:`STATE_ROWS`, maps every ``.State.Status`` docker can report
(moby ``container/state.go`` ``StateString``: created, running, paused,
restarting, removing, exited, dead) and every combination of ``ExitCode`` /
``OOMKilled`` / ``Error`` to the status vocabulary and, for a failure, to a
hint. :func:`from_inspect` reads only that table. The failure classification
of log lines is :data:`LOG_PATTERNS`; docker's own error messages map to
error codes through :data:`DOCKER_ERRORS`. ``references/failure-classes.md``
embeds the tables printed by ``python -m tao_brev.docker_state --markdown``
(a test keeps the two equal, another runs every documented example row).

Facts the table rests on (moby sources):

* ``daemon/start.go``: when starting a created container fails (device
  driver, NVIDIA hook, missing executable), the container stays ``created``
  with ``State.Error`` set and ``ExitCode`` 128 (127/126 for a missing / not
  executable command); the CLI exits 125. So ``created`` + Error is a failed
  launch, never "pending".
* ``container/state.go``: ``removing`` and ``dead`` are reported for a
  container that is not running; ``dead`` is what a failed removal leaves.
  ``OOMKilled`` is docker's own record of the cgroup OOM killer; an exit 137
  without it is a SIGKILL whose sender docker does not know (``docker kill``,
  a stop timeout, the host's OOM killer, a VM stop).

A hint is ``{"err_class", "reason", "advice", "evidence": [lines]}``. Its
class is ``ERR_INFRA`` (retriable), ``ERR_PROGRAM`` (not retried blindly) or
null when the facts do not decide (an exit 137 without OOMKilled; an exit
code without a known log pattern). A job that ends ERROR always carries a hint.

One job per module: ``hints`` (advice texts), ``rows`` (the state table), ``patterns`` (the
log-pattern table), ``docker_errors`` (docker's messages -> codes), ``observe`` (a job's state),
``tables`` (the markdown). This module hands on their public names.
"""

from __future__ import annotations

from .docker_errors import DOCKER_ERRORS, NGC_REGISTRY, docker_error_code, registry_error_code
from .hints import (DISK_ADVICE, DRIVER_ADVICE, GPU_ACCESS_ADVICE, GPU_RESET_ADVICE, INFRA_ADVICE, KILL_ADVICE,
                    LOGS_ADVICE, PROGRAM_ADVICE, RESET_BY_REPLACE, RESET_BY_STOP, RESET_EITHER, RESUME,
                    SHM_ADVICE, SHM_CODE, STATES, gate_answer, gated)
from .observe import Observed, _short, after_instance_start, from_inspect
from .patterns import (EVIDENCE_CHARS, LOG_PATTERNS, MAX_EVIDENCE, OOM_HINT_REASON, STOP_EXIT_CODES, LogPattern, _cut,
                       classify_logs)
from .rows import DOCKER_STATUSES, SIGNALS, STATE_ROWS, DockerState, Facts, StateRow, row_for
from .tables import markdown
