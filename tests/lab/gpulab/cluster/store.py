"""In-memory object store of the lab's virtual Kubernetes cluster (a test instrument).

STORE CONTRACT (the controllers of gpulab.cluster.manager build on this; summarised in
tests/lab/ARCHITECTURE.md)

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

The store proper (types, objects, resourceVersion, watch) is in objecttable.py; what it delegates:
storewrites.py (preparing and committing creates and updates), storecontrollers.py (the built-in
controllers run after each commit), admission.py (normalising, defaults, validation), deletion.py
(graceful deletion, namespaces, garbage collection), disruption.py (PDB status, eviction), crds.py
(types served by CRDs), ownership.py (server-side apply field managers), podlogs.py (container
logs).

Semantics kept from the real API server: monotonic cluster-wide resourceVersion (string in
objects), a write that changes nothing does not move it; generation bumps on spec changes (not on
metadata/status); dry_run computes and validates everything and stores nothing; PDB status
(currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed) is maintained like the
disruption controller does; a pod is healthy when its Ready condition is True (or, if the pod has
no conditions at all, when it is Running).
"""

from __future__ import annotations

import base64
import json
import random
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpulab.cluster import admission
from gpulab.cluster import crds as _crds
from gpulab.cluster import disruption
from gpulab.cluster import ownership as _own
from gpulab.cluster import patch as _patch
from gpulab.cluster import schema as _schema
from gpulab.cluster.deletion import Deletion
from gpulab.cluster.errors import (ApiError, bad_request, conflict, error_details, invalid,
                                   unsupported_patch_type)
from gpulab.cluster.objects import (Obj, ResourceType, WatchEvent, builtin_resource_types, clone,
                                    now_rfc3339)
from gpulab.cluster.podlogs import PodLogs
from gpulab.cluster.objecttable import ObjectTable
from gpulab.cluster.storecontrollers import BuiltinControllers
from gpulab.cluster.storewrites import Writes

CONTROLLER_MANAGER = "gpulab-controllers"  # field manager of controller writes


