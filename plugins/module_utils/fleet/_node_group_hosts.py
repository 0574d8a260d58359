# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU node groups of an inventory (issue 39): which group each host is in and what the inventory says of
the group's machines, as ``node_group_templates``' option ``groups``.

Pure. A host's group is its ``gpufleet_node_group``, else its one inventory group besides the GPU hosts'
group (``gpu_hosts``) and the groups that hold every GPU host (fleet-wide groups such as a lab's
``lab_gpu_hosts``, a site's ``k8s_cluster``), else the GPU hosts' group itself. What must be the same for every host of a group (backend,
taints, machine capacity, MIG backend and selection, Karpenter NodePool, Cluster API MachineDeployments) is, or the group is refused."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._errors import ProblemsError
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import DEFAULT_MIG_CONFIG

# group field -> how it is read from one host's variables
_FIELDS = (
    ("backend", lambda v: v.get("gpufleet_gpu_backend", "device-plugin")),
    ("taints", lambda v: list(v.get("gpufleet_node_taints") or [])),
    ("capacity", lambda v: dict(v.get("gpufleet_node_capacity") or {})),
    ("mig_backend", lambda v: v.get("gpufleet_mig_backend") or "host"),
    ("mig_config", lambda v: (v.get("mig_selection") or {}).get("config") or v.get("mig_config") or DEFAULT_MIG_CONFIG),
    ("karpenter_nodepool", lambda v: v.get("gpufleet_karpenter_nodepool")),
    ("machine_deployments", lambda v: v.get("gpufleet_machine_deployments")),
)
IGNORED_GROUPS = ("all", "ungrouped")


class NodeGroupError(ProblemsError):
    """The inventory's node groups cannot be told."""


def fleet_wide(inventory_groups: Mapping[str, Sequence[str]], gpu_group: str) -> List[str]:
    """The inventory groups that hold every host of ``gpu_group`` (never a node group)."""
    every = set(inventory_groups.get(gpu_group) or ())
    return sorted(g for g, members in inventory_groups.items() if every and every <= set(members or ()))


def group_of(host: str, host_vars: Mapping[str, Any], gpu_group: str, ignored: Sequence[str] = ()) -> Tuple[str, str]:
    """(group, problem): the host's node group, or why it has none."""
    chosen = host_vars.get("gpufleet_node_group")
    if chosen:
        return str(chosen), ""
    names = [g for g in host_vars.get("group_names") or [] if g != gpu_group and g not in IGNORED_GROUPS and g not in ignored]
    if len(names) > 1:
        return "", ("host %s is in the groups %s besides %s: set gpufleet_node_group to the one its node group is"
                    % (host, ", ".join(names), gpu_group))
    return (names[0] if names else gpu_group), ""


def node_groups(hosts: Sequence[Tuple[str, str, Mapping[str, Any]]], gpu_group: str = "gpu_hosts",
                inventory_groups: Optional[Mapping[str, Sequence[str]]] = None) -> List[Dict[str, Any]]:
    """``[(host, node name, host variables)]`` -> ``[{name, nodes, backend, taints, capacity, ...}]`` in inventory
    order; ``inventory_groups`` (Ansible's ``groups``) tells the fleet-wide groups."""
    ignored = fleet_wide(inventory_groups or {}, gpu_group)
    problems: List[str] = []
    groups: Dict[str, Dict[str, Any]] = {}
    seen: Dict[str, Dict[str, List[str]]] = {}
    for host, node, host_vars in hosts:
        name, problem = group_of(host, host_vars, gpu_group, ignored)
        if problem:
            problems.append(problem)
            continue
        group = groups.setdefault(name, {"name": name, "nodes": []})
        group["nodes"].append(node)
        for field, read in _FIELDS:
            value = read(host_vars)
            group.setdefault(field, value)
            seen.setdefault(name + "\0" + field, {}).setdefault(repr(value), []).append(host)
    for key, values in sorted(seen.items()):
        if len(values) > 1:
            name, field = key.split("\0")
            problems.append("node group %r: its hosts differ in %s (%s): one node group, one template" % (
                name, field, "; ".join("%s: %s" % (", ".join(h), v) for v, h in values.items())))
    if problems:
        raise NodeGroupError(problems)
    return [{k: v for k, v in g.items() if v is not None} for g in groups.values()]
