"""REST routing of the virtual cluster: Kubernetes API paths -> Store calls.

Transport-independent: ``Api.handle(Request) -> Response``; the HTTP server (server.py) turns
sockets into Requests. A Response either has a ``body`` (bytes) or a ``stream`` (an iterator of
byte chunks, for watches) which the server sends chunked.

Served (JSON only; protobuf bodies get 415):
  /version /healthz /livez /readyz /api /api/v1 /apis /apis/<group> /apis/<group>/<version>
  /api/v1/[namespaces/<ns>/]<plural>[/<name>[/<subresource>]] and the /apis/<g>/<v>/... forms
  get, list (limit/continue, labelSelector, fieldSelector), watch (?watch=true, resourceVersion,
  timeoutSeconds, allowWatchBookmarks), create, update (PUT), patch (json/merge/strategic/apply),
  delete (DeleteOptions body or query), deletecollection, pods/log, pods/eviction, pods/binding,
  <x>/status; ``dryRun=All`` on every write; ``Accept: ...as=Table`` for kubectl's printing.
  Lab-only: GET /lab/metrics (request counts per "<verb> <resource>"), POST /lab/metrics/reset,
  GET/POST/DELETE /lab/faults.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from gpulab.cluster import faults as _faults
from gpulab.cluster import selectors as _sel
from gpulab.cluster.errors import ApiError, bad_request, conflict
from gpulab.cluster.objects import ResourceType, WatchEvent, parse_rfc3339
from gpulab.cluster.store import Store
from gpulab.cluster.table import parse_field_selector, parse_label_selector

LOG = logging.getLogger("gpulab.cluster.api")

SERVER_VERSION = {
    "major": "1", "minor": "36", "gitVersion": "v1.36.0-gpulab",
    "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24.0", "compiler": "gc",
    "platform": "linux/amd64",
}

JSON = "application/json"


@dataclass
class Request:
    method: str
    path: str
    query: Dict[str, List[str]]
    headers: Dict[str, str]  # lower-case names
    body: bytes = b""

    def param(self, name: str, default: Optional[str] = None) -> Optional[str]:
        values = self.query.get(name)
        return values[-1] if values else default

    @classmethod
    def from_target(cls, method: str, target: str, headers: Dict[str, str],
                    body: bytes = b"") -> "Request":
        parsed = urllib.parse.urlsplit(target)
        query = urllib.parse.parse_qs(parsed.query, keep_blank_values=True)
        return cls(method.upper(), parsed.path, query, {k.lower(): v for k, v in headers.items()}, body)


@dataclass
class Response:
    code: int
    body: bytes = b""
    content_type: str = JSON
    headers: Dict[str, str] = field(default_factory=dict)
    stream: Optional[Iterator[bytes]] = None
    drop_connection: bool = False  # "hang" fault: close without an answer


def json_response(code: int, obj: Any, headers: Optional[Dict[str, str]] = None) -> Response:
    return Response(code, json.dumps(obj, separators=(",", ":")).encode() + b"\n", JSON,
                    headers or {})


def error_response(exc: ApiError) -> Response:
    headers = {}
    if exc.code == 429:
        headers["Retry-After"] = "1"
    return json_response(exc.code, exc.status(), headers)


@dataclass
class Route:
    rt: ResourceType
    namespace: Optional[str]
    name: Optional[str]
    subresource: Optional[str]


class Metrics:
    """Request counts per "<verb> <resource>" (resource like "v1/pods" or "v1/pods/eviction")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: Dict[str, int] = {}
        self._total = 0

    def count(self, verb: str, resource: str) -> None:
        with self._lock:
            key = "%s %s" % (verb, resource)
            self._counts[key] = self._counts.get(key, 0) + 1
            self._total += 1

    def snapshot(self) -> Dict[str, Any]:
        with self._lock:
            return {"total": self._total, "requests": dict(sorted(self._counts.items()))}

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._total = 0


def _verb(method: str, route: Route, watch: bool) -> str:
    if method == "GET":
        if route.name is None:
            return "watch" if watch else "list"
        return "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if route.name is not None else "deletecollection"}.get(
                method, method.lower())


