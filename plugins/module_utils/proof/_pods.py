# -*- coding: utf-8 -*-
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Verification pods: create them in parallel, poll, read their logs, clean up (``PodRun``).

I/O through ``_k8s.K8sClient``; what each pod must show is ``_verify``'s (pure) job. Used by gpu_verify
and the sharing probe (``_probe_io``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import ModuleFailure
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._resources import BUILTIN_TYPES
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._api_errors import K8sError, K8sTimeout
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import mirror_image
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._pod_metrics import hold_command
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._dra_verify import allocated_devices, claim_body
from ansible_collections.gpufleet.sharing.plugins.module_utils.proof._verify import (
    DEADLINE_MARGIN,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    RUN_ID_LABEL,
    Check,
    held_checks,
    held_resources,
    pending_reason,
    pod_check,
    pod_manifest,
    pod_name,
    pods_for,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode


def read_pod_log(k8s: K8sClient, name: str, namespace: str) -> Tuple[Optional[str], Optional[str]]:
    """The pod's log text, or (None, reason) when it cannot be read."""
    try:
        return k8s.pod_log(name, namespace), None
    except K8sError as exc:
        return None, "cannot read the log: %s" % exc


def pod_target(pod: Mapping[str, Any]) -> Optional[str]:
    """The node a verification pod runs on, or the hostname it asks for while it is not scheduled."""
    spec = pod.get("spec") or {}
    return spec.get("nodeName") or (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")


class PodRun:
    """One verification run's pods. ``params`` are gpu_verify's options (namespace, pod_*, parallel, ...)."""

    def __init__(self, k8s: K8sClient, params: Mapping[str, Any], run_id: str, warn: Callable[[str], None]) -> None:
        self.k8s = k8s
        self.params = params
        self.run_id = run_id
        self.warn = warn
        self.namespace = params["namespace"]
        self.selector = "%s=%s,%s=%s" % (MANAGED_BY_LABEL, MANAGED_BY_VALUE, RUN_ID_LABEL, run_id)
        self.checks: List[Check] = []
        self.pods: List[Dict[str, Any]] = []
        self.leftovers: List[str] = []
        self.claims = False  # this run made ResourceClaims (DRA), removed with its pods
        # called on every poll with (pods last seen, created name -> wanted), e.g. the metrics scrape
        self.observers: List[Callable[[Mapping[str, Any], Mapping[str, Any]], None]] = []

    def check_pull_secrets(self) -> None:
        """Every O(image_pull_secrets) Secret exists in the pods' namespace, checked before anything is written."""
        missing = [name for name in self.params.get("image_pull_secrets") or []
                   if self.k8s.get("Secret", name, self.namespace) is None]
        if missing:
            raise ModuleFailure("image_pull_secrets: no Secret %s in namespace %s (the verification pods' namespace); "
                                "create it there first" % (", ".join(missing), self.namespace))

    def run(self, expected: Sequence[ExpectedNode], hostnames: Mapping[str, str],
            wanted: Optional[Sequence[Any]] = None) -> None:
        """A pod per node and advertised resource type (or the ``wanted`` pods: under DRA one per node
        and device kind, each bound to a claim of its own); ``hostnames``: node -> kubernetes.io/hostname."""
        wanted = self.wanted_for(expected) if wanted is None else list(wanted)
        if not wanted:
            return
        self.k8s.ensure_namespace(self.namespace, labels=self.params["namespace_labels"])
        self.remove_leftovers({exp.node for exp in expected}, hostnames)
        created: Dict[str, Any] = {}
        p = self.params

        def create(indexed: Tuple[int, Any]) -> None:
            index, want = indexed
            name = pod_name(self.run_id, want.node, want.label, index)
            body = pod_manifest(want, name, self.namespace, self.run_id, mirror_image(p["pod_image"], p.get("registry")),
                                hold_command(p["pod_command"], p["metrics_hold"]) if p.get("metrics") else p["pod_command"],
                                tolerations=p["pod_tolerations"], run_as_user=p["pod_run_as_user"],
                                image_pull_secrets=p.get("image_pull_secrets") or (),
                                hostname=hostnames.get(want.node) or want.node,
                                deadline=p["pod_timeout"] + DEADLINE_MARGIN)
            body["metadata"]["annotations"].update(p["pod_annotations"] or {})
            if want.kind is not None:
                self.claims = True
                self.k8s.create(claim_body(want, name, self.namespace, self.run_id))
            self.k8s.create(body)
            created[name] = want

        try:
            self.parallel(create, list(enumerate(wanted)))
            self.collect(created)
        finally:
            # by label, so that a pod whose create answer was lost is removed too
            self.cleanup(created)

    def wanted_for(self, expected: Sequence[ExpectedNode]) -> List[Any]:
        """A pod per node and advertised resource, except the resources that the node's running pods hold
        entirely (said in ``checks``, held_checks): after a per-GPU MIG change (issue 38) the pods of
        the untouched GPUs keep their devices, and a pod for those would never be scheduled."""
        wanted: List[Any] = []
        if not expected:
            return wanted
        on_node: Dict[str, List[Dict[str, Any]]] = {}
        for pod in self.k8s.list("Pod"):  # one read for the fleet, all namespaces
            on_node.setdefault(str((pod.get("spec") or {}).get("nodeName") or ""), []).append(pod)
        for exp in expected:
            held = held_resources(on_node.get(exp.node, []))
            self.checks.extend(held_checks(exp, held))
            wanted.extend(pods_for(exp, held))
        return wanted

    def parallel(self, func: Callable[[Any], Any], items: Sequence[Any]) -> List[Any]:
        """Run func over items with up to ``parallel`` threads; the first error is raised after all ran."""
        workers = max(1, min(self.params["parallel"], len(items)))
        if workers == 1:
            return [func(item) for item in items]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(func, items))

    def poll(self, created: Mapping[str, Any]) -> Tuple[Dict[str, Tuple[str, float]], Dict[str, Any]]:
        """Until every pod finished or the timeout: name -> (phase, seconds), and the pods last seen."""
        start = self.k8s.now()
        finished: Dict[str, Tuple[str, float]] = {}
        live: Dict[str, Any] = {}

        def probe() -> Tuple[bool, int]:
            for pod in self.k8s.list("Pod", namespace=self.namespace, label_selector=self.selector):
                name = pod["metadata"]["name"]
                live[name] = pod
                phase = (pod.get("status") or {}).get("phase")
                if name in created and phase in ("Succeeded", "Failed") and name not in finished:
                    finished[name] = (phase, round(self.k8s.now() - start, 1))
            for observe in self.observers:
                observe(live, created)
            return len(finished) == len(created), len(finished)

        try:
            self.k8s.wait_for("the verification pods to finish", probe, self.params["pod_timeout"], self.params["poll_interval"])
        except K8sTimeout:
            pass  # the pods that did not finish are reported by collect()
        return finished, live

    def collect(self, created: Mapping[str, Any]) -> None:
        finished, live = self.poll(created)
        events = self.k8s.list("Event", namespace=self.namespace) if len(finished) < len(created) else []
        names = sorted(finished)
        logs = dict(zip(names, self.parallel(lambda name: read_pod_log(self.k8s, name, self.namespace), names)))
        timeout = self.params["pod_timeout"]
        for name, want in sorted(created.items()):
            entry = {"name": name, "node": want.node, "resource": want.label, "expected": want.describe()}
            if want.kind is not None:
                entry["allocated"] = allocated_devices(self.k8s.get("ResourceClaim", name, self.namespace))
            if name in finished:
                check = self.judge_finished(entry, want, finished[name], logs[name], live.get(name))
            else:
                mine = [e for e in events if (e.get("involvedObject") or {}).get("name") == name]
                reason = pending_reason(live.get(name), mine)
                check = pod_check(want, "Timeout", reason="%s after %ds" % (reason, timeout))
                entry.update(outcome="Timeout", seconds=timeout, log="", reason=reason)
            entry["ok"] = check.ok
            self.pods.append(entry)
            self.checks.append(check)

    @staticmethod
    def judge_finished(entry: Dict[str, Any], want: Any, finished: Tuple[str, float],
                       log_read: Tuple[Optional[str], Optional[str]], pod: Optional[Mapping[str, Any]]) -> Check:
        phase, seconds = finished
        log, log_error = log_read
        reason = ""
        if phase == "Failed":
            reason = pending_reason(pod, []) if log_error is None else log_error
            status = (pod or {}).get("status") or {}
            if status.get("reason"):
                reason = "%s: %s" % (status.get("reason"), status.get("message") or "")
        entry.update(outcome=phase, seconds=seconds, log=log or "", reason=reason)
        return pod_check(want, phase if log_error is None else "Failed", log or "", reason or (log_error or ""))

    def remove_leftovers(self, nodes: Set[str], hostnames: Mapping[str, str]) -> None:
        """Delete the verification pods of earlier runs that were killed before their cleanup
        (labelled with another run id) on the nodes this run verifies, so that they never run
        alongside this run's pods. Pods of other runs on other nodes (e.g. the parallel per-node
        verifications of one rollout batch) are left alone."""
        stale = "%s=%s,%s,%s!=%s" % (MANAGED_BY_LABEL, MANAGED_BY_VALUE, RUN_ID_LABEL, RUN_ID_LABEL, self.run_id)
        targets = set(nodes) | {hostnames.get(node, node) for node in nodes}
        leftovers = [pod for pod in self.k8s.list("Pod", namespace=self.namespace, label_selector=stale)
                     if pod_target(pod) in targets]
        for pod in leftovers:
            self.warn("deleting verification pod %s/%s left by run %s" % (
                self.namespace, pod["metadata"]["name"], (pod["metadata"].get("labels") or {}).get(RUN_ID_LABEL)))
            try:
                self.k8s.delete("Pod", pod["metadata"]["name"], namespace=self.namespace, grace_period_seconds=0)
            except K8sError as exc:
                if exc.status != 404:
                    raise
        self.leftovers = [pod["metadata"]["name"] for pod in leftovers]

    def cleanup(self, created: Mapping[str, Any]) -> None:
        """Delete this run's pods, also after a failure: one delete-collection, one by one as fallback."""
        if self.claims:
            self.delete_claims()
        if not created:
            return
        try:
            self.k8s.request("DELETE", BUILTIN_TYPES["Pod"].path(namespace=self.namespace),
                             query=[("labelSelector", self.selector), ("gracePeriodSeconds", 0)])
            return
        except K8sError as exc:
            if exc.status not in (404, 405):
                self.warn("delete-collection of verification pods failed (%s); deleting one by one" % exc)
        for name in created:
            try:
                self.k8s.delete("Pod", name, namespace=self.namespace, grace_period_seconds=0)
            except K8sError as exc:
                self.warn("could not delete verification pod %s/%s: %s" % (self.namespace, name, exc))

    def delete_claims(self) -> None:
        """This run's ResourceClaims, by label (the kubelet releases a claim's devices once its pod is gone)."""
        try:
            self.k8s.request("DELETE", BUILTIN_TYPES["ResourceClaim"].path(namespace=self.namespace),
                             query=[("labelSelector", self.selector)])
        except K8sError as exc:
            self.warn("could not delete the verification ResourceClaims in %s: %s" % (self.namespace, exc))
