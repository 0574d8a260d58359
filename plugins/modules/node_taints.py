#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_taints
short_description: Set the taints declared in the inventory on GPU nodes
version_added: 0.3.0
description:
  - Sets each node's declared taints (C(key), C(value), C(effect)). Taints this module set earlier and no
    longer declared are removed; taints set by anyone else are kept. The module records the taints it owns
    in the node annotation C(gpufleet.sharing/taints).
  - Every taint is checked first (effect V(NoSchedule), V(PreferNoSchedule) or V(NoExecute), a qualified key,
    a label value), every node that is given taints must exist, and with O(operand_tolerations) every taint
    must be tolerated by the operator's operands; any problem fails the run before any node is changed,
    listing all of them. A node given no taint that does not exist is skipped (nothing of ours can be on it).
  - Pass every GPU node, those without declared taints with an empty O(nodes[].taints), as the role
    P(gpufleet.sharing.gpu_operator#role) does before the release's tolerations change, so that a taint
    removed from the inventory leaves the nodes in the same run.
  - The operator's DaemonSets tolerate these taints through M(gpufleet.sharing.gpu_operator) O(gpufleet.sharing.gpu_operator#module:tolerations),
    the verification pods through M(gpufleet.sharing.gpu_verify) O(gpufleet.sharing.gpu_verify#module:pod_tolerations).
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
options:
  nodes:
    description: One entry per node.
    type: list
    elements: dict
    required: true
    suboptions:
      node:
        description: Node name.
        type: str
        required: true
      taints:
        description: The node's taints, each C({key, value, effect}); empty removes the ones this module set.
        type: list
        elements: dict
        default: []
  operand_tolerations:
    description:
      - The tolerations the GPU Operator's operand DaemonSets will have, besides the chart's C(nvidia.com/gpu)
        one (the role passes C(gpu_operator_tolerations)). A C(NoSchedule) or C(NoExecute) taint they do not
        tolerate is refused, since the device plugin would leave the node. Not given, nothing is checked.
    type: list
    elements: dict
"""

EXAMPLES = r"""
- name: Taint the GPU nodes as the inventory declares
  gpufleet.sharing.node_taints:
    nodes:
      - node: gpu-a
        taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
  delegate_to: localhost
"""

RETURN = r"""
nodes:
  description: Each node's taints after the run.
  returned: always
  type: dict
  sample: {gpu-a: [{key: dedicated, value: gpu, effect: NoSchedule}]}
"""

from typing import Any, Dict, List

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._options import object_name_problems
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._taints import (
    OWNED_ANNOTATION, node_taints, stranding_problems, taint_problems)

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    nodes=dict(type="list", elements="dict", required=True, options=dict(
        node=dict(type="str", required=True), taints=dict(type="list", elements="dict", default=[]))),
    operand_tolerations=dict(type="list", elements="dict"),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def run(mod: ClusterModule) -> None:
    entries = mod.params["nodes"]
    names = object_name_problems([("nodes[%d].node" % i, "Node", e["node"]) for i, e in enumerate(entries)])
    problems = list(names)
    listed = [entry["node"] for entry in entries]
    problems += ["node %s: listed more than once (give each node's taints in one entry)" % name
                 for name in sorted({name for name in listed if listed.count(name) > 1})]
    for entry in entries:
        found = taint_problems(entry["taints"], "node %s" % entry["node"])
        problems += found
        if not found and mod.params["operand_tolerations"] is not None:
            problems += stranding_problems(entry["node"], entry["taints"], mod.params["operand_tolerations"])
    live = {node["metadata"]["name"]: node for node in mod.k8s.list("Node")} if not names else {}
    problems += ["node %s: not found" % e["node"] for e in entries if e["node"] not in live and e["taints"] and not names]
    if problems:
        mod.fail("invalid node taints: %s" % "; ".join(problems), problems=problems)
    result: Dict[str, Any] = {}
    for entry in (e for e in entries if e["node"] in live):
        node = live[entry["node"]]
        taints, annotation = node_taints(node, entry["taints"])
        before = node.get("spec", {}).get("taints") or []
        if taints != before or (node["metadata"].get("annotations") or {}).get(OWNED_ANNOTATION) != annotation:
            mod.k8s.update("Node", entry["node"], _setter(taints, annotation))
            mod.changes.record("node %s taints" % entry["node"], before, taints, changed=True)
        result[entry["node"]] = taints
    mod.result["nodes"] = result


def _setter(taints: List[Dict[str, Any]], annotation: str) -> Any:
    def mutate(obj: Dict[str, Any]) -> Dict[str, Any]:
        obj.setdefault("spec", {})["taints"] = taints
        obj["metadata"].setdefault("annotations", {})[OWNED_ANNOTATION] = annotation
        return obj
    return mutate


if __name__ == "__main__":
    main()
