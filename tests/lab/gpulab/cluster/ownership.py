"""Field ownership for server-side apply (a simplified model of managedFields).

Every write records which field manager set which fields of an object; an apply that would
change a field another manager set is a conflict (409), unless forced — the behaviour that makes
``helm upgrade`` (helm 4 applies server-side without forcing) fail after another tool changed a
field the chart renders. Simplifications, documented in tests/lab/CLUSTER.md:

- a field is a path of map keys down to a scalar, a list or an empty map; lists are owned whole
  (the API server tracks keyed list items one by one);
- only ``metadata.labels``/``metadata.annotations`` entries are tracked in metadata; ``status``
  is not tracked (applies to the main resource never touch it);
- ownership is kept by the store, not returned as ``metadata.managedFields``.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

Path = Tuple[str, ...]
_MISSING = object()


def leaf_paths(obj: Any) -> Set[Path]:
    """The tracked fields an object (or an apply configuration) sets."""
    paths: Set[Path] = set()
    if not isinstance(obj, dict):
        return paths
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "status"):
            continue
        if key == "metadata":
            for section in ("labels", "annotations"):
                for name in (value or {}).get(section) or {}:
                    paths.add(("metadata", section, name))
            continue
        _collect(value, (key,), paths)
    return paths


def _collect(value: Any, prefix: Path, paths: Set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _collect(item, prefix + (key,), paths)
    else:
        paths.add(prefix)


def value_at(obj: Any, path: Path) -> Any:
    node = obj
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def remove_at(obj: Dict[str, Any], path: Path) -> None:
    """Remove a field and the maps it leaves empty above it."""
    parents: List[Tuple[Dict[str, Any], str]] = []
    node: Any = obj
    for key in path[:-1]:
        if not isinstance(node, dict) or key not in node:
            return
        parents.append((node, key))
        node = node[key]
    if isinstance(node, dict):
        node.pop(path[-1], None)
    for parent, key in reversed(parents):
        if parent[key] == {} and key not in ("metadata",):
            del parent[key]
        else:
            break


def changed_paths(old: Optional[Dict[str, Any]], new: Dict[str, Any]) -> Tuple[Set[Path], Set[Path]]:
    """(set or changed fields, removed fields) between two versions of an object."""
    old_paths = leaf_paths(old) if old else set()
    new_paths = leaf_paths(new)
    changed = {p for p in new_paths if old is None or value_at(old, p) != value_at(new, p)}
    removed = {p for p in old_paths - new_paths if value_at(new, p) is _MISSING}
    return changed, removed


def _related(a: Path, b: Path) -> bool:
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


class Ownership:
    """manager -> {"operation": "Apply"|"Update", "fields": set of paths} for one object."""

    def __init__(self) -> None:
        self.managers: Dict[Tuple[str, str], Set[Path]] = {}

    def copy(self) -> "Ownership":
        other = Ownership()
        other.managers = {key: set(fields) for key, fields in self.managers.items()}
        return other

    def owned_by(self, manager: str, operation: str) -> Set[Path]:
        return set(self.managers.get((manager, operation), set()))

    def owners_of(self, path: Path, exclude: Iterable[Tuple[str, str]] = ()) -> List[str]:
        skip = set(exclude)
        return sorted({m for (m, op), fields in self.managers.items() if (m, op) not in skip
                       and any(_related(path, f) for f in fields)})

    def record_update(self, manager: str, changed: Set[Path], removed: Set[Path]) -> None:
        for key in list(self.managers):
            fields = self.managers[key]
            fields -= removed
            if key != (manager, "Update"):
                fields -= {f for f in fields if any(_related(f, c) for c in changed)}
            if not fields and key != (manager, "Update"):
                del self.managers[key]
        if changed:
            self.managers.setdefault((manager, "Update"), set()).update(changed)

    def conflicts(self, manager: str, applied: Dict[str, Any], live: Dict[str, Any]) -> List[Tuple[str, Path]]:
        """(other manager, path) pairs the apply would change although another manager owns them."""
        found = []
        mine = {(manager, "Apply")}
        for path in sorted(leaf_paths(applied)):
            if value_at(live, path) == value_at(applied, path):
                continue
            for (other, op), fields in self.managers.items():
                if (other, op) in mine:
                    continue
                for owned in fields:
                    if not _related(path, owned):
                        continue
                    shorter = path if len(path) <= len(owned) else owned
                    if value_at(live, shorter) != value_at(applied, shorter) or \
                            value_at(live, shorter) is _MISSING:
                        found.append((other, path))
                        break
        return sorted(set(found))

    def record_apply(self, manager: str, applied_paths: Set[Path], live: Dict[str, Any],
                     applied: Dict[str, Any], force: bool) -> None:
        for key in list(self.managers):
            if key == (manager, "Apply"):
                continue
            fields = self.managers[key]
            taken = {f for f in fields for p in applied_paths if _related(f, p) and
                     (force or value_at(live, f) != value_at(applied, f))}
            fields -= taken
            if not fields:
                del self.managers[key]
        self.managers[(manager, "Apply")] = set(applied_paths)


def conflict_message(conflicts: List[Tuple[str, Path]], api_version: str) -> Tuple[str, List[Dict[str, str]]]:
    """The API server's wording for apply conflicts, and the Status causes."""
    def field(path: Path) -> str:
        return "".join("." + p for p in path)
    causes = [{"reason": "FieldManagerConflict", "message": "conflict with \"%s\" using %s" % (m, api_version),
               "field": field(p)} for m, p in conflicts]
    managers = sorted({m for m, _path in conflicts})
    if len(conflicts) == 1:
        text = "Apply failed with 1 conflict: conflict with \"%s\" using %s: %s" % (
            conflicts[0][0], api_version, field(conflicts[0][1]))
    else:
        lines = []
        for manager in managers:
            lines.append("conflicts with \"%s\" using %s:" % (manager, api_version))
            lines.extend("- %s" % field(p) for m, p in conflicts if m == manager)
        text = "Apply failed with %d conflicts: %s" % (len(conflicts), "\n".join(lines))
    return text, causes