class Store:
    """The cluster's objects. See the module docstring for the contract."""

    HISTORY = 10000  # watch events kept for resourceVersion resume

    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock
        self._table = ObjectTable(self._after_commit, self.HISTORY)
        self._lock = self._table.lock
        self._logs = PodLogs()
        self._owners = _own.FieldManagers()  # server-side apply: who set which fields
        self._controllers = BuiltinControllers(self._table, clock, self._owners)
        self._writes = Writes(self._table, clock, self._controllers.crd_established)
        self._deletion = Deletion(self._table, self._logs, clock, self._controllers.after_removal)
        for rt in builtin_resource_types():
            self.register_resource(rt)
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create("v1/namespaces", {"metadata": {"name": name}})

    # ----------------------------------------------------------- type registry

    def register_resource(self, rt: ResourceType) -> None:
        self._table.register(rt)

    def unregister_resource(self, key: str) -> None:
        self._table.unregister(key)

    def resource(self, key: str) -> ResourceType:
        return self._table.resource(key)

    def resources(self) -> List[ResourceType]:
        with self._lock:
            return list(self._table.types.values())

    def resource_version(self) -> int:
        return self._table.rv

    def _after_commit(self, rt: ResourceType, obj: Obj, deleted: bool) -> None:
        self._controllers.after_commit(rt, obj, deleted)  # storecontrollers.py

    # ---------------------------------------------------------------- reading

    def get(self, key: str, namespace: Optional[str], name: str) -> Obj:
        with self._lock:
            rt = self.resource(key)
            return clone(self._table.lookup(rt, namespace, name))

    def list(self, key: str, namespace: Optional[str] = None, label_selector: Any = None,
             field_selector: Any = None, limit: Optional[int] = None,
             continue_token: Optional[str] = None) -> Obj:
        with self._lock:
            rt = self.resource(key)
            items = self._table.select(rt, namespace, label_selector, field_selector)
            meta: Obj = {"resourceVersion": str(self._table.rv)}
            items = _page(items, limit, continue_token, meta)
            return {"apiVersion": rt.api_version, "kind": rt.list_kind, "metadata": meta,
                    "items": clone(items)}

    def items(self, key: str, namespace: Optional[str] = None, label_selector: Any = None,
              field_selector: Any = None) -> List[Obj]:
        with self._lock:
            rt = self.resource(key)
            return clone(self._table.select(rt, namespace, label_selector, field_selector))

    # ---------------------------------------------------------------- writing

    def create(self, key: str, obj: Obj, dry_run: bool = False, controller: bool = False,
               field_manager: Optional[str] = None) -> Obj:
        with self._lock:
            rt = self.resource(key)
            obj = self._writes.new_object(rt, obj, controller)
            obj, problems = _schema.prune_and_validate(rt.schema, obj) if rt.schema else (obj, [])
            problems = problems + admission.validate(rt, obj, None)
            if problems:
                raise invalid(rt, obj["metadata"]["name"], problems)
            if dry_run:
                return clone(obj)
            result = self._table.commit(rt, obj, None, "ADDED")
            self._owners.record_update(result, None,
                                       field_manager or (CONTROLLER_MANAGER if controller else None))
            if rt.key == _crds.CRD_KEY:
                result = self._controllers.crd_established(result)
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
            current = self._table.lookup(rt, meta.get("namespace") or "default", name) \
                if rt.namespaced else self._table.lookup(rt, None, name)
            wanted_rv = meta.get("resourceVersion")
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise conflict(rt, name)
            if meta.get("uid") and meta["uid"] != current["metadata"]["uid"]:
                raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in "
                               "object meta: %s" % (meta["uid"], current["metadata"]["uid"]))
            new = self._writes.prepare_update(rt, current, obj, subresource, trusted=False)
            result = self._writes.write_update(rt, current, new, dry_run, trusted=False)
            if not dry_run:
                self._owners.record_update(result, current, field_manager)
            return result

    def patch(self, key: str, namespace: Optional[str], name: str, patch: Any, patch_type: str,
              dry_run: bool = False, subresource: Optional[str] = None,
              field_manager: Optional[str] = None, force: bool = False) -> Obj:
        with self._lock:
            rt = self.resource(key)
            kind = _patch.PATCH_TYPES.get(patch_type, patch_type)
            if kind == "strategic" and rt.custom:
                raise unsupported_patch_type()
            if kind == "apply":
                if not isinstance(patch, dict):
                    raise bad_request("apply configuration must be an object")
                if not field_manager:
                    raise bad_request("PATCH requests with apply content type must set fieldManager")
            current = self._table.find(rt, namespace, name)
            if current is None:
                if kind != "apply" or subresource:
                    self._table.lookup(rt, namespace, name)  # raises NotFound
                return self._create_by_apply(rt, namespace, name, patch, field_manager or "",
                                             dry_run)
            owners = self._owners.of(current["metadata"]["uid"])
            base = current
            if kind == "apply":
                base = self._apply_base(rt, current, patch, field_manager or "", force)
            new = self._writes.prepare_update(rt, current,
                                              _patched(rt, kind, base, patch, current),
                                              subresource, trusted=False)
            result = self._writes.write_update(rt, current, new, dry_run, trusted=False)
            if dry_run:
                return result
            if kind != "apply":
                self._owners.record_update(result, current, field_manager)
            elif result["metadata"].get("uid") == current["metadata"]["uid"]:
                self._owners.record_apply(current["metadata"]["uid"], field_manager or "", patch,
                                          current, force, owners)
            return result

    def _create_by_apply(self, rt: ResourceType, namespace: Optional[str], name: str,
                         applied: Obj, manager: str, dry_run: bool) -> Obj:
        body = clone(applied)
        body.setdefault("metadata", {})["name"] = name
        if rt.namespaced:
            body["metadata"]["namespace"] = namespace
        result = self.create(rt.key, body, dry_run=dry_run)
        if not dry_run:
            self._owners.record_apply(result["metadata"]["uid"], manager, applied, {}, True)
        return result

    def _apply_base(self, rt: ResourceType, current: Obj, applied: Obj, manager: str,
                    force: bool) -> Obj:
        """What an apply patches: 409 on another manager's fields (unless forced), and the
        fields this manager applied before and applies no more removed."""
        owners = self._owners.of(current["metadata"]["uid"])
        if not force:
            conflicts = owners.conflicts(manager, applied, current)
            if conflicts:
                message, causes = _own.conflict_message(conflicts, rt.api_version)
                raise ApiError(409, "Conflict", message,
                               dict(error_details(rt, current["metadata"]["name"]), causes=causes))
        return _own.released_by_apply(owners, manager, applied, current)

    def controller_update(self, key: str, namespace: Optional[str], name: str,
                          mutate: Callable[[Obj], Optional[Obj]],
                          subresource: Optional[str] = None) -> Obj:
        with self._lock:
            rt = self.resource(key)
            current = self._table.lookup(rt, namespace, name)
            work = clone(current)
            returned = mutate(work)
            if returned is not None:
                work = returned
            new = self._writes.prepare_update(rt, current, work, subresource, trusted=True)
            result = self._writes.write_update(rt, current, new, dry_run=False, trusted=True)
            self._owners.record_update(result, current, CONTROLLER_MANAGER)
            return result

    def bind(self, namespace: str, name: str, node_name: str, dry_run: bool = False) -> Obj:
        with self._lock:
            rt = self.resource("v1/pods")
            current = self._table.lookup(rt, namespace, name)
            if current["spec"].get("nodeName"):
                raise conflict(rt, name, "pod %s is already assigned to node \"%s\""
                               % (name, current["spec"]["nodeName"]))
            if current["metadata"].get("deletionTimestamp"):
                raise conflict(rt, name, "pod %s is being deleted, cannot be assigned to a host"
                               % name)
            self._table.lookup(self.resource("v1/nodes"), None, node_name)
            new = clone(current)
            new["spec"]["nodeName"] = node_name
            conditions = new.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append({"type": "PodScheduled", "status": "True",
                               "lastTransitionTime": now_rfc3339(self._clock()),
                               "lastProbeTime": None})
            if dry_run:
                return new
            return self._table.commit(rt, new, current, "MODIFIED")

    # ---------------------------------------------------------- delete, evict

    def delete(self, key: str, namespace: Optional[str], name: str,
               grace_period_seconds: Optional[int] = None,
               preconditions: Optional[Dict[str, Any]] = None,
               propagation_policy: Optional[str] = None, dry_run: bool = False) -> Obj:
        with self._lock:
            return self._deletion.delete(key, namespace, name, grace_period_seconds,
                                         preconditions, propagation_policy, dry_run)

    def reap(self) -> int:
        """Remove terminating pods whose grace period is over (fallback kubelet). Returns count."""
        with self._lock:
            return self._deletion.reap()

    def evict(self, namespace: str, name: str, dry_run: bool = False,
              grace_period_seconds: Optional[int] = None) -> Obj:
        with self._lock:
            rt = self.resource("v1/pods")
            pod = self._table.lookup(rt, namespace, name)
            if disruption.evicts_without_budget(pod):
                if not pod["metadata"].get("deletionTimestamp"):
                    self.delete(rt.key, namespace, name, grace_period_seconds, dry_run=dry_run)
                return clone(disruption.EVICTED)
            refusal = disruption.eviction_refusal(
                pod, self._table.scan(disruption.PDB_KEY, namespace),
                self._table.scan("v1/pods", namespace))
            if refusal is not None:
                raise refusal
            self.delete(rt.key, namespace, name, grace_period_seconds, dry_run=dry_run)
            return clone(disruption.EVICTED)

    # ------------------------------------------------------------------ watch

    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        return self._table.subscribe(callback)

    def watch(self, key: str, namespace: Optional[str], resource_version: Optional[str],
              callback: Callable[[WatchEvent], None]) -> Tuple[List[WatchEvent], Callable[[], None], int]:
        """Atomically: the events a watch from `resource_version` must replay first, a
        subscription for what follows (filtered to key/namespace) and the store's
        resourceVersion at that instant. No rv or "0": synthetic ADDED events for the current
        objects. Too old: ApiError 410 Expired."""
        return self._table.watch(self.resource(key), namespace, resource_version, callback)

    # ------------------------------------------------------- logs and events

    def set_pod_log(self, namespace: str, name: str, text: str, container: Optional[str] = None,
                    append: bool = False) -> None:
        with self._lock:
            pod = self._table.lookup(self.resource("v1/pods"), namespace, name)
            self._logs.write(pod, text, container, append)

    def get_pod_log(self, namespace: str, name: str, container: Optional[str] = None) -> str:
        with self._lock:
            return self._logs.read(self._table.lookup(self.resource("v1/pods"), namespace, name),
                                   container)

    def record_event(self, involved: Obj, reason: str, message: str, type: str = "Normal",
                     component: str = "gpulab") -> Obj:
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = now_rfc3339(self._clock())
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