class Api:
    def __init__(self, store: Store, fault_registry: Optional[_faults.FaultRegistry] = None,
                 token: Optional[str] = None, stopping: Optional[threading.Event] = None,
                 max_watch_seconds: float = 1800.0):
        self.store = store
        self.faults = fault_registry if fault_registry is not None else _faults.REGISTRY
        self.metrics = Metrics()
        self.token = token
        self.stopping = stopping or threading.Event()
        self.max_watch_seconds = max_watch_seconds

    # ----------------------------------------------------------------- entry

    def handle(self, request: Request) -> Response:
        try:
            return self._handle(request)
        except ApiError as exc:
            return error_response(exc)
        except Exception as exc:  # the lab must answer, and log why
            LOG.exception("internal error on %s %s", request.method, request.path)
            return error_response(ApiError(500, "InternalError", "Internal error occurred: %s"
                                           % exc))

    def _authorised(self, request: Request) -> bool:
        if self.token is None:
            return True
        return request.headers.get("authorization", "") == "Bearer %s" % self.token

    def _handle(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        if path.startswith("/lab/"):
            return self._lab(request, path)
        if path in ("/version", "/healthz", "/livez", "/readyz"):
            self.metrics.count("get", path)
            if path == "/version":
                return json_response(200, SERVER_VERSION)
            return Response(200, b"ok", "text/plain")
        if not self._authorised(request):
            self.metrics.count("unauthorized", path)
            return error_response(ApiError(401, "Unauthorized", "Unauthorized"))
        parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
        discovery = self._discovery(request, parts)
        if discovery is not None:
            self.metrics.count("get", path)
            return discovery
        route = self._route(parts)
        watch = request.param("watch") in ("true", "1")
        verb = _verb(request.method, route, watch)
        resource = route.rt.plural + ("/" + route.subresource if route.subresource else "")
        resource_key = route.rt.key + ("/" + route.subresource if route.subresource else "")
        self.metrics.count(verb, resource_key)
        fault = self.faults.match_request(verb, resource, resource_key, route.namespace,
                                          route.name)
        if fault is not None:
            injected = self._inject(fault, route)
            if injected is not None:
                return injected
        return self._dispatch(request, route, verb)

    # ---------------------------------------------------------------- faults

    def _inject(self, fault: _faults.Fault, route: Route) -> Optional[Response]:
        LOG.info("fault %d (%s) injected on %s", fault.id, fault.kind, route.rt.key)
        if fault.kind == "delay":
            self.stopping.wait(fault.seconds)
            return None
        if fault.kind == "hang":
            self.stopping.wait(fault.seconds)
            return Response(0, drop_connection=True)
        if fault.kind == "conflict":
            return error_response(conflict(route.rt, route.name or ""))
        reasons = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                   504: "Timeout", 404: "NotFound", 403: "Forbidden", 401: "Unauthorized",
                   409: "Conflict", 422: "Invalid", 400: "BadRequest"}
        return error_response(ApiError(fault.status, reasons.get(fault.status, "InternalError"),
                                       "lab fault injection: %s (fault %d)"
                                       % (reasons.get(fault.status, "error"), fault.id)))

    # -------------------------------------------------------------- lab paths

    def _lab(self, request: Request, path: str) -> Response:
        if path == "/lab/metrics" and request.method == "GET":
            return json_response(200, self.metrics.snapshot())
        if path == "/lab/metrics/reset" and request.method == "POST":
            self.metrics.reset()
            return json_response(200, self.metrics.snapshot())
        if path == "/lab/faults":
            if request.method == "GET":
                return json_response(200, {"items": self.faults.list()})
            if request.method == "POST":
                try:
                    spec = json.loads(request.body.decode() or "{}")
                    if not isinstance(spec, dict):
                        raise ValueError("the fault must be a JSON object")
                    fault = self.faults.add(**spec)
                except (ValueError, TypeError) as exc:
                    return error_response(bad_request("bad fault: %s" % exc))
                return json_response(201, fault.as_dict())
            if request.method == "DELETE":
                fault_id = request.param("id")
                removed = self.faults.clear(int(fault_id) if fault_id else None,
                                            request.param("condition"))
                return json_response(200, {"removed": removed})
        return error_response(ApiError(404, "NotFound", "no lab endpoint %s %s" % (request.method, path)))

    # ------------------------------------------------------------- discovery

    def _groups(self) -> Dict[str, Dict[str, List[ResourceType]]]:
        groups: Dict[str, Dict[str, List[ResourceType]]] = {}
        for rt in self.store.resources():
            groups.setdefault(rt.group, {}).setdefault(rt.version, []).append(rt)
        return groups

    @staticmethod
    def _resource_list(group_version: str, types: List[ResourceType]) -> Dict[str, Any]:
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
            for sub in subs:
                sub_entry = {"name": "%s/%s" % (rt.plural, sub), "singularName": "",
                             "namespaced": rt.namespaced, "kind": rt.kind,
                             "verbs": ["get", "patch", "update"]}
                if sub == "eviction":
                    sub_entry.update(kind="Eviction", group="policy", version="v1",
                                     verbs=["create"])
                elif sub == "binding":
                    sub_entry.update(kind="Binding", verbs=["create"])
                elif sub == "log":
                    sub_entry.update(verbs=["get"])
                elif sub in ("proxy",):
                    sub_entry.update(kind="NodeProxyOptions", verbs=["get"])
                elif sub == "finalize":
                    sub_entry.update(verbs=["update"])
                elif sub == "scale":
                    sub_entry.update(kind="Scale", group="autoscaling", version="v1")
                resources.append(sub_entry)
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                "resources": resources}

    def _group_entry(self, group: str, versions: Dict[str, List[ResourceType]]) -> Dict[str, Any]:
        names = sorted(versions, reverse=True)
        items = [{"groupVersion": "%s/%s" % (group, v), "version": v} for v in names]
        return {"name": group, "versions": items, "preferredVersion": items[0]}

    def _discovery(self, request: Request, parts: List[str]) -> Optional[Response]:
        if request.method != "GET":
            return None
        groups = self._groups()
        if parts == ["api"]:
            return json_response(200, {"kind": "APIVersions", "versions": ["v1"],
                                       "serverAddressByClientCIDRs": [
                                           {"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": "127.0.0.1"}]})
        if parts == ["api", "v1"]:
            return json_response(200, self._resource_list("v1", groups.get("", {}).get("v1", [])))
        if parts == ["apis"]:
            return json_response(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                self._group_entry(g, v) for g, v in sorted(groups.items()) if g]})
        if len(parts) == 2 and parts[0] == "apis":
            if parts[1] not in groups or not parts[1]:
                raise ApiError(404, "NotFound", "the server could not find the requested "
                               "resource", {})
            entry = self._group_entry(parts[1], groups[parts[1]])
            entry.update(kind="APIGroup", apiVersion="v1")
            return json_response(200, entry)
        if len(parts) == 3 and parts[0] == "apis":
            versions = groups.get(parts[1], {})
            if parts[2] not in versions:
                raise ApiError(404, "NotFound", "the server could not find the requested "
                               "resource", {})
            return json_response(200, self._resource_list("%s/%s" % (parts[1], parts[2]),
                                                          versions[parts[2]]))
        if parts == ["openapi", "v3"]:
            return json_response(200, {"paths": {
                gv: {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (gv, self._openapi_hash(gv))}
                for gv in self._openapi_group_versions()}})
        if len(parts) >= 3 and parts[:2] == ["openapi", "v3"]:
            gv = "/".join(parts[2:])
            if gv not in self._openapi_group_versions():
                raise ApiError(404, "NotFound", "the server could not find the requested "
                               "resource", {})
            return json_response(200, self._openapi_document(gv))
        if parts and parts[0] == "openapi":
            raise ApiError(404, "NotFound", "the lab API server publishes only minimal OpenAPI "
                           "v3 documents (paths, no schemas)", {})
        return None

    # ---------------------------------------------------------------- openapi

    def _openapi_group_versions(self) -> Dict[str, List[ResourceType]]:
        result: Dict[str, List[ResourceType]] = {}
        for rt in self.store.resources():
            gv = "api/v1" if not rt.group else "apis/%s/%s" % (rt.group, rt.version)
            result.setdefault(gv, []).append(rt)
        return result

    def _openapi_hash(self, gv: str) -> str:
        import hashlib
        names = sorted(rt.key + str(rt.namespaced) for rt in self._openapi_group_versions()[gv])
        return hashlib.sha256("|".join(names).encode()).hexdigest()[:32].upper()

    def _openapi_document(self, gv: str) -> Dict[str, Any]:
        """Just enough OpenAPI v3 for clients to see which operations exist: kubectl checks the
        `fieldValidation` parameter of each kind's PATCH operation to decide that the server
        validates (so it needs no schemas). No schemas are published."""
        paths: Dict[str, Any] = {}
        common = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for n in ("dryRun", "fieldManager", "fieldValidation", "force", "pretty")]
        for rt in sorted(self._openapi_group_versions()[gv], key=lambda t: t.plural):
            gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
            base = "/" + gv + ("/namespaces/{namespace}/" if rt.namespaced else "/") + rt.plural
            item = {"x-kubernetes-group-version-kind": gvk}
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
            del item
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes (gpulab)",
                                             "version": SERVER_VERSION["gitVersion"]},
                "paths": paths, "components": {"schemas": {}}}

    # ----------------------------------------------------------------- routes

    def _route(self, parts: List[str]) -> Route:
        not_found = ApiError(404, "NotFound", "the server could not find the requested resource",
                             {})
        if parts[:2] == ["api", "v1"]:
            prefix, rest = "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            prefix, rest = "%s/%s" % (parts[1], parts[2]), parts[3:]
        else:
            raise not_found
        if not rest:
            raise not_found
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = self.store.resources()
            key = "%s/%s" % (prefix, rest[2])
            if any(rt.key == key and rt.namespaced for rt in candidate):
                namespace, rest = rest[1], rest[2:]
        key = "%s/%s" % (prefix, rest[0])
        try:
            rt = self.store.resource(key)
        except ApiError:
            raise not_found from None
        if rt.namespaced and namespace is None and len(rest) > 1:
            raise not_found  # namespaced objects are addressed under /namespaces/<ns>/
        name = rest[1] if len(rest) > 1 else None
        sub = "/".join(rest[2:]) if len(rest) > 2 else None
        if sub is not None:
            allowed = (("status",) if rt.status_subresource else ()) + rt.subresources
            if sub not in allowed:
                raise not_found
        return Route(rt, namespace, name, sub)

    # --------------------------------------------------------------- dispatch

    @staticmethod
    def _dry_run(request: Request, body: Optional[Dict[str, Any]] = None) -> bool:
        values = request.query.get("dryRun", [])
        if body and isinstance(body.get("dryRun"), list):
            values = values + body["dryRun"]
        for value in values:
            if value != "All":
                raise bad_request("Invalid dry run value: %s; the only valid value is All"
                                  % value)
        return bool(values)

    def _body(self, request: Request) -> Any:
        content_type = request.headers.get("content-type", JSON).split(";")[0].strip()
        if content_type == "application/vnd.kubernetes.protobuf" and request.body:
            from . import protobuf
            try:
                return protobuf.decode(request.body)
            except protobuf.ProtobufError as exc:
                raise ApiError(415, "UnsupportedMediaType", str(exc)) from None
        if "protobuf" in content_type or "cbor" in content_type:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                           "unknown format - accepted media types include: application/json, "
                           "application/yaml")
        if not request.body:
            return None
        text = request.body.decode("utf-8")
        if "yaml" in content_type:
            import yaml  # lab dependency (PyYAML ships with ansible)
            try:
                return yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise bad_request("error decoding YAML: %s" % exc) from None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise bad_request("couldn't get version/kind; json parse error: %s" % exc) from None

    def _check_body_identity(self, route: Route, obj: Any, need_name: bool) -> Dict[str, Any]:
        if not isinstance(obj, dict):
            raise bad_request("the body of the request must be a JSON object")
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if (kind and kind != route.rt.kind) or (api_version and api_version != route.rt.api_version):
            raise bad_request("the API version in the data (%s) does not match the expected API "
                              "version (%s)" % (api_version, route.rt.api_version)
                              if api_version != route.rt.api_version else
                              "the kind in the data (%s) does not match the expected kind (%s)"
                              % (kind, route.rt.kind))
        meta = obj.setdefault("metadata", {}) or {}
        obj["metadata"] = meta
        if route.rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != route.namespace:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = route.namespace
        if need_name and meta.get("name") != route.name:
            raise bad_request("the name of the object (%s) does not match the name on the URL "
                              "(%s)" % (meta.get("name"), route.name))
        return obj

    def _dispatch(self, request: Request, route: Route, verb: str) -> Response:
        store, rt, method = self.store, route.rt, request.method
        ns = route.namespace
        if verb in ("list", "watch", "deletecollection") and rt.namespaced is False:
            ns = None
        sub = route.subresource
        if sub == "log":
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method "
                               "on the requested resource")
            text = store.get_pod_log(ns or "", route.name or "", request.param("container"))
            tail = request.param("tailLines")
            if tail:
                lines = text.splitlines(True)
                text = "".join(lines[-int(tail):]) if int(tail) > 0 else ""
            return Response(200, text.encode(), "text/plain")
        if sub == "eviction":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "only POST is allowed on pods/eviction")
            body = self._body(request) or {}
            meta = body.get("metadata") or {}
            if meta.get("name") and meta["name"] != route.name:
                raise bad_request("name in URL does not match name in Eviction object")
            options = body.get("deleteOptions") or {}
            dry = self._dry_run(request, options)
            result = store.evict(ns or "", route.name or "", dry_run=dry,
                                 grace_period_seconds=options.get("gracePeriodSeconds"))
            return json_response(201, result)
        if sub == "binding":
            if method != "POST":
                raise ApiError(405, "MethodNotAllowed", "only POST is allowed on pods/binding")
            body = self._body(request) or {}
            target = (body.get("target") or {}).get("name")
            if not target:
                raise ApiError(422, "Invalid", "Binding.target.name: Required value")
            store.bind(ns or "", route.name or "", target, dry_run=self._dry_run(request))
            return json_response(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                       "status": "Success", "code": 201})
        if sub in ("scale", "proxy", "finalize"):
            raise ApiError(405, "MethodNotAllowed", "the lab does not implement %s/%s"
                           % (rt.plural, sub))

        if method == "GET" and route.name is not None:
            return self._maybe_table(request, rt, store.get(rt.key, ns, route.name), single=True)
        if method == "GET":
            if verb == "watch":
                return self._watch(request, rt, ns)
            limit = request.param("limit")
            result = store.list(rt.key, ns, request.param("labelSelector"),
                                request.param("fieldSelector"),
                                limit=int(limit) if limit else None,
                                continue_token=request.param("continue"))
            return self._maybe_table(request, rt, result, single=False)
        if method == "POST" and route.name is None:
            obj = self._check_body_identity(route, self._body(request), need_name=False)
            return json_response(201, store.create(rt.key, obj, dry_run=self._dry_run(request),
                                                   field_manager=self._field_manager(request)))
        if method == "PUT" and route.name is not None:
            obj = self._check_body_identity(route, self._body(request), need_name=True)
            return json_response(200, store.update(rt.key, obj, dry_run=self._dry_run(request),
                                                   subresource=sub,
                                                   field_manager=self._field_manager(request)))
        if method == "PATCH" and route.name is not None:
            return self._patch(request, route, ns)
        if method == "DELETE":
            body = self._body(request) or {}
            if not isinstance(body, dict):
                raise bad_request("DeleteOptions must be an object")
            grace = request.param("gracePeriodSeconds")
            grace_value = int(grace) if grace is not None else body.get("gracePeriodSeconds")
            policy = request.param("propagationPolicy") or body.get("propagationPolicy")
            if body.get("orphanDependents") is True:
                policy = "Orphan"
            dry = self._dry_run(request, body)
            if route.name is None:
                deleted = []
                for item in store.items(rt.key, ns, request.param("labelSelector"),
                                        request.param("fieldSelector")):
                    deleted.append(store.delete(rt.key, item["metadata"].get("namespace"),
                                                item["metadata"]["name"], grace_value,
                                                None, policy, dry))
                return json_response(200, {"apiVersion": rt.api_version, "kind": rt.list_kind,
                                           "metadata": {"resourceVersion":
                                                        str(store.resource_version())},
                                           "items": deleted})
            result = store.delete(rt.key, ns, route.name, grace_value,
                                  body.get("preconditions"), policy, dry)
            pending = bool(result["metadata"].get("deletionTimestamp")) and not dry and \
                self._still_there(rt, ns, route.name)
            return json_response(202 if pending else 200, result)
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the "
                       "requested resource")

    @staticmethod
    def _field_manager(request: Request) -> Optional[str]:
        """fieldManager, or like the API server the User-Agent's product name."""
        explicit = request.param("fieldManager")
        if explicit:
            return explicit
        agent = request.headers.get("user-agent", "")
        return agent.split("/", 1)[0].strip() or None

    def _still_there(self, rt: ResourceType, ns: Optional[str], name: str) -> bool:
        try:
            self.store.get(rt.key, ns, name)
            return True
        except ApiError:
            return False

    def _patch(self, request: Request, route: Route, ns: Optional[str]) -> Response:
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        if content_type not in ("application/json-patch+json", "application/merge-patch+json",
                                "application/strategic-merge-patch+json",
                                "application/apply-patch+yaml", "application/apply-patch+json"):
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an "
                           "unknown format - accepted media types include: "
                           "application/json-patch+json, application/merge-patch+json, "
                           "application/apply-patch+yaml")
        body = self._body(request)
        if content_type.startswith("application/apply-patch"):
            if not isinstance(body, dict):
                raise bad_request("apply configuration must be an object")
            self._check_body_identity(route, body, need_name=False)
            if (body.get("metadata") or {}).get("name") not in (None, route.name):
                raise bad_request("the name of the object (%s) does not match the name on the "
                                  "URL (%s)" % (body["metadata"]["name"], route.name))
            if request.param("fieldManager") is None:
                raise bad_request("PATCH requests with apply content type must set fieldManager")
        existed = self._still_there(route.rt, ns, route.name or "")
        result = self.store.patch(route.rt.key, ns, route.name or "", body, content_type,
                                  dry_run=self._dry_run(request), subresource=route.subresource,
                                  field_manager=self._field_manager(request),
                                  force=request.param("force") == "true")
        return json_response(200 if existed else 201, result)

    # ----------------------------------------------------------------- tables

    @staticmethod
    def _wants_table(request: Request) -> bool:
        return "as=Table" in request.headers.get("accept", "")

    def _maybe_table(self, request: Request, rt: ResourceType, result: Dict[str, Any],
                     single: bool) -> Response:
        if not self._wants_table(request):
            return json_response(200, result)
        items = [result] if single else result["items"]
        columns = [{"name": "Name", "type": "string", "format": "name", "priority": 0,
                    "description": "Name must be unique within a namespace."}]
        extra = _TABLE_COLUMNS.get(rt.key, [])
        if rt.printer_columns:
            extra = [(column["name"], _printer(column)) for column in rt.printer_columns
                     if column.get("jsonPath") != ".metadata.creationTimestamp"]
        for title, _getter in extra:
            columns.append({"name": title, "type": "string", "format": "", "priority": 0,
                            "description": title})
        columns.append({"name": "Age", "type": "string", "format": "", "priority": 0,
                        "description": "CreationTimestamp is a timestamp representing the "
                        "server time when this object was created."})
        rows = []
        include = request.param("includeObject", "PartialObjectMetadata")
        for obj in items:
            cells = [obj["metadata"]["name"]] + [fn(obj) for _title, fn in extra] + [_age(obj)]
            row_obj: Dict[str, Any] = obj
            if include == "PartialObjectMetadata":
                row_obj = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                           "metadata": obj["metadata"]}
            elif include == "None":
                row_obj = None  # type: ignore[assignment]
            row: Dict[str, Any] = {"cells": cells}
            if row_obj is not None:
                row["object"] = row_obj
            rows.append(row)
        meta = {"resourceVersion": result["metadata"].get("resourceVersion", "")}
        if not single and result["metadata"].get("continue"):
            meta["continue"] = result["metadata"]["continue"]
        return json_response(200, {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                                   "metadata": meta, "columnDefinitions": columns, "rows": rows})

    # ------------------------------------------------------------------ watch

    def _watch(self, request: Request, rt: ResourceType, ns: Optional[str]) -> Response:
        labels = parse_label_selector(request.param("labelSelector"))
        fields = parse_field_selector(rt, request.param("fieldSelector"))
        timeout = request.param("timeoutSeconds")
        seconds = min(float(timeout), self.max_watch_seconds) if timeout else \
            self.max_watch_seconds
        events: "queue.Queue[WatchEvent]" = queue.Queue()
        # watch-list (client-go's WatchListClient): initial state as ADDED events, then a
        # BOOKMARK annotated "k8s.io/initial-events-end".
        initial = request.param("sendInitialEvents") == "true"
        since = None if initial else request.param("resourceVersion")
        try:
            replay, unsubscribe, snapshot_rv = self.store.watch(rt.key, ns, since, events.put)
        except ApiError as exc:
            if exc.code != 410:
                raise
            line = json.dumps({"type": "ERROR", "object": exc.status()}).encode() + b"\n"
            return Response(200, stream=iter([line]))
        table = self._wants_table(request)
        stopping = self.stopping

        def matches(obj: Optional[Dict[str, Any]]) -> bool:
            return obj is not None and _sel.matches(labels, obj["metadata"].get("labels")) and \
                _sel.field_matches(fields, obj)

        def translate(event: WatchEvent) -> Optional[Tuple[str, Dict[str, Any]]]:
            new_ok = matches(event.object)
            old_ok = matches(event.old_object)
            if event.type == "ADDED":
                return ("ADDED", event.object) if new_ok else None
            if event.type == "DELETED":
                return ("DELETED", event.object) if old_ok else None
            if new_ok and old_ok:
                return "MODIFIED", event.object
            if new_ok:
                return "ADDED", event.object
            if old_ok:
                return "DELETED", event.object
            return None

        def encode(kind: str, obj: Dict[str, Any]) -> bytes:
            if table:
                rows = json.loads(self._maybe_table(request, rt, obj, single=True).body)
                obj = rows
            return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() \
                + b"\n"

        def stream() -> Iterator[bytes]:
            deadline = time.monotonic() + seconds
            try:
                for event in replay:
                    out = translate(event)
                    if out:
                        yield encode(*out)
                if initial:
                    bookmark = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {
                        "resourceVersion": str(snapshot_rv),
                        "annotations": {"k8s.io/initial-events-end": "true"}}}
                    yield json.dumps({"type": "BOOKMARK", "object": bookmark}).encode() + b"\n"
                while not stopping.is_set():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    try:
                        event = events.get(timeout=min(remaining, 0.5))
                    except queue.Empty:
                        continue
                    out = translate(event)
                    if out:
                        yield encode(*out)
            finally:
                unsubscribe()
        return Response(200, stream=stream())


