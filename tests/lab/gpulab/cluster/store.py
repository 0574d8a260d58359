"""In-memory object store of the lab's virtual Kubernetes cluster (a test instrument).

STORE CONTRACT (controllers in gpulab.cluster.{operator,scheduler,kubelet} build on this; the same
text is in docs/architecture.md, section "Virtual cluster store")

Resource keys are "<group>/<version>/<plural>", with the core group written "v1/<plural>":
  v1/namespaces v1/nodes v1/configmaps v1/secrets v1/pods v1/events v1/serviceaccounts
  apps/v1/daemonsets  policy/v1/poddisruptionbudgets  nvidia.com/v1/clusterpolicies (cluster scope)
  apiextensions.k8s.io/v1/customresourcedefinitions (creating a CRD serves its resources too).

Objects are plain JSON dicts. Every method is thread-safe (one re-entrant lock) and returns deep
copies; callers may mutate what they get. Errors raise ApiError(code, reason, message), whose
.status() is the Kubernetes Status body (NotFound 404, AlreadyExists 409, Conflict 409,
Invalid 422, BadRequest 400, Forbidden 403, Gone 410, TooManyRequests 429, ...).

  store = Store()
  store.create(key, obj, dry_run=False, controller=False) -> obj
      uid, resourceVersion, creationTimestamp, generation=1, defaults; generateName works. Like
      the API server, .status is dropped on create for types with a status subresource (except
      nodes); controller=True keeps the given status.
  store.get(key, namespace, name) -> obj               # namespace None for cluster-scoped
  store.list(key, namespace=None, label_selector=None, field_selector=None, limit=None,
             continue_token=None) -> {"kind": "PodList", "metadata": {"resourceVersion"}, "items"}
  store.items(key, namespace=None, label_selector=None, field_selector=None) -> [obj, ...]
  store.update(key, obj, dry_run=False, subresource=None) -> obj
      PUT semantics: metadata.resourceVersion, when given and stale -> 409 Conflict. On the main
      resource, status is ignored for types with a status subresource; subresource="status"
      changes only .status. Pods: spec is immutable except images/tolerations/activeDeadline.
  store.patch(key, namespace, name, patch, patch_type, dry_run=False, subresource=None,
              field_manager=None) -> obj
      patch_type: "json" | "merge" | "strategic" | "apply" or the matching Content-Type.
      "apply" (server-side apply, field_manager required): creates a missing object; 409 Conflict
      when it would change a field another manager set (unless force=True); removes the fields
      the same manager applied before and no longer applies (unless others own them). Ownership
      is tracked internally (see ownership.py); no metadata.managedFields.
  store.delete(key, namespace, name, grace_period_seconds=None, preconditions=None,
               propagation_policy=None, dry_run=False) -> obj
      Pods bound to a node are deleted gracefully: deletionTimestamp (= now + grace) and
      deletionGracePeriodSeconds are set (MODIFIED event); the kubelet controller removes the pod
      with delete(..., grace_period_seconds=0). As a fallback, store.reap() (called every second by
      the server) removes pods whose deletionTimestamp has passed. Grace 0, unbound pods and
      pods in a terminal phase go at once. Objects with metadata.finalizers stay (with a
      deletionTimestamp) until an update empties the finalizers. Dependents (ownerReferences.uid)
      are deleted after their owner (background garbage collection), or orphaned on "Orphan".
  store.evict(namespace, name, dry_run=False) -> Status  # policy/v1 Eviction; honours PDBs:
      429 TooManyRequests when a PodDisruptionBudget does not allow it.
  store.bind(namespace, name, node_name) -> obj          # pods/binding: sets spec.nodeName once
  store.controller_update(key, namespace, name, mutate, subresource=None) -> obj
      For controllers: mutate(obj) edits a copy in place (or returns a new dict). No
      resourceVersion precondition, no user-level immutability checks (controllers may set
      spec.nodeName, status, labels ...); subresource="status" keeps only the .status change.
      A no-op (nothing changed) writes nothing: no resourceVersion move, no event.
  store.subscribe(callback) -> unsubscribe()
      callback(event) for every committed change, in commit order, called synchronously while the
      store lock is held: keep it short and NEVER write to the store from it (queue work to your
      own thread). event: WatchEvent(type "ADDED"|"MODIFIED"|"DELETED", resource_key, object,
      old_object (None for ADDED), resource_version int). Do not mutate event objects.
  store.set_pod_log(namespace, name, text, container=None, append=False); get_pod_log(...)
  store.record_event(involved_object, reason, message, type="Normal", component="gpulab")
  store.resource(key) -> ResourceType; store.resources(); store.resource_version() -> int

Semantics kept from the real API server: monotonic cluster-wide resourceVersion (string in
objects), a write that changes nothing does not move it; generation bumps on spec changes (not on
metadata/status); dry_run computes and validates everything and stores nothing; PDB status
(currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed) is maintained like the
disruption controller does; a pod is healthy when its Ready condition is True (or, if the pod has
no conditions at all, when it is Running).
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as _dt
import json
import logging
import math
import random
import re
import string
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from . import ownership as _own
from . import patch as _patch
from . import schema as _schema
from . import selectors as _sel

LOG = logging.getLogger("gpulab.cluster.store")

Obj = Dict[str, Any]


# ------------------------------------------------------------------------ errors

class ApiError(Exception):
    """An error the API returns as a Kubernetes Status body."""

    def __init__(self, code: int, reason: str, message: str,
                 details: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> Obj:
        body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            body["details"] = self.details
        return body


def _qualified(rt: "ResourceType") -> str:
    return rt.plural if not rt.group else "%s.%s" % (rt.plural, rt.group)


def _details(rt: "ResourceType", name: str) -> Dict[str, Any]:
    details: Dict[str, Any] = {"name": name, "kind": rt.plural}
    if rt.group:
        details["group"] = rt.group
    return details


def not_found(rt: "ResourceType", name: str) -> ApiError:
    return ApiError(404, "NotFound", '%s "%s" not found' % (_qualified(rt), name),
                    _details(rt, name))


def already_exists(rt: "ResourceType", name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (_qualified(rt), name),
                    _details(rt, name))


def conflict(rt: "ResourceType", name: str, why: str = "the object has been modified; please "
             "apply your changes to the latest version and try again") -> ApiError:
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (_qualified(rt), name, why), _details(rt, name))


def invalid(rt: "ResourceType", name: str, causes: List[Tuple[str, str]]) -> ApiError:
    """causes: (field, message) pairs; message starts with the k8s error type words."""
    causes_body = []
    for field_path, message in causes:
        reason = "FieldValueInvalid"
        for prefix, cause_reason in (("Required value", "FieldValueRequired"),
                                     ("Forbidden", "FieldValueForbidden"),
                                     ("Unsupported value", "FieldValueNotSupported"),
                                     ("Duplicate value", "FieldValueDuplicate")):
            if message.startswith(prefix):
                reason = cause_reason
        causes_body.append({"reason": reason, "message": message, "field": field_path})
    details: Dict[str, Any] = {"name": name, "kind": rt.kind, "causes": causes_body}
    if rt.group:
        details["group"] = rt.group
    text = "; ".join("%s: %s" % (f, m) for f, m in causes)
    if len(causes) > 1:
        text = "[%s]" % ", ".join("%s: %s" % (f, m) for f, m in causes)
    return ApiError(422, "Invalid", '%s.%s "%s" is invalid: %s'
                    % (rt.kind, rt.group, name, text) if rt.group else
                    '%s "%s" is invalid: %s' % (rt.kind, name, text), details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


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
                     subresources=("log", "eviction", "binding"),
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
        ResourceType("nvidia.com", "v1", "clusterpolicies", "ClusterPolicy", False,
                     "clusterpolicy", (), custom=True),
        ResourceType("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                     "CustomResourceDefinition", False, "customresourcedefinition",
                     ("crd", "crds"), categories=("api-extensions",)),
    ]


# ------------------------------------------------------------------------ events

@dataclass
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    resource_key: str
    object: Obj
    old_object: Optional[Obj]
    resource_version: int


# ------------------------------------------------------------------ validation

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _name_problems(name: str, label_only: bool = False) -> List[str]:
    if label_only:
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return ["Invalid value: %r: a lowercase RFC 1123 label must consist of lower case "
                    "alphanumeric characters or '-', and must start and end with an alphanumeric "
                    "character" % name]
        return []
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return ["Invalid value: %r: a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character" % name]
    return []


def _label_key_problems(key: str) -> List[str]:
    prefix, _slash, name = key.rpartition("/")
    problems = []
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        problems.append("Invalid value: %r: prefix part must be a DNS-1123 subdomain" % key)
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        problems.append("Invalid value: %r: name part must consist of alphanumeric characters, "
                        "'-', '_' or '.', and must start and end with an alphanumeric character"
                        % key)
    return problems


def _metadata_problems(obj: Obj) -> List[Tuple[str, str]]:
    meta = obj.get("metadata") or {}
    problems: List[Tuple[str, str]] = []
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        return [("metadata.labels", "Invalid value: must be a map of strings")]
    for key, value in labels.items():
        for message in _label_key_problems(str(key)):
            problems.append(("metadata.labels", message))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            problems.append(("metadata.labels", "Invalid value: %r: a valid label must be an "
                             "empty string or consist of alphanumeric characters, '-', '_' or "
                             "'.', and must start and end with an alphanumeric character "
                             "(max 63 characters)" % (value,)))
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict):
        problems.append(("metadata.annotations", "Invalid value: must be a map of strings"))
    else:
        for key, value in annotations.items():
            for message in _label_key_problems(str(key)):
                problems.append(("metadata.annotations", message))
            if not isinstance(value, str):
                problems.append(("metadata.annotations", "Invalid value: %r: annotation values "
                                 "must be strings" % (value,)))
    return problems


def _is_extended_resource(name: str) -> bool:
    return "/" in name and not name.split("/")[0].endswith("kubernetes.io")


def _quantity_ok(value: Any) -> bool:
    return isinstance(value, (int, float)) or (
        isinstance(value, str) and re.match(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]i?|)$",
                                            value) is not None)


def _pod_spec_problems(spec: Any, path: str) -> List[Tuple[str, str]]:
    if not isinstance(spec, dict):
        return [(path, "Required value")]
    problems: List[Tuple[str, str]] = []
    containers = spec.get("containers")
    if not containers:
        problems.append((path + ".containers", "Required value"))
        return problems
    seen = set()
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(kind) or []):
            cpath = "%s.%s[%d]" % (path, kind, index)
            name = container.get("name") if isinstance(container, dict) else None
            if not name:
                problems.append((cpath + ".name", "Required value"))
            elif not _DNS_LABEL.match(name) or len(name) > 63:
                problems.append((cpath + ".name", _name_problems(name, True)[0]))
            elif name in seen:
                problems.append((cpath + ".name", "Duplicate value: %r" % name))
            seen.add(name)
            if isinstance(container, dict) and not container.get("image"):
                problems.append((cpath + ".image", "Required value"))
            resources = (container or {}).get("resources") or {}
            limits = resources.get("limits") or {}
            requests = resources.get("requests") or {}
            for section, values in (("limits", limits), ("requests", requests)):
                for rname, qty in values.items():
                    if not _quantity_ok(qty):
                        problems.append(("%s.resources.%s[%s]" % (cpath, section, rname),
                                         "Invalid value: %r: must be a quantity" % (qty,)))
            for rname in set(limits) | set(requests):
                if not _is_extended_resource(rname):
                    continue
                # SPECS-independent Kubernetes rule: extended resources cannot be overcommitted.
                if rname not in limits:
                    problems.append(("%s.resources.limits" % cpath,
                                     "Required value: Limit must be set for non overcommitable "
                                     "resources"))
                elif rname in requests and str(requests[rname]) != str(limits[rname]):
                    problems.append(("%s.resources.requests" % cpath,
                                     "Invalid value: %r: must be equal to %s limit of %s"
                                     % (str(requests[rname]), rname, str(limits[rname]))))
                else:
                    try:
                        if float(limits[rname]) != int(float(limits[rname])):
                            raise ValueError
                    except ValueError:
                        problems.append(("%s.resources.limits[%s]" % (cpath, rname),
                                         "Invalid value: %r: must be an integer"
                                         % (limits[rname],)))
    return problems


def _validate(rt: ResourceType, obj: Obj, old: Optional[Obj]) -> List[Tuple[str, str]]:
    name = obj["metadata"].get("name", "")
    problems = _metadata_problems(obj)
    if rt.key == "apiextensions.k8s.io/v1/customresourcedefinitions":
        spec = obj.get("spec") or {}
        names = spec.get("names") or {}
        for fld in ("group",):
            if not spec.get(fld):
                problems.append(("spec." + fld, "Required value"))
        for fld in ("plural", "kind"):
            if not names.get(fld):
                problems.append(("spec.names." + fld, "Required value"))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            problems.append(("spec.scope", "Unsupported value: %r: supported values: "
                             "\"Cluster\", \"Namespaced\"" % (spec.get("scope"),)))
        if not spec.get("versions"):
            problems.append(("spec.versions", "Required value: must have exactly one version "
                             "marked as storage version"))
        if names.get("plural") and spec.get("group") and \
                name != "%s.%s" % (names["plural"], spec["group"]):
            problems.append(("metadata.name", "Invalid value: %r: must be spec.names.plural+\".\""
                             "+spec.group" % name))
        return problems
    for message in _name_problems(name, label_only=rt.key == "v1/namespaces"):
        problems.append(("metadata.name", message))
    if rt.key == "v1/pods":
        problems += _pod_spec_problems(obj.get("spec"), "spec")
        if old is not None:
            problems += _pod_update_problems(old, obj)
    elif rt.key == "v1/configmaps":
        for section in ("data", "binaryData"):
            values = obj.get(section) or {}
            if not isinstance(values, dict):
                problems.append((section, "Invalid value: must be a map"))
                continue
            for key, value in values.items():
                if not _CONFIG_KEY.match(key) or len(key) > 253:
                    problems.append(("%s[%s]" % (section, key), "Invalid value: %r: a valid "
                                     "config key must consist of alphanumeric characters, '-', "
                                     "'_' or '.'" % key))
                if not isinstance(value, str):
                    problems.append(("%s[%s]" % (section, key), "Invalid value: must be a string"))
        size = sum(len(k) + len(v) for s in ("data", "binaryData")
                   for k, v in (obj.get(s) or {}).items() if isinstance(v, str))
        if size > 1048576:
            problems.append(("", "Too long: must have at most 1048576 bytes"))
    elif rt.key == "v1/secrets":
        for key in (obj.get("data") or {}):
            if not _CONFIG_KEY.match(key):
                problems.append(("data[%s]" % key, "Invalid value: %r: a valid config key must "
                                 "consist of alphanumeric characters, '-', '_' or '.'" % key))
    elif rt.key in ("apps/v1/daemonsets", "apps/v1/deployments", "apps/v1/replicasets",
                    "apps/v1/statefulsets"):
        spec = obj.get("spec") or {}
        selector = spec.get("selector")
        template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not selector:
            problems.append(("spec.selector", "Required value"))
        else:
            problems += _sel.label_selector_errors(selector, "spec.selector")
            try:
                ok = _sel.matches(_sel.from_label_selector(selector), template_labels)
            except _sel.SelectorError:
                ok = False
            if not ok or not (selector.get("matchLabels") or selector.get("matchExpressions")):
                problems.append(("spec.template.metadata.labels", "Invalid value: %s: `selector` "
                                 "does not match template `labels`" % json.dumps(template_labels)))
        problems += _pod_spec_problems((spec.get("template") or {}).get("spec"),
                                       "spec.template.spec")
        if old is not None and (old.get("spec") or {}).get("selector") != selector:
            problems.append(("spec.selector", "Invalid value: %s: field is immutable"
                             % json.dumps(selector)))
    elif rt.key == "policy/v1/poddisruptionbudgets":
        spec = obj.get("spec") or {}
        if "minAvailable" in spec and "maxUnavailable" in spec:
            problems.append(("spec", "Invalid value: minAvailable and maxUnavailable cannot be "
                             "both set"))
        for fld in ("minAvailable", "maxUnavailable"):
            if fld in spec:
                value = spec[fld]
                if isinstance(value, int) and value < 0:
                    problems.append(("spec." + fld, "Invalid value: %d: must be greater than or "
                                     "equal to 0" % value))
                elif isinstance(value, str) and not re.match(r"^\d+%$", value):
                    problems.append(("spec." + fld, "Invalid value: %r: a valid percent string "
                                     "must be a numeric string followed by an ending '%%'" % value))
        problems += _sel.label_selector_errors(spec.get("selector"), "spec.selector")
    return problems


_POD_MUTABLE_NOTE = ("pod updates may not change fields other than `spec.containers[*].image`,"
                     "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                     "`spec.tolerations` (only additions to existing tolerations),"
                     "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                     "previously negative)")


def _pod_update_problems(old: Obj, new: Obj) -> List[Tuple[str, str]]:
    def normalised(spec: Obj) -> Obj:
        spec = copy.deepcopy(spec or {})
        for kind in ("containers", "initContainers"):
            for container in spec.get(kind) or []:
                container.pop("image", None)
        spec.pop("activeDeadlineSeconds", None)
        spec.pop("tolerations", None)
        return spec
    problems = []
    if normalised(old.get("spec")) != normalised(new.get("spec")):
        problems.append(("spec", "Forbidden: " + _POD_MUTABLE_NOTE))
    old_tolerations = (old.get("spec") or {}).get("tolerations") or []
    new_tolerations = (new.get("spec") or {}).get("tolerations") or []
    if any(t not in new_tolerations for t in old_tolerations):
        problems.append(("spec.tolerations", "Forbidden: existing toleration can not be "
                         "modified except its tolerationSeconds"))
    return problems


# ---------------------------------------------------------------------- defaults

def _image_pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    if ":" not in tail or tail.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def _default_pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    spec.setdefault("tolerations", [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}])
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            if not isinstance(container, dict):
                continue
            if isinstance(container.get("image"), str):
                container.setdefault("imagePullPolicy", _image_pull_policy(container["image"]))
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            resources = container.setdefault("resources", {})
            limits = resources.get("limits") or {}
            if limits:
                requests = resources.setdefault("requests", {})
                for rname, qty in limits.items():
                    requests.setdefault(rname, qty)  # requests default to limits


def _apply_defaults(rt: ResourceType, obj: Obj) -> None:
    key = rt.key
    if key == "v1/pods":
        _default_pod_spec(obj.setdefault("spec", {}))
        status = obj.setdefault("status", {})
        status.setdefault("phase", "Pending")
        status.setdefault("qosClass", _qos_class(obj["spec"]))
    elif key == "v1/namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj.setdefault("status", {}).setdefault("phase", "Active")
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = \
            obj["metadata"]["name"]
    elif key == "v1/secrets":
        obj.setdefault("type", "Opaque")
    elif key == "apps/v1/daemonsets":
        spec = obj.setdefault("spec", {})
        spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
        if spec["updateStrategy"].get("type") == "RollingUpdate":
            spec["updateStrategy"].setdefault("rollingUpdate", {"maxUnavailable": 1,
                                                                "maxSurge": 0})
        spec.setdefault("revisionHistoryLimit", 10)
        _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
        obj.setdefault("status", {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                  "desiredNumberScheduled": 0, "numberReady": 0})
    elif key == "policy/v1/poddisruptionbudgets":
        obj.setdefault("status", {"disruptionsAllowed": 0, "currentHealthy": 0,
                                  "desiredHealthy": 0, "expectedPods": 0})
    elif key == "v1/nodes":
        obj.setdefault("spec", {})
    elif key == "v1/services":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") != "None":
            # a stable fake ClusterIP from the name (no service network in the lab)
            digest = uuid.uuid5(uuid.NAMESPACE_DNS, "%s.%s" % (obj["metadata"]["name"],
                                obj["metadata"].get("namespace"))).bytes
            spec.setdefault("clusterIP", "10.96.%d.%d" % (digest[0], max(1, digest[1])))
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
        obj.setdefault("status", {"loadBalancer": {}})
    elif key in ("apps/v1/deployments", "apps/v1/statefulsets", "apps/v1/replicasets"):
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        _default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))


def _qos_class(spec: Obj) -> str:
    containers = spec.get("containers") or []
    any_set = False
    guaranteed = bool(containers)
    for container in containers:
        resources = container.get("resources") or {}
        limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
        any_set = any_set or bool(limits) or bool(requests)
        for rname in ("cpu", "memory"):
            if rname not in limits or str(requests.get(rname)) != str(limits[rname]):
                guaranteed = False
    if guaranteed:
        return "Guaranteed"
    return "Burstable" if any_set else "BestEffort"


# ------------------------------------------------------------------------- time

def _now_rfc3339(clock: Callable[[], float], offset: float = 0) -> str:
    stamp = _dt.datetime.fromtimestamp(clock() + offset, tz=_dt.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    return _dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=_dt.timezone.utc).timestamp()


# ------------------------------------------------------------------------ store

def _quantities_to_strings(values: Any) -> None:
    if isinstance(values, dict):
        for rname, qty in list(values.items()):
            if isinstance(qty, (int, float)) and not isinstance(qty, bool):
                values[rname] = str(int(qty)) if float(qty).is_integer() else str(qty)


def _stringify_quantities(rt: ResourceType, obj: Obj) -> None:
    """The API serialises resource.Quantity as strings; clients may send numbers."""
    specs = []
    if rt.key == "v1/pods":
        specs.append(obj.get("spec"))
    elif rt.key.startswith("apps/v1/"):
        specs.append(((obj.get("spec") or {}).get("template") or {}).get("spec"))
    elif rt.key == "v1/nodes":
        status = obj.get("status") or {}
        _quantities_to_strings(status.get("capacity"))
        _quantities_to_strings(status.get("allocatable"))
    for spec in specs:
        for kind in ("initContainers", "containers"):
            for container in (spec or {}).get(kind) or []:
                if isinstance(container, dict):
                    resources = container.get("resources") or {}
                    _quantities_to_strings(resources.get("limits"))
                    _quantities_to_strings(resources.get("requests"))


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


_PROTECTED_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp",
                   "deletionGracePeriodSeconds", "selfLink")


class Store:
    """The cluster's objects. See the module docstring for the contract."""

    HISTORY = 10000  # watch events kept for resourceVersion resume

    def __init__(self, clock: Callable[[], float] = time.time):
        self._lock = threading.RLock()
        self._clock = clock
        self._rv = 1
        self._types: Dict[str, ResourceType] = {}
        self._data: Dict[str, Dict[Tuple[str, str], Obj]] = {}
        self._history: Deque[WatchEvent] = deque(maxlen=self.HISTORY)
        self._subscribers: List[Callable[[WatchEvent], None]] = []
        self._logs: Dict[Tuple[str, str], Dict[str, str]] = {}
        self._in_pdb_refresh = False
        # server-side apply: which field manager set which fields, per object uid
        self._owners: Dict[str, _own.Ownership] = {}
        for rt in builtin_resource_types():
            self.register_resource(rt)
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create("v1/namespaces", {"metadata": {"name": name}})

    # ----------------------------------------------------------- type registry

    def register_resource(self, rt: ResourceType) -> None:
        with self._lock:
            self._types[rt.key] = rt
            self._data.setdefault(rt.key, {})

    def unregister_resource(self, key: str) -> None:
        with self._lock:
            self._types.pop(key, None)
            self._data.pop(key, None)

    def resource(self, key: str) -> ResourceType:
        rt = self._types.get(key)
        if rt is None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource "
                           "(%s)" % key, {})
        return rt

    def resources(self) -> List[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def resource_version(self) -> int:
        return self._rv

    # ----------------------------------------------------------------- helpers

    def _ns_key(self, rt: ResourceType, namespace: Optional[str], name: str) -> Tuple[str, str]:
        return ((namespace or "") if rt.namespaced else "", name)

    def _lookup(self, rt: ResourceType, namespace: Optional[str], name: str) -> Obj:
        obj = self._data[rt.key].get(self._ns_key(rt, namespace, name))
        if obj is None:
            raise not_found(rt, name)
        return obj

    def _notify(self, event: WatchEvent) -> None:
        self._history.append(event)
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # a broken subscriber must not break writes
                LOG.exception("store subscriber failed on %s %s", event.type, event.resource_key)

    def _commit(self, rt: ResourceType, new: Optional[Obj], old: Optional[Obj],
                event_type: str) -> Obj:
        """Store `new` (or remove `old` when new is None) with a fresh resourceVersion."""
        self._rv += 1
        if new is None:
            assert old is not None
            gone = copy.deepcopy(old)
            gone["metadata"]["resourceVersion"] = str(self._rv)
            self._owners.pop(old["metadata"].get("uid", ""), None)
            meta = old["metadata"]
            self._data[rt.key].pop(self._ns_key(rt, meta.get("namespace"), meta["name"]), None)
            self._notify(WatchEvent("DELETED", rt.key, gone, old, self._rv))
            self._after_write(rt, gone)
            return copy.deepcopy(gone)
        new["metadata"]["resourceVersion"] = str(self._rv)
        meta = new["metadata"]
        self._data[rt.key][self._ns_key(rt, meta.get("namespace"), meta["name"])] = new
        self._notify(WatchEvent(event_type, rt.key, copy.deepcopy(new), old, self._rv))
        self._after_write(rt, new)
        return copy.deepcopy(new)

    def _after_write(self, rt: ResourceType, obj: Obj) -> None:
        if rt.key in ("v1/pods", "policy/v1/poddisruptionbudgets") and not self._in_pdb_refresh:
            self._refresh_pdbs(obj["metadata"].get("namespace") or "")

    def _check_namespace(self, rt: ResourceType, obj: Obj) -> None:
        if not rt.namespaced:
            obj["metadata"].pop("namespace", None)
            return
        namespace = obj["metadata"].setdefault("namespace", "default")
        ns = self._data["v1/namespaces"].get(("", namespace))
        if ns is None:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % namespace,
                           {"name": namespace, "kind": "namespaces"})
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", '%s "%s" is forbidden: unable to create new content '
                           'in namespace %s because it is being terminated'
                           % (_qualified(rt), obj["metadata"].get("name", ""), namespace),
                           _details(rt, obj["metadata"].get("name", "")))

    @staticmethod
    def _normalise(rt: ResourceType, obj: Any) -> Obj:
        if not isinstance(obj, dict):
            raise bad_request("the body of the request must be a JSON object")
        obj = copy.deepcopy(obj)
        obj["apiVersion"] = rt.api_version
        obj["kind"] = rt.kind
        meta = obj.get("metadata")
        if meta is None:
            meta = obj["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        for key in ("labels", "annotations"):
            if key in meta and meta[key] is None:
                del meta[key]
        _stringify_quantities(rt, obj)
        if rt.key == "v1/secrets":
            string_data = obj.pop("stringData", None) or {}
            data = obj.get("data") or {}
            for key, value in data.items():
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, TypeError, ValueError):
                    raise bad_request("Secret in version \"v1\" cannot be handled as a Secret: "
                                      "illegal base64 data in data[%s]" % key) from None
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
            if data or "data" in obj:
                obj["data"] = data
        return obj

    def _generation_bump(self, rt: ResourceType, old: Obj, new: Obj) -> None:
        if not rt.has_generation:
            new["metadata"].pop("generation", None)
            return
        generation = old["metadata"].get("generation", 1)
        if _spec_part(old) != _spec_part(new):
            generation += 1
        new["metadata"]["generation"] = generation

    # ---------------------------------------------------------------- reading

    def get(self, key: str, namespace: Optional[str], name: str) -> Obj:
        with self._lock:
            rt = self.resource(key)
            return copy.deepcopy(self._lookup(rt, namespace, name))

    def _select(self, rt: ResourceType, namespace: Optional[str], label_selector: Any,
                field_selector: Any) -> List[Obj]:
        labels = label_selector if isinstance(label_selector, tuple) else \
            self._parse_labels(label_selector)
        fields = field_selector if isinstance(field_selector, tuple) else \
            self._parse_fields(rt, field_selector)
        result = []
        for (ns, _name), obj in sorted(self._data[rt.key].items()):
            if namespace and rt.namespaced and ns != namespace:
                continue
            if not _sel.matches(labels, obj["metadata"].get("labels")):
                continue
            if not _sel.field_matches(fields, obj):
                continue
            result.append(obj)
        return result

    @staticmethod
    def _parse_labels(text: Optional[str]) -> _sel.Selector:
        try:
            return _sel.parse_label_selector(text)
        except _sel.SelectorError as exc:
            raise bad_request("unable to parse requirement: %s" % exc) from None

    @staticmethod
    def _parse_fields(rt: ResourceType, text: Optional[str]) -> _sel.FieldSelector:
        try:
            return _sel.parse_field_selector(text, rt.supported_field_selectors())
        except _sel.SelectorError as exc:
            raise bad_request(str(exc)) from None

    def list(self, key: str, namespace: Optional[str] = None, label_selector: Any = None,
             field_selector: Any = None, limit: Optional[int] = None,
             continue_token: Optional[str] = None) -> Obj:
        with self._lock:
            rt = self.resource(key)
            items = self._select(rt, namespace, label_selector, field_selector)
            meta: Obj = {"resourceVersion": str(self._rv)}
            if continue_token:
                try:
                    start = json.loads(base64.urlsafe_b64decode(continue_token.encode()).decode())
                    start_key = (start["ns"], start["name"])
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "BadRequest", "continue key is not valid") from None
                items = [o for o in items
                         if ((o["metadata"].get("namespace") or ""), o["metadata"]["name"])
                         > start_key]
            if limit and limit > 0 and len(items) > limit:
                last = items[limit - 1]["metadata"]
                meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                    {"ns": last.get("namespace") or "", "name": last["name"]}).encode()).decode()
                meta["remainingItemCount"] = len(items) - limit
                items = items[:limit]
            return {"apiVersion": rt.api_version, "kind": rt.list_kind, "metadata": meta,
                    "items": copy.deepcopy(items)}

    def items(self, key: str, namespace: Optional[str] = None, label_selector: Any = None,
              field_selector: Any = None) -> List[Obj]:
        with self._lock:
            rt = self.resource(key)
            return copy.deepcopy(self._select(rt, namespace, label_selector, field_selector))

    # ---------------------------------------------------------------- writing

    def create(self, key: str, obj: Obj, dry_run: bool = False, controller: bool = False,
               field_manager: Optional[str] = None) -> Obj:
        with self._lock:
            rt = self.resource(key)
            obj = self._normalise(rt, obj)
            if rt.status_subresource and rt.key != "v1/nodes" and not controller:
                obj.pop("status", None)  # like the API server: status is not set on create
            meta = obj["metadata"]
            if meta.get("resourceVersion"):
                raise ApiError(500, "InternalError", "resourceVersion should not be set on "
                               "objects to be created")
            if not meta.get("name"):
                if meta.get("generateName"):
                    suffix = "".join(random.choice(string.ascii_lowercase + string.digits)
                                     for _index in range(5))
                    meta["name"] = meta["generateName"] + suffix
                else:
                    raise invalid(rt, "", [("metadata.name", "Required value: name or "
                                                             "generateName is required")])
            self._check_namespace(rt, obj)
            if self._ns_key(rt, meta.get("namespace"), meta["name"]) in self._data[rt.key]:
                raise already_exists(rt, meta["name"])
            for fld in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
                meta.pop(fld, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = _now_rfc3339(self._clock)
            if rt.has_generation:
                meta["generation"] = 1
            else:
                meta.pop("generation", None)
            _apply_defaults(rt, obj)
            obj, problems = _schema.prune_and_validate(rt.schema, obj) if rt.schema else (obj, [])
            problems = problems + _validate(rt, obj, None)
            if problems:
                raise invalid(rt, meta["name"], problems)
            if dry_run:
                return copy.deepcopy(obj)
            result = self._commit(rt, obj, None, "ADDED")
            self._record_update(result, None, field_manager or ("gpulab-controllers" if controller else None))
            if rt.key == "apiextensions.k8s.io/v1/customresourcedefinitions":
                self._crd_established(result)
                result = copy.deepcopy(self._lookup(rt, None, meta["name"]))
            return result

    def _record_update(self, result: Obj, old: Optional[Obj], manager: Optional[str]) -> None:
        uid = result["metadata"].get("uid")
        if not uid or result["metadata"].get("resourceVersion") == (old or {}).get(
                "metadata", {}).get("resourceVersion"):
            return
        owners = self._owners.setdefault(uid, _own.Ownership())
        changed, removed = _own.changed_paths(old, result)
        owners.record_update(manager or "unknown", changed, removed)

    def _prepare_update(self, rt: ResourceType, current: Obj, obj: Obj,
                        subresource: Optional[str], trusted: bool) -> Obj:
        """Merge an incoming full object onto `current` following the subresource rules."""
        new = self._normalise(rt, obj)
        meta = new["metadata"]
        old_meta = current["metadata"]
        for fld in _PROTECTED_META:
            if fld in old_meta:
                meta[fld] = old_meta[fld]
            else:
                meta.pop(fld, None)
        meta["name"] = old_meta["name"]
        if rt.namespaced:
            meta["namespace"] = old_meta.get("namespace")
        else:
            meta.pop("namespace", None)
        if subresource == "status":
            result = copy.deepcopy(current)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            return result
        if subresource not in (None, ""):
            raise ApiError(404, "NotFound", "the server could not find the requested resource",
                           {})
        if rt.status_subresource and not trusted:
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
            else:
                new.pop("status", None)
        if rt.key == "v1/namespaces":
            new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = \
                old_meta["name"]
        if rt.key == "v1/pods" and not trusted:
            # defaults the client may have dropped on a GET-modify-PUT come back
            _default_pod_spec(new.setdefault("spec", {}))
        return new

    def _write_update(self, rt: ResourceType, current: Obj, new: Obj, dry_run: bool,
                      trusted: bool) -> Obj:
        if rt.schema:
            new, schema_problems = _schema.prune_and_validate(rt.schema, new)
            if schema_problems:
                raise invalid(rt, new["metadata"]["name"], schema_problems)
        self._generation_bump(rt, current, new)
        if not trusted or rt.key != "v1/pods":
            problems = _validate(rt, new, None if trusted else current)
            if problems:
                raise invalid(rt, new["metadata"]["name"], problems)
        # no-op writes do not move the resourceVersion (like etcd GuaranteedUpdate)
        if new == current:
            return copy.deepcopy(current)
        if dry_run:
            return copy.deepcopy(new)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers") \
                and not self._awaits_kubelet(rt, new):
            return self._commit(rt, None, current, "DELETED")
        result = self._commit(rt, new, current, "MODIFIED")
        if rt.key == "apiextensions.k8s.io/v1/customresourcedefinitions":
            self._crd_established(result)
            result = copy.deepcopy(self._lookup(rt, None, result["metadata"]["name"]))
        return result

    def update(self, key: str, obj: Obj, dry_run: bool = False,
               subresource: Optional[str] = None, field_manager: Optional[str] = None) -> Obj:
        with self._lock:
            rt = self.resource(key)
            if not isinstance(obj, dict):
                raise bad_request("the body of the request must be a JSON object")
            meta = obj.get("metadata") or {}
            name = meta.get("name")
            if not name:
                raise invalid(rt, "", [("metadata.name", "Required value: name is required")])
            current = self._lookup(rt, meta.get("namespace") or "default", name) \
                if rt.namespaced else self._lookup(rt, None, name)
            wanted_rv = meta.get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if meta.get("uid") and meta["uid"] != current["metadata"]["uid"]:
                raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in "
                               "object meta: %s" % (meta["uid"], current["metadata"]["uid"]))
            new = self._prepare_update(rt, current, obj, subresource, trusted=False)
            result = self._write_update(rt, current, new, dry_run, trusted=False)
            if not dry_run:
                self._record_update(result, current, field_manager)
            return result

    def patch(self, key: str, namespace: Optional[str], name: str, patch: Any, patch_type: str,
              dry_run: bool = False, subresource: Optional[str] = None,
              field_manager: Optional[str] = None, force: bool = False) -> Obj:
        with self._lock:
            rt = self.resource(key)
            kind = _patch.PATCH_TYPES.get(patch_type, patch_type)
            if kind == "strategic" and rt.custom:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                               "unknown format - accepted media types include: "
                               "application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml")
            if kind == "apply":
                if not isinstance(patch, dict):
                    raise bad_request("apply configuration must be an object")
                if not field_manager:
                    raise bad_request("PATCH requests with apply content type must set fieldManager")
            try:
                current = self._lookup(rt, namespace, name)
            except ApiError:
                if kind != "apply" or subresource:
                    raise
                applied = copy.deepcopy(patch)
                applied.setdefault("metadata", {})["name"] = name
                if rt.namespaced:
                    applied["metadata"]["namespace"] = namespace
                result = self.create(key, applied, dry_run=dry_run)
                if not dry_run:
                    owners = _own.Ownership()
                    owners.record_apply(field_manager or "", _own.leaf_paths(patch), {}, patch, True)
                    self._owners[result["metadata"]["uid"]] = owners
                return result
            owners = self._owners.get(current["metadata"]["uid"]) or _own.Ownership()
            base: Obj = current
            if kind == "apply":
                manager = field_manager or ""
                if not force:
                    conflicts = owners.conflicts(manager, patch, current)
                    if conflicts:
                        message, causes = _own.conflict_message(conflicts, rt.api_version)
                        raise ApiError(409, "Conflict", message, dict(_details(rt, name), causes=causes))
                # fields this manager applied before and applies no more go, unless others own them
                base = copy.deepcopy(current)
                for path in owners.owned_by(manager, "Apply") - _own.leaf_paths(patch):
                    if not owners.owners_of(path, exclude=[(manager, "Apply")]):
                        _own.remove_at(base, path)
            try:
                patched = _patch.apply(kind, base, patch)
            except _patch.PatchError as exc:
                raise ApiError(exc.code, "BadRequest" if exc.code == 400 else
                               ("UnsupportedMediaType" if exc.code == 415 else "Invalid"),
                               str(exc)) from None
            if not isinstance(patched, dict):
                raise bad_request("the patch did not produce an object")
            wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            new = self._prepare_update(rt, current, patched, subresource, trusted=False)
            result = self._write_update(rt, current, new, dry_run, trusted=False)
            if dry_run:
                return result
            if kind == "apply":
                updated = owners.copy()
                updated.record_apply(field_manager or "", _own.leaf_paths(patch), current, patch, force)
                if result["metadata"].get("uid") == current["metadata"]["uid"]:
                    self._owners[current["metadata"]["uid"]] = updated
            else:
                self._record_update(result, current, field_manager)
            return result

    def controller_update(self, key: str, namespace: Optional[str], name: str,
                          mutate: Callable[[Obj], Optional[Obj]],
                          subresource: Optional[str] = None) -> Obj:
        with self._lock:
            rt = self.resource(key)
            current = self._lookup(rt, namespace, name)
            work = copy.deepcopy(current)
            returned = mutate(work)
            if returned is not None:
                work = returned
            new = self._prepare_update(rt, current, work, subresource, trusted=True)
            result = self._write_update(rt, current, new, dry_run=False, trusted=True)
            self._record_update(result, current, "gpulab-controllers")
            return result

    def bind(self, namespace: str, name: str, node_name: str, dry_run: bool = False) -> Obj:
        with self._lock:
            rt = self.resource("v1/pods")
            current = self._lookup(rt, namespace, name)
            if current["spec"].get("nodeName"):
                raise conflict(rt, name, "pod %s is already assigned to node \"%s\""
                               % (name, current["spec"]["nodeName"]))
            if current["metadata"].get("deletionTimestamp"):
                raise conflict(rt, name, "pod %s is being deleted, cannot be assigned to a host"
                               % name)
            if ("", node_name) not in self._data["v1/nodes"]:
                raise not_found(self.resource("v1/nodes"), node_name)
            new = copy.deepcopy(current)
            new["spec"]["nodeName"] = node_name
            conditions = new.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True",
                               "lastTransitionTime": _now_rfc3339(self._clock),
                               "lastProbeTime": None})
            if dry_run:
                return new
            return self._commit(rt, new, current, "MODIFIED")

    # ----------------------------------------------------------------- delete

    @staticmethod
    def _awaits_kubelet(rt: ResourceType, obj: Obj) -> bool:
        """A terminating pod on a node stays until the kubelet (or reap) removes it."""
        if rt.key != "v1/pods" or not (obj.get("spec") or {}).get("nodeName"):
            return False
        return obj["metadata"].get("deletionGracePeriodSeconds", 0) > 0

    def delete(self, key: str, namespace: Optional[str], name: str,
               grace_period_seconds: Optional[int] = None,
               preconditions: Optional[Dict[str, Any]] = None,
               propagation_policy: Optional[str] = None, dry_run: bool = False) -> Obj:
        with self._lock:
            rt = self.resource(key)
            current = self._lookup(rt, namespace, name)
            meta = current["metadata"]
            preconditions = preconditions or {}
            if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
                raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in "
                               "object meta: %s" % (preconditions["uid"], meta["uid"]))
            if preconditions.get("resourceVersion") and \
                    preconditions["resourceVersion"] != meta["resourceVersion"]:
                raise conflict(rt, name, "Precondition failed: ResourceVersion in precondition: "
                               "%s, ResourceVersion in object meta: %s"
                               % (preconditions["resourceVersion"], meta["resourceVersion"]))
            if rt.key == "v1/namespaces":
                return self._delete_namespace(rt, current, dry_run)
            grace = 0
            if rt.key == "v1/pods":
                phase = (current.get("status") or {}).get("phase")
                grace = grace_period_seconds if grace_period_seconds is not None else \
                    current["spec"].get("terminationGracePeriodSeconds", 30)
                if grace < 0:
                    grace = 1
                if not current["spec"].get("nodeName") or phase in ("Succeeded", "Failed"):
                    grace = 0
                if meta.get("deletionTimestamp") and grace > meta.get(
                        "deletionGracePeriodSeconds", 0):
                    grace = meta.get("deletionGracePeriodSeconds", 0)  # only ever shortened
            finalizers = list(meta.get("finalizers") or [])
            if grace > 0 or finalizers:
                new = copy.deepcopy(current)
                nmeta = new["metadata"]
                if not nmeta.get("deletionTimestamp") or grace < nmeta.get(
                        "deletionGracePeriodSeconds", 0):
                    nmeta["deletionTimestamp"] = _now_rfc3339(self._clock, grace)
                    nmeta["deletionGracePeriodSeconds"] = grace
                    if rt.has_generation:
                        nmeta["generation"] = nmeta.get("generation", 1) + 1
                if new == current or dry_run:
                    return new
                # dependents are collected when the object is finally removed
                return self._commit(rt, new, current, "MODIFIED")
            if dry_run:
                return copy.deepcopy(current)
            result = self._commit(rt, None, current, "DELETED")
            if rt.key == "v1/pods":
                self._logs.pop((meta.get("namespace") or "", name), None)
            self._collect_dependents(meta["uid"], orphan=propagation_policy == "Orphan")
            if rt.key == "apiextensions.k8s.io/v1/customresourcedefinitions":
                self._crd_removed(current)
            return result

    def _delete_namespace(self, rt: ResourceType, current: Obj, dry_run: bool) -> Obj:
        name = current["metadata"]["name"]
        if name in ("default", "kube-system", "kube-public"):
            raise ApiError(403, "Forbidden", 'namespaces "%s" is forbidden: this namespace may '
                           'not be deleted' % name, {"name": name, "kind": "namespaces"})
        new = copy.deepcopy(current)
        new["metadata"].setdefault("deletionTimestamp", _now_rfc3339(self._clock))
        new["metadata"].setdefault("deletionGracePeriodSeconds", 0)
        new.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return new
        if new != current:
            self._commit(rt, new, current, "MODIFIED")
        terminating = copy.deepcopy(self._lookup(rt, None, name))
        # The namespace controller's work, done at once: remove every object in it.
        for key, bucket in list(self._data.items()):
            if not self._types[key].namespaced:
                continue
            for (ns, obj_name), obj in sorted(bucket.items()):
                if ns == name:
                    self._commit(self._types[key], None, obj, "DELETED")
                    if key == "v1/pods":
                        self._logs.pop((ns, obj_name), None)
        self._commit(rt, None, self._lookup(rt, None, name), "DELETED")
        return terminating

    def _collect_dependents(self, owner_uid: str, orphan: bool) -> None:
        for key, bucket in list(self._data.items()):
            rt = self._types[key]
            for obj in list(bucket.values()):
                refs = obj["metadata"].get("ownerReferences") or []
                if not any(ref.get("uid") == owner_uid for ref in refs):
                    continue
                remaining = [ref for ref in refs if ref.get("uid") != owner_uid]
                if orphan or remaining:
                    new = copy.deepcopy(obj)
                    if remaining:
                        new["metadata"]["ownerReferences"] = remaining
                    else:
                        new["metadata"].pop("ownerReferences", None)
                    self._commit(rt, new, obj, "MODIFIED")
                else:
                    try:
                        self.delete(key, obj["metadata"].get("namespace"), obj["metadata"]["name"])
                    except ApiError:
                        LOG.exception("garbage collection of %s failed", obj["metadata"]["name"])

    def reap(self) -> int:
        """Remove terminating pods whose grace period is over (fallback kubelet). Returns count."""
        removed = 0
        with self._lock:
            now = self._clock()
            for obj in list(self._data["v1/pods"].values()):
                meta = obj["metadata"]
                stamp = meta.get("deletionTimestamp")
                if stamp and not meta.get("finalizers") and parse_rfc3339(stamp) <= now:
                    self.delete("v1/pods", meta["namespace"], meta["name"], grace_period_seconds=0)
                    removed += 1
        return removed

    # --------------------------------------------------------------- eviction

    def _pod_healthy(self, pod: Obj) -> bool:
        if pod["metadata"].get("deletionTimestamp"):
            return False
        status = pod.get("status") or {}
        conditions = status.get("conditions")
        if conditions:
            return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return status.get("phase") == "Running"

    def _pdb_numbers(self, pdb: Obj) -> Dict[str, int]:
        namespace = pdb["metadata"]["namespace"]
        spec = pdb.get("spec") or {}
        try:
            selector = _sel.from_label_selector(spec.get("selector"))
        except _sel.SelectorError:
            selector = _sel.from_label_selector(None)
        pods = [p for (ns, _name), p in self._data["v1/pods"].items()
                if ns == namespace and _sel.matches(selector, p["metadata"].get("labels"))]
        expected = len(pods)
        healthy = sum(1 for p in pods if self._pod_healthy(p))

        def amount(value: Any, round_up: bool) -> int:
            if isinstance(value, str) and value.endswith("%"):
                fraction = int(value[:-1]) * expected / 100.0
                return int(math.ceil(fraction)) if round_up else int(math.floor(fraction))
            return int(value)

        if "minAvailable" in spec:
            desired = amount(spec["minAvailable"], True)
        elif "maxUnavailable" in spec:
            desired = max(0, expected - amount(spec["maxUnavailable"], True))
        else:
            desired = expected
        return {"currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
                "disruptionsAllowed": max(0, healthy - desired)}

    def _refresh_pdbs(self, namespace: str) -> None:
        """The disruption controller: keep PDB status in step with the pods."""
        rt = self._types.get("policy/v1/poddisruptionbudgets")
        if rt is None:
            return
        self._in_pdb_refresh = True
        try:
            for (ns, _name), pdb in sorted(self._data[rt.key].items()):
                if ns != namespace:
                    continue
                status = dict(pdb.get("status") or {})
                status.update(self._pdb_numbers(pdb))
                status["observedGeneration"] = pdb["metadata"].get("generation", 1)
                allowed = status["disruptionsAllowed"] > 0
                status["conditions"] = [c for c in status.get("conditions") or []
                                        if c.get("type") != "DisruptionAllowed"]
                previous = [c for c in (pdb.get("status") or {}).get("conditions") or []
                            if c.get("type") == "DisruptionAllowed"]
                reason = "SufficientPods" if allowed else "InsufficientPods"
                if previous and previous[0].get("reason") == reason:
                    status["conditions"].append(previous[0])
                else:
                    status["conditions"].append({
                        "type": "DisruptionAllowed", "status": "True" if allowed else "False",
                        "reason": reason, "message": "",
                        "observedGeneration": status["observedGeneration"],
                        "lastTransitionTime": _now_rfc3339(self._clock)})
                if status != pdb.get("status"):
                    new = copy.deepcopy(pdb)
                    new["status"] = status
                    self._commit(rt, new, pdb, "MODIFIED")
        finally:
            self._in_pdb_refresh = False

    def evict(self, namespace: str, name: str, dry_run: bool = False,
              grace_period_seconds: Optional[int] = None) -> Obj:
        with self._lock:
            rt = self.resource("v1/pods")
            pod = self._lookup(rt, namespace, name)
            success = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                       "status": "Success", "code": 201}
            phase = (pod.get("status") or {}).get("phase")
            if pod["metadata"].get("deletionTimestamp") or phase in ("Succeeded", "Failed", "Pending"):
                if not pod["metadata"].get("deletionTimestamp"):
                    self.delete(rt.key, namespace, name, grace_period_seconds, dry_run=dry_run)
                return success
            pdbs = [p for (ns, _name), p in sorted(self._data["policy/v1/poddisruptionbudgets"].items())
                    if ns == namespace and _sel.matches(
                        _sel.from_label_selector((p.get("spec") or {}).get("selector")),
                        pod["metadata"].get("labels"))]
            if len(pdbs) > 1:
                raise ApiError(500, "InternalError", "This pod has more than one "
                               "PodDisruptionBudget, which the eviction subresource does not "
                               "support.")
            if pdbs:
                numbers = self._pdb_numbers(pdbs[0])
                healthy_pod = self._pod_healthy(pod)
                allowed = numbers["disruptionsAllowed"] > 0 if healthy_pod else \
                    numbers["currentHealthy"] >= numbers["desiredHealthy"]
                if not allowed:
                    pdb_name = pdbs[0]["metadata"]["name"]
                    raise ApiError(
                        429, "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                        {"causes": [{"reason": "DisruptionBudget", "message":
                                     "The disruption budget %s needs %d healthy pods and has %d "
                                     "currently" % (pdb_name, numbers["desiredHealthy"],
                                                    numbers["currentHealthy"])}]})
            self.delete(rt.key, namespace, name, grace_period_seconds, dry_run=dry_run)
            return success

    # ------------------------------------------------------------------ CRDs

    def _crd_established(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
        for version in versions:
            subresources = version.get("subresources") or spec.get("subresources") or {}
            rt = ResourceType(spec["group"], version["name"], names["plural"], names["kind"],
                              spec.get("scope") == "Namespaced",
                              names.get("singular") or names["kind"].lower(),
                              tuple(names.get("shortNames") or ()),
                              status_subresource="status" in subresources,
                              custom=True, categories=tuple(names.get("categories") or ()),
                              schema=(version.get("schema") or {}).get("openAPIV3Schema"),
                              printer_columns=tuple(version.get("additionalPrinterColumns") or ()))
            existing = self._types.get(rt.key)
            self._types[rt.key] = rt
            if existing is None:
                self._data.setdefault(rt.key, {})
        current = self._data["apiextensions.k8s.io/v1/customresourcedefinitions"].get(
            ("", crd["metadata"]["name"]))
        if current is None:
            return
        status = {"acceptedNames": dict(names),
                  "storedVersions": [v["name"] for v in spec.get("versions") or []
                                     if v.get("storage")],
                  "conditions": [
                      {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                       "message": "no conflicts found",
                       "lastTransitionTime": _now_rfc3339(self._clock)},
                      {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                       "message": "the initial names have been accepted",
                       "lastTransitionTime": _now_rfc3339(self._clock)}]}
        old_status = current.get("status") or {}
        if {k: v for k, v in old_status.items() if k != "conditions"} == \
                {k: v for k, v in status.items() if k != "conditions"} and \
                old_status.get("conditions"):
            return
        new = copy.deepcopy(current)
        new["status"] = status
        self._commit(self._types["apiextensions.k8s.io/v1/customresourcedefinitions"], new,
                     current, "MODIFIED")

    def _crd_removed(self, crd: Obj) -> None:
        spec = crd.get("spec") or {}
        for version in spec.get("versions") or []:
            key = "%s/%s/%s" % (spec.get("group"), version.get("name"),
                                (spec.get("names") or {}).get("plural"))
            rt = self._types.get(key)
            if rt is None:
                continue
            for obj in list(self._data.get(key, {}).values()):
                self._commit(rt, None, obj, "DELETED")
            self.unregister_resource(key)

    # ------------------------------------------------------------------ watch

    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        with self._lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self._lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)
        return unsubscribe

    def watch(self, key: str, namespace: Optional[str], resource_version: Optional[str],
              callback: Callable[[WatchEvent], None]) -> Tuple[List[WatchEvent], Callable[[], None], int]:
        """Atomically: the events a watch from `resource_version` must replay first, a
        subscription for what follows (filtered to key/namespace) and the store's
        resourceVersion at that instant. No rv or "0": synthetic ADDED events for the current
        objects. Too old: ApiError 410 Expired."""
        with self._lock:
            rt = self.resource(key)

            def wanted(event: WatchEvent) -> bool:
                if event.resource_key != rt.key:
                    return False
                return not (namespace and rt.namespaced and
                            event.object["metadata"].get("namespace") != namespace)

            if not resource_version or resource_version == "0":
                replay = [WatchEvent("ADDED", rt.key, copy.deepcopy(obj), None,
                                     int(obj["metadata"]["resourceVersion"]))
                          for obj in self._select(rt, namespace, (), ())]
            else:
                try:
                    since = int(resource_version)
                except ValueError:
                    raise bad_request("invalid resource version %r" % resource_version) from None
                oldest = self._history[0].resource_version if self._history else self._rv + 1
                if since < oldest - 1 and since < self._rv:
                    raise ApiError(410, "Expired", "too old resource version: %d (%d)"
                                   % (since, oldest - 1))
                replay = [e for e in self._history if e.resource_version > since and wanted(e)]

            def filtered(event: WatchEvent) -> None:
                if wanted(event):
                    callback(event)
            return replay, self.subscribe(filtered), self._rv

    # ------------------------------------------------------------ pod logs

    def set_pod_log(self, namespace: str, name: str, text: str, container: Optional[str] = None,
                    append: bool = False) -> None:
        with self._lock:
            pod = self._lookup(self.resource("v1/pods"), namespace, name)
            container = container or pod["spec"]["containers"][0]["name"]
            logs = self._logs.setdefault((namespace, name), {})
            logs[container] = (logs.get(container, "") if append else "") + text

    def get_pod_log(self, namespace: str, name: str, container: Optional[str] = None) -> str:
        with self._lock:
            pod = self._lookup(self.resource("v1/pods"), namespace, name)
            names = [c["name"] for c in pod["spec"].get("containers") or []]
            if container is None:
                if len(names) > 1:
                    raise bad_request("a container name must be specified for pod %s, choose one "
                                      "of: [%s]" % (name, " ".join(names)))
                container = names[0]
            elif container not in names:
                raise bad_request("container %s is not valid for pod %s" % (container, name))
            logs = self._logs.get((namespace, name), {})
            if container not in logs:
                phase = (pod.get("status") or {}).get("phase")
                if phase in (None, "Pending"):
                    raise bad_request('container "%s" in pod "%s" is waiting to start: '
                                      'ContainerCreating' % (container, name))
                return ""
            return logs[container]

    # --------------------------------------------------------------- events

    def record_event(self, involved: Obj, reason: str, message: str, type: str = "Normal",
                     component: str = "gpulab") -> Obj:
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = _now_rfc3339(self._clock)
        event = {
            "metadata": {"name": "%s.%x" % (meta.get("name", "object"),
                                            random.getrandbits(64)),
                         "namespace": namespace},
            "involvedObject": {"kind": involved.get("kind"), "apiVersion":
                               involved.get("apiVersion"), "name": meta.get("name"),
                               "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason, "message": message, "type": type,
            "source": {"component": component}, "reportingComponent": component,
            "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }
        return self.create("v1/events", event)


__all__ = ["ApiError", "ResourceType", "Store", "WatchEvent", "builtin_resource_types",
           "not_found", "already_exists", "conflict", "invalid", "bad_request", "parse_rfc3339"]
