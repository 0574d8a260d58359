"""The device plugin's side of a GPU node (docs/reference/specs.md §9): what the kubelet may allocate and the
node's ``capacity``/``allocatable``.

``capacity`` = the devices the running plugin enumerated when it started; ``allocatable`` = those
still present on the GPUs (vanished MIG devices drop out); a resource no longer served stays at
``0``; with no running plugin ``allocatable`` is ``0`` and ``capacity`` is kept.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

from gpulab.cluster import devices as devmod
from gpulab.cluster.objects import Obj
from gpulab.cluster.operator.common import PLUGIN_CONFIG_ANNOTATION
from gpulab.cluster.operator.context import OperatorContext, PluginInstance

PLUGIN_DS = "nvidia-device-plugin-daemonset"


class DevicePluginController:
    def __init__(self, context: OperatorContext):
        self.context = context

    def running_plugin(self, node: str) -> Optional[PluginInstance]:
        pod = self.context.running_operand_pod(node, PLUGIN_DS)
        return self.context.instance("device-plugin", pod["metadata"]["uid"]) if pod else None

    def node_devices(self, node: str) -> Optional[devmod.NodeDevices]:
        """Healthy devices of the node's running device plugin (None when no plugin runs)."""
        instance = self.running_plugin(node)
        if instance is None or instance.snapshot is None:
            return None
        return self._healthy(node, instance.snapshot)

    def _healthy(self, node: str, snapshot: devmod.NodeDevices) -> devmod.NodeDevices:
        present = set()
        for view in self.context.gpu_views(node):
            present.add(view.uuid)
            present.update(mig.uuid for mig in view.mig_devices)
        healthy = {name: [d for d in found if d.physical_id in present] for name, found in snapshot.devices.items()}
        return dataclasses.replace(snapshot, devices=healthy, resources={name: len(found) for name, found in healthy.items()})

    def sync_node(self, node: Obj) -> Dict[str, Optional[str]]:
        """Write the node's GPU capacity/allocatable; returns the node annotations that name the
        loaded config (written with GFD's labels)."""
        name = node["metadata"]["name"]
        plugin = self.running_plugin(name)
        status = node.get("status") or {}
        capacity = dict(status.get("capacity") or {})
        allocatable = dict(status.get("allocatable") or {})
        ours = {key for key in set(capacity) | set(allocatable) if key.startswith("nvidia.com/")}
        if plugin is not None and plugin.snapshot is not None:
            healthy = self._healthy(name, plugin.snapshot)
            for key in ours - set(plugin.snapshot.resources):
                capacity[key] = allocatable[key] = "0"  # a resource no longer served (e.g. renamed)
            for key, count in plugin.snapshot.resources.items():
                capacity[key] = str(count)
                allocatable[key] = str(healthy.resources.get(key, 0))
        else:
            for key in ours:  # the kubelet's endpoint is gone: devices unhealthy
                allocatable[key] = "0"
                capacity.setdefault(key, "0")
        if capacity != status.get("capacity") or allocatable != status.get("allocatable"):
            def mutate_status(obj: Obj) -> None:
                obj.setdefault("status", {})["capacity"] = capacity
                obj["status"]["allocatable"] = allocatable
            self.context.store.controller_update("v1/nodes", None, name, mutate_status, subresource="status")
        return {PLUGIN_CONFIG_ANNOTATION: (plugin.config_name or "") if plugin else None}


__all__ = ["DevicePluginController", "PLUGIN_DS"]
