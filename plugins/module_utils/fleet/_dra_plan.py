# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The DRA devices of the fleet plan (pure): per node on the DRA backend, from its host plan, what its
kubelet plugin must publish (``sharing._dra_claims.node_devices``). See docs/dra.md."""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import FleetPlan, HostPlan
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import PlannedDevice, node_devices
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharingError


def plan_devices(fleet: FleetPlan, hosts: Mapping[str, HostPlan], nodes: Sequence[str]
                 ) -> Tuple[Dict[str, List[PlannedDevice]], List[str]]:
    """The devices of each DRA node (``nodes``; empty: every planned node of the fleet plan) from its
    host plan; a node without one is a problem naming it (under DRA no GFD label tells its GPUs)."""
    devices: Dict[str, List[PlannedDevice]] = {}
    problems: List[str] = []
    for name in sorted(nodes or [n for n in fleet.nodes if n in hosts]):
        host = hosts.get(name)
        try:
            gpus = host.planned_gpus() if host is not None else None
        except SharingError as exc:
            problems.extend(exc.problems)
            continue
        if not gpus:
            problems.append("node %s: no GPU plan (node_plans gpus or gpu_facts): the DRA devices it must publish "
                            "cannot be planned" % name)
            continue
        node = fleet.nodes.get(name)
        sharing = node.expected.sharing if node is not None and node.expected is not None else None
        devices[name] = node_devices(name, gpus, host.gpu_facts if host else (), sharing)
    return devices, problems
