"""The preflight tests' world: a RUNNING ``box`` with known disk and fast ssh probes, one
schema-checked run of scripts/preflight.py, and the lookups its answer is read with."""

from __future__ import annotations

import pytest

from conftest import ROOT, validate

PRE = str(ROOT / "scripts" / "preflight.py")   # answers name every script by its absolute path
GOOD_NGC_KEY = "nvapi-GOODgood0000000000000000000"
WRONG_NGC_KEY = "nvapi-WRONGwrong000000000000000000"
BREV_TOKEN = "brev-tok-0123456789abcdefSECRET"
TAO_KEY = "images.tao_toolkit.pyt"
ALL_ON_INSTANCE = ["docker", "gpu", "disk", "ngc_auth", "image"]


@pytest.fixture
def box(world):
    """The world's RUNNING ``box`` (TAO image pulled) with a known disk, plus fast sim ssh probes."""
    world.sim.set_instance("box", disk_free_bytes=500 * 10**9)
    world.sim.set_timing(ssh_probe_interval_s=0.02, ssh_probe_limit=2)
    return world


def preflight(world, *args, instance="box", **env):
    """Run preflight.py; the answer must be one schema-valid JSON document."""
    res = world.run("preflight.py", "--instance", instance, *args, **env)
    assert res.json is not None, res
    validate("preflight", res.json)
    return res


def check(res, name) -> dict:
    found = [c for c in res.json["checks"] if c["name"] == name]
    assert len(found) == 1, res
    return found[0]


def names(res) -> list[str]:
    return [c["name"] for c in res.json["checks"]]


def fresh(world, name="fresh", **opts):
    """A RUNNING instance without the TAO image, 500 GB free unless told."""
    opts.setdefault("disk_free_bytes", 500 * 10**9)
    world.sim.add_instance(name, **opts)
    return name


def cred_files(world, instance) -> list[str]:
    return [p.name for p in world.sim.instance_home(instance).glob(".tao-cred-*")]
