# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host plans of the fleet, from the inventory, for gpu_sharing and gpu_verify."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once, node_name

DOCUMENTATION = r"""
name: node_plans
short_description: The per-host plans of the fleet (GPUs, MIG selection, sharing config) from the inventory
version_added: 0.1.0
description:
  - Builds the O(gpufleet.sharing.gpu_sharing#module:node_plans) option of M(gpufleet.sharing.gpu_sharing)
    and M(gpufleet.sharing.gpu_verify) from the variables of the given hosts, in one place (the
    C(gpu_sharing) and C(verify) roles use it).
  - Per host, the Kubernetes node name (C(gpufleet_node_name), else the inventory host name), its GPU
    facts (C(ansible_facts.gpufleet_gpus), when gathered), its MIG selection (the C(mig_selection)
    fact that the C(mig) role's C(selection) tasks record from C(mig_config) and C(mig_configs), with
    that role's defaults) and its sharing config (C(gpu_sharing_config)).
  - A host with neither GPU facts nor a sharing config is left out (its node is then read from its labels).
  - The filter C(node_name) in the same file gives one host's node name, the same rule
    (C(inventory_hostname | gpufleet.sharing.node_name(hostvars))), the one place the rule is written.
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
"""

EXAMPLES = r"""
- name: Verify against the inventory's plan
  gpufleet.sharing.gpu_verify:
    node_plans: "{{ hostvars | gpufleet.sharing.node_plans(ansible_play_hosts_all) }}"
"""

RETURN = r"""
_value:
  description: One entry per host, with C(node) and any of C(gpu_facts), C(mig_config), C(mig_configs), C(sharing_config).
  type: list
  elements: dict
"""


def node_of(host: str, hostvars: Mapping[str, Any]) -> str:
    """The filter C(node_name): ``inventory_hostname | gpufleet.sharing.node_name(hostvars)``."""
    return node_name(host, hostvars[host])


def host_entry(host: str, host_vars: Mapping[str, Any]) -> Dict[str, Any]:
    """One host's plan entry (only ``node`` when the host gives nothing to plan with)."""
    entry: Dict[str, Any] = {"node": node_name(host, host_vars)}
    facts = (host_vars.get("ansible_facts") or {}).get("gpufleet_gpus") or []
    if facts:
        selection = host_vars.get("mig_selection") or {}
        entry["gpu_facts"] = list(facts)
        if selection.get("config"):
            entry["mig_config"] = selection["config"]
        entry["mig_configs"] = dict(selection.get("configs") or {})
    if host_vars.get("gpu_sharing_config"):
        entry["sharing_config"] = host_vars["gpu_sharing_config"]
    return entry


@hostvars_once
def node_plans(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> List[Dict[str, Any]]:
    entries = [host_entry(host, hostvars[host]) for host in hosts]
    return [entry for entry in entries if len(entry) > 1]


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"node_plans": node_plans, "node_name": node_of}
