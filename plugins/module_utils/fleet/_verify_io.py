# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_verify's cluster read: the intent (the plan given, else the cluster's configs), the nodes as they are,
every check of every node in scope against the fleet plan, polled until they match or the wait ends."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._claims_io import dra_node_checks
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_io import read_cluster_configs
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import SCOPE_FLEET, ClusterView, Intent, plan_fleet
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_read import read_fleet
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import Check, compare_node, config_checks, user_checks
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode

NodeList = List[Dict[str, Any]]
Devices = Dict[str, List[Any]]  # DRA node -> its planned devices (_dra_claims.PlannedDevice)


# The intent (the plan given, else the cluster's configs) and the cluster as it is.
def read(mod: ClusterModule) -> Tuple[Intent, ClusterView, NodeList, List[Check]]:
    p = mod.params
    fleet = read_fleet(mod)
    live, checks = read_cluster_configs(mod.k8s, fleet.cluster.configmap, p["operator_namespace"])
    if fleet.configs is not None:  # the plan: what the ConfigMap holds of it must be what the plan renders
        checks = config_checks(fleet.configs, live, str(fleet.cluster.configmap))
    configs = live if fleet.configs is None else fleet.configs
    intent = Intent(configs, fleet.default_config, fleet.plans, p["mig_strategy"], tuple(p["nodes"]), fleet.selector,
                    SCOPE_FLEET, fleet.plugin)
    return intent, fleet.cluster, fleet.nodes, checks


def evaluate(mod: ClusterModule, intent: Intent, cluster: ClusterView, nodes: NodeList) -> Tuple[List[Check], List[ExpectedNode], Devices]:
    """Every check of every node in scope against the fleet plan; a DRA node's ResourceSlices instead of its resources."""
    objs = {n["metadata"]["name"]: n for n in nodes}
    with mod.failing_on("invalid sharing plan"):
        fleet = plan_fleet(intent, cluster.with_nodes(nodes))
    checks: List[Check] = []
    expected: List[ExpectedNode] = []
    for name, node in sorted(fleet.nodes.items()):
        if not node.exists:
            checks.append(Check(name, "node", "exists", "node exists", "not found", False, "node %s is not in the cluster" % name))
        elif name in mod.params["dra_nodes"]:  # no device plugin there: its slices are compared below
            checks.extend(user_checks(name, objs[name], mod.params["checks"]))
        elif node.expected is None:
            checks.extend(Check(name, "plan", "expectation", "computable", "error", False, p) for p in node.problems)
        else:
            expected.append(node.expected)
            checks.extend(compare_node(node.expected, objs[name]))
            checks.extend(user_checks(name, objs[name], mod.params["checks"]))
    dra_checks, devices = dra_node_checks(mod.k8s, fleet, intent.hosts, mod.params["dra_nodes"]) if mod.params["dra_nodes"] else ([], {})
    return checks + dra_checks, expected, devices


def compare(mod: ClusterModule) -> Tuple[List[Check], List[ExpectedNode], NodeList, float, Intent, Devices]:
    """Compare, optionally polling (one node list per poll) until the nodes match or wait_timeout."""
    p = mod.params
    intent, cluster, nodes, plan_checks = read(mod)
    mod.result["device_plugin"] = intent.plugin.as_dict() if intent.plugin else None
    listed = [nodes]  # the first poll uses read()'s node list, each later one lists the nodes again

    def probe() -> Tuple[bool, Tuple[List[Check], List[ExpectedNode], NodeList, Devices]]:
        current = listed.pop() if listed else mod.k8s.list("Node")
        found, wanted, devices = evaluate(mod, intent, cluster, current)
        return all(c.ok for c in found), (found, wanted, current, devices)

    start = mod.k8s.now()
    try:
        timeout = 0 if mod.check_mode else p["wait_timeout"]
        checks, expected, nodes, devices = mod.k8s.wait_for("the nodes to match the plan", probe, timeout, p["wait_interval"])
    except K8sTimeout as exc:
        checks, expected, nodes, devices = exc.detail
    waited = round(mod.k8s.now() - start, 1) if p["wait_timeout"] > 0 else 0
    return plan_checks + checks, expected, nodes, waited, intent, devices
