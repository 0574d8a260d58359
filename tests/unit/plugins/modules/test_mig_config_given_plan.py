"""mig_config given the plan the controller made (issue 20, item 3): the plan is computed once per node per run.

The module re-reads the GPUs (busy GPUs and a changed state must be re-checked after the rollout's
lock and drain) but does not plan again when the state is the one the plan was made from; a state
that changed since the read is planned again on the host, never applied from the stale plan.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.mig import _mig_host
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_read_plan import plan_from_read
from ansible_collections.gpufleet.sharing.plugins.modules import mig_config
from test_mig_config import FakeHost, run_module  # noqa: F401  pylint: disable=unused-import


@pytest.fixture
def planner_calls(monkeypatch):
    """Every call of the host planner (plan_host) made by the module."""
    calls = []
    original = mig_config.plan_host

    def counted(*args, **kwargs):
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(mig_config, "plan_host", counted)
    return calls


def controller_plan(run, host, selected, monkeypatch):
    """What the rollout's triage computes on the controller from a read of the host (through JSON, as a fact)."""
    reads = []
    original = _mig_host.MigHost.gather

    def gather(self):
        reads.append(original(self))
        return reads[-1]

    with monkeypatch.context() as patch:
        patch.setattr(_mig_host.MigHost, "gather", gather)
        run(host, check_mode=True, include_defaults=True, selected=selected)
    result = plan_from_read(None, True, selected, reads[0], {})
    return json.loads(json.dumps(result["plan"]))


def test_the_given_plan_is_applied_without_planning_again(run_module, planner_calls, monkeypatch):
    host = FakeHost(["H100", "H100"])
    plan = controller_plan(run_module, host, "all-balanced", monkeypatch)
    planner_calls.clear()  # the controller\'s plan (made here with the module\'s own run)
    ok, result = run_module(host, check_mode=True, include_defaults=True, selected="all-balanced", plan=plan)
    assert ok and result["plan_reused"] is True and result["changed_gpus"] == [0, 1] and host.mutations == []
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", plan=result["plan"])
    assert ok and result["plan_reused"] is True and result["changed"] and result["changed_gpus"] == [0, 1]
    assert planner_calls == []  # the check-mode step and the apply: no plan on the host
    ok, again = run_module(host, include_defaults=True, selected="all-balanced")
    assert ok and again["changed"] is False and again["after"] == result["after"]
    assert len(planner_calls) == 1 and again["plan_reused"] is False  # no plan given: planned on the host


def test_a_state_changed_since_the_read_is_planned_again(run_module, planner_calls, monkeypatch):
    host = FakeHost(["H100"])
    plan = controller_plan(run_module, host, "all-balanced", monkeypatch)
    planner_calls.clear()  # the controller\'s plan (made here with the module\'s own run)
    assert run_module(host, include_defaults=True, selected="all-7g.80gb")[0]  # changed by hand after the read
    planner_calls.clear()
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", plan=plan)
    assert ok and result["plan_reused"] is False and planner_calls == ["all-balanced"]
    assert result["before"][0]["mig_devices"] == {"7g.80gb": 1}
    assert result["after"][0]["mig_devices"] == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    assert run_module(host, include_defaults=True, selected="all-balanced")[1]["changed"] is False


def test_a_plan_for_another_config_is_not_used(run_module, planner_calls, monkeypatch):
    host = FakeHost(["H100"])
    plan = controller_plan(run_module, host, "all-balanced", monkeypatch)
    planner_calls.clear()  # the controller\'s plan (made here with the module\'s own run)
    ok, result = run_module(host, include_defaults=True, selected="all-7g.80gb", plan=plan)
    assert ok and result["plan_reused"] is False and planner_calls == ["all-7g.80gb"]
    assert result["after"][0]["mig_devices"] == {"7g.80gb": 1}


def test_busy_gpus_are_refused_with_the_given_plan(run_module, planner_calls, monkeypatch):
    host = FakeHost(["H100", "H100"])
    plan = controller_plan(run_module, host, "all-7g.80gb", monkeypatch)
    planner_calls.clear()  # the controller\'s plan (made here with the module\'s own run)
    host.gpus[1]["processes"] = [4242]  # a process started after the read (the drain left it)
    ok, result = run_module(host, include_defaults=True, selected="all-7g.80gb", plan=plan)
    assert not ok and host.mutations == [] and "GPU 1 (GPU-0001) has compute processes running: PIDs 4242" in result["msg"]
    assert planner_calls == []


def test_a_malformed_plan_is_refused_naming_it(run_module):
    host = FakeHost(["H100"])
    ok, result = run_module(host, include_defaults=True, selected="all-balanced", plan={"config_name": "all-balanced"})
    assert not ok and host.mutations == [] and "plan" in result["msg"]
