# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig_node_config's steps on one node: read, cordon and drain, relabel, wait for the MIG manager, uncordon."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_drain import (
    DrainError, Drainer, blocking_message, cordon, cordon_owner, default_run_id, pod_key, uncordon)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_operator import (
    MIG_CONFIG_LABEL, MIG_STATE_LABEL, MigConfigFailed, config_map_problem, node_is_configured, node_mig_status,
    relabel_step, wait_mig_config)


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
