"""Secret values for the unit layer and the proof that none of them left the process.

``SECRETS`` are credential values of the shapes the bundle knows (NGC, AWS, Hugging Face,
W&B, a Brev token); :func:`assert_never_sent` fails when one appears in what the code under
test sent to brev (every argv word, the remote command of an exec, brev's environment) or
in an answer / a text it printed. A value may travel only inside a copied file (``brev copy``
carries the two paths, never the content)."""

from __future__ import annotations

import json

SECRETS = {
    "NGC_KEY": "nvapi-" + "Rk7Qw2Zx9Lm4Vb8Np3Ty6Hc1Jd5Fg0Sa" * 2,
    "AWS_ACCESS_KEY_ID": "AKIA" + "Q7ZT2LX9VB4NC8RK",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "Zq8Lm4Vb8N",
    "HF_TOKEN": "hf_" + "Qm7Zt2Lx9Vb4Nc8Rk1Wp5Yd3" * 2,
    "WANDB_API_KEY": "7d1c" * 10,
}


def with_secrets(ctx, names=tuple(SECRETS)) -> dict:
    """Put ``names``' values in the verbs' environment (observed: redacted from now on)."""
    from tao_brev.secrets import values as known_secrets

    chosen = {name: SECRETS[name] for name in names}
    ctx.env.update(chosen)
    known_secrets.observe_env(ctx.env)
    return chosen


def assert_never_sent(fake_brev, *answers, values=None) -> None:
    """No value of ``values`` (default: every SECRETS value) on any brev argv word, in any remote
    command, in brev's environment, nor in ``answers`` (dicts as JSON, or texts)."""
    values = list(SECRETS.values()) if values is None else list(values)
    for call in fake_brev.calls:
        sent = [*call.args, call.command or "", *call.env.values()]
        for value in values:
            hit = [word[:80] for word in sent if value in word]
            assert not hit, f"a secret value was sent to brev: {' '.join(call.args[:3])} ... {hit}"
    for answer in answers:
        text = answer if isinstance(answer, str) else json.dumps(answer, default=str)
        for value in values:
            assert value not in text, f"a secret value is in the answer: {text[:300]}"


def printed(answer: dict) -> str:
    """The text ``cli.run`` prints for a verb's ``answer``: ``answers.emit`` (redacted, capped)
    of the answer with its placeholders filled (``answers.concrete``)."""
    from unittest import mock

    from tao_brev import answers, pipes

    texts: list = []
    with mock.patch.object(pipes, "write_stdout", texts.append):
        answers.emit(answers.concrete(json.loads(json.dumps(answer, default=str))))
    return "".join(texts)
