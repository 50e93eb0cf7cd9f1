"""TAO's ``status.json`` and every job container of an instance, read in one round trip."""

from __future__ import annotations

import shlex

from .. import logcap
from .quoting import CONTAINER_RESULTS_DIR, rpath

STATUS_FILE = "status.json"          # TAO writes <results_dir>/<action>/status.json (older archs: <results_dir>/)
MAX_STATUS_LINE = 16384              # longer status lines are replaced by "<token>:LONG <length>"
PROGRESS_LINES = 12                  # lines read per status file for a status answer
PROGRESS_BYTES = PROGRESS_LINES * MAX_STATUS_LINE
METRICS_BYTES = 4 * 1024 * 1024      # --metrics reads up to the last 4 MiB of the file
TAIL_LINES, TAIL_BYTES = 200, 32768  # log tail of a container that exited non-zero (failure hint)


def progress_functions(token: str) -> str:
    """Shell functions for the status scripts (defined once per script).

    ``__tb_progress DIR LINES BYTES`` prints, for each ``DIR/*/status.json``
    and ``DIR/status.json``: ``<token>:F <mtime epoch s> <size> <path under DIR>``
    then its last LINES lines within the last BYTES bytes (a longer line becomes
    ``<token>:LONG <length>``; the byte cut lands on a UTF-8 character boundary,
    :func:`logcap.remote_tail_bytes`). ``__tb_jobs LINES BYTES`` finds every container
    labelled ``tao-job`` (one ``docker ps``, one ``docker inspect`` for all of
    them: the script does not grow with the number of jobs) and prints per
    container ``<token>:J<TAB><tao-job label><TAB><.State JSON>``, then the
    progress of its ``/results`` bind mount, and for a container that exited
    non-zero ``<token>:T`` and its last TAIL_LINES log lines (at most
    TAIL_BYTES, starting on a character) for the failure hint. Never ``.Config.Env``.
    """
    fmt = (f'{token}:J\t{{{{index .Config.Labels "tao-job"}}}}\t{{{{json .State}}}}\t{{{{.Id}}}}\t'
           f'{{{{range .Mounts}}}}{{{{if eq .Destination "{CONTAINER_RESULTS_DIR}"}}}}{{{{.Source}}}}'
           '{{end}}{{end}}')
    status_tail = logcap.remote_tail_bytes('"$3"')
    return "\n".join([
        "__tb_progress() {",
        f'  for __tb_f in "$1"/*/{STATUS_FILE} "$1"/{STATUS_FILE}; do',
        '    [ -f "$__tb_f" ] || continue',
        f"    printf '%s %s %s\\n' '{token}:F' \"$(stat -c '%Y %s' \"$__tb_f\" 2>/dev/null || echo '0 0')\" "
        '"${__tb_f#"$1"/}"',
        f'    < "$__tb_f" {status_tail} | tail -n "$2" | awk -v m={MAX_STATUS_LINE} -v t=\'{token}:LONG\' '
        "'length($0) > m {print t, length($0); next} {print}'",
        "  done",
        "}",
        "__tb_jobs() {",
        "  __tb_ids=$(docker ps -aq --filter label=tao-job) || return $?",
        '  [ -n "$__tb_ids" ] || return 0',
        f"  __tb_rows=$(docker inspect --type container --format {shlex.quote(fmt)} $__tb_ids)",
        "  __tb_rc=$?",
        "  printf '%s\\n' \"$__tb_rows\" | while IFS='\t' read -r __tb_m __tb_job __tb_state __tb_id __tb_src; do",
        f'    [ "$__tb_m" = \'{token}:J\' ] || continue',
        "    printf '%s\\t%s\\t%s\\n' \"$__tb_m\" \"$__tb_job\" \"$__tb_state\"",
        '    [ -z "$__tb_src" ] || __tb_progress "$__tb_src" "$1" "$2"',
        "    case \"$__tb_state\" in *'\"ExitCode\":0,'*|*'\"ExitCode\":0}'*) ;; *'\"Status\":\"exited\"'*)",
        f"      printf '%s\\n' '{token}:T'; docker logs --tail {TAIL_LINES} \"$__tb_id\" 2>&1 | "
        f"{logcap.remote_tail_bytes(TAIL_BYTES)};;",
        "    esac",
        "  done",
        "  return $__tb_rc",
        "}",
    ])


def read_progress(results_dir: str, lines: int = PROGRESS_LINES, max_bytes: int = PROGRESS_BYTES) -> str:
    """The status file(s) of one job, by its instance results dir (needs :func:`progress_functions`)."""
    return f"__tb_progress {rpath(results_dir)} {int(lines)} {int(max_bytes)}"


def read_all_jobs(lines: int = 4, max_bytes: int = 4 * MAX_STATUS_LINE) -> str:
    """State and progress of every ``tao-job`` container (needs :func:`progress_functions`)."""
    return f"__tb_jobs {int(lines)} {int(max_bytes)}"

