# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node taints the inventory declares (gpufleet_node_taints per host or group), and their tolerations."""

from __future__ import annotations

from typing import Any, Dict

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._taints import node_taints, taint_report, taint_tolerations

DOCUMENTATION = r"""
name: node_taints
short_description: The node taints the inventory declares, per node
version_added: 0.3.0
description:
  - One entry C({node, taints}) per host of O(hosts), with the host's C(gpufleet_node_taints) (set it per
    inventory group), an empty list for a host that declares none (so that the taints the collection set
    there are removed); the node name is C(gpufleet_node_name), else the host name. The input of
    M(gpufleet.sharing.node_taints).
  - The filter C(taint_tolerations) of the same file returns the tolerations that those taints need
    (without duplicates), for the operator's DaemonSets and the verification pods; C(taint_report) lists
    invalid taints and taints that given operand tolerations do not tolerate (preflight).
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
"""

EXAMPLES = r"""
- name: Taint the GPU nodes
  gpufleet.sharing.node_taints:
    nodes: "{{ hostvars | gpufleet.sharing.node_taints(groups['gpu_hosts']) }}"
"""

RETURN = r"""
_value:
  description: One entry per host with C(node) and C(taints) (empty when the host declares none).
  type: list
  elements: dict
"""


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"node_taints": node_taints, "taint_report": taint_report, "taint_tolerations": taint_tolerations}
