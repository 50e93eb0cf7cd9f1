#!/usr/bin/env python3
"""The job-record tool, command-line compatible with the TAO skill bank's
scripts/tao_job_record.py: the only writer of $TAO_STATE_DIR/jobs/<id>.json
(default state dir ~/.tao).

Subcommands:
  open   --platform P --image I --network-arch N --action A --storage-tier A|B|C
         (--results-dir DIR | --results-root ROOT) [--upload-exclude X ...]
         [--parent-job ID] [--retry-of ID] [--json]
         -> mints <arch>-<action>-<6 hex>, writes PENDING, prints the id
            (bank-compatible: the bare id, so JOB_ID=$(... open ...) works;
            with --json: {"ok", "job_id", "record"})
  mark   ID --state S [--message M] [--source agent|poller|backend-hook]
         [--backend-ref R] [--err-class ERR_INFRA|ERR_PROGRAM]
         -> appends a transition; a terminal state never changes
            (prints {"ok", "job_id", "state", "terminal_state"})
  show   ID          -> the redacted record JSON
  list   [--json]    -> one line per record: id, platform, state, results_dir
                        (tab-separated, bank format); --json: {"ok", "jobs": [...]}
         Once the job's instance was deleted, show and list answer results_dir as where
         the results are now (the copy teardown saved here, or the S3 URI) and add
         instance_copy {deleted_at, instance, path, results} (list: a fifth field,
         "instance copy deleted" or what was lost); the record file keeps its values.
  cost   [--since DATE] [--instance NAME]
         -> what the jobs cost (a Brev addition, JSON): {"ok", "jobs": [{job_id, instance,
            state, billed_s, billed_parts, price_per_hour_usd, price_source, price_note,
            estimated_cost_usd, still_billing, ...}], "total": {jobs, billed_s,
            estimated_cost_usd, instances: [{instance, jobs, billed_s (union: shared
            time once), jobs_billed_s, usd_per_hour, ...}], unpriced_jobs, still_billing_jobs,
            price_sources}, "never_launched": [{job_id, instance, code, billed_s: 0,
            estimated_cost_usd: 0}] (refused submits: no job line, not in the totals),
            "billing_now": [{instance, status, bills, usd_per_hour, ours, ...}],
            "usd_per_hour_now"}; seconds and US dollars. DATE: YYYY-MM-DD or ISO 8601
            (UTC), jobs submitted since then. Prices: brev search gpu|cpu --json (cached a
            day, with its date), else references/prices.yaml (a fallback, said so).
            At most one brev search and one brev ls; without brev, billing_now is null.

Every write is atomic (temp + fsync + rename + directory fsync) under a
per-record lock and passes the redactor. Schema:
references/schemas/job_record.schema.json.
Exit codes: 0 done, 2 bad input (invalid/unknown id, damaged record - moved to
jobs/quarantine/, see poll_status.py / teardown.py -, refused terminal transition),
130 interrupted. Errors print {"ok": false, "error": {...}} on stdout.
"""

import _bootstrap  # noqa: I001  (first: SIGINT/SIGTERM get a JSON answer from here on)

import sys  # noqa: E402

_bootstrap.setup()

from tao_brev import cli, vocabulary  # noqa: E402  (records: imported once the arguments are read)


