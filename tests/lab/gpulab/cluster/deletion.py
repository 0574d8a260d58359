"""Deleting objects in the virtual cluster's store: preconditions, graceful pod deletion,
finalizers, namespace deletion (the namespace controller's work, done at once) and garbage
collection of dependents (``ownerReferences``; ``Orphan`` keeps them).

Pods bound to a node get ``deletionTimestamp`` + ``deletionGracePeriodSeconds`` and stay until
the kubelet controller deletes them with grace 0; ``reap`` removes those whose grace period is
over (the server calls it every second). Used by ``Store`` with the table's lock held.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, Callable, Dict, Optional

from gpulab.cluster.errors import ApiError, conflict
from gpulab.cluster.objects import Obj, ResourceType, now_rfc3339, parse_rfc3339
from gpulab.cluster.podlogs import PodLogs
from gpulab.cluster.objecttable import ObjectTable

LOG = logging.getLogger("gpulab.cluster.store")

PROTECTED_NAMESPACES = ("default", "kube-system", "kube-public")


def awaits_kubelet(rt: ResourceType, obj: Obj) -> bool:
    """A terminating pod on a node stays until the kubelet (or reap) removes it."""
    if rt.key != "v1/pods" or not (obj.get("spec") or {}).get("nodeName"):
        return False
    return obj["metadata"].get("deletionGracePeriodSeconds", 0) > 0


def _check_preconditions(rt: ResourceType, current: Obj,
                         preconditions: Optional[Dict[str, Any]]) -> None:
    meta, name = current["metadata"], current["metadata"]["name"]
    preconditions = preconditions or {}
    if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
        raise conflict(rt, name, "Precondition failed: UID in precondition: %s, UID in "
                       "object meta: %s" % (preconditions["uid"], meta["uid"]))
    if preconditions.get("resourceVersion") and \
            preconditions["resourceVersion"] != meta["resourceVersion"]:
        raise conflict(rt, name, "Precondition failed: ResourceVersion in precondition: "
                       "%s, ResourceVersion in object meta: %s"
                       % (preconditions["resourceVersion"], meta["resourceVersion"]))


def _pod_grace(pod: Obj, requested: Optional[int]) -> int:
    """The grace period a pod deletion gets (0: removed at once)."""
    meta = pod["metadata"]
    phase = (pod.get("status") or {}).get("phase")
    grace = requested if requested is not None else \
        pod["spec"].get("terminationGracePeriodSeconds", 30)
    if grace < 0:
        grace = 1
    if not pod["spec"].get("nodeName") or phase in ("Succeeded", "Failed"):
        grace = 0
    if meta.get("deletionTimestamp") and grace > meta.get("deletionGracePeriodSeconds", 0):
        grace = meta.get("deletionGracePeriodSeconds", 0)  # only ever shortened
    return grace


class Deletion:
    """The delete verb and what follows from it (see the module docstring)."""

    def __init__(self, table: ObjectTable, logs: PodLogs, clock: Callable[[], float],
                 on_removed: Callable[[ResourceType, Obj], None]):
        self._table = table
        self._logs = logs
        self._clock = clock
        self._on_removed = on_removed  # after an object is finally removed (CRDs)

    def delete(self, key: str, namespace: Optional[str], name: str,
               grace_period_seconds: Optional[int] = None,
               preconditions: Optional[Dict[str, Any]] = None,
               propagation_policy: Optional[str] = None, dry_run: bool = False) -> Obj:
        rt = self._table.resource(key)
        current = self._table.lookup(rt, namespace, name)
        meta = current["metadata"]
        _check_preconditions(rt, current, preconditions)
        if rt.key == "v1/namespaces":
            return self._delete_namespace(rt, current, dry_run)
        grace = _pod_grace(current, grace_period_seconds) if rt.key == "v1/pods" else 0
        if grace > 0 or meta.get("finalizers"):
            return self._mark_terminating(rt, current, grace, dry_run)
        if dry_run:
            return copy.deepcopy(current)
        result = self._table.commit(rt, None, current, "DELETED")
        if rt.key == "v1/pods":
            self._logs.forget(meta.get("namespace") or "", name)
        self._collect_dependents(meta["uid"], orphan=propagation_policy == "Orphan")
        self._on_removed(rt, current)
        return result

    def _mark_terminating(self, rt: ResourceType, current: Obj, grace: int, dry_run: bool) -> Obj:
        new = copy.deepcopy(current)
        nmeta = new["metadata"]
        if not nmeta.get("deletionTimestamp") or grace < nmeta.get("deletionGracePeriodSeconds", 0):
            nmeta["deletionTimestamp"] = now_rfc3339(self._clock() + grace)
            nmeta["deletionGracePeriodSeconds"] = grace
            if rt.has_generation:
                nmeta["generation"] = nmeta.get("generation", 1) + 1
        if new == current or dry_run:
            return new
        # dependents are collected when the object is finally removed
        return self._table.commit(rt, new, current, "MODIFIED")

    def _delete_namespace(self, rt: ResourceType, current: Obj, dry_run: bool) -> Obj:
        name = current["metadata"]["name"]
        if name in PROTECTED_NAMESPACES:
            raise ApiError(403, "Forbidden", 'namespaces "%s" is forbidden: this namespace may '
                           'not be deleted' % name, {"name": name, "kind": "namespaces"})
        new = copy.deepcopy(current)
        new["metadata"].setdefault("deletionTimestamp", now_rfc3339(self._clock()))
        new["metadata"].setdefault("deletionGracePeriodSeconds", 0)
        new.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return new
        if new != current:
            self._table.commit(rt, new, current, "MODIFIED")
        terminating = copy.deepcopy(self._table.lookup(rt, None, name))
        # The namespace controller's work, done at once: remove every object in it.
        for bucket_rt, objs in self._table.buckets(ordered=True):
            if not bucket_rt.namespaced:
                continue
            for obj in objs:
                if (obj["metadata"].get("namespace") or "") == name:
                    self._table.commit(bucket_rt, None, obj, "DELETED")
                    if bucket_rt.key == "v1/pods":
                        self._logs.forget(name, obj["metadata"]["name"])
        self._table.commit(rt, None, self._table.lookup(rt, None, name), "DELETED")
        return terminating

    def _collect_dependents(self, owner_uid: str, orphan: bool) -> None:
        for rt, objs in self._table.buckets():
            for obj in objs:
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
                    self._table.commit(rt, new, obj, "MODIFIED")
                else:
                    try:
                        self.delete(rt.key, obj["metadata"].get("namespace"), obj["metadata"]["name"])
                    except ApiError:
                        LOG.exception("garbage collection of %s failed", obj["metadata"]["name"])

    def reap(self) -> int:
        """Remove terminating pods whose grace period is over (fallback kubelet). Returns count."""
        removed = 0
        now = self._clock()
        for obj in self._table.scan("v1/pods"):
            meta = obj["metadata"]
            stamp = meta.get("deletionTimestamp")
            if stamp and not meta.get("finalizers") and parse_rfc3339(stamp) <= now:
                self.delete("v1/pods", meta["namespace"], meta["name"], grace_period_seconds=0)
                removed += 1
        return removed


__all__ = ["Deletion", "PROTECTED_NAMESPACES", "awaits_kubelet"]
