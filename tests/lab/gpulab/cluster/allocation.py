"""Device allocation of the lab kubelet (the device manager's part of pod admission). Pure.

Extended resources are integers; a resource no plugin publishes is checked against the node's
allocatable the way the kubelet's admission predicate does. Each container gets distinct device
IDs (a MIG device or a time-slicing replica is never handed out twice), spread over the physical
devices the way the plugin's preferred allocation does (``packed`` onto the fewest GPUs with the
config's ``flags.plugin.sharedDevicesAllocationPolicy``, docs/reference/specs.md §9.11);
``failRequestsGreaterThanOne`` refuses requests > 1 (docs/reference/specs.md §9.3).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Set

from gpulab.cluster import devices as devmod
from gpulab.cluster.objects import Obj


class Rejected(Exception):
    """Admission refused the pod: it fails with this reason and message."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def container_requests(container: Mapping[str, Any]) -> Dict[str, int]:
    """Extended-resource requests of a container (limits are authoritative for them)."""
    resources = container.get("resources") or {}
    merged = dict(resources.get("requests") or {})
    merged.update(resources.get("limits") or {})
    result: Dict[str, int] = {}
    for name, quantity in merged.items():
        if "/" in name and not name.split("/")[0].endswith("kubernetes.io"):
            try:
                result[name] = int(float(str(quantity)))
            except ValueError:
                continue
    return result


def pod_extended_requests(pod: Mapping[str, Any]) -> Dict[str, int]:
    total: Dict[str, int] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, count in container_requests(container).items():
            total[name] = total.get(name, 0) + count
    return total


def spread_pick(candidates: Iterable[devmod.Device], taken: Iterable[str], wanted: int,
                packed: bool = False) -> Optional[List[devmod.Device]]:
    """Pick `wanted` free devices: `distributed` prefers physical devices with the fewest replicas in
    use; `packed` prefers the GPU with the most devices in use (replicas and MIG devices alike)."""
    taken_set = set(taken)
    pool = list(candidates)

    def unit(device: devmod.Device) -> str:
        return device.gpu_uuid if packed else device.physical_id

    usage: Dict[str, int] = {}
    for device in pool:
        if device.id in taken_set:
            usage[unit(device)] = usage.get(unit(device), 0) + 1
    free = [device for device in pool if device.id not in taken_set]
    if len(free) < wanted:
        return None
    chosen: List[devmod.Device] = []
    sign = -1 if packed else 1
    for _round in range(wanted):
        best = min(free, key=lambda d: (sign * usage.get(unit(d), 0), pool.index(d)))
        chosen.append(best)
        free.remove(best)
        usage[unit(best)] = usage.get(unit(best), 0) + 1
    return chosen


def _int_quantity(value: Any) -> int:
    try:
        return int(float(str(value)))
    except ValueError:
        return 0


def _resource_of(device_id: str, published: Optional[devmod.NodeDevices]) -> Optional[str]:
    if published is None:
        return None
    for resource, found in published.devices.items():
        if any(device.id == device_id for device in found):
            return resource
    return None


def _check_capacity(pod: Obj, allocatable: Mapping[str, Any], published: Optional[devmod.NodeDevices],
                    used: Iterable[str]) -> None:
    for resource, wanted in pod_extended_requests(pod).items():
        have = _int_quantity(allocatable.get(resource, "0"))
        in_use = sum(1 for device_id in used if _resource_of(device_id, published) == resource)
        if wanted + in_use > have:
            raise Rejected(
                f"OutOf{resource}",
                f"Pod was rejected: Node didn't have enough resource: {resource}, requested: {wanted}, used: {in_use}, capacity: {have}",
            )


def _pick(published: Optional[devmod.NodeDevices], resource: str, wanted: int,
          taken: Set[str]) -> List[devmod.Device]:
    """`wanted` devices of `resource` not in `taken` (none for a resource no plugin serves)."""
    if published is None or resource not in published.devices:
        if resource.startswith("nvidia.com/"):
            raise Rejected(
                "UnexpectedAdmissionError",
                f"Allocate failed due to no healthy devices present; cannot allocate unhealthy devices {resource}, which is unexpected",
            )
        return []
    if published.max_request(resource) == 1 and wanted > 1:
        raise Rejected(
            "UnexpectedAdmissionError",
            "Allocate failed due to rpc error: code = Unknown desc = request for "
            f"'{resource}: {wanted}' too large: maximum request size for shared resources is 1, which is unexpected",
        )
    chosen = spread_pick(published.devices[resource], taken, wanted, published.sharing.allocation_policy == "packed")
    if chosen is None:
        raise Rejected(
            "UnexpectedAdmissionError",
            f"Allocate failed due to requested number of devices unavailable for {resource}. Requested: {wanted}, Available: "
            f"{len([d for d in published.devices[resource] if d.id not in taken])}, which is unexpected",
        )
    return chosen


def allocate(pod: Obj, allocatable: Mapping[str, Any], published: Optional[devmod.NodeDevices],
             used: Iterable[str]) -> Dict[str, List[devmod.Device]]:
    """Devices per container name for `pod` on a node (`used`: device IDs already allocated).
    Raises Rejected."""
    used = list(used)
    _check_capacity(pod, allocatable, published, used)
    allocations: Dict[str, List[devmod.Device]] = {}
    taken = set(used)
    for container in pod["spec"].get("containers") or []:
        picked: List[devmod.Device] = []
        for resource, wanted in sorted(container_requests(container).items()):
            if wanted <= 0:
                continue
            chosen = _pick(published, resource, wanted, taken)
            taken.update(device.id for device in chosen)
            picked.extend(chosen)
        allocations[container["name"]] = picked
    return allocations


__all__ = ["Rejected", "allocate", "container_requests", "pod_extended_requests", "spread_pick"]
