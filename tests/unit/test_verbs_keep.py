"""keep in process: results that live only on an owned instance are archived there, copied home
and checked (sha256) before its delete; a copy that does not match refuses the delete."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from pathlib import Path

from tao_brev import remote
from tao_brev.verbs import teardown
from tests.unit.fake_brev import sections
from tests.unit.jobs import entry, expect_catalog, launched, state

def tar_gz(files: dict) -> bytes:
    """A gzip tar of ``files`` (name -> bytes), as the instance's ``tar czf`` writes it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


ARCHIVE = tar_gz({"train/model_epoch_000.pth": b"weights " * 100, "status.json": b"{}"})


def teardown_with_archive(job_id: str, archive: bytes = ARCHIVE):
    """The teardown round trip: the container removed, the results dir archived (``save:<job_id>``)."""
    line = f"TAO_ARCHIVE {hashlib.sha256(archive).hexdigest()} {len(archive)}"
    return sections({"state": state("exited", 0), "logs": "", "rm": "", "own": "", "others": "", f"save:{job_id}": line})


def copy_writes(data: bytes):
    """``brev copy NAME:path LOCAL``: scp writes the local file."""
    def answer(call):
        Path(call.args[2]).write_bytes(data)
        return "", "", 0
    return answer


def test_results_only_on_the_instance_are_copied_home_before_the_delete(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, ephemeral=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=teardown_with_archive(job_id))
    copy = fake_brev.expect("copy", f"box:tao-jobs/{job_id}/results.tar.gz", re.compile(r"/.+\.tar\.gz\.part"),
                            answer=copy_writes(ARCHIVE))
    fake_brev.expect_ls(entry())
    fake_brev.expect("delete", "box", stdout="box\n")
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 0 and answer["ok"] is True and answer["deleted"] == ["box"], answer
    saved = Path(answer["results_saved_to"])
    assert saved.read_bytes() == ARCHIVE and saved.stat().st_mode & 0o777 == 0o600
    assert ctx.sidecars.load(job_id).results["saved"]["sha256"] == hashlib.sha256(ARCHIVE).hexdigest()
    assert copy.used == 1


def test_a_copy_that_does_not_match_refuses_the_delete(ctx, fake_brev):
    job_id = launched(ctx, fake_brev, ephemeral=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=teardown_with_archive(job_id))
    fake_brev.expect("copy", f"box:tao-jobs/{job_id}/results.tar.gz", re.compile(r"/.+\.part"),
                     answer=copy_writes(ARCHIVE[:-1]))   # cut short
    fake_brev.expect_ls(entry())
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 1 and answer["ok"] is False and answer["error"]["code"] == "RESULTS_ONLY_ON_INSTANCE", answer
    assert answer["deleted"] == [] and answer["instance_deleted"] is False
    assert "--discard-results" in answer["error"]["fix"]
    assert "saved" not in ctx.sidecars.load(job_id).results


def test_an_archive_that_matches_but_is_no_tar_gz_refuses_the_delete(ctx, fake_brev):
    """Its member names cannot be checked for known values: nothing is kept, the instance stays."""
    broken = b"\x1f\x8b not a gzip stream " * 50
    job_id = launched(ctx, fake_brev, ephemeral=True)
    fake_brev.expect_ls(entry())
    fake_brev.expect_exec("box", remote.remove_container(job_id), answer=teardown_with_archive(job_id, broken))
    fake_brev.expect("copy", f"box:tao-jobs/{job_id}/results.tar.gz", re.compile(r"/.+\.part"),
                     answer=copy_writes(broken))
    fake_brev.expect_ls(entry())
    expect_catalog(fake_brev)
    answer, code = teardown.teardown(ctx, job_id)
    assert code == 1 and answer["error"]["code"] == "RESULTS_ONLY_ON_INSTANCE", answer
    assert "no readable tar.gz" in answer["error"]["message"]
    assert answer["deleted"] == [] and answer["instance_deleted"] is False
    assert "saved" not in ctx.sidecars.load(job_id).results
