#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_maintenance
short_description: Cordon, drain or uncordon a Kubernetes node
version_added: 0.1.0
description:
  - Marks a node unschedulable (V(cordon)), evicts its pods through the Eviction API (V(drain)),
    or makes it schedulable again (V(uncordon)).
  - Draining honours PodDisruptionBudgets. An eviction refused with HTTP 429 because a budget
    allows no disruption is tried again until O(timeout). Then the module waits until the evicted
    pods are gone.
  - Mirror (static) pods and DaemonSet pods are left alone. Pods with C(emptyDir) volumes are
    evicted only with O(delete_emptydir_data=true), pods without a controller only with O(force=true);
    otherwise the drain stops before changing anything and lists those pods.
  - Optionally sets or removes annotations on the node, for example the reason of the maintenance.
  - Cordon ownership. A cordon this module sets is marked with the annotation
    C(gpufleet.sharing/cordoned-by) (the O(run_id)). V(uncordon) lifts only such a cordon; a node
    that someone else cordoned stays cordoned (RV(left_cordoned)), unless O(force_uncordon=true).
    V(cordon) and V(drain) on a node that is already cordoned leave that cordon and its owner as
    they are.
  - Restarts selected pods of the node (V(restart_pods)), waiting for their replacements.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
attributes:
  check_mode:
    description:
      - Reads and plans as a real run; the annotations, the cordon, the evictions and the pod
        deletions are sent as server-side dry runs (C(dryRun=All)), so nothing is changed, and nothing
        is waited for. RV(would_evict) lists the pods a drain would evict.
options:
  node:
    description: Name of the node.
    type: str
    required: true
  state:
    description:
      - V(cordon) makes the node unschedulable.
      - V(drain) cordons it and evicts its pods.
      - V(uncordon) makes it schedulable again.
      - V(restart_pods) deletes the node's pods that match O(pod_selectors) in O(namespace) and waits
        until a Ready replacement of each runs on the node, for example the device plugin and GPU
        Feature Discovery after a MIG change made on the host (they only enumerate MIG devices when
        they start). It always restarts (changed when a pod was restarted); the node's
        schedulability is left as it is.
    type: str
    choices: [cordon, drain, uncordon, restart_pods]
    required: true
  namespace:
    description: Namespace of the pods to restart with O(state=restart_pods).
    type: str
    default: gpu-operator
  pod_selectors:
    description:
      - Label selectors of the pods to restart with O(state=restart_pods), one per kind of pod
        (each must get a Ready replacement), for example V(app=nvidia-device-plugin-daemonset).
    type: list
    elements: str
    default: []
  pod_uids:
    description:
      - With O(state=drain), evict only the node's pods whose UID is in this list, for example the pods
        that hold a device of the GPUs a MIG change touches (the rollout's per-GPU scope,
        C(gpufleet_mig_drain_scope=gpu)); the other pods stay on the node, listed in RV(left_on_node)
        with the reason. The drain rules (DaemonSet, mirror, C(emptyDir), unmanaged pods) apply to the
        listed pods. An empty list evicts nothing (the node is still cordoned); omitted, every pod.
    type: list
    elements: str
  delete_emptydir_data:
    description: Evict pods that use C(emptyDir) volumes; the data in those volumes is lost.
    type: bool
    default: false
  force:
    description: Evict pods that no controller manages; they are not recreated anywhere.
    type: bool
    default: false
  grace_period:
    description: Termination grace period in seconds given to evicted pods; default is the pod's own.
    type: int
  timeout:
    description: Seconds to spend on evictions (PodDisruptionBudget retries included) and on waiting for the pods to go.
    type: int
    default: 300
  poll_interval:
    description: Seconds between two eviction rounds or checks (the longest pause; the first checks of a wait come sooner, after 0.25 s, 0.5 s, 1 s and so on).
    type: float
    default: 2
  run_id:
    description:
      - Id of this run, written to the annotation C(gpufleet.sharing/cordoned-by) when the module
        cordons the node. Default C(node_maintenance-<UTC time>).
    type: str
  force_uncordon:
    description:
      - With O(state=uncordon), also lift a cordon that the collection did not set (by an
        administrator or another controller).
    type: bool
    default: false
  annotations:
    description:
      - Annotations to set on the node (a null value removes the annotation), for example the
        reason of the maintenance under C(gpufleet.sharing/maintenance-reason).
    type: dict
