"""tao_brev/s3/clients.py: the client built from the settings only, once per process, never asking instance metadata."""

from __future__ import annotations

import os
from pathlib import Path

from tao_brev import s3 as storage
from tao_brev.s3 import clients
from tests.s3fixtures import SECRETS, raises, s3  # noqa: F401  (fixtures)


def test_client_config_and_env_isolation(monkeypatch):
    s = storage.s3_settings({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b",
                             "AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    c = storage.client(s)
    assert c.meta.endpoint_url == "http://127.0.0.1:9"
    assert c.meta.config.s3["addressing_style"] == "path"
    assert c.meta.config.request_checksum_calculation == "when_required"
    assert c.meta.config.response_checksum_validation == "when_required"
    assert c.meta.config.retries["mode"] == "standard"
    # Without an endpoint in the settings, one in os.environ is not picked up.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://bogus.invalid:1")
    c = storage.client(storage.s3_settings({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"}))
    assert "amazonaws.com" in c.meta.endpoint_url


def test_prefetch_builds_once_and_leaves_every_error_to_the_caller(monkeypatch):
    built = []
    real = clients._new_client
    monkeypatch.setattr(clients, "_new_client", lambda *a: built.append(a) or real(*a))
    # settings no other test uses (the region), so this build is not one of the process's cached clients
    s = storage.s3_settings({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b",
                             "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_DEFAULT_REGION": "ap-south-2"})
    assert clients.prefetch_client(s) is None               # returns at once, no request
    first = storage.client(s)                               # the prefetched one (or waits for it)
    assert storage.client(s) is first and len(built) == 1 and first.meta.region_name == "ap-south-2"
    # A failing build is only raised by the caller's own client() call, mapped and scrubbed.
    bad = storage.s3_settings({"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "secret-in-a-bad-url-8",
                               "AWS_ENDPOINT_URL": "http://[::1"})
    assert clients.prefetch_client(bad) is None
    raises("BAD_ARGUMENT", storage.client, bad, secrets=["secret-in-a-bad-url-8"])
    missing = storage.s3_settings({"AWS_SECRET_ACCESS_KEY": "b"})
    assert clients.prefetch_client(missing) is None
    raises("MISSING_CREDENTIAL", storage.client, missing)


class _SilentService:
    """A TCP port that counts the connections made to it and closes each at once: an instance
    metadata service that never answers (as off EC2, where the SDK waits for its timeout)."""

    def __init__(self):
        import socket
        import threading

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.connections = 0
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()


_STAGE_LIKE_A_SCRIPT = """
import sys
from tao_brev import s3 as storage
settings = storage.s3_settings()
s3 = storage.client(settings)
print(len(storage.list_objects(s3, settings, sys.argv[1], "")))
"""


_PLAIN_BOTOCORE = """
import os, botocore.session
botocore.session.Session().create_client("s3", region_name="us-east-1",
    aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])
"""


def test_a_fresh_process_never_asks_the_instance_metadata_service(s3, s3_server):
    """``defaults_mode = auto`` makes botocore ask instance metadata for the region even when the
    client names one; the control shows plain botocore connecting to the stand-in service with this
    environment, and the bundle's client (credentials and region given) not."""
    import subprocess
    import sys

    settings, bucket = s3
    imds = _SilentService()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(s3_server["env"], AWS_DEFAULTS_MODE="auto", AWS_EC2_METADATA_SERVICE_ENDPOINT=imds.url,
               AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull,
               PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    ours = subprocess.run([sys.executable, "-c", _STAGE_LIKE_A_SCRIPT, bucket], env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert ours.returncode == 0 and ours.stdout == "0\n", ours.stderr
    assert imds.connections == 0
    control = subprocess.run([sys.executable, "-c", _PLAIN_BOTOCORE], env=env, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=120)
    assert control.returncode == 0, control.stderr
    assert imds.connections >= 1
    for text in (ours.stdout, ours.stderr):
        assert not [secret for secret in SECRETS if secret in text]
