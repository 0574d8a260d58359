"""A small model of Kueue's quota admission and of whether what it admits fits the nodes.

``admit(cluster_queue, workloads, ...)`` goes through the workloads in order, as a ClusterQueue with
``BestEffortFIFO`` and no cohort would, and assigns flavors as Kueue's flavor assigner does
(kubernetes-sigs/kueue v0.19.2, pkg/scheduler/flavorassigner/flavorassigner.go), reduced to nominal quota:

- first the requests Kueue's configuration drops: every resource whose name starts with one of
  ``resources.excludeResourcePrefixes`` (pkg/workload/workload.go, ``dropExcludedResources``);
- then, per requested resource, the resource group that covers it (``RGByResource``). None covers it:
  with the default ``quotaCheckStrategy`` (``BlockUndeclared``) the workload is not admitted,
  "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"; with
  ``IgnoreUndeclared`` (feature gate QuotaCheckStrategy, beta and on in v0.19) the resource is skipped;
  a zero request is skipped either way;
- per resource group, its flavors are tried **in their order in the group**: the first where
  ``usage + request <= nominalQuota`` for every requested resource of the group is assigned. Each group
  gets its own flavor, so a pod can get a GPU flavor and a cpu/memory flavor.

``place(admitted, flavors, nodes)`` then puts every pod of the admitted workloads on a node that matches
all its flavors (nodeLabels match, the flavors' nodeTaints are on the node) with enough GPU allocatable
left (``nvidia.com/`` resources; cpu and memory are not packed), first fit.

What it leaves out: borrowing, lending and cohorts, preemption, fair sharing, partial admission,
topology-aware scheduling, the ``pods`` resource, pod affinity and spreading, and the real scheduler's
scoring (first fit can fail where a better packing exists; the GPU resources here come in units of one
device, so for one-unit pods first fit is exact).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from gpulab.cluster.kueue import quantity

Workload = Mapping[str, Any]  # {"name", "count": pods, "requests": {resource: quantity per pod}}
BLOCK_UNDECLARED = "BlockUndeclared"
IGNORE_UNDECLARED = "IgnoreUndeclared"
GPU_PREFIX = "nvidia.com/"


def _groups(cluster_queue: Mapping[str, Any]) -> List[Tuple[List[str], List[Tuple[str, Dict[str, Decimal]]]]]:
    """(covered resources, [(flavor, nominal per resource)] in the group's order) per resource group."""
    result = []
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        flavors = [(f["name"], {r["name"]: quantity(r["nominalQuota"]) or Decimal(0) for r in f["resources"]})
                   for f in group.get("flavors") or []]
        result.append((list(group.get("coveredResources") or []), flavors))
    return result


def requests_of(workload: Workload, exclude_resource_prefixes: Sequence[str] = ()) -> Dict[str, Decimal]:
    """The workload's total requests (per pod times count), without the resources Kueue's config excludes."""
    count = int(workload.get("count", 1))
    return {r: (quantity(v) or Decimal(0)) * count for r, v in workload["requests"].items()
            if not any(r.startswith(prefix) for prefix in exclude_resource_prefixes)}


def assign(cluster_queue: Mapping[str, Any], requests: Mapping[str, Decimal], usage: Mapping[Tuple[str, str], Decimal],
           quota_check_strategy: str = BLOCK_UNDECLARED) -> Tuple[Optional[Dict[str, str]], str]:
    """resource -> flavor for one pod set, or None and Kueue's reason."""
    groups = _groups(cluster_queue)
    chosen: Dict[str, str] = {}
    for resource in sorted(requests):
        if resource in chosen or requests[resource] == 0:
            continue
        group = next((g for g in groups if resource in g[0]), None)
        if group is None:
            if quota_check_strategy == IGNORE_UNDECLARED:
                continue
            return None, "couldn't assign flavors to pod set main: resource %s unavailable in ClusterQueue" % resource
        wanted = {r: n for r, n in requests.items() if r in group[0]}
        flavor = next((name for name, nominal in group[1]
                       if all(usage.get((name, r), Decimal(0)) + n <= nominal.get(r, Decimal(0)) for r, n in wanted.items())),
                      None)
        if flavor is None:
            return None, ("couldn't assign flavors to pod set main: insufficient quota for %s in every flavor of "
                          "its resource group" % ", ".join(sorted(wanted)))
        chosen.update({r: flavor for r in wanted})
    return chosen, ""


def admit(cluster_queue: Mapping[str, Any], workloads: Sequence[Workload], quota_check_strategy: str = BLOCK_UNDECLARED,
          exclude_resource_prefixes: Sequence[str] = ()) -> Tuple[List[Tuple[Workload, Tuple[str, ...]]], List[Tuple[Workload, str]]]:
    """(admitted workloads with their flavors, pending workloads with Kueue's reason)."""
    usage: Dict[Tuple[str, str], Decimal] = {}
    admitted, pending = [], []
    for workload in workloads:
        total = requests_of(workload, exclude_resource_prefixes)
        chosen, reason = assign(cluster_queue, total, usage, quota_check_strategy)
        if chosen is None:
            pending.append((workload, reason))
            continue
        for r, flavor in chosen.items():
            usage[(flavor, r)] = usage.get((flavor, r), Decimal(0)) + total[r]
        admitted.append((workload, tuple(sorted(set(chosen.values())))))
    return admitted, pending


def _matches(flavor: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    spec = flavor.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeLabels") or {}).items()):
        return False
    taints = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in (node.get("spec") or {}).get("taints") or []}
    wanted = {(t.get("key"), t.get("value") or "", t.get("effect")) for t in spec.get("nodeTaints") or []}
    return wanted <= taints


def place(admitted: Sequence[Tuple[Workload, Tuple[str, ...]]], flavors: Mapping[str, Mapping[str, Any]],
          nodes: Sequence[Mapping[str, Any]]) -> List[str]:
    """Put every admitted pod on a node of all its flavors; the pods that fit nowhere, as messages."""
    free = {n["metadata"]["name"]: {r: int(v) for r, v in ((n.get("status") or {}).get("allocatable") or {}).items()
                                    if str(v).isdigit()} for n in nodes}
    unplaced = []
    for workload, names in admitted:
        gpu = {r: int(n) for r, n in workload["requests"].items() if r.startswith(GPU_PREFIX)}
        candidates = [n["metadata"]["name"] for n in nodes
                      if all(f in flavors and _matches(flavors[f], n) for f in names)]
        for index in range(int(workload.get("count", 1))):
            node = next((c for c in candidates if all(free[c].get(r, 0) >= n for r, n in gpu.items())), None)
            if node is None:
                unplaced.append("%s pod %d (flavor %s): no node of the flavor has %s left"
                                % (workload["name"], index, ", ".join(names), gpu))
                continue
            for r, n in gpu.items():
                free[node][r] -= n
    return unplaced


__all__ = ["BLOCK_UNDECLARED", "IGNORE_UNDECLARED", "admit", "assign", "place", "requests_of"]
