"""S3 settings from the environment: AWS names first, the legacy TAO names mapped onto them.

Invariant: a credential value leaves only through :meth:`S3Settings.container_env`
(which the caller carries without argv); ``repr(S3Settings)`` shows no value.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping, Optional

# Environment names: the first set, non-empty one wins. AWS names first, then
# the legacy TAO names. AWS_ENDPOINT_URL_S3 is the service-specific AWS name
# and, as in the SDKs, beats the global AWS_ENDPOINT_URL.
ENV_NAMES: dict[str, tuple[str, ...]] = {
    "access_key_id": ("AWS_ACCESS_KEY_ID", "ACCESS_KEY"),
    "secret_access_key": ("AWS_SECRET_ACCESS_KEY", "SECRET_KEY"),
    "session_token": ("AWS_SESSION_TOKEN",),
    "endpoint_url": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "S3_ENDPOINT_URL"),
    "region": ("AWS_DEFAULT_REGION", "AWS_REGION", "CLOUD_REGION"),
    "bucket": ("S3_BUCKET_NAME",),
}
DEFAULT_REGION = "us-east-1"  # S3 signs with a region; most compatible stores accept this one.


@dataclass(frozen=True)
class S3Settings:
    """S3 settings read from the environment. ``repr`` never shows a credential."""

    access_key_id: Optional[str] = field(default=None, repr=False)
    secret_access_key: Optional[str] = field(default=None, repr=False)
    session_token: Optional[str] = field(default=None, repr=False)
    endpoint_url: Optional[str] = None
    region: Optional[str] = None
    bucket: Optional[str] = None
    # field -> the environment name it came from (names only, never values)
    sources: dict = field(default_factory=dict, compare=False)

    def __repr__(self) -> str:
        def state(value):
            return "<set>" if value else None
        return (f"S3Settings(access_key_id={state(self.access_key_id)}, "
                f"secret_access_key={state(self.secret_access_key)}, "
                f"session_token={state(self.session_token)}, "
                f"endpoint_url={safe_endpoint(self.endpoint_url)!r}, region={self.region!r}, "
                f"bucket={self.bucket!r}, sources={self.sources!r})")

    __str__ = __repr__

    def missing(self, need_bucket: bool = False) -> list[str]:
        """Names of the required variables that are absent (AWS names)."""
        absent = []
        if not self.access_key_id:
            absent.append("AWS_ACCESS_KEY_ID")
        if not self.secret_access_key:
            absent.append("AWS_SECRET_ACCESS_KEY")
        if need_bucket and not self.bucket:
            absent.append("S3_BUCKET_NAME")
        return absent

    def secrets(self) -> list[str]:
        """The credential values, for scrubbing messages (never print these)."""
        return [v for v in (self.access_key_id, self.secret_access_key, self.session_token) if v]

    def container_env(self, legacy: bool = False) -> dict[str, str]:
        """The variables a container or carrier needs, with their values.

        AWS names; with an endpoint also the checksum settings botocore >= 1.36
        and awscli v2 honour, so the container's own SDK stays compatible with
        the store. ``legacy=True`` adds the old TAO names for old containers.
        The caller must carry these without argv (see credentials.py).
        """
        out: dict[str, str] = {}
        pairs = [("AWS_ACCESS_KEY_ID", self.access_key_id),
                 ("AWS_SECRET_ACCESS_KEY", self.secret_access_key),
                 ("AWS_SESSION_TOKEN", self.session_token),
                 ("AWS_ENDPOINT_URL", self.endpoint_url),
                 ("AWS_DEFAULT_REGION", self.region),
                 ("S3_BUCKET_NAME", self.bucket)]
        for name, value in pairs:
            if value:
                out[name] = value
        if self.endpoint_url:
            out["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
            out["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"
        if legacy:
            for legacy_name, name in (("ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
                                      ("SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
                                      ("S3_ENDPOINT_URL", "AWS_ENDPOINT_URL"),
                                      ("CLOUD_REGION", "AWS_DEFAULT_REGION")):
                if name in out:
                    out[legacy_name] = out[name]
        return out


def s3_settings(env: Optional[Mapping[str, str]] = None, bucket: Optional[str] = None) -> S3Settings:
    """Read S3 settings from ``env`` (default ``os.environ``); ``bucket`` (--bucket) wins."""
    env = os.environ if env is None else env
    values: dict[str, Optional[str]] = {}
    sources: dict[str, str] = {}
    for attr, names in ENV_NAMES.items():
        values[attr] = None
        for name in names:
            value = (env.get(name) or "").strip()
            if value:
                values[attr], sources[attr] = value, name
                break
    if bucket:
        values["bucket"], sources["bucket"] = bucket.strip(), "--bucket"
    return S3Settings(sources=sources, **values)


def safe_endpoint(url: Optional[str]) -> Optional[str]:
    """The endpoint without any user:password@ part."""
    if not url:
        return url
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", url)

