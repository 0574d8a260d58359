"""The ResourceSlice that NVIDIA's GPU kubelet plugin publishes for one node (pure).

From kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0 (read, not copied):
``cmd/gpu-kubelet-plugin/driver.go`` ``publishResources`` (without the DynamicMIG gate: ONE slice
in the pool named after the node, every allocatable device in it), ``nvlib.go``
``GetPerGpuAllocatableDevices`` (a GPU with MIG off is one device; a GPU with MIG on contributes
its existing MIG devices only, none when it has none), ``deviceinfo.go`` ``GpuInfo.GetDevice``,
``MigDeviceInfo.GetDevice`` and ``partitions.go`` ``PartDevAttributes`` (attributes and
capacities), ``deviceinfo.go``/``mig.go`` ``CanonicalName``/``ToCanonicalName`` (names
``gpu-<minor>`` and ``gpu-<parent minor>-mig-<profile without dots>-<GI profile id>-<placement
start>``). Versions go through semver (``580.95.05`` -> ``580.95.5``, ``9.0`` -> ``9.0.0``); NVML's
brand of these data-center GPUs is ``Nvidia`` (go-nvlib ``GetBrandAsString``), the architecture is
capitalised (``Hopper``). The lab GPU's minor number is its index. Not modelled: ``pcieRoot`` and
``addressingMode`` attributes, VFIO devices. With the DynamicMIG gate (``driver.go`` ``publishResources``,
``nvlib.go``) the plugin publishes every full GPU and every possible MIG placement (one device per GPU-instance
profile and placement start, named as above); the lab lists them in the one slice and leaves out the shared
counters (KEP 4815) that make a placement and its GPU exclusive.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping

from gpulab.cluster.devices import profile_specs
from gpulab.models import load_model
from gpulab.smi.common import cuda_version

DRIVER = "gpu.nvidia.com"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
Obj = Dict[str, Any]


def binary_si(value: int) -> str:
    """A byte count as resource.NewQuantity(v, BinarySI) prints it."""
    for suffix, factor in (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if value and value % factor == 0:
            return "%d%s" % (value // factor, suffix)
    return str(value)


def semver(text: str) -> str:
    parts = [int(p) for p in re.findall(r"\d+", str(text))[:3]]
    parts += [0] * (3 - len(parts))
    return "%d.%d.%d" % tuple(parts)


def mig_device_name(parent_minor: int, profile: str, gi_profile_id: int, placement_start: int) -> str:
    cleaned = re.sub(r"[^a-z0-9-.]", "-", profile.replace(".", "").lower()).strip("-").rstrip(".")
    return "gpu-%d-mig-%s-%d-%d" % (parent_minor, cleaned, gi_profile_id, placement_start)


def _common(gpu: Any, state: Any) -> Dict[str, Obj]:
    model = load_model(gpu.model)
    return {
        "productName": {"string": gpu.name},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": (gpu.architecture or model.architecture).capitalize()},
        "cudaComputeCapability": {"version": semver(gpu.compute_cap or model.compute_cap)},
        "driverVersion": {"version": semver(state.driver_version)},
        "cudaDriverVersion": {"version": semver(cuda_version(state))},
    }


def gpu_device(gpu: Any, state: Any) -> Obj:
    attributes = {"type": {"string": "gpu"}, "uuid": {"string": gpu.uuid}}
    attributes.update(_common(gpu, state))
    attributes[PCI_BUS_ID] = {"string": gpu.pci_bus_id.lower()}
    return {"name": "gpu-%d" % gpu.index, "attributes": attributes,
            "capacity": {"memory": {"value": binary_si(gpu.memory_total_mib << 20)}}}


def mig_device(gpu: Any, state: Any, gi: Any, ci: Any) -> Obj:
    spec = profile_specs(gpu.model).get(gi.profile)
    attributes = {"type": {"string": "mig"}, "uuid": {"string": ci.uuid}, "parentUUID": {"string": gpu.uuid},
                  "profile": {"string": ci.profile}}
    attributes.update(_common(gpu, state))
    attributes[PCI_BUS_ID] = {"string": gpu.pci_bus_id.lower()}
    capacity: Dict[str, Obj] = {}
    if spec is not None:
        for name, value in (("multiprocessors", spec.multiprocessors), ("copyEngines", spec.copy_engines),
                            ("decoders", spec.decoders), ("encoders", spec.encoders), ("jpegEngines", spec.jpegs),
                            ("ofaEngines", spec.ofas)):
            capacity[name] = {"value": str(value)}
        capacity["memory"] = {"value": binary_si(spec.memory_mib << 20)}
    for index in range(gi.start, gi.start + gi.size):
        capacity["memorySlice%d" % index] = {"value": "1"}
    return {"name": mig_device_name(gpu.index, ci.profile, gi.profile_id, gi.start), "attributes": attributes,
            "capacity": capacity}


def devices(state: Any) -> List[Obj]:
    """Every device the plugin would announce for this GPU state, sorted by name."""
    found: List[Obj] = []
    for gpu in state.gpus:
        if gpu.mig_current:
            found += [mig_device(gpu, state, gi, ci) for gi, ci in gpu.mig_devices()]
        else:
            found.append(gpu_device(gpu, state))
    return sorted(found, key=lambda device: device["name"])


def placement_device(gpu: Any, state: Any, profile: Any, start: int) -> Obj:
    """One possible MIG placement of a GPU under DynamicMIG (no MIG device exists yet: no uuid)."""
    attributes = {"type": {"string": "mig"}, "parentUUID": {"string": gpu.uuid}, "profile": {"string": profile.name}}
    attributes.update(_common(gpu, state))
    attributes[PCI_BUS_ID] = {"string": gpu.pci_bus_id.lower()}
    capacity = {"memory": {"value": binary_si(int(float(profile.memory_gib) * 1024) << 20)}}
    for index in range(start, start + profile.size):
        capacity["memorySlice%d" % index] = {"value": "1"}
    return {"name": mig_device_name(gpu.index, profile.name, profile.profile_id, start), "attributes": attributes,
            "capacity": capacity}


def dynamic_devices(state: Any) -> List[Obj]:
    """What the plugin announces with DynamicMIG: every full GPU, and for a MIG-capable GPU every placement of
    every GPU-instance profile of its model, sorted by name."""
    found: List[Obj] = []
    for gpu in state.gpus:
        found.append(gpu_device(gpu, state))
        if gpu.mig_capable:
            model = load_model(gpu.model)
            found += [placement_device(gpu, state, profile, start) for profile in model.profiles for start in profile.starts]
    return sorted(found, key=lambda device: device["name"])


def node_slice(node: Mapping[str, Any], announced: List[Obj], generation: int) -> Obj:
    """The plugin's one ResourceSlice for `node` with the `announced` devices (owned by the Node)."""
    meta = node["metadata"]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"generateName": "%s-%s-" % (meta["name"], DRIVER),
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": meta["name"],
                                          "uid": meta.get("uid", ""), "controller": True}]},
        "spec": {"driver": DRIVER, "nodeName": meta["name"],
                 "pool": {"name": meta["name"], "generation": generation, "resourceSliceCount": 1},
                 "devices": announced},
    }


__all__ = ["DRIVER", "PCI_BUS_ID", "binary_si", "devices", "dynamic_devices", "placement_device", "gpu_device", "mig_device",
           "mig_device_name", "node_slice", "semver"]
