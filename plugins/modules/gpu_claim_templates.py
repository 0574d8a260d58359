#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_claim_templates
short_description: DRA DeviceClasses and ResourceClaimTemplates for every device kind the fleet plan gives
version_added: 0.5.0
description:
  - For the nodes on the DRA backend, computes from the same fleet plan as M(gpufleet.sharing.gpu_verify) the
    devices NVIDIA's DRA kubelet plugin will publish (one per MIG device, one per GPU with MIG off), and from
    them the device kinds a pod can ask for; a MIG profile (V(mig-1g-10gb)), a full GPU of one product
    (V(gpu-nvidia-h100-80gb-hbm3)), or a time-sliced or MPS full GPU (V(...-time-slicing), V(...-mps)) on a
    node whose sharing config says so, which needs the driver's alpha gate C(TimeSlicingSettings) or C(MPSSupport).
  - Applies a C(resource.k8s.io/v1) C(DeviceClass) per kind of the plan (V(<kind>.gpufleet.sharing), the kind's CEL
    selector) and a C(ResourceClaimTemplate) named after the kind in each namespace O(claim_templates) names,
    so that a pod asks with C(resourceClaims[].resourceClaimTemplateName). See docs/dra.md.
  - Returns the Kueue C(deviceClassMappings) that charge each DeviceClass to the device plugin's resource name
    (RV(kueue_device_class_mappings)); M(gpufleet.sharing.gpu_quotas) returns the same for its quotas.
  - Objects carry C(app.kubernetes.io/managed-by=gpufleet.sharing). A planned object that exists without that
    label is refused by name before anything is written; owned objects the plan no longer names are deleted.
  - Bad input (a kind or MIG profile the plan does not have, a namespace that does not exist, a shared kind
    without its feature gate, a cluster without C(resource.k8s.io/v1)) fails naming it, before anything is written.
author:
  - gpufleet maintainers (@gpufleet)
extends_documentation_fragment:
  - gpufleet.sharing.k8s_auth
  - gpufleet.sharing.attributes.CLUSTER
  - gpufleet.sharing.node_plans
  - gpufleet.sharing.fleet
options:
  claim_templates:
    description:
      - The C(gpufleet_dra_claim_templates) inventory variable, each C({namespaces, kinds, count}). C(kinds) are
        device kind names, MIG profiles (V(1g.10gb)) or MIG resource names; omitted, every kind of the plan.
        C(count) is the number of devices each claim asks for (default V(1)), from 1 to 32 (Kubernetes gives one
        request at most 32 devices) and no more than one DRA node has of that kind (a claim's devices come from
        one node). At most 64 entries, 256 namespaces and 64 kinds an entry.
      - A template's spec cannot change in Kubernetes; one whose spec must change (another C(count)) is deleted
        and created again under its name (RV(replaced)). Claims already made from it keep their devices; pods
        created afterwards get the new spec. In check mode only the delete is sent, as a dry run.
      - Empty, every owned claim template is deleted (the DeviceClasses of the planned kinds stay).
    type: list
    elements: raw
    required: true
  dra_nodes:
    description: The nodes on the DRA backend; empty means every node of O(node_plans) and O(node_gpus).
    type: list
    elements: str
    default: []
  feature_gates:
    description: The DRA driver's feature gates (C(gpufleet_dra_feature_gates)), gate name to V(true) or V(false).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Claim templates for the teams' namespaces
  gpufleet.sharing.gpu_claim_templates:
    claim_templates:
      - namespaces: [vision, nlp]
      - namespaces: [batch]
        kinds: [1g.10gb]
    dra_nodes: [gpu-a, gpu-b]
    node_plans: "{{ hostvars | gpufleet.sharing.node_plans(groups['gpu_hosts']) }}"
  delegate_to: localhost
"""

RETURN = r"""
kinds:
  description: The device kinds of the DRA nodes' plan, with their DeviceClass, CEL selector and resource name.
  returned: always
  type: list
  elements: dict
  sample: [{name: mig-1g-10gb, type: mig, profile: 1g.10gb, resource: nvidia.com/mig-1g.10gb,
            device_class: mig-1g-10gb.gpufleet.sharing}]
templates:
  description: The claim templates applied, C(namespace/name).
  returned: always
  type: list
  elements: str
  sample: [vision/mig-1g-10gb]
replaced:
  description: The claim templates deleted and created again because their spec changed, C(namespace/name).
  returned: when a template's spec changed
  type: list
  elements: str
  sample: [vision/mig-1g-10gb]
devices:
  description: Per DRA node, the devices planned per kind.
  returned: always
  type: dict
  sample: {gpu-a: {mig-1g-10gb: 14}}
kueue_device_class_mappings:
  description: Kueue's C(resources.deviceClassMappings) for these DeviceClasses (the Kueue Configuration's, docs/quotas.md).
  returned: always
  type: list
  elements: dict
  sample: [{name: nvidia.com/mig-1g.10gb, deviceClassNames: [mig-1g-10gb.gpufleet.sharing]}]
"""

from collections import Counter
from typing import Any, Dict

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._cluster_module import ClusterModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_claims import (
    capacity_problems, fleet_kinds, gate_problems, parse_requests)
from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._claims_io import apply_all, dra_devices, read_owned, refusals
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._dra_objects import (
    device_class_mappings, mapping_problems, plan_objects)
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._argspecs import FLEET_ARGSPEC

ARGUMENT_SPEC: Dict[str, Any] = dict(
    claim_templates=dict(type="list", elements="raw", required=True),
    dra_nodes=dict(type="list", elements="str", default=[]),
    feature_gates=dict(type="dict", default={}),
    **FLEET_ARGSPEC,
)


def main() -> None:
    ClusterModule(ARGUMENT_SPEC, supports_check_mode=True).run(run)


def run(mod: ClusterModule) -> None:
    p = mod.params
    requests, problems = parse_requests(p["claim_templates"])
    devices, planned = dra_devices(mod, p["dra_nodes"])
    kinds = fleet_kinds(devices)
    classes, templates, named = plan_objects(requests, kinds)
    mappings = device_class_mappings(list(kinds.values()))
    problems += planned + named + capacity_problems(requests, kinds, devices)
    problems += gate_problems(kinds, p["feature_gates"]) + mapping_problems(mappings)
    mod.result.update(kinds=[k.as_dict() for k in kinds.values()], kueue_device_class_mappings=mappings,
                      devices={n: dict(sorted(Counter(d.kind.name for d in ds).items())) for n, ds in devices.items()},
                      templates=["%s/%s" % (t["metadata"]["namespace"], t["metadata"]["name"]) for t in templates])
    if problems:
        mod.fail("the claim templates cannot be applied, nothing was written: %s" % "; ".join(problems), problems=problems)
    owned = read_owned(mod)
    refused = refusals(mod, classes + templates, owned)
    if refused:
        mod.fail("refused, nothing was written: %s" % "; ".join(refused), problems=refused)
    apply_all(mod, owned, classes + templates)


if __name__ == "__main__":
    main()
