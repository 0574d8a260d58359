"""Kueue's quota objects in the virtual cluster: ResourceFlavor, ClusterQueue, LocalQueue.

The lab behaves as a cluster where Kueue is installed: ``install(store)`` creates the three
CustomResourceDefinitions (group ``kueue.x-k8s.io``, version ``v1beta2`` served and stored, as
in Kueue v0.19.2), with structural schemas written for the lab from what Kueue's CRDs declare
(config/components/crd/bases/kueue.x-k8s.io_{resourceflavors,clusterqueues,localqueues}.yaml
at v0.19.2), and ``problems(key, obj, old)`` adds what the lab's schema walker does not do: the
CRDs' CEL rules (``x-kubernetes-validations``) and the checks of Kueue's validating webhooks
(pkg/webhooks/clusterqueue_webhook.go, resourceflavor_webhook.go, common.go at v0.19.2): every
``coveredResources`` name a label key (``validateResourceName``, so ``nvidia.com/mig-1g.10gb+me`` is
refused), a flavor's ``nodeLabels`` as ``metav1validation.ValidateLabels`` checks labels, its
``nodeTaints`` keys qualified names, values label values, unique by key and effect
(``validateNodeTaints``, taken by Kueue from Kubernetes' core validation). Only spec
fields the collection writes, and their neighbours, are modelled; see tests/lab/CLUSTER.md.
No Kueue controller runs: no status, no admission of Workloads (kueue_admission.py models it).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpulab.cluster.corevalidation import qualified_name_problem

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
RF_KEY = "%s/%s/resourceflavors" % (GROUP, VERSION)
CQ_KEY = "%s/%s/clusterqueues" % (GROUP, VERSION)
LQ_KEY = "%s/%s/localqueues" % (GROUP, VERSION)

Problems = List[Tuple[str, str]]
_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_QUANTITY = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
             r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$")
_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
           "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "k": 10 ** 3,
           "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}


def _name(max_length: int = 253) -> Dict[str, Any]:
    return {"type": "string", "maxLength": max_length, "pattern": _SUBDOMAIN}


def _quantity() -> Dict[str, Any]:
    return {"x-kubernetes-int-or-string": True, "pattern": _QUANTITY}


def _list(items: Dict[str, Any], max_items: int, min_items: int = 0) -> Dict[str, Any]:
    schema = {"type": "array", "items": items, "maxItems": max_items}
    if min_items:
        schema["minItems"] = min_items
    return schema


def _obj(properties: Dict[str, Any], required: Tuple[str, ...] = ()) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


_SELECTOR = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_TAINT = _obj({"key": {"type": "string"}, "value": {"type": "string"},
               "effect": {"type": "string"}, "timeAdded": {"type": "string"}}, ("effect", "key"))
_TOLERATION = _obj({"key": {"type": "string"}, "operator": {"type": "string"},
                    "value": {"type": "string"}, "effect": {"type": "string"},
                    "tolerationSeconds": {"type": "integer"}})
_RF_SPEC = _obj({
    "nodeLabels": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 8},
    "nodeTaints": _list(_TAINT, 8), "tolerations": _list(_TOLERATION, 8),
    "topologyName": _name()})
_RESOURCE_QUOTA = _obj({"name": {"type": "string"}, "nominalQuota": _quantity(),
                        "borrowingLimit": _quantity(), "lendingLimit": _quantity()},
                       ("name", "nominalQuota"))
_FLAVOR_QUOTAS = _obj({"name": _name(), "resources": _list(_RESOURCE_QUOTA, 64, 1)},
                      ("name", "resources"))
_RESOURCE_GROUP = _obj({"coveredResources": _list({"type": "string"}, 64, 1),
                        "flavors": _list(_FLAVOR_QUOTAS, 64, 1)}, ("coveredResources", "flavors"))
_CQ_SPEC = _obj({
    "cohortName": _name(), "namespaceSelector": _SELECTOR,
    "resourceGroups": _list(_RESOURCE_GROUP, 16),
    "queueingStrategy": {"type": "string", "enum": ["StrictFIFO", "BestEffortFIFO"]},
    "stopPolicy": {"type": "string", "enum": ["None", "Hold", "HoldAndDrain"]},
    "preemption": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "flavorFungibility": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}})
_LQ_SPEC = _obj({"clusterQueue": _name(),
                 "stopPolicy": {"type": "string", "enum": ["None", "Hold", "HoldAndDrain"]}})
_STATUS = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _crd(plural: str, kind: str, spec: Dict[str, Any], namespaced: bool) -> Dict[str, Any]:
    schema = _obj({"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                   "metadata": {"type": "object"}, "spec": spec, "status": _STATUS})
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "%s.%s" % (plural, GROUP)},
            "spec": {"group": GROUP, "scope": "Namespaced" if namespaced else "Cluster",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind,
                               "listKind": kind + "List"},
                     "versions": [{"name": VERSION, "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema},
                                   "subresources": {"status": {}}}]}}


def crds() -> List[Dict[str, Any]]:
    """The three CRDs as the lab installs them."""
    return [_crd("resourceflavors", "ResourceFlavor", _RF_SPEC, False),
            _crd("clusterqueues", "ClusterQueue", _CQ_SPEC, False),
            _crd("localqueues", "LocalQueue", _LQ_SPEC, True)]


def install(store: Any) -> None:
    """Create Kueue's CRDs in the store (Kueue installed in the lab cluster)."""
    for crd in crds():
        store.create("apiextensions.k8s.io/v1/customresourcedefinitions", crd)


