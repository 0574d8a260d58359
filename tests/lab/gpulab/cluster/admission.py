"""Admission of the virtual cluster: what the API server does to an object before storing it.

* ``normalise(rt, body)``: apiVersion/kind, quantities as strings, Secret ``stringData``;
* ``apply_defaults(rt, obj)``: the defaulting of the built-in types (pod spec, qosClass, ...);
* ``validate(rt, obj, old)``: the (field, message) problems answered as 422 ``Invalid``
  (metadata, names, pods and their immutability, ConfigMaps, Secrets, workloads, PDBs, CRDs).

Pure functions on plain dicts; the store calls them.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpulab.cluster import corevalidation as _core
from gpulab.cluster import kueue as _kueue
from gpulab.cluster import selectors as _sel
from gpulab.cluster.crds import CRD_KEY
from gpulab.cluster.dra import validation as _dra
from gpulab.cluster.errors import bad_request
from gpulab.cluster.objects import Obj, ResourceType

Problems = List[Tuple[str, str]]

WORKLOAD_KEYS = ("apps/v1/daemonsets", "apps/v1/deployments", "apps/v1/replicasets",
                 "apps/v1/statefulsets")

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


def _metadata_problems(obj: Obj) -> Problems:
    meta = obj.get("metadata") or {}
    problems: Problems = []
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


def _extended_resource_problems(cpath: str, limits: Obj, requests: Obj) -> Problems:
    problems: Problems = []
    for rname in set(limits) | set(requests):
        if not _is_extended_resource(rname):
            continue
        # A Kubernetes rule: extended resources cannot be overcommitted.
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
                                 "Invalid value: %r: must be an integer" % (limits[rname],)))
    return problems


def _container_problems(container: Any, cpath: str, seen: set) -> Problems:
    problems: Problems = []
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
    return problems + _extended_resource_problems(cpath, limits, requests)


def _pod_spec_problems(spec: Any, path: str) -> Problems:
    if not isinstance(spec, dict):
        return [(path, "Required value")]
    if not spec.get("containers"):
        return [(path + ".containers", "Required value")]
    problems: Problems = []
    seen: set = set()
    for kind in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(kind) or []):
            problems += _container_problems(container, "%s.%s[%d]" % (path, kind, index), seen)
    return problems + _core.pod_spec_problems(spec, path)


_POD_MUTABLE_NOTE = ("pod updates may not change fields other than `spec.containers[*].image`,"
                     "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
                     "`spec.tolerations` (only additions to existing tolerations),"
                     "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was "
                     "previously negative)")


def _pod_update_problems(old: Obj, new: Obj) -> Problems:
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


def _crd_problems(obj: Obj, old: Optional[Obj]) -> Problems:
    del old
    name = obj["metadata"].get("name", "")
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    problems: Problems = []
    if not spec.get("group"):
        problems.append(("spec.group", "Required value"))
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


def _pod_problems(obj: Obj, old: Optional[Obj]) -> Problems:
    problems = _pod_spec_problems(obj.get("spec"), "spec")
    if old is not None:
        problems += _pod_update_problems(old, obj)
    return problems


def _configmap_problems(obj: Obj, old: Optional[Obj]) -> Problems:
    del old
    problems: Problems = []
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
    return problems


def _secret_problems(obj: Obj, old: Optional[Obj]) -> Problems:
    keys = [("data[%s]" % key, "Invalid value: %r: a valid config key must consist of "
             "alphanumeric characters, '-', '_' or '.'" % key)
            for key in (obj.get("data") or {}) if not _CONFIG_KEY.match(key)]
    return _core.secret_problems(obj, old) + keys


def _workload_problems(obj: Obj, old: Optional[Obj]) -> Problems:
    spec = obj.get("spec") or {}
    selector = spec.get("selector")
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    problems: Problems = []
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
    return problems


def _pdb_problems(obj: Obj, old: Optional[Obj]) -> Problems:
    del old
    spec = obj.get("spec") or {}
    problems: Problems = []
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
    return problems + _sel.label_selector_errors(spec.get("selector"), "spec.selector")


_VALIDATORS: Dict[str, Callable[[Obj, Optional[Obj]], Problems]] = {
    "v1/pods": _pod_problems,
    "v1/configmaps": _configmap_problems,
    "v1/secrets": _secret_problems,
    "v1/nodes": _core.node_problems,
    "policy/v1/poddisruptionbudgets": _pdb_problems,
    **{key: _workload_problems for key in WORKLOAD_KEYS},
    **_kueue.VALIDATORS,
    **_dra.VALIDATORS,
}


def validate(rt: ResourceType, obj: Obj, old: Optional[Obj]) -> Problems:
    """The problems of `obj` (an update of `old`, or a create when old is None)."""
    problems = _metadata_problems(obj)
    if rt.key == CRD_KEY:
        return problems + _crd_problems(obj, old)
    for message in _name_problems(obj["metadata"].get("name", ""),
                                  label_only=rt.key == "v1/namespaces"):
        problems.append(("metadata.name", message))
    check = _VALIDATORS.get(rt.key)
    return problems + check(obj, old) if check else problems


# ---------------------------------------------------------------------- defaults


def _image_pull_policy(image: str) -> str:
    tail = image.rsplit("/", 1)[-1]
    if "@" in tail:
        return "IfNotPresent"
    if ":" not in tail or tail.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def default_pod_spec(spec: Obj) -> None:
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


def _default_pod(obj: Obj) -> None:
    default_pod_spec(obj.setdefault("spec", {}))
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", _qos_class(obj["spec"]))


def _default_namespace(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = \
        obj["metadata"]["name"]


def _default_secret(obj: Obj) -> None:
    obj.setdefault("type", "Opaque")


def _default_daemonset(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("updateStrategy", {"type": "RollingUpdate"})
    if spec["updateStrategy"].get("type") == "RollingUpdate":
        spec["updateStrategy"].setdefault("rollingUpdate", {"maxUnavailable": 1,
                                                            "maxSurge": 0})
    spec.setdefault("revisionHistoryLimit", 10)
    default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))
    obj.setdefault("status", {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                              "desiredNumberScheduled": 0, "numberReady": 0})


def _default_pdb(obj: Obj) -> None:
    obj.setdefault("status", {"disruptionsAllowed": 0, "currentHealthy": 0,
                              "desiredHealthy": 0, "expectedPods": 0})


def _default_node(obj: Obj) -> None:
    obj.setdefault("spec", {})


def _default_service(obj: Obj) -> None:
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


def _default_replicated(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    default_pod_spec(spec.setdefault("template", {}).setdefault("spec", {}))


_DEFAULTERS: Dict[str, Callable[[Obj], None]] = {
    "v1/pods": _default_pod,
    "v1/namespaces": _default_namespace,
    "v1/secrets": _default_secret,
    "apps/v1/daemonsets": _default_daemonset,
    "policy/v1/poddisruptionbudgets": _default_pdb,
    "v1/nodes": _default_node,
    "v1/services": _default_service,
    **{key: _default_replicated for key in WORKLOAD_KEYS if key != "apps/v1/daemonsets"},
    **_dra.DEFAULTERS,
}


def apply_defaults(rt: ResourceType, obj: Obj) -> None:
    defaulter = _DEFAULTERS.get(rt.key)
    if defaulter:
        defaulter(obj)


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


# ------------------------------------------------------------------ normalising


def _quantities_to_strings(values: Any) -> None:
    if isinstance(values, dict):
        for rname, qty in list(values.items()):
            if isinstance(qty, (int, float)) and not isinstance(qty, bool):
                values[rname] = str(int(qty)) if float(qty).is_integer() else str(qty)


def stringify_quantities(rt: ResourceType, obj: Obj) -> None:
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


def _secret_data(obj: Obj) -> None:
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


def normalise(rt: ResourceType, obj: Any) -> Obj:
    """A deep copy of a request body with apiVersion/kind set, null labels/annotations dropped,
    quantities as strings and Secret stringData folded into data."""
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
    stringify_quantities(rt, obj)
    if rt.key == "v1/secrets":
        _secret_data(obj)
    return obj


__all__ = ["Problems", "apply_defaults", "default_pod_spec", "normalise", "validate"]
