"""The ClusterPolicy controller of the lab's GPU Operator.

The oldest ClusterPolicy is reconciled (others get ``status.state: ignored``); operands go to the
namespace of its Helm release (``meta.helm.sh/release-namespace``) or ``gpu-operator``. It labels
the GPU nodes (``nvidia.com/gpu.present``, ``nvidia.com/gpu.deploy.*`` only when absent,
``nvidia.com/mig.capable``, ``nvidia.com/mig.config=all-disabled`` only when
``migManager.config.default`` is ``all-disabled``, §7.8), creates the
default mig-parted ConfigMap and the operand DaemonSets it owns (rewritten only when its own
desired spec changes, annotation ``nvidia.com/last-applied-hash``), collects what a deleted policy
owned, and sets ``status.state``: ``ready`` when every operand DaemonSet has all its pods updated
and available, else ``notReady``.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, Iterable, List, Optional

import yaml

from gpulab.cluster.daemonsets import template_hash
from gpulab.cluster.objects import Obj, now_rfc3339
from gpulab.cluster.operator.common import (DEFAULT_MIG_CONFIGMAP, DEPLOY_LABELS, LAST_APPLIED,
                                            MANAGED_BY, MIG_CONFIG_LABEL, OPERANDS, Operand,
                                            enabled, mig_default_config, mig_strategy, owner_ref,
                                            section)
from gpulab.cluster.operator.context import OperatorContext
from gpulab.cluster.operator.migconfig import default_mig_parted_config
from gpulab.cluster.operator.nfd import driver_pod_parts, gpu_node_os_tag

LOG = logging.getLogger("gpulab.cluster.operator")

POLICY_KEY = "nvidia.com/v1/clusterpolicies"


def _replace_template(body: Obj) -> Any:
    """A controller_update mutation that puts the operator's desired template in place."""
    def mutate(obj: Obj) -> None:
        obj["metadata"].setdefault("annotations", {})[LAST_APPLIED] = body["metadata"]["annotations"][LAST_APPLIED]
        obj["metadata"]["labels"] = body["metadata"]["labels"]
        obj["spec"]["template"] = body["spec"]["template"]
    return mutate


