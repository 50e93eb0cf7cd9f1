"""The proof kept (tao_brev/secrets/proof.py): keyed digests of --env values, verdicts, the key file;
size caps (tao_brev/limits.py); file names (tao_brev/secrets/file_names.py)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat

import pytest

from tao_brev import limits, statedir
from tao_brev.secrets import file_names as names_guard, guard as known_secrets, proof as env_proof
from tao_brev.errors import TaoBrevError


@pytest.fixture(autouse=True)
def _clean():
    known_secrets.reset()
    statedir.forget()
    yield
    known_secrets.reset()
    statedir.forget()


def test_the_digest_is_hmac_sha256_of_name_nul_value():
    key = b"k" * 32
    assert env_proof.digest(key, "A", "v") == hmac.new(key, b"A\0v", hashlib.sha256).hexdigest()
    assert env_proof.digest(key, "A", "\udcff") == hmac.new(key, b"A\0\xff", hashlib.sha256).hexdigest()


def test_the_key_is_made_once_private_and_read_back(tmp_path):
    key = env_proof.ensure_key(tmp_path)
    path = env_proof.key_path(tmp_path)
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert env_proof.ensure_key(tmp_path) == key == env_proof.load_key(tmp_path)
    assert json.loads(path.read_text())["alg"] == "hmac-sha256"


@pytest.mark.parametrize("content", ["not json", '{"key": 5}', '{"key": "abcd"}', '{"key": "zz"}', "[1]"])
def test_a_damaged_key_proves_nothing_and_is_never_replaced_silently(tmp_path, content):
    path = env_proof.key_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert env_proof.load_key(tmp_path) is None
    with pytest.raises(TaoBrevError) as err:
        env_proof.ensure_key(tmp_path)
    assert err.value.code == "UNSAFE_STATE_PATH" and str(path) in err.value.message


def test_a_key_that_is_a_link_is_refused(tmp_path):
    real = tmp_path / "elsewhere.key"
    env_proof.ensure_key(tmp_path / "other")
    real.write_text(env_proof.key_path(tmp_path / "other").read_text())
    path = env_proof.key_path(tmp_path / "s")
    path.parent.mkdir(parents=True)
    path.symlink_to(real)
    assert env_proof.load_key(tmp_path / "s") is None


def test_proof_holds_a_digest_of_each_set_name_only(tmp_path):
    proof = env_proof.proof(tmp_path, {"A": "value-a-123", "B": ""}, ["A", "B", "C"])
    key = env_proof.load_key(tmp_path)
    assert proof == {"alg": "hmac-sha256", "names": env_proof.names_mac(key, ["A", "B", "C"]),
                     "digests": {"A": env_proof.digest(key, "A", "value-a-123")}}
    assert env_proof.names_mac(key, ["A", "B", "C"]) != env_proof.names_mac(key, ["A", "B"]) != \
        env_proof.names_mac(key, ["A", "B", ""]) != env_proof.names_mac(key, ["AB"])
    assert "value-a-123" not in json.dumps(proof)


def _verdicts(tmp_path, sidecar, held):
    return env_proof.verdicts(tmp_path, sidecar, held.get)


def test_verdicts_prove_only_the_same_value(tmp_path):
    proof = env_proof.proof(tmp_path, {"A": "value-a-123", "B": "value-b-456"}, ["A", "B", ""])
    side = {"env_names": ["A", "B", ""], "env_proof": proof}
    assert _verdicts(tmp_path, side, {"A": "value-a-123", "B": "value-b-456"}) == (["A", "B"], {})
    proven, unproven = _verdicts(tmp_path, side, {"A": "rotated-a-999", "B": "x"})
    assert proven == [] and unproven == {"A": "this shell holds another value than the job was given",
                                         "B": "this shell holds another value than the job was given"}
    assert _verdicts(tmp_path, side, {"A": "value-a-123"}) == (["A"], {"B": "unset in this shell"})
    assert _verdicts(tmp_path, side, {"A": " " * 8, "B": "value-b-456"})[1] == {
        "A": "this shell holds another value than the job was given"}


def test_verdicts_fail_closed_without_names_digests_or_key(tmp_path):
    proof = env_proof.proof(tmp_path, {"A": "value-a-123"}, ["A"])
    held = {"A": "value-a-123"}
    for side in ({}, {"env_names": "A"}, {"env_names": [3]}, None):
        assert _verdicts(tmp_path, side, held) == ([], {"*": "the job's sidecar does not say which --env names it "
                                                             "was given"})
    assert _verdicts(tmp_path, {"env_names": []}, held) == ([], {"*": "no proof of the job's --env names was kept"})
    assert _verdicts(tmp_path, {"env_names": [], "env_proof": env_proof.proof(tmp_path, {}, [])}, held) == ([], {})
    for bad in (None, {"alg": "md5", "digests": {}}, {"alg": "hmac-sha256"}, "x"):
        assert _verdicts(tmp_path, {"env_names": ["A"], "env_proof": bad}, held) == (
            [], {"A": "no digest of the value the job was given was kept"})
    damaged = {"*": "the job's sidecar lists other --env names than its proof was made for (damaged)"}
    for listed in ([], [""], ["A", "B"], ["B"], ["A", "A"]):   # emptied, blanked, grown, swapped, doubled
        assert _verdicts(tmp_path, {"env_names": listed, "env_proof": proof}, held) == ([], damaged)
    unmacked = {k: v for k, v in proof.items() if k != "names"}   # a proof from before the names MAC
    assert _verdicts(tmp_path, {"env_names": ["A"], "env_proof": unmacked}, held) == ([], damaged)
    blank = env_proof.proof(tmp_path, {"A": "value-a-123"}, ["A", "B"])   # B unset at submit: no digest
    assert _verdicts(tmp_path, {"env_names": ["A", "B"], "env_proof": blank}, held)[1] == {
        "B": "no digest of the value the job was given was kept"}
    os.unlink(env_proof.key_path(tmp_path))
    assert _verdicts(tmp_path, {"env_names": ["A"], "env_proof": proof}, held) == (
        [], {"A": "the state dir's key (env-proof.key) is missing or damaged"})
    assert _verdicts(tmp_path, {"env_names": [], "env_proof": proof}, held) == (
        [], {"*": "the state dir's key (env-proof.key) is missing or damaged"})


def test_a_sidecar_load_watches_proven_names_and_unproves_the_rest(tmp_path, monkeypatch):
    from tao_brev.sidecar import SidecarStore

    root = tmp_path / "state"
    store = SidecarStore(root)
    store.update("a-b-123456", env_names=["A_CFG", "B_CFG"],
                 env_proof=env_proof.proof(root, {"A_CFG": "value-a-123", "B_CFG": "value-b-456"}, ["A_CFG", "B_CFG"]))
    monkeypatch.setenv("A_CFG", "value-a-123")
    monkeypatch.setenv("B_CFG", "rotated-b-789")
    store.load("a-b-123456")
    assert "value-a-123" in known_secrets.values() and known_secrets.unset_watched() == ["B_CFG"]
    known_secrets.reset()
    store.path("a-b-123456").write_text("{damaged")
    with pytest.raises(TaoBrevError):
        store.load("a-b-123456")
    assert known_secrets.unset_watched() == ["*"]
    known_secrets.reset()
    assert store.all() == [] and known_secrets.unproven() == {"*": "the sidecar a-b-123456.json is damaged"}
    known_secrets.reset()
    os.unlink(store.path("a-b-123456"))
    store.load("a-b-123456")   # lost: the names are not known
    assert known_secrets.unset_watched() == ["*"]


def test_the_withheld_answer_covers_kpis_status_and_names_the_way_out(monkeypatch):
    from tao_brev import cli

    known_secrets.unprove("*", "the job's sidecar x.json is damaged")
    known_secrets.unprove("A_CFG", "unset in this shell")
    answer = cli.withhold_job_output({"logs": "x", "final_kpi": {"k": 1}, "metrics": [{"a": 1}],
                                      "progress": {"kpi": {"acc_v": 1}, "status": "sneaky-value", "message": "m"},
                                      "other": {"status": "kept"}})
    assert answer["final_kpi"] == {} and answer["metrics"] == [] and answer["progress"]["kpi"] == {}
    metrics = {"available": True, "file": "f", "epochs": [{"epoch": 1, "kpi": {"k": 1}}], "best": {"k": {}}, "x": 1}
    assert cli.withhold_job_output({"metrics": metrics})["metrics"] == {"available": True, "file": "f",
                                                                        "epochs": [], "best": {}}
    assert answer["progress"]["status"].startswith("[tao-brev: withheld")
    assert cli.withhold_job_output({"kpi": "text"})["kpi"].startswith("[tao-brev: withheld")
    assert answer["other"] == {"status": "kept"}
    assert answer["withheld"]["names"] == ["*", "A_CFG"]
    assert answer["withheld"]["fields"] == ["final_kpi", "kpi", "logs", "message", "metrics", "status"]
    fix = answer["withheld"]["fix"]
    assert fix.startswith("export A_CFG (the same values") and "x.json is damaged: restore it" in fix
    kept = cli.withhold_job_output({"progress": {"status": "RUNNING", "kpi": {}}})
    assert kept["progress"] == {"status": "RUNNING", "kpi": {}}
    known_secrets.reset()
    known_secrets.unprove("*", "lost")
    assert cli.withheld_fix(["*"]).startswith("lost: restore it")


def test_env_values_and_the_launch_script_are_capped():
    limits.refuse_long_env(["A", "B", 3], {"A": "x" * limits.MAX_ENV_VALUE_BYTES, "B": None})
    with pytest.raises(TaoBrevError) as err:
        limits.refuse_long_env(["A"], {"A": "x" * (limits.MAX_ENV_VALUE_BYTES + 1)})
    assert err.value.code == "VALUE_TOO_LONG" and "--env A" in err.value.message and "xxxx" not in err.value.message
    with pytest.raises(TaoBrevError):
        limits.refuse_long_env(["A"], {"A": "\u00e9" * (limits.MAX_ENV_VALUE_BYTES // 2 + 1)})   # bytes, not chars
    limits.refuse_long_script("x" * limits.MAX_SCRIPT_BYTES, 3)
    with pytest.raises(TaoBrevError) as err:
        limits.refuse_long_script("x" * (limits.MAX_SCRIPT_BYTES + 1), 30000)
    assert "30000 overrides" in err.value.message and str(limits.MAX_ARG_STRLEN) in err.value.message


ENV = {"WANDB_API_KEY": "Rt5/Uv+Wx8Yz1Ab3"}


def test_file_names_holding_a_value_are_refused_or_kept_as_digests():
    names = ["a.jpg", "dir/Rt5%2FUv%2BWx8Yz1Ab3.png", "b.jpg"]
    with pytest.raises(TaoBrevError) as err:
        names_guard.refuse_names(names, "input data", ENV)
    assert err.value.code == "SECRET_IN_IDENTIFIER" and "file 2 of 3" in err.value.message
    assert "Rt5" not in err.value.message and err.value.details["variable"] == "WANDB_API_KEY"
    names_guard.refuse_names(["a.jpg", "b.jpg"], "input data", ENV)
    names_guard.refuse_names([], "input data", ENV)
    stored = names_guard.stored_names(names, ENV)
    digest = "sha256:" + hashlib.sha256(names[1].encode()).hexdigest()
    assert stored == ["a.jpg", digest, "b.jpg"] and names_guard.stored_name("a.jpg", ENV) == "a.jpg"
    assert names_guard.without_tainted({n: 1 for n in names}, ENV) == {"a.jpg": 1, "b.jpg": 1}
    assert names_guard.tainted(names, ENV) == [names[1]]
    listed = {"results/x/" + n: 1 for n in names}
    assert names_guard.resolve_keys(stored, listed, "results/x/") == {digest: "results/x/" + names[1]}
    assert names_guard.resolve_keys(["a.jpg"], listed, "results/x/") == {}


def test_job_output_is_not_stored_while_a_value_is_unproven(tmp_path):
    from tao_brev.sidecar import SidecarStore

    store = SidecarStore(tmp_path / "state")
    known_secrets.unprove("A_CFG", "unset in this shell")
    data = store.update("a-b-123456", final_progress={"kpi": {"acc_secret": 1}}, instance="box")
    assert data.final_progress is None and data.instance == "box"
    known_secrets.reset()
    assert store.update("a-b-123456", final_progress={"kpi": {"k": 1}}).final_progress == {"kpi": {"k": 1}}


def test_progress_warnings_are_withheld_but_the_answers_own_warnings_stay():
    from tao_brev import cli

    known_secrets.unprove("A_CFG", "unset in this shell")
    answer = cli.withhold_job_output({"warnings": ["results not verified"],
                                      "progress": {"warnings": ["FAILURE: x"], "resumed_from": "/r/ck.pth"}})
    assert answer["warnings"] == ["results not verified"]
    assert answer["progress"]["warnings"] == [] and answer["progress"]["resumed_from"].startswith("[tao-brev")