"""

EXAMPLES = r"""
- name: Drain a GPU node before maintenance
  gpufleet.sharing.node_maintenance:
    node: gpu-node-07
    state: drain
    delete_emptydir_data: true
    timeout: 600
    annotations:
      gpufleet.sharing/maintenance-reason: "GPU firmware update"
  delegate_to: localhost

- name: Put it back into service
  gpufleet.sharing.node_maintenance:
    node: gpu-node-07
    state: uncordon
    annotations:
      gpufleet.sharing/maintenance-reason: null
  delegate_to: localhost
"""

RETURN = r"""
node:
  description: Name of the node.
  returned: always
  type: str
  sample: gpu-node-07
restarted:
  description: Pods restarted (namespace/name), or that would be in check mode.
  returned: when O(state=restart_pods)
  type: list
  elements: str
  sample: [gpu-operator/nvidia-device-plugin-daemonset-x2v9q]
unschedulable:
  description: Whether the node is unschedulable at the end (as planned, in check mode).
  returned: when O(state) is not V(restart_pods)
  type: bool
  sample: true
cordoned_by:
  description: Run id in the node's C(gpufleet.sharing/cordoned-by) annotation at the end; null
    when the node is not cordoned by the collection.
  returned: when O(state) is not V(restart_pods)
  type: str
  sample: rollout-20261201T040000Z
node_missing:
  description: The node does not exist (the module failed); the rollout reports such a node as deleted
    during the run.
  returned: when the node is not found
  type: bool
  sample: true
left_cordoned:
  description: With O(state=uncordon), the node stays cordoned because the collection did not
    cordon it (set O(force_uncordon=true) to lift it anyway).
  returned: when O(state=uncordon)
  type: bool
evicted:
  description: Pods evicted (namespace/name).
  returned: always
  type: list
  elements: str
  sample: [team-a/trainer-0]
would_evict:
  description: Pods a drain would evict (check mode).
  returned: in check mode with O(state=drain)
  type: list
  elements: str
left_on_node:
  description:
    - Pods a drain leaves on the node (DaemonSet and mirror pods) and why.
    - Named so because a result key C(skipped) would make Ansible report the task as skipped.
  returned: when O(state=drain)
  type: list
  elements: dict
  sample: [{pod: gpu-operator/nvidia-device-plugin-daemonset-x, reason: DaemonSet pod}]
blocking:
  description: Pods that stop the drain and why (nothing was changed).
  returned: on failure
  type: list
  elements: dict
