# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU node groups of the inventory, for node_group_templates."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once, node_name
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._node_group_hosts import NodeGroupError, node_groups as groups_of

DOCUMENTATION = r"""
name: node_groups
short_description: The GPU node groups of the inventory, as node_group_templates takes them
version_added: 0.5.0
description:
  - One entry per node group of O(hosts), the input of O(gpufleet.sharing.node_group_templates#module:groups).
  - A host's node group is its C(gpufleet_node_group), else its one inventory group besides O(gpu_group) and the
    groups that hold every host of O(gpu_group) (fleet-wide groups, told by O(inventory_groups)), else O(gpu_group)
    itself. A host in several such groups without C(gpufleet_node_group) is an error naming it.
  - Per group its nodes (C(gpufleet_node_name), else the host name) and, the same for every host of the group
    or an error naming the hosts that differ, C(gpufleet_gpu_backend), C(gpufleet_node_taints),
    C(gpufleet_node_capacity) (any of C(cpu), C(memory), C(maxPods)), C(gpufleet_mig_backend), the MIG selection
    and C(gpufleet_karpenter_nodepool).
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
options:
  gpu_group:
    description: The inventory group of all GPU hosts, which is no node group of its own when a host has another.
    type: str
    default: gpu_hosts
  inventory_groups:
    description: Ansible's C(groups) (group name to its hosts), to tell the fleet-wide groups. Omitted, none is.
    type: dict
"""

EXAMPLES = r"""
- name: The node groups of the GPU hosts
  ansible.builtin.debug:
    msg: "{{ hostvars | gpufleet.sharing.node_groups(groups['gpu_hosts'], 'gpu_hosts', groups) }}"
"""

RETURN = r"""
_value:
  description: One entry per node group with C(name), C(nodes) and the group's C(backend), C(taints), C(capacity),
    C(mig_backend), C(mig_config) and, when set, C(karpenter_nodepool).
  type: list
  elements: dict
"""


@hostvars_once
def node_groups(hostvars: Mapping[str, Any], hosts: Sequence[str], gpu_group: str = "gpu_hosts",
                inventory_groups: Optional[Mapping[str, Sequence[str]]] = None) -> List[Dict[str, Any]]:
    try:
        return groups_of([(host, node_name(host, hostvars[host]), hostvars[host]) for host in hosts], gpu_group, inventory_groups)
    except NodeGroupError as exc:
        raise AnsibleFilterError("; ".join(exc.problems))


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"node_groups": node_groups}
