"""A kept results archive's member names holding a value are rewritten as digests in every tar
format: a long name lives in a GNU ``././@LongLink`` member, a PAX extended header (``path``,
``linkpath``, read back in priority by tarfile) or a ustar prefix; none of the original text may
survive anywhere in the rewritten archive's bytes."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest

from tao_brev.secrets import archive_names, guard as known_secrets
from tests.conftest import watching

VALUE = "Kq7Wm2Zt9Rx4Lp8Vn3Hd6"
NAME = "ARCHIVE_API_KEY"
ENV = {NAME: VALUE}
FORMATS = {"gnu": tarfile.GNU_FORMAT, "pax": tarfile.PAX_FORMAT, "ustar": tarfile.USTAR_FORMAT}
MEMBERS = {   # (name, link target or None); each holds the value once
    "short name": (f"train/{VALUE}.pth", None),
    "long name": ("train/" + "d" * 120 + f"/{VALUE}.pth", None),
    "long dir": (f"train/{VALUE}/" + "e" * 110 + ".pth", None),
    "long link target": ("train/latest.pth", "train/" + "d" * 120 + f"/{VALUE}.pth"),
}


@pytest.fixture(autouse=True)
def _known(monkeypatch):
    yield from watching(monkeypatch, NAME, VALUE)


# ustar holds a name of at most 155 (prefix) + 100 characters split at a slash, a link target of 100
CASES = [(f, m) for f in sorted(FORMATS) for m in sorted(MEMBERS)
         if f != "ustar" or m in ("short name", "long name")]


@pytest.mark.parametrize("fmt,member", CASES)
def test_no_original_name_text_survives(fmt, member, tmp_path):
    name, link = MEMBERS[member]
    src, out = tmp_path / "r.tar.gz", tmp_path / "o.tar.gz"
    with tarfile.open(src, "w:gz", format=FORMATS[fmt]) as tar:
        info = tarfile.TarInfo(name)
        if link:
            info.type, info.linkname = tarfile.SYMTYPE, link
            tar.addfile(info)
        else:
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    assert VALUE.encode() in gzip.open(src).read()
    assert archive_names.rewrite_without_tainted(src, out, ENV) == 1
    assert VALUE.encode() not in gzip.open(out).read()
    with tarfile.open(out, "r:gz") as tar:
        (kept,) = tar.getmembers()
    assert VALUE not in kept.name + kept.linkname and "sha256" in kept.name + kept.linkname


def test_an_extended_record_holding_a_value_is_dropped(tmp_path):
    src, out = tmp_path / "r.tar.gz", tmp_path / "o.tar.gz"
    with tarfile.open(src, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("train/model.pth")
        info.size, info.pax_headers = 1, {"comment": f"key {VALUE}"}
        tar.addfile(info, io.BytesIO(b"x"))
    assert archive_names.rewrite_without_tainted(src, out, ENV) == 1
    assert VALUE.encode() not in gzip.open(out).read()
