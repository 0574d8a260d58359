"""The GPU kubelet plugin of NVIDIA's DRA driver, as a lab container program.

A pod of the chart's ``<name>-kubelet-plugin`` DaemonSet (image ``*k8s-dra-driver-gpu*``) runs
this program for its ``gpus`` container (kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0,
``deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml``); the
``compute-domains`` container just runs. At start the plugin:

1. reads ``FEATURE_GATES`` (``Key=bool,...``, the chart's ``featureGates`` value) and refuses
   unknown gates and the combinations ``pkg/featuregates/featuregates.go`` refuses (DynamicMIG
   with PassthroughSupport, NVMLDeviceHealthCheck or MPSSupport), with the driver's wording;
2. refuses to run while a pod of the NVIDIA device plugin runs on its node (lab modelling choice:
   the chart's ``validation.yaml`` refuses ``resources.gpus.enabled`` unless the operator says the
   device plugin is off, ``gpuResourcesEnabledOverride``; the lab makes the collision visible on the
   node instead of leaving two allocators to hand out the same GPUs);
3. snapshots the node's devices from the GPU state (``slices.devices``) and publishes its
   ResourceSlice. It never re-reads the GPUs while it runs (``GetPerGpuAllocatableDevices`` runs
   once in ``NewDeviceState``): a MIG device made later is published only after the pod restarts.

A failing start makes the container crash-loop (``CrashLoopBackOff``, the message in
``lastState.terminated.message`` and the pod log); every restart checks again. When the pod stops,
its node's slices of ``gpu.nvidia.com`` are deleted (the kubelet removes the slices of a driver
that unregisters). DynamicMIG's partitionable slices are not modelled: that gate alone is refused
with a lab message.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Mapping, Optional

from gpulab import gpustate
from gpulab.cluster.containers import Outcome
from gpulab.cluster.dra import api, slices
from gpulab.cluster.errors import ApiError

IMAGE_MARK = "k8s-dra-driver-gpu"
GPUS_CONTAINER = "gpus"
KNOWN_GATES = ("TimeSlicingSettings", "MPSSupport", "IMEXDaemonsWithDNSNames", "PassthroughSupport",
               "NVMLDeviceHealthCheck", "DynamicMIG", "ComputeDomainCliques", "CrashOnNVLinkFabricErrors")
DEVICE_PLUGIN_CONTAINERS = ("nvidia-device-plugin", "nvidia-device-plugin-ctr")
DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"
Obj = Dict[str, Any]


def is_plugin_container(pod: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    del pod
    return IMAGE_MARK in str(container.get("image", ""))


def _env(container: Mapping[str, Any], name: str) -> str:
    for item in container.get("env") or []:
        if isinstance(item, Mapping) and item.get("name") == name:
            return str(item.get("value", ""))
    return ""


def feature_gates(text: str) -> Dict[str, bool]:
    """``A=true,B=false,`` -> gates; ValueError with the driver's wording."""
    gates: Dict[str, bool] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, _sep, value = item.partition("=")
        if key not in KNOWN_GATES:
            raise ValueError("unrecognized feature gate: %s" % key)
        if value.lower() not in ("true", "false"):
            raise ValueError("invalid value of %s=%s, err: strconv.ParseBool: parsing %r: invalid syntax" % (key, value, value))
        gates[key] = value.lower() == "true"
    if gates.get("DynamicMIG"):
        for other in ("PassthroughSupport", "NVMLDeviceHealthCheck", "MPSSupport"):
            if gates.get(other):
                raise ValueError("feature gate DynamicMIG is currently mutually exclusive with %s" % other)
    return gates


def device_plugin_pod(store: Any, node: str) -> Optional[str]:
    """namespace/name of a live NVIDIA device plugin pod on `node`, if any."""
    for pod in store.items("v1/pods", field_selector="spec.nodeName=%s" % node):
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        owners = [ref.get("name") for ref in meta.get("ownerReferences") or [] if ref.get("kind") == "DaemonSet"]
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if DEVICE_PLUGIN_DAEMONSET in owners or any(name in DEVICE_PLUGIN_CONTAINERS for name in names):
            return "%s/%s" % (meta.get("namespace"), meta["name"])
    return None


