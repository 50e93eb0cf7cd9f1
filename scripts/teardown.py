#!/usr/bin/env python3
"""Cancel / tear down a TAO job on Brev: remove its container, close its record,
and delete the instance when it is ephemeral (or when asked).

One `brev exec` reads the container's last state and runs `docker rm -f <job_id>`.
A job that had already exited keeps the state docker reports (COMPLETE/ERROR);
a running one is marked CANCELED; a terminal record never changes.
`brev delete <instance>` runs only with --delete-instance, or when submit was
given --ephemeral (unless --keep-instance), and never while another job on the
instance is live or has results not verified in S3, unless --force.

Results routed to S3 (a bucket) are uploaded from the instance and verified
from here (size + sha256 of every file of a manifest made on the instance)
right after the container is removed, unless already verified. Before
`brev delete`, every verified destination on the instance is listed again; a
file lost since blocks the delete (exit 1, INSTANCE_DELETE_REFUSED, the
blockers name it) until a rerun uploads it again, or --force.

Output: one JSON object on stdout:
  {"ok", "job_id", "instance", "state", "backend_ref", "results_dir",
   "container_removed", "instance_deleted", "deleted": [names], "warnings",
   ["results": {kind, destination, uploaded, verified, files, bytes, missing,
   mismatched, ...}], ["blockers"], ["error"]}  (schema: references/schemas/teardown.schema.json)
Exit codes: 0 done, 1 instance deletion refused (blockers listed),
  2 bad input, 3 the instance could not be reached.
"""

import sys

import _bootstrap

_bootstrap.setup()

from tao_brev import cli  # noqa: E402
from tao_brev.verbs.teardown import teardown  # noqa: E402


def build_parser():
    p = cli.parser("teardown.py", __doc__)
    p.add_argument("job_id", help="the job id printed by submit.py")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--delete-instance", action="store_true", help="also `brev delete` the job's instance")
    group.add_argument("--keep-instance", action="store_true", help="never delete the instance (even if ephemeral)")
    p.add_argument("--force", action="store_true",
                   help="delete the instance even with live jobs or unverified results on it (loses them)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    delete = True if args.delete_instance else (False if args.keep_instance else None)
    return teardown(cli.Context(), args.job_id, delete_instance=delete, force=args.force)


if __name__ == "__main__":
    sys.exit(cli.run(main))
