# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster reads of the gpu_sharing module: the ClusterPolicy (or, in check mode before the
operator exists, a plan without one), the device-plugin ConfigMaps, and the pods that load the
config when they start. I/O through the module's K8sClient only."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils._fleet_io import read_cluster_policy
from ansible_collections.gpufleet.sharing.plugins.module_utils._k8s import K8sError

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
