# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The options that choose the fleet a cluster module plans over (``base._argspecs.FLEET_ARGSPEC``):
gpu_quotas and gpu_claim_templates. gpu_verify documents the same options in its own words (what is
verified)."""

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r"""
options:
  nodes:
    description: Nodes to plan; empty means every GPU node.
    type: list
    elements: str
    default: []
  node_selector:
    description: Label selector limiting the nodes planned.
    type: str
  configs:
    description: The sharing configs, as for M(gpufleet.sharing.gpu_verify); omitted, the cluster's ConfigMap is read.
    type: list
    elements: raw
  node_configs:
    description: Node name to sharing config name.
    type: dict
    default: {}
  default_config:
    description: The default sharing config.
    type: str
  mig_strategy:
    description: The ClusterPolicy MIG strategy to plan for; omitted, the ClusterPolicy's.
    type: str
    choices: [none, single, mixed]
  cluster_policy_name:
    description: The ClusterPolicy to read; omitted, the only one (or none).
    type: str
  operator_namespace:
    description: The GPU Operator's namespace (its device-plugin ConfigMap).
    type: str
    default: gpu-operator
"""
