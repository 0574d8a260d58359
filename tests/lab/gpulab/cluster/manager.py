"""The lab's controller manager: every controller behind the virtual cluster, in one loop.

The controllers are a static, ordered list (``Controllers.steps``); one thread
(``gpulab-controllers``) runs a pass of all of them whenever the store changes and at least
every ``resync_seconds``:

0. ``resourceclaims`` claims from templates, deallocation (dra/claims.py)
1. ``scheduler``      binds pending pods (scheduler.py; DRA claims allocated through dra/claims.py)
2. ``kubelet``        runs the pods bound to nodes, then asks running programs whether they
                      still run (kubelet.py)
3. ``node-lifecycle`` reboots and power state of the hosts (nodelifecycle.py)
4. ``clusterpolicy``  the GPU Operator's ClusterPolicy: node labels, operand DaemonSets
                      (operator/clusterpolicy.py)
5. ``daemonsets``     one pod per matching node, rolling updates (daemonsets.py)
6. ``gpu-nodes``      device plugin capacity/allocatable and GFD labels per GPU node
                      (operator/deviceplugin.py, operator/gfd.py)
7. ``mig-manager``    MIG reconfigurations, each in its own short-lived thread
                      (operator/migmanager.py)
8. ``clusterpolicy-status``

Entry points: ``start(store, lab)`` (the lab server) and ``start_controllers(...)`` (tests).
Timings come from ``Settings``, overridable with ``GPULAB_<FIELD>`` environment variables.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from gpulab.cluster.daemonsets import DaemonSetController
from gpulab.cluster.dra.claims import DraClaims
from gpulab.cluster.dra.plugin import KubeletPluginProgram, is_plugin_container
from gpulab.cluster.kubelet import Kubelet
from gpulab.cluster.nodelifecycle import NodeLifecycleController
from gpulab.cluster.operator.clusterpolicy import ClusterPolicyController
from gpulab.cluster.operator.common import DEFAULT_NAMESPACE
from gpulab.cluster.operator.context import OperatorContext
from gpulab.cluster.operator.deviceplugin import DevicePluginController
from gpulab.cluster.operator.gfd import GfdController
from gpulab.cluster.operator.migmanager import MigManager
from gpulab.cluster.operator.programs import OperandPrograms
from gpulab.cluster.scheduler import Scheduler

LOG = logging.getLogger("gpulab.cluster.operator")

Step = Tuple[str, Callable[[], Optional[float]]]


@dataclasses.dataclass
class Settings:
    namespace: str = DEFAULT_NAMESPACE
    resync_seconds: float = 1.0
    operand_start_delay: float = 0.5
    pod_start_delay: float = 0.1
    pod_stop_delay: float = 0.1
    default_runtime: float = 0.5
    crash_backoff: float = 1.0
    mig_apply_delay: float = 0.2
    mig_pause_timeout: float = 30.0
    private_registries: str = ""  # registry hosts that need pull credentials (gpulab.cluster.imagepull)
    os_release: str = "/etc/os-release"  # the hosts' OS, as NFD labels it (gpulab.cluster.operator.nfd)

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "Settings":
        """Overrides from GPULAB_<FIELD> variables (e.g. GPULAB_OPERAND_START_DELAY=1)."""
        env = os.environ if env is None else env
        values: Dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = env.get("GPULAB_" + field.name.upper())
            if raw is None:
                continue
            values[field.name] = raw if field.type in ("str", str) else float(raw)
        return cls(**values)


class Controllers:
    """Handle of the running controllers: `.stop()`, `.threads`, `.passes`, `.run_pass()`."""

    def __init__(self, store: Any, hosts: Mapping[str, str], stop_event: threading.Event, settings: Settings, faults: Any):
        self.store = store
        self.settings = settings
        self.stop_event = stop_event
        self.faults = faults
        self.context = OperatorContext(store, hosts, settings, faults, stop_event)
        self.device_plugin = DevicePluginController(self.context)
        self.gfd = GfdController(self.context)
        self.mig_manager = MigManager(self.context)
        self.programs = OperandPrograms(self.context, self.mig_manager.started)
        self.dra_plugin = KubeletPluginProgram(store, self.context.hosts.get)  # NVIDIA's DRA kubelet plugin
        self.dra = DraClaims(store, self.dra_plugin)
        self.kubelet = Kubelet(store, settings, self.device_plugin.node_devices, self._program_for,
                               self.context.hosts.get, time.time, self.dra.claim_devices)
        self.scheduler = Scheduler(store, self.context.fault, self.dra)
        self.node_lifecycle = NodeLifecycleController(store, self.context.host_state, self.kubelet.node_rebooted)
        self.clusterpolicy = ClusterPolicyController(self.context)
        self.daemonsets = DaemonSetController(store)
        self.steps: List[Step] = [
            ("resourceclaims", self.dra.run_once),
            ("scheduler", self.scheduler.run_once),
            ("kubelet", self.kubelet.run_once),
            ("kubelet-checks", self.kubelet.check_running),
            ("node-lifecycle", self.node_lifecycle.run_once),
            ("clusterpolicy", self.clusterpolicy.run_once),
            ("daemonsets", self.daemonsets.run_once),
            ("gpu-nodes", self._sync_gpu_nodes),
            ("mig-manager", self._run_mig_manager),
            ("clusterpolicy-status", self.clusterpolicy.update_status),
        ]
        self._wake = threading.Event()
        self._unsubscribe = store.subscribe(self._on_event)
        self.passes = 0
        self.threads = [threading.Thread(target=self._loop, daemon=True, name="gpulab-controllers")]
        for thread in self.threads:
            thread.start()

    def _program_for(self, pod: Any, container: Any) -> Any:
        if is_plugin_container(pod, container):
            return self.dra_plugin
        return self.programs.program_for(pod, container)

    def _sync_gpu_nodes(self) -> None:
        with self.context.pods_snapshot():
            for node in self.store.items("v1/nodes"):
                name = node["metadata"]["name"]
                if not self.context.is_gpu_node(name):
                    continue
                try:
                    self.gfd.sync_node(node, self.device_plugin.sync_node(node))
                except Exception:  # pylint: disable=broad-except
                    LOG.exception("syncing node %s", name)

    def _run_mig_manager(self) -> None:
        if self.clusterpolicy.policy is not None:
            self.mig_manager.run_once()

    def _on_event(self, event: Any) -> None:
        if event.resource_key != "v1/events":
            self._wake.set()

    def _loop(self) -> None:
        next_due: Optional[float] = None
        while not self.stop_event.is_set():
            timeout = self.settings.resync_seconds
            if next_due is not None:
                timeout = max(0.0, min(timeout, next_due - time.time()))
            self._wake.wait(timeout)
            if self.stop_event.is_set():
                break
            time.sleep(0.01)  # let a burst of events coalesce
            self._wake.clear()
            try:
                next_due = self.run_pass()
            except Exception:  # pylint: disable=broad-except
                LOG.exception("controller pass failed")
                next_due = None

    def run_pass(self) -> Optional[float]:
        """One pass of every controller, in order (also usable directly by tests); returns when
        the next pass is due at the latest (None: at the next resync)."""
        dues = []
        for _name, step in self.steps:
            due = step()
            if due is not None:
                dues.append(due)
        self.passes += 1
        return min(dues) if dues else None

    def stop(self) -> None:
        self.stop_event.set()
        self._wake.set()
        self._unsubscribe()
        for thread in self.threads:
            thread.join(timeout=5)
        self.kubelet.probe.shutdown()  # the probe processes the lab started, by their handles

    def join(self, timeout: Optional[float] = None) -> None:
        for thread in self.threads:
            thread.join(timeout)


def _hosts_mapping(hosts: Any) -> Dict[str, str]:
    if isinstance(hosts, Mapping):
        return {str(k): str(v) for k, v in hosts.items()}
    result = {}
    for host in hosts or []:
        if isinstance(host, Mapping) and host.get("name") and host.get("state_file"):
            result[str(host["name"])] = os.path.abspath(str(host["state_file"]))
    return result


def start_controllers(store: Any, hosts: Any, stop_event: Optional[threading.Event] = None,
                      settings: Optional[Settings] = None, faults: Any = None) -> Controllers:
    """Start the kubelet, scheduler and operator loop. `hosts`: node -> state file, or the server's
    list of {"name", "state_file"}."""
    return Controllers(store, _hosts_mapping(hosts), stop_event or threading.Event(), settings or Settings.from_env(), faults)


def start(store: Any, lab: Any) -> Controllers:
    """Entry point of the lab server (`gpulab.cluster.server`)."""
    return start_controllers(store, getattr(lab, "hosts", []), None, Settings.from_env(), getattr(lab, "faults", None))


__all__ = ["Controllers", "Settings", "start", "start_controllers"]
