#!/usr/bin/env python3
"""The S3 client a verb builds once per process (tao_brev/s3/clients.py): CPU time of a fresh
process that imports botocore and builds the client, beside the bare interpreter, and the
same process parsing a LIST answer of 1,000 objects (timestamps included). No request is
sent (the endpoint is never contacted). What a staging or results verb pays on top of its
brev round trips, each seconds long. Figures only; nothing is asserted.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _measure

ROOT = Path(__file__).resolve().parent.parent
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
BUILD = ("import sys; sys.path.insert(0, sys.argv[1])\n"
         "from tao_brev.s3 import clients, settings\n"
         "s = settings.S3Settings(access_key_id='AKIAEXAMPLEEXAMPLE', secret_access_key='x' * 40,\n"
         "                        endpoint_url='http://127.0.0.1:9', region='us-east-1')\n"
         "c = clients.client(s)\n")
LIST = ("<?xml version='1.0' encoding='UTF-8'?><ListBucketResult><Name>b</Name><KeyCount>1000</KeyCount>"
        "<IsTruncated>false</IsTruncated>" + "".join(
            f"<Contents><Key>jobs/x/file{i}</Key><LastModified>2026-12-01T10:00:00.000Z</LastModified>"
            f"<ETag>&quot;abc&quot;</ETag><Size>{i}</Size><StorageClass>STANDARD</StorageClass></Contents>"
            for i in range(1000)) + "</ListBucketResult>")
PARSE = BUILD + (
    "op = c.meta.service_model.operation_model('ListObjectsV2')\n"
    "parser = c._endpoint._response_parser_factory.create_parser('rest-xml')   # the client's own\n"
    "body = open(sys.argv[2], 'rb').read()\n"
    "for _ in range(5):\n"
    "    parser.parse({'status_code': 200, 'headers': {}, 'body': body}, op.output_shape)\n")


def main() -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAO_", "PYTHON", "AWS_"))}
    body = Path(os.environ.get("TMPDIR", "/tmp")) / f"tao-brev-list-{os.getpid()}.xml"
    body.write_text(LIST)
    try:
        bare = [sys.executable, "-c", "pass"]
        built, base = _measure.side_by_side([sys.executable, "-c", BUILD, str(ROOT)], bare, RUNS, env)
        parsed, _ = _measure.side_by_side([sys.executable, "-c", PARSE, str(ROOT), str(body)], bare, RUNS, env)
    finally:
        body.unlink(missing_ok=True)
    print(f"S3 client, fresh process, median of {RUNS}; {_measure.load()}")
    print(f"  bare interpreter: CPU {base['cpu'] * 1000:.0f} ms")
    print(f"  import botocore + build the client: CPU {(built['cpu'] - base['cpu']) * 1000:.0f} ms beyond it")
    print(f"  ... + parse 5 LIST answers of 1,000 objects: CPU {(parsed['cpu'] - built['cpu']) * 1000 / 5:.0f} ms "
          f"a LIST")
    return 0


if __name__ == "__main__":
    sys.exit(main())
