"""Watch streams of the virtual cluster (``?watch=true``): newline-delimited JSON events.

The store replays what the watch must see first (``resourceVersion``, or the current objects),
then events follow as they are committed. Selectors are applied to both sides of a change, so an
object that stops matching is sent as ``DELETED`` and one that starts to as ``ADDED``. With
``sendInitialEvents=true`` (client-go's WatchListClient) the initial state ends with a BOOKMARK
annotated ``k8s.io/initial-events-end``. A too old resourceVersion is an ``ERROR`` event (410).
"""

from __future__ import annotations

import json
import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Tuple

from gpulab.cluster import selectors as _sel
from gpulab.cluster import tables
from gpulab.cluster.errors import ApiError
from gpulab.cluster.objects import Obj, ResourceType, WatchEvent


def _line(body: Obj, compact: bool = False) -> bytes:
    return json.dumps(body, separators=(",", ":") if compact else None).encode() + b"\n"


@dataclass
class WatchRequest:
    rt: ResourceType
    namespace: Optional[str]
    labels: _sel.Selector
    fields: _sel.FieldSelector
    seconds: float
    initial: bool  # sendInitialEvents=true
    resource_version: Optional[str]
    table_include: Optional[str] = None  # includeObject of a Table watch; None: objects


class _Stream:
    def __init__(self, request: WatchRequest, stopping: threading.Event):
        self.request = request
        self.stopping = stopping
        self.events: "queue.Queue[WatchEvent]" = queue.Queue()

    def _matches(self, obj: Optional[Obj]) -> bool:
        return obj is not None and _sel.matches(self.request.labels, obj["metadata"].get("labels")) \
            and _sel.field_matches(self.request.fields, obj)

    def translate(self, event: WatchEvent) -> Optional[Tuple[str, Obj]]:
        new_ok = self._matches(event.object)
        old_ok = self._matches(event.old_object)
        if event.type == "ADDED":
            return ("ADDED", event.object) if new_ok else None
        if event.type == "DELETED":
            return ("DELETED", event.object) if old_ok else None
        if new_ok and old_ok:
            return "MODIFIED", event.object
        if new_ok:
            return "ADDED", event.object
        if old_ok:
            return "DELETED", event.object
        return None

    def encode(self, kind: str, obj: Obj) -> bytes:
        if self.request.table_include is not None:
            obj = tables.table(self.request.rt, obj, True, self.request.table_include)
        return _line({"type": kind, "object": obj}, compact=True)

    def _bookmark(self, snapshot_rv: int) -> bytes:
        rt = self.request.rt
        bookmark = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {
            "resourceVersion": str(snapshot_rv),
            "annotations": {"k8s.io/initial-events-end": "true"}}}
        return _line({"type": "BOOKMARK", "object": bookmark})

    def lines(self, replay: List[WatchEvent], unsubscribe: Callable[[], None],
              snapshot_rv: int) -> Iterator[bytes]:
        deadline = time.monotonic() + self.request.seconds
        try:
            for event in replay:
                out = self.translate(event)
                if out:
                    yield self.encode(*out)
            if self.request.initial:
                yield self._bookmark(snapshot_rv)
            while not self.stopping.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                try:
                    event = self.events.get(timeout=min(remaining, 0.5))
                except queue.Empty:
                    continue
                out = self.translate(event)
                if out:
                    yield self.encode(*out)
        finally:
            unsubscribe()


def stream(store: Any, request: WatchRequest, stopping: threading.Event) -> Iterator[bytes]:
    """The event lines of one watch, until its deadline or until `stopping` is set."""
    watcher = _Stream(request, stopping)
    since = None if request.initial else request.resource_version
    try:
        replay, unsubscribe, snapshot_rv = store.watch(request.rt.key, request.namespace, since,
                                                       watcher.events.put)
    except ApiError as exc:
        if exc.code != 410:
            raise
        return iter([_line({"type": "ERROR", "object": exc.status()})])
    return watcher.lines(replay, unsubscribe, snapshot_rv)


__all__ = ["WatchRequest", "stream"]
