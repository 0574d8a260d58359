"""The lab's Kueue asked about one pod: would Kueue admit it, with which flavors, and does it fit a node?

``python -m gpulab kueue-admit --kubeconfig K --pod POD.json`` reads, from the lab's API server, the pod's
LocalQueue (label ``kueue.x-k8s.io/queue-name`` in the pod's namespace, as Kueue's pod integration reads
it), its ClusterQueue, the ResourceFlavors and the Nodes, then runs the admission model
(kueue_admission.py) on the pod alone: its containers' requests summed (Kueue's ``PodSet`` for a plain pod;
init containers and overhead are left out here). Prints one JSON object
``{"admitted", "flavors", "reason", "unplaced"}``; exit status 0 when admitted and placed, 1 otherwise.
Kueue's configuration is modelled by ``--exclude-resource-prefix`` (``resources.excludeResourcePrefixes``)
and ``--quota-check-strategy`` (``resources.quotaCheckStrategy``); without them, Kueue's defaults.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Sequence

from kubernetes import client, config as kconfig

from gpulab.cluster import kueue_admission

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"


def workload_of(pod: Mapping[str, Any]) -> Dict[str, Any]:
    """One pod as one workload of one pod: its containers' requests, summed per resource."""
    totals: Dict[str, Any] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
            totals.setdefault(name, []).append(str(value))
    requests = {name: values[0] if len(values) == 1 else str(sum(kueue_admission.quantity(v) or 0 for v in values))
                for name, values in totals.items()}
    return {"name": (pod.get("metadata") or {}).get("name", "pod"), "count": 1, "requests": requests}


def check(kubeconfig: str, pod: Mapping[str, Any], quota_check_strategy: str = kueue_admission.BLOCK_UNDECLARED,
          exclude_resource_prefixes: Sequence[str] = ()) -> Dict[str, Any]:
    api = kconfig.new_client_from_config(config_file=kubeconfig)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    meta = pod.get("metadata") or {}
    queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
    if not queue:
        return {"admitted": False, "flavors": [], "reason": "no %s label: Kueue does not manage the pod" % QUEUE_LABEL,
                "unplaced": []}
    local = custom.get_namespaced_custom_object(GROUP, VERSION, meta.get("namespace", "default"), "localqueues", queue)
    cluster_queue = custom.get_cluster_custom_object(GROUP, VERSION, "clusterqueues", local["spec"]["clusterQueue"])
    flavors = {f["metadata"]["name"]: f for f in custom.list_cluster_custom_object(GROUP, VERSION, "resourceflavors")["items"]}
    nodes = api.sanitize_for_serialization(core.list_node())["items"]
    workload = workload_of(pod)
    admitted, pending = kueue_admission.admit(cluster_queue, [workload], quota_check_strategy, exclude_resource_prefixes)
    if pending:
        return {"admitted": False, "flavors": [], "reason": pending[0][1], "unplaced": []}
    unplaced: List[str] = kueue_admission.place(admitted, flavors, nodes)
    return {"admitted": True, "flavors": list(admitted[0][1]), "reason": "", "unplaced": unplaced}


def main(kubeconfig: str, pod_file: str, quota_check_strategy: str, exclude_resource_prefixes: Sequence[str]) -> int:
    with open(pod_file, encoding="utf-8") as handle:
        pod = json.load(handle)
    result = check(kubeconfig, pod, quota_check_strategy, exclude_resource_prefixes)
    print(json.dumps(result, sort_keys=True))
    return 0 if result["admitted"] and not result["unplaced"] else 1


__all__ = ["check", "main", "workload_of"]
