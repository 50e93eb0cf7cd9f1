#!/usr/bin/env python3
"""Submit a TAO job to a Brev instance: open the record, then launch once.

Opens the job record first (record-then-launch: the job id is minted before
anything runs), then ONE `brev exec` writes the spec on the instance and runs
`docker run -d --name <job_id> --label tao-job=<job_id> ...` unless a container
of that name already exists (idempotent; never --rm). Marks the record RUNNING
with backend ref <instance>/<job_id>.

Credentials named with --env travel in a 0600 file copied with `brev copy` and
removed by the launch command; no value is ever on a command line. Every
secret value this process knows (--env values, the bundle's credentials,
variables named like credentials) is refused in the spec, the overrides and
the names (SECRET_IN_COMMAND / SECRET_IN_IDENTIFIER) and redacted from every
output; --env BREV_API_TOKEN / NGC_KEY needs --allow-bundle-credential-env;
values shorter than 8 characters are refused (SECRET_TOO_SHORT).
See references/redaction.md.

Storage tiers (references/storage.md): A = inputs already on the instance;
B = local inputs uploaded to S3 (content-addressed, never twice), copied onto
the instance by the AWS CLI carrier container in the launch round trip, and
mounted read-only at /data/NAME; C = as B, and the job container also gets the
AWS_* credentials and the input/result URIs (TAO_INPUT_URI_<NAME>,
TAO_RESULTS_URI) as environment variables to move data itself. The S3
credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
AWS_ENDPOINT_URL for S3-compatible stores), never from flags.

Output: one JSON object on stdout:
  {"ok", "job_id", "instance", "state", "backend_ref", "results_dir", "image",
   "container_id", "adopted", "storage_tier", ["inputs": [{name, source, uri,
   container_path, files, bytes, uploaded, skipped, bytes_uploaded}]],
   "results": {kind, destination, instance_dir}, "warnings",
   ["error": {"code","message","fix"}]}
  (schema: references/schemas/submit.schema.json). Progress on stderr.
  Every answer, failures included, ends with "next": the exact command to run
  next (absolute path, real values), or null with "next_note" saying why
  (references/output.md).
Guards (references/submit-guards.md), each before any GPU time is spent: the
instance's status comes from `brev ls --json` before the first exec (STOPPED is
refused, INSTANCE_NOT_RUNNING, unless --start); --network-arch/--action are
checked against references/tao-pyt-archs.yaml (on a TAO 7 -pyt image only an
unmistakable typo of a known name - or bevfusion - is refused, BAD_ARGUMENT with
the name meant; any other unknown name, or another image: a warning;
--allow-unknown-arch skips);
words after --inputs that look like key.path=value and --env NAME=value are
refused with the corrected command; on the instance every launch step is checked
(the spec's size and sha256 before docker run: SPEC_NOT_WRITTEN / DISK_FULL) and a
live tao-job container on the same GPUs refuses the launch (GPUS_BUSY) unless
--share-gpus; every path the spec names under an input mount (/data/NAME/...) must
exist in the staged inputs, checked in the launch round trip (SPEC_PATH_MISSING;
SPEC_INPUT_UNKNOWN before anything when no input NAME is given; --no-spec-check
skips). Every error's fix is the exact next command.

Resume (--resume-from JOB_ID, tao_brev/resume.py): TAO resumes only from
train.resume_training_checkpoint_path or a *_latest.pth in its own results dir
(tao-pytorch core/initialize_experiments.py:66), and a new job has a fresh results
dir: --resume-from mounts the old job's results at /resume and sets that path;
--retry-of only links the records.

Any answer says when brev started a STOPPED instance by itself
("instance_started": it bills again).

Exit codes: 0 launched (or adopted), 1 launch refused / never launched,
  2 bad input (nothing recorded), 3 backend unreachable ("state" PENDING: the
  record stays PENDING and poll_status.py reconciles it; "state" ERROR: the
  credential copy failed before any launch, submit again with --retry-of),
  130 interrupted. Every answer once the record is open names its job_id.
"""

