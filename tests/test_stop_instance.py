"""Stop, not delete: ``teardown.py JOB_ID --stop-instance`` and ``teardown.py --orphans --stop``
stop an instance once its results are safe, when brev says its type can stop (``brev search
--json`` ``stoppable``, or brev's own refusal); the cost facts then end at the stop and name
each part the bundle caused (its start, the pull, the job, the idle time until the stop)."""

from __future__ import annotations

import json

import pytest

from conftest import TAO_IMAGE, validate
from tao_brev import prices
from tao_brev.context import Context

WAIT = ("--wait", "--interval", "0.1", "--timeout", "60")


def finished_job(world, instance: str = "box") -> str:
    done = world.submit(instance=instance)
    assert done.code == 0, done
    job = done.json["job_id"]
    polled = world.run("poll_status.py", job, *WAIT)
    assert polled.json["state"] == "COMPLETE", polled
    return job


def test_the_users_stopped_instance_is_started_used_and_stopped_again_with_every_part_billed(world):
    world.sim.set_instance("box", status="STOPPED")
    pre = world.run("preflight.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--start")
    assert pre.code == 0, pre
    job = finished_job(world)
    down = world.run("teardown.py", job, "--stop-instance")
    validate("teardown", down.json)
    assert down.code == 0 and down.json["instance_stopped"] is True and down.json["deleted"] == [], down
    assert world.sim.instance("box")["status"] == "STOPPED"
    assert down.json["next"] is None and "closed" in down.json["next_note"]
    cost = down.json["cost"]
    assert cost["instance_stopped_at"] and cost["still_billing"] is False
    parts = cost["billed_parts"]
    assert parts["start_s"] is not None and parts["idle_s"] is not None and parts["job_s"] > 0
    assert parts["until"] == "instance stopped by the bundle"
    assert cost["billed_s"] == pytest.approx(parts["start_s"] + parts["job_s"] + parts["idle_s"], abs=0.01)
    assert (cost["price_source"], cost["price_per_hour_usd"]) == ("brev search", 4.09)
    again = world.run("teardown.py", job, "--stop-instance")   # a rerun: the instance stays stopped
    assert again.json["cost"]["billed_s"] == cost["billed_s"], again
    for argv in (("poll_status.py", job), ("poll_status.py", "--all"), ("teardown.py", "--orphans"),
                 ("tao_job_record.py", "cost")):               # reading the closed job never starts it
        done = world.run(*argv)
        assert done.code == 0 and world.sim.instance("box")["status"] == "STOPPED", (argv, done)


# In process (tests/unit/test_verbs_stop.py): a type brev search lists as not stoppable is left running
# (test_a_type_that_cannot_stop_is_not_stopped_and_the_answer_says_it_bills) and brev's own refusal of a
# type the list does not know (test_brev_refusing_the_stop_is_answered_as_not_stoppable).
def test_a_stop_waits_for_the_other_live_jobs_on_the_instance(world):
    job = finished_job(world)
    other = world.submit(spec=world.spec({"epoch_seconds": 30}))
    assert other.code == 0, other
    down = world.run("teardown.py", job, "--stop-instance")
    validate("teardown", down.json)
    assert down.code == 1 and down.json["error"]["code"] == "INSTANCE_STOP_REFUSED", down
    assert other.json["job_id"] in down.json["error"]["message"]
    assert world.sim.instance("box")["status"] == "RUNNING"
    world.run("teardown.py", other.json["job_id"])


def test_stop_and_delete_flags_exclude_each_other(world):
    both = world.run("teardown.py", "some-job", "--stop-instance", "--delete-instance")
    assert both.code == 2
    mixed = world.run("teardown.py", "--orphans", "--stop", "--delete")
    assert mixed.code == 2 and mixed.json["error"]["code"] == "BAD_ARGUMENT"


