"""The disruption controller's arithmetic (policy/v1 PodDisruptionBudget) and the eviction check.

Pure functions; the store keeps PDB status current after every pod or PDB write and asks
``eviction_refusal`` before deleting an evicted pod. A pod is healthy when its ``Ready``
condition is True (or, with no conditions at all, when it is Running).
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from gpulab.cluster import selectors as _sel
from gpulab.cluster.errors import ApiError
from gpulab.cluster.objects import Obj

PDB_KEY = "policy/v1/poddisruptionbudgets"


def pod_healthy(pod: Obj) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    conditions = status.get("conditions")
    if conditions:
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    return status.get("phase") == "Running"


def _selector(pdb: Obj) -> _sel.Selector:
    try:
        return _sel.from_label_selector((pdb.get("spec") or {}).get("selector"))
    except _sel.SelectorError:
        return _sel.from_label_selector(None)


def selects(pdb: Obj, pod: Obj) -> bool:
    return _sel.matches(_selector(pdb), pod["metadata"].get("labels"))


def _amount(value: Any, expected: int) -> int:
    """An intOrString of a PDB spec as a pod count (percentages round up)."""
    if isinstance(value, str) and value.endswith("%"):
        return int(math.ceil(int(value[:-1]) * expected / 100.0))
    return int(value)


def pdb_numbers(pdb: Obj, namespace_pods: List[Obj]) -> Dict[str, int]:
    """currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed of a PDB."""
    spec = pdb.get("spec") or {}
    pods = [p for p in namespace_pods if selects(pdb, p)]
    expected = len(pods)
    healthy = sum(1 for p in pods if pod_healthy(p))
    if "minAvailable" in spec:
        desired = _amount(spec["minAvailable"], expected)
    elif "maxUnavailable" in spec:
        desired = max(0, expected - _amount(spec["maxUnavailable"], expected))
    else:
        desired = expected
    return {"currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
            "disruptionsAllowed": max(0, healthy - desired)}


def pdb_status(pdb: Obj, namespace_pods: List[Obj], stamp: str) -> Obj:
    """The status the disruption controller writes (the DisruptionAllowed condition keeps its
    lastTransitionTime while its reason stays)."""
    old = pdb.get("status") or {}
    status = dict(old)
    status.update(pdb_numbers(pdb, namespace_pods))
    status["observedGeneration"] = pdb["metadata"].get("generation", 1)
    allowed = status["disruptionsAllowed"] > 0
    status["conditions"] = [c for c in status.get("conditions") or []
                            if c.get("type") != "DisruptionAllowed"]
    previous = [c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"]
    reason = "SufficientPods" if allowed else "InsufficientPods"
    if previous and previous[0].get("reason") == reason:
        status["conditions"].append(previous[0])
    else:
        status["conditions"].append({
            "type": "DisruptionAllowed", "status": "True" if allowed else "False",
            "reason": reason, "message": "", "observedGeneration": status["observedGeneration"],
            "lastTransitionTime": stamp})
    return status


def evicts_without_budget(pod: Obj) -> bool:
    """Terminating, finished and pending pods are evicted without asking any budget."""
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["metadata"].get("deletionTimestamp")) or phase in ("Succeeded", "Failed",
                                                                       "Pending")


def eviction_refusal(pod: Obj, pdbs: List[Obj], namespace_pods: List[Obj]) -> Optional[ApiError]:
    """Why evicting `pod` is refused (None: allowed). `pdbs`: the PDBs of its namespace."""
    matching = [p for p in pdbs if selects(p, pod)]
    if len(matching) > 1:
        return ApiError(500, "InternalError", "This pod has more than one PodDisruptionBudget, "
                        "which the eviction subresource does not support.")
    if not matching:
        return None
    numbers = pdb_numbers(matching[0], namespace_pods)
    allowed = numbers["disruptionsAllowed"] > 0 if pod_healthy(pod) else \
        numbers["currentHealthy"] >= numbers["desiredHealthy"]
    if allowed:
        return None
    return ApiError(
        429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
        {"causes": [{"reason": "DisruptionBudget", "message":
                     "The disruption budget %s needs %d healthy pods and has %d currently"
                     % (matching[0]["metadata"]["name"], numbers["desiredHealthy"],
                        numbers["currentHealthy"])}]})


EVICTED: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}

__all__ = ["EVICTED", "PDB_KEY", "eviction_refusal", "evicts_without_budget", "pdb_numbers",
           "pdb_status", "pod_healthy", "selects"]
