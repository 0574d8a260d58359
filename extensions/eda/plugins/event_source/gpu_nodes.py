"""gpu_nodes: an ansible-rulebook event source that watches the Kubernetes Nodes of a GPU fleet.

Written for gpufleet.sharing (issue 37). It follows the event source interface of ansible-rulebook
(``async def main(queue, args)``, one dict per event put on the queue; ansible/ansible-rulebook,
``tests/sources/template.py``) and keeps ``meta.hosts`` as the sources of ansible.eda do
(ansible/event-driven-ansible, ``extensions/eda/plugins/event_source/alertmanager.py``): ansible-rulebook
turns it into the ``--limit`` of ``run_playbook`` (``ansible_rulebook/rule_set_runner.py``).

The Nodes are read with the ``kubernetes`` client: a list, then a watch from the list's
resourceVersion; after an error or an expired resourceVersion (410) a new list, compared with what was
seen before, so a change made while the watch was down is still reported once.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from typing import Any, Dict, List, Optional

DOCUMENTATION = r"""
---
short_description: Watch the Kubernetes Nodes of a GPU fleet.
description:
  - Emits one event per change that needs the fleet's automation, each with C(meta.hosts) set to the node.
  - C(gpufleet.kind=node_joined) a node whose C(nvidia.com/gpu.present) label became C(true) (a new GPU node).
  - C(gpufleet.kind=mig_failed) a node whose C(nvidia.com/mig.config.state) label became C(failed)
    (the GPU Operator's MIG manager failed to apply the node's MIG config).
  - C(gpufleet.kind=labels_changed) a GPU node whose C(nvidia.com/mig.config) or
    C(nvidia.com/device-plugin.config) label changed while no gpufleet.sharing rollout was marked on it (drift).
  - The nodes present when the source starts are its baseline; of those, a node already in the C(failed)
    MIG state is reported unless I(report_existing) is false.
options:
  kubeconfig:
    description: Path of a kubeconfig. Empty (the default) uses the in-cluster ServiceAccount, then ~/.kube/config.
    type: str
    default: ""
  context:
    description: Context of the kubeconfig.
    type: str
    default: ""
  label_selector:
    description: Watch only the nodes that match this label selector.
    type: str
    default: ""
  report_existing:
    description: Report the nodes that are already in the C(failed) MIG state when the source starts.
    type: bool
    default: true
  watch_timeout:
    description: Seconds one watch request lasts before it is renewed.
    type: int
    default: 300
"""

EXAMPLES = r"""
- gpufleet.sharing.gpu_nodes:
    kubeconfig: /runner/kubeconfig
"""

GPU_PRESENT = "nvidia.com/gpu.present"
MIG_STATE = "nvidia.com/mig.config.state"
WATCHED_LABELS = ("nvidia.com/mig.config", "nvidia.com/device-plugin.config")
ROLLOUT_ANNOTATION = "gpufleet.sharing/rollout"
NODE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LOG = logging.getLogger(__name__)


def node_view(node: Dict[str, Any]) -> Dict[str, Any]:
    """What the rules look at in a Node object (a dict as the API returns it)."""
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    return {
        "name": metadata.get("name") or "",
        "gpu": labels.get(GPU_PRESENT) == "true",
        "mig_state": labels.get(MIG_STATE),
        "labels": {key: labels.get(key) for key in WATCHED_LABELS},
        "rollout": (metadata.get("annotations") or {}).get(ROLLOUT_ANNOTATION),
    }


def _event(kind: str, view: Dict[str, Any], before: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    return {"gpufleet": {"kind": kind, "node": view["name"], "mig_state": view["mig_state"],
                         "labels": view["labels"], "before": (before or {}).get("labels")},
            "meta": {"hosts": [view["name"]]}}


def changes(before: Optional[Dict[str, Any]], after: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The events of one node's change from ``before`` to ``after`` (views; None: not there)."""
    if after is None or not NODE_NAME.match(after["name"]):
        return []
    found = []
    if after["gpu"] and not (before and before["gpu"]):
        found.append(_event("node_joined", after, before))
    if after["mig_state"] == "failed" and (before is None or before["mig_state"] != "failed"):
        found.append(_event("mig_failed", after, before))
    if (before and before["gpu"] and after["gpu"] and before["labels"] != after["labels"]
            and not before["rollout"] and not after["rollout"]):
        found.append(_event("labels_changed", after, before))
    return found


