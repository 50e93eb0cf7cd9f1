#!/usr/bin/env python3
"""Preflight a Brev instance for a TAO job: everything that can fail before
GPU money is spent, as named checks in one JSON answer. Read-only on the
instance except `--start` (brev start), `--pull` (docker pull), `--gpu-smoke`
(a throw-away container) and the NGC login (docker's credential store).

Checks, in this order (stable names; a check that does not apply is absent):
  image_ref   --image resolves (full URI, or a key of $TAO_SKILL_BANK_PATH/versions.yaml)
  s3          tier B/C or a bucket (--bucket / S3_BUCKET_NAME): the credentials
              (AWS_* or the legacy ACCESS_KEY/SECRET_KEY) work and a probe
              object is written, read and deleted under s3://BUCKET/results/
  brev_cli    brev on PATH and `brev --version` answers
  brev_auth   `brev ls --json` answers; with BREV_API_KEY exported brev reads the key from its
              environment (brev-cli PR #464; a bak- key in BREV_API_TOKEN counts as one, never on
              argv); with BREV_API_TOKEN set, an expired or missing login is renewed headlessly
              once (the token is never printed). --login runs only brev_cli and brev_auth.
  instance    listed, RUNNING; STARTING/DEPLOYING are waited for; STOPPED is
              started only with --start; FAILURE/UNHEALTHY/DELETING fail
  exec_ready  the probe `echo ok` prints exactly `ok` (sshd starts after RUNNING);
              `Permission denied (publickey)` stops it after 2 attempts (SSH_KEY_REJECTED)
  docker      `docker info` answers (server version, runtimes); DOCKER_NOT_ON_PATH when
              only a login shell finds docker (data.docker_path names it)
  gpu         nvidia-smi: GPU count, model, memory, driver
  disk        free bytes where Docker keeps images and under the results root,
              against the image size (registry layers x2, else local, else 20 GiB);
              a warning below 20 GiB of headroom
  ngc_auth    nvcr.io images: NGC_KEY travels in a 0600 file (brev copy), docker
              login -u '$oauthtoken' --password-stdin reads it, the file is removed;
              `docker manifest inspect` then says AUTH_OK / NOT_AUTHENTICATED /
              NOT_ENTITLED (a warning only when the image is already there); a key
              file that arrives empty is NGC_KEY_NOT_DELIVERED, a registry the
              instance cannot reach REGISTRY_UNREACHABLE (also for --pull, --gpu-smoke)
  image       on the instance; with --pull, pulled as its own step (timed)
  s3_from_instance  with a bucket: the instance itself opens a TCP connection to the S3
              endpoint (AWS_ENDPOINT_URL, else s3.<region>.amazonaws.com:443) within 10 s
              (S3_UNREACHABLE otherwise: the transfers run there), and holds the AWS CLI
              image images.s3_transfer (a warning when absent: the first transfer pulls it)
  gpu_smoke   with --gpu-smoke: `docker run --rm --gpus all <images.gpu_smoke> nvidia-smi -L`

brev missing, not logged in, an unknown / not running instance or one that is
not exec-ready stop the run; otherwise every check runs. Round trips once the
instance is exec-ready: 2 `brev exec` (the probe, then one combined script
for docker/gpu/disk/ngc_auth/image/s3_from_instance), plus 1 `brev copy` for the NGC key; the
pull and the GPU smoke test are one more each.

Output: {"ok", "instance", "image", "checks": [{"name", "ok", "detail", "fix",
  "elapsed_s", ["code"], ["warning"], ["data"]}], "warnings": [names],
  "exec_calls", "round_trips": {"probe", "checks", "pull", "gpu_smoke", "copy"},
  "brev_logins", ["error": {"code", "message", "fix"}]}
  (schema: references/schemas/preflight.schema.json). Times in seconds, sizes
  in bytes. "ok" is true only when every check passed; warnings do not fail it.
  Checks answered by the combined round trip share its elapsed_s.
  Progress on stderr.
  Every answer, failures included, ends with "next": the exact command to run
  next (absolute path, real values), or null with "next_note" saying why
  (references/output.md).
Exit codes: 0 every check passed; 1 a check failed (error PREFLIGHT_FAILED, or
  UNKNOWN_INSTANCE / INSTANCE_NOT_RUNNING when the instance stopped the run);
  2 bad input (flags, an unknown versions key, a missing credential variable);
  3 brev missing / not logged in / instance not exec-ready within --exec-timeout /
  brev's ssh key refused (SSH_KEY_REJECTED).
"""

