#!/usr/bin/env python3
"""Redaction and the spec guard against value length and input size: linear, or not.

Two series, each timed in this process (the index of known values is built once per value set;
its cost is shown apart), the least of 3 runs:

1. one ``--env`` value of 1, 4, 16 and 64 KiB (the cap), random letters: the time to build its
   index, to redact a 64 KiB log holding it once (forms and the ``taint`` normaliser), and the spec
   guard (``known_secrets.find_parsed`` of a spec holding it wrapped in a block scalar);
2. a 32-character value, logs of 16 KiB to 1 MiB (ordinary training lines with one encoded
   leak): redaction time per input size.

Linear means: 4x the value (or the input), about 4x the time (``x`` column: time ratio to the
row before, per 4x). Figures only; nothing is asserted.
"""

from __future__ import annotations

import base64
import random
import string
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tao_brev.secrets import guard as known_secrets  # noqa: E402


def best(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def value_of(size: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(string.ascii_letters + string.digits + "/+") for _ in range(size))


LINE = "Epoch 3/10: 100%|##########| 1250/1250 [02:13<00:00,  9.36it/s, loss=0.0123, v_num=0]\n"


def log_of(size: int, leak: str) -> str:
    body = LINE * (size // len(LINE))
    middle = len(body) // 2
    return body[:middle] + leak + "\n" + body[middle:]


def series_value_length() -> None:
    print("| value | index s | redact 64 KiB log s | x | spec guard s | x |")
    print("|---|---|---|---|---|---|")
    before = None
    for kib in (1, 4, 16, 64):
        value = value_of(kib * 1024, kib)
        env = {"WANDB_API_KEY": value}
        started = time.perf_counter()
        known_secrets.redactor(env)
        index = time.perf_counter() - started
        log = log_of(64 * 1024, "auth: " + base64.b64encode(value.encode()).decode())
        redact = best(lambda: known_secrets.redactor(env)(log))
        wrapped = base64.encodebytes(value.encode()).decode()
        spec = {"train": {"num_epochs": 3, "note": wrapped}, "model": {"backbone": "resnet_50"}}
        guard = best(lambda: known_secrets.find_parsed(spec, env))
        ratio = (f"{redact / before[0]:.1f}", f"{guard / before[1]:.1f}") if before else ("", "")
        print(f"| {kib} KiB | {index:.2f} | {redact:.3f} | {ratio[0]} | {guard:.3f} | {ratio[1]} |")
        before = (redact, guard)


def series_input_size() -> None:
    value = value_of(32, 7)
    env = {"WANDB_API_KEY": value}
    known_secrets.redactor(env)
    print("| log | redact s | x | MB/s |")
    print("|---|---|---|---|")
    before = None
    for kib in (16, 64, 256, 1024):
        log = log_of(kib * 1024, "cfg=" + base64.b64encode(value.encode("utf-16-le")).decode())
        took = best(lambda: known_secrets.redactor(env)(log))
        ratio = f"{took / before:.1f}" if before else ""
        print(f"| {kib} KiB | {took:.3f} | {ratio} | {kib / 1024 / took:.1f} |")
        before = took


if __name__ == "__main__":
    print("### Redaction vs value length (one --env value, up to the 64 KiB cap)")
    series_value_length()
    print()
    print("### Redaction vs input size (a 32-character value)")
    series_input_size()
