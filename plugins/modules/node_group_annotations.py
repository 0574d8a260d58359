#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_group_annotations
short_description: Put a node group's scale-from-zero annotations on its Cluster API MachineDeployments
version_added: 0.5.0
description:
  - Sets the Cluster Autoscaler's C(capacity.cluster-autoscaler.kubernetes.io/) annotations of each node group's
    template (M(gpufleet.sharing.node_group_templates), C(clusterapi.annotations)) on the group's
    MachineDeployments (C(cluster.x-k8s.io/v1beta2)), so that the autoscaler can scale the group from zero.
  - Where the template says C(clusterapi.expressible=false), the GPU annotations (C(gpu-type), C(gpu-count),
    C(dra-driver)) are removed, so that no stale pair describes a node the group no longer makes; the
    others of the template are not set there.
  - Every other annotation stays as it is. Every MachineDeployment is read first; one that does not exist
    fails the module, naming it, before anything is changed.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
options:
  templates:
    description: The templates, as M(gpufleet.sharing.node_group_templates) returns them (RV(gpufleet.sharing.node_group_templates#module:templates)).
    type: dict
    required: true
  groups:
    description:
      - The node groups, as the filter P(gpufleet.sharing.node_groups#filter) gives them; only C(name) and
        C(machine_deployments) are read, other keys are ignored.
      - C(machine_deployments) lists C({name, namespace}) (namespace default V(default)), from the inventory
        variable C(gpufleet_machine_deployments) of the group.
    type: list
    elements: dict
    required: true
seealso:
  - module: gpufleet.sharing.node_group_templates
"""

EXAMPLES = r"""
- name: Annotate the MachineDeployments of each node group
  gpufleet.sharing.node_group_annotations:
    templates: "{{ autoscaling_templates.templates }}"
    groups:
      - name: h100_training
        machine_deployments: [{name: h100-workers, namespace: capi-clusters}]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
machine_deployments:
  description: Per MachineDeployment annotated, its group, namespace, name and whether it changed.
  returned: success
  type: list
  elements: dict
"""

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._node_group_annotations import annotated, targets, wanted
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule

ARGUMENT_SPEC = dict(
    templates=dict(type="dict", required=True),
    groups=dict(type="list", elements="dict", required=True),
)
KIND = "MachineDeployment"


def main() -> None:
    ClusterModule(ARGUMENT_SPEC).run(run)


def run(mod: ClusterModule) -> None:
    p = mod.params
    with mod.failing_on("nothing was annotated"):
        found = targets(p["groups"], p["templates"])
    objects = {(ns, name): mod.k8s.get(KIND, name, namespace=ns) for _group, ns, name in found}
    missing = ["MachineDeployment %s/%s of node group %r does not exist" % (ns, name, group)
               for group, ns, name in found if objects[(ns, name)] is None]
    if missing:
        mod.fail("nothing was annotated: %s" % "; ".join(missing), problems=missing)
    mod.result["machine_deployments"] = []
    for group, ns, name in found:
        values = wanted(p["templates"], group)
        before = dict((objects[(ns, name)].get("metadata") or {}).get("annotations") or {})
        after = annotated(before, values)
        changed = mod.changes.record("MachineDeployment %s/%s annotations" % (ns, name), before, after)
        if changed:
            mod.k8s.set_annotations(KIND, name, values, namespace=ns)
        mod.result["machine_deployments"].append({"group": group, "namespace": ns, "name": name, "changed": changed})


if __name__ == "__main__":
    main()