def test_orphans_stop_stops_idle_instances_of_ours_and_never_someone_elses(world):
    world.sim.add_instance("alice-dev")
    world.sim.add_instance("h100", instance_type="hyperstack_H100")
    world.sim.preload_image("h100", TAO_IMAGE)
    job = finished_job(world)
    world.run("teardown.py", job)
    job2 = finished_job(world, "h100")
    world.run("teardown.py", job2)
    unnamed = world.run("teardown.py", "--orphans", "--stop")   # box and h100 are the user's: named only
    assert unnamed.code == 0 and unnamed.json["stopped"] == [], unnamed
    assert world.sim.instance("box")["status"] == "RUNNING"
    done = world.run("teardown.py", "--orphans", "--stop", "--instance", "box", "--instance", "h100")
    validate("teardown", done.json)
    assert done.code == 0 and done.json["stopped"] == ["box"], done
    assert world.sim.instance("box")["status"] == "STOPPED"
    assert world.sim.instance("alice-dev")["status"] == "RUNNING" and world.sim.instance("h100")["status"] == "RUNNING"
    h100 = next(o for o in done.json["orphans"] if o["instance"] == "h100")
    assert "cannot be stopped" in h100["stop"]["why"] and h100["price_source"] == "brev search"
    refused = world.run("teardown.py", "--orphans", "--stop", "--instance", "alice-dev")
    assert refused.code == 1 and refused.json["error"]["code"] == "NOT_AN_ORPHAN", refused
    assert "belongs to whoever created it" in refused.json["error"]["message"]
    assert world.sim.instance("alice-dev")["status"] == "RUNNING"


def test_a_named_instance_that_is_not_an_orphan_is_refused_with_its_own_reason(world):
    job = finished_job(world)
    world.run("teardown.py", job, "--stop-instance")     # the user's own instance, now STOPPED
    refused = world.run("teardown.py", "--orphans", "--delete", "--instance", "box")
    assert refused.code == 1 and refused.json["error"]["code"] == "NOT_AN_ORPHAN", refused
    message, fix = refused.json["error"]["message"], refused.json["error"]["fix"]
    assert "box: not an orphan: STOPPED, not created by this bundle" in message
    assert "did not run a job on" not in fix and "--ephemeral" in fix and "/scripts/teardown.py --orphans" in fix


# ------------------------------------------------------------------ prices (tao_brev/prices.py)
def test_prices_are_cached_with_their_date_and_asked_again_only_when_stale(world):
    ctx = Context(env=world.env)
    price, source, note = prices.price(ctx, None, "a2-highgpu-1g")
    assert (price, source) == (4.09, "brev search") and "fetched" in note
    searches = lambda: [r for r in world.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["search"]]
    assert len(searches()) == 2                          # gpu and cpu, once
    assert prices.price(ctx, None, "n2-standard-8")[:2] == (0.46, "brev search") and len(searches()) == 2
    assert prices.stoppable(ctx, "hyperstack_H100") is False and prices.stoppable(ctx, "a2-highgpu-1g") is True
    cache = json.loads(prices.cache_path(ctx).read_text())
    cache["fetched_at"] = "2020-01-01T00:00:00+00:00"
    prices.cache_path(ctx).write_text(json.dumps(cache))
    assert prices.price(ctx, None, "a2-highgpu-1g", lookup=False)[2].endswith("fetched 2020-01-01T00:00:00+00:00")
    assert len(searches()) == 2                          # no lookup: the old list, its date named
    prices.price(ctx, None, "a2-highgpu-1g")
    assert len(searches()) == 4                          # stale: asked again


def test_without_brev_the_fallback_says_it_is_one_and_a_flag_always_wins(world):
    world.sim.add_brev_fault("search", "internal server error", times=4)
    ctx = Context(env=world.env)
    price, source, note = prices.price(ctx, None, "a2-highgpu-1g")
    assert (price, source) == (3.67, "prices.yaml") and "FALLBACK" in note and "could not be asked" in note
    assert prices.price(ctx, None, "no-such-type") == (None, None, "no price for no-such-type: brev search could "
                                                       "not be asked and prices.yaml has none (pass --price-per-hour USD)")
    assert prices.price(ctx, 1.5, "a2-highgpu-1g") == (1.5, "flag", "--price-per-hour")
    assert prices.price(ctx, None, None)[0] is None
    assert prices.stoppable(ctx, "a2-highgpu-1g") is None


