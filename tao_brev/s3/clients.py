"""The botocore S3 client, built from the settings only and kept per process.

Path-style addressing and "when_required" checksums when an endpoint is set, so
third-party S3-compatible stores accept it; :func:`prefetch_client` builds one in
the background. botocore is imported when the first client is built.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, TypedDict

from .error_map import error
from .settings import DEFAULT_REGION, S3Settings, safe_endpoint


class ClientOptions(TypedDict, total=False):
    """The ``botocore.config.Config`` options a client is built with."""
    region_name: str
    signature_version: str
    retries: dict[str, Any]
    connect_timeout: float
    read_timeout: float
    max_pool_connections: int
    request_checksum_calculation: str
    response_checksum_validation: str
    s3: dict[str, str]
    ignore_configured_endpoint_urls: bool
    defaults_mode: str


def client(settings: S3Settings, max_attempts: int = 5, connect_timeout: float = 10,
           read_timeout: float = 60, max_pool_connections: int = 32):
    """A botocore S3 client built from ``settings`` only.

    The settings are the single source: credentials are passed explicitly
    (no provider chain runs, so nothing waits on instance metadata) and,
    without an endpoint, configured endpoint variables are ignored, so the
    client never mixes the caller's ``env`` with ``os.environ``.

    Clients are kept per process (the last 8 distinct settings and options;
    botocore clients are thread-safe): a submit staging several inputs, or a
    benchmark staging again, builds one. Building one costs importing
    botocore and reading its S3 models (:func:`_new_client`);
    :func:`prefetch_client` starts that in the background.
    """
    absent = settings.missing()
    if absent:
        raise error("MISSING_CREDENTIAL",
                    f"S3 credentials are not set: {', '.join(absent)} "
                    "(legacy names ACCESS_KEY / SECRET_KEY are accepted too).", settings)
    key = (settings.access_key_id, settings.secret_access_key, settings.session_token, settings.endpoint_url,
           settings.region, max_attempts, connect_timeout, read_timeout, max_pool_connections)
    with _CLIENTS_LOCK:   # one build per key, also when a prefetch is under way
        return _cached_client(*key)


_client = client   # for prefetch_client: a wrapper a caller (a test) puts on clients.client sees its own calls only
_CLIENTS_LOCK = threading.Lock()


def prefetch_client(settings: S3Settings, **options) -> None:
    """Start building ``client(settings, **options)`` in a daemon thread and return at once.

    For a caller that has other work first (hashing the inputs, asking brev
    about the instance): the later ``client`` call gets the finished client,
    or waits for the build. Makes no request. A build that fails (missing
    credentials, a bad endpoint) is left for that later call to raise again;
    the thread never delays the process's exit.
    """
    if settings.missing():
        return

    def build():
        try:
            _client(settings, **options)
        except Exception:   # raised again, mapped, by the caller's own client() call
            pass
    threading.Thread(target=build, name="s3-client", daemon=True).start()


@functools.lru_cache(maxsize=8)
def _cached_client(access_key_id, secret_access_key, session_token, endpoint_url, region, max_attempts,
                   connect_timeout, read_timeout, max_pool_connections):
    settings = S3Settings(access_key_id=access_key_id, secret_access_key=secret_access_key,
                          session_token=session_token, endpoint_url=endpoint_url, region=region)
    options: ClientOptions = {
        "region_name": settings.region or DEFAULT_REGION,
        "signature_version": "s3v4",
        "retries": {"mode": "standard", "max_attempts": max_attempts},
        "connect_timeout": connect_timeout,
        "read_timeout": read_timeout,
        "max_pool_connections": max_pool_connections,
        # boto3 >= 1.36 adds CRC checksums to every upload and validates them
        # on download; several S3-compatible stores reject or mangle those.
        "request_checksum_calculation": "when_required",
        "response_checksum_validation": "when_required",
    }
    if settings.endpoint_url:
        options["s3"] = {"addressing_style": "path"}
    else:
        options["ignore_configured_endpoint_urls"] = True
    try:
        return _new_client(settings, options)
    except ValueError as exc:  # botocore: "Invalid endpoint: ..."
        raise error("BAD_ARGUMENT",
                    f"AWS_ENDPOINT_URL is not a valid URL ({safe_endpoint(settings.endpoint_url)!r}): {exc}",
                    settings, "Set AWS_ENDPOINT_URL to a full URL such as https://s3.example.com:9000.")


def _new_client(settings: S3Settings, options: ClientOptions):
    """``botocore.session.Session().create_client("s3", ...)`` with the credentials set.

    ``defaults_mode = auto`` would ask instance metadata for the region (botocore
    ``configprovider.SmartDefaultsConfigStoreFactory.resolve_auto_mode``) and wait for its timeout
    off EC2; the modes differ only in the connect timeout, set here, so "auto" is used as "standard".
    boto3 is not imported: its import loads s3transfer too, needed only to upload.
    """
    import botocore.session
    from botocore.config import Config

    session = botocore.session.Session()
    session.set_credentials(settings.access_key_id, settings.secret_access_key, settings.session_token)
    if str(session.get_config_variable("defaults_mode") or "").lower() == "auto":
        options = {**options, "defaults_mode": "standard"}
    # Options older botocore lacks (checksums: 1.36; endpoint env: 1.31) are
    # dropped: those versions never send the default checksums anyway.
    known = {k: v for k, v in options.items() if k in Config.OPTION_DEFAULTS}
    return session.create_client("s3", region_name=settings.region or DEFAULT_REGION,
                                 endpoint_url=settings.endpoint_url or None, config=Config(**known))
