"""The on-instance checks as registered units, and what they share.

A :class:`Snippet` is one section of the combined remote script (its name and
the shell it runs, or None when the run has nothing for it); a
:class:`RemoteCheck` is one named check: the sections it reads, when it
applies, and the function that reads its answer. ``on_instance`` walks the
registry: the script holds every section an applicable check needs (in the
snippets' order), and the checks read the answers in the checks' order.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import urlsplit

from ... import bank, credentials, remote
from ...errors import TaoBrevError
from .report import Check, Context, PreflightRequest, Report

GIB = 1024**3
DEFAULT_IMAGE_BYTES = 20 * GIB       # a TAO pyt image extracted, when its size is unknown
NO_MANIFEST = "no such manifest"     # `docker manifest inspect` on a missing tag: "no such manifest: REF"


@dataclass
class Answers:
    """The sections of the combined script and how long its round trip took."""

    sections: dict[str, remote.Section]
    elapsed_s: float
    instance: str = "NAME"

    def get(self, name: str) -> remote.Section | None:
        return self.sections.get(name)


@dataclass
class ImageFacts:
    """What the combined round trip says about ``--image``."""

    image: str
    present: bool = False
    local_bytes: int | None = None     # ``docker image inspect`` .Size
    size_bytes: int = DEFAULT_IMAGE_BYTES   # what a pull needs on disk (see image.image_facts)
    size_source: str = "default"


@dataclass
class NgcKey:
    """NGC_KEY's trip to the instance: the remote 0600 file, or why it did not arrive."""

    file: credentials.RemoteSecretFile | None = None
    error: TaoBrevError | None = None

    @property
    def set(self) -> bool:
        return self.file is not None or self.error is not None


@dataclass(frozen=True)
class S3Target:
    """What the instance itself needs for S3 transfers (tier B/C inputs, S3 results): a TCP
    connection to the endpoint and the carrier image (``images.s3_transfer``) that runs the AWS CLI."""

    host: str
    port: int
    carrier: str

    @classmethod
    def of(cls, endpoint_url: str | None, region: str | None, carrier: str) -> "S3Target":
        """``endpoint_url`` (AWS_ENDPOINT_URL...) or AWS's regional endpoint (botocore's default
        ``s3.<region>.amazonaws.com``, port 443)."""
        if endpoint_url:
            url = urlsplit(endpoint_url)
            port = url.port or (80 if url.scheme == "http" else 443)
            return cls(url.hostname or "", port, carrier)
        return cls(f"s3.{region or 'us-east-1'}.amazonaws.com", 443, carrier)

    def reach_command(self) -> str:
        """Prints ``reached`` when a TCP connection to host:port opens within 10 s (bash's
        /dev/tcp, as curl may be missing on the host); its error otherwise."""
        connect = shlex.quote(f"exec 3<>/dev/tcp/{self.host}/{self.port}")
        return f"timeout 10 bash -c {connect} && echo reached"


@dataclass
class Plan:
    """One combined round trip: what it looks at, and the checks read so far (by name)."""

    image: str | None
    results_root: str
    key: NgcKey = field(default_factory=NgcKey)
    s3: S3Target | None = None
    ctx: Context | None = None
    req: PreflightRequest | None = None
    facts: ImageFacts | None = None
    done: dict[str, Check | None] = field(default_factory=dict)   # check name -> its outcome

    @property
    def ngc(self) -> bool:
        """The image comes from nvcr.io: the NGC login and entitlement are checked."""
        return self.image is not None and bank.image_registry(self.image) == credentials.NGC_REGISTRY


@dataclass(frozen=True)
class Snippet:
    """One section of the combined script: its name and its shell for a plan (None: left out)."""

    name: str
    command: Callable[[Plan], str | None]


@dataclass(frozen=True)
class RemoteCheck:
    """One registered on-instance check: its name, the sections it reads, whether it applies
    to a plan, and the function that reads its answer (and reports it)."""

    name: str
    needs: tuple[str, ...]
    read: Callable[[Report, Answers, Plan], Check | None]
    applies: Callable[[Plan], bool] = lambda plan: True