@pytest.mark.parametrize("rows, expected", [
    ([{"type": "t", "price_per_hour": 2.0, "stoppable": True}, {"type": "t", "price_per_hour": 9.0}],
     {"t": {"usd_per_hour": 2.0, "stoppable": True, "kind": "gpu"}}),
    ([{"type": "t", "price_per_hour": "2.0"}, {"type": "", "price_per_hour": 1}, {"price_per_hour": 1},
      {"type": "b", "price_per_hour": True}, {"type": "n", "price_per_hour": -1}], {}),
    ([{"type": "z", "price_per_hour": 0}], {"z": {"usd_per_hour": 0.0, "stoppable": False, "kind": "gpu"}}),
    ([{"type": "api", "base_price": {"currency": "USD", "amount": "1.006"}, "stoppable": True},
      {"type": "eur", "base_price": {"currency": "EUR", "amount": "1"}}, {"type": "bad", "base_price": {"amount": "x"}},
      {"type": "none", "base_price": "1.0"}],
     {"api": {"usd_per_hour": 1.006, "stoppable": True, "kind": "gpu"}}),
])
def test_rows_without_a_type_or_a_numeric_price_are_skipped(rows, expected):
    assert prices.types_from_rows(rows, "gpu") == expected


# ------------------------------------------------------------------ tao_job_record.py cost
def test_the_cost_report_totals_jobs_in_dollars_and_lists_what_bills_now(world):
    world.sim.add_instance("alice-dev", instance_type="hyperstack_H100")
    first = finished_job(world)
    world.run("teardown.py", first)
    second = finished_job(world)
    world.run("teardown.py", second, "--stop-instance")
    done = world.run("tao_job_record.py", "cost")
    assert done.code == 0 and done.json["ok"], done
    total = done.json["total"]
    assert total["jobs"] == 2 and total["unpriced_jobs"] == [] and total["price_sources"] == ["brev search"]
    lines = {j["job_id"]: j for j in done.json["jobs"]}
    assert set(lines) == {first, second}
    assert total["billed_s"] == pytest.approx(sum(j["billed_s"] for j in lines.values()), abs=0.01)
    # each figure is rounded to 4 decimals: the sum of two and the rounded total differ by up to 1.5e-4
    assert total["estimated_cost_usd"] == pytest.approx(sum(j["estimated_cost_usd"] for j in lines.values()),
                                                        abs=2e-4)
    assert all(j["price_per_hour_usd"] == 4.09 for j in lines.values())
    now = {b["instance"]: b for b in done.json["billing_now"]}
    assert now["alice-dev"]["usd_per_hour"] == 2.28 and now["alice-dev"]["ours"] is False
    assert now["box"]["bills"] == "disk only (stopped)" and now["box"]["usd_per_hour"] is None
    assert done.json["usd_per_hour_now"] == 2.28
    assert "job_id" not in done.json                     # a report of several jobs names none at its top
    assert done.json["next"].endswith("teardown.py --orphans") and "bill now" in done.json["next_note"]
    only = world.run("tao_job_record.py", "cost", "--instance", "alice-dev")
    assert only.json["total"]["jobs"] == 0 and [b["instance"] for b in only.json["billing_now"]] == ["alice-dev"]
    later = world.run("tao_job_record.py", "cost", "--since", "2999-01-01")
    assert later.json["total"] == {**later.json["total"], "jobs": 0, "billed_s": 0, "estimated_cost_usd": 0}
    bad = world.run("tao_job_record.py", "cost", "--since", "yesterday")
    assert bad.code == 2 and bad.json["error"]["code"] == "BAD_ARGUMENT"


def test_the_cost_report_without_brev_still_totals_and_says_why_billing_now_is_unknown(world):
    job = finished_job(world)
    world.run("teardown.py", job)
    done = world.run("tao_job_record.py", "cost", PATH="/usr/bin:/bin")    # no brev on PATH
    assert done.code == 0 and done.json["total"]["jobs"] == 1, done
    assert done.json["billing_now"] is None and "brev ls failed (BREV_NOT_FOUND)" in done.json["billing_now_note"]
    assert done.json["next"] is None and done.json["next_note"] == "nothing to run: a report only"
    assert done.json["jobs"][0]["price_source"] == "brev search"     # the list cached by the teardown


