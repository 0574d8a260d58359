"""The rollout_summary filter reads what each host's batch recorded from hostvars."""

from __future__ import annotations

import yaml

from ansible_collections.gpufleet.sharing.plugins.filter.rollout_summary import DOCUMENTATION, rollout_summary


def test_rows_from_hostvars_and_the_triage():
    hostvars = {"a": {}, "b": {"rollout_outcome": "failed", "rollout_gpus": [1], "rollout_reason": "drain timed out"},
                "c": {"rollout_outcome": "changed", "rollout_gpus": [0]}}
    triage = {"a": {"outcome": "unchanged", "reason": ""}, "b": {"outcome": "mig_change"}, "c": {"outcome": "files_only"}}
    assert rollout_summary(hostvars, ["a", "b", "c"], triage) == [
        {"node": "a", "outcome": "unchanged", "gpus": [], "reason": ""},
        {"node": "b", "outcome": "failed", "gpus": [1], "reason": "drain timed out"},
        {"node": "c", "outcome": "changed", "gpus": [0], "reason": ""}]
    assert rollout_summary(hostvars, ["a"]) == [{"node": "a", "outcome": "not started", "gpus": [], "reason": ""}]


def test_documentation_parses():
    doc = yaml.safe_load(DOCUMENTATION)
    assert doc["name"] == "rollout_summary" and set(doc["options"]) == {"triage"}
    assert doc["extends_documentation_fragment"] == ["gpufleet.sharing.fleet_filter"]  # _input (hostvars), hosts


def test_the_batch_each_host_was_in():
    """Issue 24: the summary (and the HTML report) says which batch a host was in; 1 is the canary."""
    hostvars = {"a": {"rollout_outcome": "changed", "rollout_gpus": [0], "rollout_batch": 1},
                "b": {"rollout_outcome": "failed", "rollout_gpus": [], "rollout_reason": "x", "rollout_batch": "2"},
                "c": {}}
    rows = rollout_summary(hostvars, ["a", "b", "c"], {"c": {"outcome": "unchanged", "reason": ""}})
    assert [(r["node"], r.get("batch")) for r in rows] == [("a", 1), ("b", 2), ("c", None)]
