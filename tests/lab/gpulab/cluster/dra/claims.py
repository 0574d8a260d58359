"""ResourceClaims through a pod's life, as Kubernetes 1.34 handles them
(https://kubernetes.io/docs/concepts/scheduling-eviction/dynamic-resource-allocation/):

* ``run_once`` plays kube-controller-manager's resourceclaim controller: for a pod's
  ``spec.resourceClaims[].resourceClaimTemplateName`` it creates one ResourceClaim per pod
  (``generateName: <pod>-<pod claim name>-``, annotation ``resource.kubernetes.io/pod-claim-name``,
  the template's labels/annotations and spec, a controller ownerReference to the pod, so that the
  garbage collector deletes it with the pod) and records it in ``status.resourceClaimStatuses``;
  it removes finished or deleted pods from ``status.reservedFor`` and deallocates a claim that is
  reserved for nobody (its devices are free again);
* ``claims_for``/``node_problems``/``commit`` are kube-scheduler's DynamicResources plugin: a pod
  waits until its claims exist; on each node the unallocated claims are allocated
  (``allocator.py``) from that node's ResourceSlices, minus devices allocated to any other claim;
  the chosen node's allocation goes to ``status.allocation`` (``devices.results``, a
  ``nodeSelector`` on ``metadata.name``, ``allocationTimestamp``) with the pod in ``reservedFor``;
* ``claim_devices`` is the kubelet's NodePrepareResources call to the driver's kubelet plugin: the
  plugin of the node must be running and know every allocated device; each container gets the
  devices of the claims (and requests) its ``resources.claims`` names, so ``nvidia-smi -L`` in it
  lists exactly them (``containers.Workload``).
"""

from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from gpulab.cluster import devices as devmod
from gpulab.cluster.dra import allocator, api
from gpulab.cluster.dra.plugin import KubeletPluginProgram
from gpulab.cluster.dra.slices import DRIVER
from gpulab.cluster.errors import ApiError
from gpulab.cluster.objects import Obj, now_rfc3339

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
Claims = List[Tuple[str, Obj]]  # (pod claim name, ResourceClaim)


class Waiting(Exception):
    """The pod cannot be scheduled yet (its claims are missing); the message is the scheduler's."""


def _pod_claims(pod: Obj) -> List[Obj]:
    return list((pod.get("spec") or {}).get("resourceClaims") or [])


def claim_name(pod: Obj, entry: Obj) -> Optional[str]:
    if entry.get("resourceClaimName"):
        return str(entry["resourceClaimName"])
    for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if status.get("name") == entry.get("name"):
            return status.get("resourceClaimName")
    return None


def _live(pod: Optional[Obj]) -> bool:
    return bool(pod) and not pod["metadata"].get("deletionTimestamp") \
        and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


