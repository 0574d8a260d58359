# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes nodes of each GPU allocation backend (gpufleet_gpu_backend per host or group)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sharing.plugins.plugin_utils._hostvars import hostvars_once, node_name
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_preflight import BACKENDS, backend_of, backend_problem

DOCUMENTATION = r"""
name: backend_nodes
short_description: The nodes of each GPU allocation backend
version_added: 0.3.0
description:
  - A mapping with the keys V(device-plugin) and V(dra), each the node names (C(gpufleet_node_name), else the
    host name) of the O(hosts) on that backend (their C(gpufleet_gpu_backend), default V(device-plugin)); the input of
    the options O(gpufleet.sharing.gpu_dra_driver#module:dra_nodes) and
    O(gpufleet.sharing.gpu_dra_driver#module:device_plugin_nodes).
  - An unknown backend, or both named for one host, is an error naming the host (the preflight reports it first).
  - The filter C(backend_hosts) of the same file goes the other way - C(hostvars | backend_hosts(hosts, nodes)) - the
    hosts of O(hosts) whose node is one of the given node names (for example the nodes that move between backends).
extends_documentation_fragment:
  - gpufleet.sharing.fleet_filter
"""

EXAMPLES = r"""
- name: The nodes on DRA
  ansible.builtin.debug:
    msg: "{{ (hostvars | gpufleet.sharing.backend_nodes(groups['gpu_hosts']))['dra'] }}"
"""

RETURN = r"""
_value:
  description: Backend name to the list of its node names, in inventory order.
  type: dict
"""


@hostvars_once
def backend_nodes(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {backend: [] for backend in BACKENDS}
    for host in hosts:
        backend = backend_of(hostvars[host])
        problem = backend_problem(backend)
        if problem:
            raise AnsibleFilterError("%s: %s" % (host, problem))
        found[backend].append(node_name(host, hostvars[host]))
    return found


@hostvars_once
def backend_hosts(hostvars: Mapping[str, Any], hosts: Sequence[str], nodes: Sequence[str]) -> List[str]:
    """The hosts (in the order given) whose node is one of ``nodes``."""
    return [host for host in hosts if node_name(host, hostvars[host]) in set(nodes or [])]


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"backend_nodes": backend_nodes, "backend_hosts": backend_hosts}
