# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes API access for the gpufleet.sharing modules (the only I/O layer to the cluster).

Stable API (this docstring is its reference)::

    from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient, client_from_module
    from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError, K8sTimeout
    from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import ResourceType
    from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import K8S_AUTH_ARGSPEC

    argument_spec.update(K8S_AUTH_ARGSPEC)     # kubeconfig, context, host, api_key (no_log),
                                               # validate_certs, ca_cert, client_cert, client_key,
                                               # request_timeout
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    k8s = client_from_module(module, dry_run=module.check_mode)   # fails the module cleanly
                                               # (missing lib, bad kubeconfig); modules built on
                                               # _cluster_module.ClusterModule get this as ``mod.k8s``

    k8s.get("Node", "gpu-a")                   # dict, or None on 404
    k8s.list("Pod", namespace="ns", label_selector="app=x", field_selector="spec.nodeName=gpu-a")
    k8s.create(body)                           # kind/apiVersion taken from the body
    k8s.replace(body)                          # PUT; body carries metadata.resourceVersion
    k8s.patch("Node", "gpu-a", {"metadata": {"labels": {"a": "b"}}}, patch_type="merge")
    k8s.delete("ConfigMap", "cm", namespace="ns")                # True if deleted, False if absent
    k8s.apply(body, compare="exact")           # -> ApplyResult(action, before, after)
    k8s.update("Node", "gpu-a", mutate)        # read-modify-write, re-read and retry on 409
    k8s.set_node_labels("gpu-a", {"k": "v", "gone": None}) / set_node_annotations(...)
    k8s.set_unschedulable("gpu-a", True)       # cordon / uncordon
    k8s.evict("pod", "ns")                     # policy/v1 Eviction; K8sError(status=429) on PDB
    k8s.events_for("Node", "gpu-a")            # events whose involvedObject matches
    k8s.pod_log("pod", "ns", container=None, tail_lines=None)  # text
    k8s.wait_for("what", probe, timeout=300, interval=2, progress=callback)
    k8s.now()                                  # monotonic clock used by wait_for
    k8s.request_count                          # HTTP requests sent (retries included)

Dry run: ``k8s.dry_run`` (set by ``connect``/``client_from_module(..., dry_run=...)``) applies to
every write; each write method also takes ``dry_run=`` (None, the default, means the client's
setting). Creates into a namespace that was itself only created by a dry run are answered by the
client (see K8sClient).

Kinds are named by string ("Node", "ConfigMap", "ClusterPolicy", ... see ``_resources.BUILTIN_TYPES``)
or by a ``_resources.ResourceType`` for anything else; what an apply changes is ``_apply``'s. Objects are plain dicts as the API server returns them.

