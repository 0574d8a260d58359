# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an apply changes: whether a live object already holds what is desired (``desired_differs``,
``is_subset``), the object to send (``merge_desired``) and the answer (``ApplyResult``).

Pure: ``_k8s.K8sClient.apply`` reads and writes."""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple


class ApplyResult:
    """Outcome of K8sClient.apply: action is created, updated or unchanged."""

    __slots__ = ("action", "before", "after")

    def __init__(self, action: str, before: Optional[Dict[str, Any]], after: Optional[Dict[str, Any]]) -> None:
        self.action = action
        self.before = before
        self.after = after

    @property
    def changed(self) -> bool:
        return self.action != "unchanged"


def is_subset(wanted: Any, actual: Any) -> bool:
    """True when every key of ``wanted`` is in ``actual`` with an equal value. Dicts recurse;
    lists must have the same length and match element-wise (so server-side defaults inside list
    items, e.g. in a CRD's versions, do not count as a difference); scalars compare exactly."""
    if isinstance(wanted, dict):
        if not isinstance(actual, dict):
            return False
        return all(key in actual and is_subset(value, actual[key]) for key, value in wanted.items())
    if isinstance(wanted, list):
        if not isinstance(actual, list) or len(wanted) != len(actual):
            return False
        return all(is_subset(item, other) for item, other in zip(wanted, actual))
    return wanted == actual


def desired_differs(desired: Dict[str, Any], live: Dict[str, Any], compare: str = "exact") -> bool:
    """Would apply() change ``live`` to reach ``desired``?

    metadata.labels / metadata.annotations of ``desired`` must be present in live (extra live
    entries are kept). Every other top-level field of ``desired`` (spec, data, ...; not status) is
    compared exactly (``compare="exact"``) or as a subset (``compare="subset"``, for objects the
    server fills with defaults such as CRDs)."""
    if compare not in ("exact", "subset"):
        raise ValueError("compare must be 'exact' or 'subset', got %r" % (compare,))
    meta = desired.get("metadata") or {}
    live_meta = live.get("metadata") or {}
    for section in ("labels", "annotations"):
        if not is_subset(meta.get(section) or {}, live_meta.get(section) or {}):
            return True
    for key, value in desired.items():
        if key in ("apiVersion", "kind", "metadata", "status"):
            continue
        if compare == "exact":
            if live.get(key) != value:
                return True
        elif not is_subset(value, live.get(key)):
            return True
    return False


def merge_desired(desired: Dict[str, Any], live: Dict[str, Any]) -> Dict[str, Any]:
    """The object apply() PUTs: live metadata (resourceVersion kept) with desired labels and
    annotations merged in; other desired top-level fields replace the live ones wholesale."""
    merged = copy.deepcopy(live)
    merged.pop("status", None)
    meta = merged.setdefault("metadata", {})
    for section in ("labels", "annotations"):
        wanted = (desired.get("metadata") or {}).get(section)
        if wanted:
            current = dict(meta.get(section) or {})
            current.update(wanted)
            meta[section] = current
    for key, value in desired.items():
        if key in ("metadata", "status"):
            continue
        merged[key] = copy.deepcopy(value)
    return merged


def replacement(live: Dict[str, Any], spec: Dict[str, Any], labels: Dict[str, str],
                spec_keys: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """The object to PUT over ``live`` (its resourceVersion kept, no status): ``labels`` added and the
    spec replaced by ``spec``, or with ``spec_keys`` only those fields of the spec (the others the
    server or another writer set are kept)."""
    merged = copy.deepcopy(live)
    merged.pop("status", None)
    merged["metadata"].setdefault("labels", {}).update(labels)
    if spec_keys is None:
        merged["spec"] = copy.deepcopy(spec)
    else:
        for key in spec_keys:
            merged.setdefault("spec", {}).pop(key, None)
        merged["spec"].update(copy.deepcopy(spec))
    return merged


def object_key(obj: Mapping[str, Any]) -> Tuple[str, str]:
    """(namespace or "", name): how a list of one kind is keyed."""
    meta = obj["metadata"]
    return (meta.get("namespace") or ""), meta["name"]


def unlisted(bodies: Sequence[Dict[str, Any]], listed: Mapping[str, Mapping[Tuple[str, str], Any]]) -> List[Dict[str, Any]]:
    """The planned ``bodies`` missing from ``listed`` (kind -> ``object_key`` -> object, this run's list of the
    objects we own): only those can collide with an object that is not ours or need their namespace checked."""
    return [body for body in bodies if object_key(body) not in listed[body["kind"]]]