"""

import copy
from typing import Any, Dict, List, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import (
    number_problems, object_name_problems, qualified_name_problem, selector_problem)
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_drain import (
    CORDON_OWNER, DrainError, Drainer, blocking_message, cordon, cordon_node, cordon_owner, default_run_id,
    planned_annotations, uncordon, uncordon_node)
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_maintenance_io import restart_pods

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    node=dict(type="str", required=True),
    state=dict(type="str", required=True, choices=["cordon", "drain", "uncordon", "restart_pods"]),
    namespace=dict(type="str", default="gpu-operator"),
    pod_selectors=dict(type="list", elements="str", default=[]),
    pod_uids=dict(type="list", elements="str"),
    delete_emptydir_data=dict(type="bool", default=False),
    force=dict(type="bool", default=False),
    grace_period=dict(type="int"),
    timeout=dict(type="int", default=300),
    poll_interval=dict(type="float", default=2),
    annotations=dict(type="dict"),
    run_id=dict(type="str"),
    force_uncordon=dict(type="bool", default=False),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def run(mod: ClusterModule) -> None:
    params = mod.params
    problems = option_problems(params)
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    if params["state"] == "restart_pods" and not params["pod_selectors"]:
        mod.fail("state=restart_pods needs pod_selectors (label selectors of the pods to restart)")
    mod.result.update(node=params["node"], evicted=[])
    if params["state"] == "restart_pods":
        restart_pods(mod)
    else:
        maintain(mod)


def option_problems(params: Dict[str, Any]) -> List[str]:
    """Every bad option, before any request."""
    problems = object_name_problems([("node", "Node", params["node"]), ("namespace", "Namespace", params["namespace"])])
    problems += number_problems(params, {"timeout": 0, "grace_period": 0}, ["poll_interval"])
    problems += [p for p in (selector_problem("pod_selectors", s) for s in params["pod_selectors"]) if p]
    problems += ["pod_uids: %r is not a pod UID" % uid for uid in params["pod_uids"] or []
                 if not uid or len(uid) > 128 or not all(c.isalnum() or c == "-" for c in uid)]
    if params["pod_uids"] is not None and params["state"] != "drain":
        problems.append("pod_uids: only with state=drain")
    problems += ["annotations: the value of %s must be a string (or null to remove it), got %s" % (k, type(v).__name__)
                 for k, v in (params["annotations"] or {}).items() if v is not None and not isinstance(v, str)]
    return problems + [p for p in (qualified_name_problem("annotations", k) for k in params["annotations"] or {}) if p]


def maintain(mod: ClusterModule) -> None:
    """cordon, drain or uncordon (with the annotations); only our own cordon is lifted."""
    k8s, params = mod.k8s, mod.params
    name, state = params["node"], params["state"]
    node = k8s.get("Node", name)
    if node is None:
        mod.fail("node %s not found" % name, node_missing=True)
    run_id = params["run_id"] or default_run_id("node_maintenance")
    planned = copy.deepcopy(node)
    if state == "uncordon":
        planned = uncordon_node(planned, params["force_uncordon"]) or planned
    else:
        planned = cordon_node(planned, run_id) or planned
    drainer: Optional[Drainer] = None
    if state == "drain":
        drainer = Drainer(k8s, name, params["delete_emptydir_data"], params["force"], params["timeout"],
                          params["poll_interval"], params["grace_period"],
                          progress=lambda what, elapsed, detail: mod.log(
                              "node_maintenance: %s: %.0fs: %s" % (what, elapsed, detail)),
                          only_uids=None if params["pod_uids"] is None else frozenset(params["pod_uids"]))
        to_evict, mod.result["left_on_node"], blocking = drainer.plan()
        if blocking:
            # Validate before changing anything: the node is not even cordoned.
            mod.fail(blocking_message("cannot drain node %s" % name, blocking), blocking=blocking)
        if to_evict:
            mod.changes.mark()
    mod.changes.record("node %s" % name, _summary(node), _summary(planned, params["annotations"]))
    mod.result.update(unschedulable=bool((planned.get("spec") or {}).get("unschedulable")),
                      cordoned_by=cordon_owner(planned))
    # A cordoned node always carries its reason: uncordon before removing it, annotate before a cordon.
    if state == "uncordon":
        _lifted, mod.result["left_cordoned"] = uncordon(k8s, name, params["force_uncordon"])
    if params["annotations"]:
        k8s.set_node_annotations(name, copy.deepcopy(params["annotations"]))
    if state != "uncordon":
        cordon(k8s, name, run_id)
    if drainer is not None:
        drain(mod, drainer)


def _summary(node: Dict[str, Any], annotations: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """What the diff shows of a node: schedulability and annotations (with ``annotations`` applied)."""
    current = dict((node.get("metadata") or {}).get("annotations") or {})
    if annotations and CORDON_OWNER in annotations:
        annotations = dict((k, v) for k, v in annotations.items() if k != CORDON_OWNER)
    return {"unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
            "annotations": planned_annotations(current, annotations)}


def drain(mod: ClusterModule, drainer: Drainer) -> None:
    try:
        # Re-read after cordoning: a pod may have been scheduled since the first look.
        to_evict, mod.result["left_on_node"], blocking = drainer.plan()
        drainer.check_blocking(blocking)
        if to_evict:
            mod.changes.mark()
            evicted = [entry["pod"] for entry in drainer.evict_all(to_evict)]
            mod.result["would_evict" if mod.check_mode else "evicted"] = evicted
    except DrainError as exc:
        mod.changes.mark()  # the node was cordoned (and maybe some pods evicted) before this
        mod.result["evicted"] = [entry["pod"] for entry in drainer.evicted]
        mod.fail(str(exc), blocking=exc.details)
    if mod.check_mode:
        mod.result.setdefault("would_evict", [])


if __name__ == "__main__":
    main()
