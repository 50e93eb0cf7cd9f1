"""tao_brev/s3/error_map.py: every message scrubbed of the credential values and the endpoint's user:password."""

from __future__ import annotations

from tao_brev import s3 as storage
from tao_brev.s3 import error_map
from tests.s3server import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY


def test_scrub_removes_values_that_a_store_echoes():
    s = storage.s3_settings({"AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID,
                             "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
                             "AWS_ENDPOINT_URL": "https://user:pw@s3.example.com"})
    text = error_map.scrub(f"key {FAKE_ACCESS_KEY_ID} secret {FAKE_SECRET_ACCESS_KEY} at "
                          "https://user:pw@s3.example.com/b", s)
    assert FAKE_ACCESS_KEY_ID not in text and FAKE_SECRET_ACCESS_KEY not in text and "pw@" not in text
    assert "pw@" not in repr(s)