def _page(items: List[Obj], limit: Optional[int], continue_token: Optional[str],
          meta: Obj) -> List[Obj]:
    """One page of a list (`continue` is the last (namespace, name) served, base64 JSON)."""
    if continue_token:
        try:
            start = json.loads(base64.urlsafe_b64decode(continue_token.encode()).decode())
            start_key = (start["ns"], start["name"])
        except (ValueError, KeyError, TypeError):
            raise ApiError(400, "BadRequest", "continue key is not valid") from None
        items = [o for o in items
                 if ((o["metadata"].get("namespace") or ""), o["metadata"]["name"]) > start_key]
    if limit and limit > 0 and len(items) > limit:
        last = items[limit - 1]["metadata"]
        meta["continue"] = base64.urlsafe_b64encode(json.dumps(
            {"ns": last.get("namespace") or "", "name": last["name"]}).encode()).decode()
        meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    return items


def _patched(rt: ResourceType, kind: str, base: Obj, patch: Any, current: Obj) -> Obj:
    """`base` with the patch applied; a resourceVersion in the result must be current's."""
    try:
        patched = _patch.apply(kind, base, patch, custom=rt.custom)
    except _patch.PatchError as exc:
        raise ApiError(exc.code, "BadRequest" if exc.code == 400 else
                       ("UnsupportedMediaType" if exc.code == 415 else "Invalid"),
                       str(exc)) from None
    if not isinstance(patched, dict):
        raise bad_request("the patch did not produce an object")
    wanted_rv = (patched.get("metadata") or {}).get("resourceVersion")
    if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
        raise conflict(rt, current["metadata"]["name"])
    return patched


__all__ = ["CONTROLLER_MANAGER", "Store"]
