# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which container holds which GPU: the kubelet's device manager checkpoint, parsed. Pure.

The kubelet records every device-plugin allocation in
``/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint`` (JSON; kubernetes
``pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go``): ``Data.PodDeviceEntries`` (``PodUID``,
``ContainerName``, ``ResourceName``, ``DeviceIDs``: NUMA node -> device IDs), ``Data.RegisteredDevices``
and ``Checksum``. The file carries no format version; the checksum is a hash of a Go-specific dump of
the struct and is not verified here: a file that does not parse as this layout is refused, naming
what is wrong (docs/reference/kubelet-devices.md).

NVIDIA's device plugin names a whole GPU by its UUID (``GPU-...``), a MIG device by its MIG UUID
(``MIG-...``), and a time-sliced or MPS replica ``<id>::<n>`` (NVIDIA/k8s-device-plugin
v0.17.0 ``internal/rm/devices.go``: a device's ID is its UUID, ``NewAnnotatedID``); ``gpu_of`` maps each to its GPU's index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

CHECKPOINT_PATH = "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"
REPLICA_SEPARATOR = "::"


class CheckpointError(ValueError):
    """The checkpoint file is not the kubelet's device manager checkpoint as documented."""


@dataclass(frozen=True)
class DeviceHolder:
    pod_uid: str
    container: str
    resource: str
    device_id: str


def base_device_id(device_id: str) -> str:
    """The physical device of a replica ID (``GPU-x::3`` -> ``GPU-x``); other IDs as they are."""
    return device_id.split(REPLICA_SEPARATOR, 1)[0]


def _entry_holders(number: int, entry: Any) -> List[DeviceHolder]:
    where = "PodDeviceEntries[%d]" % number
    if not isinstance(entry, Mapping):
        raise CheckpointError("%s: not an object" % where)
    fields = {}
    for key in ("PodUID", "ContainerName", "ResourceName"):
        value = entry.get(key)
        if not isinstance(value, str) or not value:
            raise CheckpointError("%s: %s is missing or not a string" % (where, key))
        fields[key] = value
    per_numa = entry.get("DeviceIDs")
    if not isinstance(per_numa, Mapping):
        raise CheckpointError("%s: DeviceIDs is not a map of NUMA node to device IDs" % where)
    holders = []
    for numa, ids in sorted(per_numa.items()):
        if not isinstance(ids, list) or not all(isinstance(one, str) for one in ids):
            raise CheckpointError("%s: DeviceIDs[%s] is not a list of device IDs" % (where, numa))
        holders.extend(DeviceHolder(fields["PodUID"], fields["ContainerName"], fields["ResourceName"], one)
                       for one in ids)
    return holders


def parse_checkpoint(data: Any) -> List[DeviceHolder]:
    """Every (pod, container, resource, device ID) of the checkpoint's JSON object."""
    if not isinstance(data, Mapping) or not isinstance(data.get("Data"), Mapping):
        raise CheckpointError("not a device manager checkpoint: no Data object")
    entries = data["Data"].get("PodDeviceEntries")
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise CheckpointError("Data.PodDeviceEntries is not a list")
    holders: List[DeviceHolder] = []
    for number, entry in enumerate(entries):
        holders.extend(_entry_holders(number, entry))
    return holders


def device_gpu_map(gpus: Sequence[Mapping[str, Any]]) -> Dict[str, int]:
    """GPU UUID and MIG device UUID -> GPU index, from gpu_facts' GPUs."""
    found: Dict[str, int] = {}
    for gpu in gpus:
        index = int(gpu["index"])
        if gpu.get("uuid"):
            found[str(gpu["uuid"])] = index
        for instance in (gpu.get("mig") or {}).get("instances") or []:
            for compute in instance.get("compute_instances") or []:
                if compute.get("uuid"):
                    found[str(compute["uuid"])] = index
            if instance.get("uuid"):
                found[str(instance["uuid"])] = index
    return found


def gpu_of(device_id: str, devices: Mapping[str, int]) -> Optional[int]:
    return devices.get(base_device_id(device_id))


DRA_DRIVER = "gpu.nvidia.com"


def _slice_uuids(slices: Sequence[Mapping[str, Any]], node: str, driver: str) -> Dict[Tuple[str, str], str]:
    """(pool, device name) -> the device's UUID (a MIG device's own, else its GPU's ``parentUUID``)."""
    found: Dict[Tuple[str, str], str] = {}
    for one in slices:
        spec = one.get("spec") or {}
        if spec.get("driver") != driver or spec.get("nodeName") != node:
            continue
        pool = str((spec.get("pool") or {}).get("name") or "")
        for device in spec.get("devices") or []:
            attributes = device.get("attributes") or {}
            uuid = (attributes.get("uuid") or attributes.get("parentUUID") or {}).get("string")
            if uuid:
                found[(pool, str(device.get("name")))] = str(uuid)
    return found


def claim_holders(claims: Sequence[Mapping[str, Any]], slices: Sequence[Mapping[str, Any]], node: str,
                  driver: str = DRA_DRIVER) -> List[DeviceHolder]:
    """On a DRA node: the pods that hold a GPU through a ResourceClaim, one holder per (pod, device).

    A claim's ``status.allocation.devices.results`` name each allocated device by driver, pool and
    name, and ``status.reservedFor`` the pods that use it (Kubernetes resource.k8s.io/v1); the node's
    ResourceSlices give each device's ``uuid`` (a MIG device: ``parentUUID`` names its GPU) as NVIDIA's
    DRA driver publishes them. A result whose device is in no slice of the node keeps its name as the
    device ID, so that it maps to no GPU and the caller drains the node (the read is stale)."""
    uuids = _slice_uuids(slices, node, driver)
    holders: List[DeviceHolder] = []
    for claim in claims:
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        pods = [ref for ref in status.get("reservedFor") or [] if ref.get("resource") == "pods" and ref.get("uid")]
        where = "claim %s/%s" % ((claim.get("metadata") or {}).get("namespace"), (claim.get("metadata") or {}).get("name"))
        for result in results:
            if result.get("driver") != driver:
                continue
            key = (str(result.get("pool") or ""), str(result.get("device") or ""))
            if key[0] != node and key not in uuids:
                continue  # another node's device (a network-attached pool is not a GPU of this host)
            device_id = uuids.get(key, "%s/%s" % key)
            holders.extend(DeviceHolder(str(ref["uid"]), where, driver, device_id) for ref in pods)
    return holders


def holders_by_gpu(holders: Sequence[DeviceHolder], devices: Mapping[str, int],
                   prefixes: Tuple[str, ...] = ("nvidia.com/", DRA_DRIVER)
                   ) -> Tuple[Dict[int, List[DeviceHolder]], List[DeviceHolder]]:
    """(GPU index -> its holders, holders of an NVIDIA device that maps to no GPU of the read)."""
    per_gpu: Dict[int, List[DeviceHolder]] = {}
    unknown: List[DeviceHolder] = []
    for holder in holders:
        if not holder.resource.startswith(prefixes):
            continue
        index = gpu_of(holder.device_id, devices)
        if index is None:
            unknown.append(holder)
        else:
            per_gpu.setdefault(index, []).append(holder)
    return per_gpu, unknown
