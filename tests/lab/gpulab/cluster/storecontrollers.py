"""The built-in controllers of the virtual cluster's store, run on every commit with the table's
lock held: the disruption controller (PodDisruptionBudget status follows the pods), the CRD
controller (a created CRD serves its types and turns Established; a deleted one takes its types and
their objects with it) and the field-manager bookkeeping of deleted objects. Used by ``Store``
(store.py, whose docstring is the contract).
"""

from __future__ import annotations

from typing import Callable

from gpulab.cluster import crds as _crds
from gpulab.cluster import disruption
from gpulab.cluster import ownership as _own
from gpulab.cluster.objects import Obj, ResourceType, clone, now_rfc3339
from gpulab.cluster.objecttable import ObjectTable


class BuiltinControllers:
    """What the store does by itself after a commit (see the module docstring)."""

    def __init__(self, table: ObjectTable, clock: Callable[[], float], owners: _own.FieldManagers):
        self._table = table
        self._clock = clock
        self._owners = owners
        self._in_pdb_refresh = False

    def after_commit(self, rt: ResourceType, obj: Obj, deleted: bool) -> None:
        if deleted:
            self._owners.forget(obj["metadata"].get("uid", ""))
        if rt.key in ("v1/pods", disruption.PDB_KEY) and not self._in_pdb_refresh:
            self._refresh_pdbs(obj["metadata"].get("namespace") or "")

    def _refresh_pdbs(self, namespace: str) -> None:
        """The disruption controller: keep PDB status in step with the pods."""
        rt = self._table.types.get(disruption.PDB_KEY)
        if rt is None:
            return
        self._in_pdb_refresh = True
        try:
            pods = self._table.scan("v1/pods", namespace)
            for pdb in self._table.scan(rt.key, namespace):
                status = disruption.pdb_status(pdb, pods, now_rfc3339(self._clock()))
                if status != pdb.get("status"):
                    new = clone(pdb)
                    new["status"] = status
                    self._table.commit(rt, new, pdb, "MODIFIED")
        finally:
            self._in_pdb_refresh = False

    def crd_established(self, crd: Obj) -> Obj:
        """Serve the CRD's types and mark it Established; returns the CRD as stored."""
        for rt in _crds.served_types(crd):
            self._table.register(rt)
        crd_rt = self._table.resource(_crds.CRD_KEY)
        current = self._table.lookup(crd_rt, None, crd["metadata"]["name"])
        status = _crds.established_status(current, now_rfc3339(self._clock()))
        if status is not None:
            new = clone(current)
            new["status"] = status
            self._table.commit(crd_rt, new, current, "MODIFIED")
        return clone(self._table.lookup(crd_rt, None, crd["metadata"]["name"]))

    def after_removal(self, rt: ResourceType, obj: Obj) -> None:
        """A deleted CRD takes its types and their objects with it."""
        if rt.key != _crds.CRD_KEY:
            return
        for key in _crds.type_keys(obj):
            served = self._table.types.get(key)
            if served is None:
                continue
            for item in self._table.scan(key):
                self._table.commit(served, None, item, "DELETED")
            self._table.unregister(key)
