"""One place that turns a boto3 / botocore failure into a storage error code, every message scrubbed.

Scrubbed: the credential values of the settings become ``***`` and the endpoint
loses any ``user:password@`` part. botocore is imported on the first failure.
"""

from __future__ import annotations

from typing import Optional

from ..errors import TaoBrevError
from .settings import S3Settings, safe_endpoint

# botocore / store error codes, grouped by what the user has to fix.
_AUTH_CODES = {"InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
               "InvalidClientTokenId", "TokenRefreshRequired", "AuthorizationHeaderMalformed",
               "InvalidSecurity", "UnrecognizedClientException"}
_DENIED_CODES = {"AccessDenied", "Forbidden", "403", "AllAccessDisabled", "AccountProblem"}
NOT_FOUND_CODES = {"404", "NoSuchKey", "NotFound"}


def scrub(text: str, settings: Optional[S3Settings]) -> str:
    text = str(text)
    if settings is not None:
        for secret in sorted(settings.secrets(), key=len, reverse=True):
            text = text.replace(secret, "***")
        if settings.endpoint_url:
            text = text.replace(settings.endpoint_url, safe_endpoint(settings.endpoint_url) or "")
    return text


def error(code: str, message: str, settings: Optional[S3Settings], fix: Optional[str] = None,
          **details) -> TaoBrevError:
    return TaoBrevError(code, scrub(message, settings),
                        scrub(fix, settings) if fix else None, **details)


def _where(settings: S3Settings) -> str:
    return safe_endpoint(settings.endpoint_url) or "AWS S3"


def map_exception(exc: BaseException, settings: S3Settings, doing: str) -> TaoBrevError:
    """One place that turns a boto3 / botocore failure into a storage code."""
    import botocore.exceptions as bce

    if isinstance(exc, TaoBrevError):
        return exc
    if isinstance(exc, (bce.NoCredentialsError, bce.PartialCredentialsError)):
        return error("MISSING_CREDENTIAL",
                     f"{doing}: S3 credentials are missing ({', '.join(settings.missing()) or 'incomplete'}).",
                     settings)
    if isinstance(exc, (bce.ConnectionError, bce.HTTPClientError)):
        return error("S3_UNREACHABLE",
                     f"{doing}: the S3 endpoint {_where(settings)} could not be reached: {type(exc).__name__}: {exc}",
                     settings)
    if isinstance(exc, bce.ClientError):
        err = exc.response.get("Error", {}) or {}
        code = str(err.get("Code") or "")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        text = f"{doing}: {code or status}: {err.get('Message') or ''}".rstrip(": ")
        if code == "NoSuchBucket":
            return error("S3_NO_SUCH_BUCKET", f"{text} (endpoint {_where(settings)})", settings)
        if code in _AUTH_CODES:
            return error("S3_AUTH_FAILED", f"{text} (endpoint {_where(settings)})", settings)
        if code in _DENIED_CODES or status == 403:
            hint = "" if code and code != "403" else "; a HEAD answers a bare 403 for a wrong key too"
            return error("S3_ACCESS_DENIED", f"{text} (endpoint {_where(settings)}{hint})", settings)
        return error("S3_REQUEST_FAILED", text, settings)
    if isinstance(exc, bce.BotoCoreError):
        return error("S3_REQUEST_FAILED", f"{doing}: {type(exc).__name__}: {exc}", settings)
    if isinstance(exc, OSError):
        return error("BAD_ARGUMENT", f"{doing}: {exc}", settings,
                     "Check that the local path exists and is readable.")
    return error("S3_REQUEST_FAILED", f"{doing}: {type(exc).__name__}: {exc}", settings)

