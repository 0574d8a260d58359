# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-group templates (issue 39 part 1): what a new node of a GPU group advertises once converged, and
how each autoscaler is told so before the node exists (docs/autoscaling.md, docs/reference/autoscaling.md).

Pure. The resources and the GFD labels are the fleet plan's expectation of the group's hosts
(``plan_fleet`` -> ``expected_node``, the same functions gpu_verify compares the nodes with); a group
whose hosts plan differently has no one template and is refused, naming the hosts.

- Cluster API (kubernetes/autoscaler cluster-autoscaler-1.36.1, ``cloudprovider/clusterapi/
  clusterapi_utils.go``, ``clusterapi_unstructured.go``): annotations ``capacity.cluster-autoscaler.
  kubernetes.io/{cpu,memory,maxPods,labels,taints,gpu-type,gpu-count,dra-driver}``; ``InstanceCapacity``
  reads ONE ``gpu-type``/``gpu-count`` pair, ``InstanceResourceSlices`` makes ``gpu-count`` devices with
  the only attribute ``type=gpu`` for a ``dra-driver``.
- AWS (``cloudprovider/aws/README.md``): ASG tags ``k8s.io/cluster-autoscaler/node-template/resources/<r>``,
  ``.../label/<k>``, ``.../taint/<k>`` = ``value:effect``.
- Karpenter (kubernetes-sigs/karpenter v1.14.1, ``pkg/apis/v1alpha1/nodeoverlay.go``): a ``NodeOverlay``
  whose ``spec.capacity`` adds extended resources to the instance types ``spec.requirements`` select.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import (
    SCOPE_FLEET, ClusterView, FleetPlan, HostPlan, Intent, checked_configs, device_plugin_of, plan_fleet, read_intent)
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._node_gpus import NodeGpus, node_gpus_from_plan, profile_of_mig_resource
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import GPU_RESOURCE, SharingError

CAPI_PREFIX = "capacity.cluster-autoscaler.kubernetes.io/"
ASG_PREFIX = "k8s.io/cluster-autoscaler/node-template/"
CAPI_GPU_LABEL = "cluster-api/accelerator"  # clusterapi_provider.go GPULabel
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
DRA_DRIVER = "gpu.nvidia.com"  # the NVIDIA DRA driver's name (docs/dra.md)
KARPENTER_POOL_LABEL = "karpenter.sh/nodepool"
# What the inventory may say of a node group's machines (never invented: absent stays absent).
CAPACITY_KEYS = ("cpu", "memory", "maxPods")
BACKENDS = ("device-plugin", "dra")
FILE_JSON, FILE_YAML = "node-group-templates.json", "node-group-templates.yaml"

SPLIT_ADVICE = ("split the group into one node group per resource (one MIG profile per MachineDeployment), "
                "or keep its minimum size at 1 or more so that the autoscaler copies a real node")


@dataclass(frozen=True)
class NodeGroup:
    """One GPU group of the inventory: its nodes and what the inventory says of its machines."""

    name: str
    nodes: Tuple[str, ...]
    backend: str = "device-plugin"
    taints: Tuple[Mapping[str, Any], ...] = ()
    capacity: Mapping[str, Any] = field(default_factory=dict)
    mig_backend: str = "host"
    mig_config: Optional[str] = None
    nodepool: Optional[str] = None


def group_problems(group: NodeGroup) -> List[str]:
    """What is wrong with one group's inputs (empty: fine)."""
    where = "node group %r" % group.name
    problems = [] if group.nodes else ["%s: has no hosts" % where]
    if group.backend not in BACKENDS:
        problems.append("%s: backend must be one of %s, got %r" % (where, ", ".join(BACKENDS), group.backend))
    problems.extend("%s: capacity key %r is not one of %s" % (where, k, ", ".join(CAPACITY_KEYS))
                    for k in sorted(group.capacity) if k not in CAPACITY_KEYS)
    for taint in group.taints:
        if not isinstance(taint, Mapping) or not taint.get("key") or not taint.get("effect"):
            problems.append("%s: a taint needs key and effect, got %r" % (where, taint))
    return problems


def _signature(exp: ExpectedNode) -> str:
    """What a node of the group advertises, as one comparable text."""
    gpus = exp.gpus.as_dict() if exp.gpus else {}
    shown = dict(gpus, resources={k: v for k, v in sorted(exp.resources.items()) if v}, config=exp.config,
                 labels=exp.labels)
    shown.pop("source", None)
    return json.dumps(shown, sort_keys=True)