def _age(obj: Dict[str, Any]) -> str:
    stamp = obj["metadata"].get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    seconds = max(0, int(time.time() - parse_rfc3339(stamp)))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2 or (unit == "m" and seconds >= 120):
            return "%d%s" % (seconds // size, unit)
    return "%ds" % seconds


def _ready_count(pod: Dict[str, Any]) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return "%d/%d" % (sum(1 for s in statuses if s.get("ready")), total)


def _node_status(node: Dict[str, Any]) -> str:
    ready = [c for c in (node.get("status") or {}).get("conditions") or []
             if c.get("type") == "Ready"]
    text = "Ready" if ready and ready[0].get("status") == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        text += ",SchedulingDisabled"
    return text


def _pod_status(pod: Dict[str, Any]) -> str:
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    status = pod.get("status") or {}
    return status.get("reason") or status.get("phase") or "Unknown"


def _printer(column: Dict[str, Any]) -> Callable[[Dict[str, Any]], Any]:
    from .schema import json_path_value

    def cell(obj: Dict[str, Any]) -> Any:
        value = json_path_value(obj, column.get("jsonPath", ""))
        if value is None:
            return "<none>" if column.get("type") == "string" else None
        if column.get("type") == "date" and isinstance(value, str):
            return _age({"metadata": {"creationTimestamp": value}})
        return value if isinstance(value, (str, int, float, bool)) else json.dumps(value)
    return cell


def _status_field(key: str) -> Callable[[Dict[str, Any]], Any]:
    return lambda obj: (obj.get("status") or {}).get(key, 0)


_TABLE_COLUMNS: Dict[str, List[Tuple[str, Callable[[Dict[str, Any]], Any]]]] = {
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
}


__all__ = ["Api", "Request", "Response", "Metrics", "SERVER_VERSION"]
