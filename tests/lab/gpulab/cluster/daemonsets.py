"""The DaemonSet controller of the virtual cluster (every DaemonSet in the store).

One pod per matching node (node selector, required node affinity, taints; DaemonSet pods
tolerate the node conditions below, so also cordoned nodes), named ``<daemonset>-<5 chars>``;
a rolling update with ``maxUnavailable`` (default 1) when the pod template changes, so
``kubectl rollout restart`` (template annotation ``kubectl.kubernetes.io/restartedAt``)
restarts the pods one node at a time; ``OnDelete`` waits for the user to delete pods. The status
carries the fields kstatus / ``helm --wait`` read. Status is computed from the pods read at the
start of the pass (the next pass catches up).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import random
import string
from typing import Any, Dict, Iterable, List, Mapping, Optional

from gpulab.cluster import scheduler as schedmod
from gpulab.cluster.objects import Obj, pod_ready

LOG = logging.getLogger("gpulab.cluster.daemonsets")

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"

DS_TOLERATIONS = [
    {"key": key, "operator": "Exists", "effect": effect}
    for key, effect in (
        ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule"),
        ("node.kubernetes.io/network-unavailable", "NoSchedule"),
    )
]


def template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _suffix() -> str:
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _position in range(5))


def _owner_uid(obj: Mapping[str, Any]) -> Optional[str]:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


def _rolling_budget(ds: Obj, wanted_nodes: int) -> int:
    """How many pods may be unavailable during a rollout (0: OnDelete)."""
    strategy = ds["spec"].get("updateStrategy") or {}
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        return 0
    raw = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
    if isinstance(raw, str) and raw.endswith("%"):
        return max(1, int(wanted_nodes * int(raw[:-1]) / 100))
    return max(1, int(raw))


class DaemonSetController:
    """See the module docstring."""

    def __init__(self, store: Any):
        self.store = store

    def run_once(self) -> None:
        nodes = self.store.items("v1/nodes")
        pods_by_owner: Dict[str, List[Obj]] = {}
        for pod in self.store.items("v1/pods"):
            owner = _owner_uid(pod)
            if owner:
                pods_by_owner.setdefault(owner, []).append(pod)
        for ds in self.store.items("apps/v1/daemonsets"):
            if ds["metadata"].get("deletionTimestamp"):
                continue
            try:
                self._sync_daemonset(ds, nodes, pods_by_owner.get(ds["metadata"]["uid"], []))
            except Exception:  # pylint: disable=broad-except
                LOG.exception("DaemonSet %s/%s", ds["metadata"]["namespace"], ds["metadata"]["name"])

    def _sync_daemonset(self, ds: Obj, nodes: List[Obj], pods: List[Obj]) -> None:
        template = ds["spec"].get("template") or {}
        digest = template_hash(template)
        probe = {"spec": dict(template.get("spec") or {})}
        probe["spec"]["tolerations"] = list(probe["spec"].get("tolerations") or []) + DS_TOLERATIONS
        wanted_nodes = {
            node["metadata"]["name"] for node in nodes
            if schedmod.matches_node_selection(probe, node) and schedmod.untolerated_taint(probe, node) is None
        }
        by_node: Dict[str, List[Obj]] = {}
        for pod in pods:
            by_node.setdefault(pod["spec"].get("nodeName", ""), []).append(pod)
        budget = _rolling_budget(ds, len(wanted_nodes))
        unavailable = sum(1 for node in wanted_nodes if not any(pod_ready(p) for p in by_node.get(node, [])))
        for node_name, found in by_node.items():
            live = [p for p in found if not p["metadata"].get("deletionTimestamp")]
            if node_name not in wanted_nodes:
                for pod in live:
                    self._delete_pod(pod)
                continue
            for extra in live[1:]:
                self._delete_pod(extra)
            if not live:
                continue
            pod = live[0]
            if (pod["metadata"].get("labels") or {}).get("controller-revision-hash") == digest:
                continue
            if budget == 0:
                continue  # OnDelete: the user deletes pods to roll them
            if not pod_ready(pod):
                self._delete_pod(pod)
            elif unavailable < budget:
                self._delete_pod(pod)
                unavailable += 1
        for node_name in sorted(wanted_nodes):
            if not by_node.get(node_name):
                self._create_ds_pod(ds, template, digest, node_name)
        self._update_ds_status(ds, wanted_nodes, digest, pods)

    def _create_ds_pod(self, ds: Obj, template: Obj, digest: str, node: str) -> None:
        meta = template.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        labels.update({"controller-revision-hash": digest, "pod-template-generation": str(ds["metadata"].get("generation", 1))})
        spec = copy.deepcopy(template.get("spec") or {})
        spec["nodeName"] = node
        spec["tolerations"] = list(spec.get("tolerations") or []) + [t for t in DS_TOLERATIONS if t not in (spec.get("tolerations") or [])]
        body = {
            "metadata": {"name": f"{ds['metadata']['name']}-{_suffix()}", "namespace": ds["metadata"]["namespace"],
                         "labels": labels, "annotations": dict(meta.get("annotations") or {}),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds["metadata"]["name"],
                                              "uid": ds["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": spec,
        }
        if not body["metadata"]["annotations"]:
            del body["metadata"]["annotations"]
        try:
            self.store.create("v1/pods", body)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot create a pod for DaemonSet %s on %s", ds["metadata"]["name"], node)

    def _delete_pod(self, pod: Obj) -> None:
        try:
            self.store.delete("v1/pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        except Exception:  # pylint: disable=broad-except
            pass

    def _update_ds_status(self, ds: Obj, wanted_nodes: Iterable[str], digest: str, pods: List[Obj]) -> None:
        """Status from the pods read at the start of the pass (the next pass catches up)."""
        namespace, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
        wanted = set(wanted_nodes)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        scheduled = {p["spec"].get("nodeName") for p in live}
        ready = [p for p in live if pod_ready(p) and p["spec"].get("nodeName") in wanted]
        updated = [p for p in live if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == digest and p["spec"].get("nodeName") in wanted]
        status = {
            "currentNumberScheduled": len(scheduled & wanted),
            "desiredNumberScheduled": len(wanted),
            "numberMisscheduled": len(scheduled - wanted),
            "numberReady": len(ready),
            "numberAvailable": len(ready),
            "numberUnavailable": len(wanted) - len(ready),
            "updatedNumberScheduled": len(updated),
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        if status["numberUnavailable"] == 0:
            del status["numberUnavailable"]

        def mutate(obj: Obj) -> None:
            obj["status"] = status
        self.store.controller_update("apps/v1/daemonsets", namespace, name, mutate, subresource="status")


__all__ = ["DS_TOLERATIONS", "DaemonSetController", "RESTARTED_AT", "template_hash"]