import _bootstrap  # noqa: I001  (first: SIGINT/SIGTERM get a JSON answer from here on)

import sys  # noqa: E402

_bootstrap.setup()

from tao_brev import cli  # noqa: E402


def build_parser():
    p = cli.parser("submit.py", __doc__)
    p.add_argument("--instance", required=True, help="Brev instance name (reused, never provisioned here)")
    p.add_argument("--image", required=True, help="image URI or versions key (e.g. images.tao_toolkit.pyt)")
    p.add_argument("--network-arch", required=True, help="TAO network arch, e.g. visual_changenet")
    p.add_argument("--action", required=True, help="TAO action, e.g. train, evaluate, inference")
    p.add_argument("--spec", required=True, help="local path of the TAO spec YAML (<= 64 KiB); it is written to "
                                                 "the instance and mounted read-only at /tao/job/spec.yaml")
    p.add_argument("--storage-tier", default="A", choices=["A", "B", "C"],
                   help="A: inputs already on the instance; B: staged through S3; C: the container fetches "
                        "(default A)")
    p.add_argument("--inputs", nargs="+", action="extend", default=[], metavar="SRC[=NAME]",
                   help="inputs mounted read-only at /data/NAME (repeat --inputs, or name several after one). Tier A: instance paths (~/... or absolute). "
                        "Tiers B/C: local files/dirs (uploaded once to s3://BUCKET/inputs/NAME/<digest>/) or "
                        "s3://BUCKET/PREFIX/ URIs, copied onto the instance before the launch")
    p.add_argument("--results-root", help="instance directory under which <job_id>/ is the results dir "
                                          "(default $TAO_RESULTS_ROOT or ~/tao-results); mounted at /results")
    p.add_argument("--bucket", help="S3 bucket for results (default $S3_BUCKET_NAME): s3://BUCKET/results/<job_id>/, "
                                    "uploaded and verified when the job ends; also holds tier B/C inputs")
    p.add_argument("--upload-exclude", action="append", default=[], metavar="GLOB",
                   help="results paths not to upload (repeatable; recorded as upload_excludes)")
    p.add_argument("--gpus", default="all", help="'all' or GPU ids such as 0,1 (default all)")
    p.add_argument("--env", action="append", default=[], metavar="NAME",
                   help="pass this local environment variable to the container: the NAME only, export its value "
                        "in the environment (value never on argv; NAME=value is refused; repeatable)")
    p.add_argument("--allow-bundle-credential-env", action="store_true",
                   help="let --env pass BREV_API_TOKEN / NGC_KEY / NGC_API_KEY to the container (refused otherwise: "
                        "docker inspect on the instance shows a container's environment)")
    p.add_argument("--shm-size", default="16g", help="container /dev/shm size (default 16g; PyTorch loaders need it)")
    p.add_argument("--ephemeral", action="store_true",
                   help="this job owns the instance: the teardown of its last job deletes it (sidecar records it)")
    p.add_argument("--price-per-hour", type=float, metavar="USD",
                   help="hourly price of the instance in US dollars, remembered for the job's cost facts "
                        "(default: references/prices.yaml by instance type)")
    p.add_argument("--start", action="store_true",
                   help="start the instance (brev start, billing resumes) when it is STOPPED; without it a STOPPED "
                        "instance is refused (INSTANCE_NOT_RUNNING) before anything runs")
    p.add_argument("--share-gpus", action="store_true",
                   help="launch even when a live tao-job container on the instance holds the same GPUs "
                        "(default: refuse with GPUS_BUSY, naming that job)")
    p.add_argument("--allow-unknown-arch", action="store_true",
                   help="skip the check of --network-arch/--action against references/tao-pyt-archs.yaml "
                        "(on a TAO 7 -pyt image an unmistakable typo of a known name is refused; any other "
                        "unknown name, or another image: a warning)")
    p.add_argument("--no-spec-check", action="store_true",
                   help="skip the check of the spec and overrides against TAO's schema of the image's version "
                        "(nvidia-tao-core; for a custom image with its own schema); the answer says it was skipped")
    p.add_argument("--retry-of", metavar="JOB_ID",
                   help="link this submit to an earlier job (the record's retry_of); a link only: the job starts "
                        "from scratch in a fresh results dir - to continue from a checkpoint use --resume-from")
    p.add_argument("--resume-from", metavar="JOB_ID",
                   help="continue that ended train job (same network) from its last checkpoint: its results are "
                        "mounted read-only at /resume (its results dir on the same instance, else its checkpoint "
                        "copied from its verified S3 results, or from the archive a teardown kept here, and checked "
                        "by sha256) and "
                        "train.resume_training_checkpoint_path is set to the *_latest.pth link's target (else the "
                        "highest model_epoch_*.pth); only the epochs after it run. Links the record (retry_of). "
                        "RESUME_NOT_POSSIBLE (exit 2) when it cannot, RESUME_CHECKPOINT_MISSING (exit 1) when the "
                        "instance holds no usable checkpoint")
    p.add_argument("--recover", type=int, default=None, metavar="N",
                   help="remember a recovery policy: poll_status.py JOB_ID --wait then resubmits the job with "
                        "--resume-from up to N times when it ends by an infrastructure failure (Xid, GPU or "
                        "instance lost, container gone, stall); never after a program error "
                        "(references/recovery.md)")
    p.add_argument("--fallback-instance", metavar="NAME",
                   help="with --recover: the instance a recovery moves to when the job's own instance is gone "
                        "or its GPUs stay unhealthy")
    p.add_argument("--budget-s", type=float, metavar="S",
                   help="with --recover: the billed seconds the whole chain of attempts may use")
    p.add_argument("--dry-run", action="store_true", help="print the plan (every remote command, redacted); launch nothing")
    p.add_argument("overrides", nargs="*", metavar="-- KEY=VALUE",
                   help="after --: extra TAO arguments appended to `<arch> <action> -e <spec>` (e.g. train.num_epochs=5)")
    return p


