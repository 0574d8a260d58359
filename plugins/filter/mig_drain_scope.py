# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain scope of one host's MIG change: the pods of the GPUs that change, or the whole node and why."""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Sequence

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._kubelet_devices import (
    CheckpointError,
    DeviceHolder,
    parse_checkpoint,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_drain_scope import MIG_PARTED, decide

DOCUMENTATION = r"""
name: mig_drain_scope
short_description: Which pods a host MIG change evicts - those of the GPUs that change, or the whole node and why
version_added: 0.4.0
description:
  - From the host's plan (M(gpufleet.sharing.mig_config)'s C(plan)), its GPUs as M(gpufleet.sharing.gpu_facts)
    reads them and the text of the kubelet's device manager checkpoint
    (C(/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint)), or on a DRA node the pods that hold its
    devices through ResourceClaims (O(holders)), says whether the change may evict only
    the pods that hold a device of the GPUs that change (scope C(gpu)) or must drain the node (scope
    C(node)), with the reason (C(docs/reference/kubelet-devices.md)).
  - A missing or unreadable checkpoint, or one of another layout, gives the node scope with the reason.
options:
  _input:
    description: The host's plan (C(mig_config)'s C(plan)).
    type: dict
    required: true
  wanted:
    description: C(gpu) or C(node) (C(gpufleet_mig_drain_scope)).
    type: str
    required: true
  gpus:
    description: The host's GPUs (C(gpu_facts)' C(gpufleet_gpus)).
    type: list
    elements: dict
    required: true
  checkpoint:
    description: The checkpoint file's text; null when it could not be read.
    type: str
  backend:
    description:
      - The apply backend the rules assume. C(nvidia-mig-parted), the default, is the stricter for mode
        changes (it resets all GPUs and clears every MIG GPU's instances), so the answer is safe for either.
    type: str
    default: nvidia-mig-parted
  nvswitch:
    description: Whether the host has NVSwitches; assumed when not known.
    type: bool
    default: true
  gpu_backend:
    description:
      - The node's GPU backend, C(device-plugin) (the holders are read from O(checkpoint)) or C(dra) (from
        O(holders)).
    type: str
    default: device-plugin
  holders:
    description:
      - On a DRA node, the pods that hold its devices through ResourceClaims (M(gpufleet.sharing.fleet_info)'s
        C(device_holders) of the node); null when they could not be read (the node scope, with the reason).
    type: list
    elements: dict
  moves:
    description: The node changes GPU backend in this run (the node scope, with the reason).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Decide the drain scope
  ansible.builtin.set_fact:
    scope: >-
      {{ plan | gpufleet.sharing.mig_drain_scope('gpu', gpus=read.ansible_facts.gpufleet_gpus,
         checkpoint=read.files[path].content) }}
"""

RETURN = r"""
_value:
  description:
    - C(scope) (C(gpu) or C(node)), C(reason), C(gpus) (the indexes that change), C(evict) (pod UIDs),
      C(keep) (pod UIDs left running), C(reset_gpus), C(why) (pod UID -> which device of which GPU it holds).
  type: dict
"""


def mig_drain_scope(plan: Mapping[str, Any], wanted: str, gpus: Sequence[Mapping[str, Any]],
                    checkpoint: Optional[str] = None, backend: str = MIG_PARTED, nvswitch: bool = True,
                    gpu_backend: str = "device-plugin", moves: bool = False,
                    holders: Optional[Sequence[Mapping[str, Any]]] = None) -> Dict[str, Any]:
    if not isinstance(plan, Mapping) or not isinstance(plan.get("gpus"), list):
        raise AnsibleFilterError("mig_drain_scope: the input is not a plan that mig_config returned")
    changes = plan["gpus"]
    if wanted == "gpu" and gpu_backend == "dra" and not moves:
        if holders is None:
            return _node(changes, gpus, "the node's ResourceClaims could not be read")
        try:
            read = [DeviceHolder(str(h["pod_uid"]), str(h["container"]), str(h["resource"]), str(h["device_id"]))
                    for h in holders]
        except (KeyError, TypeError) as exc:
            raise AnsibleFilterError("mig_drain_scope: holders are not fleet_info's device_holders: %s" % exc) from exc
        return _decide(wanted, changes, gpus, read, backend, nvswitch, gpu_backend, moves)
    if wanted == "gpu" and gpu_backend == "device-plugin" and not moves:
        if checkpoint is None:
            return _node(changes, gpus, "the kubelet's device checkpoint could not be read")
        try:
            found = parse_checkpoint(json.loads(checkpoint))
        except (ValueError, CheckpointError) as exc:
            return _node(changes, gpus, "the kubelet's device checkpoint is not as documented: %s" % exc)
    else:
        found = []
    return _decide(wanted, changes, gpus, found, backend, nvswitch, gpu_backend, moves)


def _decide(wanted: str, changes: Sequence[Mapping[str, Any]], gpus: Sequence[Mapping[str, Any]],
            holders: Sequence[DeviceHolder], backend: str, nvswitch: bool, gpu_backend: str,
            moves: bool) -> Dict[str, Any]:
    try:
        return decide(wanted, changes, gpus, holders, backend, nvswitch, gpu_backend, moves).to_dict()
    except ValueError as exc:
        raise AnsibleFilterError("mig_drain_scope: %s" % exc) from exc


def _node(changes: Sequence[Mapping[str, Any]], gpus: Sequence[Mapping[str, Any]],
          reason: str) -> Dict[str, Any]:
    result = decide("node", changes, gpus, [], MIG_PARTED, True).to_dict()
    result["reason"] = reason
    return result


class FilterModule:
    def filters(self) -> Dict[str, Any]:
        return {"mig_drain_scope": mig_drain_scope}
