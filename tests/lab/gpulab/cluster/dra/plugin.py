"""The GPU kubelet plugin of NVIDIA's DRA driver, as a lab container program.

A pod of the chart's ``<name>-kubelet-plugin`` DaemonSet runs this program for its ``gpus`` container:
image ``*k8s-dra-driver-gpu*`` (kubernetes-sigs/dra-driver-nvidia-gpu v25.12.0,
``deployments/helm/nvidia-dra-driver-gpu/templates/kubeletplugin.yaml``) or ``*dra-driver-nvidia-gpu*``
(v0.4.1 and v0.5.0, ``deployments/helm/dra-driver-nvidia-gpu``; v0.5.0 read at main 9593204, the snapshot has
no v0.5.0 tag); the ``compute-domains`` container just runs. The release is the image tag. At start the plugin:

1. waits for the NVIDIA driver under ``NVIDIA_DRIVER_ROOT`` (the chart's ``nvidiaDriverRoot``, default ``/``):
   the real init container (``hack/kubelet-plugin-prestart.sh``, v0.4.1) loops until it finds nvidia-smi
   there. In the lab the driver is under ``/run/nvidia/driver`` when the GPU Operator's driver pod runs on the
   node, else under ``/``; a wrong root fails the start with the script's wording, every restart checks again;
2. reads ``FEATURE_GATES`` (``Key=bool,...``, the chart's ``featureGates`` value) and refuses gates its
   release does not know (``pkg/featuregates/featuregates.go`` per tag: v25.12.0 knows 8, v0.4.1 adds
   DeviceMetadata, v0.5.0 FabricManagerPartitioning, HostManagedIMEXDaemon, DRAListTypeAttributes and
   ConsumableShares) and the combinations its ``ValidateFeatureGates`` refuses, with the driver's wording;
3. snapshots the node's devices from the GPU state (``slices.devices``) and publishes its
   ResourceSlice. It never re-reads the GPUs while it runs (``GetPerGpuAllocatableDevices`` runs
   once in ``NewDeviceState``): a MIG device made later is published only after the pod restarts.
   With ``DynamicMIG`` it first destroys the MIG devices its checkpoint does not know
   (``cmd/gpu-kubelet-plugin/driver.go`` calls ``DestroyUnknownMIGDevices``; the lab plugin keeps no
   checkpoint, so every MIG device on a MIG-capable GPU goes) and publishes every full GPU and every possible
   MIG placement (``slices.dynamic_devices``; the real plugin uses KEP 4815 partitionable devices with
   shared counters, which the lab leaves out).

It does not look for a device plugin on its node: the real plugin has no such check; only the chart's
``templates/validation.yaml`` refuses ``resources.gpus.enabled`` without ``gpuResourcesEnabledOverride``.
A failing start makes the container crash-loop (``CrashLoopBackOff``, the message in
``lastState.terminated.message`` and the pod log). When the pod stops, its node's slices of
``gpu.nvidia.com`` are deleted (the kubelet removes the slices of a driver that unregisters).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Mapping, Optional, Tuple

from gpulab import gpustate
from gpulab.cluster.containers import Outcome
from gpulab.cluster.dra import api, slices
from gpulab.cluster.errors import ApiError

IMAGE_MARK = "k8s-dra-driver-gpu"  # v25.12.0's image, nvcr.io/nvidia/k8s-dra-driver-gpu
IMAGE_MARKS = (IMAGE_MARK, "dra-driver-nvidia-gpu")  # from v0.4.0, registry.k8s.io/dra-driver-nvidia/...
GPUS_CONTAINER = "gpus"
# The gates each release knows, pkg/featuregates/featuregates.go at v25.12.0, v0.4.1 and main 9593204 (0.5.0).
GATES_25_12 = ("TimeSlicingSettings", "MPSSupport", "IMEXDaemonsWithDNSNames", "PassthroughSupport",
               "NVMLDeviceHealthCheck", "DynamicMIG", "ComputeDomainCliques", "CrashOnNVLinkFabricErrors")
GATES_0_4 = GATES_25_12 + ("DeviceMetadata",)
GATES_0_5 = GATES_0_4 + ("FabricManagerPartitioning", "HostManagedIMEXDaemon", "DRAListTypeAttributes",
                         "ConsumableShares")
KNOWN_GATES = GATES_25_12
DEFAULT_ON = ("IMEXDaemonsWithDNSNames", "ComputeDomainCliques", "CrashOnNVLinkFabricErrors")
DEVICE_PLUGIN_CONTAINERS = ("nvidia-device-plugin", "nvidia-device-plugin-ctr")
DEVICE_PLUGIN_DAEMONSET = "nvidia-device-plugin-daemonset"
DRIVER_DAEMONSET = "nvidia-driver-daemonset"  # the GPU Operator's driver container (lab operator, common.py)
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
Obj = Dict[str, Any]


def is_plugin_container(pod: Mapping[str, Any], container: Mapping[str, Any]) -> bool:
    del pod
    return any(mark in str(container.get("image", "")) for mark in IMAGE_MARKS)


def release(image: str) -> Tuple[int, int]:
    """The driver's release line from the image tag: (0, 3) for v25.12.x (upstream maps ~25.12 to 0.3),
    (0, 4), (0, 5), ...; an unreadable tag is the newest line the lab knows."""
    tag = image.rsplit(":", 1)[-1].lstrip("v") if ":" in image.rsplit("/", 1)[-1] else ""
    parts = [p for p in tag.split("-")[0].split(".")[:2] if p.isdigit()]
    if len(parts) < 2:
        return (0, 5)
    major, minor = int(parts[0]), int(parts[1])
    if major >= 25:
        return (0, {(25, 3): 1, (25, 8): 2, (25, 12): 3}.get((major, minor), 3))
    return (major, minor)


def known_gates(line: Tuple[int, int]) -> Tuple[str, ...]:
    return GATES_0_5 if line >= (0, 5) else GATES_0_4 if line >= (0, 4) else GATES_25_12


def _env(container: Mapping[str, Any], name: str) -> str:
    for item in container.get("env") or []:
        if isinstance(item, Mapping) and item.get("name") == name:
            return str(item.get("value", ""))
    return ""


def feature_gates(text: str, line: Tuple[int, int] = (0, 3)) -> Dict[str, bool]:
    """``A=true,B=false,`` -> gates for the release ``line``; ValueError with the driver's wording
    (ValidateFeatureGates of that release, over the defaults)."""
    gates: Dict[str, bool] = {}
    known = known_gates(line)
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, _sep, value = item.partition("=")
        if key not in known:
            raise ValueError("unrecognized feature gate: %s" % key)
        if value.lower() not in ("true", "false"):
            raise ValueError("invalid value of %s=%s, err: strconv.ParseBool: parsing %r: invalid syntax" % (key, value, value))
        gates[key] = value.lower() == "true"
    merged = dict({name: name in DEFAULT_ON for name in known}, **gates)
    if merged["ComputeDomainCliques"] and not merged["IMEXDaemonsWithDNSNames"]:
        raise ValueError("feature gate ComputeDomainCliques requires IMEXDaemonsWithDNSNames to also be enabled")
    exclusive = [("DynamicMIG", other) for other in ("PassthroughSupport", "NVMLDeviceHealthCheck", "MPSSupport")]
    if line >= (0, 4):
        exclusive.append(("PassthroughSupport", "NVMLDeviceHealthCheck"))
    for one, other in exclusive:
        if merged[one] and merged[other]:
            raise ValueError("feature gate %s is currently mutually exclusive with %s" % (one, other))
    if line >= (0, 4) and merged["DeviceMetadata"] and not merged["PassthroughSupport"]:
        raise ValueError("feature gate DeviceMetadata requires PassthroughSupport to also be enabled")
    return gates


def driver_pod(store: Any, node: str) -> Optional[str]:
    """name of a live pod of the GPU Operator's driver DaemonSet on `node`, if any."""
    for pod in store.items("v1/pods", field_selector="spec.nodeName=%s" % node):
        meta = pod["metadata"]
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if DRIVER_DAEMONSET in [ref.get("name") for ref in meta.get("ownerReferences") or []]:
            return meta["name"]
    return None


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
        root = _env(container, "NVIDIA_DRIVER_ROOT") or "/"
        where = OPERATOR_DRIVER_ROOT if driver_pod(self.store, node) else "/"
        if root.rstrip("/") != where.rstrip("/"):
            return _failure("/driver-root (%s on host): nvidia-smi: not found, libnvidia-ml.so.1: not found (the NVIDIA "
                            "driver on node %s is under %s; set nvidiaDriverRoot)" % (root, node, where))
        try:
            gates = feature_gates(_env(container, "FEATURE_GATES"), release(str(container.get("image", ""))))
        except ValueError as exc:
            return _failure("error validating feature gates: %s" % exc)
        path = self.state_path_for(node)
        if not path:
            return _failure("error creating driver: no NVIDIA GPU found on node %s" % node)
        if gates.get("DynamicMIG"):
            announced = slices.dynamic_devices(_destroy_unknown_mig_devices(path))
        else:
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


def _destroy_unknown_mig_devices(path: str) -> Any:
    """DestroyUnknownMIGDevices without a checkpoint: every MIG device of the host goes (MIG mode stays)."""
    with gpustate.locked(path) as state:
        for gpu in state.gpus:
            if gpu.mig_current:
                gpu.gpu_instances = []
    return gpustate.load(path)


def node_slices(store: Any, node: str) -> List[Obj]:
    try:
        found = store.items(api.RESOURCESLICES)
    except ApiError:
        return []  # resource.k8s.io/v1 not served
    return [s for s in found if (s.get("spec") or {}).get("driver") == slices.DRIVER
            and (s.get("spec") or {}).get("nodeName") == node]


def _failure(message: str) -> Outcome:
    return Outcome(ok=False, log="E lab: %s\n" % message, message=message, exit_code=1)


__all__ = ["GPUS_CONTAINER", "IMAGE_MARK", "IMAGE_MARKS", "KubeletPluginProgram", "device_plugin_pod", "driver_pod",
           "feature_gates", "is_plugin_container", "node_slices", "release"]
