"""CustomResourceDefinitions: the resource types a CRD serves and its ``Established`` status.

Pure functions; the store registers the types when a CRD is created or updated (so its
resources are served at once) and removes them, with their objects, when the CRD goes.
"""

from __future__ import annotations

from typing import List, Optional

from gpulab.cluster.objects import Obj, ResourceType

CRD_KEY = "apiextensions.k8s.io/v1/customresourcedefinitions"


def served_types(crd: Obj) -> List[ResourceType]:
    """One ResourceType per served version (schema for pruning, printer columns for tables)."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    types = []
    for version in [v for v in spec.get("versions") or [] if v.get("served", True)]:
        subresources = version.get("subresources") or spec.get("subresources") or {}
        types.append(ResourceType(
            spec["group"], version["name"], names["plural"], names["kind"],
            spec.get("scope") == "Namespaced", names.get("singular") or names["kind"].lower(),
            tuple(names.get("shortNames") or ()), status_subresource="status" in subresources,
            custom=True, categories=tuple(names.get("categories") or ()),
            schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            printer_columns=tuple(version.get("additionalPrinterColumns") or ())))
    return types


def type_keys(crd: Obj) -> List[str]:
    """The resource keys of every version of the CRD (served or not)."""
    spec = crd.get("spec") or {}
    plural = (spec.get("names") or {}).get("plural")
    return ["%s/%s/%s" % (spec.get("group"), version.get("name"), plural)
            for version in spec.get("versions") or []]


def established_status(crd: Obj, stamp: str) -> Optional[Obj]:
    """The status of an accepted CRD, or None when the current one already says so."""
    spec = crd.get("spec") or {}
    status = {"acceptedNames": dict(spec.get("names") or {}),
              "storedVersions": [v["name"] for v in spec.get("versions") or []
                                 if v.get("storage")],
              "conditions": [
                  {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                   "message": "no conflicts found", "lastTransitionTime": stamp},
                  {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                   "message": "the initial names have been accepted",
                   "lastTransitionTime": stamp}]}
    old = crd.get("status") or {}
    if {k: v for k, v in old.items() if k != "conditions"} == \
            {k: v for k, v in status.items() if k != "conditions"} and old.get("conditions"):
        return None
    return status


__all__ = ["CRD_KEY", "established_status", "served_types", "type_keys"]