class DraClaims:
    def __init__(self, store: Any, plugin: KubeletPluginProgram):
        self.store = store
        self.plugin = plugin
        self._planned: Dict[Tuple[str, str], List[Tuple[str, List[Obj]]]] = {}

    def served(self) -> bool:
        try:
            self.store.resource(api.RESOURCECLAIMS)
            return True
        except ApiError:
            return False

    # ------------------------------------------------------------ the resourceclaim controller

    def run_once(self) -> None:
        if not self.served():
            return
        pods = self.store.items("v1/pods")
        for pod in pods:
            if _live(pod) and not pod["spec"].get("nodeName"):
                for entry in _pod_claims(pod):
                    if entry.get("resourceClaimTemplateName") and claim_name(pod, entry) is None:
                        self._from_template(pod, entry)
        by_uid = {pod["metadata"]["uid"]: pod for pod in pods}
        self._planned = {key: plan for key, plan in self._planned.items() if key[0] in by_uid}
        for claim in self.store.items(api.RESOURCECLAIMS):
            self._release(claim, by_uid)

    def _from_template(self, pod: Obj, entry: Obj) -> None:
        meta = pod["metadata"]
        try:
            template = self.store.get(api.RESOURCECLAIMTEMPLATES, meta["namespace"], entry["resourceClaimTemplateName"])
        except ApiError:
            return  # the scheduler reports the pod as waiting
        tmeta = (template.get("spec") or {}).get("metadata") or {}
        annotations = dict(tmeta.get("annotations") or {})
        annotations[POD_CLAIM_ANNOTATION] = entry["name"]
        prefix = ("%s-%s" % (meta["name"], entry["name"]))[:57] + "-"
        claim = self.store.create(api.RESOURCECLAIMS, {
            "metadata": {"generateName": prefix, "namespace": meta["namespace"], "labels": dict(tmeta.get("labels") or {}),
                         "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": (template.get("spec") or {}).get("spec") or {}})

        def mutate(obj: Obj) -> None:
            statuses = obj.setdefault("status", {}).setdefault("resourceClaimStatuses", [])
            statuses.append({"name": entry["name"], "resourceClaimName": claim["metadata"]["name"]})
        self.store.controller_update("v1/pods", meta["namespace"], meta["name"], mutate, subresource="status")

    def _release(self, claim: Obj, pods: Dict[str, Obj]) -> None:
        status = claim.get("status") or {}
        reserved = status.get("reservedFor") or []
        keep = [ref for ref in reserved if ref.get("resource") != "pods" or _live(pods.get(ref.get("uid", "")))]
        if keep == reserved and (keep or not status.get("allocation")):
            return

        def mutate(obj: Obj) -> None:
            new = obj.setdefault("status", {})
            new["reservedFor"] = keep
            if not keep:
                new.pop("reservedFor", None)
                new.pop("allocation", None)
                new.pop("devices", None)
        try:
            self.store.controller_update(api.RESOURCECLAIMS, claim["metadata"]["namespace"], claim["metadata"]["name"],
                                         mutate, subresource="status")
        except ApiError:
            pass

    # ------------------------------------------------------------ the scheduler plugin

    def claims_for(self, pod: Obj) -> Optional[Claims]:
        """The pod's claims (None: it has none); Waiting when one does not exist yet."""
        entries = _pod_claims(pod)
        if not entries:
            return None
        if not self.served():
            raise Waiting("resource.k8s.io/v1 is not served: pod claims cannot be allocated")
        found: Claims = []
        for entry in entries:
            name = claim_name(pod, entry)
            if name is None:
                raise Waiting('waiting for dynamic resource controller to create the resourceclaim "%s"'
                              % ("%s-%s" % (pod["metadata"]["name"], entry.get("name"))))
            try:
                claim = self.store.get(api.RESOURCECLAIMS, pod["metadata"]["namespace"], name)
            except ApiError:
                raise Waiting('resourceclaim "%s" not found' % name) from None
            reserved = (claim.get("status") or {}).get("reservedFor") or []
            if entry.get("resourceClaimTemplateName") and not any(
                    ref.get("uid") == pod["metadata"]["uid"] for ref in (claim["metadata"].get("ownerReferences") or [])):
                raise Waiting('resourceclaim "%s" was not created for the pod' % name)
            if reserved and len(reserved) >= 256:
                raise Waiting('resourceclaim "%s" is reserved for too many consumers' % name)
            found.append((entry["name"], claim))
        return found

    def _in_use(self, skip: Set[str]) -> Set[allocator.DeviceKey]:
        used: Set[allocator.DeviceKey] = set()
        for claim in self.store.items(api.RESOURCECLAIMS):
            if claim["metadata"]["uid"] in skip:
                continue
            allocation = (claim.get("status") or {}).get("allocation") or {}
            for result in (allocation.get("devices") or {}).get("results") or []:
                used.add((result.get("driver"), result.get("pool"), result.get("device")))
        return used

    def node_problems(self, pod: Obj, claims: Claims, node: Obj) -> List[str]:
        """[] when every claim of the pod is (or can be) allocated on `node`; else the reason."""
        node_name = node["metadata"]["name"]
        pending = []
        for _name, claim in claims:
            allocation = (claim.get("status") or {}).get("allocation")
            if allocation:
                if allocated_node(allocation) not in (None, node_name):
                    return ["node(s) didn't match the claim's node selector"]
                continue
            pending.append(claim)
        used = self._in_use({c["metadata"]["uid"] for c in pending})
        classes = {c["metadata"]["name"]: c for c in self.store.items(api.DEVICECLASSES)}
        candidates = allocator.node_candidates(self.store.items(api.RESOURCESLICES, field_selector="spec.nodeName=%s" % node_name))
        plan: List[Tuple[str, List[Obj]]] = []
        for claim in pending:
            try:
                results = allocator.allocate(claim.get("spec") or {}, classes, candidates, used)
            except allocator.Unallocatable as exc:
                return [str(exc)]
            used |= {(r["driver"], r["pool"], r["device"]) for r in results}
            plan.append((claim["metadata"]["name"], results))
        self._planned[(pod["metadata"]["uid"], node_name)] = plan
        return []

    def commit(self, pod: Obj, claims: Claims, node_name: str) -> None:
        """Write the planned allocations and reserve every claim for the pod (before binding)."""
        plan = dict(self._planned.pop((pod["metadata"]["uid"], node_name), []))
        self._planned = {k: v for k, v in self._planned.items() if k[0] != pod["metadata"]["uid"]}
        ref = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        for _name, claim in claims:
            results = plan.get(claim["metadata"]["name"])

            def mutate(obj: Obj, results: Optional[List[Obj]] = results) -> None:
                status = obj.setdefault("status", {})
                if results is not None and not status.get("allocation"):
                    status["allocation"] = {
                        "devices": {"results": results},
                        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]},
                        "allocationTimestamp": now_rfc3339(time.time())}
                reserved = status.setdefault("reservedFor", [])
                if not any(r.get("uid") == ref["uid"] for r in reserved):
                    reserved.append(dict(ref))
            self.store.controller_update(api.RESOURCECLAIMS, claim["metadata"]["namespace"], claim["metadata"]["name"],
                                         mutate, subresource="status")

    # ------------------------------------------------------------ the kubelet: NodePrepareResources

    def claim_devices(self, pod: Obj, node_name: str) -> Tuple[Dict[str, List[devmod.Device]], str]:
        """Container name -> prepared devices, and '' (or why the pod cannot start yet)."""
        entries = _pod_claims(pod)
        if not entries:
            return {}, ""
        per_claim: Dict[str, List[Tuple[str, devmod.Device]]] = {}
        for entry in entries:
            name = claim_name(pod, entry)
            try:
                claim = self.store.get(api.RESOURCECLAIMS, pod["metadata"]["namespace"], name or "")
            except ApiError:
                return {}, 'resourceclaim "%s" not found' % name
            status = claim.get("status") or {}
            if not any(r.get("uid") == pod["metadata"]["uid"] for r in status.get("reservedFor") or []):
                return {}, 'resourceclaim "%s" is not reserved for the pod' % name
            results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
            prepared, problem = self._prepare(node_name, results)
            if problem:
                return {}, problem
            per_claim[entry["name"]] = prepared
        out: Dict[str, List[devmod.Device]] = {}
        for container in (pod.get("spec") or {}).get("containers") or []:
            for ref in ((container.get("resources") or {}).get("claims") or []):
                for request, device in per_claim.get(ref.get("name"), []):
                    wanted = ref.get("request")
                    if not wanted or request == wanted or request.startswith(wanted + "/"):
                        out.setdefault(container["name"], []).append(device)
        return out, ""

    def _prepare(self, node_name: str, results: List[Obj]) -> Tuple[List[Tuple[str, devmod.Device]], str]:
        mine = [r for r in results if r.get("driver") == DRIVER]
        if not mine:
            return [], ""
        announced = self.plugin.announced(node_name)
        if announced is None:
            return [], "DRA driver %s is not registered on node %s" % (DRIVER, node_name)
        by_name = {device["name"]: device for device in announced}
        prepared = []
        for result in mine:
            device = by_name.get(result.get("device"))
            if device is None:
                return [], "prepare devices failed: requested device %s is not allocatable" % result.get("device")
            prepared.append((result.get("request", ""), lab_device(device)))
        return prepared, ""


def allocated_node(allocation: Obj) -> Optional[str]:
    """The node of an allocation's ``metadata.name`` node selector (None: any node)."""
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return None


def lab_device(device: Obj) -> devmod.Device:
    attributes = {k: next(iter(v.values())) for k, v in (device.get("attributes") or {}).items() if v}
    index = int(re.match(r"^gpu-(\d+)", device["name"]).group(1))
    is_mig = attributes.get("type") == "mig"
    return devmod.Device(id=attributes.get("uuid", ""), resource="claim:" + device["name"], gpu_index=index,
                         gpu_name=attributes.get("productName", ""),
                         gpu_uuid=attributes.get("parentUUID") if is_mig else attributes.get("uuid", ""),
                         mig_profile=attributes.get("profile") if is_mig else None,
                         mig_uuid=attributes.get("uuid") if is_mig else None)


__all__ = ["DraClaims", "allocated_node", "POD_CLAIM_ANNOTATION", "Waiting", "claim_name", "lab_device"]
