"""The S3 storage service: laptop-side S3 and the instance-side transfers of storage tiers B and C.

Invariant: a credential value never leaves this package except through
:meth:`S3Settings.container_env` (which the caller carries safely, never on
argv); every message it builds passes :func:`error_map.scrub` first, and
``repr(S3Settings)`` shows no value.

One job per module:

* ``settings``: ``S3Settings`` from the environment (AWS names, then the legacy TAO names);
* ``error_map``: boto3 / botocore failures -> storage error codes, messages scrubbed;
* ``clients``: the botocore client, one per process and settings, built in the background on request;
* ``uris``: ``s3://`` URIs, a prefix in the settings' bucket, the bank's results routing;
* ``manifest``: the MANIFEST of local files (``{"path", "size", "sha256"}``), its checks and stored forms;
* ``hash_cache``: the local sha256 cache keyed by stat, so a re-stage hashes only what changed;
* ``objects``: single requests (LIST, small GET / PUT, HEAD, DeleteObjects, a streamed sha256);
* ``meter``: progress lines on stderr;
* ``transfer``: uploads with boto3's managed transfers, the sha256 in object metadata;
* ``verify``: every manifest entry checked from here (size, sha256);
* ``probing``: write, read back and delete one tiny object, or a named error;
* ``index`` / ``staging``: tier B/C inputs staged under a stable prefix, sending only what changed;
* ``carrier``: the AWS CLI container on the instance and the shell that copies inputs in;
* ``results_sync``: the instance shell that makes the results' MANIFEST and uploads them, and its parser.

The package hands on the public names of each module below, so a caller imports
``tao_brev.s3`` alone. botocore is imported when the first client is built,
boto3 (with s3transfer) only when there is something to upload.
"""

from .carrier import (CARRIER_CONFIG_DIR, CARRIER_KEY, STAGE_FAILED_EXIT, Carrier, carrier_image, fetch_script,
                      input_mounts, inputs_dir, remove_on_exit)
from .clients import client
from .index import INDEX_COPIES_DIR, INDEX_FORMAT, INDEX_KEY, index_copies_dir
from .manifest import (CHUNK, check_manifest, file_checksum, is_excluded, local_manifest, manifest_digest,
                       manifest_with_files, sha256sum_text)
from .objects import METADATA_KEY, delete_keys, get_bytes, get_object, list_objects, list_sizes, put_bytes
from .probing import probe
from .results_sync import InstanceManifest, aws_excludes, parse_manifest, results_script
from .settings import DEFAULT_REGION, ENV_NAMES, S3Settings, s3_settings
from .staging import (DATA_DIR, INPUTS_PREFIX, MANIFESTS_DIR, MAX_CONCURRENCY, Input, locations, parse_inputs,
                      prefetch_client, prepare_inputs, sync_input)
from .transfer import transfer_files, upload_tree
from .uris import parse_s3_uri, results_destination, s3_uri
from .verify import require_verified, verify_against_manifest

__all__ = [
    "CARRIER_CONFIG_DIR", "CARRIER_KEY", "CHUNK", "DATA_DIR", "DEFAULT_REGION", "ENV_NAMES", "INDEX_COPIES_DIR",
    "INDEX_FORMAT", "INDEX_KEY", "INPUTS_PREFIX", "MANIFESTS_DIR", "MAX_CONCURRENCY", "METADATA_KEY",
    "STAGE_FAILED_EXIT", "Carrier", "Input", "InstanceManifest", "S3Settings", "aws_excludes", "carrier_image",
    "check_manifest", "client", "delete_keys", "fetch_script", "file_checksum", "get_bytes", "get_object",
    "index_copies_dir", "input_mounts", "inputs_dir", "is_excluded", "list_objects", "list_sizes", "local_manifest",
    "locations", "manifest_digest", "manifest_with_files", "parse_inputs", "parse_manifest", "parse_s3_uri", "s3_uri",
    "prefetch_client", "prepare_inputs", "probe", "put_bytes", "remove_on_exit", "require_verified",
    "results_destination", "results_script", "s3_settings", "sha256sum_text", "sync_input", "transfer_files",
    "upload_tree", "verify_against_manifest",
]
