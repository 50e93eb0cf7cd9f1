#!/usr/bin/env python3
"""What ``submit.py --storage-tier B`` runs up to and including its upload, as one fresh process.

Usage (``bench_staging.py`` times it beside ``aws s3 sync``)::

    stage_fresh.py SRC=NAME [SRC=NAME ...]

The S3 settings and ``S3_BUCKET_NAME`` come from the environment and the
hash cache and the local copies of ``index.json`` from ``$TAO_STATE_DIR``,
as for ``submit.py``. Prints the number
of files uploaded; upload progress goes to stderr. Exit 0, or 1 with the
error's code and message on stderr.

It starts as ``scripts/submit.py`` does (``scripts/_bootstrap.py``: the
bundle's venv, then the package on ``sys.path``), imports what it imports,
and makes the same calls: ``Staging.plan``, ``Staging.warm``,
``Staging.prepare``. ``submit.py`` asks brev about the instance between
``warm`` and ``prepare``, which hides the S3 client's background build
behind that wait; nothing stands in for it here (the AWS CLI has no such
step), so the build overlaps the hashing only.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))

import _bootstrap  # noqa: E402,I001

_bootstrap.setup()

from tao_brev import cli  # noqa: E402  (submit.py's own imports)
from tao_brev.errors import TaoBrevError  # noqa: E402
from tao_brev.verbs.submit import Staging, SubmitRequest  # noqa: E402


def main() -> int:
    req = SubmitRequest(instance="bench", image="images.tao_toolkit.pyt", network_arch="visual_changenet",
                        action="train", spec="spec.yaml", storage_tier="B", inputs=sys.argv[1:])
    try:
        stage = Staging.plan(cli.Context(), req)
        stage.warm()
        stage.prepare()
    except TaoBrevError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return 1
    print(sum(inp.upload.get("uploaded", 0) for inp in stage.inputs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
