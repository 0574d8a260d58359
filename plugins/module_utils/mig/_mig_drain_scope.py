# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether a host's MIG change may evict only the pods of the GPUs that change (issue 38). Pure.

Inputs: the wanted scope (``gpufleet_mig_drain_scope``: ``gpu`` or ``node``), the host's plan per GPU
(``plan_to_dict``'s ``gpus``: ``index``, ``model``, ``before``, ``after``, ``mode_change``,
``layout_change``), gpu_facts' GPUs, the device holders (``_kubelet_devices``: the kubelet's checkpoint on a device-plugin node, the
ResourceClaims' allocations on a DRA node), the apply
backend and whether the host has NVSwitches (fabric manager). The answer is a ``ScopeDecision``: the
GPUs that change, the pods to evict and the pods that keep running, or the whole-node scope with
the reason. Facts (docs/reference/kubelet-devices.md, docs/reference/specs.md §4.1, §6.2):

* a layout change between MIG-enabled layouts needs no reset, and nvidia-mig-parted (v0.15.0,
  ``cmd/nvidia-mig-parted/apply/config.go``) leaves a GPU already at its layout untouched;
* a MIG **mode** change through nvidia-mig-parted (v0.15.0 ``apply/mode.go``) clears the instances of
  every MIG-enabled GPU of the config, and when a change stays pending resets all GPUs
  (``util/device.go`` ``ResetAllGPUs``): per GPU only on Hopper and later (no reset) and when no other
  GPU has MIG enabled; else -> node;
* on Ampere a mode change takes effect through a reset of that GPU (nvidia-smi backend: that GPU
  alone); on NVSwitch systems a single-GPU reset involves the NVLink fabric (fabric manager), which
  this collection does not model -> node;
