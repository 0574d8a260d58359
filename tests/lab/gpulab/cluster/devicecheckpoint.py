"""The device manager's checkpoint file, as the lab kubelet keeps it on each host.

The real kubelet records which container holds which device-plugin device in
``/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint`` (JSON), written after every
allocation and after it frees the devices of pods gone or finished. Its layout
(kubernetes/kubernetes pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go, read at commit
11626e98760934cc8d86c3868c204f7394540bdf; docs/reference/kubelet-devices.md):

    {"Data": {"PodDeviceEntries": [{"PodUID", "ContainerName", "ResourceName",
                                    "DeviceIDs": {"<NUMA node>": [ids]}, "AllocResp"}],
              "RegisteredDevices": {"<resource>": [ids]}},
     "Checksum": <uint32>}

(newer kubelets add ``BootID`` beside ``Data``, outside the checksum, omitted when empty; the lab
writes none, as the kubelets before it did.)

Device IDs are what NVIDIA's device plugin registers: the GPU UUID, the MIG device UUID, and for a
time-sliced or MPS replica ``<id>::<n>``. The lab's devices carry no NUMA affinity, so their IDs sit
under the kubelet's ``nodeWithoutTopology`` key, -1 (pkg/kubelet/cm/devicemanager/manager.go).

Modelling choices (tests/lab/README.md): the ``Checksum`` is an FNV-1a 32-bit hash of the lab's own
canonical JSON of ``Data``, not the kubelet's (a hash of a go-spew dump of the Go struct), and
``AllocResp`` is empty; the collection's reader verifies neither. DRA devices (``claim:`` resources)
are not in this file, as in the real kubelet (the DRA manager keeps its own state).
Lab hosts may not write the real ``/var/lib``: the file is ``<state>-kubelet/device-plugins/`` beside
the host's GPU state file ``<state>.json`` (``hosts/<name>/state-kubelet/...``, a path the host sees
as it is, the lab directory being visible inside every host). ``build`` is pure; ``write`` replaces the file atomically.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

from gpulab.cluster import devices as devmod

FILE_NAME = "kubelet_internal_checkpoint"
REAL_PATH = "/var/lib/kubelet/device-plugins/" + FILE_NAME
NO_TOPOLOGY = "-1"
CLAIM_PREFIX = "claim:"

# (pod uid, container name, devices)
Holder = Tuple[str, str, Sequence[devmod.Device]]


def fnv1a32(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def build(holders: Iterable[Holder], registered: Mapping[str, Sequence[devmod.Device]]) -> Dict[str, Any]:
    """The checkpoint's JSON object: one entry per (pod, container, resource), device IDs sorted."""
    entries: List[Dict[str, Any]] = []
    for uid, container, found in sorted(holders, key=lambda item: (item[0], item[1])):
        per_resource: Dict[str, List[str]] = {}
        for device in found:
            if device.resource.startswith(CLAIM_PREFIX):
                continue
            per_resource.setdefault(device.resource, []).append(device.id)
        for resource, ids in sorted(per_resource.items()):
            entries.append({"PodUID": uid, "ContainerName": container, "ResourceName": resource,
                            "DeviceIDs": {NO_TOPOLOGY: sorted(ids)}, "AllocResp": None})
    data = {"PodDeviceEntries": entries,
            "RegisteredDevices": {resource: sorted(device.id for device in found)
                                  for resource, found in sorted(registered.items())}}
    checksum = fnv1a32(json.dumps(data, sort_keys=True, separators=(",", ":")).encode("utf-8"))
    return {"Data": data, "Checksum": checksum}


def path_for(state_file: str) -> str:
    """The host's checkpoint file, beside its GPU state file (one per host, in a lab dir or a test's)."""
    state_file = os.path.abspath(state_file)
    stem = os.path.splitext(os.path.basename(state_file))[0]
    return os.path.join(os.path.dirname(state_file), stem + "-kubelet", "device-plugins", FILE_NAME)


def write(state_file: str, checkpoint: Mapping[str, Any]) -> None:
    target = path_for(state_file)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    temporary = target + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(checkpoint, handle)
    os.replace(temporary, target)


__all__ = ["FILE_NAME", "REAL_PATH", "build", "fnv1a32", "path_for", "write"]
