#!/usr/bin/env python3
"""Cancel / tear down a TAO job on Brev: remove its container, close its record,
and delete the instance when this bundle owns it (or when asked). Or, with
--orphans, list the instances that bill for nothing (and delete them only when asked).

teardown.py JOB_ID [--delete-instance | --keep-instance | --stop-instance] [--force] [--discard-results] [--price-per-hour USD]
  One `brev exec` reads the container's last state and runs `docker rm -f <job_id>`.
  A job that had already exited keeps the state docker reports (COMPLETE/ERROR);
  a running one is marked CANCELED; a terminal record never changes.
  Results routed to S3 are uploaded from the instance and verified from here
  (size + sha256 of every file of a manifest made on the instance) unless already
  verified. `brev delete <instance>` runs only
    - with --delete-instance (asked by name: works on a reused instance too), or
    - when the instance is owned: a job on it was submitted with --ephemeral
      (unless --keep-instance). While another job on it is live, an owned
      instance is kept (`instance_kept`, exit 0): the last job's teardown deletes it;
  and never while results on it are not verified in S3 (every verified
  destination is listed again first) or, with --delete-instance, while another
  job on it is live - unless --force (which loses them). Results with no
  destination (no bucket, no TAO_RESULTS_ROOT: they exist only on the instance)
  are first archived on the instance (in the same `brev exec`), copied back with
  `brev copy` to $TAO_STATE_DIR/brev/results/JOB_ID.tar.gz and verified (sha256
  computed there vs here): `results_saved_to`. Not verified -> nothing is deleted
  (RESULTS_ONLY_ON_INSTANCE, exit 1, `still_billing`); rerun to retry, or
  --discard-results deletes without saving them. Rerunning is safe: an
  instance a teardown deleted is never asked or deleted again.
  --stop-instance: instead of any delete, `brev stop` the instance (owned or the
  user's own) once no other job on it is live and its S3 results are verified
  (else INSTANCE_STOP_REFUSED, exit 1); a type brev cannot stop (brev search
  --json `stoppable` false, or brev's "does not support stop") is left running:
  `stop.why` says so and what bills. `instance_stopped`, `stop` in the answer.
  Before a stop or delete, the same `brev exec` lists the job containers still
  live on the instance (docker ps -a --filter label=tao-job): one that no job of
  this state dir accounts for (another user's or agent's TAO_STATE_DIR launched
  it) refuses the stop/delete (`unknown_containers`, what it would cost, and
  `force`: the exact command that does it anyway: --force, which kills them).

teardown.py --orphans [--delete | --stop [--instance NAME ...]] [--price-per-hour USD]
  Lists the instances of `brev ls --json` that bill for nothing: RUNNING with no
  live `tao-job` container (one `brev exec` each: docker ps -a --filter
  label=tao-job) and no unfinished job of this bundle, and owned (ephemeral)
  instances whose jobs all ended (also when STOPPED: the disk bills). Each says
  `ours` (a job of this bundle ran on it), `owned`, `idle_s` and what it costs.
  --delete deletes the owned orphans; with --instance, exactly the named orphans
  (a reused instance of ours is deleted only when named). Never deleted, by
  design and with no flag to override: an instance this bundle never ran a job
  on (`ours: false` - it may be someone's dev box; its owner runs `brev delete`),
  and an instance whose S3 results are not verified.
  --stop stops (brev stop) instead: the idle RUNNING orphans of ours (or exactly
  the --instance ones) whose type can stop; one that cannot is kept, saying why.

Cost facts (JOB_ID): `cost` = {submit_to_running_s, image_pull_s, run_s,
  idle_billed_s (job end -> deletion, or -> now while `still_billing`),
  billed_s, billed_parts {start_s, image_pull_s, job_s, idle_s, until}, instance_type,
  price_per_hour_usd, price_source ("flag", "brev search" or "prices.yaml"), price_note,
  estimated_cost_usd, submitted_at, running_at, ended_at, instance_deleted_at,
  instance_stopped_at, owned (this bundle created the instance, as an orphan's
  owned)}; seconds and US dollars, null when unknown.
  The price: --price-per-hour (USD per hour), else brev's own `brev search gpu|cpu
  --json` price_per_hour of the instance type (cached a day with its date), else the
  fallback references/prices.yaml (said so in price_note).

Output: one JSON object on stdout:
  JOB_ID: {"ok", "job_id", "instance", "state", "backend_ref", "results_dir",
   "container_removed", "instance_deleted", "deleted": [names], "warnings",
   ["instance_kept": why], ["cleanup_pending": true, "still_billing": true,
   "manual_command": "brev delete NAME"] (brev delete failed), ["results_saved_to": local .tar.gz path,
   "results_saved": [{job_id, path, sha256, bytes, at}]], ["results_discarded": [job ids]],
   ["results": {kind, destination, uploaded, verified,
   files, bytes, missing, mismatched, ...}], "cost": {...}, ["blockers"], ["error"]}
  --orphans: {"ok", "orphans": [{instance, id, status, instance_type, ours, owned,
   jobs, reason, idle_since, idle_s, price_per_hour_usd, estimated_idle_cost_usd,
   blockers, advice, deleted, [delete_pending], [error]}], "kept": [{instance, reason}],
   "deleted": [names], ["error"]}
  (schema: references/schemas/teardown.schema.json)
  Every answer, failures included, ends with "next": the exact command to run
  next (absolute path, real values), or null with "next_note" saying why
  (references/output.md).
Exit codes: 0 done, 1 a deletion was refused (INSTANCE_DELETE_REFUSED: blockers
  listed; RESULTS_ONLY_ON_INSTANCE: results not copied back and verified;
  NOT_AN_ORPHAN: a named instance may not be deleted), 2 bad input
  (JOB_ID and --orphans together or neither, --delete without --orphans, ...),
  3 brev or the instance could not be reached (rerun: it is safe); INSTANCE_DELETE_PENDING:
  `brev delete` failed even after a fresh login - the instance still bills, run
  `brev delete NAME` or rerun; --orphans lists it (delete_pending) until a delete succeeds.
"""

