# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node taints the inventory declares (gpufleet_node_taints per host or group), and their tolerations."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from ansible_collections.gpufleet.sharing.plugins.filter.node_plans import node_name
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._taints import (
    GPU_TOLERATION, taint_problems, tolerations_for, untolerated)

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


def node_taints(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> List[Dict[str, Any]]:
    """Every host, those without gpufleet_node_taints with no taint: removing the variable must remove the
    taints the collection set (issue 21: they used to stay while the operator's tolerations went)."""
    return [{"node": node_name(host, hostvars[host]), "taints": hostvars[host].get("gpufleet_node_taints", [])}
            for host in hosts]


def _declaring(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> List[Dict[str, Any]]:
    return [entry for host, entry in zip(hosts, node_taints(hostvars, hosts)) if "gpufleet_node_taints" in hostvars[host]]


def _declared(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> List[Mapping[str, Any]]:
    return [t for entry in _declaring(hostvars, hosts) if isinstance(entry["taints"], list)
            for t in entry["taints"] if isinstance(t, Mapping) and t.get("key") and t.get("effect")]


def taint_tolerations(hostvars: Mapping[str, Any], hosts: Sequence[str], base: Any = None,
                      gpu_default: bool = False) -> List[Dict[str, Any]]:
    """``base`` (else the operator's nvidia.com/gpu toleration when ``gpu_default``, else nothing) plus a
    toleration for every declared taint it does not tolerate yet."""
    start = list(base or ([GPU_TOLERATION] if gpu_default else []))
    return tolerations_for(_declared(hostvars, hosts), start)


def taint_report(hostvars: Mapping[str, Any], hosts: Sequence[str], tolerations: Sequence[Mapping[str, Any]]) -> List[str]:
    """Preflight: every invalid declared taint, and every taint that ``tolerations`` (the operands') do not tolerate."""
    problems: List[str] = []
    for entry in _declaring(hostvars, hosts):
        where = "host %s (gpufleet_node_taints)" % entry["node"]
        found = taint_problems(entry["taints"], where)
        problems += found
        if not found:
            problems += ["%s: taint %s=%s:%s is tolerated by no operand of the GPU Operator (gpu_operator_tolerations)"
                         % (where, t["key"], t.get("value", ""), t["effect"])
                         for t in untolerated(entry["taints"], [GPU_TOLERATION] + list(tolerations or []))]
    return problems


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"node_taints": node_taints, "taint_report": taint_report, "taint_tolerations": taint_tolerations}
