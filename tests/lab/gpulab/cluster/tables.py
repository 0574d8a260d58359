"""``kubectl get`` tables (``Accept: ...;as=Table``): the usual columns for pods, nodes,
namespaces, configmaps, secrets, daemonsets, PDBs and ClusterPolicies, a CRD version's
``additionalPrinterColumns`` for custom resources, NAME/AGE for the others."""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpulab.cluster.objects import Obj, ResourceType, parse_rfc3339
from gpulab.cluster.schema import json_path_value

Column = Tuple[str, Callable[[Obj], Any]]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def _age(obj: Obj) -> str:
    stamp = obj["metadata"].get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    seconds = max(0, int(time.time() - parse_rfc3339(stamp)))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2 or (unit == "m" and seconds >= 120):
            return "%d%s" % (seconds // size, unit)
    return "%ds" % seconds


def _ready_count(pod: Obj) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return "%d/%d" % (sum(1 for s in statuses if s.get("ready")), total)


def _node_status(node: Obj) -> str:
    ready = [c for c in (node.get("status") or {}).get("conditions") or []
             if c.get("type") == "Ready"]
    text = "Ready" if ready and ready[0].get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _pod_status(pod: Obj) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    return status.get("reason") or status.get("phase") or "Unknown"


def _printer(column: Obj) -> Callable[[Obj], Any]:

    def cell(obj: Obj) -> Any:
        value = json_path_value(obj, column.get("jsonPath", ""))
        if value is None:
            return "<none>" if column.get("type") == "string" else None
        if column.get("type") == "date" and isinstance(value, str):
            return _age({"metadata": {"creationTimestamp": value}})
        return value if isinstance(value, (str, int, float, bool)) else json.dumps(value)
    return cell


def _claim_state(claim: Obj) -> str:
    status = claim.get("status") or {}
    states = [name for name, on in (("allocated", status.get("allocation")), ("reserved", status.get("reservedFor")))
              if on]
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        states.append("deleted")
    return ",".join(states) or "pending"


def _status_field(key: str) -> Callable[[Obj], Any]:
    return lambda obj: (obj.get("status") or {}).get(key, 0)


_TABLE_COLUMNS: Dict[str, List[Column]] = {
    "v1/pods": [("Ready", _ready_count), ("Status", _pod_status),
                ("Restarts", lambda p: sum(s.get("restartCount", 0) for s in
                                           (p.get("status") or {}).get("containerStatuses") or [])),
                ("Node", lambda p: (p.get("spec") or {}).get("nodeName") or "<none>")],
    "v1/nodes": [("Status", _node_status),
                 ("Roles", lambda n: ",".join(sorted(
                     k.split("/", 1)[1] for k in n["metadata"].get("labels") or {}
                     if k.startswith("node-role.kubernetes.io/"))) or "<none>"),
                 ("Version", lambda n: ((n.get("status") or {}).get("nodeInfo") or {}).get(
                     "kubeletVersion", ""))],
    "v1/namespaces": [("Status", lambda n: (n.get("status") or {}).get("phase", ""))],
    "v1/configmaps": [("Data", lambda c: len(c.get("data") or {}) + len(c.get("binaryData") or {}))],
    "v1/secrets": [("Type", lambda s: s.get("type", "")), ("Data", lambda s: len(s.get("data") or {}))],
    "apps/v1/daemonsets": [("Desired", _status_field("desiredNumberScheduled")),
                           ("Current", _status_field("currentNumberScheduled")),
                           ("Ready", _status_field("numberReady")),
                           ("Up-to-date", _status_field("updatedNumberScheduled")),
                           ("Available", _status_field("numberAvailable"))],
    "policy/v1/poddisruptionbudgets": [
        ("Min Available", lambda p: str((p.get("spec") or {}).get("minAvailable", "N/A"))),
        ("Max Unavailable", lambda p: str((p.get("spec") or {}).get("maxUnavailable", "N/A"))),
        ("Allowed Disruptions", lambda p: (p.get("status") or {}).get("disruptionsAllowed", 0))],
    "nvidia.com/v1/clusterpolicies": [
        ("Status", lambda c: (c.get("status") or {}).get("state", ""))],
    # kubernetes pkg/printers/internalversion/printers.go (v1.34): ResourceSlice and ResourceClaim columns.
    "resource.k8s.io/v1/resourceslices": [
        ("Node", lambda r: (r.get("spec") or {}).get("nodeName") or "<none>"),
        ("Driver", lambda r: (r.get("spec") or {}).get("driver", "")),
        ("Pool", lambda r: ((r.get("spec") or {}).get("pool") or {}).get("name", ""))],
    "resource.k8s.io/v1/resourceclaims": [("State", _claim_state)],
}


def _columns(rt: ResourceType) -> List[Column]:
    if rt.printer_columns:
        return [(column["name"], _printer(column)) for column in rt.printer_columns
                if column.get("jsonPath") != ".metadata.creationTimestamp"]
    return _TABLE_COLUMNS.get(rt.key, [])


def _row(obj: Obj, extra: List[Column], include: Optional[str]) -> Obj:
    cells = [obj["metadata"]["name"]] + [fn(obj) for _title, fn in extra] + [_age(obj)]
    row: Obj = {"cells": cells}
    if include == "PartialObjectMetadata":
        row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                         "metadata": obj["metadata"]}
    elif include != "None":
        row["object"] = obj
    return row


def table(rt: ResourceType, result: Obj, single: bool, include: Optional[str]) -> Obj:
    """A meta.k8s.io/v1 Table of a get (`single`) or list result; `include`: includeObject."""
    items = [result] if single else result["items"]
    extra = _columns(rt)
    columns = [{"name": "Name", "type": "string", "format": "name", "priority": 0,
                "description": "Name must be unique within a namespace."}]
    for title, _getter in extra:
        columns.append({"name": title, "type": "string", "format": "", "priority": 0,
                        "description": title})
    columns.append({"name": "Age", "type": "string", "format": "", "priority": 0,
                    "description": "CreationTimestamp is a timestamp representing the "
                    "server time when this object was created."})
    meta = {"resourceVersion": result["metadata"].get("resourceVersion", "")}
    if not single and result["metadata"].get("continue"):
        meta["continue"] = result["metadata"]["continue"]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "columnDefinitions": columns, "rows": [_row(obj, extra, include) for obj in items]}


__all__ = ["table", "wants_table"]
