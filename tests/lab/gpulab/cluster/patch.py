"""The three PATCH formats of the Kubernetes API (plus a simple server-side apply).

- JSON merge patch (RFC 7386, ``application/merge-patch+json``): maps merge, ``null`` deletes,
  lists are replaced whole.
- Strategic merge patch (``application/strategic-merge-patch+json``, built-in types only): like a
  merge patch, but the lists that Kubernetes declares with ``patchStrategy: merge`` are merged by
  their ``patchMergeKey`` (containers/volumes/env by ``name``, conditions by ``type`` ...), lists of
  scalars with that strategy (finalizers) are merged as sets, and the directives ``$patch: delete``
  (list element or map), ``$patch: replace`` (map or list), ``$deleteFromPrimitiveList/<field>``,
  ``$retainKeys`` and ``$setElementOrder/<field>`` are understood (the last two are accepted and
  only the key-deletion part of ``$retainKeys`` is applied).
- JSON patch (RFC 6902, ``application/json-patch+json``): add, remove, replace, move, copy, test.

All functions are pure: they return a new document and never mutate their arguments. A bad patch
raises :class:`PatchError`; the API turns it into 422 (or 400 for unparsable bodies).
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Tuple


class PatchError(ValueError):
    """The patch cannot be applied (message is shown to the client)."""

    def __init__(self, message: str, code: int = 422):
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------ merge patch

def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# ------------------------------------------------------- strategic merge patch

# Field name -> patchMergeKey, for the list fields of the built-in types we serve that carry
# `patchStrategy: merge` (from the Go struct tags of k8s.io/api). The key of a list is looked up by
# its field name alone; the names below do not collide between the types this lab serves.
MERGE_KEYS: Dict[str, Optional[str]] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "topologySpreadConstraints": "topologyKey",
    "finalizers": None,  # list of strings merged as a set
}

# Fields with `patchStrategy: retainKeys` where a plain "replace" of the map is not wanted: none
# needs special handling here beyond the generic $retainKeys directive.

_DIRECTIVE = "$patch"
_ORDER_PREFIX = "$setElementOrder/"
_DELETE_PRIMITIVE_PREFIX = "$deleteFromPrimitiveList/"
_RETAIN_KEYS = "$retainKeys"


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be a JSON object", code=400)
    return _smp_map(target if isinstance(target, dict) else {}, patch)


def _smp_map(target: Mapping[str, Any], patch: Mapping[str, Any]) -> Any:
    directive = patch.get(_DIRECTIVE)
    if directive == "delete":
        return None  # caller removes the key
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items()
                if k != _DIRECTIVE and not k.startswith("$")}
    if directive not in (None, "merge"):
        raise PatchError("Unknown patch type: %s in map: %r" % (directive, dict(patch)))
    result = copy.deepcopy(dict(target))
    retain = patch.get(_RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("$retainKeys must be a list")
        for key in list(result):
            if key not in retain:
                del result[key]
    for key, value in patch.items():
        if key in (_DIRECTIVE, _RETAIN_KEYS) or key.startswith(_ORDER_PREFIX):
            continue
        if key.startswith(_DELETE_PRIMITIVE_PREFIX):
            field = key[len(_DELETE_PRIMITIVE_PREFIX):]
            if isinstance(result.get(field), list):
                result[field] = [item for item in result[field] if item not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
            continue
        current = result.get(key)
        if isinstance(value, dict):
            merged = _smp_map(current if isinstance(current, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list) and key in MERGE_KEYS:
            result[key] = _smp_list(current if isinstance(current, list) else [], value,
                                    MERGE_KEYS[key], key)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _smp_list(target: List[Any], patch: List[Any], merge_key: Optional[str], field: str) -> List[Any]:
    # A `{"$patch": "replace"}` element replaces the whole list by the other elements.
    if any(isinstance(item, dict) and item.get(_DIRECTIVE) == "replace" for item in patch):
        return [copy.deepcopy(item) for item in patch
                if not (isinstance(item, dict) and _DIRECTIVE in item)]
    if merge_key is None:
        # Set of scalars: keep order, append new ones.
        result = list(target)
        for item in patch:
            if isinstance(item, dict):
                raise PatchError("unexpected object in list of primitives %s" % field)
            if item not in result:
                result.append(item)
        return result
    result = [copy.deepcopy(item) for item in target]
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError("%s: expected objects with merge key %r" % (field, merge_key))
        if merge_key not in item:
            raise PatchError("map: %r does not contain declared merge key: %s" % (item, merge_key))
        index = next((i for i, existing in enumerate(result)
                      if isinstance(existing, dict) and existing.get(merge_key) == item[merge_key]),
                     None)
        if item.get(_DIRECTIVE) == "delete":
            if index is not None:
                del result[index]
            continue
        if index is None:
            result.append({k: copy.deepcopy(v) for k, v in item.items() if not k.startswith("$")})
        else:
            merged = _smp_map(result[index], item)
            result[index] = merged
    return result


# ----------------------------------------------------------------- JSON patch

def _pointer(path: str) -> List[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError("invalid JSON pointer %r: must start with '/'" % path)
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _resolve_parent(doc: Any, parts: List[str], path: str) -> Tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict):
            if part not in node:
                raise PatchError("jsonpatch path %s: missing value" % path)
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(part, node, path, allow_end=False)]
        else:
            raise PatchError("jsonpatch path %s: cannot traverse a scalar" % path)
    return node, parts[-1]


def _index(part: str, node: List[Any], path: str, allow_end: bool) -> int:
    if part == "-" and allow_end:
        return len(node)
    if not part.isdigit() or (part != "0" and part.startswith("0")):
        raise PatchError("jsonpatch path %s: invalid array index %r" % (path, part))
    index = int(part)
    limit = len(node) if allow_end else len(node) - 1
    if index > limit:
        raise PatchError("jsonpatch path %s: index %d out of range" % (path, index))
    return index


def _get(doc: Any, path: str) -> Any:
    node = doc
    for part in _pointer(path):
        if isinstance(node, dict):
            if part not in node:
                raise PatchError("jsonpatch path %s: missing value" % path)
            node = node[part]
        elif isinstance(node, list):
            node = node[_index(part, node, path, allow_end=False)]
        else:
            raise PatchError("jsonpatch path %s: cannot traverse a scalar" % path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent, last = _resolve_parent(doc, parts, path)
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        parent.insert(_index(last, parent, path, allow_end=True), copy.deepcopy(value))
    else:
        raise PatchError("jsonpatch add %s: parent is not a container" % path)
    return doc


def _remove(doc: Any, path: str) -> Tuple[Any, Any]:
    parts = _pointer(path)
    if not parts:
        raise PatchError("jsonpatch remove: cannot remove the whole document")
    parent, last = _resolve_parent(doc, parts, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError("jsonpatch remove operation does not apply: doc is missing path: %s"
                             % path)
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, parent, path, allow_end=False))
    raise PatchError("jsonpatch remove %s: parent is not a container" % path)


def json_patch(target: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchError("json patch must be a JSON array of operations", code=400)
    doc = copy.deepcopy(target)
    for number, operation in enumerate(operations):
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise PatchError("json patch operation %d needs 'op' and 'path'" % number, code=400)
        op, path = operation["op"], operation["path"]
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError("json patch operation %d (%s) needs 'value'" % (number, op), code=400)
        if op == "add":
            doc = _add(doc, path, operation["value"])
        elif op == "remove":
            doc, _removed = _remove(doc, path)
        elif op == "replace":
            _get(doc, path)  # must exist
            if _pointer(path):
                doc, _removed = _remove(doc, path)
            doc = _add(doc, path, operation["value"])
        elif op in ("move", "copy"):
            if "from" not in operation:
                raise PatchError("json patch operation %d (%s) needs 'from'" % (number, op), code=400)
            value = copy.deepcopy(_get(doc, operation["from"]))
            if op == "move":
                doc, _removed = _remove(doc, operation["from"])
            doc = _add(doc, path, value)
        elif op == "test":
            if _get(doc, path) != operation["value"]:
                raise PatchError("testing value %s failed" % path)
        else:
            raise PatchError("Unexpected kind: %s" % op, code=400)
    return doc


# ------------------------------------------------------------ server-side apply

def apply_patch(target: Optional[Dict[str, Any]], applied: Dict[str, Any],
                previous: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A simplified server-side apply: fields that the same manager applied last time
    (`previous`) and no longer applies are removed, then the applied configuration is merged
    like a strategic merge patch (maps merged, keyed lists merged by key). Ownership shared with
    other managers and apply conflicts are not modelled (documented in tests/lab/CLUSTER.md)."""
    if not isinstance(applied, dict):
        raise PatchError("apply configuration must be an object", code=400)
    base = target or {}
    if previous:
        base = _prune(base, previous, applied)
    return _smp_map(base, applied)


