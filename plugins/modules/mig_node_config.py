#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig_node_config
short_description: Have the GPU Operator's MIG manager apply a MIG config to one node, safely
version_added: 0.1.0
description:
  - For clusters where the GPU Operator's MIG manager changes MIG layouts (operator-managed MIG).
  - Does nothing when the node label C(nvidia.com/mig.config) already names O(config) and
    C(nvidia.com/mig.config.state) is C(success).
  - Otherwise cordons the node, drains it through the Eviction API (the MIG manager itself never
    evicts workloads, and it needs GPUs without user processes), sets C(nvidia.com/mig.config),
    waits until the MIG manager reports C(success), and uncordons the node.
  - When the MIG manager reports C(failed), the module fails with the reason found in the node's
    annotations and events, and leaves the node cordoned so that no workload lands on GPUs in an
    unknown layout. Running the module again retries (restarting the node's MIG manager pod, which
    then applies the label again); the cordon it set is lifted after success.
  - The cordon it sets is marked with the annotation C(gpufleet.sharing/cordoned-by) (O(run_id));
    only such a cordon (or the older marker C(gpufleet.sharing/cordoned-for)) is lifted. A node
    that was already cordoned before (by someone else) is changed but stays cordoned
    (RV(left_cordoned)).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
attributes:
  check_mode:
    description:
      - Reads and plans as a real run; the cordon, the evictions and the label change are sent as
        server-side dry runs (C(dryRun=All)), so nothing is changed, and nothing is waited for.
        RV(would_evict) lists the pods that would be evicted.
