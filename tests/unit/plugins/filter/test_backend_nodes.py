"""backend_nodes: the nodes of each allocation backend, by gpufleet_gpu_backend."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sharing.plugins.filter.backend_nodes import backend_hosts, backend_nodes


def test_nodes_by_backend_with_node_names():
    hostvars = {"a": {"gpufleet_gpu_backend": "dra", "gpufleet_node_name": "node-a"}, "b": {}, "c": {"gpufleet_gpu_backend": "dra"}}
    assert backend_nodes(hostvars, ["a", "b", "c"]) == {"device-plugin": ["b"], "dra": ["node-a", "c"]}


def test_both_backends_for_one_host_names_the_host():
    with pytest.raises(AnsibleFilterError, match="^b: gpufleet_gpu_backend names both backends"):
        backend_nodes({"b": {"gpufleet_gpu_backend": ["dra", "device-plugin"]}}, ["b"])


def test_hosts_of_given_nodes():
    hostvars = {"a": {"gpufleet_node_name": "node-a"}, "b": {}, "c": {}}
    assert backend_hosts(hostvars, ["a", "b", "c"], ["node-a", "c"]) == ["a", "c"]
    assert backend_hosts(hostvars, ["a"], None) == []
