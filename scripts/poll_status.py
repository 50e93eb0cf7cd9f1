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

--wait --teardown carries the job to its end in one call: wait until terminal
(results uploaded and verified), then teardown.py JOB_ID with its defaults -
the container is removed and an instance this bundle owns (a job on it was
submitted with --ephemeral) is deleted once no other job on it is live and
every S3 result on it is verified; a reused instance is never deleted.
"teardown" holds teardown.py's answer ("deleted": exactly the instances
deleted). A job still running at --timeout, or whose instance is gone or
stopped, is not torn down ("teardown_skipped" says why). Safe to kill and
rerun at any point: verified results are not uploaded again, a deleted
instance is not asked or deleted again. Round trips (brev exec): one per poll,
one for the results upload (S3 only), one for the container removal; plus
`brev delete`, and one `brev ls` for the instance type when no price is known.

--wait --recover N (or a job submitted with submit.py --recover N): when the
job ends by an infrastructure failure (a hint of class ERR_INFRA such as an Xid,
the instance or container gone, a stall), its results are made safe as a
teardown does, and it is resubmitted with --resume-from (only the epochs after
its last checkpoint run) on the same instance once it is RUNNING with working
GPUs (within --health-wait S), else on --fallback-instance NAME (from S3: a live
S3-routed job's newest checkpoint is uploaded every --sync-every S); up to N times,
within --budget-s S billed seconds for the whole chain. A program error
(ERR_PROGRAM) is never recovered. Each attempt is its own job (retry_of links
it); every answer of a job in a chain carries "attempts" [{job_id, attempt,
instance, state, cause, epoch, num_epochs, resumed_from}]; the final answer is
the last attempt's with "recovery" {first_job, attempts_used, max_attempts,
stopped} and "chain_cost" {billed_s, estimated_cost_usd} summed over the
chain; RECOVERY_LIMIT / RECOVERY_BUDGET_EXHAUSTED / RECOVERY_NOT_POSSIBLE (exit
1) say why it stopped. Safe to kill: a rerun of the same command continues the
chain (references/recovery.md).

Progress, in every answer that reached the instance (same round trip), from
TAO's <results_dir>/<action>/status.json (references/progress.md):
  "progress": {available, file, status, message, epoch (completed epochs),
  num_epochs, step, max_step, percent, eta_s, time_per_epoch_s, kpi (latest),
  finished (TAO's "finished successfully" line), warnings (FAILURE lines:
  ERROR-level log calls, not the end), resumed_from, updated_at,
  since_update_s, note}; missing or partial files are normal ("available":
  false and a note). COMPLETE answers add "final_kpi" (evaluate: its KPIs; an
  evaluate that wrote none says so in the note). --metrics N adds "metrics": {epochs: [{epoch, kpi}] (last N),
  best: {KPI: {goal, best, last, min, max}}}. A RUNNING job gets "stalled" and
  "stall": {idle_s, threshold_s, threshold_source, last_progress_at,
  last_status_at, last_log_at, last_log_line, advice}: no status line and no
  log output for longer than --stall-after S (default 3 x time per epoch, at
  least 1800 s; 3600 s before the first epoch). A stall is a heuristic: it only
  advises, except --wait ends on it (JOB_STALLED, exit 1) and --wait --teardown
  with an explicit --stall-after tears the stalled job down: ok, exit 0, the job
  CANCELED ("stalled_s", "stall_teardown": what was kept; the cost facts carry it). --all reports progress and stalls per job from the
  status file alone.

Cost facts, once the job ended: "cost" = {submit_to_running_s, image_pull_s,
  run_s, idle_billed_s, billed_s, estimated_cost_usd, price_per_hour_usd,
  price_source, instance_type, still_billing, ...}: seconds and US dollars,
  null when unknown; the price from --price-per-hour (also remembered from
  submit.py --price-per-hour), else brev's own price (brev search --json,
  cached with its date), else references/prices.yaml (a fallback: price_note
  says so), by the instance type once teardown learnt it (a poll makes no brev
  call for it; --teardown does). teardown.py --help details every field.

