"""How the virtual cluster's store prepares a write, with the table's lock held: a body to create
normalised, named (generateName), given server-set metadata and defaults in an existing, not
terminating namespace; an incoming object merged onto the stored one by the subresource rules;
the result pruned and validated against the schema and admission, generation bumped on spec
changes, and committed (a no-op commits nothing). Used by ``Store`` (store.py, whose docstring is
the contract).
"""

from __future__ import annotations

import random
import string
import uuid
from typing import Callable, Optional

from gpulab.cluster import admission
from gpulab.cluster import crds as _crds
from gpulab.cluster import schema as _schema
from gpulab.cluster.deletion import awaits_kubelet
from gpulab.cluster.errors import (ApiError, already_exists, error_details, invalid, qualified,
                                   resource_not_found)
from gpulab.cluster.objects import Obj, ResourceType, clone, now_rfc3339
from gpulab.cluster.objecttable import ObjectTable

_PROTECTED_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "deletionTimestamp",
                   "deletionGracePeriodSeconds", "selfLink")


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "kind", "apiVersion")}


def _generate_name(meta: Obj) -> str:
    suffix = "".join(random.choice(string.ascii_lowercase + string.digits) for _index in range(5))
    return meta["generateName"] + suffix


def _take_metadata(rt: ResourceType, meta: Obj, old_meta: Obj) -> None:
    """What a write cannot change in metadata comes from the stored object."""
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


class Writes:
    """The create and update paths of the store (see the module docstring)."""

    def __init__(self, table: ObjectTable, clock: Callable[[], float],
                 crd_established: Callable[[Obj], Obj]):
        self._table = table
        self._clock = clock
        self._crd_established = crd_established  # a CRD written: serve its types

    def _check_namespace(self, rt: ResourceType, obj: Obj) -> None:
        if not rt.namespaced:
            obj["metadata"].pop("namespace", None)
            return
        namespace = obj["metadata"].setdefault("namespace", "default")
        ns = self._table.find(self._table.resource("v1/namespaces"), None, namespace)
        if ns is None:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % namespace,
                           {"name": namespace, "kind": "namespaces"})
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(403, "Forbidden", '%s "%s" is forbidden: unable to create new content '
                           'in namespace %s because it is being terminated'
                           % (qualified(rt), obj["metadata"].get("name", ""), namespace),
                           error_details(rt, obj["metadata"].get("name", "")))

    @staticmethod
    def _generation_bump(rt: ResourceType, old: Obj, new: Obj) -> None:
        if not rt.has_generation:
            new["metadata"].pop("generation", None)
            return
        generation = old["metadata"].get("generation", 1)
        if _spec_part(old) != _spec_part(new):
            generation += 1
        new["metadata"]["generation"] = generation

    def new_object(self, rt: ResourceType, body: Obj, controller: bool) -> Obj:
        """A body to create, normalised, named, with server-set metadata and defaults."""
        obj = admission.normalise(rt, body)
        if rt.status_subresource and rt.key != "v1/nodes" and not controller:
            obj.pop("status", None)  # like the API server: status is not set on create
        meta = obj["metadata"]
        if meta.get("resourceVersion"):
            raise ApiError(500, "InternalError", "resourceVersion should not be set on "
                           "objects to be created")
        if not meta.get("name"):
            if not meta.get("generateName"):
                raise invalid(rt, "", [("metadata.name", "Required value: name or "
                                                         "generateName is required")])
            meta["name"] = _generate_name(meta)
        self._check_namespace(rt, obj)
        if self._table.find(rt, meta.get("namespace"), meta["name"]) is not None:
            raise already_exists(rt, meta["name"])
        for fld in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(fld, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339(self._clock())
        if rt.has_generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        admission.apply_defaults(rt, obj)
        return obj

    def prepare_update(self, rt: ResourceType, current: Obj, obj: Obj,
                       subresource: Optional[str], trusted: bool) -> Obj:
        """Merge an incoming full object onto `current` following the subresource rules."""
        new = admission.normalise(rt, obj)
        _take_metadata(rt, new["metadata"], current["metadata"])
        if subresource == "status":
            result = clone(current)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
            return result
        if subresource not in (None, ""):
            raise resource_not_found()
        if rt.status_subresource and not trusted:
            if "status" in current:
                new["status"] = clone(current["status"])
            else:
                new.pop("status", None)
        if rt.key == "v1/namespaces":
            new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = \
                current["metadata"]["name"]
        if rt.key == "v1/pods" and not trusted:
            # defaults the client may have dropped on a GET-modify-PUT come back
            admission.default_pod_spec(new.setdefault("spec", {}))
        return new

    def write_update(self, rt: ResourceType, current: Obj, new: Obj, dry_run: bool,
                     trusted: bool) -> Obj:
        if rt.schema:
            new, schema_problems = _schema.prune_and_validate(rt.schema, new)
            if schema_problems:
                raise invalid(rt, new["metadata"]["name"], schema_problems)
        self._generation_bump(rt, current, new)
        if not trusted or rt.key != "v1/pods":
            problems = admission.validate(rt, new, None if trusted else current)
            if problems:
                raise invalid(rt, new["metadata"]["name"], problems)
        # no-op writes do not move the resourceVersion (like etcd GuaranteedUpdate)
        if new == current:
            return clone(current)
        if dry_run:
            return clone(new)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers") \
                and not awaits_kubelet(rt, new):
            return self._table.commit(rt, None, current, "DELETED")
        result = self._table.commit(rt, new, current, "MODIFIED")
        if rt.key == _crds.CRD_KEY:
            result = self._crd_established(result)
        return result
