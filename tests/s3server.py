"""A real S3-compatible HTTP server for tests: moto's server in a subprocess.

Why a subprocess (moto's server app, as ``python -m moto.server`` runs it) and not moto's in-process mocks
or ``ThreadedMotoServer``: the code under test talks HTTP to a separate
process exactly as it would to MinIO or AWS, awscli can be pointed at the
same endpoint, and nothing in the test process is patched by moto.

Use from ``tests/conftest.py``::

    from tests.s3server import s3_server  # noqa: F401  (session fixture)

The fixture yields a dict::

    {"endpoint_url": "http://127.0.0.1:PORT",
     "env": {AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION, AWS_ENDPOINT_URL},
     "create_bucket": callable(name=None) -> name,
     "server": MotoS3Server}

moto accepts any credentials unless IAM authentication is switched on;
:meth:`MotoS3Server.iam_user` plus :meth:`MotoS3Server.set_iam_auth` make a
wrong key or secret fail for real (moto's ``/moto-api/reset-auth``, the
server-mode twin of ``set_initial_no_auth_action_count``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from typing import Optional

import pytest

# Fake, but distinctive, so tests can assert they never appear in output.
FAKE_ACCESS_KEY_ID = "AKIAFAKEMOTO0TESTKEY"
FAKE_SECRET_ACCESS_KEY = "fake-secret-Zq7vT3mN9pL2xR8wK4bY6cH1dF5gJ0s"
REGION = "us-east-1"


def _free_port() -> int:
    """A port free a moment ago (for an endpoint nothing listens on; the server binds its own)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_PORT_LINE = re.compile(r"^tao-test-moto-port (\d+)$", re.MULTILINE)


def _serve() -> None:
    """The server process: moto's app (as ``python -m moto.server`` builds it) on 127.0.0.1 and a
    port the kernel picks at bind time, printed as ``tao-test-moto-port N`` before it serves."""
    import signal

    from moto.moto_server import werkzeug_app
    from werkzeug.serving import make_server

    app = werkzeug_app.DomainDispatcherApplication(werkzeug_app.create_backend_app)
    app.debug = True
    # moto >= 5.2 serves with its own handler (S3 metadata names keep their underscores); the moto that
    # Python 3.9 gets (5.1) has none and serves with werkzeug's, as its moto.server does
    handler = getattr(werkzeug_app, "MotoRequestHandler", None)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=handler)
    os.environ["MOTO_PORT"] = str(server.server_port)   # as moto.server sets it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"tao-test-moto-port {server.server_port}", flush=True)
    server.serve_forever()


class MotoS3Server:
    """moto's S3 server in its own process on 127.0.0.1 and a port of its own (:func:`_serve`)."""

    def __init__(self, startup_timeout: float = 120.0):   # a hang guard only: moto starts slowly under load
        self.startup_timeout = startup_timeout
        self.process: Optional[subprocess.Popen] = None
        self.port: Optional[int] = None
        self._log = None

    # -- life cycle --------------------------------------------------------
    def start(self) -> "MotoS3Server":
        """Start the server; its port is the one the server itself bound (port 0, so no other
        server - another pytest-xdist worker's, another checkout's - can hold it), read from its log."""
        self._log = tempfile.TemporaryFile()
        env = dict(os.environ)
        env.pop("INITIAL_NO_AUTH_ACTION_COUNT", None)
        self.process = subprocess.Popen([sys.executable, os.path.abspath(__file__)], stdin=subprocess.DEVNULL,
                                        stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            found = _PORT_LINE.search(self._read_log())
            if found:
                self.port = int(found.group(1))
                try:
                    self._api("GET", "/moto-api/data.json", timeout=5)
                    return self
                except OSError:
                    pass
            time.sleep(0.05)
        last_error = self._read_log()
        self.stop()
        raise RuntimeError(f"moto server did not start: {last_error[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "MotoS3Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _read_log(self) -> str:
        if self._log is None:
            return ""
        fd = self._log.fileno()   # pread: the offset the server writes at (shared with it) stays put
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    # -- addresses and clients ---------------------------------------------
    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID,
                "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
                "AWS_DEFAULT_REGION": REGION,
                "AWS_ENDPOINT_URL": self.endpoint_url}

    def boto_client(self, service: str = "s3", access_key_id: str = FAKE_ACCESS_KEY_ID,
                    secret_access_key: str = FAKE_SECRET_ACCESS_KEY):
        """A plain boto3 client for arranging test state (not the code under test)."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            service, endpoint_url=self.endpoint_url, region_name=REGION,
            aws_access_key_id=access_key_id, aws_secret_access_key=secret_access_key,
            config=Config(s3={"addressing_style": "path"},
                          request_checksum_calculation="when_required",
                          response_checksum_validation="when_required"))

    def create_bucket(self, name: Optional[str] = None) -> str:
        name = name or f"tao-test-{uuid.uuid4().hex[:12]}"
        self.boto_client().create_bucket(Bucket=name)
        return name

    # -- moto's own API ----------------------------------------------------
    def _api(self, method: str, path: str, data: Optional[bytes] = None, timeout: float = 10) -> bytes:
        # A raw body: with urllib's default form content type Flask would eat it.
        request = urllib.request.Request(self.endpoint_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/octet-stream"})
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.read()

    def reset(self) -> None:
        """Forget every bucket, object and IAM user."""
        self._api("POST", "/moto-api/reset", data=b"")

    def set_iam_auth(self, enabled: bool) -> None:
        """Check every request's signature and IAM policy (True), or accept anything (False)."""
        self._api("POST", "/moto-api/reset-auth", data=b"0" if enabled else b"inf")

    def iam_user(self, name: Optional[str] = None, allow_s3: bool = True) -> tuple[str, str]:
        """Create an IAM user (optionally allowed s3:*) and return its (key id, secret).

        Call while IAM auth is off; the key works once it is on.
        """
        name = name or f"tao-test-{uuid.uuid4().hex[:8]}"
        iam = self.boto_client("iam")
        iam.create_user(UserName=name)
        if allow_s3:
            iam.put_user_policy(UserName=name, PolicyName="s3-all", PolicyDocument=json.dumps({
                "Version": "2012-10-17",
                "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]


@pytest.fixture(scope="session")
def s3_server():
    """One moto S3 server for the whole session; make a fresh bucket per test."""
    with MotoS3Server() as server:
        yield {"endpoint_url": server.endpoint_url, "env": server.env,
               "create_bucket": server.create_bucket, "server": server}


if __name__ == "__main__":
    _serve()
