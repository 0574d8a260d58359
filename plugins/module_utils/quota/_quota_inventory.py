# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The team quotas judged over the inventory's planned hosts, for the preflight (pure; issue 43).

gpu_quotas plans the fleet (``planned_fleet``) and then the quotas (``plan_quotas``, ``plan_problems``) in its own
play, after the operator play. The preflight runs the same two plans here over the hosts of the play, each
planned from its GPU read and MIG selection as ``node_plans`` gives them to the module, so that a sum over the
fleet's capacity, a node without a product label or a team beyond Kueue's resource-group limits is refused
before anything changes (a share of a resource no planned host advertises stays the module's warning). Judged only when every host's GPUs
were read and plan: a host whose model is only declared is planned by the module from its node's labels.
GPU nodes of the cluster outside the inventory, and live taints, are the module's to add.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import (
    SCOPE_FLEET, ClusterView, Intent, checked_configs, plan_fleet, read_intent)
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_plan import plan_problems, plan_quotas
from ansible_collections.gpufleet.sharing.plugins.module_utils.quota._quota_teams import Team
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharingError


def plan_entry(values: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """One host's ``node_plans`` entry as the filter ``node_plans`` builds it; None when its GPUs were not read."""
    facts = (values.get("ansible_facts") or {}).get("gpufleet_gpus") or []
    if not facts or values.get("gpufleet_gpu_model") is not None:
        return None
    selection = values.get("mig_selection") if isinstance(values.get("mig_selection"), Mapping) else {}
    entry: Dict[str, Any] = {"node": values.get("gpufleet_node_name") or str(values.get("inventory_hostname", "")),
                             "gpu_facts": list(facts), "mig_configs": dict(selection.get("configs") or {})}
    if selection.get("config"):
        entry["mig_config"] = selection["config"]
    if values.get("gpu_sharing_config"):
        entry["sharing_config"] = values["gpu_sharing_config"]
    return entry


def planned_nodes(node_plans: Sequence[Mapping[str, Any]], mig_strategy: Optional[str]) -> Optional[List[Dict[str, Any]]]:
    """Per planned host, what its node will advertise and the labels GFD will give it (``fleet.plan_fleet`` over
    these hosts only); None when a host does not plan (its problems are the preflight's per host)."""
    try:
        plans, raw = read_intent({"node_plans": list(node_plans)})
        configs = checked_configs(raw, None, None, mig_strategy) if raw is not None else {}
        fleet = plan_fleet(Intent(configs, None, plans, mig_strategy, (), (), SCOPE_FLEET, None),
                           ClusterView({node: {} for node in plans}, mig_strategy=mig_strategy))
    except SharingError:
        return None
    if not plans or fleet.problems or any(n.expected is None for n in fleet.nodes.values()):
        return None
    return [{"node": name, "resources": dict(n.expected.resources), "labels": dict(n.expected.labels), "taints": []}
            for name, n in sorted(fleet.nodes.items()) if n.expected is not None]


def inventory_quota_problems(node_plans: Sequence[Mapping[str, Any]], teams: Sequence[Team], overcommit: bool,
                             mig_strategy: Optional[str]) -> List[str]:
    """gpu_quotas' refusals over the planned hosts. A share of a resource no planned host advertises is not one:
    the module gives it no quota with a warning (teams may be declared before the layout that gives them)."""
    nodes = planned_nodes(node_plans, mig_strategy)
    if not nodes or not teams:
        return []
    plan = plan_quotas(nodes, teams, overcommit)
    return ["gpufleet_teams over the planned hosts (%s): %s" % (", ".join(n["node"] for n in nodes), problem)
            for problem in plan_problems(plan, teams)]
