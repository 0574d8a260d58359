# -*- coding: utf-8 -*-
"""The node_plans filter: one plan entry per host that gives something to plan with."""

from __future__ import annotations

from ansible_collections.gpufleet.sharing.plugins.filter.node_plans import FilterModule

node_plans = FilterModule().filters()["node_plans"]

FACTS = [{"index": 0, "name": "NVIDIA H100 80GB HBM3"}]
TS4 = {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}


def test_entries_from_hostvars():
    hostvars = {
        "h1": {"gpufleet_node_name": "node-1", "ansible_facts": {"gpufleet_gpus": FACTS},
               "mig_selection": {"config": "all-balanced", "configs": {}, "include_defaults": True},
               "gpu_sharing_config": TS4},
        "h2": {"ansible_facts": {"gpufleet_gpus": FACTS}},   # no selection recorded: the module's default
        "h3": {"gpu_sharing_config": TS4},                     # no facts: read from its labels
        "h4": {},                                              # nothing to plan with
    }
    assert node_plans(hostvars, ["h1", "h2", "h3", "h4"]) == [
        {"node": "node-1", "gpu_facts": FACTS, "mig_config": "all-balanced", "mig_configs": {}, "sharing_config": TS4},
        {"node": "h2", "gpu_facts": FACTS, "mig_configs": {}},
        {"node": "h3", "sharing_config": TS4},
    ]


def test_node_name_filter_is_the_one_rule():
    node = FilterModule().filters()["node_name"]
    assert node("h1", {"h1": {"gpufleet_node_name": "node-1"}}) == "node-1"
    assert node("h2", {"h2": {}}) == "h2"