def quantity(value: Any) -> Optional[Decimal]:
    """A Kubernetes quantity as a number (None when it is not one)."""
    text = str(value)
    if not re.match(_QUANTITY, text):
        return None
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if text.endswith(suffix) and not re.search(r"[eE]", text[:-len(suffix)] or "x"):
            return Decimal(text[:-len(suffix)]) * Decimal(_SUFFIX[suffix])
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


# ------------------------------------------------------------------- validation


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _label_value_problem(value: Any) -> Optional[str]:
    if isinstance(value, str) and len(value) <= 63 and _LABEL_VALUE.match(value):
        return None
    return ("Invalid value: %r: a valid label must be an empty string or consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character (at most 63)" % (value,))


def _webhook_rf_problems(spec: Dict[str, Any]) -> Problems:
    """resourceflavor_webhook.go ValidateResourceFlavor: nodeLabels, then nodeTaints (key, value, unique pair)."""
    problems: Problems = []
    for key, value in sorted((spec.get("nodeLabels") or {}).items()):
        for problem in (qualified_name_problem(key), _label_value_problem(value)):
            if problem:
                problems.append(("spec.nodeLabels", problem))
    seen = set()
    for i, taint in enumerate(spec.get("nodeTaints") or []):
        path = "spec.nodeTaints[%d]" % i
        key_problem = qualified_name_problem(taint.get("key"))
        if key_problem and taint.get("key"):
            problems.append((path + ".key", key_problem))
        value_problem = _label_value_problem(taint.get("value", ""))
        if value_problem:
            problems.append((path + ".value", value_problem))
        pair = (taint.get("key"), taint.get("effect"))
        if pair in seen:
            problems.append((path, "Duplicate value: %r: taints must be unique by key and effect pair" % dict(taint)))
            continue
        seen.add(pair)
    return problems


def _rf_problems(obj: Dict[str, Any], old: Optional[Dict[str, Any]]) -> Problems:
    spec = obj.get("spec") or {}
    problems: Problems = _webhook_rf_problems(spec)
    for i, taint in enumerate(spec.get("nodeTaints") or []):
        if taint.get("effect") not in _EFFECTS:
            problems.append(("spec.nodeTaints", "Invalid value: \"array\": supported taint effect "
                             "values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"))
    for tol in spec.get("tolerations") or []:
        operator = tol.get("operator", "Equal")
        if not tol.get("key") and operator != "Exists":
            problems.append(("spec.tolerations", "Invalid value: \"array\": operator must be Exists "
                             "when 'key' is empty, which means 'match all values and all keys'"))
        if "tolerationSeconds" in tol and tol.get("effect") != "NoExecute":
            problems.append(("spec.tolerations", "Invalid value: \"array\": effect must be "
                             "'NoExecute' when 'tolerationSeconds' is set"))
        if operator not in ("Equal", "Exists"):
            problems.append(("spec.tolerations", "Invalid value: \"array\": supported toleration "
                             "values: 'Equal'(default), 'Exists'"))
        if operator == "Exists" and tol.get("value"):
            problems.append(("spec.tolerations", "Invalid value: \"array\": a value must be empty "
                             "when 'operator' is 'Exists'"))
        if tol.get("effect") and tol["effect"] not in _EFFECTS:
            problems.append(("spec.tolerations", "Invalid value: \"array\": supported taint effect "
                             "values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"))
    return problems