def request(argv, prog):
    """The SubmitRequest of these submit.py arguments (``prog``: the script's path, for the fixes);
    argparse errors exit 2. Also used by a recovery's resubmit (tao_brev/verbs/recover.py)."""
    args = build_parser().parse_args(argv)
    from tao_brev.verbs.submit import SubmitRequest

    return SubmitRequest(instance=args.instance, image=args.image, network_arch=args.network_arch,
                        action=args.action, spec=args.spec, storage_tier=args.storage_tier,
                        results_root=args.results_root, bucket=args.bucket, gpus=args.gpus,
                        env_names=args.env, shm_size=args.shm_size, inputs=args.inputs,
                        upload_excludes=args.upload_exclude, ephemeral=args.ephemeral,
                        dry_run=args.dry_run, retry_of=args.retry_of, resume_from=args.resume_from,
                        overrides=args.overrides,
                        price_per_hour=args.price_per_hour, start=args.start, share_gpus=args.share_gpus,
                        allow_unknown_arch=args.allow_unknown_arch, argv=argv, prog=prog,
                        allow_bundle_credential_env=args.allow_bundle_credential_env,
                        no_spec_check=args.no_spec_check, recover=_policy(args))


def _policy(args):
    from tao_brev.verbs.recover import policy

    return policy(args.recover, args.fallback_instance, args.budget_s)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    req = request(argv, sys.argv[0] or "submit.py")
    from tao_brev.verbs.submit import submit

    return submit(cli.Context(), req)


if __name__ == "__main__":
    sys.exit(cli.run(main, next_step="submit"))   # tao_brev.nextstep.submit
