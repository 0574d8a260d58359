"""REST routing of the virtual cluster: Kubernetes API paths -> Store calls.

Transport-independent: ``Api.handle(Request) -> Response``; the HTTP server (server.py) turns
sockets into Requests. A Response either has a ``body`` (bytes) or a ``stream`` (an iterator of
byte chunks, for watches) which the server sends chunked.

Served (JSON; protobuf bodies of the kinds gpulab.cluster.protobuf decodes, others get 415):
  /version /healthz /livez /readyz /api /api/v1 /apis /apis/<group> /apis/<group>/<version>
  /api/v1/[namespaces/<ns>/]<plural>[/<name>[/<subresource>]] and the /apis/<g>/<v>/... forms
  get, list (limit/continue, labelSelector, fieldSelector), watch (?watch=true, resourceVersion,
  timeoutSeconds, allowWatchBookmarks), create, update (PUT), patch (json/merge/strategic/apply),
  delete (DeleteOptions body or query), deletecollection, pods/log, pods/eviction, pods/binding, pods/proxy (GET, DCGM exporter pods'
  /metrics: exporter.py),
  <x>/status; ``dryRun=All`` on every write; ``Accept: ...as=Table`` for kubectl's printing.
  Lab-only: GET /lab/metrics (request counts per "<verb> <resource>"), POST /lab/metrics/reset,
  GET/POST/DELETE /lab/faults, POST /lab/tokens (a ServiceAccount token, rbac.py).
Every resource request is authorized by rbac.py (the admin token is system:masters).
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional

import yaml

from gpulab.cluster import discovery, exporter
from gpulab.cluster import faults as _faults
from gpulab.cluster import protobuf
from gpulab.cluster import rbac
from gpulab.cluster import tables, watch
from gpulab.cluster.errors import (ApiError, bad_request, conflict, resource_not_found,
                                   unsupported_patch_type)
from gpulab.cluster.objects import ResourceType
from gpulab.cluster.store import Store
from gpulab.cluster.objecttable import parse_field_selector, parse_label_selector

LOG = logging.getLogger("gpulab.cluster.api")

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
    proxy_path: str = ""  # what follows .../proxy/ (pods/proxy)


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


def _verb(method: str, route: Route, watching: bool) -> str:
    if method == "GET":
        if route.name is None:
            return "watch" if watching else "list"
        return "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete" if route.name is not None else "deletecollection"}.get(
                method, method.lower())


class Api:
    def __init__(self, store: Store, fault_registry: Optional[_faults.FaultRegistry] = None,
                 token: Optional[str] = None, stopping: Optional[threading.Event] = None,
                 max_watch_seconds: float = 1800.0):
        self.store = store
        self.version = dict(discovery.SERVER_VERSION)  # /version (the lab server sets the simulated one)
        self.faults = fault_registry if fault_registry is not None else _faults.REGISTRY
        self.metrics = Metrics()
        self.token = token
        self.rbac = rbac.Authorizer(store, token)
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

    def _handle(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        if path.startswith("/lab/"):
            return self._lab(request, path)
        if path in ("/version", "/healthz", "/livez", "/readyz"):
            self.metrics.count("get", path)
            if path == "/version":
                return json_response(200, self.version)
            return Response(200, b"ok", "text/plain")
        identity = self.rbac.authenticate(request.headers.get("authorization", ""))
        if identity is None:
            self.metrics.count("unauthorized", path)
            return error_response(ApiError(401, "Unauthorized", "Unauthorized"))
        parts = [urllib.parse.unquote(p) for p in path.split("/") if p]
        document = discovery.document(self.store.resources(), parts) if request.method == "GET" else None
        if document is not None:
            self.metrics.count("get", path)
            return json_response(200, document)
        route = self._route(parts)
        watching = request.param("watch") in ("true", "1")
        verb = _verb(request.method, route, watching)
        resource = route.rt.plural + ("/" + route.subresource if route.subresource else "")
        resource_key = route.rt.key + ("/" + route.subresource if route.subresource else "")
        self.metrics.count(verb, resource_key)
        self.rbac.authorize(identity, rbac.Attributes(verb, route.rt.group, route.rt.plural,
                                                      route.subresource, route.namespace,
                                                      route.name), route.rt)
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
        if path == "/lab/tokens":
            return json_response(*self.rbac.lab_tokens(request.method, request.body))
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

    # ----------------------------------------------------------------- routes

    def _route(self, parts: List[str]) -> Route:
        not_found = resource_not_found()
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
        if len(rest) > 3 and rest[2] == "proxy":  # .../NAME[:PORT]/proxy/PATH
            sub = "proxy"
        if sub is not None:
            allowed = (("status",) if rt.status_subresource else ()) + rt.subresources
            if sub not in allowed:
                raise not_found
        return Route(rt, namespace, name, sub, "/".join(rest[3:]) if sub == "proxy" else "")

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
        if sub in ("log", "eviction", "binding", "scale", "proxy", "finalize"):
            return self._subresource(request, route, ns)
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
            return self._delete(request, route, ns)
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the "
                       "requested resource")

    def _subresource(self, request: Request, route: Route, ns: Optional[str]) -> Response:
        """pods/log, pods/eviction, pods/binding (and 405 for the ones not implemented)."""
        store, rt, method, sub = self.store, route.rt, request.method, route.subresource
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
        if sub == "proxy" and rt.key == "v1/pods":
            if method != "GET":
                raise ApiError(405, "MethodNotAllowed", "the lab proxies GET only")
            text = exporter.scrape(store, ns or "", route.name or "", route.proxy_path)
            return Response(200, text.encode(), "text/plain; version=0.0.4")
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
        raise ApiError(405, "MethodNotAllowed", "the lab does not implement %s/%s"  # scale, proxy, finalize
                       % (rt.plural, sub))

    def _delete(self, request: Request, route: Route, ns: Optional[str]) -> Response:
        """delete (DeleteOptions in the body or the query) and deletecollection."""
        store, rt = self.store, route.rt
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
            raise unsupported_patch_type()
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

    @staticmethod
    def _maybe_table(request: Request, rt: ResourceType, result: Dict[str, Any],
                     single: bool) -> Response:
        if not tables.wants_table(request.headers.get("accept", "")):
            return json_response(200, result)
        return json_response(200, tables.table(rt, result, single,
                                               request.param("includeObject", "PartialObjectMetadata")))

    # ------------------------------------------------------------------ watch

    def _watch(self, request: Request, rt: ResourceType, ns: Optional[str]) -> Response:
        timeout = request.param("timeoutSeconds")
        seconds = min(float(timeout), self.max_watch_seconds) if timeout else \
            self.max_watch_seconds
        include = request.param("includeObject", "PartialObjectMetadata") \
            if tables.wants_table(request.headers.get("accept", "")) else None
        wanted = watch.WatchRequest(
            rt, ns, parse_label_selector(request.param("labelSelector")),
            parse_field_selector(rt, request.param("fieldSelector")), seconds,
            request.param("sendInitialEvents") == "true", request.param("resourceVersion"), include)
        return Response(200, stream=watch.stream(self.store, wanted, self.stopping))


__all__ = ["Api", "Metrics", "Request", "Response"]