def _quota_problems(res: Dict[str, Any], path: str, cohort: bool) -> Problems:
    problems: Problems = []
    values = {}
    for fld in ("nominalQuota", "borrowingLimit", "lendingLimit"):
        if fld not in res:
            continue
        value = values[fld] = quantity(res[fld])
        if value is not None and value < 0:
            problems.append(("%s.%s" % (path, fld), "Invalid value: %r: must be greater than or "
                             "equal to 0" % str(res[fld])))
        if fld != "nominalQuota" and not cohort:
            problems.append(("%s.%s" % (path, fld), "Invalid value: %r: must be nil when cohort "
                             "is empty" % str(res[fld])))
    lend, nominal = values.get("lendingLimit"), values.get("nominalQuota")
    if lend is not None and nominal is not None and lend > nominal:
        problems.append(("%s.lendingLimit" % path, "Invalid value: %r: must be less than or equal "
                         "to the nominalQuota" % str(res["lendingLimit"])))
    return problems


def _group_problems(group: Dict[str, Any], path: str, seen: Dict[str, set], cohort: bool) -> Problems:
    problems: Problems = []
    covered = list(group.get("coveredResources") or [])
    for i, name in enumerate(covered):
        problem = qualified_name_problem(name)  # common.go validateResourceName: content.IsLabelKey
        if problem:
            problems.append(("%s.coveredResources[%d]" % (path, i), problem))
        if name in seen["resources"]:
            problems.append((path + ".coveredResources", "Duplicate value: %r" % name))
        seen["resources"].add(name)
    for j, flavor in enumerate(group.get("flavors") or []):
        fpath = "%s.flavors[%d]" % (path, j)
        if flavor.get("name") in seen["flavors"]:
            problems.append((fpath + ".name", "Duplicate value: %r" % flavor.get("name")))
        seen["flavors"].add(flavor.get("name"))
        resources = flavor.get("resources") or []
        if len(resources) != len(covered):
            problems.append((path, "Invalid value: \"object\": flavors must have the same number "
                             "of resources as the coveredResources"))
            continue
        for k, res in enumerate(resources):
            rpath = "%s.resources[%d]" % (fpath, k)
            if res.get("name") != covered[k]:
                problems.append((rpath + ".name", "Invalid value: %r: must match the name in "
                                 "coveredResources" % res.get("name")))
            problems.extend(_quota_problems(res, rpath, cohort))
    return problems


def _cq_problems(obj: Dict[str, Any], old: Optional[Dict[str, Any]]) -> Problems:
    spec = obj.get("spec") or {}
    cohort = bool(spec.get("cohortName"))
    seen: Dict[str, set] = {"resources": set(), "flavors": set()}
    problems: Problems = []
    for i, group in enumerate(spec.get("resourceGroups") or []):
        problems.extend(_group_problems(group, "spec.resourceGroups[%d]" % i, seen, cohort))
    return problems


def _lq_problems(obj: Dict[str, Any], old: Optional[Dict[str, Any]]) -> Problems:
    if old is not None and (old.get("spec") or {}).get("clusterQueue") != \
            (obj.get("spec") or {}).get("clusterQueue"):
        return [("spec.clusterQueue", "Invalid value: \"string\": field is immutable")]
    return []


VALIDATORS: Dict[str, Callable[[Dict[str, Any], Optional[Dict[str, Any]]], Problems]] = {
    RF_KEY: _rf_problems, CQ_KEY: _cq_problems, LQ_KEY: _lq_problems}

__all__ = ["CQ_KEY", "GROUP", "LQ_KEY", "RF_KEY", "VALIDATORS", "VERSION", "crds", "install",
           "quantity"]