def test_brev_ls_names_the_gpu_as_brev_does_and_preflight_prints_a_gpu_name_once(world):
    rows = {w["name"]: w for w in Context(env=world.env).brev.ls()}
    assert rows["box"]["gpu"] == "A100"                  # ls.go getGPUForInstance: the type's GPU name
    world.sim.add_instance("odd", instance_type="odd-type-1")
    assert {w["name"]: w for w in Context(env=world.env).brev.ls()}["odd"]["gpu"] == "-"
    pre = world.run("preflight.py", "--instance", "box")
    assert pre.code == 0 and "NVIDIA NVIDIA" not in pre.stdout + pre.stderr, pre


def test_a_start_by_submit_start_is_billed_to_the_job_too(world):
    world.sim.set_instance("box", status="STOPPED")
    done = world.submit("--start")
    assert done.code == 0, done
    job = done.json["job_id"]
    world.run("poll_status.py", job, *WAIT)
    down = world.run("teardown.py", job, "--stop-instance")
    parts = down.json["cost"]["billed_parts"]
    assert parts["start_s"] is not None and parts["until"] == "instance stopped by the bundle", down


@pytest.mark.parametrize("flag", ["--stop-instance", "--delete-instance"])
def test_a_live_job_another_state_dir_launched_refuses_the_stop_or_delete(world, flag):
    """The records are one state dir's: a job another user or agent (another TAO_STATE_DIR) runs
    on the same instance is seen only by asking the instance, in the teardown's own round trip."""
    job = finished_job(world)
    theirs = world.submit(spec=world.spec({"epoch_seconds": 30}), TAO_STATE_DIR=str(world.tmp_path / "alice"))
    assert theirs.code == 0, theirs
    execs = len([r for r in world.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["exec"]])
    down = world.run("teardown.py", job, flag)
    validate("teardown", down.json)
    verb = "STOP" if flag == "--stop-instance" else "DELETE"
    assert down.code == 1 and down.json["error"]["code"] == f"INSTANCE_{verb}_REFUSED", down
    other = theirs.json["job_id"]
    assert [other in line for line in down.json["unknown_containers"]] == [True], down.json
    assert "another state dir" in down.json["error"]["message"] and down.json["still_billing"] is True
    force = down.json["force"]
    assert force.endswith(f"teardown.py {job} {flag} --force") and force.startswith("/")
    assert force in down.json["error"]["fix"] and "kills" in down.json["error"]["fix"]
    assert world.sim.instance("box")["status"] == "RUNNING"
    assert [r for r in world.sim.audit() if r["tool"] == "brev" and r["argv"][:1] in (["stop"], ["delete"])] == []
    now = len([r for r in world.sim.audit() if r["tool"] == "brev" and r["argv"][:1] == ["exec"]])
    assert now - execs == 1, "the containers are listed in the teardown's one round trip"
    assert world.run("poll_status.py", other, TAO_STATE_DIR=str(world.tmp_path / "alice")).json["state"] == "RUNNING"
    forced = world.run("teardown.py", job, flag, "--force")
    assert forced.code == 0, forced
    if flag == "--stop-instance":
        assert forced.json["instance_stopped"] is True and world.sim.instance("box")["status"] == "STOPPED"
    else:
        assert forced.json["deleted"] == ["box"], forced.json