def _prune(current: Any, previous: Any, applied: Any, field: str = "") -> Any:
    """Remove from `current` what `previous` set and `applied` no longer sets."""
    if isinstance(current, dict) and isinstance(previous, dict):
        applied = applied if isinstance(applied, dict) else {}
        result = dict(current)
        for key, old_value in previous.items():
            if key in ("apiVersion", "kind") or key not in result:
                continue
            if key not in applied:
                del result[key]
            else:
                result[key] = _prune(result[key], old_value, applied[key], key)
        return result
    merge_key = MERGE_KEYS.get(field)
    if isinstance(current, list) and isinstance(previous, list) and merge_key:
        applied_list = applied if isinstance(applied, list) else []
        wanted = {item.get(merge_key) for item in applied_list if isinstance(item, dict)}
        dropped = {item.get(merge_key) for item in previous if isinstance(item, dict)} - wanted
        kept = []
        for item in current:
            key = item.get(merge_key) if isinstance(item, dict) else None
            if key in dropped:
                continue
            old = next((p for p in previous if isinstance(p, dict) and p.get(merge_key) == key),
                       None)
            new = next((a for a in applied_list if isinstance(a, dict)
                        and a.get(merge_key) == key), None)
            kept.append(_prune(item, old, new) if old is not None and new is not None else item)
        return kept
    return current


PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
    "application/apply-patch+cbor": "apply-cbor",
}


def apply(patch_type: str, target: Dict[str, Any], patch: Any,
          previous_apply: Optional[Dict[str, Any]] = None, custom: bool = False) -> Any:
    kind = PATCH_TYPES.get(patch_type, patch_type)
    if kind == "apply" and custom:
        # A custom resource's lists are atomic unless its CRD says x-kubernetes-list-type
        # (https://kubernetes.io/docs/reference/using-api/server-side-apply/#merge-strategy): maps
        # merge, lists are replaced; the built-in types' patchMergeKeys do not apply to it.
        if not isinstance(patch, dict):
            raise PatchError("apply configuration must be an object", code=400)
        return merge_patch(target, patch)
    if kind == "json":
        return json_patch(target, patch)
    if kind == "merge":
        return merge_patch(target, patch)
    if kind == "strategic":
        return strategic_merge_patch(target, patch)
    if kind == "apply":
        return apply_patch(target, patch, previous_apply)
    raise PatchError("the body of the request was in an unknown format - accepted media types "
                     "include: application/json-patch+json, application/merge-patch+json, "
                     "application/apply-patch+yaml", code=415)
