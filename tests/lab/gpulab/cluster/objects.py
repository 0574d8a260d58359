"""The object model shared by the store, admission and the controllers of the virtual cluster:
resource types (built-in and from CRDs), watch events and RFC 3339 timestamps."""

from __future__ import annotations

import copy
import datetime as _dt
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

Obj = Dict[str, Any]

_ATOMIC = (str, int, float, bool, type(None))


def clone(value: Any) -> Any:
    """A deep copy of a JSON-like value (dicts, lists, strings, numbers, booleans, None): equal to
    what ``copy.deepcopy`` returns, about three times faster. The store's objects are trees (never
    shared or cyclic), so no memo is needed; any other type is handed to ``copy.deepcopy``.

    Every read of the store copies (callers may change what they get), so this is the lab's
    hottest function: at 50 nodes the controllers' resync passes spent most of their time in
    ``copy.deepcopy`` of the pod list (docs/benchmarks.md, "The lab's own cost per node")."""
    kind = type(value)
    if kind is dict:
        return {key: clone(item) for key, item in value.items()}
    if kind is list:
        return [clone(item) for item in value]
    if kind in _ATOMIC:
        return value
    return copy.deepcopy(value)


# ---------------------------------------------------------------- resource types

@dataclass
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: Tuple[str, ...] = ()
    status_subresource: bool = True
    has_generation: bool = True
    subresources: Tuple[str, ...] = ()  # besides "status"
    field_selectors: Tuple[str, ...] = ()
    categories: Tuple[str, ...] = ()
    custom: bool = False  # served because of a CRD (no strategic merge patch)
    schema: Optional[Dict[str, Any]] = None  # openAPIV3Schema of the CRD version (pruning)
    printer_columns: Tuple[Dict[str, Any], ...] = ()  # additionalPrinterColumns
    verbs: Tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch",
                              "update", "watch")

    @property
    def key(self) -> str:
        return "%s/%s/%s" % (self.group, self.version, self.plural) if self.group \
            else "%s/%s" % (self.version, self.plural)

    @property
    def api_version(self) -> str:
        return "%s/%s" % (self.group, self.version) if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def supported_field_selectors(self) -> Tuple[str, ...]:
        return ("metadata.name", "metadata.namespace") + self.field_selectors


def builtin_resource_types() -> List[ResourceType]:
    return [
        ResourceType("", "v1", "namespaces", "Namespace", False, "namespace", ("ns",),
                     has_generation=False, field_selectors=("status.phase",),
                     subresources=("finalize",)),
        ResourceType("", "v1", "nodes", "Node", False, "node", ("no",), has_generation=False,
                     field_selectors=("spec.unschedulable",), subresources=("proxy",)),
        ResourceType("", "v1", "configmaps", "ConfigMap", True, "configmap", ("cm",),
                     status_subresource=False, has_generation=False),
        ResourceType("", "v1", "secrets", "Secret", True, "secret", (),
                     status_subresource=False, has_generation=False, field_selectors=("type",)),
        ResourceType("", "v1", "pods", "Pod", True, "pod", ("po",), categories=("all",),
                     subresources=("log", "eviction", "binding", "proxy"),
                     field_selectors=("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                      "spec.serviceAccountName", "status.phase", "status.podIP",
                                      "status.nominatedNodeName")),
        ResourceType("", "v1", "events", "Event", True, "event", ("ev",),
                     status_subresource=False, has_generation=False,
                     field_selectors=("involvedObject.kind", "involvedObject.namespace",
                                      "involvedObject.name", "involvedObject.uid",
                                      "involvedObject.apiVersion",
                                      "involvedObject.resourceVersion",
                                      "involvedObject.fieldPath", "reason", "reportingComponent",
                                      "source", "type")),
        ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True, "serviceaccount",
                     ("sa",), status_subresource=False, has_generation=False),
        ResourceType("", "v1", "services", "Service", True, "service", ("svc",),
                     has_generation=False, categories=("all",)),
        ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, "daemonset", ("ds",),
                     categories=("all",)),
        # Served for clients that manage them; no controller acts on these three in the lab.
        ResourceType("apps", "v1", "deployments", "Deployment", True, "deployment", ("deploy",),
                     categories=("all",), subresources=("scale",)),
        ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, "replicaset", ("rs",),
                     categories=("all",), subresources=("scale",)),
        ResourceType("apps", "v1", "statefulsets", "StatefulSet", True, "statefulset", ("sts",),
                     categories=("all",), subresources=("scale",)),
        ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
                     "poddisruptionbudget", ("pdb",)),
        # Leases (docs/reference/specs.md 12.1): no status, no generation; the collection's rollout lock.
        ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True, "lease", (),
                     status_subresource=False, has_generation=False),
        ResourceType("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", False,
                     "clusterpolicy", (), custom=True),
        ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                     "CustomResourceDefinition", False, "customresourcedefinition",
                     ("crd", "crds"), categories=("api-extensions",)),
    ]


@dataclass
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    resource_key: str
    object: Obj
    old_object: Optional[Obj]
    resource_version: int


def pod_ready(pod: Obj) -> bool:
    """Running, not terminating, and its Ready condition True."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


# ------------------------------------------------------------------------- time

def now_rfc3339(stamp: float) -> str:
    """`stamp` (seconds since the epoch) as Kubernetes writes timestamps."""
    return _dt.datetime.fromtimestamp(stamp, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    return _dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=_dt.timezone.utc).timestamp()


__all__ = ["Obj", "ResourceType", "WatchEvent", "builtin_resource_types", "clone", "now_rfc3339",
           "parse_rfc3339", "pod_ready"]
