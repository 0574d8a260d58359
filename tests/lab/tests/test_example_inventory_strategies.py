"""The example inventory's groups, planned by the collection and run by the lab's device plugin (issue 25 part 2).

For each group of inventories/example: the collection's plan (what gpu_sharing renders and what
gpu_sharing/gpu_verify expect the node to advertise) against the lab's independent model of the
device plugin loading that rendered config with the strategy the GPU Operator gives it. Whatever the
collection plans must be what the plugin does; where the plugin would refuse to start (MPS under
the mixed strategy: cmd/nvidia-device-plugin/main.go validateFlags, NVIDIA/k8s-device-plugin
v0.17.0-v0.20.0), the collection must refuse too, naming the config.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import pytest
import yaml

from gpulab.cluster import devices, pluginconfig
from labtools import ensure_collection_path
from test_cluster_behaviour_devices import host, set_mig

ensure_collection_path()

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet import _fleet_plan as fp  # noqa: E402
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import parse_configs, render_configmap_data  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GROUP_VARS = os.path.join(ROOT, "inventories", "example", "group_vars")
GPUS_PER_HOST = 2


def group_vars(name: str) -> Dict[str, Any]:
    with open(os.path.join(GROUP_VARS, name + ".yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def planned_layout(values: Dict[str, Any]) -> Optional[Dict[str, int]]:
    """The per-GPU MIG layout of the group's mig_config (None: MIG off)."""
    items = (values.get("mig_configs") or {}).get(values.get("mig_config"))
    return dict(items[0]["mig-devices"]) if items and items[0].get("mig-enabled") else None


def product_plan(group: str, policy_strategy: Optional[str]):
    values = group_vars(group)
    node = group + "-01"
    configs = parse_configs([dict(values["gpu_sharing_config"], nodes=[node])])
    cluster = fp.ClusterView(nodes={node: {}}, has_policy=True, mig_strategy=policy_strategy)
    configs = fp.configs_as_rendered(configs, None, cluster)
    gpu = {"model": values["gpufleet_gpu_model"], "count": GPUS_PER_HOST}
    if planned_layout(values):
        gpu["mig"] = planned_layout(values)
    plans = {node: fp.HostPlan(node=node, gpus=(gpu,))}
    fleet = fp.plan_fleet(fp.Intent(configs, None, plans, scope=fp.SCOPE_GOVERNED), cluster)
    return fleet.nodes[node], render_configmap_data(configs)[values["gpu_sharing_config"]["name"]]


def lab_plugin(group: str, policy_strategy: Optional[str], rendered: str) -> devices.NodeDevices:
    values = group_vars(group)
    state = host([(values["gpufleet_gpu_model"], GPUS_PER_HOST)])
    layout = planned_layout(values)
    for index in range(GPUS_PER_HOST) if layout else ():
        set_mig(state, index, [p for p, n in layout.items() for _copy in range(n)])
    sharing = pluginconfig.parse_plugin_config(rendered)
    return devices.compute_node(devices.gpu_views(state), devices.effective_mig_strategy(policy_strategy, sharing), sharing)


def inventory_strategy() -> Optional[str]:
    return group_vars("all").get("gpu_operator_mig_strategy", "mixed") or None


@pytest.mark.parametrize("group", ["a100_inference", "h100_training", "h200_shared"])
@pytest.mark.parametrize("policy", ["inventory", "mixed", "single", "none", "per-node"])
def test_the_plan_is_what_the_plugin_runs(group, policy):
    strategy = {"inventory": inventory_strategy(), "per-node": None}.get(policy, policy)
    node, rendered = product_plan(group, strategy)
    plugin = lab_plugin(group, strategy, rendered)
    if plugin.plugin_error:
        assert node.expected is None, (
            "the collection plans %s but the device plugin exits: %s" % (node.expected.resources, plugin.plugin_error))
        return
    if node.expected is None:  # refused for another reason (e.g. MIG devices under none): nothing to compare
        assert node.problems
        return
    planned = {name: count for name, count in node.expected.resources.items() if count}
    assert planned == plugin.resources


def test_the_example_inventory_runs_every_group():
    for group in ("a100_inference", "h100_training", "h200_shared"):
        node, rendered = product_plan(group, inventory_strategy())
        assert node.expected is not None, node.problems
        assert not lab_plugin(group, inventory_strategy(), rendered).plugin_error
    node, _rendered = product_plan("h200_shared", inventory_strategy())
    assert node.expected.resources == {"nvidia.com/gpu": 4 * GPUS_PER_HOST}


def test_mps_under_a_mixed_clusterpolicy_is_refused_naming_the_config():
    node, _rendered = product_plan("h200_shared", "mixed")
    assert node.expected is None
    assert any("h200-mps-4" in p and "using --mig-strategy=mixed is not supported with MPS" in p for p in node.problems)
