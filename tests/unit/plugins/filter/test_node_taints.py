"""Filters node_taints / taint_tolerations / taint_report (issue 13, docs/reference/specs.md §17.3)."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.filter.node_taints import node_taints, taint_report, taint_tolerations
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._taints import GPU_TOLERATION

DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
HOSTVARS = {"a": {"gpufleet_node_taints": [DEDICATED], "gpufleet_node_name": "node-a"}, "b": {}}


def test_an_entry_for_every_host_so_that_undeclared_taints_are_removed():
    """Issue 21 (1): a host without gpufleet_node_taints had no entry, so the taints set earlier stayed."""
    assert node_taints(HOSTVARS, ["a", "b"]) == [{"node": "node-a", "taints": [DEDICATED]}, {"node": "b", "taints": []}]


def test_tolerations_with_and_without_the_gpu_default():
    toleration = {"key": "dedicated", "effect": "NoSchedule", "operator": "Equal", "value": "gpu"}
    assert taint_tolerations(HOSTVARS, ["a", "b"]) == [toleration]
    assert taint_tolerations(HOSTVARS, ["a"], [], gpu_default=True) == [GPU_TOLERATION, toleration]
    unschedulable = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    assert taint_tolerations(HOSTVARS, ["a"], [unschedulable], gpu_default=True) == [unschedulable, toleration]


def test_report_names_untolerated_and_invalid_taints():
    assert taint_report(HOSTVARS, ["a"], taint_tolerations(HOSTVARS, ["a"])) == []
    assert taint_report(HOSTVARS, ["a"], []) == [
        "host node-a (gpufleet_node_taints): taint dedicated=gpu:NoSchedule is tolerated by no operand of the GPU "
        "Operator (gpu_operator_tolerations)"]
    bad = {"c": {"gpufleet_node_taints": [dict(DEDICATED, effect="Never")]}}
    assert "invalid effect 'Never'" in taint_report(bad, ["c"], [])[0]
