# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_maintenance's state=restart_pods: delete a node's pods by selector, wait for Ready replacements."""

from __future__ import annotations

from typing import Dict, List

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._node_drain import pod_key, pod_ready


def restart_pods(mod: ClusterModule) -> None:
    """Delete the node's pods matching each selector and wait for Ready replacements."""
    k8s, params = mod.k8s, mod.params
    node, namespace = params["node"], params["namespace"]
    field = "spec.nodeName=%s" % node
    if k8s.get("Node", node) is None:
        mod.fail("node %s not found" % node)
    if k8s.get("Namespace", namespace) is None:
        mod.fail("namespace %s (option namespace) does not exist: no pods to restart there" % namespace)
    old: Dict[str, List[str]] = {}
    for selector in params["pod_selectors"]:
        pods = k8s.list("Pod", namespace=namespace, label_selector=selector, field_selector=field)
        old[selector] = [p["metadata"]["uid"] for p in pods]
        mod.result.setdefault("restarted", []).extend(pod_key(p) for p in pods)
    if not mod.result.get("restarted"):
        return
    mod.changes.mark()
    for selector in params["pod_selectors"]:
        for pod in k8s.list("Pod", namespace=namespace, label_selector=selector, field_selector=field):
            if pod["metadata"]["uid"] in old[selector]:
                k8s.delete("Pod", pod["metadata"]["name"], namespace=namespace)
    if mod.check_mode:
        return  # dry-run deletes: no replacement to wait for

    def probe():
        waiting = []
        for selector, uids in old.items():
            if not uids:
                continue
            pods = k8s.list("Pod", namespace=namespace, label_selector=selector, field_selector=field)
            if not any(pod_ready(p) and p["metadata"]["uid"] not in uids for p in pods):
                waiting.append(selector)
        return not waiting, waiting

    k8s.wait_for("replacement pods Ready on node %s" % node, probe, params["timeout"], params["poll_interval"],
                 progress=lambda what, elapsed, detail: mod.log(
                     "node_maintenance: waiting %.0fs for %s: %s" % (elapsed, what, ", ".join(detail))))
