#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rollout_lock
short_description: Take, renew or release the rollout lock (a coordination.k8s.io/v1 Lease)
version_added: 0.2.0
description:
  - Keeps two rollouts from changing the same cluster at once with a Kubernetes Lease, as leader
    election does, so that C(kubectl get lease) shows who holds it.
  - V(acquired) creates the Lease, or takes it over when its holder stopped renewing it
    (C(renewTime) + C(leaseDurationSeconds) in the past, for example a run that crashed), or renews it
    when O(holder) already holds it. A Lease that another holder renewed in time is refused with
    "held by X since T (expires E)".
  - V(renewed) moves C(renewTime) to now; it fails when O(holder) does not hold the Lease.
  - V(released) deletes the Lease when O(holder) holds it, and leaves another holder's Lease alone.
  - V(checked) only reads. It refuses a Lease that another holder renewed in time, as V(acquired) would, and
    otherwise says V(free), or that the lease of X had expired (a message that starts with V(expired)), without writing. A run checks the lock
    first and takes it only when it has something to change (C(roles/rollout)); what the take says must then
    agree with the check (C(taken_as_checked) in C(module_utils/fleet/_rollout_lock.py)).
  - Uses the verbs get, create, update and delete on C(leases) of group C(coordination.k8s.io), and
    list on C(nodes) with O(state=acquired) or O(state=checked).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
attributes:
  check_mode:
    description: Reads the Lease and decides as a real run (a held lock is refused); the write is a server-side dry run.
options:
  holder:
    description: Identity of this run, for example V(<run id> <user>@<controller host>); 1 to 128 printable characters.
    type: str
    required: true
  state:
    description:
      - Whether O(holder) should hold the lock (V(acquired), V(renewed)) or not (V(released)), or whether it
        could take it (V(checked), a read).
    type: str
    choices: [acquired, renewed, released, checked]
    default: acquired
  name:
    description: Name of the Lease.
    type: str
    default: gpufleet-sharing-rollout
  namespace:
    description: Namespace of the Lease.
    type: str
    default: kube-system
  node_annotation:
    description:
      - Node annotation a rollout leaves on the nodes it works on. With O(state=acquired), the nodes
        that carry it (a failed or interrupted run's nodes) are returned in RV(annotated_nodes), so
        that the run picks them up again.
    type: str
    default: gpufleet.sharing/rollout
  as_checked:
    description:
      - With O(state=acquired), the RV(message) of the V(checked) call this take follows. The take is refused,
        before any write, when the Lease changed hands since that check (another run held it in between), so
        that nothing read or planned after the check is used stale; run again.
    type: str
  lease_duration:
    description:
      - Seconds the lock stays held after its last renewal (C(leaseDurationSeconds)); after that another
        run may take it. Must be longer than the time between two renewals.
      - From 1 to 86400 (a day), so that the Lease's int32 field never overflows and a dead run's lock expires.
    type: int
    default: 1800
"""

EXAMPLES = r"""
- name: Take the rollout lock
  gpufleet.sharing.rollout_lock:
    holder: "20261201T035552-4711 alice@ctl-1"
    lease_duration: 1800
  delegate_to: localhost

- name: Check that no other run holds the lock (writes nothing)
  gpufleet.sharing.rollout_lock:
    holder: "20261201T035552-4711 alice@ctl-1"
    state: checked
  delegate_to: localhost
  register: rollout_lock_check
"""

RETURN = r"""
message:
  description:
    - What was done, for example V(acquired), V(renewed), V(released) or V(not held).
    - With O(state=checked), V(free) or a message that starts with V(expired).
  returned: always
  type: str
annotated_nodes:
  description: Nodes carrying O(node_annotation), with its value and whether the node is cordoned.
  returned: when O(state=acquired) or O(state=checked)
  type: dict
  sample: {gpu-node-07: {annotation: "failed: verification timed out", unschedulable: true}}
paused_nodes:
  description:
    - Nodes whose GPU operands an interrupted run left paused (annotation C(gpufleet.sharing/paused-operands),
      see M(gpufleet.sharing.gpu_operands)), with the annotation's value and whether the node is cordoned.
  returned: when O(state=acquired) or O(state=checked)
  type: dict
lease:
  description: The Lease's spec after the change (holderIdentity, acquireTime, renewTime, leaseDurationSeconds).
  returned: when O(holder) holds the lock
  type: dict
"""

import time
from typing import Any, Dict, List

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operands import PAUSED_ANNOTATION
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._rollout_lock import (
    LEASE_API_VERSION, decide, lock_option_problems, taken_as_checked)
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._run_inputs import lock_problems

ATTEMPTS = 3  # another run may create or update the Lease between our read and our write

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    holder=dict(type="str", required=True),
    state=dict(type="str", default="acquired", choices=["acquired", "renewed", "released", "checked"]),
    name=dict(type="str", default="gpufleet-sharing-rollout"),
    namespace=dict(type="str", default="kube-system"),
    node_annotation=dict(type="str", default="gpufleet.sharing/rollout"),
    lease_duration=dict(type="int", default=1800),
    as_checked=dict(type="str"),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def run(mod: ClusterModule) -> None:
    params = mod.params
    # the bounds preflight checks too, then the names
    problems = lock_problems(params["lease_duration"], params["holder"]) + lock_option_problems(params)
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    for attempt in range(ATTEMPTS):
        try:
            step(mod)
            break
        except K8sError as exc:
            if exc.status != 409 or attempt == ATTEMPTS - 1:
                raise
    if params["state"] in ("acquired", "checked"):
        nodes = mod.k8s.list("Node")
        mod.result["annotated_nodes"] = annotated_nodes(nodes, params["node_annotation"])
        mod.result["paused_nodes"] = annotated_nodes(nodes, PAUSED_ANNOTATION)


def annotated_nodes(nodes: List[Dict[str, Any]], key: str) -> Dict[str, Dict[str, Any]]:
    found = {}
    for node in nodes:
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if key in annotations:
            found[node["metadata"]["name"]] = {"annotation": annotations[key],
                                               "unschedulable": bool((node.get("spec") or {}).get("unschedulable"))}
    return found


def step(mod: ClusterModule) -> None:
    """Read the Lease, decide, write; a 409 (raced by another run) propagates for a new attempt."""
    params, k8s = mod.params, mod.k8s
    where = "rollout lock %s/%s" % (params["namespace"], params["name"])
    lease = k8s.get("Lease", params["name"], namespace=params["namespace"])
    decision = decide(lease, params["state"], params["holder"], params["lease_duration"], time.time())
    mod.result["message"] = decision.message
    if decision.action == "refuse":
        mod.fail("%s is %s" % (where, decision.message))
    if params["state"] == "acquired" and params["as_checked"] is not None \
            and not taken_as_checked(params["as_checked"], decision.message):
        mod.fail("%s changed hands since this run checked it (checked: %s; now: %s): nothing was changed, run again"
                 % (where, params["as_checked"], decision.message))
    if decision.action == "delete":
        k8s.delete("Lease", params["name"], namespace=params["namespace"])
    elif decision.action == "create":
        k8s.create({"apiVersion": LEASE_API_VERSION, "kind": "Lease", "spec": decision.spec,
                    "metadata": {"name": params["name"], "namespace": params["namespace"]}})
    elif decision.action == "update":
        body = dict(lease or {}, spec=decision.spec)
        k8s.replace(body)  # carries metadata.resourceVersion: a concurrent change answers 409
    if decision.spec is not None:
        mod.result["lease"] = decision.spec
    mod.result["changed"] = decision.action != "none"


if __name__ == "__main__":
    main()