def _summary(exp: ExpectedNode) -> str:
    """One host's plan in a few words, for the message that hosts of a group differ."""
    gpus = exp.gpus
    count = (gpus.full_gpus + gpus.mig_gpus) if gpus else 0
    models = "/".join(gpus.models) if gpus and gpus.models else "GPU"
    mig = ", ".join("%s x%d" % (profile_of_mig_resource(r), n) for r, n in gpus.mig_devices) if gpus and gpus.mig_devices else "off"
    advertised = ", ".join("%s=%d" % (r, n) for r, n in sorted(exp.resources.items()) if n) or "nothing"
    return "%d x %s, MIG %s, sharing config %s, advertising %s" % (count, models, mig, exp.config or "none", advertised)


def group_expectation(group: NodeGroup, fleet: FleetPlan) -> ExpectedNode:
    """The one expectation every host of the group shares (a device-plugin group).

    Raises SharingError when a host cannot be planned or the hosts differ (naming the group and them)."""
    where = "node group %r" % group.name
    expectations: Dict[str, ExpectedNode] = {}
    problems: List[str] = []
    for node in group.nodes:
        planned = fleet.nodes.get(node)
        if planned is None or (planned.expected is None and not planned.problems):
            problems.append("%s: host %r has no GPU plan (no GPU facts, no planned GPUs)" % (where, node))
        elif planned.expected is None:
            problems.extend("%s: %s" % (where, p) for p in planned.problems)
        else:
            expectations[node] = planned.expected
    if problems:
        raise SharingError(problems)
    kinds: Dict[str, List[str]] = {}
    for node, exp in expectations.items():
        kinds.setdefault(_signature(exp), []).append(node)
    if len(kinds) > 1:
        shown = {sig: _summary(expectations[nodes[0]]) for sig, nodes in kinds.items()}
        if len(set(shown.values())) < len(shown):  # alike in summary: show all they differ in
            shown = {sig: sig for sig in kinds}
        raise SharingError(["%s: its hosts differ, so no one template describes a new node of it: %s; put hosts that "
                            "differ in GPU model, count, MIG layout or sharing config in separate groups"
                            % (where, "; ".join("%s: %s" % (", ".join(nodes), shown[sig]) for sig, nodes in kinds.items()))])
    return expectations[group.nodes[0]]


def memory_mib(group: NodeGroup, hosts: Mapping[str, HostPlan]) -> Optional[int]:
    """GFD's ``nvidia.com/gpu.memory`` (MiB) where every GPU of every host of the group reports the same
    ``memory_total_mib`` in its facts; None where the facts do not tell (never guessed from the model)."""
    sizes = {gpu.get("memory_total_mib") for n in group.nodes for gpu in (hosts[n].gpu_facts if n in hosts else ())}
    size = sizes.pop() if len(sizes) == 1 else None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


def _labels(group: NodeGroup, exp: ExpectedNode, resources: Mapping[str, int], memory: Optional[int]) -> Dict[str, str]:
    """The labels GFD and the collection give a node of the group (the ones workloads select on)."""
    labels = dict(exp.labels)  # with nvidia.com/device-plugin.config where the collection labels the node
    if group.mig_backend == "operator" and group.mig_config:
        labels[MIG_CONFIG_LABEL] = group.mig_config
    if memory and not (exp.mig_strategy == "single" and exp.gpus is not None and exp.gpus.mig_enabled):
        labels["nvidia.com/gpu.memory"] = str(memory)  # under single, GFD gives the MIG device's memory there
    if resources.get(GPU_RESOURCE) and exp.gpus is not None and exp.gpus.product:
        labels[CAPI_GPU_LABEL] = exp.gpus.product
    return dict(sorted(labels.items()))


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return "%s%s:%s" % (taint["key"], "=%s" % value if value not in (None, "") else "", taint["effect"])


