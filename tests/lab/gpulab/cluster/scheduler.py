"""The lab's scheduler: binds pending pods to nodes (a test instrument, not kube-scheduler).

Filters, in kube-scheduler's order, the first failing one giving a node's reason:
NodeUnschedulable (cordoned: ``spec.unschedulable``), TaintToleration (NoSchedule/NoExecute),
NodeAffinity (``nodeSelector`` and required node affinity), NodeResourcesFit (extended resources
such as ``nvidia.com/mig-1g.10gb``, plus cpu, memory and pods when the node declares them).
A pod that fits nowhere stays Pending with ``PodScheduled=False/Unschedulable`` and a
``FailedScheduling`` event worded like the real one::

    0/3 nodes are available: 3 Insufficient nvidia.com/mig-1g.10gb. preemption: 0/3 nodes are
    available: 3 No preemption victims found for incoming pod.

(reasons counted per node and sorted as strings, like the scheduler's FitError). Among feasible
nodes the one with the most free units of the requested GPU resources wins, then the name.
Pods with ``spec.nodeName`` never reach the scheduler (the kubelet admits or rejects them);
pods naming another ``schedulerName`` are left alone.
"""

from __future__ import annotations

import re
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from gpulab.cluster.kubelet import now_rfc3339

Obj = Dict[str, Any]

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?\d+)?)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4, "Pi": 1024 ** 5, "Ei": 1024 ** 6,
}


