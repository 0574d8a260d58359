#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_operands
short_description: Pause and restore the GPU Operator's operands of one node around a host MIG change
version_added: 0.2.0
description:
  - The GPU Operator's DaemonSet pods on a node (device plugin, GPU Feature Discovery, DCGM, DCGM
    exporter) hold the node's GPUs. They are no compute processes and a drain leaves them
    running, but while they run a MIG mode change stays pending and a GPU reset is refused.
  - V(paused) does what NVIDIA's MIG manager does before a change. It records the value of each
    C(nvidia.com/gpu.deploy.<operand>) label of O(operands) in the node annotation
    C(gpufleet.sharing/paused-operands) (JSON), sets the labels that are C(true) to
    C(paused-for-mig-change), and waits until the operands' pods are gone from the node.
  - With O(gpu_clients=true), V(paused) also does what the MIG manager of mig-parted v0.15.0 does
    for third-party GPU clients (node agents that hold the GPUs, e.g. monitoring agents and health
    checkers, whose DaemonSets select C(nvidia.com/gpu.deploy.client), a label the GPU Operator
    v26.7.0 sets to C(true) on GPU nodes). When the node carries that label with a value other
    than C(false), its value is recorded in the same annotation and the label set to
    C(paused-for-mig-change); then the module waits until every DaemonSet pod on the node whose
    nodeSelector uses that key is gone, in any namespace. V(restored) sets it back to its
    recorded value.
  - V(paused) also deletes the node's finished pods of the CUDA and plugin validations
    (C(app=nvidia-cuda-validator), C(app=nvidia-device-plugin-validator)), as the MIG manager does.
  - V(restored) sets each paused label back to B(its recorded value) (a label that was C(false)
    stays C(false), one that was absent is removed), waits until the operands that are on again
    run Ready on the node, restarts the node's C(nvidia-operator-validator) pod (it validates
    only when it starts, so it validates the new devices) and waits for its Ready replacement,
    and removes the annotation. Without the annotation there is nothing to restore.
  - An interrupted run leaves the annotation on the node; running V(paused) again keeps the values
    recorded first, and V(restored) restores them.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
attributes:
  check_mode:
    description:
      - Reads and plans as a real run; the annotation and label changes are sent as server-side
        dry runs (C(dryRun=All)), so nothing is changed, and nothing is waited for.
