"""Filter node_groups (issue 39): which node group each host is in, and what must be alike across a group."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sharing.plugins.filter.node_groups import node_groups

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def test_a_host_goes_to_its_one_group_besides_gpu_hosts() -> None:
    hostvars = {
        "a": {"group_names": ["a100_inference", "gpu_hosts"], "gpufleet_node_taints": [TAINT], "mig_config": "x",
              "gpufleet_node_capacity": {"cpu": "32"}},
        "b": {"group_names": ["a100_inference", "gpu_hosts"], "gpufleet_node_taints": [TAINT], "mig_config": "x",
              "gpufleet_node_capacity": {"cpu": "32"}, "gpufleet_node_name": "node-b"},
        "c": {"group_names": ["gpu_hosts"]},
        "d": {"group_names": ["gpu_hosts", "rack1", "h100"], "gpufleet_node_group": "h100", "gpufleet_gpu_backend": "dra",
              "gpufleet_karpenter_nodepool": "pool-h100"},
    }
    assert node_groups(hostvars, ["a", "b", "c", "d"]) == [
        {"name": "a100_inference", "nodes": ["a", "node-b"], "backend": "device-plugin", "taints": [TAINT],
         "capacity": {"cpu": "32"}, "mig_backend": "host", "mig_config": "x"},
        {"name": "gpu_hosts", "nodes": ["c"], "backend": "device-plugin", "taints": [], "capacity": {},
         "mig_backend": "host", "mig_config": "all-disabled"},
        {"name": "h100", "nodes": ["d"], "backend": "dra", "taints": [], "capacity": {}, "mig_backend": "host",
         "mig_config": "all-disabled", "karpenter_nodepool": "pool-h100"}]


def test_an_ambiguous_host_and_a_group_whose_hosts_differ_are_refused() -> None:
    hostvars = {"a": {"group_names": ["gpu_hosts", "rack1", "a100"]},
                "b": {"group_names": ["gpu_hosts", "h100"], "gpufleet_node_taints": [TAINT]},
                "c": {"group_names": ["gpu_hosts", "h100"]}}
    with pytest.raises(AnsibleFilterError) as caught:
        node_groups(hostvars, ["a", "b", "c"])
    text = str(caught.value)
    assert "host a is in the groups rack1, a100 besides gpu_hosts: set gpufleet_node_group" in text
    assert "node group 'h100': its hosts differ in taints (b: [" in text and "c: []" in text


def test_a_group_holding_every_gpu_host_is_no_node_group() -> None:
    """The lab's inventory puts every host into lab_gpu_hosts too (a site's k8s_cluster alike)."""
    hostvars = {"a": {"group_names": ["a100", "gpu_hosts", "lab_gpu_hosts"]},
                "b": {"group_names": ["gpu_hosts", "h100", "lab_gpu_hosts"]}}
    inventory = {"all": ["a", "b"], "gpu_hosts": ["a", "b"], "lab_gpu_hosts": ["a", "b"], "a100": ["a"], "h100": ["b"]}
    assert [(g["name"], g["nodes"]) for g in node_groups(hostvars, ["a", "b"], "gpu_hosts", inventory)] == [
        ("a100", ["a"]), ("h100", ["b"])]
    with pytest.raises(AnsibleFilterError, match="host a is in the groups a100, lab_gpu_hosts besides gpu_hosts"):
        node_groups(hostvars, ["a", "b"])
