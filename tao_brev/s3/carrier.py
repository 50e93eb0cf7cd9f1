"""Storage tiers B and C, instance half: the AWS CLI CARRIER container and the shell that copies inputs in.

A stock Brev instance has Docker and the NVIDIA toolkit but neither the ``aws``
CLI nor Python packages on the host, so every transfer runs in a carrier
container, the official AWS CLI v2 image pinned in ``versions.yaml``
(``images.s3_transfer``, ``public.ecr.aws/aws-cli/aws-cli``; its entrypoint is
``aws``, see https://docs.aws.amazon.com/cli/latest/userguide/getting-started-docker.html):

* ``--env-file F``: the credentials (``S3Settings.container_env``: ``AWS_*``,
  and with an endpoint the ``when_required`` checksum settings) come from the
  0600 file of ``credentials.push``, never from argv;
* ``--network host``: an endpoint on the instance's loopback (a MinIO on
  127.0.0.1:9000, an SSH tunnel) is reachable, as it would be for a host tool;
* with an endpoint, ``AWS_CONFIG_FILE`` names a small config with
  ``s3.addressing_style = path`` (the AWS CLI has no environment variable for
  it, and virtual-hosted names such as ``bucket.minio.local`` rarely resolve).

:func:`fetch_script` copies every input to ``~/tao-jobs/<id>/inputs/<NAME>``
(``aws s3 sync``), checks a local input's files against its version's manifest
(``sha256sum -c``), and its file count and byte total, before the job may start.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Sequence

from .. import bank, logcap, remote
from ..errors import TaoBrevError
from .staging import DATA_DIR, INPUTS_PREFIX, Input
from .uris import parse_s3_uri

CARRIER_KEY = "images.s3_transfer"
STAGE_FAILED_EXIT = 8          # the submit script's exit status when staging failed (6, 7: remote/launch.py)
CARRIER_CONFIG_DIR = "/tao-aws"  # where the carrier sees its AWS config (read-only mount)
_CARRIER_CONFIG = "[default]\ns3 =\n    addressing_style = path\n"


def carrier_image(env) -> str:
    """The pinned AWS CLI image: ``images.s3_transfer`` of the bank's versions.yaml, else of this bundle's
    (a full TAO skill bank pins TAO images, not this bundle's carrier)."""
    try:
        return bank.resolve_image(CARRIER_KEY, env)["image"]
    except TaoBrevError as exc:
        if exc.code != "UNKNOWN_VERSIONS_KEY":
            raise
        return bank.resolve_image(CARRIER_KEY, {k: v for k, v in env.items() if k != "TAO_SKILL_BANK_PATH"})["image"]


@dataclass(frozen=True)
class Carrier:
    """How to run the AWS CLI image on one instance for one job."""

    image: str
    env_file: str               # instance path of the 0600 credential file
    job_id: str
    path_style: bool = False    # an endpoint is set: write and use the path-style config

    @property
    def config_dir(self) -> str:
        return remote.join(remote.job_dir(self.job_id), "aws")

    def prepare(self) -> str:
        """Shell lines that write the carrier's AWS config (only with an endpoint)."""
        if not self.path_style:
            return ""
        return (f"mkdir -p {remote.rpath(self.config_dir)} || exit 3\n"
                + remote.heredoc_file(remote.join(self.config_dir, "config"), _CARRIER_CONFIG))

    def run(self, host_dir: str, mount: str, aws_args: Sequence[str], read_only: bool = False) -> str:
        """``docker run --rm`` of the carrier with ``host_dir`` at ``mount``, running ``aws ARGS``."""
        words = ["docker", "run", "--rm", "--network", "host", "--env-file", remote.rpath(self.env_file)]
        if self.path_style:
            words += ["-v", f"{remote.rpath(self.config_dir)}:{CARRIER_CONFIG_DIR}:ro",
                      "-e", f"AWS_CONFIG_FILE={CARRIER_CONFIG_DIR}/config"]
        words += ["-v", f"{remote.rpath(host_dir)}:{mount}{':ro' if read_only else ''}", shlex.quote(self.image)]
        return " ".join(words + [shlex.quote(arg) for arg in aws_args])


def remove_on_exit(paths: Sequence[str]) -> str:
    """``trap 'rm -f F...' EXIT``: the credential files go on every path (replaces an earlier trap)."""
    return f"trap {shlex.quote('rm -f ' + ' '.join(remote.rpath(p) for p in paths))} EXIT"


def inputs_dir(job_id: str) -> str:
    """Instance directory holding the staged inputs of a job (``<dir>/<NAME>``)."""
    return remote.join(remote.job_dir(job_id), "inputs")


def input_mounts(job_id: str, inputs: Sequence[Input]) -> list[tuple[str, str, bool]]:
    """Read-only mounts of the staged inputs at ``/data/<NAME>``."""
    return [(remote.join(inputs_dir(job_id), inp.name), inp.container_path, True) for inp in inputs]


def fetch_script(carrier: Carrier, inputs: Sequence[Input], image: str, remove: Sequence[str] = ()) -> str:
    """Shell lines run before the launch: copy every input from S3 onto the instance disk.

    Guarded like the launch: when the job's container already exists
    (``submit`` sent again), nothing is copied. The job image is checked first
    (no copy for a launch that will be refused). Each input is then synced
    (a local input's files checked against its version's manifest with
    ``sha256sum -c``) and its file count and byte total compared with what
    was staged or listed; a failure
    prints ``TAO_STAGE_FAILED <name> ...`` and exits 8. ``remove`` are files
    (the credential files) deleted on every path (``trap ... EXIT``).
    """
    job = carrier.job_id
    lines = [remove_on_exit(remove)] if remove else []
    lines += [f"if ! docker inspect --type container {shlex.quote(job)} >/dev/null 2>&1; then",
              f"docker image inspect {shlex.quote(image)} >/dev/null 2>&1 || {{ echo TAO_IMAGE_MISSING; exit 4; }}",
              f"mkdir -p {remote.rpath(inputs_dir(job))} || exit 3"]
    if carrier.path_style:
        lines.append(carrier.prepare().rstrip("\n"))
    for inp in inputs:
        lines += _fetch_local(carrier, inp) if inp.manifest_key else _fetch_s3(carrier, inp)
        staged = remote.rpath(remote.join(inputs_dir(job), inp.name))
        lines += [
            f"set -- $(find {staged} -type f -printf '%s\\n' | awk '{{n++; b+=$1}} END {{printf \"%d %.0f\", n, b}}')",
            f"if [ \"$1\" != {inp.files} ] || [ \"$2\" != {inp.bytes} ]; then "
            f"echo \"TAO_STAGE_FAILED {inp.name}: $1 of {inp.files} files, $2 of {inp.bytes} bytes on the instance\"; "
            f"exit {STAGE_FAILED_EXIT}; fi",
        ]
    lines.append("fi")
    return "\n".join(lines)


def _stage_failed(name: str, why: str = "") -> str:
    message = f"TAO_STAGE_FAILED {name}" + (f": {why}" if why else "")
    return f"{{ echo {shlex.quote(message)}; exit {STAGE_FAILED_EXIT}; }}"


def _fetch_s3(carrier: Carrier, inp: Input) -> list[str]:
    """An ``s3://`` input: ``aws s3 sync`` of its prefix (the count check follows)."""
    return [carrier.run(inputs_dir(carrier.job_id), "/inputs",
                        ["s3", "sync", "--only-show-errors", "--no-progress", inp.uri, f"/inputs/{inp.name}"])
            + f" || {_stage_failed(inp.name)}"]


def _fetch_local(carrier: Carrier, inp: Input) -> list[str]:
    """A staged local input: ONE ``aws s3 sync`` of ``inputs/<NAME>/`` limited to ``data/*`` and this
    version's manifest, into ``.stage-<NAME>``; the manifest must hash to what the laptop made
    (so it is this version's, unaltered); ``data`` becomes ``<NAME>``; ``sha256sum -c`` checks every
    file against the manifest (a file of another version, e.g. staged meanwhile by another
    submit, fails here instead of reaching the job); the count check that follows catches extra files."""
    job_inputs = inputs_dir(carrier.job_id)
    stage_name = f".stage-{inp.name}"
    base = f"s3://{parse_s3_uri(inp.uri)[0]}/{INPUTS_PREFIX}/{inp.name}/"
    manifest_rel = inp.manifest_key.rsplit("/", 2)[-2] + "/" + inp.manifest_key.rsplit("/", 1)[-1]
    stage = remote.rpath(remote.join(job_inputs, stage_name))
    manifest = remote.rpath(remote.join(job_inputs, stage_name, manifest_rel))
    staged = remote.rpath(remote.join(job_inputs, inp.name))
    check = remote.rpath(remote.join(job_inputs, stage_name, "check.txt"))
    sync = carrier.run(job_inputs, "/inputs", ["s3", "sync", "--only-show-errors", "--no-progress",
                                               "--exclude", "*", "--include", DATA_DIR + "*",
                                               "--include", manifest_rel, base, f"/inputs/{stage_name}"])
    return [
        f"{sync} || {_stage_failed(inp.name)}",
        f"[ \"$(sha256sum < {manifest} 2>/dev/null | cut -c1-64)\" = {inp.manifest_sha256} ] || "
        + _stage_failed(inp.name, f"the manifest {inp.manifest_key} is missing or differs from the one staged"),
        f"rm -rf {staged} && mkdir -p {stage}/data && mv {stage}/data {staged} || {_stage_failed(inp.name)}",
        f"( cd {staged} && sha256sum -c --quiet --strict {manifest} ) > {check} 2>&1 || "
        f"{{ echo \"TAO_STAGE_FAILED {inp.name}: not the staged content: $({logcap.remote_head_bytes(300)} < {check} | tr '\\n' ' ')\"; "
        f"exit {STAGE_FAILED_EXIT}; }}",
    ]


