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
  - A node that was already cordoned before (by someone else) stays cordoned.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
attributes:
  check_mode:
    support: full
    description: >-
      Nothing is changed; the result tells whether the node would be reconfigured and which
      pods would be evicted.
  diff_mode:
    support: full
    description: >-
      Shows the MIG labels of the node before and after.
  platform:
    platforms: posix
    support: full
    description: Runs on the controller (or any host with the Python C(kubernetes) client) and talks to the API server.
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
restarted_mig_manager:
  description: Whether the MIG manager pod of the node was restarted to retry the same config.
  returned: when it was restarted
  type: bool
reason:
  description: The MIG manager's reason for a C(failed) state.
  returned: on failure of the MIG manager
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ..module_utils._k8s import K8S_AUTH_ARGSPEC, K8sError, K8sTimeout, client_from_module
from ..module_utils._mig_operator import (
    CONFIG_KEY, CORDON_MARKER, CORDON_MARKER_VALUE, MIG_CONFIG_LABEL, MIG_STATE_LABEL, failure_reason,
    node_is_configured, node_mig_status)
from ..module_utils._node_drain import DrainError, Drainer, pod_key

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - ansible-core requires PyYAML
    HAS_YAML = False


class MigFailed(K8sError):
    pass


class MigNodeConfig(object):
    def __init__(self, module, k8s):
        self.module = module
        self.params = module.params
        self.k8s = k8s
        self.node_name = module.params["node"]
        self.result = {"changed": False, "node": self.node_name, "config": module.params["config"],
                       "evicted": [], "uncordoned": False}

    def fail(self, msg, **extra):
        result = dict(self.result)
        result.update(extra)
        self.module.fail_json(msg=msg, **result)

    def log(self, what, elapsed, detail):
        self.module.log("mig_node_config: %s: %.0fs: %s" % (what, elapsed, detail))

    def check_config_map(self):
        name, namespace = self.params["config_map"], self.params["config_map_namespace"]
        if not name:
            return
        config_map = self.k8s.get("ConfigMap", name, namespace)
        if config_map is None:
            self.fail("ConfigMap %s/%s does not exist: create it first (gpufleet.sharing.mig_operator_config)"
                      % (namespace, name))
        text = (config_map.get("data") or {}).get(CONFIG_KEY)
        try:
            document = yaml.safe_load(text) if text else None
        except yaml.YAMLError as exc:
            self.fail("ConfigMap %s/%s key %s is not valid YAML: %s" % (namespace, name, CONFIG_KEY, exc))
        configs = (document or {}).get("mig-configs") if isinstance(document, dict) else None
        if not isinstance(configs, dict) or self.params["config"] not in configs:
            self.fail("MIG config %r is not defined in ConfigMap %s/%s (key %s)%s" % (
                self.params["config"], namespace, name, CONFIG_KEY,
                "; it defines: %s" % ", ".join(sorted(configs)) if isinstance(configs, dict) else ""))

    def ours_cordoned(self, node):
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        return annotations.get(CORDON_MARKER) == CORDON_MARKER_VALUE

    def uncordon_if_ours(self, node):
        if not (self.params["drain"] and self.ours_cordoned(node)):
            return
        if not self.module.check_mode:
            self.k8s.set_unschedulable(self.node_name, False)
            self.k8s.set_node_annotations(self.node_name, {CORDON_MARKER: None})
        self.result["changed"] = True
        self.result["uncordoned"] = True

    def run(self):
        config = self.params["config"]
        node = self.k8s.get("Node", self.node_name)
        if node is None:
            self.fail("node %s not found" % self.node_name)
        previous, state = node_mig_status(node)
        self.result["previous_config"] = previous
        self.result["state"] = state
        if node_is_configured(node, config):
            # A cordon left by an earlier failed run is lifted once the node is in shape.
            self.uncordon_if_ours(node)
            return
        self.check_config_map()
        manager_pods = self.mig_manager_pods()
        if not manager_pods:
            # Without a MIG manager on the node nobody would act on the label: fail before draining.
            self.fail("no MIG manager pod (%s in %s) runs on node %s: is migManager enabled in the ClusterPolicy and "
                      "the node MIG-capable (label nvidia.com/gpu.deploy.mig-manager=true)?"
                      % (self.params["mig_manager_selector"], self.params["mig_manager_namespace"], self.node_name))

        unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
        drainer = None
        to_evict = []
        if self.params["drain"]:
            drainer = Drainer(self.k8s, self.node_name, self.params["delete_emptydir_data"], self.params["force"],
                              self.params["drain_timeout"], min(self.params["poll_interval"], 2.0),
                              progress=self.log)
            to_evict, _skipped, blocking = drainer.plan()
            if blocking:
                self.fail("cannot drain node %s for the MIG change: %s" % (
                    self.node_name, "; ".join("%s %s" % (b["pod"], b["reason"]) for b in blocking)),
                    blocking=blocking)
        self.result["changed"] = True
        if self.module._diff:
            self.result["diff"] = {
                "before": {MIG_CONFIG_LABEL: previous, MIG_STATE_LABEL: state},
                "after": {MIG_CONFIG_LABEL: config, MIG_STATE_LABEL: "success"},
            }
        if self.module.check_mode:
            self.result["would_evict"] = [pod_key(p) for p in to_evict]
            return

        if drainer is not None:
            if not unschedulable:
                # Mark first, then cordon: a crash in between leaves a marker and no cordon, which
                # is harmless; the reverse could leave a cordon nobody lifts.
                self.k8s.set_node_annotations(self.node_name, {CORDON_MARKER: CORDON_MARKER_VALUE})
                self.k8s.set_unschedulable(self.node_name, True)
            to_evict, _skipped, blocking = drainer.plan()
            drainer.check_blocking(blocking)
            if to_evict:
                try:
                    drainer.evict_all(to_evict)
                finally:
                    self.result["evicted"] = [entry["pod"] for entry in drainer.evicted]

        if previous == config and state in ("pending", "rebooting"):
            pass  # the MIG manager is already at work on this config: just wait for it
        elif previous == config:
            # Same label, but failed (or never processed): the MIG manager only reacts to label
            # changes, and applies the current label when it starts, so restart it on this node.
            self.k8s.set_node_labels(self.node_name, {MIG_STATE_LABEL: None})
            self.restart_mig_manager()
        else:
            # Dropping the old state together with the new config means a stale "success" can
            # never be mistaken for the new config being applied.
            self.k8s.set_node_labels(self.node_name, {MIG_CONFIG_LABEL: config, MIG_STATE_LABEL: None})
        self.wait_success()
        self.uncordon_if_ours(self.k8s.get("Node", self.node_name) or {})

    def mig_manager_pods(self):
        return self.k8s.list("Pod", namespace=self.params["mig_manager_namespace"],
                             label_selector=self.params["mig_manager_selector"],
                             field_selector="spec.nodeName=%s" % self.node_name)

    def restart_mig_manager(self):
        for pod in self.mig_manager_pods():
            self.k8s.delete("Pod", pod["metadata"]["name"], pod["metadata"]["namespace"])
        self.result["restarted_mig_manager"] = True

    def wait_success(self):
        config = self.params["config"]
        history = []
        self.result["state_history"] = history
        start = self.k8s.now()

        def probe():
            live = self.k8s.get("Node", self.node_name)
            if live is None:
                raise K8sError("node %s disappeared while waiting for its MIG change" % self.node_name)
            wanted, state = node_mig_status(live)
            if not history or history[-1]["state"] != state:
                history.append({"state": state, "elapsed": round(self.k8s.now() - start, 1)})
            if wanted != config:
                raise K8sError("the label %s on %s was changed to %r by someone else while waiting"
                               % (MIG_CONFIG_LABEL, self.node_name, wanted))
            if state == "failed":
                reason = failure_reason(live, self.k8s.events_for("Node", self.node_name))
                self.result["reason"] = reason
                raise MigFailed("the MIG manager failed to apply %r on %s: %s. The node stays cordoned; "
                                "fix the cause and run again" % (config, self.node_name, reason))
            return state == "success", state or "no state yet"

        try:
            self.k8s.wait_for("MIG config %s on %s" % (config, self.node_name), probe, self.params["timeout"],
                              self.params["poll_interval"], self.log)
        except K8sTimeout as exc:
            self.result["state"] = exc.detail
            self.fail("%s. The node stays cordoned." % exc)
        self.result["state"] = "success"


def main():
    argument_spec = dict(
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
    )
    argument_spec.update(K8S_AUTH_ARGSPEC)
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    if not HAS_YAML:
        module.fail_json(msg="PyYAML is required")
    if not module.params["config"].strip():
        module.fail_json(msg="config must not be empty")
    if module.params["poll_interval"] <= 0 or module.params["timeout"] < 0 or module.params["drain_timeout"] < 0:
        module.fail_json(msg="timeout and drain_timeout must be >= 0 and poll_interval > 0")
    k8s = client_from_module(module)
    runner = MigNodeConfig(module, k8s)
    try:
        runner.run()
    except MigFailed as exc:
        runner.fail(str(exc))
    except DrainError as exc:
        runner.fail("%s. The node stays cordoned." % exc, blocking=exc.details)
    except K8sError as exc:
        runner.fail(str(exc))
    module.exit_json(**runner.result)


if __name__ == "__main__":
    main()
