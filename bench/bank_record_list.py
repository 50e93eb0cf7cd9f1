#!/usr/bin/env python3
"""Yardstick for `tao_job_record.py list`: a stand-in for the TAO skill bank's own record
tool, rebuilt from its public record format (not its code): the records are
`$TAO_STATE_DIR/jobs/<id>.json` (default ~/.tao); `list` reads every `*.json` there in name
order and prints `id<TAB>platform<TAB>last transition's state<TAB>results_dir`, a record
that is not JSON as `<id><TAB><corrupt>` on stderr. No quarantine, no redaction, no
temp-file sweep: the least a listing can do, which is what the bundle's listing is timed against.
usage: bank_record_list.py list
"""

import json
import os
import sys
from pathlib import Path


def main() -> int:
    if sys.argv[1:] != ["list"]:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    jobs = Path(os.environ.get("TAO_STATE_DIR") or Path.home() / ".tao") / "jobs"
    for path in sorted(jobs.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError:
            print(f"{path.stem}\t<corrupt>", file=sys.stderr)
            continue
        transitions = record.get("transitions") or [{"state": "?"}]
        print(f"{record.get('id', path.stem)}\t{record.get('platform', '?')}\t{transitions[-1]['state']}\t"
              f"{record.get('results_dir', '?')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
