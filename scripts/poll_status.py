#!/usr/bin/env python3
"""Status and logs of a TAO job on Brev, read from the instance (one round trip).

Reads `docker inspect --format '{{json .State}}' <job_id>` on the job's
instance (never the container's environment) and maps it to the status
vocabulary PENDING RUNNING COMPLETE ERROR CANCELED UNKNOWN:
  created/restarting -> PENDING; running/paused -> RUNNING; exited 0 -> COMPLETE;
  exited != 0 -> ERROR (OOMKilled / 137 named); dead or no container -> UNKNOWN.
A change is marked in the record with source `poller`; a terminal state is
written once. A record left PENDING without a backend ref (the submitting
agent was killed) is reconciled: the container is adopted, or the job is
closed as never launched. When a job whose results go to S3 is seen terminal,
its results dir is uploaded from the instance and verified from here, once
(one more round trip); "results" reports it.

Output: one JSON object on stdout:
  {"ok", "job_id", "instance", "state", "backend_ref", "results_dir", "message",
   "observed": {...docker facts}, "terminal_state", ["hint"], ["logs"],
   ["results": {kind, destination, uploaded, verified, files, bytes, missing,
   mismatched, ...}], "polls"}
  With --all: {"ok", "jobs": [...one entry per non-terminal job...]}.
  (schema: references/schemas/poll_status.schema.json). Progress on stderr.
Exit codes: 0 answered (any state without --wait; COMPLETE with --wait),
  1 --wait ended in ERROR, CANCELED or UNKNOWN, or timed out,
  2 bad input (unknown or malformed job id, corrupt record),
  3 the instance could not be reached.
"""

import sys

import _bootstrap

_bootstrap.setup()

from tao_brev import cli  # noqa: E402
from tao_brev.records import is_terminal  # noqa: E402
from tao_brev.verbs import status  # noqa: E402


def build_parser():
    p = cli.parser("poll_status.py", __doc__)
    p.add_argument("job_id", nargs="?", help="the job id printed by submit.py")
    p.add_argument("--all", action="store_true",
                   help="poll every non-terminal job in the record store (one round trip per instance)")
    p.add_argument("--logs", type=int, default=0, metavar="N", help="include the last N log lines (redacted)")
    p.add_argument("--wait", action="store_true", help="poll until a terminal state")
    p.add_argument("--interval", type=float, default=30.0, metavar="S", help="seconds between polls (default 30)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="give up waiting after S seconds")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    ctx = cli.Context()
    if args.all:
        if args.job_id or args.wait:
            raise cli.TaoBrevError("BAD_ARGUMENT", "--all takes no job id and no --wait")
        ids = [r["id"] for r in ctx.records.list()
               if not r.get("corrupt") and r.get("platform") == "brev" and not is_terminal(r.get("terminal_state"))]
        jobs = status.poll_many(ctx, ids)
        return {"ok": all(j.get("ok") for j in jobs), "jobs": jobs}, 0 if all(j.get("ok") for j in jobs) else 1
    if not args.job_id:
        raise cli.TaoBrevError("BAD_ARGUMENT", "pass a JOB_ID (or --all)")
    if args.interval <= 0 or args.logs < 0:
        raise cli.TaoBrevError("BAD_ARGUMENT", "--interval must be > 0 and --logs >= 0")
    return status.poll(ctx, args.job_id, log_lines=args.logs, wait=args.wait,
                       interval=args.interval, timeout=args.timeout)


if __name__ == "__main__":
    sys.exit(cli.run(main))
