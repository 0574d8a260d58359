"""The state of the virtual cluster's store: resource types, objects, the cluster-wide
resourceVersion, the watch history and the subscribers.

``ObjectTable`` holds the live objects (no copies) and is only used by the store's own modules
(store.py, storewrites.py, storecontrollers.py, deletion.py) with ``lock`` held; everything else
goes through ``Store``, which hands out deep copies. ``commit`` is the one place that writes: a
fresh resourceVersion, the watch event to the history and the subscribers, then the
``after_commit`` hook (the store's built-in controllers).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple

from gpulab.cluster import selectors as _sel
from gpulab.cluster.errors import ApiError, bad_request, not_found, resource_not_found
from gpulab.cluster.objects import Obj, ResourceType, WatchEvent, clone

LOG = logging.getLogger("gpulab.cluster.store")

Key = Tuple[str, str]  # (namespace or "", name)


def parse_label_selector(text: Optional[str]) -> _sel.Selector:
    """A labelSelector query parameter; 400 BadRequest when it does not parse."""
    try:
        return _sel.parse_label_selector(text)
    except _sel.SelectorError as exc:
        raise bad_request("unable to parse requirement: %s" % exc) from None


def parse_field_selector(rt: ResourceType, text: Optional[str]) -> _sel.FieldSelector:
    """A fieldSelector query parameter for `rt`; 400 BadRequest for unsupported fields."""
    try:
        return _sel.parse_field_selector(text, rt.supported_field_selectors())
    except _sel.SelectorError as exc:
        raise bad_request(str(exc)) from None


class ObjectTable:
    """Types, objects, resourceVersion and watch history (see the module docstring)."""

    def __init__(self, after_commit: Callable[[ResourceType, Obj, bool], None], history: int):
        self.lock = threading.RLock()
        self.rv = 1
        self.types: Dict[str, ResourceType] = {}
        self._data: Dict[str, Dict[Key, Obj]] = {}
        self._history: Deque[WatchEvent] = deque(maxlen=history)  # kept for resourceVersion resume
        self._subscribers: List[Callable[[WatchEvent], None]] = []
        self._after_commit = after_commit

    # ----------------------------------------------------------- type registry

    def register(self, rt: ResourceType) -> None:
        with self.lock:
            self.types[rt.key] = rt
            self._data.setdefault(rt.key, {})

    def unregister(self, key: str) -> None:
        with self.lock:
            self.types.pop(key, None)
            self._data.pop(key, None)

    def resource(self, key: str) -> ResourceType:
        rt = self.types.get(key)
        if rt is None:
            raise resource_not_found(key)
        return rt

    # ----------------------------------------------------------------- objects

    @staticmethod
    def key_of(rt: ResourceType, namespace: Optional[str], name: str) -> Key:
        return ((namespace or "") if rt.namespaced else "", name)

    def find(self, rt: ResourceType, namespace: Optional[str], name: str) -> Optional[Obj]:
        return self._data[rt.key].get(self.key_of(rt, namespace, name))

    def lookup(self, rt: ResourceType, namespace: Optional[str], name: str) -> Obj:
        obj = self.find(rt, namespace, name)
        if obj is None:
            raise not_found(rt, name)
        return obj

    def scan(self, key: str, namespace: Optional[str] = None) -> List[Obj]:
        """The live objects of a type, sorted by (namespace, name); `namespace` narrows."""
        return [obj for (ns, _name), obj in sorted(self._data.get(key, {}).items())
                if namespace is None or ns == namespace]

    def buckets(self, ordered: bool = False) -> Iterator[Tuple[ResourceType, List[Obj]]]:
        """Every type with its objects, each list taken when its turn comes (so one may commit
        while looping); `ordered`: by (namespace, name), else in insertion order."""
        for key in list(self._data):
            bucket = self._data.get(key)
            if bucket is None or key not in self.types:
                continue
            objs = [obj for _key, obj in sorted(bucket.items())] if ordered else list(bucket.values())
            yield self.types[key], objs

    def select(self, rt: ResourceType, namespace: Optional[str], label_selector: Any,
               field_selector: Any) -> List[Obj]:
        labels = label_selector if isinstance(label_selector, tuple) else \
            parse_label_selector(label_selector)
        fields = field_selector if isinstance(field_selector, tuple) else \
            parse_field_selector(rt, field_selector)
        result = []
        for (ns, _name), obj in sorted(self._data[rt.key].items()):
            if namespace and rt.namespaced and ns != namespace:
                continue
            if not _sel.matches(labels, obj["metadata"].get("labels")):
                continue
            if not _sel.field_matches(fields, obj):
                continue
            result.append(obj)
        return result

    # ------------------------------------------------------------------ commit

    def _notify(self, event: WatchEvent) -> None:
        self._history.append(event)
        for callback in list(self._subscribers):
            try:
                callback(event)
            except Exception:  # a broken subscriber must not break writes
                LOG.exception("store subscriber failed on %s %s", event.type, event.resource_key)

    def commit(self, rt: ResourceType, new: Optional[Obj], old: Optional[Obj],
               event_type: str) -> Obj:
        """Store `new` (or remove `old` when new is None) with a fresh resourceVersion."""
        self.rv += 1
        if new is None:
            assert old is not None
            gone = clone(old)
            gone["metadata"]["resourceVersion"] = str(self.rv)
            meta = old["metadata"]
            self._data[rt.key].pop(self.key_of(rt, meta.get("namespace"), meta["name"]), None)
            self._notify(WatchEvent("DELETED", rt.key, gone, old, self.rv))
            self._after_commit(rt, gone, True)
            return clone(gone)
        new["metadata"]["resourceVersion"] = str(self.rv)
        meta = new["metadata"]
        self._data[rt.key][self.key_of(rt, meta.get("namespace"), meta["name"])] = new
        self._notify(WatchEvent(event_type, rt.key, clone(new), old, self.rv))
        self._after_commit(rt, new, False)
        return clone(new)

    # ------------------------------------------------------------------- watch

    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        with self.lock:
            self._subscribers.append(callback)

        def unsubscribe() -> None:
            with self.lock:
                if callback in self._subscribers:
                    self._subscribers.remove(callback)
        return unsubscribe

    def watch(self, rt: ResourceType, namespace: Optional[str], resource_version: Optional[str],
              callback: Callable[[WatchEvent], None]) -> Tuple[List[WatchEvent], Callable[[], None], int]:
        """See Store.watch."""
        with self.lock:
            def wanted(event: WatchEvent) -> bool:
                if event.resource_key != rt.key:
                    return False
                return not (namespace and rt.namespaced and
                            event.object["metadata"].get("namespace") != namespace)

            if not resource_version or resource_version == "0":
                replay = [WatchEvent("ADDED", rt.key, clone(obj), None,
                                     int(obj["metadata"]["resourceVersion"]))
                          for obj in self.select(rt, namespace, (), ())]
            else:
                replay = [e for e in self._history_since(resource_version) if wanted(e)]

            def filtered(event: WatchEvent) -> None:
                if wanted(event):
                    callback(event)
            return replay, self.subscribe(filtered), self.rv

    def _history_since(self, resource_version: str) -> List[WatchEvent]:
        try:
            since = int(resource_version)
        except ValueError:
            raise bad_request("invalid resource version %r" % resource_version) from None
        oldest = self._history[0].resource_version if self._history else self.rv + 1
        if since < oldest - 1 and since < self.rv:
            raise ApiError(410, "Expired", "too old resource version: %d (%d)"
                           % (since, oldest - 1))
        return [e for e in self._history if e.resource_version > since]


__all__ = ["ObjectTable", "parse_field_selector", "parse_label_selector"]
