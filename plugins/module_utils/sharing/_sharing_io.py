# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster reads of the gpu_sharing module: the ClusterPolicy (or, in check mode before the
operator exists, a plan without one), the device-plugin ConfigMaps, and the pods that load the
config when they start. I/O through the module's K8sClient only."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import ModuleFailure
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError, K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import GPU_RESOURCE, SharingConfig

NO_POLICY_WARNING = ("no ClusterPolicy yet (the GPU Operator is not installed): planned without one; a real run "
                     "needs the operator first (gpufleet.sharing.gpu_operator)")


def read_policy(mod: ClusterModule) -> Tuple[Dict[str, Any], bool]:
    """(ClusterPolicy, exists). In check mode on a cluster without any ClusterPolicy (the play
    installs the operator first) the plan goes on without one and says so; a real run requires it."""
    name = mod.params["cluster_policy_name"]
    if mod.check_mode:
        try:
            existing = mod.k8s.list("ClusterPolicy")
        except K8sError:  # not even the CRD yet
            existing = []
        if not existing:
            mod.warn(NO_POLICY_WARNING)
            return {"metadata": {"name": name or "cluster-policy"}, "spec": {}}, False
    return read_cluster_policy(mod.k8s, name, required=True), True


def read_configmaps(mod: ClusterModule, in_use: Optional[str]) -> Tuple[Optional[Dict[str, Any]], Dict[str, str], Dict[str, str]]:
    """Our ConfigMap's data, and the data of the one the ClusterPolicy names now (what the plugins load)."""
    namespace, cm_name = mod.params["namespace"], mod.params["configmap_name"]
    live_cm = mod.k8s.get("ConfigMap", cm_name, namespace)
    ours = dict((live_cm or {}).get("data") or {})
    if in_use == cm_name:
        return live_cm, ours, ours
    if in_use:
        return live_cm, ours, dict((mod.k8s.get("ConfigMap", in_use, namespace) or {}).get("data") or {})
    return live_cm, ours, {}


def restart_pods(mod: ClusterModule, nodes: Sequence[str]) -> Dict[str, List[str]]:
    """The device-plugin/GFD pods on ``nodes`` (they load the config only when they start)."""
    pods: Dict[str, List[str]] = {}
    for selector in mod.params["restart_selectors"] if nodes else []:
        for pod in mod.k8s.list("Pod", namespace=mod.params["namespace"], label_selector=selector):
            node = (pod.get("spec") or {}).get("nodeName")
            if node in nodes and not (pod.get("metadata") or {}).get("deletionTimestamp"):
                pods.setdefault(node, []).append(pod["metadata"]["name"])
    return {n: sorted(p) for n, p in sorted(pods.items())}


# The MPS control daemon of the device plugin (docs/reference/specs.md §9.6): it logs the config it
# runs with and sets its per-client limits from the replicas when it starts.
MPS_DAEMON_SELECTOR = "app=nvidia-device-plugin-mps-control-daemon"
_REPLICAS = re.compile(r'"replicas"\s*:\s*(\d+)')


def logged_mps_replicas(text: str) -> Optional[int]:
    """Replicas in the last "Running with config" the daemon logged (None when it logged none)."""
    start = text.rfind("Running with config")
    found = _REPLICAS.findall(text[start:]) if start >= 0 else []
    return int(found[0]) if found else None


def planned_mps(expected_configs: Mapping[str, Optional[str]], configs: Mapping[str, SharingConfig],
                restarted: Mapping[str, List[str]]) -> Dict[str, int]:
    """Restarted nodes whose config shares with MPS -> the replicas its daemon must run with."""
    nodes = {}
    for node in restarted:
        config = configs.get(expected_configs.get(node) or "")
        if config is not None and config.strategy == "mps" and config.replicas_for(GPU_RESOURCE) > 1:
            nodes[node] = config.replicas_for(GPU_RESOURCE)
    return nodes


def _ready(pod: Dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def mps_daemon_problem(k8s: K8sClient, namespace: str, node: str, replicas: int, old: Sequence[str]) -> Optional[str]:
    """Why the node's MPS control daemon does not run with ``replicas`` yet (None when it does)."""
    pods = [p for p in k8s.list("Pod", namespace=namespace, label_selector=MPS_DAEMON_SELECTOR)
            if (p.get("spec") or {}).get("nodeName") == node and p["metadata"]["name"] not in old
            and not p["metadata"].get("deletionTimestamp")]
    if not pods:
        return "no new MPS control daemon pod yet"
    name = pods[0]["metadata"]["name"]
    if not _ready(pods[0]):
        return "MPS control daemon %s is not ready" % name
    seen = logged_mps_replicas(k8s.pod_log(name, namespace))
    if seen != replicas:
        return "MPS control daemon %s runs with %s replicas, the plan says %d" % (name, seen, replicas)
    return None


def wait_mps_daemons(mod: ClusterModule, expected_configs: Mapping[str, Optional[str]],
                     configs: Mapping[str, SharingConfig], restarted: Mapping[str, List[str]]) -> None:
    """After a restart, until each MPS node's new control daemon runs with the planned replicas
    (its limits are set at start); fail naming the nodes on timeout."""
    p = mod.params
    nodes = planned_mps(expected_configs, configs, restarted) if MPS_DAEMON_SELECTOR in p["restart_selectors"] else {}

    def probe() -> Tuple[bool, Dict[str, str]]:
        problems = {node: mps_daemon_problem(mod.k8s, p["namespace"], node, replicas, restarted.get(node, []))
                    for node, replicas in sorted(nodes.items())}
        missing = {node: problem for node, problem in problems.items() if problem}
        return not missing, missing

    if not nodes:
        return
    try:
        mod.k8s.wait_for("the MPS control daemons to run with the planned limits", probe, timeout=p["wait_timeout"],
                         interval=p["wait_interval"])
    except K8sTimeout as exc:
        mod.fail("%s (the changes were applied): %s" % (exc, "; ".join("%s: %s" % i for i in sorted(exc.detail.items()))))
    mod.result["mps_daemons"] = {node: {"replicas": replicas} for node, replicas in sorted(nodes.items())}


def read_cluster_policy(k8s: K8sClient, name: Optional[str], required: bool) -> Optional[Dict[str, Any]]:
    """The named ClusterPolicy, else the cluster's only one; None when there is none and it is not required."""
    if name:
        policy = k8s.get("ClusterPolicy", name)
        if policy is None:
            raise ModuleFailure("ClusterPolicy %s not found: install the GPU Operator first (gpufleet.sharing.gpu_operator)" % name)
        return policy
    policies = k8s.list("ClusterPolicy")
    if len(policies) > 1 or (required and not policies):
        raise ModuleFailure("found %d ClusterPolicies (%s); set cluster_policy_name" % (
            len(policies), ", ".join(p["metadata"]["name"] for p in policies) or "none: install the GPU Operator first"))
    return policies[0] if policies else None
