#!/usr/bin/env python3
"""Preflight a Brev instance for a TAO job: everything that can fail before
GPU money is spent, as named checks in one JSON answer.

Checks (stable names): image_ref, brev_cli, brev_auth, instance, exec_ready,
docker, gpu, image, disk. Each is {"name","ok","detail","fix","elapsed_s"};
a check with "warning": true does not fail the run. brev missing, not logged
in, or an unreachable instance stop the run early (exit 3).

The readiness probe is the two-word `echo ok`, polled every 5 s until it
prints exactly `ok`, within --exec-timeout seconds (default 600 on the first
contact with an instance: sshd starts after the instance reports RUNNING).

Output: {"ok", "instance", "image", "checks": [...], "exec_calls", ["error"]}
  (schema: references/schemas/preflight.schema.json). Progress on stderr.
Exit codes: 0 all required checks passed, 1 a check failed,
  2 bad input, 3 brev missing / not logged in / instance unreachable.
"""

import sys

import _bootstrap

_bootstrap.setup()

from tao_brev import cli  # noqa: E402
from tao_brev.verbs.preflight import preflight  # noqa: E402


def build_parser():
    p = cli.parser("preflight.py", __doc__)
    p.add_argument("--instance", required=True, help="Brev instance name")
    p.add_argument("--image", help="image URI or versions key to check on the instance")
    p.add_argument("--exec-timeout", type=float, default=None, metavar="S",
                   help="seconds to wait for the instance to accept commands (default 600 on first contact)")
    p.add_argument("--host", action="store_true", help="run on the host VM (brev exec --host), for container-mode instances")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    return preflight(cli.Context(), args.instance, image=args.image, exec_timeout=args.exec_timeout, host=args.host)


if __name__ == "__main__":
    sys.exit(cli.run(main))
