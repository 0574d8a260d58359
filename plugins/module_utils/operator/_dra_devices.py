# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node's DRA kubelet plugin should publish, from the host's GPU read, and what it publishes (pure).

The real driver (kubernetes-sigs/dra-driver-nvidia-gpu v0.5.0, ``cmd/gpu-kubelet-plugin/deviceinfo.go`` and
``mig.go``) publishes one device per full GPU (attributes ``type`` = gpu, ``uuid``) and one per MIG
device (``type`` = mig, ``uuid``, ``parentUUID``, ``profile``) in ``ResourceSlice``s of driver
``gpu.nvidia.com``; a GPU in MIG mode is not published as a whole GPU. It reads the GPUs when it starts.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple

DRIVER = "gpu.nvidia.com"
Device = Tuple[str, str, str]  # (type, profile or "", the whole GPU's uuid)


def expected_devices(gpus: Sequence[Mapping[str, Any]]) -> List[Device]:
    """From ``gpu_facts``' ``gpufleet_gpus``: a GPU with MIG on gives its MIG devices, otherwise itself."""
    found: List[Device] = []
    for gpu in gpus:
        mig = gpu.get("mig") if isinstance(gpu.get("mig"), Mapping) else {}
        if mig.get("current"):
            found += [("mig", str(i.get("profile")), str(gpu.get("uuid"))) for i in mig.get("instances") or []]
        else:
            found.append(("gpu", "", str(gpu.get("uuid"))))
    return sorted(found)


def _attribute(device: Mapping[str, Any], name: str) -> str:
    value = (device.get("attributes") or {}).get(name) or {}
    return str(value.get("string", "")) if isinstance(value, Mapping) else ""


def published_devices(slices: Sequence[Mapping[str, Any]], node: str) -> List[Device]:
    """The GPU and MIG devices the node's ResourceSlices of ``gpu.nvidia.com`` list."""
    found: List[Device] = []
    for item in slices:
        spec = item.get("spec") or {}
        if spec.get("driver") != DRIVER or spec.get("nodeName") != node:
            continue
        for device in spec.get("devices") or []:
            kind = _attribute(device, "type")
            if kind == "gpu":
                found.append(("gpu", "", _attribute(device, "uuid")))
            elif kind == "mig":
                found.append(("mig", _attribute(device, "profile"), _attribute(device, "parentUUID")))
    return sorted(found)


def _counted(devices: Sequence[Device]) -> Dict[Device, int]:
    counts: Dict[Device, int] = {}
    for device in devices:
        counts[device] = counts.get(device, 0) + 1
    return counts


def _label(device: Device) -> str:
    kind, profile, parent = device
    return "MIG %s on GPU %s" % (profile, parent) if kind == "mig" else "GPU %s" % parent


def device_differences(expected: Sequence[Device], published: Sequence[Device]) -> List[str]:
    """Each device kind whose count differs, as 'GPU-x: 2 x MIG 1g.10gb planned, 1 published'."""
    want, have = _counted(expected), _counted(published)
    return ["%s: %d planned, %d published" % (_label(device), want.get(device, 0), have.get(device, 0))
            for device in sorted(set(want) | set(have)) if want.get(device, 0) != have.get(device, 0)]