def parse_quantity(value: Any) -> float:
    """A Kubernetes quantity ("500m", "4Gi", "2", 3) as a float; 0 when unparsable."""
    if isinstance(value, (int, float)):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _SUFFIX:
        return 0.0
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def pod_requests(pod: Mapping[str, Any]) -> Dict[str, float]:
    """Effective requests: sum over containers, max with each init container; plus one pod."""
    spec = pod.get("spec") or {}
    total: Dict[str, float] = {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        merged = dict(resources.get("limits") or {})
        merged.update(resources.get("requests") or {})
        for name, quantity in merged.items():
            total[name] = total.get(name, 0.0) + parse_quantity(quantity)
    for container in spec.get("initContainers") or []:
        resources = container.get("resources") or {}
        merged = dict(resources.get("limits") or {})
        merged.update(resources.get("requests") or {})
        for name, quantity in merged.items():
            total[name] = max(total.get(name, 0.0), parse_quantity(quantity))
    total["pods"] = 1.0
    return total


def _tolerates(tolerations: List[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key")
        operator = toleration.get("operator", "Equal")
        if not key:
            if operator == "Exists":
                return True
            continue
        if key != taint.get("key"):
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def untolerated_taint(pod: Mapping[str, Any], node: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not _tolerates(tolerations, taint):
            return taint
    return None


def _expression_matches(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = expression.get("key", "")
    operator = expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and values:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def matches_node_selection(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if terms:
        fields = {"metadata.name": (node.get("metadata") or {}).get("name", "")}
        return any(
            all(_expression_matches(e, labels) for e in term.get("matchExpressions") or [])
            and all(_expression_matches(e, fields) for e in term.get("matchFields") or [])
            for term in terms
        )
    return True


def _taint_text(taint: Mapping[str, Any]) -> str:
    return "{%s: %s}" % (taint.get("key", ""), taint.get("value", ""))


def node_reasons(pod: Obj, node: Obj, used: Mapping[str, float]) -> List[str]:
    """Why `pod` cannot go to `node` (empty list: it fits). The first failing filter wins."""
    spec = node.get("spec") or {}
    unschedulable_taint = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    if spec.get("unschedulable") and not _tolerates((pod.get("spec") or {}).get("tolerations") or [], unschedulable_taint):
        return ["node(s) were unschedulable"]
    taint = untolerated_taint(pod, node)
    if taint is not None:
        return [f"node(s) had untolerated taint {_taint_text(taint)}"]
    if not matches_node_selection(pod, node):
        return ["node(s) didn't match Pod's node affinity/selector"]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    reasons = []
    for resource, wanted in sorted(pod_requests(pod).items()):
        if wanted <= 0:
            continue
        if resource not in allocatable and resource in ("cpu", "memory", "pods", "ephemeral-storage"):
            continue  # a node that does not declare it is not limited by the lab
        free = parse_quantity(allocatable.get(resource, 0)) - used.get(resource, 0.0)
        if wanted > free + 1e-9:
            reasons.append("Too many pods" if resource == "pods" else f"Insufficient {resource}")
    return reasons


def fit_error_message(node_count: int, reasons_per_node: Mapping[str, List[str]]) -> str:
    histogram: Dict[str, int] = {}
    resource_only = 0
    for reasons in reasons_per_node.values():
        for reason in reasons:
            histogram[reason] = histogram.get(reason, 0) + 1
        if reasons and all(r.startswith("Insufficient") or r == "Too many pods" for r in reasons):
            resource_only += 1
    parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
    message = f"0/{node_count} nodes are available: {', '.join(parts)}."
    preemption = []
    if resource_only:
        preemption.append(f"{resource_only} No preemption victims found for incoming pod")
    if node_count - resource_only:
        preemption.append(f"{node_count - resource_only} Preemption is not helpful for scheduling")
    if node_count:
        message += f" preemption: 0/{node_count} nodes are available: {', '.join(sorted(preemption))}."
    return message


def _used_by_node(pods: List[Obj]) -> Dict[str, Dict[str, float]]:
    used: Dict[str, Dict[str, float]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        bucket = used.setdefault(node, {})
        for resource, quantity in pod_requests(pod).items():
            bucket[resource] = bucket.get(resource, 0.0) + quantity
    return used


class Scheduler:
    """Single-threaded: `run_once` is called by the controller loop."""

    def __init__(self, store: Any, active_fault: Callable[[str], bool], dra: Any = None):
        self.store = store
        self.active_fault = active_fault
        self.dra = dra  # dra/claims.py DraClaims: the DynamicResources plugin (pods with resourceClaims)
        self._last_message: Dict[str, str] = {}

    def run_once(self, pods: Optional[List[Obj]] = None) -> None:
        """`pods`: a fresh list of all pods, when the caller has one (saves a copy of the store)."""
        if self.active_fault("scheduler-stuck"):
            return
        if pods is None:
            pods = self.store.items("v1/pods")
        pending = [
            pod for pod in pods
            if not (pod.get("spec") or {}).get("nodeName")
            and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
            and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("spec") or {}).get("schedulerName", "default-scheduler") == "default-scheduler"
        ]
        live = {pod["metadata"]["uid"] for pod in pending}
        self._last_message = {uid: text for uid, text in self._last_message.items() if uid in live}
        if not pending:
            return
        nodes = sorted(self.store.items("v1/nodes"), key=lambda n: n["metadata"]["name"])
        used = _used_by_node(pods)
        pending.sort(key=lambda p: (-int((p.get("spec") or {}).get("priority") or 0), p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        for pod in pending:
            self._schedule(pod, nodes, used)

    def _schedule(self, pod: Obj, nodes: List[Obj], used: Dict[str, Dict[str, float]]) -> None:
        reasons: Dict[str, List[str]] = {}
        feasible: List[Tuple[float, str, Obj]] = []
        try:
            claims = self.dra.claims_for(pod) if self.dra is not None else None
        except Exception as waiting:  # pylint: disable=broad-except
            # (dra.claims.Waiting: the claims cannot be allocated yet)
            self._unschedulable_once(pod, str(waiting))
            return
        gpu_requests = {r: q for r, q in pod_requests(pod).items() if "/" in r}
        for node in nodes:
            name = node["metadata"]["name"]
            found = node_reasons(pod, node, used.get(name, {}))
            if not found and claims:
                found = self.dra.node_problems(pod, claims, node)
            if found:
                reasons[name] = found
                continue
            allocatable = (node.get("status") or {}).get("allocatable") or {}
            free = sum(parse_quantity(allocatable.get(r, 0)) - used.get(name, {}).get(r, 0.0) for r in gpu_requests)
            feasible.append((-free, name, node))
        meta = pod["metadata"]
        if not feasible:
            self._unschedulable_once(pod, fit_error_message(len(nodes), reasons) if nodes else "no nodes available to schedule pods")
            return
        feasible.sort(key=lambda entry: (entry[0], entry[1]))
        node_name = feasible[0][1]
        try:
            if claims:
                self.dra.commit(pod, claims, node_name)
            self.store.bind(meta["namespace"], meta["name"], node_name)
        except Exception:  # pylint: disable=broad-except
            return  # deleted or bound meanwhile: the next pass sees it
        bucket = used.setdefault(node_name, {})
        for resource, quantity in pod_requests(pod).items():
            bucket[resource] = bucket.get(resource, 0.0) + quantity
        self._last_message.pop(meta["uid"], None)
        self.store.record_event(pod, "Scheduled", f"Successfully assigned {meta['namespace']}/{meta['name']} to {node_name}",
                                component="default-scheduler")

    def _unschedulable_once(self, pod: Obj, message: str) -> None:
        if self._last_message.get(pod["metadata"]["uid"]) != message:
            self._last_message[pod["metadata"]["uid"]] = message
            self._mark_unschedulable(pod, message)

    def _mark_unschedulable(self, pod: Obj, message: str) -> None:
        def mutate(obj: Obj) -> None:
            conditions = [c for c in (obj.setdefault("status", {}).get("conditions") or []) if c.get("type") != "PodScheduled"]
            previous = [c for c in (obj["status"].get("conditions") or []) if c.get("type") == "PodScheduled"]
            stamp = previous[0].get("lastTransitionTime") if previous and previous[0].get("status") == "False" else None
            conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                               "lastProbeTime": None, "lastTransitionTime": stamp or now_rfc3339(time.time())})
            obj["status"]["conditions"] = conditions
        try:
            self.store.controller_update("v1/pods", pod["metadata"]["namespace"], pod["metadata"]["name"], mutate, subresource="status")
        except Exception:  # pylint: disable=broad-except
            return
        self.store.record_event(pod, "FailedScheduling", message, type="Warning", component="default-scheduler")
