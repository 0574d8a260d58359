# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cordon / drain / uncordon of one node, shared by node_maintenance and mig_node_config.

``classify_pods`` is pure (unit-tested); ``Drainer`` does the API calls through a K8sClient.

Drain follows kubectl's rules: mirror (static) pods and DaemonSet pods are skipped, pods with
emptyDir volumes are only evicted with ``delete_emptydir_data``, pods without a controller only
with ``force``. Eviction uses the policy/v1 Eviction API so PodDisruptionBudgets are honoured; a
429 (budget exhausted) is retried until the timeout.

On a client in dry-run mode (a module in check mode) every eviction is sent once as a dry run and
nothing is waited for: a budget's refusal now says nothing about later, and no pod goes away.

Cordon ownership (one rule for every module): a cordon the collection sets carries the node
annotation ``gpufleet.sharing/cordoned-by: <run id>``, written in the same update as the cordon;
an uncordon lifts only such a cordon (or the older marker ``gpufleet.sharing/cordoned-for``) and
removes the marker in the same update. A node that was cordoned before is processed but left
cordoned (``force`` lifts it anyway).
"""

from __future__ import annotations

import time
from typing import AbstractSet, Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
CORDON_OWNER = "gpufleet.sharing/cordoned-by"
LEGACY_CORDON_MARKER = "gpufleet.sharing/cordoned-for"  # mig_node_config before 0.2.0


def default_run_id(prefix: str) -> str:
    """An id for one run when the caller gave none: ``<prefix>-<UTC time>``."""
    return "%s-%s" % (prefix, time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))


def cordon_owner(node: Dict[str, Any]) -> Optional[str]:
    """The run id of the collection's cordon on ``node`` (None: not cordoned by the collection)."""
    if not (node.get("spec") or {}).get("unschedulable"):
        return None
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return annotations.get(CORDON_OWNER) or annotations.get(LEGACY_CORDON_MARKER)


def cordon_node(node: Dict[str, Any], run_id: str) -> Optional[Dict[str, Any]]:
    """Mutation for K8sClient.update: cordon and mark as ours; None when already cordoned
    (by us or by someone else: that cordon keeps its owner)."""
    if (node.get("spec") or {}).get("unschedulable"):
        return None
    node.setdefault("spec", {})["unschedulable"] = True
    annotations = node.setdefault("metadata", {}).setdefault("annotations", {})
    annotations.pop(LEGACY_CORDON_MARKER, None)
    annotations[CORDON_OWNER] = run_id
    return node


def uncordon_node(node: Dict[str, Any], force: bool = False) -> Optional[Dict[str, Any]]:
    """Mutation for K8sClient.update: lift our cordon (any cordon with ``force``) and drop the
    marker; a stale marker on a schedulable node is dropped; None when nothing changes."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    markers = [key for key in (CORDON_OWNER, LEGACY_CORDON_MARKER) if key in annotations]
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    if unschedulable and not (force or cordon_owner(node)):
        return None
    if not unschedulable and not markers:
        return None
    node.setdefault("spec", {}).pop("unschedulable", None)
    for key in markers:
        del node["metadata"]["annotations"][key]
    return node


def cordon(k8s: K8sClient, name: str, run_id: str) -> bool:
    """Cordon ``name`` as ours unless it is cordoned already; True when this call cordoned it."""
    changed, _before, _after = k8s.update("Node", name, lambda obj: cordon_node(obj, run_id))
    return bool(changed)


def uncordon(k8s: K8sClient, name: str, force: bool = False) -> Tuple[bool, bool]:
    """(lifted, left_cordoned): lift the collection's cordon; a foreign cordon stays (unless force)."""
    changed, _before, after = k8s.update("Node", name, lambda obj: uncordon_node(obj, force))
    return bool(changed), bool(((after or {}).get("spec") or {}).get("unschedulable"))