options:
  node:
    description: Name of the node.
    type: str
    required: true
  state:
    description: V(paused) before a host MIG change, V(restored) after it.
    type: str
    choices: [paused, restored]
    required: true
  operands:
    description:
      - Operands to pause, by the suffix of their C(nvidia.com/gpu.deploy.<operand>) label. The
        default is the MIG manager's list (V(device-plugin), V(gpu-feature-discovery),
        V(dcgm-exporter), V(dcgm), V(nvsm)). Any other name is an error and nothing is changed.
      - Only used with O(state=paused); V(restored) restores what the annotation recorded.
    type: list
    elements: str
    default: [device-plugin, gpu-feature-discovery, dcgm-exporter, dcgm, nvsm]
  gpu_clients:
    description:
      - Also pause C(nvidia.com/gpu.deploy.client) when the node carries it and wait for the
        third-party DaemonSet pods that select it to go (see the description). Only used with
        O(state=paused); nothing is done for it on a node without that label.
    type: bool
    default: true
    version_added: 0.3.0
  namespace:
    description: Namespace of the operator's pods.
    type: str
    default: gpu-operator
  timeout:
    description:
      - Seconds to wait for the pods to go (V(paused)) or to run Ready again (V(restored)).
      - V(restored) waits for the operands whose label is C(true) again and whose DaemonSet (named
        like the pods' C(app) label) exists in O(namespace).
    type: int
    default: 300
  poll_interval:
    description: Seconds between two checks (the longest pause; the first checks of a wait come sooner, after 0.25 s, 0.5 s, 1 s and so on).
    type: float
    default: 2
"""

EXAMPLES = r"""
- name: Pause the node's GPU operands before the MIG change
  gpufleet.sharing.gpu_operands:
    node: gpu-node-07
    state: paused
  delegate_to: localhost

- name: Restore them afterwards (each label to its previous value)
  gpufleet.sharing.gpu_operands:
    node: gpu-node-07
    state: restored
  delegate_to: localhost
"""

RETURN = r"""
node:
  description: Name of the node.
  returned: always
  type: str
  sample: gpu-node-07
previous:
  description: The recorded value of each deploy label before the pause (null when absent).
  returned: always
  type: dict
  sample: {"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.dcgm-exporter": "false"}
labels:
  description: Deploy labels this run set (null when removed), or would set in check mode.
  returned: always
  type: dict
  sample: {"nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"}
restarted:
  description: >-
    Validator pods deleted (C(namespace/name)): the finished validation pods with V(paused), the
    operator validator with V(restored) (replaced by its DaemonSet).
  returned: always
  type: list
  elements: str
  sample: [gpu-operator/nvidia-operator-validator-7xk2p]
waited_for:
  description: >-
    C(app) labels of the pods waited for (gone, or back and Ready); with V(paused) and
    O(gpu_clients=true) also C(nvidia.com/gpu.deploy.client), for the third-party client pods.
  returned: always
  type: list
  elements: str
"""

from typing import Any, Dict, List, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_drain import pod_key, pod_ready
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operands import (
    CLIENT_LABEL, DEFAULT_OPERANDS, OPERAND_APPS, PAUSED_ANNOTATION, READY_APPS, VALIDATION_APPS, VALIDATOR_APP, app_of,
    apps_to_wait, client_pods, encode_record, node_labels, node_record, plan_client_pause, plan_pause, plan_restore,
    operand_option_problems, pods_by_app)
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import number_problems, object_name_problems

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    node=dict(type="str", required=True),
    state=dict(type="str", required=True, choices=["paused", "restored"]),
    operands=dict(type="list", elements="str", default=list(DEFAULT_OPERANDS)),
    gpu_clients=dict(type="bool", default=True),
    namespace=dict(type="str", default="gpu-operator"),
    timeout=dict(type="int", default=300),
    poll_interval=dict(type="float", default=2),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def check_options(mod: ClusterModule) -> Dict[str, Any]:
    """Every option, then the node and the namespace, before the first write (issue 21: the node used to be
    paused, its operand pods deleted, before a bad namespace was refused). The node, read."""
    params = mod.params
    problems = object_name_problems([("node", "Node", params["node"]), ("namespace", "Namespace", params["namespace"])])
    problems += operand_option_problems(params["operands"])
    problems += number_problems(params, {"timeout": 0}, ["poll_interval"])
    if problems:
        mod.fail("nothing was changed: %s" % "; ".join(problems), problems=problems)
    node = mod.k8s.get("Node", params["node"])
    if node is None:
        mod.fail("node %s not found" % params["node"])
    if mod.k8s.get("Namespace", params["namespace"]) is None:
        mod.fail("namespace: %s not found (the GPU Operator's namespace); nothing was changed" % params["namespace"])
    return node


def run(mod: ClusterModule) -> None:
    params = mod.params
    node = check_options(mod)
    try:
        earlier = node_record(node)
    except ValueError as exc:
        mod.fail("node %s: %s" % (params["node"], exc))
    mod.result.update(node=params["node"], previous=earlier or {}, labels={}, waited_for=[], restarted=[])
    labels = node_labels(node)
    if params["state"] == "paused":
        pause(mod, labels, earlier)
    elif earlier is not None:
        restore(mod, labels, earlier)


def pause(mod: ClusterModule, labels: Dict[str, str], earlier: Any) -> None:
    name = mod.params["node"]
    record, changes = plan_pause(labels, mod.params["operands"], earlier)
    clients = mod.params["gpu_clients"]
    if clients:
        record, client_changes = plan_client_pause(labels, record)
        changes.update(client_changes)
    mod.result.update(previous=record, labels=changes)
    if earlier != record:  # first the record, so that an interruption leaves it behind
        mod.changes.record("node %s annotation %s" % (name, PAUSED_ANNOTATION), earlier, record)
        mod.k8s.set_node_annotations(name, {PAUSED_ANNOTATION: encode_record(record)})
    if changes:
        mod.changes.record("node %s deploy labels" % name, dict((k, labels.get(k)) for k in changes), changes)
        mod.k8s.set_node_labels(name, dict(changes))
    apps = apps_to_wait(record, record, OPERAND_APPS)
    mod.result["waited_for"] = apps + ([CLIENT_LABEL] if clients else [])
    if not mod.check_mode:
        wait(mod, apps, gone=True, clients=clients)
    delete_pods(mod, VALIDATION_APPS)


def restore(mod: ClusterModule, labels: Dict[str, str], record: Any) -> None:
    name = mod.params["node"]
    changes = plan_restore(labels, record)
    mod.result["labels"] = changes
    if changes:
        mod.changes.record("node %s deploy labels" % name, dict((k, labels.get(k)) for k in changes), changes)
        mod.k8s.set_node_labels(name, dict(changes))
    restored = dict(labels)
    restored.update(changes)
    # The operator sets every deploy label, also of components it does not run (e.g. dcgm):
    # wait only for operands whose DaemonSet exists.
    apps = [app for app in apps_to_wait(record, restored, READY_APPS)
            if mod.k8s.get("DaemonSet", app, mod.params["namespace"]) is not None]
    mod.result["waited_for"] = apps
    if not mod.check_mode:
        wait(mod, apps, gone=False)
    old = delete_pods(mod, (VALIDATOR_APP,))
    if old and not mod.check_mode and mod.k8s.get("DaemonSet", VALIDATOR_APP, mod.params["namespace"]) is not None:
        mod.result["waited_for"] = apps + [VALIDATOR_APP]
        wait(mod, [VALIDATOR_APP], gone=False, old=old)
    # Last: the record goes only once the operands are back.
    mod.changes.record("node %s annotation %s" % (name, PAUSED_ANNOTATION), record, None)
    mod.k8s.set_node_annotations(name, {PAUSED_ANNOTATION: None})


def delete_pods(mod: ClusterModule, apps: Sequence[str]) -> List[str]:
    """Delete the node's pods of ``apps``; their uids."""
    namespace = mod.params["namespace"]
    pods = [p for p in mod.k8s.list("Pod", namespace=namespace, field_selector="spec.nodeName=%s" % mod.params["node"])
            if app_of(p) in apps and not p["metadata"].get("deletionTimestamp")]
    for pod in pods:
        mod.changes.mark()
        mod.result["restarted"].append(pod_key(pod))
        mod.k8s.delete("Pod", pod["metadata"]["name"], namespace=namespace)
    return [p["metadata"].get("uid", "") for p in pods]


def wait(mod: ClusterModule, apps: List[str], gone: bool, old: Sequence[str] = (), clients: bool = False) -> None:
    """Until no pod of ``apps`` (nor, with ``clients``, a DaemonSet pod of any namespace whose
    nodeSelector uses the client label) is left on the node (gone) or each runs Ready there (a
    pod of ``old`` does not count)."""
    if not apps and not clients:
        return
    params = mod.params
    field = "spec.nodeName=%s" % params["node"]

    def probe():
        found = pods_by_app(mod.k8s.list("Pod", namespace=params["namespace"], field_selector=field), apps)
        if gone:
            waiting = ["%s still on the node" % app for app, pods in found.items() if pods]
            if clients:
                waiting += ["third-party GPU client %s (nodeSelector %s) still on the node" % (pod, CLIENT_LABEL)
                            for pod in client_pods(mod.k8s.list("Pod", field_selector=field))]
        else:
            waiting = ["%s not Ready yet" % app for app, pods in found.items()
                       if not any(pod_ready(p) and p["metadata"].get("uid") not in old for p in pods)]
        return not waiting, waiting

    what = "operand pods of node %s to %s" % (params["node"], "go" if gone else "run Ready")
    try:
        mod.k8s.wait_for(what, probe, params["timeout"], params["poll_interval"],
                         progress=lambda w, elapsed, detail: mod.log(
                             "gpu_operands: waiting %.0fs for %s: %s" % (elapsed, w, "; ".join(detail))))
    except K8sTimeout as exc:
        mod.fail("%s. The annotation %s keeps the previous labels; run state=restored again to restore them."
                 % (exc, PAUSED_ANNOTATION))


if __name__ == "__main__":
    main()
