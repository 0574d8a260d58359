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
    a label value) and every node must exist; any problem fails the run before any node is changed, listing
    all of them.
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

from ansible_collections.gpufleet.sharing.plugins.module_utils._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils._taints import OWNED_ANNOTATION, node_taints, taint_problems

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    nodes=dict(type="list", elements="dict", required=True, options=dict(
        node=dict(type="str", required=True), taints=dict(type="list", elements="dict", default=[]))),
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def run(mod: ClusterModule) -> None:
    entries = mod.params["nodes"]
    problems: List[str] = []
    names = [entry["node"] for entry in entries]
    problems += ["node %s: listed more than once (give each node's taints in one entry)" % name
                 for name in sorted({name for name in names if names.count(name) > 1})]
    for entry in entries:
        problems += taint_problems(entry["taints"], "node %s" % entry["node"])
    live = {entry["node"]: mod.k8s.get("Node", entry["node"]) for entry in entries}
    problems += ["node %s: not found" % name for name, node in live.items() if node is None]
    if problems:
        mod.fail("invalid node taints: %s" % "; ".join(problems), problems=problems)
    result: Dict[str, Any] = {}
    for entry in entries:
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