import _bootstrap  # noqa: I001  (first: SIGINT/SIGTERM get a JSON answer from here on)

import sys  # noqa: E402

_bootstrap.setup()

from tao_brev import cli  # noqa: E402


def build_parser():
    p = cli.parser("preflight.py", __doc__)
    p.add_argument("--instance", help="Brev instance name (reused, never provisioned here); required unless --login")
    p.add_argument("--login", action="store_true",
                   help="only log brev in headlessly and stop (checks brev_cli, brev_auth): with BREV_API_KEY "
                        "exported brev reads the key from its environment; with BREV_API_TOKEN a missing or "
                        "expired login is renewed. Run it before any plain `brev` command an answer suggests")
    p.add_argument("--image", help="image URI or versions key (e.g. images.tao_toolkit.pyt) to check on the instance")
    p.add_argument("--exec-timeout", type=float, default=None, metavar="S",
                   help="seconds to reach the instance: the wait for a starting instance plus the readiness "
                        "probe (default 600: sshd starts after the instance reports RUNNING)")
    p.add_argument("--start", action="store_true",
                   help="start a STOPPED instance (brev start NAME; billing resumes) and wait within --exec-timeout")
    p.add_argument("--pull", action="store_true",
                   help="pull --image when it is missing, as its own step (up to 3600 s), before any GPU run")
    p.add_argument("--gpu-smoke", action="store_true",
                   help="prove a container gets the GPUs: docker run --rm --gpus all <small CUDA image> nvidia-smi -L")
    p.add_argument("--storage-tier", default="A", choices=["A", "B", "C"],
                   help="A: data on the instance; B/C: data moves through S3, so the bucket is checked (default A)")
    p.add_argument("--bucket", help="S3 bucket for results (default $S3_BUCKET_NAME); probed under results/")
    p.add_argument("--results-root", metavar="PATH",
                   help="instance directory for results (~/... or absolute; default $TAO_RESULTS_ROOT or "
                        "~/tao-results); its free space is checked")
    p.add_argument("--host", action="store_true",
                   help="run on the host VM (brev exec --host), for container-mode instances")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    from tao_brev.verbs.preflight import PreflightRequest, login_only, preflight

    if args.login:
        if args.instance or args.image or args.start or args.pull or args.gpu_smoke:
            raise cli.TaoBrevError("BAD_ARGUMENT", "--login takes no --instance, --image, --start, --pull or "
                                   "--gpu-smoke (it only logs brev in)",
                                   "Run preflight.py --login alone, then preflight.py --instance NAME.")
        return login_only(cli.Context())
    if not args.instance:
        raise cli.TaoBrevError("BAD_ARGUMENT", "the following arguments are required: --instance",
                               "Pass --instance NAME, or --login alone to only log brev in.")
    req = PreflightRequest(instance=args.instance, image=args.image, exec_timeout=args.exec_timeout,
                           host=args.host, start=args.start, pull=args.pull, gpu_smoke=args.gpu_smoke,
                           storage_tier=args.storage_tier, bucket=args.bucket, results_root=args.results_root)
    return preflight(cli.Context(), req)


if __name__ == "__main__":
    sys.exit(cli.run(main, next_step="preflight"))   # tao_brev.nextstep.preflight
