#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: fleet_info
short_description: Read the GPU nodes' state labels, the collection's annotations and cordons, and the rollout lock
version_added: 0.3.0
description:
  - Read-only (it never writes, in check mode or not), for C(playbooks/drift.yml).
  - Per node of O(nodes), the operator's state labels (C(nvidia.com/mig.config.state), C(nvidia.com/gpu-driver-upgrade-state)),
    the annotations of the collection (C(gpufleet.sharing/*)), whether the node is cordoned and since when
    (the C(timeAdded) of its C(node.kubernetes.io/unschedulable) taint), and since when the MIG manager
    has failed (the last C(MigConfigFailed) Warning event on the node, as the MIG manager records it).
  - The rollout lock, a C(coordination.k8s.io/v1) Lease (see M(gpufleet.sharing.rollout_lock)).
  - Uses the verbs list on C(nodes) and C(events) and get on C(leases); with O(device_holders), list on
    C(resourceclaims) and C(resourceslices) (C(resource.k8s.io/v1)).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
attributes:
  check_mode:
    support: full
    description: Reads only, as a real run.
  diff_mode:
    support: none
    description: Changes nothing.
  platform:
    platforms: posix
    support: full
    description: Runs where the Python C(kubernetes) client is and talks to the API server.
  action_group:
    description: Use C(group/gpufleet.sharing.k8s) in C(module_defaults) to set the connection options once.
    support: full
    membership:
      - gpufleet.sharing.k8s
options:
  nodes:
    description: The nodes to read; a node not in the cluster is returned with C(exists=false).
    type: list
    elements: str
    required: true
  lock_name:
    description: Name of the rollout lock's Lease.
    type: str
    default: gpufleet-sharing-rollout
  lock_namespace:
    description: Namespace of the rollout lock's Lease.
    type: str
    default: kube-system
  device_holders:
    description:
      - Also read, per node, which pods hold which GPU device through a ResourceClaim (a DRA node), from the claims'
        C(status.allocation.devices.results) (driver C(gpu.nvidia.com), pool, device) and C(status.reservedFor),
        each device named by its C(uuid) as the node's ResourceSlices publish it (a MIG device by its own UUID).
        For the per-GPU drain scope of a MIG change (C(docs/rollout.md), "Drain scope").
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Read the GPU nodes and the rollout lock
  gpufleet.sharing.fleet_info:
    nodes: [gpu-a, gpu-b]
  delegate_to: localhost
  register: fleet
"""

RETURN = r"""
nodes:
  description:
    - Per node, C(exists), C(labels) (the state labels it carries), C(annotations) (ours), C(unschedulable),
      C(cordoned_since) and C(mig_failed_since) (the last C(MigConfigFailed) event's time, or null).
  returned: always
  type: dict
  sample: {gpu-a: {exists: true, labels: {nvidia.com/mig.config.state: failed}, annotations: {}, unschedulable: false,
                   cordoned_since: null, mig_failed_since: "2026-12-01T10:00:00Z"}}
lease:
  description: The rollout lock's Lease (C(metadata.name), C(spec)), or null when there is none.
  returned: always
  type: dict
lock_namespace_missing:
  description:
    - O(lock_namespace) when no Lease was found because that namespace does not exist (the lock's state is then
      unknown, and a rollout could not take it), else null.
  returned: always
  type: str
  sample: null
device_holders:
  description:
    - With O(device_holders), per node, one entry per (pod, allocated device) - C(pod_uid), C(container) (the
      claim, C(claim <namespace>/<name>)), C(resource) (the driver) and C(device_id) (the device's UUID, or
      C(<pool>/<device>) when no ResourceSlice of the node lists it); else absent.
  returned: when O(device_holders) is true
  type: dict
  sample: {gpu-a: [{pod_uid: 0c5d..., container: claim work/trainer-a-gpu-x7k2p, resource: gpu.nvidia.com,
                    device_id: GPU-8f2e...}]}
now:
  description: The controller's clock (epoch seconds) when the Lease was read.
  returned: always
  type: float
"""

import time
from dataclasses import asdict
from typing import Any, Dict, List, Mapping

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._kubelet_devices import claim_holders
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule

STATE_LABELS = ("nvidia.com/mig.config.state", "nvidia.com/gpu-driver-upgrade-state")
OUR_PREFIX = "gpufleet.sharing/"
MIG_FAILED_EVENT = "MigConfigFailed"

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    nodes=dict(type="list", elements="str", required=True),
    lock_name=dict(type="str", default="gpufleet-sharing-rollout"),
    lock_namespace=dict(type="str", default="kube-system"),
    device_holders=dict(type="bool", default=False),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def node_state(node: Mapping[str, Any]) -> Dict[str, Any]:
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    labels, notes = meta.get("labels") or {}, meta.get("annotations") or {}
    since = [t.get("timeAdded") for t in spec.get("taints") or [] if t.get("key") == "node.kubernetes.io/unschedulable"]
    return {"exists": True, "labels": dict((k, labels[k]) for k in STATE_LABELS if k in labels),
            "annotations": dict((k, v) for k, v in notes.items() if k.startswith(OUR_PREFIX)),
            "unschedulable": bool(spec.get("unschedulable")), "cordoned_since": (since or [None])[0]}


def mig_failures(events: List[Mapping[str, Any]]) -> Dict[str, str]:
    """Node -> time of its last MigConfigFailed event."""
    last: Dict[str, str] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        when = event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp")
        if event.get("reason") == MIG_FAILED_EVENT and involved.get("kind") == "Node" and when:
            last[involved.get("name")] = max(when, last.get(involved.get("name"), ""))
    return last


def run(mod: ClusterModule) -> None:
    params = mod.params
    listed = dict(((n.get("metadata") or {}).get("name"), n) for n in mod.k8s.list("Node"))
    failed = mig_failures(mod.k8s.list("Event", field_selector="involvedObject.kind=Node,reason=" + MIG_FAILED_EVENT))
    absent = {"exists": False, "labels": {}, "annotations": {}, "unschedulable": False, "cordoned_since": None}
    mod.result["nodes"] = dict((name, dict(node_state(listed[name]) if name in listed else absent,
                                           mig_failed_since=failed.get(name)))
                               for name in params["nodes"])
    lease = mod.k8s.get("Lease", params["lock_name"], namespace=params["lock_namespace"])
    mod.result["now"] = time.time()
    mod.result["lease"] = {"metadata": {"name": params["lock_name"]}, "spec": lease.get("spec") or {}} if lease else None
    # No Lease in a namespace that does not exist: the lock's state is unknown, not free (issue 43).
    missing = lease is None and mod.k8s.get("Namespace", params["lock_namespace"]) is None
    mod.result["lock_namespace_missing"] = params["lock_namespace"] if missing else None
    if params["device_holders"]:
        claims, slices = mod.k8s.list("ResourceClaim"), mod.k8s.list("ResourceSlice")
        mod.result["device_holders"] = dict((name, [asdict(h) for h in claim_holders(claims, slices, name)])
                                            for name in params["nodes"])


if __name__ == "__main__":
    main()
