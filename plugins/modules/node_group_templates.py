#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_group_templates
short_description: Write what a new node of each GPU group will advertise, for the cluster autoscalers
version_added: 0.5.0
description:
  - For every GPU node group, computes what a new node of the group advertises once converged and writes it
    as C(node-group-templates.json) and C(node-group-templates.yaml) into O(dest) (the contract is in the
    collection's C(docs/autoscaling.md)).
  - C(resources) and the GPU Feature Discovery C(labels) come from the fleet plan of the group's hosts, the
    same computation M(gpufleet.sharing.gpu_verify) compares the nodes with. Hosts of one group that plan
    differently (GPU model, count, MIG layout, sharing config) are refused, naming the group and the hosts.
  - Per group also the Cluster Autoscaler's Cluster API annotations (C(capacity.cluster-autoscaler.kubernetes.io/),
    given only when one extended resource describes the group), its AWS Auto Scaling group tags
    (C(k8s.io/cluster-autoscaler/node-template/)) and a Karpenter C(NodeOverlay).
  - Runs on the controller and reads no cluster, since a template describes a node that does not exist yet.
author:
  - gpufleet maintainers (@gpufleet)
options:
  groups:
    description: The GPU node groups, one entry each.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The group's name (the inventory group).
        type: str
        required: true
      nodes:
        description: The Kubernetes node names of the group's hosts (each in O(node_plans) or O(node_gpus)).
        type: list
        elements: str
        required: true
      backend:
        description: How the group's GPUs are allocated; on V(dra) no device plugin advertises resources.
        type: str
        choices: [device-plugin, dra]
        default: device-plugin
      taints:
        description: The taints a node of the group carries (C(key), C(value), C(effect)), as in C(gpufleet_node_taints).
        type: list
        elements: dict
        default: []
      capacity:
        description:
          - What the inventory knows of the group's machines, any of C(cpu), C(memory), C(maxPods), copied to the
            Cluster API annotations. Nothing is invented where this is empty.
        type: dict
        default: {}
      mig_backend:
        description: Where MIG is applied (C(gpufleet_mig_backend)); V(operator) adds the label C(nvidia.com/mig.config).
        type: str
        choices: [host, operator]
        default: host
      mig_config:
        description: The group's MIG selection (C(mig_config)), the value of C(nvidia.com/mig.config) under O(groups[].mig_backend=operator).
        type: str
      karpenter_nodepool:
        description: The Karpenter NodePool of the group, which the C(NodeOverlay) selects. Default the group's name as a DNS label.
        type: str
      machine_deployments:
        description: Not read here (M(gpufleet.sharing.node_group_annotations) annotates them); accepted so that one list serves both.
        type: list
        elements: dict
  dest:
    description: The directory of the two files (the playbooks pass C(gpufleet_report_dir)); created when missing.
    type: path
    required: true
  configs:
    description: Sharing configs, as O(gpufleet.sharing.gpu_sharing#module:configs).
    type: list
    elements: raw
  node_configs:
    description: Per node, its sharing config, as O(gpufleet.sharing.gpu_sharing#module:node_configs).
    type: dict
    default: {}
  default_config:
    description: The config of nodes no config selects.
    type: str
  mig_strategy:
    description: The ClusterPolicy's MIG strategy. Omitted, each node's config decides (its C(flags.migStrategy)).
    type: str
    choices: [none, single, mixed]
extends_documentation_fragment:
  - gpufleet.sharing.node_plans
attributes:
  check_mode:
    support: full
    description: Computes the templates and reports whether the files would change; writes nothing.
  diff_mode:
    support: full
    description: Shows each file before and after.
  platform:
    platforms: posix
    support: full
    description: Runs on the controller; reads no cluster and no host.
notes:
  - The Cluster API annotations hold one C(gpu-type)/C(gpu-count) pair. A group whose nodes advertise several
    extended resources (a mixed MIG layout) gets C(clusterapi.expressible=false) and the reason; split it per
    profile or keep its minimum size at 1 or more. MIG on DRA cannot scale from zero (kubernetes/autoscaler#10199).
  - Karpenter reads a C(NodeOverlay) only with its feature gate C(NodeOverlay) on (off by default).
seealso:
  - module: gpufleet.sharing.gpu_verify
"""

EXAMPLES = r"""
- name: Write the node-group templates of the inventory's GPU groups
  gpufleet.sharing.node_group_templates:
    dest: /var/lib/gpufleet/reports
    node_plans: "{{ hostvars | gpufleet.sharing.node_plans(groups['gpu_hosts']) }}"
    groups:
      - name: a100_inference
        nodes: [a100-inf-01, a100-inf-02]
        capacity: {cpu: "64", memory: 512Gi}
      - name: h100_training
        nodes: [h100-trn-01]
        taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
templates:
  description: The content of C(node-group-templates.json), C(groups) -> per group its template.
  returned: success
  type: dict
  sample: {"groups": {"h100_training": {"resources": {"nvidia.com/gpu": 2}, "labels": {}, "taints": [],
           "clusterapi": {"expressible": true, "reason": "one extended resource (nvidia.com/gpu) describes the group",
                          "annotations": {"capacity.cluster-autoscaler.kubernetes.io/gpu-count": "2"}},
           "aws_asg_tags": {}, "karpenter_node_overlay": {}}}}
files:
  description: The paths of the two files.
  returned: success
  type: list
  elements: str
"""

import os
import tempfile
from typing import Optional

from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import NODE_PLANS_ARGSPEC
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._node_groups import (
    NodeGroup, node_group_templates, plan_groups, render_files)

ARGUMENT_SPEC = dict(
    groups=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        nodes=dict(type="list", elements="str", required=True),
        backend=dict(type="str", choices=["device-plugin", "dra"], default="device-plugin"),
        taints=dict(type="list", elements="dict", default=[]),
        capacity=dict(type="dict", default={}),
        mig_backend=dict(type="str", choices=["host", "operator"], default="host"),
        mig_config=dict(type="str"),
        karpenter_nodepool=dict(type="str"),
        machine_deployments=dict(type="list", elements="dict"),
    )),
    dest=dict(type="path", required=True),
    configs=dict(type="list", elements="raw"),
    node_configs=dict(type="dict", default={}),
    default_config=dict(type="str"),
    mig_strategy=dict(type="str", choices=["none", "single", "mixed"]),
    **NODE_PLANS_ARGSPEC,
)


def main() -> None:
    GpuFleetModule(ARGUMENT_SPEC).run(run)


def read_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def write_text(path: str, text: str) -> None:
    """Replace the file at once (a reader never sees half of it)."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".%s." % os.path.basename(path))
    with os.fdopen(handle, "w", encoding="utf-8") as stream:
        stream.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


def run(mod: GpuFleetModule) -> None:
    p = mod.params
    groups = [NodeGroup(g["name"], tuple(g["nodes"]), g["backend"], tuple(g["taints"]), dict(g["capacity"]),
                        g["mig_backend"], g["mig_config"], g["karpenter_nodepool"]) for g in p["groups"]]
    with mod.failing_on("no node-group templates"):
        fleet, hosts = plan_groups(p, groups)
        doc = node_group_templates(groups, fleet, hosts)
    mod.result.update(templates=doc, files=[])
    if os.path.exists(p["dest"]) and not os.path.isdir(p["dest"]):
        mod.fail("dest %s is not a directory" % p["dest"])
    for name, text in sorted(render_files(doc).items()):
        path = os.path.join(p["dest"], name)
        mod.result["files"].append(path)
        before = read_text(path)
        if mod.changes.record(path, before, text) and not mod.check_mode:
            os.makedirs(p["dest"], exist_ok=True)
            write_text(path, text)


if __name__ == "__main__":
    main()
