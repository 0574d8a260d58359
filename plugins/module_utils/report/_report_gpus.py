# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Each node's GPUs for the reports (issue 24): the MIG placements the planner computes, next to
the instances the host's read found (profile, slice position, device UUID).

Pure, no I/O. The verification report (JSON) carries this as ``gpus``; the HTML report draws it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet._fleet_plan import HostPlan
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._mig_catalog import GpuModel, find_model
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_parted import instance_profile
from ansible_collections.gpufleet.sharing.plugins.module_utils.mig._mig_planner import LayoutError, plan_layout
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._expected import ExpectedNode
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import SharingError


def live_instances(fact: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The MIG instances a gpu_facts entry holds: profile, start, size and device UUID."""
    found = []
    for instance in ((fact or {}).get("mig") or {}).get("instances") or []:
        placement = instance.get("placement") or {}
        found.append({"profile": instance_profile(instance), "start": placement.get("start"),
                      "size": placement.get("size"), "uuid": instance.get("uuid")})
    return sorted(found, key=lambda i: (i["start"] is None, i["start"] or 0, i["profile"]))


def _compute(model: GpuModel, profile: str) -> Optional[int]:
    """Compute slices of a profile ('1c.3g.40gb': the compute instance's 1)."""
    head = profile.split(".", 1)[0]
    if head.endswith("c") and head[:-1].isdigit():
        return int(head[:-1])
    found = model.profile(profile)
    return found.compute_slices if found is not None else None


def placed(model: Optional[GpuModel], layout: Optional[Mapping[str, int]],
           live: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The GPU's instances on its slice grid. When the host holds the planned layout (the same
    profiles, wherever the driver put them), the instances as found, with their device UUIDs;
    otherwise the placements the planner computes, each ``found`` (with its UUID) when the host has
    that instance at that place, and in ``other`` what the host holds that the plan does not."""
    wanted = sorted(p for p, n in (layout or {}).items() for _unused in range(int(n)))
    if live and model is not None and sorted(i["profile"] for i in live) == wanted:
        return {"instances": [dict(i, compute_slices=_compute(model, i["profile"]), found=True) for i in live],
                "other": [], "problem": ""}
    other = [dict(i, compute_slices=_compute(model, i["profile"]) if model else None) for i in live]
    if not layout or model is None:
        return {"instances": [], "other": other, "problem": ""}
    try:
        plan = plan_layout(model, dict(layout))
    except LayoutError as exc:
        return {"instances": [], "other": other, "problem": "; ".join(exc.problems)}
    instances = []
    for placement in sorted(plan.placements, key=lambda p: p.start):
        match = next((i for i in other if (i["profile"], i["start"]) == (placement.profile, placement.start)), None)
        if match is not None:
            other.remove(match)
        instances.append({"profile": placement.profile, "start": placement.start, "size": placement.size,
                          "compute_slices": _compute(model, placement.profile),
                          "uuid": match["uuid"] if match else None, "found": match is not None})
    return {"instances": instances, "other": other, "problem": ""}


def _gpu(index: int, planned: Mapping[str, Any], fact: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    name = (fact or {}).get("name") or planned.get("product") or planned.get("model")
    model = find_model(str(planned.get("model") or name or ""), (fact or {}).get("pci_device_id"))
    entry = {"index": int((fact or {}).get("index", index)), "uuid": (fact or {}).get("uuid"), "name": name,
             "model": model.key if model else planned.get("model"), "mig": bool(planned.get("mig")),
             "layout": dict(planned.get("mig") or {}),
             "memory_slices": model.memory_slices if model else None,
             "compute_slices": model.compute_slices if model else None}
    entry.update(placed(model, planned.get("mig"), live_instances(fact)))
    return entry


def planned_gpus(plan: HostPlan) -> List[Dict[str, Any]]:
    """One entry per GPU of a host's plan (declared GPUs expanded by their count)."""
    try:
        gpus = plan.planned_gpus() or []
    except SharingError:
        return []
    if plan.gpus:
        flat = [g for g in gpus for _unused in range(int(g.get("count", 1) or 1))]
        return [_gpu(i, g, None) for i, g in enumerate(flat)]
    return [_gpu(i, g, plan.gpu_facts[i] if i < len(plan.gpu_facts) else None) for i, g in enumerate(gpus)]


def from_expectation(expected: ExpectedNode) -> List[Dict[str, Any]]:
    """GPUs of a node without a host plan (read from its labels): counts only, no geometry."""
    gpus = expected.gpus
    if gpus is None:
        return []
    total = gpus.full_gpus + gpus.mig_gpus
    return [{"index": i, "uuid": None, "name": gpus.product, "model": None, "mig": i >= gpus.full_gpus, "layout": {},
             "memory_slices": None, "compute_slices": None, "instances": [], "other": [], "problem": ""}
            for i in range(total)]


def node_gpu_layouts(plans: Mapping[str, HostPlan], expected: Sequence[ExpectedNode]) -> Dict[str, List[Dict[str, Any]]]:
    """Node name -> its GPUs, for every node verified (the report's ``gpus``)."""
    layouts = {}
    for node in sorted(expected, key=lambda e: e.node):
        plan = plans.get(node.node)
        layouts[node.node] = (planned_gpus(plan) if plan is not None else []) or from_expectation(node)
    return layouts