class KubeletPluginProgram:
    """One instance for all nodes; `devices[node]` is what the running plugin of a node announced."""

    gpu_client = False  # NVIDIA_VISIBLE_DEVICES=void: it holds no GPU open in the lab

    def __init__(self, store: Any, state_path_for: Any):
        self.store = store
        self.state_path_for = state_path_for
        self.devices: Dict[str, List[Obj]] = {}
        self._owner: Dict[str, str] = {}  # node -> uid of the plugin pod that published
        self._lock = threading.Lock()

    def start(self, pod: Obj, container: Obj, allocated: List[Any]) -> Outcome:
        del allocated
        if container.get("name") != GPUS_CONTAINER:
            return Outcome(log="I lab: %s container running\n" % container.get("name"))
        node = pod["spec"]["nodeName"]
        try:
            gates = feature_gates(_env(container, "FEATURE_GATES"))
        except ValueError as exc:
            return _failure("error validating feature gates: %s" % exc)
        if gates.get("DynamicMIG"):
            return _failure("lab: the DynamicMIG feature gate is not modelled by the GPU lab")
        other = device_plugin_pod(self.store, node)
        if other:
            return _failure("the NVIDIA device plugin is running on node %s (pod %s): the DRA driver for GPUs cannot "
                            "manage the GPUs of a node where the device plugin allocates them; turn the device plugin "
                            "off on this node first" % (node, other))
        path = self.state_path_for(node)
        if not path:
            return _failure("error creating driver: no NVIDIA GPU found on node %s" % node)
        announced = slices.devices(gpustate.load(path))
        self._publish(node, announced)
        with self._lock:
            self.devices[node] = announced
            self._owner[node] = pod["metadata"]["uid"]
        names = ", ".join(device["name"] for device in announced) or "none"
        return Outcome(log="I lab: feature gates: %s\nI lab: published ResourceSlice for node %s with devices: %s\n"
                       % (",".join("%s=%s" % kv for kv in sorted(gates.items())) or "defaults", node, names))

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        del pod, container
        return None

    def stop(self, pod: Obj) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        with self._lock:
            if not node or self._owner.get(node) != pod["metadata"]["uid"]:
                return
            self._owner.pop(node, None)
            self.devices.pop(node, None)
        for obj in node_slices(self.store, node):
            try:
                self.store.delete(api.RESOURCESLICES, None, obj["metadata"]["name"])
            except ApiError:
                pass

    def announced(self, node: str) -> Optional[List[Obj]]:
        """The devices the running plugin of `node` knows (None: no plugin running there)."""
        with self._lock:
            return list(self.devices[node]) if node in self.devices else None

    def _publish(self, node_name: str, announced: List[Obj]) -> None:
        node = self.store.get("v1/nodes", None, node_name)
        existing = node_slices(self.store, node_name)
        generation = max([int(s["spec"]["pool"].get("generation") or 0) for s in existing] or [0]) + 1
        obj = slices.node_slice(node, announced, generation)
        if existing:
            current = existing[0]
            current["spec"] = obj["spec"]
            self.store.update(api.RESOURCESLICES, current)
            for extra in existing[1:]:
                self.store.delete(api.RESOURCESLICES, None, extra["metadata"]["name"])
        else:
            self.store.create(api.RESOURCESLICES, obj)


def node_slices(store: Any, node: str) -> List[Obj]:
    try:
        found = store.items(api.RESOURCESLICES)
    except ApiError:
        return []  # resource.k8s.io/v1 not served
    return [s for s in found if (s.get("spec") or {}).get("driver") == slices.DRIVER
            and (s.get("spec") or {}).get("nodeName") == node]


def _failure(message: str) -> Outcome:
    return Outcome(ok=False, log="E lab: %s\n" % message, message=message, exit_code=1)


__all__ = ["GPUS_CONTAINER", "IMAGE_MARK", "KubeletPluginProgram", "device_plugin_pod", "feature_gates",
           "is_plugin_container", "node_slices"]
