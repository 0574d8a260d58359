# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host plan options of gpu_sharing and gpu_verify and the device-plugin release they plan for
(``base._argspecs.NODE_PLANS_ARGSPEC``)."""

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r"""
options:
  node_plans:
    description:
      - The per-host plan, one entry per node, as the C(gpu_sharing) and C(verify) roles build it from
        the inventory (filter P(gpufleet.sharing.node_plans#filter)). Used to validate the configs and
        to compute what each node must advertise.
      - Each GPU's MIG layout is O(node_plans[].gpus[].mig), or, with O(node_plans[].gpu_facts), what
        the host's MIG selection (O(node_plans[].mig_config)) makes of the GPUs it has.
      - Nodes without a plan are read from their GPU Feature Discovery labels (physical GPU count,
        product and MIG devices).
    type: list
    elements: dict
    default: []
    suboptions:
      node:
        description: Kubernetes node name.
        type: str
        required: true
      gpus:
        description: Planned GPUs. Given, O(node_plans[].gpu_facts) is not used.
        type: list
        elements: dict
        suboptions:
          model:
            description: GPU model (catalog key such as V(H100-80GB), product name or PCI device id).
            type: str
          count:
            description: How many GPUs of this kind.
            type: int
            default: 1
          mig:
            description: MIG layout of each of these GPUs, profile -> count. Omitted, MIG is disabled.
            type: dict
          product:
            description: Product name as nvidia-smi prints it; without it only the suffix of product labels is checked.
            type: str
          pci_device_id:
            description: PCI device id, to tell models apart that share a name.
            type: str
      gpu_facts:
        description: The host's C(gpufleet_gpus) facts (M(gpufleet.sharing.gpu_facts)).
        type: list
        elements: dict
      mig_config:
        description:
          - The host's selected mig-parted config, as the C(mig) role takes it. Applied to O(node_plans[].gpu_facts)
            to get each GPU's planned layout; GPUs it does not select keep their current layout.
          - Not given (or empty) means V(all-disabled), MIG off, as everywhere in the collection.
        type: str
        default: all-disabled
      mig_configs:
        description: The host's extra named mig-parted configs (name -> items).
        type: dict
        default: {}
      sharing_config:
        description:
          - The host's sharing config, same fields as an entry of O(configs) without C(nodes). Hosts naming
            the same config must give the same content; they are added to its C(nodes).
        type: dict
  node_gpus:
    description:
      - Short form of O(node_plans) for planned GPUs, node name -> list of GPUs as in O(node_plans[].gpus)
        (a mapping with the fields of a O(node_plans) entry is taken as one). An entry here wins over
        the node's O(node_plans) entry.
    type: dict
    default: {}
  operator_version:
    description:
      - The GPU Operator chart version that runs (or will run) on the cluster, such as V(v26.7.0); the
        C(gpu_sharing) and C(verify) roles pass the C(gpu_operator) role's C(gpu_operator_chart_version).
      - The device-plugin release is derived from it (the table of every released GPU Operator chart, V(v22.9.0)
        to V(v26.7.0), in the collection's C(docs/reference/specs.md) §9.8). It decides what the plan may ask
        for and how the nodes advertise MIG devices (see O(device_plugin_version)).
      - A version that is not a released chart (a newer one, say) takes the device plugin of the nearest
        older released chart; the result's C(device_plugin.assumed) and a warning say which.
      - Used only when O(device_plugin_version) is not given and the ClusterPolicy does not name the
        device-plugin image version (C(spec.devicePlugin.version), what the installed chart runs).
        Neither known, V(v26.7.0) (the C(gpu_operator) role default) is assumed.
      - A value that is not C(vMAJOR.MINOR.PATCH) fails, naming it, before anything changes.
    type: str
  device_plugin_version:
    description:
      - The NVIDIA device-plugin version that runs, such as V(v0.19.3); wins over the ClusterPolicy and
        O(operator_version). A value that is not C(vMAJOR.MINOR.PATCH) fails, naming it.
      - From device plugin V(v0.20.0) (GPU Operator V(v26.7.0)) on, MPS honours
        C(fail_requests_greater_than_one=false), C(shared_devices_allocation_policy) exists, and MIG
        profiles with a suffix (C(+me), C(-me), C(+me.all), C(+gfx)) are their own resources
        (C(nvidia.com/mig-1g.10gb.me)); before it the first two are refused and a suffixed profile is
        expected under its base profile's resource (C(nvidia.com/mig-1g.10gb)).
    type: str
"""