class ClusterPolicyController:
    def __init__(self, context: OperatorContext):
        self.context = context
        self.store = context.store
        self.policy: Optional[Obj] = None  # the policy reconciled by the last pass
        self.os_tag: Optional[str] = None  # the GPU nodes' OS tag from NFD's labels (driver image suffix)
        self.os_problem = ""

    def run_once(self) -> None:
        policies = sorted(self.store.items(POLICY_KEY),
                          key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        nodes = self.store.items("v1/nodes")
        policy = policies[0] if policies else None
        for extra in policies[1:]:
            self._set_policy_status(extra, "ignored", "ClusterPolicy ignored: only one ClusterPolicy is reconciled")
        if policy is not None:
            annotations = policy["metadata"].get("annotations") or {}
            self.context.namespace = annotations.get("meta.helm.sh/release-namespace") or self.context.settings.namespace
            self._ensure_namespace()
            for node in nodes:
                if self.context.is_gpu_node(node["metadata"]["name"]):
                    self._label_node(node, policy)
            self._ensure_mig_configmap(policy)
            self.os_tag, self.os_problem = gpu_node_os_tag(self.store.items("v1/nodes"))
            self._ensure_daemonsets(policy)
        self._collect_orphans({p["metadata"]["uid"] for p in policies})
        self.policy = policy

    def update_status(self) -> None:
        """status.state of the reconciled policy, from its operand DaemonSets."""
        if self.policy is not None:
            self._update_policy_status(self.policy)

    def _collect_orphans(self, live_policies: Iterable[str]) -> None:
        """Garbage-collect what a deleted ClusterPolicy owned, including objects this loop created
        from a policy read just before it was deleted (the store's GC had already run)."""
        live = set(live_policies)
        for key in ("apps/v1/daemonsets", "v1/configmaps"):
            for obj in self.store.items(key, self.context.namespace):
                refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == "ClusterPolicy"]
                if refs and not any(r.get("uid") in live for r in refs):
                    try:
                        self.store.delete(key, self.context.namespace, obj["metadata"]["name"])
                    except Exception:  # pylint: disable=broad-except
                        pass

    def _ensure_namespace(self) -> None:
        try:
            self.store.get("v1/namespaces", None, self.context.namespace)
        except Exception:  # pylint: disable=broad-except
            try:
                self.store.create("v1/namespaces", {"metadata": {"name": self.context.namespace, "labels": {
                    "pod-security.kubernetes.io/enforce": "privileged"}}})
            except Exception:  # pylint: disable=broad-except
                pass

    def _label_node(self, node: Obj, policy: Obj) -> None:
        """Operator-side labels (docs/reference/specs.md §7.4, §7.8): present, deploy.*, mig.capable, default mig.config."""
        spec = policy.get("spec") or {}
        name = node["metadata"]["name"]
        views = self.context.gpu_views(name)
        mig_capable = any(view.mig_capable for view in views)
        labels = node["metadata"].get("labels") or {}
        if labels.get("nvidia.com/gpu.deploy.operands") == "false":
            return
        wanted: Dict[str, Optional[str]] = {"nvidia.com/gpu.present": "true", "nvidia.com/mig.capable": "true" if mig_capable else "false"}
        for key in DEPLOY_LABELS:  # absent or "" (addGPUStateLabels, state_manager.go v26.7.0): a paused value stays
            if not labels.get(f"nvidia.com/gpu.deploy.{key}"):
                wanted[f"nvidia.com/gpu.deploy.{key}"] = "true"
        mig_key = "nvidia.com/gpu.deploy.mig-manager"
        if mig_capable and mig_key not in labels:
            wanted[mig_key] = "true"
        elif not mig_capable and mig_key in labels:
            wanted[mig_key] = None
        default = mig_default_config(spec)
        if mig_capable and enabled(spec, "migManager") and default and MIG_CONFIG_LABEL not in labels:
            wanted[MIG_CONFIG_LABEL] = default
        self.context.set_labels(name, wanted)

    def _ensure_mig_configmap(self, policy: Obj) -> None:
        spec = policy.get("spec") or {}
        if not enabled(spec, "migManager") or section(spec, "migManager", "config").get("name"):
            return
        try:
            self.store.get("v1/configmaps", self.context.namespace, DEFAULT_MIG_CONFIGMAP)
            return
        except Exception:  # pylint: disable=broad-except
            pass
        body = {
            "metadata": {"name": DEFAULT_MIG_CONFIGMAP, "namespace": self.context.namespace,
                         "labels": {MANAGED_BY: "gpu-operator"}, "ownerReferences": [owner_ref(policy)]},
            "data": {"config.yaml": yaml.safe_dump(default_mig_parted_config(), sort_keys=False)},
        }
        try:
            self.store.create("v1/configmaps", body)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot create %s", DEFAULT_MIG_CONFIGMAP)

    def _daemonset_body(self, operand: Operand, policy: Obj) -> Obj:
        spec = policy.get("spec") or {}
        operand_section = section(spec, operand.image_section) if operand.image_section else {}
        image = operand.image
        if operand_section.get("repository") and operand_section.get("image") and operand_section.get("version"):
            image = f"{operand_section['repository']}/{operand_section['image']}:{operand_section['version']}"
        container: Obj = {"name": operand.container, "image": image, "env": []}
        init, sidecars, pull_secrets = [], [], [str(name) for name in operand_section.get("imagePullSecrets") or []]
        if operand.key == "driver":
            init, (container, *sidecars), pull_secrets = driver_pod_parts(spec, self.os_tag or "")
        volumes: List[Obj] = []
        strategy = mig_strategy(spec)
        if operand.key in ("device-plugin", "gpu-feature-discovery", "mps-control-daemon"):
            # as applyMIGConfiguration (controllers/object_controls.go, NVIDIA/gpu-operator v26.7.0):
            # no MIG_STRATEGY when the ClusterPolicy leaves the strategy empty ("let the plugin decide
            # per node"), so the config file's flags.migStrategy applies
            if strategy:
                container["env"].append({"name": "MIG_STRATEGY", "value": strategy})
            if strategy != "none":
                container["env"].append({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"})
            config = section(spec, "devicePlugin", "config")
            if config.get("name"):
                container["env"] += [{"name": "CONFIG_FILE", "value": "/config/config.yaml"},
                                     {"name": "DEFAULT_CONFIG", "value": str(config.get("default") or "")}]
                volumes.append({"name": "config", "configMap": {"name": config["name"]}})
        if operand.key == "mig-manager":
            config_name = section(spec, "migManager", "config").get("name") or DEFAULT_MIG_CONFIGMAP
            container["env"] += [{"name": "CONFIG_FILE", "value": "/mig-parted-config/config.yaml"},
                                 {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
            volumes.append({"name": "mig-parted-config", "configMap": {"name": config_name}})
        # the section's env follows the operator's own entries (docs/reference/specs.md §17.5)
        container["env"] += [dict(entry) for entry in operand_section.get("env") or [] if isinstance(entry, dict)]
        labels = {"app": operand.ds_name, "app.kubernetes.io/part-of": "nvidia-gpu"}
        pod_spec: Obj = {
            "nodeSelector": ({"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/mps.capable": "true"}
                             if operand.key == "mps-control-daemon" else {f"nvidia.com/gpu.deploy.{operand.key}": "true"}),
            # spec.daemonsets.tolerations, else the chart's default (docs/reference/specs.md §17.3)
            "tolerations": list(section(spec, "daemonsets").get("tolerations")
                                or [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
            "priorityClassName": "system-node-critical",
            "serviceAccountName": operand.ds_name.replace("-daemonset", ""),
            "containers": [container] + sidecars,
        }
        if init:
            pod_spec["initContainers"] = init
        if volumes:
            pod_spec["volumes"] = volumes
        if pull_secrets:  # the operand section's secret names, as references (docs/reference/specs.md §17.2)
            pod_spec["imagePullSecrets"] = [{"name": name} for name in pull_secrets]
        return {
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": operand.ds_name, "namespace": self.context.namespace,
                         "labels": {"app": operand.ds_name, MANAGED_BY: "gpu-operator", "helm.sh/chart": "gpu-operator"},
                         "ownerReferences": [owner_ref(policy)]},
            "spec": {"selector": {"matchLabels": {"app": operand.ds_name}},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}},
        }

    def _ensure_daemonsets(self, policy: Obj) -> None:
        spec = policy.get("spec") or {}
        existing = {ds["metadata"]["name"]: ds for ds in self.store.items("apps/v1/daemonsets", self.context.namespace)}
        for operand in OPERANDS:
            current = existing.get(operand.ds_name)
            if operand.key == "driver" and self.os_tag is None:
                continue  # the driver image's tag needs the nodes' OS (status says why)
            if not enabled(spec, operand.spec_key):
                if current is not None and (current["metadata"].get("labels") or {}).get(MANAGED_BY) == "gpu-operator":
                    self.store.delete("apps/v1/daemonsets", self.context.namespace, operand.ds_name)
                continue
            body = self._daemonset_body(operand, policy)
            digest = template_hash(body["spec"])
            body["metadata"]["annotations"] = {LAST_APPLIED: digest}
            if current is None:
                try:
                    self.store.create("apps/v1/daemonsets", body)
                except Exception:  # pylint: disable=broad-except
                    LOG.exception("cannot create DaemonSet %s", operand.ds_name)
                continue
            if (current["metadata"].get("annotations") or {}).get(LAST_APPLIED) == digest:
                continue  # user changes such as a rollout restart are kept (the operator compares its own hash)

            self.store.controller_update("apps/v1/daemonsets", self.context.namespace, operand.ds_name, _replace_template(body))

    def _update_policy_status(self, policy: Obj) -> None:
        spec = policy.get("spec") or {}
        problems = []
        for operand in OPERANDS:
            if not enabled(spec, operand.spec_key):
                continue
            if operand.key == "driver" and self.os_tag is None:
                problems.append(self.os_problem)
                continue
            try:
                ds = self.store.get("apps/v1/daemonsets", self.context.namespace, operand.ds_name)
            except Exception:  # pylint: disable=broad-except
                problems.append(f"{operand.ds_name} not created")
                continue
            status = ds.get("status") or {}
            desired = status.get("desiredNumberScheduled", 0)
            if status.get("numberAvailable", 0) < desired or status.get("updatedNumberScheduled", 0) < desired:
                problems.append(f"{operand.ds_name}: {status.get('numberAvailable', 0)}/{desired} available")
        if self.context.fault("clusterpolicy-never-ready"):
            problems.append("fault injected: clusterpolicy-never-ready")
        if problems:
            self._set_policy_status(policy, "notReady", "; ".join(problems))
        else:
            self._set_policy_status(policy, "ready", "")

    def _set_policy_status(self, policy: Obj, state: str, message: str) -> None:
        previous = policy.get("status") or {}
        if previous.get("state") == state and (previous.get("conditions") or [{}])[0].get("message", "") == message \
                and previous.get("namespace") == self.context.namespace:
            return
        stamp = now_rfc3339(time.time())
        ready = state == "ready"
        status = {
            "state": state,
            "namespace": self.context.namespace,
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False",
                 "reason": "Reconciled" if ready else ("Ignored" if state == "ignored" else "OperandNotReady"),
                 "message": message, "lastTransitionTime": stamp},
                {"type": "Error", "status": "False" if ready or state == "ignored" else "True",
                 "reason": "Ready" if ready else "OperandNotReady", "message": message, "lastTransitionTime": stamp},
            ],
        }

        def mutate(obj: Obj) -> None:
            obj["status"] = status
        try:
            self.store.controller_update("nvidia.com/v1/clusterpolicies", None, policy["metadata"]["name"], mutate, subresource="status")
        except Exception:  # pylint: disable=broad-except
            pass


__all__ = ["ClusterPolicyController", "POLICY_KEY"]
