"""Real-world ML configuration (tests/fixtures/ml_configs/README.md): the lint reports nothing.

TAO specs, NeMo/Hydra configs and Hugging Face config / tokenizer / generation
files are full of tokenizer keys, token ids, ``*_file`` / ``*_path`` keys and
interpolations; none of them is a credential, so none may block a submit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tao_brev import yaml_bounded
from tao_brev.secrets import guard as known_secrets, redact
from tao_brev.transport import refuse_secrets

ROOT = Path(__file__).resolve().parent / "fixtures" / "ml_configs"
FILES = sorted(p for p in ROOT.rglob("*") if p.suffix in (".yaml", ".yml", ".json"))
# A full set of the bundle's credentials, as an agent's shell would hold them.
ENV = {"NGC_KEY": "nvapi-Zq9TkW4mLp7RvX2cN8aaBBccDD", "HF_TOKEN": "hf_Zq9TkW4mLp7RvX2cN8abcdefghijk",
       "WANDB_API_KEY": "3f9a1c7d5e2b8a4c6d0e1f2a3b4c5d6e7f8a9b0c",
       "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}


def test_the_corpus_is_large_and_covers_each_family():
    families = {p.relative_to(ROOT).parts[0]: 0 for p in FILES}
    for path in FILES:
        families[path.relative_to(ROOT).parts[0]] += 1
    assert len(FILES) >= 100
    assert families["tao"] >= 30 and families["nemo"] >= 30 and families["hf"] >= 20
    names = {p.name.split("__")[-1] for p in FILES if p.parent.name == "hf"}
    assert {"config.json", "tokenizer_config.json", "generation_config.json"} <= names


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_lint_reports_nothing_and_the_spec_would_be_sent(path):
    text = path.read_text(encoding="utf-8")
    assert redact.lint(text) == []
    assert redact.redact(text) == text
    data = json.loads(text) if path.suffix == ".json" else yaml_bounded.load(text, path.name)
    assert data is not None
    refuse_secrets(text, f"spec {path.name}", ENV)      # what submit.py checks before anything is sent
    assert known_secrets.find(text, ENV) == []