def build_parser():
    p = cli.parser("tao_job_record.py", __doc__)
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=cli.JsonArgumentParser)
    o = sub.add_parser("open", help="mint the id, bind results_dir, write PENDING (record-then-launch)")
    o.add_argument("--platform", default="brev", help="platform short name (kebab-case; default brev)")
    o.add_argument("--image", required=True)
    o.add_argument("--network-arch", required=True)
    o.add_argument("--action", required=True)
    o.add_argument("--storage-tier", required=True, choices=vocabulary.STORAGE_TIERS)
    o.add_argument("--results-dir", help="use this exact results_dir")
    o.add_argument("--results-root", help="results_dir = <root>/<job_id>")
    o.add_argument("--upload-exclude", action="append", default=[])
    o.add_argument("--parent-job")
    o.add_argument("--retry-of")
    o.add_argument("--json", action="store_true", help="print JSON instead of the bare id")
    m = sub.add_parser("mark", help="append a status transition (terminal states are immutable)")
    m.add_argument("id")
    m.add_argument("--state", required=True, choices=vocabulary.STATES)
    m.add_argument("--message", default="")
    m.add_argument("--source", default="agent", choices=vocabulary.SOURCES)
    m.add_argument("--backend-ref")
    m.add_argument("--err-class", choices=vocabulary.ERR_CLASSES)
    s = sub.add_parser("show", help="print the redacted record JSON")
    s.add_argument("id")
    ls = sub.add_parser("list", help="one line per record: id, platform, last state, results_dir")
    ls.add_argument("--json", action="store_true")
    c = sub.add_parser("cost", help="total billed time and dollars across jobs, and what still bills now")
    c.add_argument("--since", metavar="DATE", help="only jobs submitted since DATE (YYYY-MM-DD or ISO 8601, UTC)")
    c.add_argument("--instance", metavar="NAME", help="only the jobs on this instance")
    return p


def _platform(value: str) -> str:
    import re

    norm = re.sub(r"-{2,}", "-", re.sub(r"[\s_]+", "-", value.strip().lower())).strip("-")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,31}", norm):
        raise cli.TaoBrevError("BAD_ARGUMENT", f"cannot normalize platform {value!r} to a kebab-case name")
    return norm


def main(argv=None):
    args = build_parser().parse_args(argv)
    from tao_brev import records

    if args.cmd == "cost":
        from tao_brev.verbs.cost_report import report

        return report(cli.Context(), since=args.since, instance=args.instance)
    store = records.RecordStore()
    if args.cmd == "open":
        record = store.open(image=args.image, network_arch=args.network_arch, action=args.action,
                            storage_tier=args.storage_tier, results_dir=args.results_dir,
                            results_root=args.results_root, upload_excludes=args.upload_exclude,
                            parent_job=args.parent_job, retry_of=args.retry_of, platform=_platform(args.platform))
        if not args.json:
            print(record["id"])
            return None, 0
        return {"ok": True, "job_id": record["id"], "record": record}, 0
    if args.cmd == "mark":
        record = store.mark(args.id, args.state, message=args.message, source=args.source,
                            backend_ref=args.backend_ref, err_class=args.err_class)
        return {"ok": True, "job_id": args.id, "state": records.current_state(record),
                "terminal_state": record.get("terminal_state")}, 0
    if args.cmd == "show":
        from tao_brev import results_now

        # the record, bank-format (no "ok" added); once its instance is deleted, results_dir is where the
        # results are now and instance_copy says what went with the instance (tao_brev/results_now.py)
        cli.emit(results_now.view(store.load(args.id), store.root))
        return None, 0
    store.note_held_ids()   # before any redactor: a variable equal to a job id does not hide it
    if args.json:   # streamed: one record in memory at a time; unchanged records' texts from the listing cache
        from tao_brev import record_listing

        cli.emit_stream_texts({"ok": True}, "jobs", lambda redacted: record_listing.json_texts(store, redacted, store.root))
        return None, 0
    from tao_brev import results_now
    from tao_brev.secrets import search as known_secrets

    hide = known_secrets.redactor()   # values known now (a record is redacted with those known when written)
    lines = []   # written in chunks: one write per line costs a system call each when unbuffered
    for r in store.iter_list():
        if r.get("corrupt"):
            print(f"{r['id']}\t<corrupt> (quarantined: {r.get('quarantined')})", file=sys.stderr)
            continue
        r = results_now.view(r, store.root)
        note = results_now.tsv_note(r)   # a fifth field only once the instance is deleted
        lines.append(f"{r['id']}\t{r.get('platform', '?')}\t{records.current_state(r)}\t{r.get('results_dir', '?')}"
                     f"{'' if note is None else chr(9) + note}\n")
        if len(lines) >= 512:
            sys.stdout.write(hide("".join(lines)))
            lines.clear()
    sys.stdout.write(hide("".join(lines)))
    return None, 0


if __name__ == "__main__":
    sys.exit(cli.run(main))   # `open` (bare id) and `list` (TSV) print bank-format text themselves
