"""What the operand containers do when the lab kubelet starts them (kubelet ``Program``s).

The device plugin and GFD load the selected config (ConfigMap key from the node label
``nvidia.com/device-plugin.config`` or ``devicePlugin.config.default``); the device plugin also
enumerates the node's devices at start, like the real one (docs/reference/specs.md §9.5). Their config-manager
sidecar reloads on a new node label value. The MIG manager's start hands over to ``migmanager``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpulab.cluster import devices as devmod
from gpulab.cluster import pluginconfig
from gpulab.cluster.containers import Outcome
from gpulab.cluster.objects import Obj
from gpulab.cluster.operator.common import (GPU_CLIENTS, OPERANDS, OPERANDS_BY_DS, PLUGIN_CONFIG_LABEL, Operand,
                                            configmap_volume, container_env, log_line)
from gpulab.cluster.operator.context import OperatorContext, PluginInstance
from gpulab.cluster.operator.nfd import NfdWorkerProgram, is_nfd_worker

PLUGIN_KINDS = ("device-plugin", "gpu-feature-discovery")
MPS_DAEMON = "mps-control-daemon"


class OperandProgram:
    def __init__(self, context: OperatorContext, operand: Operand,
                 on_start: Optional[Callable[[Obj], None]] = None):
        self.context = context
        self.operand = operand
        self.on_start = on_start
        self.gpu_client = operand.key in GPU_CLIENTS  # the kubelet attaches its pods to the host

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        del container, allocated
        if self.operand.key == "mig-manager":
            if self.on_start is not None:
                self.on_start(pod)
            return Outcome(log=log_line("Waiting for change to 'nvidia.com/mig.config' label"))
        return Outcome(log=log_line(f"{self.operand.container} started"))

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        del pod, container
        return None

    def stop(self, pod: Obj) -> None:
        del pod


VALIDATED_PREFIX = "validated devices: "


class ValidatorProgram(OperandProgram):
    """The operator validator (docs/reference/specs.md §7.7): its init containers validate the
    driver, CUDA and the device plugin once, when the pod starts, and the main container then
    only sleeps. The log names the devices validated then; nothing re-validates a running pod
    (after a MIG change the MIG manager deletes it, and the DaemonSet starts a new one)."""

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        del container, allocated
        devices = validated_devices(self.context.gpu_views(pod["spec"]["nodeName"]))
        return Outcome(log=log_line(VALIDATED_PREFIX + (",".join(devices) or "none"))
                       + log_line("all validations are successful"))


def validated_devices(views: List[devmod.GpuView]) -> List[str]:
    """UUIDs of what a workload sees: the MIG devices of a MIG-enabled GPU, else the GPU."""
    found: List[str] = []
    for view in views:
        found += [mig.uuid for mig in view.mig_devices] if view.mig_enabled else [view.uuid]
    return found


class PluginProgram(OperandProgram):
    """Device plugin and GFD: load the selected config; the plugin also enumerates devices."""

    def _load(self, pod: Obj, container: Obj, previous: Optional[PluginInstance]) -> Tuple[Optional[PluginInstance], Outcome]:
        node_name = pod["spec"]["nodeName"]
        node = self.context.node(node_name)
        label = ((node or {}).get("metadata", {}).get("labels") or {}).get(PLUGIN_CONFIG_LABEL)
        env_strategy = container_env(container, "MIG_STRATEGY")
        cm_name = configmap_volume(pod["spec"], "config")
        default_key = container_env(container, "DEFAULT_CONFIG") or None
        data = self.context.configmap_data(pod["metadata"]["namespace"], cm_name) if cm_name else None
        choice = pluginconfig.select_plugin_config(cm_name, data, label, default_key)
        if choice.skipped:
            if previous is not None:  # unknown key: the config-manager keeps the current config
                kept = dataclasses.replace(previous, label_seen=label)
                return kept, Outcome(log=log_line(f"Config '{label}' not found in the config map; keeping the current config", "warning"))
            choice = pluginconfig.select_plugin_config(cm_name, data, None, default_key)
        if choice.error:
            return None, Outcome(ok=False, message=choice.error, log=log_line(choice.error, "error"))
        try:
            sharing = pluginconfig.parse_plugin_config(choice.text) if choice.text is not None else pluginconfig.NO_SHARING
        except pluginconfig.PluginConfigError as exc:
            message = f"unable to load config: {exc}"
            return None, Outcome(ok=False, message=message, log=log_line(message, "error"))
        strategy = devmod.effective_mig_strategy(env_strategy, sharing)
        instance = PluginInstance(pod["metadata"]["uid"], node_name, strategy, choice.name, choice.text, sharing, label, started=time.time())
        lines = [f"Loading configuration {choice.name or '(none)'} with MIG strategy {strategy}"]
        if self.operand.key == "device-plugin":
            if self.context.fault("device-plugin-crash"):
                message = "fault injected: device-plugin-crash"
                return None, Outcome(ok=False, message=message, log=log_line(message, "error"))
            views = self.context.gpu_views(node_name)
            result = devmod.compute_node(views, strategy, sharing, self.context.driver_version(node_name))
            lines += result.log
            if result.plugin_error:
                text = "".join(log_line(line) for line in lines[:-1]) + log_line(result.plugin_error, "error")
                return None, Outcome(ok=False, message=result.plugin_error, log=text)
            instance.snapshot = result
            lines += [f"Registered device plugin for '{name}' with Kubelet ({count} devices)" for name, count in result.resources.items()]
        return instance, Outcome(log="".join(log_line(line) for line in lines))

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        del allocated
        instance, outcome = self._load(pod, container, None)
        self.context.set_instance(self.operand.key, pod["metadata"]["uid"], instance)
        return outcome

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        """The config-manager sidecar: a new node label value reloads (and restarts the process)."""
        uid = pod["metadata"]["uid"]
        current = self.context.instance(self.operand.key, uid)
        node = self.context.node(pod["spec"]["nodeName"])
        label = ((node or {}).get("metadata", {}).get("labels") or {}).get(PLUGIN_CONFIG_LABEL)
        if current is None or current.label_seen == label:
            return None
        instance, outcome = self._load(pod, container, current)
        self.context.set_instance(self.operand.key, uid, instance)
        if outcome.ok:
            self.context.store.set_pod_log(pod["metadata"]["namespace"], pod["metadata"]["name"], outcome.log,
                                           container=container["name"], append=True)
            return None
        return outcome

    def stop(self, pod: Obj) -> None:
        self.context.set_instance(self.operand.key, pod["metadata"]["uid"], None)


class MpsDaemonProgram(PluginProgram):
    """The MPS control daemon (docs/reference/specs.md §9.6): loads the selected config when it
    starts, sets the per-client limits from the replicas then, and logs the config it runs with.
    Like the real one it restarts (and recomputes) only when its config-manager sees a new node
    label value; a changed ConfigMap under the same label leaves the limits it started with."""

    def _load(self, pod: Obj, container: Obj, previous: Optional[PluginInstance]) -> Tuple[Optional[PluginInstance], Outcome]:
        instance, outcome = super()._load(pod, container, previous)
        if instance is None or instance is previous:
            return instance, outcome
        instance.mps_limits = devmod.mps_limits(self.context.gpu_views(instance.node), instance.sharing)
        lines = ["Running with config: %s" % json.dumps({"sharing": {"mps": {"resources": [
            {"name": r.name, "replicas": r.replicas} for r in instance.sharing.resources]}}} if instance.mps_limits else {},
            sort_keys=True)]
        if instance.mps_limits is None:
            lines.append("No devices are configured for MPS sharing; Waiting indefinitely.")
        else:
            lines += ["set_default_device_pinned_mem_limit %s %s" % item
                      for item in sorted(instance.mps_limits["pinned_memory_limits"].items())]
            lines.append("set_default_active_thread_percentage %d" % instance.mps_limits["active_thread_percentage"])
        return instance, Outcome(log=outcome.log + "".join(log_line(line) for line in lines))


class OperandPrograms:
    """The program of each operand container (the kubelet's `program_for`)."""

    def __init__(self, context: OperatorContext, mig_manager_started: Callable[[Obj], None]):
        self.context = context
        self.programs: Dict[str, OperandProgram] = {}
        for operand in OPERANDS:
            if operand.key in PLUGIN_KINDS:
                self.programs[operand.ds_name] = PluginProgram(context, operand)
            elif operand.key == MPS_DAEMON:
                self.programs[operand.ds_name] = MpsDaemonProgram(context, operand)
            elif operand.key == "operator-validator":
                self.programs[operand.ds_name] = ValidatorProgram(context, operand)
            else:
                self.programs[operand.ds_name] = OperandProgram(context, operand, mig_manager_started)
        self.nfd_worker = NfdWorkerProgram(context)

    def program_for(self, pod: Obj, container: Obj) -> Any:
        meta = pod["metadata"]
        if is_nfd_worker(pod):
            return self.nfd_worker
        if meta.get("namespace") != self.context.namespace:
            return None
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "DaemonSet" and ref.get("name") in self.programs:
                operand = OPERANDS_BY_DS[ref["name"]]
                if container.get("name") == operand.container:
                    return self.programs[ref["name"]]
        return None


__all__ = ["VALIDATED_PREFIX", "MpsDaemonProgram", "OperandProgram", "OperandPrograms", "PluginProgram", "ValidatorProgram",
           "validated_devices"]