Everything goes through ``kubernetes.dynamic.DynamicClient.request`` with a static resource table
(no discovery round-trips), so the request count is exact and the same code works with the classic
and the current generated ``kubernetes`` client.
"""

from __future__ import annotations

import copy
import json
import os
import random
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

try:
    from kubernetes import client as _k8s_client_mod
    from kubernetes import config as _k8s_config_mod
    from kubernetes.dynamic import DynamicClient as _DynamicClient
    from kubernetes.client.rest import ApiException as _ApiException
    HAS_KUBERNETES = True
    KUBERNETES_IMPORT_ERROR: Optional[str] = None
except ImportError:  # pragma: no cover - exercised through missing_required_lib
    HAS_KUBERNETES = False
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()

    class _ApiException(Exception):
        status = None

try:
    from urllib3.exceptions import HTTPError as _Urllib3HTTPError
except ImportError:  # pragma: no cover
    class _Urllib3HTTPError(Exception):
        pass

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import K8S_AUTH_ARGSPEC
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError, K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._apply import ApplyResult, desired_differs, merge_desired
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import BUILTIN_TYPES, KindRef, resource_type_of


FIELD_MANAGER = "gpufleet.sharing"

RETRY_STATUSES = frozenset([500, 502, 503, 504])
# Items per page of every list (the ``limit`` query parameter; the ``continue`` token is followed), so a
# list of N objects costs ceil(N / LIST_PAGE_SIZE) requests: 10 for 5,000 nodes. 500 is the page of
# the Kubernetes docs' chunking example and kubectl's --chunk-size default ("API Concepts", "Retrieving
# large results sets in chunks", kubernetes.io/docs/reference/using-api/api-concepts/): the pages of
# one list are one consistent snapshot, so a larger page saves only round trips and makes each
# response larger for the API server to build (a node carries its labels, conditions and up to 50
# images: kubelet --node-status-max-images). Measured: docs/benchmarks.md, "Fleet scale at 5,000 nodes".
LIST_PAGE_SIZE = 500
IN_CLUSTER_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"


Obj = Dict[str, Any]
Mutator = Callable[[Dict[str, Any]], Optional[Dict[str, Any]]]


def status_message(body: Any, fallback: str) -> Tuple[str, Optional[str], Optional[Dict[str, Any]]]:
    """(message, reason, parsed body) from a Kubernetes Status response body."""
    parsed: Optional[Dict[str, Any]] = None
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body.strip():
        try:
            candidate = json.loads(body)
            if isinstance(candidate, dict):
                parsed = candidate
        except ValueError:
            return body.strip()[:500], None, None
    elif isinstance(body, dict):
        parsed = body
    if parsed:
        return (str(parsed.get("message") or fallback), parsed.get("reason"), parsed)
    return fallback, None, None


def backoff_delay(attempt: int, base: float = 0.25, cap: float = 8.0, jitter: float = 0.2) -> float:
    """Exponential backoff with a little jitter; attempt counts from 0."""
    delay = min(cap, base * (2 ** attempt))
    return delay * (1.0 + random.uniform(-jitter, jitter))


def _as_created_in(body: Dict[str, Any], namespace: str) -> Dict[str, Any]:
    """What a dry-run create into a namespace that exists only as a dry run answers: the object as sent."""
    created = copy.deepcopy(body)
    created.setdefault("metadata", {})["namespace"] = namespace
    return created


class _NoDiscovery:
    """DynamicClient discoverer that never talks to the server: we use a static resource table."""

    def __init__(self, client, cache_file):  # pylint: disable=unused-argument
        self.client = client


def _check_context(kubeconfig: Optional[str], context: str) -> None:
    """A context the kubeconfig lacks is named (the client's own error is "Invalid kube-config file")."""
    contexts, _active = _k8s_config_mod.list_kube_config_contexts(**({"config_file": kubeconfig} if kubeconfig else {}))
    names = [entry.get("name") for entry in contexts or []]
    if context not in names:
        raise K8sError("context %r is not in kubeconfig %s (it has: %s)"
                       % (context, kubeconfig or "(default)", ", ".join(str(n) for n in names) or "no context"))


def build_configuration(kubeconfig=None, context=None, host=None, api_key=None, validate_certs=None, ca_cert=None,
                        client_cert=None, client_key=None, **_ignored) -> Any:
    """A kubernetes.client.Configuration from module-style parameters.

    Order: explicit kubeconfig/context; else host (+api_key) alone; else in-cluster service account
    when running in a pod; else the default kubeconfig (KUBECONFIG or ~/.kube/config)."""
    if not HAS_KUBERNETES:
        raise K8sError(missing_required_lib("kubernetes"))
    configuration = _k8s_client_mod.Configuration()
    try:
        if kubeconfig or context:
            if kubeconfig and not os.path.exists(kubeconfig):
                raise K8sError("kubeconfig %s does not exist" % kubeconfig)
            if context:
                _check_context(kubeconfig, context)
            _k8s_config_mod.load_kube_config(config_file=kubeconfig, context=context,
                                             client_configuration=configuration, persist_config=False)
        elif host:
            pass
        elif os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(IN_CLUSTER_TOKEN):
            _k8s_config_mod.load_incluster_config(client_configuration=configuration)
        else:
            _k8s_config_mod.load_kube_config(client_configuration=configuration, persist_config=False)
    except K8sError:
        raise
    except Exception as exc:  # config loaders raise ConfigException, IOError, yaml errors...
        raise K8sError("cannot load Kubernetes client configuration%s: %s" % (
            " from %s" % kubeconfig if kubeconfig else "", exc))
    if host:
        configuration.host = host
    if api_key:
        configuration.api_key = {"authorization": "Bearer " + api_key}
        configuration.api_key_prefix = {}
    if validate_certs is not None:
        configuration.verify_ssl = validate_certs
    if ca_cert:
        configuration.ssl_ca_cert = ca_cert
    if client_cert:
        configuration.cert_file = client_cert
    if client_key:
        configuration.key_file = client_key
    # Our own retry loop counts and backs off; urllib3 must not retry silently behind it.
    configuration.retries = 0
    return configuration


# The first pause of a wait (seconds); each next one doubles, up to the wait's interval.
FIRST_POLL_DELAY = 0.25


def poll_delay(polls: int, interval: float) -> float:
    """Seconds before poll number ``polls + 1`` of a wait: 0.25, 0.5, 1, 2 ... capped at ``interval``.

    Most waits of a change (a pod going, a label seen) end within a second or two; with a fixed
    2 s interval each paid a second on average for nothing. A long wait still polls every
    ``interval`` after a few polls (at most three more requests than before)."""
    return min(interval, FIRST_POLL_DELAY * 2 ** min(max(0, polls - 1), 16))


def client_from_module(module: Any, dry_run: bool = False, **client_options: Any) -> K8sClient:
    """K8sClient from the K8S_AUTH_ARGSPEC parameters of an AnsibleModule; fails the module cleanly.

    ``dry_run=True`` (a module in check mode) makes every write a server-side dry run."""
    if not HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    params = dict((key, module.params.get(key)) for key in K8S_AUTH_ARGSPEC)
    try:
        return K8sClient.connect(params, dry_run=dry_run, **client_options)
    except K8sError as exc:
        module.fail_json(msg=str(exc))
    raise AssertionError("unreachable")  # fail_json exits


class K8sClient:
    """Typed helpers over the Kubernetes REST API; objects are dicts.

    ``dry_run`` is the client's setting for every write (create, replace, patch, delete, evict and
    what is built on them) whose call does not pass ``dry_run`` itself: True sends them all as
    server-side dry runs (``dryRun=All``), which is how modules run in check mode.

    A Namespace created by a dry run does not exist, so the server cannot dry-run a create inside
    it (404). The client remembers such namespaces and answers creates into them itself, with the
    object as sent; reads and other writes go to the server, which answers them as for any missing
    namespace."""

    def __init__(self, dynamic_client: Any, request_timeout: float = 30.0, retries: int = 5,
                 conflict_retries: int = 5, backoff_base: float = 0.25,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic,
                 dry_run: bool = False, page_size: int = LIST_PAGE_SIZE) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError("page_size must be a positive integer, got %r" % (page_size,))
        self._dynamic = dynamic_client
        self.page_size = page_size
        self.dry_run = bool(dry_run)
        self.dry_run_namespaces: Set[str] = set()
        self.request_timeout = request_timeout
        self.retries = retries
        self.conflict_retries = conflict_retries
        self.backoff_base = backoff_base
        self._sleep = sleep
        self._clock = clock
        self.request_count = 0
        self.retry_count = 0

    @classmethod
    def connect(cls, params: Dict[str, Any], dry_run: bool = False, **options: Any) -> K8sClient:
        """A client for module-style connection ``params`` (see K8S_AUTH_ARGSPEC)."""
        configuration = build_configuration(**params)
        api_client = _k8s_client_mod.ApiClient(configuration)
        dynamic = _DynamicClient(api_client, discoverer=_NoDiscovery)
        timeout = params.get("request_timeout") or 30.0
        return cls(dynamic, request_timeout=timeout, dry_run=dry_run, **options)

    # -- transport -----------------------------------------------------------------------------

    def _send_once(self, method: str, path: str, body: Any, query: List[Tuple[str, Any]],
                   content_type: Optional[str], raw: bool = False) -> Any:
        """One HTTP request; returns the decoded JSON body (the text with raw=True).
        Raises _ApiException / urllib3 errors."""
        kwargs: Dict[str, Any] = {"query_params": list(query), "serialize": False,
                                  "_request_timeout": self.request_timeout}
        if content_type:
            kwargs["content_type"] = content_type
        response = self._dynamic.request(method, path, body=body, **kwargs)
        data = getattr(response, "data", response)
        if isinstance(data, bytes):
            data = data.decode("utf-8", "replace" if raw else "strict")
        if raw:
            return data if isinstance(data, str) else str(data or "")
        if isinstance(data, str):
            return json.loads(data) if data.strip() else {}
        return data

    def request(self, method: str, path: str, body: Any = None, query: Optional[List[Tuple[str, Any]]] = None,
                content_type: Optional[str] = None, retry_429: bool = True, raw: bool = False) -> Any:
        """Send a request with bounded retries on 5xx, 429 (unless retry_429 is False) and
        transport errors/timeouts. Raises K8sError with the Status message otherwise.
        raw=True returns the body as text (pod logs) instead of decoded JSON."""
        attempt = 0
        while True:
            self.request_count += 1
            try:
                return self._send_once(method, path, body, query or [], content_type, raw)
            except _ApiException as exc:
                status = getattr(exc, "status", None)
                message, reason, parsed = status_message(
                    getattr(exc, "body", None), "%s %s" % (status, getattr(exc, "reason", "") or "error"))
                retryable = status in RETRY_STATUSES or (status == 429 and retry_429)
                if not retryable or attempt >= self.retries:
                    raise K8sError("%s %s: %s (HTTP %s)" % (method.upper(), path, message, status),
                                   status=status, reason=reason, body=parsed, method=method, path=path)
                delay = self._retry_after(exc)
            except (_Urllib3HTTPError, OSError) as exc:
                if attempt >= self.retries:
                    raise K8sError("%s %s: cannot reach the API server: %s" % (method.upper(), path, exc),
                                   method=method, path=path)
                delay = None
            except ValueError as exc:
                raise K8sError("%s %s: the API server answered with invalid JSON: %s" % (method.upper(), path, exc),
                               method=method, path=path)
            if delay is None:
                delay = backoff_delay(attempt, base=self.backoff_base)
            self.retry_count += 1
            self._sleep(delay)
            attempt += 1

    @staticmethod
    def _retry_after(exc: Any) -> Optional[float]:
        headers = getattr(exc, "headers", None) or {}
        try:
            value = headers.get("Retry-After")
        except AttributeError:
            return None
        try:
            return min(10.0, max(0.0, float(value))) if value is not None else None
        except (TypeError, ValueError):
            return None

    def _dry(self, dry_run: Optional[bool]) -> bool:
        """The dry-run setting of one write: the call's own, else the client's."""
        return self.dry_run if dry_run is None else bool(dry_run)

    @staticmethod
    def _write_query(dry_run: bool) -> List[Tuple[str, Any]]:
        query = [("fieldManager", FIELD_MANAGER)]
        if dry_run:
            query.append(("dryRun", "All"))
        return query

    # -- CRUD ----------------------------------------------------------------------------------

    def get(self, kind: KindRef, name: str, namespace: Optional[str] = None) -> Optional[Dict[str, Any]]:
        rtype = resource_type_of(kind)
        try:
            return self.request("GET", rtype.path(name, namespace))
        except K8sError as exc:
            if exc.status == 404:
                return None
            raise

    def list(self, kind: KindRef, namespace: Optional[str] = None, label_selector: Optional[str] = None,
             field_selector: Optional[str] = None) -> List[Dict[str, Any]]:
        """All items, in pages of ``page_size`` (ceil(N / page_size) requests). namespace=None lists across namespaces."""
        rtype = resource_type_of(kind)
        items: List[Dict[str, Any]] = []
        token: Optional[str] = None
        while True:
            query: List[Tuple[str, Any]] = [("limit", self.page_size)]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            page = self.request("GET", rtype.path(namespace=namespace), query=query)
            for item in page.get("items") or []:
                # list items carry no kind/apiVersion; add them so callers can pass items back
                item.setdefault("kind", rtype.kind)
                item.setdefault("apiVersion", rtype.api_version)
                items.append(item)
            token = (page.get("metadata") or {}).get("continue")
            if not token:
                return items

    def create(self, body: Dict[str, Any], dry_run: Optional[bool] = None, namespace: Optional[str] = None) -> Dict[str, Any]:
        dry = self._dry(dry_run)
        rtype = resource_type_of(body.get("kind", ""), body.get("apiVersion"))
        meta = body.get("metadata") or {}
        namespace = namespace or meta.get("namespace")
        if rtype.namespaced and not namespace:
            raise K8sError("%s %s: a namespace is required" % (rtype.kind, meta.get("name")))
        if dry and rtype.namespaced and namespace in self.dry_run_namespaces:
            return _as_created_in(body, namespace)
        created = self.request("POST", rtype.path(namespace=namespace if rtype.namespaced else None),
                               body=body, query=self._write_query(dry))
        if dry and rtype is BUILTIN_TYPES["Namespace"] and meta.get("name"):
            self.dry_run_namespaces.add(meta["name"])
        return created

    def replace(self, body: Dict[str, Any], dry_run: Optional[bool] = None) -> Dict[str, Any]:
        rtype = resource_type_of(body.get("kind", ""), body.get("apiVersion"))
        meta = body.get("metadata") or {}
        return self.request("PUT", rtype.path(meta.get("name"), meta.get("namespace")),
                            body=body, query=self._write_query(self._dry(dry_run)))

    PATCH_TYPES = {
        "merge": "application/merge-patch+json",
        "strategic": "application/strategic-merge-patch+json",
        "json": "application/json-patch+json",
    }

    def patch(self, kind: KindRef, name: str, patch: Any, namespace: Optional[str] = None,
              patch_type: str = "merge", dry_run: Optional[bool] = None, subresource: Optional[str] = None) -> Dict[str, Any]:
        """merge (RFC 7386), strategic (built-in kinds only) or json (RFC 6902, a list of ops)."""
        if patch_type not in self.PATCH_TYPES:
            raise K8sError("patch_type must be one of %s, got %r" % (", ".join(sorted(self.PATCH_TYPES)), patch_type))
        if patch_type == "json" and not isinstance(patch, list):
            raise K8sError("a json patch is a list of operations")
        rtype = resource_type_of(kind)
        return self.request("PATCH", rtype.path(name, namespace, subresource), body=patch,
                            query=self._write_query(self._dry(dry_run)), content_type=self.PATCH_TYPES[patch_type])

    def delete(self, kind: KindRef, name: str, namespace: Optional[str] = None, dry_run: Optional[bool] = None,
               propagation_policy: Optional[str] = "Background", grace_period_seconds: Optional[int] = None) -> bool:
        """True when the delete was accepted, False when the object did not exist."""
        dry = self._dry(dry_run)
        rtype = resource_type_of(kind)
        body: Dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if dry:
            body["dryRun"] = ["All"]
        query = [("dryRun", "All")] if dry else []
        try:
            self.request("DELETE", rtype.path(name, namespace), body=body, query=query)
        except K8sError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    # -- higher level --------------------------------------------------------------------------

    def apply(self, body: Dict[str, Any], dry_run: Optional[bool] = None, compare: str = "exact") -> ApplyResult:
        """Create ``body`` or bring the live object to it (see desired_differs / merge_desired).

        Idempotent: no request that writes when nothing differs. In dry_run the server validates
        the write (dryRun=All) and nothing is persisted. 409 on update: re-read and retry."""
        rtype = resource_type_of(body.get("kind", ""), body.get("apiVersion"))
        meta = body.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace") if rtype.namespaced else None
        if not name:
            raise K8sError("%s: metadata.name is required" % rtype.kind)
        for _attempt in range(self.conflict_retries + 1):
            live = self.get(rtype, name, namespace)
            if live is None:
                try:
                    created = self.create(body, dry_run=dry_run)
                except K8sError as exc:
                    if exc.status == 409:  # created meanwhile (or by a retried POST): compare again
                        continue
                    raise
                return ApplyResult("created", None, created)
            if not desired_differs(body, live, compare):
                return ApplyResult("unchanged", live, live)
            try:
                updated = self.replace(merge_desired(body, live), dry_run=dry_run)
            except K8sError as exc:
                if exc.status == 409:
                    continue
                raise
            return ApplyResult("updated", live, updated)
        raise K8sError("%s %s: still conflicting after %d attempts (someone else keeps changing it)"
                       % (rtype.kind, name, self.conflict_retries + 1), status=409)

    def update(self, kind: KindRef, name: str, mutate: Mutator, namespace: Optional[str] = None,
               dry_run: Optional[bool] = None) -> Tuple[bool, Optional[Obj], Optional[Obj]]:
        """Read-modify-write with optimistic locking.

        ``mutate(copy_of_live)`` returns the new object, or None when nothing has to change.
        Returns (changed, before, after); raises K8sError(404) when the object does not exist.
        On 409 the object is re-read and ``mutate`` is called again (bounded)."""
        rtype = resource_type_of(kind)
        for _attempt in range(self.conflict_retries + 1):
            live = self.get(rtype, name, namespace)
            if live is None:
                raise K8sError("%s %s not found" % (rtype.kind, name if not namespace else namespace + "/" + name),
                               status=404)
            wanted = mutate(copy.deepcopy(live))
            if wanted is None:
                return False, live, live
            wanted.setdefault("kind", rtype.kind)
            wanted.setdefault("apiVersion", rtype.api_version)
            try:
                return True, live, self.replace(wanted, dry_run=dry_run)
            except K8sError as exc:
                if exc.status != 409:
                    raise
        raise K8sError("%s %s: still conflicting after %d attempts" % (rtype.kind, name, self.conflict_retries + 1),
                       status=409)

    def _set_metadata_map(self, kind: KindRef, name: str, section: str, values: Dict[str, Optional[str]],
                          namespace: Optional[str] = None, dry_run: Optional[bool] = None) -> Tuple[bool, Dict[str, Any]]:
        def mutate(obj):
            current = (obj.get("metadata") or {}).get(section) or {}
            wanted = dict(current)
            for key, value in values.items():
                if value is None:
                    wanted.pop(key, None)
                else:
                    wanted[key] = str(value)
            if wanted == current:
                return None
            obj.setdefault("metadata", {})[section] = wanted
            return obj
        changed, _before, after = self.update(kind, name, mutate, namespace=namespace, dry_run=dry_run)
        return changed, after or {}

    def set_node_labels(self, node: str, labels: Dict[str, Optional[str]], dry_run: Optional[bool] = None) -> Tuple[bool, Dict[str, Any]]:
        """Set (value) or remove (None) node labels. Returns (changed, node)."""
        return self._set_metadata_map("Node", node, "labels", labels, dry_run=dry_run)

    def set_node_annotations(self, node: str, annotations: Dict[str, Optional[str]], dry_run: Optional[bool] = None) -> Tuple[bool, Dict[str, Any]]:
        return self._set_metadata_map("Node", node, "annotations", annotations, dry_run=dry_run)

    def set_annotations(self, kind: KindRef, name: str, annotations: Dict[str, Optional[str]],
                        namespace: Optional[str] = None, dry_run: Optional[bool] = None) -> Tuple[bool, Dict[str, Any]]:
        """Set (value) or remove (None) annotations of any object, the others kept. Returns (changed, object)."""
        return self._set_metadata_map(kind, name, "annotations", annotations, namespace=namespace, dry_run=dry_run)

    def set_labels(self, kind: KindRef, name: str, labels: Dict[str, Optional[str]],
                   namespace: Optional[str] = None, dry_run: Optional[bool] = None) -> Tuple[bool, Dict[str, Any]]:
        return self._set_metadata_map(kind, name, "labels", labels, namespace=namespace, dry_run=dry_run)

    def set_unschedulable(self, node: str, unschedulable: bool, dry_run: Optional[bool] = None) -> Tuple[bool, Dict[str, Any]]:
        """Cordon (True) or uncordon (False). Returns (changed, node)."""
        def mutate(obj):
            if bool((obj.get("spec") or {}).get("unschedulable")) == unschedulable:
                return None
            spec = obj.setdefault("spec", {})
            if unschedulable:
                spec["unschedulable"] = True
            else:
                spec.pop("unschedulable", None)
            return obj
        changed, _before, after = self.update("Node", node, mutate, dry_run=dry_run)
        return changed, after or {}

    def ensure_namespace(self, name: str, labels: Optional[Dict[str, str]] = None, dry_run: Optional[bool] = None) -> ApplyResult:
        body: Dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        if labels:
            body["metadata"]["labels"] = dict(labels)
        return self.apply(body, dry_run=dry_run)

    def pods_on_node(self, node: str) -> List[Dict[str, Any]]:
        return self.list("Pod", field_selector="spec.nodeName=%s" % node)

    def evict(self, name: str, namespace: str, dry_run: Optional[bool] = None, grace_period_seconds: Optional[int] = None) -> None:
        """POST a policy/v1 Eviction. A PodDisruptionBudget refusal surfaces as K8sError(status=429)
        immediately (the caller decides how long to keep trying); 404 means already gone (ok)."""
        body: Dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        dry = self._dry(dry_run)
        options: Dict[str, Any] = {}
        if dry:
            options["dryRun"] = ["All"]
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if options:
            body["deleteOptions"] = options
        query = [("dryRun", "All")] if dry else []
        try:
            self.request("POST", BUILTIN_TYPES["Pod"].path(name, namespace, "eviction"), body=body,
                         query=query, retry_429=False)
        except K8sError as exc:
            if exc.status != 404:
                raise

    def pod_log(self, name: str, namespace: str, container: Optional[str] = None, tail_lines: Optional[int] = None) -> str:
        """Text of pods/<name>/log (retried like every request; K8sError on failure)."""
        query: List[Tuple[str, Any]] = []
        if container:
            query.append(("container", container))
        if tail_lines is not None:
            query.append(("tailLines", tail_lines))
        return self.request("GET", BUILTIN_TYPES["Pod"].path(name, namespace, "log"), query=query, raw=True)

    def events_for(self, kind: str, name: str, namespace: Optional[str] = None) -> List[Dict[str, Any]]:
        """Events about one object, oldest first (core/v1 events)."""
        selector = "involvedObject.kind=%s,involvedObject.name=%s" % (kind, name)
        events = self.list("Event", namespace=namespace, field_selector=selector)

        def when(event: Dict[str, Any]) -> str:
            return str(event.get("lastTimestamp") or event.get("eventTime")
                       or (event.get("metadata") or {}).get("creationTimestamp") or "")
        return sorted(events, key=when)

    # -- waiting -------------------------------------------------------------------------------

    def now(self) -> float:
        """Monotonic seconds (the clock wait_for uses; injectable for tests)."""
        return self._clock()

    def wait_for(self, what: str, probe: Callable[[], Tuple[bool, Any]], timeout: float, interval: float = 2.0,
                 progress: Optional[Callable[[str, float, Any], None]] = None) -> Any:
        """Poll ``probe() -> (done, detail)`` until done; returns the final detail.

        ``interval`` is the longest pause between two polls; the first pauses are shorter
        (``poll_delay``), so that a wait that ends soon is not held for a whole interval.
        ``progress(what, elapsed_seconds, detail)`` is called after every poll that is not done.
        The probe may raise (e.g. K8sError for a terminal failure) to stop waiting. Raises
        K8sTimeout (with the last detail) when ``timeout`` seconds pass."""
        start = self._clock()
        polls = 0
        while True:
            done, detail = probe()
            polls += 1
            elapsed = self._clock() - start
            if done:
                return detail
            if progress is not None:
                progress(what, elapsed, detail)
            if elapsed >= timeout:
                raise K8sTimeout(what, elapsed, detail)
            self._sleep(max(0.0, min(poll_delay(polls, interval), timeout - elapsed)))