def released_by_apply(owners: Ownership, manager: str, applied: Dict[str, Any],
                      live: Dict[str, Any]) -> Dict[str, Any]:
    """A copy of `live` without the fields `manager` applied before and applies no more, unless
    another manager owns them too (what an apply removes)."""
    base = copy.deepcopy(live)
    for path in owners.owned_by(manager, "Apply") - leaf_paths(applied):
        if not owners.owners_of(path, exclude=[(manager, "Apply")]):
            remove_at(base, path)
    return base


class FieldManagers:
    """The ownership of every object in the store, by uid."""

    def __init__(self) -> None:
        self._by_uid: Dict[str, Ownership] = {}

    def of(self, uid: str) -> Ownership:
        return self._by_uid.get(uid) or Ownership()

    def forget(self, uid: str) -> None:
        self._by_uid.pop(uid, None)

    def record_update(self, result: Dict[str, Any], old: Optional[Dict[str, Any]],
                      manager: Optional[str]) -> None:
        """A create/update/patch by `manager` ("unknown" when None) that produced `result`."""
        uid = result["metadata"].get("uid")
        if not uid or result["metadata"].get("resourceVersion") == (old or {}).get(
                "metadata", {}).get("resourceVersion"):
            return
        owners = self._by_uid.setdefault(uid, Ownership())
        changed, removed = changed_paths(old, result)
        owners.record_update(manager or "unknown", changed, removed)

    def record_apply(self, uid: str, manager: str, applied: Dict[str, Any],
                     live: Dict[str, Any], force: bool, before: Optional[Ownership] = None) -> None:
        """An apply by `manager`; `before`: the ownership the apply started from (None: a
        fresh object, which the apply owns entirely)."""
        owners = before.copy() if before is not None else Ownership()
        owners.record_apply(manager, leaf_paths(applied), live, applied, force)
        self._by_uid[uid] = owners


__all__ = ["FieldManagers", "Ownership", "changed_paths", "conflict_message", "leaf_paths",
           "released_by_apply", "remove_at", "value_at"]
