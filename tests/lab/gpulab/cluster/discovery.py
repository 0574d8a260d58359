"""API discovery of the virtual cluster: ``/api``, ``/api/v1``, ``/apis``, ``/apis/<group>[/<version>]``
(legacy lists; clients asking for aggregated discovery fall back to them) and ``/openapi/v3`` with
*paths only* (kubectl reads the ``fieldValidation`` parameter of the PATCH operations to decide
that the server validates; no schemas are published). Documents as plain dicts."""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List, Optional

from gpulab.cluster.errors import ApiError, resource_not_found
from gpulab.cluster.objects import ResourceType

SERVER_VERSION = {
    "major": "1", "minor": "36", "gitVersion": "v1.36.0-gpulab",
    "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc",
    "platform": "linux/amd64",
}

Doc = Dict[str, Any]


def _groups(types: List[ResourceType]) -> Dict[str, Dict[str, List[ResourceType]]]:
    groups: Dict[str, Dict[str, List[ResourceType]]] = {}
    for rt in types:
        groups.setdefault(rt.group, {}).setdefault(rt.version, []).append(rt)
    return groups


def _subresource_entry(rt: ResourceType, sub: str) -> Doc:
    entry = {"name": "%s/%s" % (rt.plural, sub), "singularName": "",
             "namespaced": rt.namespaced, "kind": rt.kind, "verbs": ["get", "patch", "update"]}
    if sub == "eviction":
        entry.update(kind="Eviction", group="policy", version="v1", verbs=["create"])
    elif sub == "binding":
        entry.update(kind="Binding", verbs=["create"])
    elif sub == "log":
        entry.update(verbs=["get"])
    elif sub in ("proxy",):
        entry.update(kind="NodeProxyOptions", verbs=["get"])
    elif sub == "finalize":
        entry.update(verbs=["update"])
    elif sub == "scale":
        entry.update(kind="Scale", group="autoscaling", version="v1")
    return entry


def resource_list(group_version: str, types: List[ResourceType]) -> Doc:
    resources = []
    for rt in sorted(types, key=lambda t: t.plural):
        entry = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                 "kind": rt.kind, "verbs": list(rt.verbs)}
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        resources.append(entry)
        subs = (("status",) if rt.status_subresource else ()) + rt.subresources
        resources += [_subresource_entry(rt, sub) for sub in subs]
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": resources}


def _group_entry(group: str, versions: Dict[str, List[ResourceType]]) -> Doc:
    names = sorted(versions, reverse=True)
    items = [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in names]
    return {"name": group, "versions": items, "preferredVersion": items[0]}


def _openapi_group_versions(types: List[ResourceType]) -> Dict[str, List[ResourceType]]:
    result: Dict[str, List[ResourceType]] = {}
    for rt in types:
        gv = "api/v1" if not rt.group else "apis/%s/%s" % (rt.group, rt.version)
        result.setdefault(gv, []).append(rt)
    return result


def _openapi_hash(types: List[ResourceType]) -> str:
    names = sorted(rt.key + str(rt.namespaced) for rt in types)
    return hashlib.sha256("|".join(names).encode()).hexdigest()[:32].upper()


def _openapi_document(gv: str, types: List[ResourceType]) -> Doc:
    """Just enough OpenAPI v3 for clients to see which operations exist: kubectl checks the
    `fieldValidation` parameter of each kind's PATCH operation to decide that the server
    validates (so it needs no schemas). No schemas are published."""
    paths: Dict[str, Any] = {}
    common = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
              for n in ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")]
    for rt in sorted(types, key=lambda t: t.plural):
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        base = "/" + gv + ("/namespaces/{namespace}/" if rt.namespaced else "/") + rt.plural
        operation = {"x-kubernetes-group-version-kind": gvk, "parameters": common,
                     "responses": {"200": {"description": "OK"}}}
        paths[base] = {"get": dict(operation, **{"x-kubernetes-action": "list"}),
                       "post": dict(operation, **{"x-kubernetes-action": "post"})}
        paths[base + "/{name}"] = {
            "get": dict(operation, **{"x-kubernetes-action": "get"}),
            "put": dict(operation, **{"x-kubernetes-action": "put"}),
            "patch": dict(operation, **{"x-kubernetes-action": "patch"}),
            "delete": dict(operation, **{"x-kubernetes-action": "delete"}),
        }
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (gpulab)",
                                         "version": SERVER_VERSION["gitVersion"]},
            "paths": paths, "components": {"schemas": {}}}


def _apis_document(groups: Dict[str, Dict[str, List[ResourceType]]], parts: List[str]) -> Doc:
    """/apis, /apis/<group>, /apis/<group>/<version>."""
    if len(parts) == 1:
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            _group_entry(g, v) for g, v in sorted(groups.items()) if g]}
    if len(parts) == 2:
        if parts[1] not in groups or not parts[1]:
            raise resource_not_found()
        entry = _group_entry(parts[1], groups[parts[1]])
        entry.update(kind="APIGroup", apiVersion="v1")
        return entry
    versions = groups.get(parts[1], {})
    if parts[2] not in versions:
        raise resource_not_found()
    return resource_list("%s/%s" % (parts[1], parts[2]), versions[parts[2]])


def _openapi(types: List[ResourceType], parts: List[str]) -> Doc:
    """/openapi/v3 and /openapi/v3/<group-version>."""
    by_gv = _openapi_group_versions(types)
    if parts == ["openapi", "v3"]:
        return {"paths": {gv: {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (gv, _openapi_hash(found))}
                          for gv, found in by_gv.items()}}
    if len(parts) >= 3 and parts[:2] == ["openapi", "v3"]:
        gv = "/".join(parts[2:])
        if gv not in by_gv:
            raise resource_not_found()
        return _openapi_document(gv, by_gv[gv])
    raise ApiError(404, "NotFound", "the lab API server publishes only minimal OpenAPI "
                   "v3 documents (paths, no schemas)", {})


def document(types: List[ResourceType], parts: List[str]) -> Optional[Doc]:
    """The discovery document of a GET on the path `parts`, or None when it is not one."""
    if parts == ["api"]:
        return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
    if parts == ["api", "v1"]:
        return resource_list("v1", _groups(types).get("", {}).get("v1", []))
    if parts and parts[0] == "apis" and len(parts) <= 3:
        return _apis_document(_groups(types), parts)
    if parts and parts[0] == "openapi":
        return _openapi(types, parts)
    return None


__all__ = ["SERVER_VERSION", "document", "resource_list"]
