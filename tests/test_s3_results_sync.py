"""tao_brev/s3/results_sync.py: the instance's results manifest read back, and the excludes as the AWS CLI's patterns."""

from __future__ import annotations

from tao_brev import s3 as staging, s3 as storage


def test_manifest_lines_with_escaped_names_and_unreadable_files():
    text = "\n".join([
        "5 " + "a" * 64 + "  ./train/x y.pth",
        "0 \\" + "b" * 64 + "  ./odd\\nname\\\\x",
        "TAO_UNREADABLE ./locked.bin",
        "stat: noise that is not a manifest line",
    ])
    parsed = staging.parse_manifest(text)
    assert parsed.entries == [{"path": "odd\nname\\x", "size": 0, "sha256": "b" * 64},
                              {"path": "train/x y.pth", "size": 5, "sha256": "a" * 64}]
    assert parsed.unreadable == ["locked.bin"] and parsed.present
    assert not staging.parse_manifest("TAO_NO_RESULTS").present


def test_excludes_become_aws_cli_patterns_that_cover_is_excluded():
    import fnmatch

    patterns = ["*.ckpt", ".git", "runs/tmp/*", "status.json"]
    args = staging.aws_excludes(patterns)
    forms = args[1::2]
    assert args[::2] == ["--exclude"] * len(forms)
    for path in ["a.ckpt", "x/y/b.ckpt", ".git/HEAD", "sub/.git/config", "runs/tmp/t/1", "train/status.json",
                 "status.json", "train/model.pth", "gitx/a", "runs/keep/1"]:
        by_cli = any(fnmatch.fnmatchcase(path, form) for form in forms)   # awscli: fnmatch on the relative path
        assert by_cli == storage.is_excluded(path, patterns), path
