"""A small model of Kueue's quota admission and of whether what it admits fits the nodes.

``admit(cluster_queue, flavors, workloads)`` goes through the workloads in order, as a ClusterQueue
with ``BestEffortFIFO`` and no cohort would: for each, the first flavor of the resource group (in
the ClusterQueue's order) where ``usage + request <= nominalQuota`` for every resource it asks for
is assigned (Kueue's flavor assignment, pkg/scheduler/flavorassigner at v0.19.2, reduced to
nominal quota); a workload that fits no flavor stays pending. ``place(admitted, flavors, nodes)``
then puts every pod of the admitted workloads on a node of its flavor (nodeLabels match, the
flavor's nodeTaints are on the node) with enough allocatable left, first fit.

What it leaves out: borrowing, lending and cohorts, preemption, fair sharing, partial admission,
topology-aware scheduling, resources other than the GPU ones, pod affinity and spreading, and the
real scheduler's scoring (first fit can fail where a better packing exists; the GPU resources
here come in units of one device, so for one-unit pods first fit is exact).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

Workload = Mapping[str, Any]  # {"name", "count": pods, "requests": {resource: units per pod}}


def _quotas(cluster_queue: Mapping[str, Any]) -> List[Tuple[str, Dict[str, int]]]:
    result = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            result.append((flavor["name"], {r["name"]: int(r["nominalQuota"]) for r in flavor["resources"]}))
    return result


def admit(cluster_queue: Mapping[str, Any], workloads: Sequence[Workload]) -> Tuple[List[Tuple[Workload, str]], List[Workload]]:
    """(admitted workloads with their flavor, pending workloads)."""
    quotas = _quotas(cluster_queue)
    usage: Dict[Tuple[str, str], int] = {}
    admitted, pending = [], []
    for workload in workloads:
        total = {r: n * int(workload.get("count", 1)) for r, n in workload["requests"].items()}
        chosen: Optional[str] = None
        for flavor, nominal in quotas:
            if all(r in nominal and usage.get((flavor, r), 0) + n <= nominal[r] for r, n in total.items()):
                chosen = flavor
                break
        if chosen is None:
            pending.append(workload)
            continue
        for r, n in total.items():
            usage[(chosen, r)] = usage.get((chosen, r), 0) + n
        admitted.append((workload, chosen))
    return admitted, pending


def _matches(flavor: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    spec = flavor.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeLabels") or {}).items()):
        return False
    taints = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in (node.get("spec") or {}).get("taints") or []}
    wanted = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in spec.get("nodeTaints") or []}
    return wanted <= taints


def place(admitted: Sequence[Tuple[Workload, str]], flavors: Mapping[str, Mapping[str, Any]],
          nodes: Sequence[Mapping[str, Any]]) -> List[str]:
    """Put every admitted pod on a node of its flavor; the pods that fit nowhere, as messages."""
    free = {n["metadata"]["name"]: {r: int(v) for r, v in ((n.get("status") or {}).get("allocatable") or {}).items()
                                    if str(v).isdigit()} for n in nodes}
    unplaced = []
    for workload, flavor in admitted:
        candidates = [n["metadata"]["name"] for n in nodes if flavor in flavors and _matches(flavors[flavor], n)]
        for index in range(int(workload.get("count", 1))):
            node = next((c for c in candidates
                         if all(free[c].get(r, 0) >= n for r, n in workload["requests"].items())), None)
            if node is None:
                unplaced.append("%s pod %d (flavor %s): no node of the flavor has %s left"
                                % (workload["name"], index, flavor, dict(workload["requests"])))
                continue
            for r, n in workload["requests"].items():
                free[node][r] -= n
    return unplaced


__all__ = ["admit", "place"]
