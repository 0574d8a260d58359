# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet plan's inputs as the modules that plan the whole fleet read them (gpu_verify, gpu_quotas).

One option group (``FLEET_ARGSPEC``: which nodes, the sharing configs, the MIG strategy, where the
operator is) and one read of the cluster (the nodes, the ClusterPolicy) with the options checked
against it, so every module that plans the fleet reads and refuses the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing_io import read_cluster_policy
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import (
    NODE_PLANS_ARGSPEC, ClusterView, HostPlan, checked_configs, device_plugin_of, read_intent)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharingConfig, SharingError, parse_selector

FLEET_ARGSPEC: Dict[str, Any] = dict(
    nodes=dict(type="list", elements="str", default=[]),
    node_selector=dict(type="str"),
    configs=dict(type="list", elements="raw"),
    node_configs=dict(type="dict", default={}),
    default_config=dict(type="str"),
    mig_strategy=dict(type="str", choices=["none", "single", "mixed"]),
    cluster_policy_name=dict(type="str"),
    operator_namespace=dict(type="str", default="gpu-operator"),
    **NODE_PLANS_ARGSPEC,
)


@dataclass(frozen=True)
class FleetRead:
    """``configs``: the options' sharing configs, checked (None: the options give none, the cluster's
    ConfigMap is the plan); ``default_config``: the options' default, only when they give configs."""

    nodes: List[Dict[str, Any]]
    policy: Optional[Dict[str, Any]]
    cluster: ClusterView
    selector: Any
    plugin: Any
    plans: Dict[str, HostPlan]
    configs: Optional[Dict[str, SharingConfig]]
    default_config: Optional[str]


def read_fleet(mod: Any) -> FleetRead:
    """Read the nodes and the ClusterPolicy, then check the options against them (fails the module
    with every problem of the sharing plan at once)."""
    p = mod.params
    nodes = mod.k8s.list("Node")
    policy = read_cluster_policy(mod.k8s, p["cluster_policy_name"], required=False)
    cluster = ClusterView.read(nodes, policy)
    try:
        selector, plugin = parse_selector(p["node_selector"], "node_selector"), device_plugin_of(p, policy, mod.warn)
        plans, raw_configs = read_intent(p)
        configs = (checked_configs(raw_configs, p["default_config"] or None, plugin, p["mig_strategy"] or cluster.mig_strategy)
                   if raw_configs is not None else None)
    except SharingError as exc:
        mod.fail("invalid sharing plan: %s" % exc, problems=exc.problems)
    default = p["default_config"] if raw_configs is not None else None
    return FleetRead(nodes, policy, cluster, selector, plugin, plans, configs, default)