def clusterapi(group: NodeGroup, gpus: Optional[NodeGpus], resources: Mapping[str, int],
               labels: Mapping[str, str]) -> Dict[str, Any]:
    """``{expressible, reason, annotations}`` for the group's MachineDeployment or MachineSet."""
    notes: Dict[str, str] = {CAPI_PREFIX + k: str(group.capacity[k]) for k in CAPACITY_KEYS if k in group.capacity}
    if labels:
        notes[CAPI_PREFIX + "labels"] = ",".join("%s=%s" % kv for kv in sorted(labels.items()))
    if group.taints:
        notes[CAPI_PREFIX + "taints"] = ",".join(_taint_text(t) for t in group.taints)
    if group.backend == "dra":
        return _clusterapi_dra(gpus, notes)
    if len(resources) == 1:
        (resource, count), = resources.items()
        notes.update({CAPI_PREFIX + "gpu-type": resource, CAPI_PREFIX + "gpu-count": str(count)})
        return {"expressible": True, "reason": "one extended resource (%s) describes the group" % resource,
                "annotations": dict(sorted(notes.items()))}
    if not resources:
        reason = "a node of the group advertises no GPU resource, so there is nothing to scale from zero for"
    else:
        reason = ("a node of the group advertises %d extended resources (%s) and the Cluster API annotations hold one "
                  "gpu-type/gpu-count pair: %s" % (len(resources), ", ".join(sorted(resources)), SPLIT_ADVICE))
    return {"expressible": False, "reason": reason, "annotations": {}}


def _clusterapi_dra(gpus: Optional[NodeGpus], notes: Dict[str, str]) -> Dict[str, Any]:
    """DRA: ``dra-driver`` + ``gpu-count`` give ``gpu-count`` devices with only ``type=gpu`` (whole GPUs)."""
    if gpus is None or gpus.mig_enabled:
        return {"expressible": False, "annotations": {}, "reason": (
            "MIG on DRA cannot scale from zero: the autoscaler's template holds gpu-count devices with only "
            "type=gpu, which no MIG device request matches (kubernetes/autoscaler#10199); keep the group's "
            "minimum size at 1 or more" if gpus is not None else "the group's GPUs are not known from its plan")}
    notes.update({CAPI_PREFIX + "dra-driver": DRA_DRIVER, CAPI_PREFIX + "gpu-count": str(gpus.full_gpus)})
    return {"expressible": True, "reason": "whole GPUs through DRA: %d devices of driver %s" % (gpus.full_gpus, DRA_DRIVER),
            "annotations": dict(sorted(notes.items()))}


def aws_asg_tags(resources: Mapping[str, int], labels: Mapping[str, str], taints: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """The ASG tags the AWS provider builds a template node from (several resources allowed)."""
    tags = {ASG_PREFIX + "resources/" + r: str(n) for r, n in resources.items()}
    tags.update({ASG_PREFIX + "label/" + k: v for k, v in labels.items()})
    tags.update({ASG_PREFIX + "taint/" + t["key"]: "%s:%s" % (t.get("value") or "", t["effect"]) for t in taints})
    return dict(sorted(tags.items()))


def object_name(group: str) -> str:
    """A DNS-1123 name for the group's NodeOverlay."""
    name = re.sub(r"[^a-z0-9-]+", "-", group.lower()).strip("-")
    return ("gpufleet-" + name)[:63].rstrip("-")


def karpenter_node_overlay(group: NodeGroup, resources: Mapping[str, int]) -> Dict[str, Any]:
    """A NodeOverlay adding the group's extended resources to its NodePool's instance types ({} when it has none)."""
    if not resources:
        return {}
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": object_name(group.name)},
        "spec": {
            "requirements": [{"key": KARPENTER_POOL_LABEL, "operator": "In", "values": [group.nodepool or object_name(group.name)[9:]]}],
            "capacity": {r: str(n) for r, n in sorted(resources.items())},
        },
    }


def dra_group_gpus(group: NodeGroup, hosts: Mapping[str, HostPlan]) -> NodeGpus:
    """The GPUs every host of a DRA group has (no device plugin there: its plan, not an expectation)."""
    where = "node group %r" % group.name
    kinds: Dict[str, List[str]] = {}
    found: Dict[str, NodeGpus] = {}
    for node in group.nodes:
        host = hosts.get(node)
        planned = host.planned_gpus() if host is not None else None
        if not planned:
            raise SharingError(["%s: host %r has no GPU plan (no GPU facts, no planned GPUs)" % (where, node)])
        gpus = node_gpus_from_plan(planned, "node %r" % node)
        text = json.dumps(dict(gpus.as_dict(), source=None), sort_keys=True)
        kinds.setdefault(text, []).append(node)
        found[text] = gpus
    if len(kinds) > 1:
        raise SharingError(["%s: its hosts differ, so no one template describes a new node of it: %s; put hosts that "
                            "differ in GPU model, count or MIG layout in separate groups"
                            % (where, "; ".join("%s have %s" % (", ".join(n), t) for t, n in sorted(kinds.items())))])
    return next(iter(found.values()))