* a GPU model the catalog does not know -> node (it cannot tell whether a reset is needed);
* an NVIDIA device held by a pod that maps to no GPU of the read (the read is stale, or another
  plugin's IDs) -> node: it cannot tell that pod's GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._kubelet_devices import (
    DeviceHolder,
    device_gpu_map,
    holders_by_gpu,
)
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import find_model

SCOPES = ("gpu", "node")
GPU_BACKENDS = ("device-plugin", "dra")
MIG_PARTED = "nvidia-mig-parted"


@dataclass(frozen=True)
class ScopeDecision:
    scope: str                       # "gpu" or "node"
    reason: str                      # why this scope (always said, never silent)
    gpus: Tuple[int, ...]            # indexes of the GPUs that change
    evict: Tuple[str, ...]           # pod UIDs holding a device of a changing GPU (gpu scope)
    keep: Tuple[str, ...]            # pod UIDs holding devices of untouched GPUs only
    reset_gpus: Tuple[int, ...]      # GPUs whose mode change takes effect through a reset of that GPU
    why: Tuple[Tuple[str, str], ...] = ()  # (pod UID, "container holds <device> of GPU <i>") per evicted pod

    def to_dict(self) -> Dict[str, Any]:
        return dict(scope=self.scope, reason=self.reason, gpus=list(self.gpus), evict=list(self.evict),
                    keep=list(self.keep), reset_gpus=list(self.reset_gpus),
                    why=dict((uid, text) for uid, text in self.why))


def _changed(changes: Sequence[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    return sorted((c for c in changes if c.get("mode_change") or c.get("layout_change")), key=lambda c: int(c["index"]))


def _mode_problem(change: Mapping[str, Any], backend: str, nvswitch: bool,
                  other_mig_gpus: Sequence[int]) -> Tuple[Optional[str], bool]:
    """(why the node scope is needed, or None; whether this GPU needs its own reset).
    ``other_mig_gpus``: the GPUs that do not change and have MIG enabled."""
    index = int(change["index"])
    model = find_model(str(change.get("model") or ""))
    if model is None:
        return ("GPU %d changes its MIG mode and its model %r is not in the catalog: whether it needs a "
                "reset is unknown" % (index, change.get("model"))), False
    reset = model.architecture == "ampere"
    if backend == MIG_PARTED and reset:
        return ("GPU %d (%s) needs a GPU reset for its MIG mode change, and nvidia-mig-parted resets all "
                "GPUs of the host (v0.15.0 apply/mode.go, util/device.go)" % (index, model.key)), True
    if backend == MIG_PARTED and other_mig_gpus:
        return ("GPU %d changes its MIG mode, and nvidia-mig-parted's mode step clears the MIG instances "
                "of every MIG-enabled GPU, GPU(s) %s included (v0.15.0 apply/mode.go)" % (
                    index, ", ".join(str(i) for i in other_mig_gpus))), False
    if reset and nvswitch:
        return ("GPU %d (%s) needs a GPU reset for its MIG mode change, and this host has NVSwitches: a "
                "single-GPU reset there involves the NVLink fabric (fabric manager)" % (index, model.key)), True
    return None, reset


def _node(reason: str, gpus: Sequence[int]) -> ScopeDecision:
    return ScopeDecision("node", reason, tuple(gpus), (), (), ())


def _explain(holder: DeviceHolder, index: int) -> str:
    if holder.container.startswith("claim "):  # a DRA node: the ResourceClaim holds it (claim_holders)
        return "%s holds %s (%s) of GPU %d" % (holder.container, holder.device_id, holder.resource, index)
    return "container %s holds %s (%s) of GPU %d" % (holder.container, holder.device_id, holder.resource, index)


def decide(wanted: str, changes: Sequence[Mapping[str, Any]], gpus: Sequence[Mapping[str, Any]],
           holders: Sequence[DeviceHolder], backend: str, nvswitch: bool, gpu_backend: str = "device-plugin",
           moves: bool = False) -> ScopeDecision:
    """The drain scope of one host's change, and the pods it evicts (see the module's docstring).
    ``gpu_backend``: the node's (``device-plugin`` or ``dra``); ``moves``: it changes backend in this run."""
    if wanted not in SCOPES:
        raise ValueError("drain scope must be one of %s, not %r" % (", ".join(SCOPES), wanted))
    changed = _changed(changes)
    indexes = tuple(int(c["index"]) for c in changed)
    if wanted == "node":
        return _node("gpufleet_mig_drain_scope is node", indexes)
    if moves:
        return _node("the node moves to another GPU backend in this run: every pod's devices change", indexes)
    if gpu_backend not in GPU_BACKENDS:
        return _node("GPU backend %r: the per-GPU scope reads device holders of %s nodes only" % (
            gpu_backend, " and ".join(GPU_BACKENDS)), indexes)
    resets: List[int] = []
    other_mig = [int(g["index"]) for g in gpus
                 if int(g["index"]) not in indexes and (g.get("mig") or {}).get("current")]
    for change in changed:
        if change.get("mode_change"):
            problem, reset = _mode_problem(change, backend, nvswitch, sorted(other_mig))
            if problem:
                return _node(problem, indexes)
            if reset:
                resets.append(int(change["index"]))
    per_gpu, unknown = holders_by_gpu(holders, device_gpu_map(gpus))
    if unknown:
        first = unknown[0]
        return _node("pod %s holds %s (%s), which is no GPU or MIG device of this host's read" % (
            first.pod_uid, first.device_id, first.resource), indexes)
    why: Dict[str, str] = {}
    for index in indexes:
        for holder in per_gpu.get(index, []):
            why.setdefault(holder.pod_uid, _explain(holder, index))
    keep = sorted({h.pod_uid for index, found in per_gpu.items() if index not in indexes for h in found} - set(why))
    reason = ("only GPU(s) %s change" % ", ".join(str(i) for i in indexes)) if indexes else "no GPU changes"
    return ScopeDecision("gpu", reason, indexes, tuple(sorted(why)), tuple(keep), tuple(resets),
                         tuple(sorted(why.items())))