Output: one JSON object on stdout:
  {"ok", "job_id", "instance", "state", "backend_ref", "results_dir", "message",
   "observed": {...docker facts}, "terminal_state", ["hint"], ["logs"],
   ["results": {kind, destination, uploaded, verified, files, bytes, missing,
   mismatched, ...}], ["cost": {...}], "polls",
   ["teardown": {...teardown.py's answer...}], ["teardown_skipped": why]}
  With --all: {"ok", "jobs": [...one entry per non-terminal job...]}.
  (schema: references/schemas/poll_status.schema.json). Progress on stderr.
  Every answer, failures included, ends with "next": the exact command to run
  next (absolute path, real values), or null with "next_note" saying why
  (references/output.md). Logs: each line keeps its last 2 KiB, carriage-return
  progress its last state, the last lines within 32 KiB ("logs_cut" says what was cut and
  where the full log is); a whole answer stays within 64 KiB.
A STOPPED instance is never started by a poll (brev exec would start it, brev-cli
  pkg/cmd/util/ssh.go StartWorkspaceIfStopped): `brev ls --json` is read first (one
  call for all instances with --all) and the job answers INSTANCE_STOPPED (exit 1,
  "instance_status": "STOPPED"; its results on the instance are safe) with next =
  the same poll with --start, which starts it and waits for brev's own start.

Exit codes: 0 answered (any state without --wait; COMPLETE with --wait, and
  with --teardown the teardown done),
  1 --wait ended in ERROR, CANCELED or UNKNOWN, timed out, or the job stalled
  (JOB_STALLED); with --teardown
  also INSTANCE_DELETE_REFUSED (the teardown's error wins: rerun),
  2 bad input (unknown or malformed job id, corrupt record, --teardown without --wait),
  3 the instance or brev could not be reached (rerun: it is safe).
"""

import _bootstrap  # noqa: I001  (first: SIGINT/SIGTERM get a JSON answer from here on)

import sys  # noqa: E402

_bootstrap.setup()

from tao_brev import cli  # noqa: E402


def build_parser():
    p = cli.parser("poll_status.py", __doc__)
    p.add_argument("job_id", nargs="?", help="the job id printed by submit.py")
    p.add_argument("--all", action="store_true",
                   help="poll every non-terminal job in the record store (one round trip per instance)")
    p.add_argument("--logs", type=int, default=0, metavar="N", help="include the last N log lines (redacted)")
    p.add_argument("--wait", action="store_true", help="poll until a terminal state")
    p.add_argument("--interval", type=float, default=30.0, metavar="S", help="seconds between polls (default 30)")
    p.add_argument("--timeout", type=float, default=None, metavar="S", help="give up waiting after S seconds")
    p.add_argument("--teardown", action="store_true",
                   help="with --wait: once the job ended, tear it down (teardown.py JOB_ID: remove the container, "
                        "delete an owned instance)")
    p.add_argument("--metrics", type=int, nargs="?", const=10, default=None, metavar="N",
                   help="add the per-epoch KPI table of the last N epochs (default 10, at most 200) and each "
                        "KPI's best/last/min/max with its epoch, from the job's status.json")
    p.add_argument("--stall-after", type=float, default=None, metavar="S",
                   help="a RUNNING job that wrote no status line and no log output for S seconds is stalled "
                        "(default: 3 x the time per epoch, at least 1800 s; 3600 s before the first epoch). "
                        "With --wait --teardown, an explicit --stall-after tears a stalled job down")
    p.add_argument("--start", action="store_true",
                   help="start the job's instance if it is STOPPED, then read it (billing resumes; waits up to "
                        "brev's own start wait, ~1650 s). Without it a STOPPED instance is answered "
                        "INSTANCE_STOPPED and never started")
    p.add_argument("--price-per-hour", type=float, metavar="USD",
                   help="hourly price of the instance in US dollars, for cost.estimated_cost_usd "
                        "(default: references/prices.yaml by instance type)")
    p.add_argument("--recover", type=int, default=None, metavar="N",
                   help="with --wait: resubmit with --resume-from up to N times after an infrastructure failure "
                        "(default: the job's submit.py --recover, else 0)")
    p.add_argument("--fallback-instance", metavar="NAME",
                   help="with --recover: where a recovery runs when the job's instance is gone or its GPUs stay "
                        "unhealthy")
    p.add_argument("--budget-s", type=float, metavar="S",
                   help="with --recover: billed seconds the whole chain of attempts may use")
    p.add_argument("--health-wait", type=float, default=600.0, metavar="S",
                   help="with --recover: seconds to wait for the same instance to be RUNNING with working GPUs "
                        "(default 600)")
    p.add_argument("--sync-every", type=float, default=300.0, metavar="S",
                   help="with --recover: upload a live S3-routed train job's newest checkpoint every S seconds "
                        "(verified by sha256), so that a lost instance resumes elsewhere (default 300)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    from tao_brev.verbs import status
    from tao_brev.verbs.teardown import wait_and_teardown

    ctx = cli.Context()
    if args.all:
        if (args.job_id or args.wait or args.teardown or args.start or args.metrics is not None
                or args.stall_after is not None or args.recover is not None):
            raise cli.TaoBrevError("BAD_ARGUMENT", "--all takes no job id, --wait, --teardown, --start, --recover, "
                                                   "--metrics or "
                                                   "--stall-after (it reports progress and stalls per job)",
                                   "Run poll_status.py --all alone, or poll_status.py JOB_ID --metrics for one job.")
        return status.poll_all(ctx)
    if not args.job_id:
        raise cli.TaoBrevError("BAD_ARGUMENT", "pass a JOB_ID (or --all)")
    if args.interval <= 0 or args.logs < 0 or (args.timeout is not None and not args.timeout >= 0):
        raise cli.TaoBrevError("BAD_ARGUMENT", "--interval must be > 0, --timeout >= 0 and --logs >= 0")
    if (args.recover is not None or args.fallback_instance or args.budget_s is not None) and not args.wait:
        raise cli.TaoBrevError("BAD_ARGUMENT", "--recover needs --wait (it resubmits once the job ended)",
                               f"Run poll_status.py {args.job_id} --wait --recover N --timeout S.")
    recovering = _recovery(ctx, args) if args.wait else None
    if recovering is not None:
        return recovering
    if args.teardown:
        if not args.wait:
            raise cli.TaoBrevError("BAD_ARGUMENT", "--teardown needs --wait (it tears the job down once it ended)",
                                   "Run poll_status.py JOB_ID --wait --teardown, or teardown.py JOB_ID to cancel now.")
        return wait_and_teardown(ctx, args.job_id, log_lines=args.logs, interval=args.interval,
                                 timeout=args.timeout, price_per_hour=args.price_per_hour,
                                 metrics=args.metrics, stall_after=args.stall_after)
    return status.poll(ctx, args.job_id, log_lines=args.logs, wait=args.wait,
                       interval=args.interval, timeout=args.timeout, price_per_hour=args.price_per_hour,
                       metrics=args.metrics, stall_after=args.stall_after, start=args.start)


def _recovery(ctx, args):
    """--wait with --recover N (or the job's remembered policy): tao_brev/verbs/recover.py; else None."""
    from tao_brev.verbs import recover

    pol = recover.policy(args.recover, args.fallback_instance, args.budget_s)
    if pol is None and not (recover.remembered_policy(ctx, args.job_id) or {}).get("attempts"):
        return None
    if pol is not None and not pol["attempts"]:
        return None
    import os

    import submit as submit_script   # scripts/submit.py: its arguments -> SubmitRequest

    prog = os.path.join(os.path.dirname(os.path.abspath(__file__)), "submit.py")
    out, code = recover.recover(ctx, args.job_id, lambda argv: submit_script.request(argv, prog), pol,
                                log_lines=args.logs, interval=args.interval, timeout=args.timeout,
                                price_per_hour=args.price_per_hour, metrics=args.metrics,
                                stall_after=args.stall_after, health_wait_s=args.health_wait,
                                sync_every_s=args.sync_every)
    return recover.then_teardown(ctx, out, code) if args.teardown else (out, code)


def _closed(job_id):
    """A teardown already closed the job (its answer's next is then nothing, not teardown again)."""
    try:
        return bool(cli.Context().sidecars.load(job_id).teardown)
    except cli.TaoBrevError:
        return False


def _next_step(answer, code, argv):
    from tao_brev import nextstep

    return nextstep.poll(answer, code, argv, closed=_closed)


if __name__ == "__main__":
    sys.exit(cli.run(main, next_step=_next_step))
