"""What the lab's GPU Operator controllers share: the store, the hosts' GPU state files, the
operand namespace, the running device-plugin/GFD instances and small store accessors."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from gpulab import gpustate
from gpulab.cluster import devices as devmod
from gpulab.cluster import pluginconfig
from gpulab.cluster.objects import Obj, pod_ready

LOG = logging.getLogger("gpulab.cluster.operator")


@dataclasses.dataclass
class PluginInstance:
    """A running device plugin (or GFD) process on one node."""

    pod_uid: str
    node: str
    strategy: str
    config_name: Optional[str]
    config_text: Optional[str]
    sharing: pluginconfig.SharingConfig
    label_seen: Optional[str]
    snapshot: Optional[devmod.NodeDevices] = None  # device plugin only: devices enumerated at start
    mps_limits: Optional[Dict[str, Any]] = None  # MPS control daemon only: the limits set at start
    started: float = 0.0


def _merge(target: Dict[str, str], wanted: Mapping[str, Optional[str]]) -> None:
    for key, value in wanted.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value


class OperatorContext:
    """Shared state of one operator (see the module docstring); `settings` is the managers'."""

    def __init__(self, store: Any, hosts: Mapping[str, str], settings: Any, faults: Any = None,
                 stop_event: Optional[threading.Event] = None):
        self.store = store
        self.hosts = dict(hosts)
        self.settings = settings
        self.faults = faults
        self.namespace = settings.namespace
        self.stop_event = stop_event or threading.Event()
        self.lock = threading.RLock()
        self._instances: Dict[str, Dict[str, PluginInstance]] = {
            "device-plugin": {}, "gpu-feature-discovery": {}, "mps-control-daemon": {}}
        self._state_cache: Dict[str, Tuple[Tuple[int, int], Any]] = {}
        self._pass_pods: Optional[List[Obj]] = None  # pods as read at the start of a step of the pass

    def fault(self, name: str) -> bool:
        if self.faults is None:
            return False
        try:
            return bool(self.faults.active(name))
        except Exception:  # pylint: disable=broad-except
            return False

    def node(self, name: str) -> Optional[Obj]:
        try:
            return self.store.get("v1/nodes", None, name)
        except Exception:  # pylint: disable=broad-except
            return None

    def configmap_data(self, namespace: str, name: Optional[str]) -> Optional[Dict[str, str]]:
        if not name:
            return None
        try:
            return dict(self.store.get("v1/configmaps", namespace, name).get("data") or {})
        except Exception:  # pylint: disable=broad-except
            return None

    def instance(self, kind: str, uid: str) -> Optional[PluginInstance]:
        with self.lock:
            return self._instances[kind].get(uid)

    def set_instance(self, kind: str, uid: str, instance: Optional[PluginInstance]) -> None:
        with self.lock:
            if instance is None:
                self._instances[kind].pop(uid, None)
            else:
                self._instances[kind][uid] = instance

    def host_state(self, node: str) -> Any:
        """The node's GPU state, re-read only when the file changed."""
        path = self.hosts.get(node)
        if not path:
            return None
        try:
            info = os.stat(path)
        except OSError:
            return None
        key = (info.st_mtime_ns, info.st_size)
        cached = self._state_cache.get(node)
        if cached and cached[0] == key:
            return cached[1]
        try:
            state = gpustate.load(path)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot read GPU state of %s", node)
            return None
        self._state_cache[node] = (key, state)
        return state

    def gpu_views(self, node: str) -> List[devmod.GpuView]:
        state = self.host_state(node)
        if state is None or not getattr(state, "powered_on", True):
            return []
        return devmod.gpu_views(state)

    def driver_version(self, node: str) -> str:
        state = self.host_state(node)
        return state.driver_version if state is not None else ""

    def is_gpu_node(self, name: str) -> bool:
        state = self.host_state(name)
        return state is not None and bool(state.gpus)

    def set_labels(self, node: str, wanted: Mapping[str, Optional[str]], annotations: Optional[Mapping[str, Optional[str]]] = None) -> None:
        """Set node labels (and annotations); a None value removes the key."""
        def mutate(obj: Obj) -> None:
            _merge(obj["metadata"].setdefault("labels", {}), wanted)
            if annotations:
                _merge(obj["metadata"].setdefault("annotations", {}), annotations)
        try:
            self.store.controller_update("v1/nodes", None, node, mutate)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot label node %s", node)

    def running_operand_pod(self, node: str, ds_name: str) -> Optional[Obj]:
        # Outside a snapshot (the kubelet admitting a pod): the node's pods only, read live. Copying the
        # whole namespace for each admission made starting N nodes' operands cost N^2 pod copies.
        pods = self._pass_pods if self._pass_pods is not None else \
            self.store.items("v1/pods", self.namespace, field_selector=f"spec.nodeName={node}")
        for pod in pods:
            if pod["spec"].get("nodeName") != node or pod["metadata"].get("namespace") != self.namespace:
                continue
            refs = pod["metadata"].get("ownerReferences") or []
            if any(ref.get("name") == ds_name and ref.get("kind") == "DaemonSet" for ref in refs) and pod_ready(pod):
                return pod
        return None

    @contextlib.contextmanager
    def pods_snapshot(self) -> Iterator[None]:
        """Read the operand pods once for a step of the pass: what changed meanwhile is seen by
        the next pass, which our own writes trigger."""
        self._pass_pods = self.store.items("v1/pods", self.namespace)
        try:
            yield
        finally:
            self._pass_pods = None

    def forget_state(self, node: str) -> None:
        """Re-read the node's GPU state next time (after a MIG reconfiguration)."""
        self._state_cache.pop(node, None)


__all__ = ["OperatorContext", "PluginInstance"]