options:
  node:
    description: Name of the node.
    type: str
    required: true
  config:
    description: Name of the MIG config (a key of the mig-parted ConfigMap), for example V(all-1g.10gb).
    type: str
    required: true
  config_map:
    description:
      - Name of the mig-parted ConfigMap the MIG manager uses. When given, the module checks that
        O(config) is defined in it before changing anything.
    type: str
  config_map_namespace:
    description: Namespace of O(config_map).
    type: str
    default: gpu-operator
  drain:
    description:
      - Cordon and drain the node before the change, and uncordon it after success.
      - Turn it off only when you know that no pod uses the node's GPUs.
    type: bool
    default: true
  delete_emptydir_data:
    description: Evict pods with C(emptyDir) volumes (their data is lost).
    type: bool
    default: false
  force:
    description: Evict pods that no controller manages.
    type: bool
    default: false
  drain_timeout:
    description: Seconds for the drain (PodDisruptionBudget retries included).
    type: int
    default: 600
  timeout:
    description: Seconds to wait for C(nvidia.com/mig.config.state=success).
    type: int
    default: 900
  poll_interval:
    description: Seconds between two checks.
    type: float
    default: 5
  mig_manager_namespace:
    description: Namespace of the MIG manager pods (the operator's namespace).
    type: str
    default: gpu-operator
  mig_manager_selector:
    description:
      - Label selector of the MIG manager pods. A node without such a pod fails the task before
        anything is changed (nobody would act on the label).
      - When the node already asks for O(config) but the
        state is not C(success) (for example C(failed) in an earlier run), the MIG manager pod on
        the node is restarted, because the MIG manager applies the label again only when it
        changes or when it starts.
    type: str
    default: app=nvidia-mig-manager
  run_id:
    description:
      - Id of this run, written to the annotation C(gpufleet.sharing/cordoned-by) when the module
        cordons the node. Default C(mig_node_config-<UTC time>).
    type: str
"""

EXAMPLES = r"""
- name: Reconfigure MIG on this node through the operator's MIG manager
  gpufleet.sharing.mig_node_config:
    node: "{{ inventory_hostname }}"
    config: all-1g.10gb
    config_map: gpufleet-mig-parted-config
    delete_emptydir_data: true
  delegate_to: localhost
"""

RETURN = r"""
node:
  description: Name of the node.
  returned: always
  type: str
  sample: gpu-node-07
config:
  description: The requested MIG config.
  returned: always
  type: str
  sample: all-1g.10gb
previous_config:
  description: Value of C(nvidia.com/mig.config) before the run.
  returned: always
  type: str
  sample: all-disabled
state:
  description: Value of C(nvidia.com/mig.config.state) at the end.
  returned: always
  type: str
  sample: success
evicted:
  description: Pods evicted before the change.
  returned: always
  type: list
  elements: str
would_evict:
  description: Pods that would be evicted (check mode).
  returned: in check mode, when a change is needed
  type: list
  elements: str
state_history:
  description: MIG states seen while waiting, with the seconds elapsed.
  returned: when the module waited
  type: list
  elements: dict
  sample: [{state: pending, elapsed: 0.0}, {state: success, elapsed: 31.5}]
uncordoned:
  description: Whether the module lifted its own cordon at the end.
  returned: always
  type: bool
left_cordoned:
  description: The node stays cordoned at the end because someone else cordoned it.
  returned: when the node is in the requested config at the end
  type: bool
restarted_mig_manager:
  description: Whether the MIG manager pod of the node was restarted to retry the same config.
  returned: when it was restarted
  type: bool
reason:
  description: The MIG manager's reason for a C(failed) state.
  returned: on failure of the MIG manager
  type: str
"""

from typing import Any, Dict, List, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_operator import (
    MIG_CONFIG_LABEL, MIG_STATE_LABEL, MigConfigFailed,
    config_map_problem, node_is_configured, node_mig_status, option_problems, relabel_step, wait_mig_config)
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import object_name_problems, selector_problem
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_drain import (
    DrainError, Drainer, blocking_message, cordon, cordon_owner, default_run_id, pod_key, uncordon)

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    node=dict(type="str", required=True),
    config=dict(type="str", required=True),
    config_map=dict(type="str"),
    config_map_namespace=dict(type="str", default="gpu-operator"),
    drain=dict(type="bool", default=True),
    delete_emptydir_data=dict(type="bool", default=False),
    force=dict(type="bool", default=False),
    drain_timeout=dict(type="int", default=600),
    timeout=dict(type="int", default=900),
    poll_interval=dict(type="float", default=5),
    mig_manager_namespace=dict(type="str", default="gpu-operator"),
    mig_manager_selector=dict(type="str", default="app=nvidia-mig-manager"),
    run_id=dict(type="str"),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def run(mod: ClusterModule) -> None:
    params = mod.params
    problems = option_problems(params["config"], params["timeout"], params["drain_timeout"], params["poll_interval"])
    # Every name and the selector too, before the first read: a node already configured used to be
    # uncordoned without them ever being checked (issue 21, the audit of item 2).
    problems += object_name_problems([("node", "Node", params["node"]), ("config_map", "ConfigMap", params["config_map"] or None),
                                      ("config_map_namespace", "Namespace", params["config_map_namespace"]),
                                      ("mig_manager_namespace", "Namespace", params["mig_manager_namespace"])])
    problems += [p for p in [selector_problem("mig_manager_selector", params["mig_manager_selector"])] if p]
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    MigNodeConfig(mod).run()


class MigNodeConfig:
    """Plan (read), then cordon and drain, relabel, wait for the MIG manager, uncordon."""

    def __init__(self, mod: ClusterModule) -> None:
        self.mod = mod
        self.k8s = mod.k8s
        self.params = mod.params
        self.node_name: str = mod.params["node"]
        self.config: str = mod.params["config"]
        mod.result.update(node=self.node_name, config=self.config, evicted=[], uncordoned=False)

    def log(self, what: str, elapsed: float, detail: Any) -> None:
        self.mod.log("mig_node_config: %s: %.0fs: %s" % (what, elapsed, detail))

    def run(self) -> None:
        node = self.k8s.get("Node", self.node_name)
        if node is None:
            self.mod.fail("node %s not found" % self.node_name)
        previous, state = node_mig_status(node)
        self.mod.result.update(previous_config=previous, state=state)
        if node_is_configured(node, self.config):
            # A cordon left by an earlier failed run is lifted once the node is in shape.
            self.uncordon_if_ours(node)
            return
        self.check_config_map()
        if not self.mig_manager_pods():
            # Without a MIG manager on the node nobody would act on the label: fail before draining.
            self.mod.fail("no MIG manager pod (%s in %s) runs on node %s: is migManager enabled in the ClusterPolicy "
                          "and the node MIG-capable (label nvidia.com/gpu.deploy.mig-manager=true)?"
                          % (self.params["mig_manager_selector"], self.params["mig_manager_namespace"],
                             self.node_name))
        drainer = self.plan_drain()
        self.mod.changes.record("node %s MIG labels" % self.node_name,
                                {MIG_CONFIG_LABEL: previous, MIG_STATE_LABEL: state},
                                {MIG_CONFIG_LABEL: self.config, MIG_STATE_LABEL: "success"}, changed=True)
        if drainer is not None:
            self.cordon_and_drain(drainer)
        step = relabel_step(previous, state, self.config)
        if step == "restart":
            self.k8s.set_node_labels(self.node_name, {MIG_STATE_LABEL: None})
            self.restart_mig_manager()
        elif step == "relabel":
            self.k8s.set_node_labels(self.node_name, {MIG_CONFIG_LABEL: self.config, MIG_STATE_LABEL: None})
        if self.mod.check_mode:
            return  # dry-run writes: nothing to wait for
        self.wait_success()
        self.uncordon_if_ours(self.k8s.get("Node", self.node_name) or {})

    def check_config_map(self) -> None:
        name, namespace = self.params["config_map"], self.params["config_map_namespace"]
        if name:
            problem = config_map_problem(self.k8s.get("ConfigMap", name, namespace), self.config,
                                         "%s/%s" % (namespace, name))
            if problem:
                self.mod.fail(problem)

    def plan_drain(self) -> Optional[Drainer]:
        """The Drainer when draining, after checking that nothing blocks it (before any change)."""
        if not self.params["drain"]:
            if self.mod.check_mode:
                self.mod.result["would_evict"] = []
            return None
        drainer = Drainer(self.k8s, self.node_name, self.params["delete_emptydir_data"], self.params["force"],
                          self.params["drain_timeout"], min(self.params["poll_interval"], 2.0), progress=self.log)
        _to_evict, _skipped, blocking = drainer.plan()
        if blocking:
            self.mod.fail(blocking_message("cannot drain node %s for the MIG change" % self.node_name, blocking),
                          blocking=blocking)
        return drainer

    def cordon_and_drain(self, drainer: Drainer) -> None:
        # Cordon and mark it ours in one update; a node cordoned before keeps its cordon and owner.
        cordon(self.k8s, self.node_name, self.params["run_id"] or default_run_id("mig_node_config"))
        to_evict: List[Dict[str, Any]] = []
        evicted: List[Dict[str, str]] = []
        try:
            to_evict, _skipped, blocking = drainer.plan()
            drainer.check_blocking(blocking)
            if to_evict:
                evicted = drainer.evict_all(to_evict)
        except DrainError as exc:
            self.mod.result["evicted"] = [entry["pod"] for entry in drainer.evicted]
            self.mod.fail("%s. The node stays cordoned." % exc, blocking=exc.details)
        if self.mod.check_mode:
            self.mod.result["would_evict"] = [pod_key(p) for p in to_evict]
        else:
            self.mod.result["evicted"] = [entry["pod"] for entry in evicted]

    def uncordon_if_ours(self, node: Dict[str, Any]) -> None:
        if not (self.params["drain"] and cordon_owner(node)):
            self.mod.result["left_cordoned"] = bool((node.get("spec") or {}).get("unschedulable"))
            return
        lifted, self.mod.result["left_cordoned"] = uncordon(self.k8s, self.node_name)
        if lifted:
            self.mod.changes.mark()
        self.mod.result["uncordoned"] = lifted

    def mig_manager_pods(self) -> List[Dict[str, Any]]:
        return self.k8s.list("Pod", namespace=self.params["mig_manager_namespace"],
                             label_selector=self.params["mig_manager_selector"],
                             field_selector="spec.nodeName=%s" % self.node_name)

    def restart_mig_manager(self) -> None:
        for pod in self.mig_manager_pods():
            self.k8s.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
        self.mod.result["restarted_mig_manager"] = True

    def wait_success(self) -> None:
        history: List[Dict[str, Any]] = []
        self.mod.result["state_history"] = history
        try:
            wait_mig_config(self.k8s, self.node_name, self.config, self.params["timeout"],
                            self.params["poll_interval"], self.log, history)
        except MigConfigFailed as exc:
            self.mod.result["reason"] = exc.reason
            self.mod.fail(str(exc))
        except K8sTimeout as exc:
            self.mod.result["state"] = exc.detail
            self.mod.fail("%s. The node stays cordoned." % exc)
        self.mod.result["state"] = "success"


if __name__ == "__main__":
    main()