def pod_key(pod: Dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def blocking_message(prefix: str, blocking: List[Dict[str, str]]) -> str:
    """"<prefix>: ns/a reason; ns/b reason" for the pods that stop a drain."""
    return "%s: %s" % (prefix, "; ".join("%s %s" % (b["pod"], b["reason"]) for b in blocking))


def planned_annotations(current: Dict[str, str], wanted: Optional[Dict[str, Any]]) -> Dict[str, str]:
    """``current`` with ``wanted`` applied: a value is set (as a string), None removes the key."""
    result = dict(current)
    for key, value in (wanted or {}).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = str(value)
    return result


def pod_ready(pod: Dict[str, Any]) -> bool:
    """Running, Ready and not being deleted."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _controller(pod: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller"):
            return owner
    return None


NOT_CHOSEN = "holds no device of the GPUs that change"


def classify_pods(pods: List[Dict[str, Any]], delete_emptydir_data: bool = False, force: bool = False,
                  only_uids: Optional[AbstractSet[str]] = None,
                  ) -> Tuple[List[Dict[str, Any]], List[Dict[str, str]], List[Dict[str, str]]]:
    """Split the pods of a node into (to_evict, skipped, blocking).

    skipped and blocking entries are {"pod": "ns/name", "reason": ...}; blocking pods stop the
    drain before anything is changed (the caller lists them in the error). With ``only_uids`` (a
    per-GPU drain, issue 38) the other pods are skipped before any rule is applied to them."""
    to_evict: List[Dict[str, Any]] = []
    skipped: List[Dict[str, str]] = []
    blocking: List[Dict[str, str]] = []
    for pod in sorted(pods, key=pod_key):
        meta = pod.get("metadata") or {}
        key = pod_key(pod)
        if only_uids is not None and str(meta.get("uid", "")) not in only_uids:
            skipped.append({"pod": key, "reason": NOT_CHOSEN})
            continue
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            skipped.append({"pod": key, "reason": "mirror pod (static pod managed by the kubelet)"})
            continue
        if meta.get("deletionTimestamp"):
            skipped.append({"pod": key, "reason": "already terminating"})
            continue
        controller = _controller(pod)
        if controller and controller.get("kind") == "DaemonSet":
            skipped.append({"pod": key, "reason": "DaemonSet pod"})
            continue
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if not finished:
            volumes = [v.get("name") for v in (pod.get("spec") or {}).get("volumes") or [] if "emptyDir" in v]
            if volumes and not delete_emptydir_data:
                blocking.append({"pod": key, "reason": "uses emptyDir volume(s) %s whose data would be lost "
                                                       "(set delete_emptydir_data: true)" % ", ".join(volumes)})
                continue
            if controller is None and not force:
                blocking.append({"pod": key, "reason": "not managed by a controller, it would not be recreated "
                                                       "(set force: true)"})
                continue
        to_evict.append(pod)
    return to_evict, skipped, blocking


class DrainError(Exception):
    """The drain could not finish; ``details`` lists the pods concerned."""

    def __init__(self, message: str, details: Optional[List[Dict[str, str]]] = None) -> None:
        super().__init__(message)
        self.details = details or []


class Drainer:
    """Evict the pods of one node through the Eviction API and wait until they are gone."""

    def __init__(self, k8s: K8sClient, node: str, delete_emptydir_data: bool = False, force: bool = False,
                 timeout: float = 300.0, interval: float = 2.0, grace_period_seconds: Optional[int] = None,
                 progress: Optional[Callable[[str, float, Any], None]] = None,
                 only_uids: Optional[AbstractSet[str]] = None) -> None:
        self.k8s = k8s
        self.only_uids = only_uids
        self.node = node
        self.delete_emptydir_data = delete_emptydir_data
        self.force = force
        self.timeout = timeout
        self.interval = interval
        self.grace_period_seconds = grace_period_seconds
        self.progress = progress
        self.evicted: List[Dict[str, str]] = []  # also filled when a DrainError is raised

    def plan(self) -> Tuple[List[Dict[str, Any]], List[Dict[str, str]], List[Dict[str, str]]]:
        return classify_pods(self.k8s.pods_on_node(self.node), self.delete_emptydir_data, self.force, self.only_uids)

    def check_blocking(self, blocking: List[Dict[str, str]]) -> None:
        if blocking:
            raise DrainError(blocking_message("cannot drain node %s" % self.node, blocking), blocking)

    def evict_all(self, pods: List[Dict[str, Any]]) -> List[Dict[str, str]]:
        """Evict ``pods``; PDB refusals (429) are retried until the timeout. Then wait until the
        evicted pods are gone (deleted, or replaced by a pod with another uid). Returns
        [{"pod", "uid"}] of the evicted pods (in dry-run mode: of those that would be evicted)."""
        if self.k8s.dry_run:
            return self._dry_run_evictions(pods)
        started = self.k8s.now()
        pending = dict((pod_key(p), p) for p in pods)
        evicted = self.evicted
        refusals: Dict[str, str] = {}

        def evict_round() -> Tuple[bool, Any]:
            for key in sorted(pending):
                pod = pending[key]
                meta = pod["metadata"]
                try:
                    self.k8s.evict(meta["name"], meta["namespace"], grace_period_seconds=self.grace_period_seconds)
                except K8sError as exc:
                    if exc.status == 429:  # PodDisruptionBudget: try again later
                        refusals[key] = exc.message
                        continue
                    raise DrainError("eviction of %s from %s failed: %s" % (key, self.node, exc),
                                     [{"pod": key, "reason": str(exc)}])
                refusals.pop(key, None)
                evicted.append({"pod": key, "uid": str(meta.get("uid", ""))})
                del pending[key]
            return not pending, dict(("pod " + k, v) for k, v in refusals.items())

        try:
            self.k8s.wait_for("evictions from node %s" % self.node, evict_round, self.timeout, self.interval,
                              self.progress)
        except DrainError:
            raise
        except K8sError as exc:
            not_evicted = "; ".join("%s (%s)" % (key, refusals.get(key, "not tried")) for key in sorted(pending))
            raise DrainError("drain of %s timed out: %d pod(s) not evicted: %s" % (self.node, len(pending), not_evicted),
                             [{"pod": key, "reason": refusals.get(key, "timeout")} for key in sorted(pending)]) from exc
        self.wait_gone(evicted, max(self.interval, self.timeout - (self.k8s.now() - started)))
        return evicted

    def _dry_run_evictions(self, pods: List[Dict[str, Any]]) -> List[Dict[str, str]]:
        """Each eviction once, as a dry run; a refusal by a budget (429) is no error here."""
        planned = []
        for pod in sorted(pods, key=pod_key):
            key, meta = pod_key(pod), pod["metadata"]
            try:
                self.k8s.evict(meta["name"], meta["namespace"], grace_period_seconds=self.grace_period_seconds)
            except K8sError as exc:
                if exc.status != 429:
                    raise DrainError("eviction of %s from %s failed: %s" % (key, self.node, exc),
                                     [{"pod": key, "reason": str(exc)}]) from exc
            planned.append({"pod": key, "uid": str(meta.get("uid", ""))})
        return planned

    def wait_gone(self, evicted: List[Dict[str, str]], timeout: float) -> None:
        remaining = list(evicted)

        def gone() -> Tuple[bool, Any]:
            still = []
            for entry in remaining:
                namespace, name = entry["pod"].split("/", 1)
                live = self.k8s.get("Pod", name, namespace)
                if live is not None and str((live.get("metadata") or {}).get("uid", "")) == entry["uid"]:
                    still.append(entry)
            remaining[:] = still
            return not still, ["pod %s terminating" % e["pod"] for e in still]

        try:
            self.k8s.wait_for("evicted pods of %s to terminate" % self.node, gone, timeout, self.interval,
                              self.progress)
        except K8sError as exc:
            if exc.status is not None:  # the API refused (e.g. 403): not a timeout, say what it said
                raise DrainError("waiting for the pods evicted from %s failed: %s" % (self.node, exc),
                                 [{"pod": e["pod"], "reason": str(exc)} for e in remaining]) from exc
            raise DrainError("pods evicted from %s did not terminate in time: %s" % (
                self.node, ", ".join(e["pod"] for e in remaining)),
                [{"pod": e["pod"], "reason": "still terminating"} for e in remaining]) from exc