@pytest.mark.parametrize("bad", ["deep", "directory", "fifo", "wrong-shapes", "huge-number", "not-utf8"])
def test_a_bad_instance_types_cache_is_treated_as_absent_and_read_again_from_brev(world, bad):
    import os

    ctx = Context(env=world.env)
    path = prices.cache_path(ctx)
    path.parent.mkdir(parents=True, exist_ok=True)
    if bad == "deep":
        path.write_text('{"types": ' + "[" * 100000 + "]" * 100000 + "}")
    elif bad == "directory":
        path.mkdir()
    elif bad == "fifo":
        os.mkfifo(path)
    elif bad == "wrong-shapes":
        path.write_text(json.dumps({"fetched_at": [], "types": {"a2-highgpu-1g": "cheap", "x": {"usd_per_hour": "1"}}}))
    elif bad == "huge-number":
        path.write_text('{"fetched_at": "' + "9" * 5000 + '", "types": {"a2-highgpu-1g": {"usd_per_hour": '
                        + "9" * 5000 + ', "stoppable": true, "kind": "gpu"}}}')
    else:
        path.write_bytes(b'{"types": {"\xff": 1}}')
    assert prices.price(ctx, None, "a2-highgpu-1g", lookup=False)[1] != "brev search"   # not used, no crash
    assert prices.price(ctx, None, "a2-highgpu-1g")[:2] == (4.09, "brev search")
    assert prices.stoppable(ctx, "a2-highgpu-1g") is True
    cached = prices.price(ctx, None, "a2-highgpu-1g", lookup=False)[:2]   # a directory stays: nothing cached
    assert cached == ((3.67, "prices.yaml") if bad == "directory" else (4.09, "brev search"))


def test_after_the_bundle_started_the_users_instance_the_polls_next_stops_it_again(world):
    """The bundle brought the STOPPED instance up (preflight --start): the ended job's next is its
    teardown with --stop-instance, and running it leaves the instance as it was found."""
    world.sim.set_instance("box", status="STOPPED")
    pre = world.run("preflight.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--start")
    assert pre.code == 0, pre
    done = world.submit()
    polled = world.run("poll_status.py", done.json["job_id"], *WAIT)
    validate("poll_status", polled.json)
    assert polled.json["state"] == "COMPLETE" and polled.json["bundle_started_instance"]["instance"] == "box", polled
    words = polled.json["next"].split()
    assert words[0].endswith("teardown.py") and words[1:] == [done.json["job_id"], "--stop-instance"], words
    assert "started box" in polled.json["next_note"]
    down = world.run("teardown.py", *words[1:])
    assert down.code == 0 and down.json["instance_stopped"] is True, down
    assert world.sim.instance("box")["status"] == "STOPPED"


def test_a_plain_teardown_on_an_instance_the_bundle_started_names_the_stop_next(world):
    """The user (or --wait --teardown) tore the job down without --stop-instance: the instance the
    bundle started stays up and bills, so the answer names it and next stops it; that run stops it."""
    world.sim.set_instance("box", status="STOPPED")
    assert world.run("preflight.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--start").code == 0
    job = world.submit().json["job_id"]
    waited = world.run("poll_status.py", job, *WAIT, "--teardown")
    validate("poll_status", waited.json)
    assert waited.code == 0 and waited.json["teardown"]["bundle_started_instance"]["instance"] == "box", waited
    words = waited.json["next"].split()
    assert words[0].endswith("teardown.py") and words[1:] == [job, "--stop-instance"], words
    assert world.sim.instance("box")["status"] == "RUNNING"
    down = world.run("teardown.py", *words[1:])
    validate("teardown", down.json)
    assert down.code == 0 and down.json["instance_stopped"] is True and down.json["next"] is None, down
    assert world.sim.instance("box")["status"] == "STOPPED"


def test_a_job_on_a_running_instance_the_user_started_keeps_the_plain_teardown(world):
    job = finished_job(world)
    polled = world.run("poll_status.py", job)
    assert "bundle_started_instance" not in polled.json and polled.json["next"].split()[1:] == [job], polled


def test_a_started_instance_whose_type_cannot_stop_is_named_with_what_bills(world):
    world.sim.set_instance("box", status="STOPPED", instance_type="hyperstack_H100")
    assert world.run("preflight.py", "--instance", "box", "--image", "images.tao_toolkit.pyt", "--start").code == 0
    world.run("tao_job_record.py", "cost")   # brev search's catalog, cached: the poll reads it, no call of its own
    job = finished_job(world)
    polled = world.run("poll_status.py", job)
    assert polled.json["bundle_started_instance"]["stoppable"] is False, polled
    assert polled.json["next"].split()[1:] == [job], polled
    assert "cannot stop" in polled.json["next_note"] and "--delete-instance" in polled.json["next_note"]