def baseline_events(views: Dict[str, Dict[str, Any]], report_existing: bool) -> List[Dict[str, Any]]:
    """The events of the nodes present at the start: only those already in the failed MIG state."""
    if not report_existing:
        return []
    return [_event("mig_failed", view, None) for _name, view in sorted(views.items()) if view["mig_state"] == "failed"]


def relist_events(known: Dict[str, Dict[str, Any]], views: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The events of what changed between two lists (a watch that was down)."""
    found = []
    for name in sorted(views):
        found.extend(changes(known.get(name), views[name]))
    return found


def _api(args: Dict[str, Any]) -> Any:
    from kubernetes import client, config  # pylint: disable=import-outside-toplevel

    kubeconfig, context = str(args.get("kubeconfig") or ""), str(args.get("context") or "") or None
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, context=context)
    else:
        try:
            config.load_incluster_config()
        except config.ConfigException:
            config.load_kube_config(context=context)
    return client.CoreV1Api()


class NodeWatcher:
    """List, then watch, the nodes; ``emit`` gets each event (called from the watching thread)."""

    def __init__(self, api: Any, args: Dict[str, Any], emit: Any) -> None:
        self.api, self.emit = api, emit
        self.selector = str(args.get("label_selector") or "")
        self.timeout = int(args.get("watch_timeout") or 300)
        self.report_existing = bool(args.get("report_existing", True))
        self.known: Optional[Dict[str, Dict[str, Any]]] = None
        self.stopped = False

    def _list(self) -> str:
        listed = self.api.list_node(label_selector=self.selector)
        views = {}
        for item in listed.items:
            view = node_view(self.api.api_client.sanitize_for_serialization(item))
            views[view["name"]] = view
        if self.known is None:
            LOG.info("gpu_nodes: watching %d node(s)", len(views))
            found = baseline_events(views, self.report_existing)
        else:
            found = relist_events(self.known, views)
        self.known = views
        for event in found:
            self.emit(event)
        return listed.metadata.resource_version

    def _watch(self, version: str) -> None:
        from kubernetes import watch  # pylint: disable=import-outside-toplevel

        stream = watch.Watch().stream(self.api.list_node, label_selector=self.selector, resource_version=version,
                                      timeout_seconds=self.timeout)
        for change in stream:
            if self.stopped:
                return
            view = node_view(self.api.api_client.sanitize_for_serialization(change["object"]))
            known = self.known if self.known is not None else {}
            if change["type"] == "DELETED":
                known.pop(view["name"], None)
                continue
            for event in changes(known.get(view["name"]), view):
                self.emit(event)
            known[view["name"]] = view

    def run(self) -> None:
        """List and watch until stopped; an error (a 410 included) is logged and followed by a new list."""
        while not self.stopped:
            try:
                self._watch(self._list())
            except Exception as exc:  # pylint: disable=broad-exception-caught
                if self.stopped:
                    return
                LOG.warning("gpu_nodes: watching the nodes failed, listing them again in 2 s: %s", exc)
                time.sleep(2)


async def main(queue: asyncio.Queue, args: Dict[str, Any]) -> None:
    """Put the fleet's node events on ``queue`` until cancelled."""
    loop = asyncio.get_running_loop()

    def emit(event: Dict[str, Any]) -> None:
        asyncio.run_coroutine_threadsafe(queue.put(event), loop).result()

    watcher = NodeWatcher(_api(args), args, emit)
    done = loop.create_future()

    def run() -> None:
        try:
            watcher.run()
        finally:
            loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

    # A daemon thread: a watch blocked in a read must not keep ansible-rulebook from exiting.
    threading.Thread(target=run, name="gpu_nodes", daemon=True).start()
    try:
        await done
    finally:
        watcher.stopped = True


if __name__ == "__main__":

    class PrintQueue(asyncio.Queue):
        """Prints the events instead (a manual check against a cluster)."""

        async def put(self, item: Any) -> None:
            print(item)

    asyncio.run(main(PrintQueue(), {}))
