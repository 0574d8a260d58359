"""Cluster API's MachineDeployment in the lab, and a model of the Cluster Autoscaler's template node for it.

The CRD (group ``cluster.x-k8s.io``, version ``v1beta2`` served and stored, scope Namespaced, short name
``md``, category ``cluster-api``, subresources ``status`` and ``scale``) is written from
kubernetes-sigs/cluster-api v1.14.0 ``core/config/crd/bases/cluster.x-k8s.io_machinedeployments.yaml``,
keeping what the lab checks: ``spec`` required, and in it ``clusterName``, ``selector``, ``template``;
``template.spec`` requires ``bootstrap``, ``clusterName``, ``infrastructureRef``. The rest of the
upstream schema is kept as unknown fields. Upstream also serves ``v1beta1`` (not stored), which the lab
does not serve. A test installs it through the API (as installing Cluster API's core provider does); no
Cluster API controller runs: no Machines are made.

``template_node`` models what the Cluster Autoscaler's clusterapi provider builds for a node group of size
zero. It follows kubernetes/autoscaler cluster-autoscaler-1.36.1 ``cloudprovider/clusterapi/
clusterapi_unstructured.go``: ``InstanceCapacity`` takes cpu, memory, ephemeral disk, one
``gpu-type``/``gpu-count`` pair and maxPods (default 110) from the ``capacity.cluster-autoscaler.
kubernetes.io/`` annotations; ``Labels`` takes ``spec.template.spec.metadata.labels`` (here
``spec.template.metadata.labels``), then the ``labels`` annotation (``k=v,...``) over them; ``Taints`` takes
``spec.template.spec.taints``, then the ``taints`` annotation (``k=v:Effect,...``) over them. Without
capacity annotations (and no infrastructure template to read) the provider has no template. ``fits``
asks the lab scheduler's filters (``scheduler.node_reasons``) whether a pod fits that node.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from gpulab.cluster.scheduler import node_reasons

GROUP, VERSION = "cluster.x-k8s.io", "v1beta2"
KIND_REF = "MachineDeployment"
PREFIX = "capacity.cluster-autoscaler.kubernetes.io/"
DEFAULT_MAX_PODS = 110  # clusterapi_utils.go defaultMaxPods
_ANY = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _obj(properties: Dict[str, Any], required: tuple = ()) -> Dict[str, Any]:
    schema: Dict[str, Any] = {"type": "object", "properties": properties, "x-kubernetes-preserve-unknown-fields": True}
    if required:
        schema["required"] = list(required)
    return schema


_TEMPLATE_SPEC = _obj({"bootstrap": _ANY, "clusterName": {"type": "string", "minLength": 1}, "infrastructureRef": _ANY,
                       "taints": {"type": "array", "items": _ANY}},
                      ("bootstrap", "clusterName", "infrastructureRef"))
_SPEC = _obj({"clusterName": {"type": "string", "minLength": 1}, "replicas": {"type": "integer", "format": "int32"},
              "selector": _ANY, "template": _obj({"metadata": _ANY, "spec": _TEMPLATE_SPEC}, ("spec",))},
             ("clusterName", "selector", "template"))


def crd() -> Dict[str, Any]:
    """The MachineDeployment CRD as the lab installs it."""
    schema = _obj({"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                   "spec": _SPEC, "status": _ANY}, ("spec",))
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "machinedeployments." + GROUP},
            "spec": {"group": GROUP, "scope": "Namespaced",
                     "names": {"plural": "machinedeployments", "singular": "machinedeployment", "kind": "MachineDeployment",
                               "listKind": "MachineDeploymentList", "shortNames": ["md"], "categories": ["cluster-api"]},
                     "versions": [{"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema},
                                   "subresources": {"status": {}, "scale": {
                                       "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
                                       "labelSelectorPath": ".status.selector"}}}]}}


def _pairs(text: str) -> List[str]:
    return [part for part in (text or "").split(",") if part]


def _taint(text: str) -> Dict[str, str]:
    """``parseTaint``: ``key[=value]:Effect`` (or a bare key)."""
    head, _colon, effect = text.partition(":")
    key, _equals, value = head.partition("=")
    return {"key": key, "value": value, "effect": effect}


def template_node(md: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The node the autoscaler imagines for a MachineDeployment scaled to zero; None when the annotations give
    no capacity (the provider then has no template for it)."""
    notes = (md.get("metadata") or {}).get("annotations") or {}
    capacity: Dict[str, str] = {}
    for key, resource in (("cpu", "cpu"), ("memory", "memory"), ("ephemeral-disk", "ephemeral-storage")):
        if notes.get(PREFIX + key):
            capacity[resource] = notes[PREFIX + key]
    gpu_type, gpu_count = notes.get(PREFIX + "gpu-type"), notes.get(PREFIX + "gpu-count")
    if gpu_type and gpu_count and gpu_count != "0":
        capacity[gpu_type] = gpu_count
    if not capacity:
        return None
    capacity["pods"] = notes.get(PREFIX + "maxPods") or str(DEFAULT_MAX_PODS)
    spec = md.get("spec") or {}
    template = spec.get("template") or {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels.update(dict(pair.split("=", 1) for pair in _pairs(notes.get(PREFIX + "labels", "")) if "=" in pair))
    taints = {(t.get("key"), t.get("effect")): t for t in (template.get("spec") or {}).get("taints") or []}
    for text in _pairs(notes.get(PREFIX + "taints", "")):
        taint = _taint(text)
        taints[(taint["key"], taint["effect"])] = taint
    name = "template-node-for-%s" % (md.get("metadata") or {}).get("name")
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "spec": {"taints": list(taints.values())} if taints else {},
            "status": {"capacity": dict(capacity), "allocatable": dict(capacity)}}


def fits(pod: Dict[str, Any], md: Dict[str, Any]) -> List[str]:
    """Why ``pod`` does not fit the template node of ``md`` (empty: it fits)."""
    node = template_node(md)
    if node is None:
        return ["MachineDeployment %s has no scale-from-zero template (no capacity annotations)" % md["metadata"]["name"]]
    return node_reasons(pod, node, {})