def group_template(group: NodeGroup, fleet: FleetPlan, hosts: Mapping[str, HostPlan]) -> Dict[str, Any]:
    """One group's entry of node-group-templates.json."""
    if group.backend == "dra":
        gpus: Optional[NodeGpus] = dra_group_gpus(group, hosts)
        resources: Dict[str, int] = {}
        labels: Dict[str, str] = {}
    else:
        exp = group_expectation(group, fleet)
        gpus = exp.gpus
        resources = {r: n for r, n in sorted(exp.resources.items()) if n}
        labels = _labels(group, exp, resources, memory_mib(group, hosts))
    taints = [dict(t) for t in group.taints]
    return {
        "resources": resources,
        "labels": labels,
        "taints": taints,
        "clusterapi": clusterapi(group, gpus, resources, labels),
        "aws_asg_tags": aws_asg_tags(resources, labels, taints),
        "karpenter_node_overlay": karpenter_node_overlay(group, resources),
    }


def node_group_templates(groups: Sequence[NodeGroup], fleet: FleetPlan, hosts: Mapping[str, HostPlan]) -> Dict[str, Any]:
    """``{"groups": {name: template}}`` for every group; SharingError with every problem of every group."""
    problems = [p for g in groups for p in group_problems(g)]
    seen: Dict[str, str] = {}
    for group in groups:
        for node in group.nodes:
            if node in seen and seen[node] != group.name:
                problems.append("host %r is in the node groups %r and %r: a host belongs to one node group"
                                % (node, seen[node], group.name))
            seen.setdefault(node, group.name)
    templates: Dict[str, Any] = {}
    for group in groups if not problems else ():
        try:
            templates[group.name] = group_template(group, fleet, hosts)
        except SharingError as exc:
            problems.extend(exc.problems)
    if problems:
        raise SharingError(problems)
    return {"groups": dict(sorted(templates.items()))}


def plan_groups(params: Mapping[str, Any], groups: Sequence[NodeGroup]) -> Tuple[FleetPlan, Dict[str, HostPlan]]:
    """The fleet plan of the groups' hosts as new nodes: no labels yet, the options' MIG strategy (None: each
    node's config decides, as under a ClusterPolicy that leaves it empty), the options' sharing configs."""
    plugin = device_plugin_of(params, None)
    plans, raw_configs = read_intent(params)
    strategy = params.get("mig_strategy") or None
    default = params.get("default_config") or None
    configs = checked_configs(raw_configs, default, plugin, strategy) if raw_configs is not None else {}
    nodes = tuple(sorted({n for g in groups for n in g.nodes}))
    cluster = ClusterView(nodes={n: {} for n in nodes}, has_policy=True, mig_strategy=strategy)
    intent = Intent(configs, default or "", plans, strategy, nodes, (), SCOPE_FLEET, plugin)
    return plan_fleet(intent, cluster), plans


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}


def _key(key: Any) -> str:
    """A mapping key: plain where YAML reads it back as the same string, else double-quoted."""
    text = str(key)
    return text if _PLAIN_KEY.match(text) and text.lower() not in _YAML_WORDS else json.dumps(text)


def _yaml(value: Any, indent: str = "") -> List[str]:
    """Block YAML of JSON data (values as JSON scalars, which YAML reads the same)."""
    lines: List[str] = []
    items = list(value.items()) if isinstance(value, Mapping) else list(enumerate(value))
    for key, item in items:
        head = indent + ("- " if not isinstance(value, Mapping) else _key(key) + ":")
        if isinstance(item, (Mapping, list)) and item:
            if isinstance(value, Mapping):
                lines.append(head)
                lines.extend(_yaml(item, indent + "  "))
            else:
                nested = _yaml(item, indent + "  ")
                lines.append(head + nested[0][len(indent) + 2:])
                lines.extend(nested[1:])
        else:
            text = json.dumps(item if not isinstance(item, (Mapping, list)) else ({} if isinstance(item, Mapping) else []))
            lines.append(head + ("" if head.endswith("- ") else " ") + text)
    return lines


def render_files(doc: Mapping[str, Any]) -> Dict[str, str]:
    """File name -> content: the JSON (the contract) and the same data as YAML."""
    return {FILE_JSON: json.dumps(doc, indent=2, sort_keys=True) + "\n",
            FILE_YAML: "---\n" + "\n".join(_yaml(doc)) + "\n"}
