"""The rollout_summary filter reads what each host's batch recorded from hostvars."""

from __future__ import annotations

import yaml

from ansible_collections.gpufleet.sharing.plugins.filter.rollout_summary import DOCUMENTATION, rollout_annotate_again, rollout_summary


def test_rows_from_hostvars_and_the_triage():
    hostvars = {"a": {}, "b": {"rollout_outcome": "failed", "rollout_gpus": [1], "rollout_reason": "drain timed out"},
                "c": {"rollout_outcome": "changed", "rollout_gpus": [0]}}
    triage = {"a": {"outcome": "unchanged", "reason": ""}, "b": {"outcome": "mig_change"}, "c": {"outcome": "files_only"}}
    assert rollout_summary(hostvars, ["a", "b", "c"], triage) == [
        {"node": "a", "outcome": "unchanged", "gpus": [], "reason": ""},
        {"node": "b", "outcome": "failed", "gpus": [1], "reason": "drain timed out"},
        {"node": "c", "outcome": "changed", "gpus": [0], "reason": ""}]
    assert rollout_summary(hostvars, ["a"]) == [{"node": "a", "outcome": "not started", "gpus": [], "reason": ""}]


def test_a_reason_refused_then_written_again_at_the_end():
    """Issue 21 (13): the host's mark and the loop result of writing its reason again."""
    hostvars = {"a": {"rollout_outcome": "failed", "rollout_reason": "hook", "rollout_mark": "refused",
                      "rollout_mark_error": "HTTP 500", "gpufleet_node_name": "node-a"}}
    assert rollout_annotate_again(hostvars, ["a"]) == [{"host": "a", "node": "node-a", "reason": "hook"}]
    rows = rollout_summary(hostvars, ["a"], {}, [{"item": {"host": "a"}, "changed": True}])
    assert rows[0]["node_state"].startswith("cordoned, annotated with the reason at the end of the run")
    rows = rollout_summary(hostvars, ["a"], {}, [{"item": {"host": "a"}, "failed": True, "msg": "HTTP 503"}])
    assert "and again at the end of the run (HTTP 503)" in rows[0]["node_state"]


def test_documentation_parses():
    doc = yaml.safe_load(DOCUMENTATION)
    assert doc["name"] == "rollout_summary" and set(doc["options"]) == {"triage", "remarked"}
    assert doc["extends_documentation_fragment"] == ["gpufleet.sharing.fleet_filter"]  # _input (hostvars), hosts


def test_the_batch_each_host_was_in():
    """Issue 24: the summary (and the HTML report) says which batch a host was in; 1 is the canary."""
    hostvars = {"a": {"rollout_outcome": "changed", "rollout_gpus": [0], "rollout_batch": 1},
                "b": {"rollout_outcome": "failed", "rollout_gpus": [], "rollout_reason": "x", "rollout_batch": "2"},
                "c": {}}
    rows = rollout_summary(hostvars, ["a", "b", "c"], {"c": {"outcome": "unchanged", "reason": ""}})
    assert [(r["node"], r.get("batch")) for r in rows] == [("a", 1), ("b", 2), ("c", None)]