import _bootstrap  # noqa: I001  (first: SIGINT/SIGTERM get a JSON answer from here on)

import sys  # noqa: E402

_bootstrap.setup()

from tao_brev import cli  # noqa: E402


def build_parser():
    p = cli.parser("teardown.py", __doc__)
    p.add_argument("job_id", nargs="?", help="the job id that submit.py printed; none with --orphans")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--delete-instance", action="store_true",
                       help="JOB_ID: also `brev delete` the job's instance (reused ones too)")
    group.add_argument("--keep-instance", action="store_true",
                       help="JOB_ID: never delete the instance (even if owned)")
    group.add_argument("--stop-instance", action="store_true",
                       help="JOB_ID: `brev stop` the job's instance once its results are safe, instead of deleting "
                            "it (when brev search lists its type as stoppable; otherwise the answer says why and "
                            "what bills)")
    p.add_argument("--force", action="store_true",
                   help="JOB_ID: delete the instance even with live jobs or unverified results on it (loses them); "
                        "with --stop-instance: stop it even though job containers another state dir launched "
                        "run on it (kills them; this state dir's live jobs still refuse the stop)")
    p.add_argument("--discard-results", action="store_true",
                   help="JOB_ID: delete the instance without copying back results that exist only on it (loses them)")
    p.add_argument("--orphans", action="store_true",
                   help="instead of a job: list the instances that bill for nothing")
    p.add_argument("--delete", action="store_true",
                   help="--orphans: delete the owned orphans (or the --instance ones); never someone else's")
    p.add_argument("--stop", action="store_true",
                   help="--orphans: `brev stop` the idle RUNNING orphans this bundle ran jobs on (or the --instance "
                        "ones) whose type can stop; never someone else's")
    p.add_argument("--instance", action="append", default=[], metavar="NAME",
                   help="--orphans --delete: delete exactly these listed orphans (repeatable)")
    p.add_argument("--start", action="store_true",
                   help="start the job's instance if it is STOPPED (billing resumes; waits up to brev's own start "
                        "wait, ~1650 s). Without it a teardown that deletes nothing answers INSTANCE_STOPPED and "
                        "never starts the instance")
    p.add_argument("--price-per-hour", type=float, metavar="USD",
                   help="hourly price of the instance in US dollars, for estimated_cost_usd "
                        "(default: references/prices.yaml by instance type)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    from tao_brev.verbs.orphans import orphans
    from tao_brev.verbs.teardown import teardown

    if bool(args.job_id) == args.orphans:
        raise cli.TaoBrevError("BAD_ARGUMENT", "pass either a JOB_ID or --orphans (exactly one)")
    if args.orphans:
        if args.delete_instance or args.keep_instance or args.stop_instance or args.force or args.discard_results:
            raise cli.TaoBrevError("BAD_ARGUMENT", "--delete-instance, --keep-instance, --stop-instance, --force and "
                                   "--discard-results take a JOB_ID; "
                                   "with --orphans use --delete or --stop [--instance NAME]")
        if args.delete and args.stop:
            raise cli.TaoBrevError("BAD_ARGUMENT", "--orphans takes --delete or --stop, not both")
        if args.stop:
            from tao_brev.verbs.stop_orphans import stop_orphans

            return stop_orphans(cli.Context(), names=args.instance, price_per_hour=args.price_per_hour)
        return orphans(cli.Context(), delete=args.delete, names=args.instance, price_per_hour=args.price_per_hour)
    if args.delete or args.instance or args.stop:
        raise cli.TaoBrevError("BAD_ARGUMENT", "--delete, --stop and --instance go with --orphans; for a job use "
                               "--delete-instance or --stop-instance")
    delete = True if args.delete_instance else (False if args.keep_instance or args.stop_instance else None)
    return teardown(cli.Context(), args.job_id, delete_instance=delete, force=args.force,
                    price_per_hour=args.price_per_hour, discard_results=args.discard_results,
                    stop_instance=args.stop_instance, start=args.start)


if __name__ == "__main__":
    sys.exit(cli.run(main, next_step="teardown"))   # tao_brev.nextstep.teardown
