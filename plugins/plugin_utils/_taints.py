# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node taints the inventory declares (gpufleet_node_taints per host or group), and their tolerations."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._taints import GPU_TOLERATION, taint_problems, tolerations_for, untolerated
from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once, node_name


@hostvars_once
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


@hostvars_once
def taint_tolerations(hostvars: Mapping[str, Any], hosts: Sequence[str], base: Any = None,
                      gpu_default: bool = False) -> List[Dict[str, Any]]:
    """``base`` (else the operator's nvidia.com/gpu toleration when ``gpu_default``, else nothing) plus a
    toleration for every declared taint it does not tolerate yet."""
    start = list(base or ([GPU_TOLERATION] if gpu_default else []))
    return tolerations_for(_declared(hostvars, hosts), start)


@hostvars_once
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
