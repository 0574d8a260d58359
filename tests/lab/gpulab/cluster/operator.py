"""The lab's NVIDIA GPU Operator: ClusterPolicy, operand DaemonSets, device plugin, GFD, MIG manager.

A test instrument, not the product. It behaves like the real operator where the collection can
observe it (SPECS §7-§10), reading the same GPU state files as the lab's SSH hosts:

* a ClusterPolicy (``nvidia.com/v1``, the oldest one; others get ``status.state: ignored``) makes
  the operator label GPU nodes (``nvidia.com/gpu.present``, ``nvidia.com/gpu.deploy.*``,
  ``nvidia.com/mig.capable``, ``nvidia.com/mig.config=all-disabled`` when
  ``migManager.config.default`` says so) and deploy operand DaemonSets (owned by the
  ClusterPolicy) in the operator namespace; ``status.state`` turns ``ready`` once every operand
  pod on every GPU node is Running and Ready;
* a DaemonSet controller (for every DaemonSet in the store) creates one pod per matching node,
  rolls pods whose template changed (``maxUnavailable``, default 1; ``kubectl rollout restart``
  works through the ``kubectl.kubernetes.io/restartedAt`` template annotation) and keeps status;
* the device plugin loads its config (ConfigMap key chosen by the node label
  ``nvidia.com/device-plugin.config`` or ``devicePlugin.config.default``) and enumerates the
  node's devices when it starts: a changed ConfigMap takes effect only when the plugin pod
  restarts (SPECS §9.5), a changed node label takes effect at once (config-manager sidecar), and
  MIG devices created behind its back appear only after a restart, like the real plugin; devices
  that disappear become unhealthy (allocatable drops, capacity stays). An invalid config or an
  invalid single-strategy layout makes the plugin crash-loop with the real error in its log;
* GFD labels the node from the GPUs' *current* state on every pass, with the config it loaded at
  start (it has its own config-manager: edit the ConfigMap, restart GFD too);
* the MIG manager follows ``nvidia.com/mig.config`` (SPECS §7.4): validate the name against the
  mig-parted ConfigMap, ``success`` at once when already applied, else ``pending``, operands paused
  (``paused-for-mig-change``), wait for their pods to go, apply with ``gpulab.migparted`` on the
  host's state file (busy GPUs make it fail), restore the labels, ``success`` or ``failed``. A
  failure is also in the node annotation ``lab.gpufleet.io/mig-config-failure``, a Warning event
  and the mig-manager pod's log.

Entry points: ``start(store, lab)`` (called by the lab server) and ``start_controllers(...)``.
One thread runs the kubelet, the scheduler and the operator passes in turn, woken by store
events and at least every ``resync_seconds``; MIG reconfigurations run in their own threads.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import os
import random
import string
import threading
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import yaml

from gpulab.cluster import devices as devmod
from gpulab.cluster import scheduler as schedmod
from gpulab.cluster.kubelet import ANNOTATION_PREFIX, Kubelet, Outcome, now_rfc3339

LOG = logging.getLogger("gpulab.cluster.operator")

Obj = Dict[str, Any]

DEFAULT_NAMESPACE = "gpu-operator"
DEFAULT_MIG_CONFIGMAP = "default-mig-parted-config"
PAUSED = "paused-for-mig-change"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_FAILURE_ANNOTATION = ANNOTATION_PREFIX + "mig-config-failure"
PLUGIN_CONFIG_ANNOTATION = ANNOTATION_PREFIX + "device-plugin-config"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
LAST_APPLIED = "nvidia.com/last-applied-hash"
MANAGED_BY = "app.kubernetes.io/managed-by"

# Operand pods the MIG manager pauses (SPECS §7.4); absent ones are ignored.
PAUSABLE = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm")


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


@dataclasses.dataclass(frozen=True)
class Operand:
    key: str  # the nvidia.com/gpu.deploy.<key> label
    ds_name: str
    container: str
    image: str
    spec_key: str  # ClusterPolicy spec section with "enabled" (empty: always on)
    mig_only: bool = False


OPERANDS = (
    Operand("container-toolkit", "nvidia-container-toolkit-daemonset", "nvidia-container-toolkit-ctr",
            "nvcr.io/nvidia/k8s/container-toolkit:v1.18.1", "toolkit"),
    Operand("device-plugin", "nvidia-device-plugin-daemonset", "nvidia-device-plugin",
            "nvcr.io/nvidia/k8s-device-plugin:v0.18.1", "devicePlugin"),
    Operand("gpu-feature-discovery", "gpu-feature-discovery", "gpu-feature-discovery",
            "nvcr.io/nvidia/k8s-device-plugin:v0.18.1", "gfd"),
    Operand("dcgm-exporter", "nvidia-dcgm-exporter", "nvidia-dcgm-exporter",
            "nvcr.io/nvidia/k8s/dcgm-exporter:4.4.2-4.7.0-distroless", "dcgmExporter"),
    Operand("mig-manager", "nvidia-mig-manager", "nvidia-mig-manager",
            "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.13.1", "migManager", mig_only=True),
    Operand("operator-validator", "nvidia-operator-validator", "nvidia-operator-validator",
            "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.1", ""),
    # Runs where GFD reports MPS sharing (nvidia.com/mps.capable=true), next to the device plugin.
    Operand("mps-control-daemon", "nvidia-device-plugin-mps-control-daemon", "mps-control-daemon-ctr",
            "nvcr.io/nvidia/k8s-device-plugin:v0.18.1", "devicePlugin"),
)
OPERANDS_BY_DS = {operand.ds_name: operand for operand in OPERANDS}
DEPLOY_LABELS = ("driver",) + tuple(o.key for o in OPERANDS if not o.mig_only and o.key != "mps-control-daemon") + ("dcgm", "node-status-exporter")

# DaemonSet pods tolerate these node conditions automatically (like the real DaemonSet controller).
_DS_TOLERATIONS = [
    {"key": key, "operator": "Exists", "effect": effect}
    for key, effect in (
        ("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule"),
        ("node.kubernetes.io/network-unavailable", "NoSchedule"),
    )
]


def _log_line(message: str, level: str = "info") -> str:
    return f'time="{now_rfc3339(time.time())}" level={level} msg="{message}"\n'


def _section(spec: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    node: Any = spec
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def _enabled(spec: Mapping[str, Any], key: str) -> bool:
    if not key:
        return True
    value = _section(spec, key).get("enabled", True)
    return value is not False and str(value).lower() != "false"


def mig_strategy(spec: Mapping[str, Any]) -> str:
    """`spec.mig.strategy`; the chart's default is `single` (SPECS §7.2)."""
    value = _section(spec, "mig").get("strategy") or "single"
    return value if value in devmod.STRATEGIES else "single"


def mig_default_config(spec: Mapping[str, Any]) -> str:
    """`migManager.config.default`: absent means the CRD default `all-disabled`, "" means none."""
    config = _section(spec, "migManager", "config")
    if "default" not in config:
        return "all-disabled"
    return config.get("default") or ""


def _template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _suffix() -> str:
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _position in range(5))


def _env(container: Mapping[str, Any], name: str) -> Optional[str]:
    for entry in container.get("env") or []:
        if entry.get("name") == name:
            return entry.get("value")
    return None


def _configmap_volume(pod_spec: Mapping[str, Any], volume: str) -> Optional[str]:
    for entry in pod_spec.get("volumes") or []:
        if entry.get("name") == volume:
            return (entry.get("configMap") or {}).get("name")
    return None


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _owner_uid(obj: Mapping[str, Any]) -> Optional[str]:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


# --------------------------------------------------------------------------------------------
# The default mig-parted ConfigMap (SPECS §6.5), for the lab's GPU models


# device-filter families of SPECS §6.5 ("all-balanced" table), keyed by lab model.
_FILTERS = {
    "A30": ["0x20B710DE"],
    "A100-40GB": ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"],
    "A100-80GB": ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"],
    "H100-80GB": ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"],
    "H100-NVL": ["0x232110DE", "0x233A10DE"],
    "H200": ["0x233510DE", "0x233B10DE"],
}
_BALANCED = {
    "A30": {"1g.6gb": 2, "2g.12gb": 1},
    "A100-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-NVL": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    "H200": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
}


def default_mig_parted_config() -> Dict[str, Any]:
    """`all-disabled`, `all-enabled`, `all-balanced` and `all-<profile>` for the lab's models.

    Counts of `all-<profile>` are each profile's maximum from the model's `-lgip` fixture (the
    real file lists the same maxima, SPECS §6.5); `+me` profiles are named `.me` in config keys.
    """
    from gpulab.models import load_model  # pylint: disable=import-outside-toplevel

    configs: Dict[str, List[Dict[str, Any]]] = {
        "all-disabled": [{"devices": "all", "mig-enabled": False}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    per_profile: Dict[str, List[Dict[str, Any]]] = {}
    balanced: List[Dict[str, Any]] = []
    for key, filters in _FILTERS.items():
        model = load_model(key)
        filters = list(filters)
        if model.pci_device_id.upper().replace("0X", "0x") not in filters:
            filters.append(model.pci_device_id)
        for profile in model.profiles:
            item = {"device-filter": filters, "devices": "all", "mig-enabled": True,
                    "mig-devices": {profile.name: 1 if "+" in profile.name else profile.instances_total}}
            bucket = per_profile.setdefault("all-" + profile.name.replace("+", "."), [])
            if item not in bucket:
                bucket.append(item)
        item = {"device-filter": filters, "devices": "all", "mig-enabled": True, "mig-devices": dict(_BALANCED[key])}
        if item not in balanced:
            balanced.append(item)
    configs["all-balanced"] = balanced
    for name in sorted(per_profile):
        configs[name] = per_profile[name]
    return {"version": "v1", "mig-configs": configs}


# --------------------------------------------------------------------------------------------
# Operand programs (what the operand containers do when the kubelet starts them)


@dataclasses.dataclass
class PluginInstance:
    """A running device plugin (or GFD) process on one node."""

    pod_uid: str
    node: str
    strategy: str
    config_name: Optional[str]
    config_text: Optional[str]
    sharing: devmod.SharingConfig
    label_seen: Optional[str]
    snapshot: Optional[devmod.NodeDevices] = None  # device plugin only: devices enumerated at start
    started: float = 0.0


class _OperandProgram:
    def __init__(self, operator: "Operator", operand: Operand):
        self.operator = operator
        self.operand = operand

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        del container, allocated
        if self.operand.key == "operator-validator":
            return Outcome(log=_log_line("all validations are successful"))
        if self.operand.key == "mig-manager":
            self.operator.mig_manager_started(pod)
            return Outcome(log=_log_line("Waiting for change to 'nvidia.com/mig.config' label"))
        return Outcome(log=_log_line(f"{self.operand.container} started"))

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        del pod, container
        return None

    def stop(self, pod: Obj) -> None:
        del pod


class _PluginProgram(_OperandProgram):
    """Device plugin and GFD: load the selected config; the plugin also enumerates devices."""

    def _load(self, pod: Obj, container: Obj, previous: Optional[PluginInstance]) -> Tuple[Optional[PluginInstance], Outcome]:
        node_name = pod["spec"]["nodeName"]
        node = self.operator.node(node_name)
        label = ((node or {}).get("metadata", {}).get("labels") or {}).get(PLUGIN_CONFIG_LABEL)
        strategy = _env(container, "MIG_STRATEGY") or "none"
        cm_name = _configmap_volume(pod["spec"], "config")
        default_key = _env(container, "DEFAULT_CONFIG") or None
        data = self.operator.configmap_data(pod["metadata"]["namespace"], cm_name) if cm_name else None
        choice = devmod.select_plugin_config(cm_name, data, label, default_key)
        if choice.skipped:
            if previous is not None:  # unknown key: the config-manager keeps the current config
                kept = dataclasses.replace(previous, label_seen=label)
                return kept, Outcome(log=_log_line(f"Config '{label}' not found in the config map; keeping the current config", "warning"))
            choice = devmod.select_plugin_config(cm_name, data, None, default_key)
        if choice.error:
            return None, Outcome(ok=False, message=choice.error, log=_log_line(choice.error, "error"))
        try:
            sharing = devmod.parse_plugin_config(choice.text) if choice.text is not None else devmod.NO_SHARING
        except devmod.PluginConfigError as exc:
            message = f"unable to load config: {exc}"
            return None, Outcome(ok=False, message=message, log=_log_line(message, "error"))
        instance = PluginInstance(pod["metadata"]["uid"], node_name, strategy, choice.name, choice.text, sharing, label, started=time.time())
        lines = [f"Loading configuration {choice.name or '(none)'} with MIG strategy {strategy}"]
        if self.operand.key == "device-plugin":
            if self.operator.fault("device-plugin-crash"):
                message = "fault injected: device-plugin-crash"
                return None, Outcome(ok=False, message=message, log=_log_line(message, "error"))
            views = self.operator.gpu_views(node_name)
            result = devmod.compute_node(views, strategy, sharing, self.operator.driver_version(node_name))
            lines += result.log
            if result.plugin_error:
                text = "".join(_log_line(line) for line in lines[:-1]) + _log_line(result.plugin_error, "error")
                return None, Outcome(ok=False, message=result.plugin_error, log=text)
            instance.snapshot = result
            lines += [f"Registered device plugin for '{name}' with Kubelet ({count} devices)" for name, count in result.resources.items()]
        return instance, Outcome(log="".join(_log_line(line) for line in lines))

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        del allocated
        instance, outcome = self._load(pod, container, None)
        self.operator.set_instance(self.operand.key, pod["metadata"]["uid"], instance)
        return outcome

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        """The config-manager sidecar: a new node label value reloads (and restarts the process)."""
        uid = pod["metadata"]["uid"]
        current = self.operator.instance(self.operand.key, uid)
        node = self.operator.node(pod["spec"]["nodeName"])
        label = ((node or {}).get("metadata", {}).get("labels") or {}).get(PLUGIN_CONFIG_LABEL)
        if current is None or current.label_seen == label:
            return None
        instance, outcome = self._load(pod, container, current)
        self.operator.set_instance(self.operand.key, uid, instance)
        if outcome.ok:
            self.operator.store.set_pod_log(pod["metadata"]["namespace"], pod["metadata"]["name"], outcome.log,
                                            container=container["name"], append=True)
            return None
        return outcome

    def stop(self, pod: Obj) -> None:
        self.operator.set_instance(self.operand.key, pod["metadata"]["uid"], None)


# --------------------------------------------------------------------------------------------
# The operator


class Operator:
    def __init__(self, store: Any, hosts: Mapping[str, str], settings: Settings, faults: Any = None):
        self.store = store
        self.hosts = dict(hosts)
        self.settings = settings
        self.faults = faults
        self._instances: Dict[str, Dict[str, PluginInstance]] = {"device-plugin": {}, "gpu-feature-discovery": {}}
        self._state_cache: Dict[str, Tuple[Tuple[int, int], Any]] = {}
        self._nodes: Dict[str, Obj] = {}
        self._lock = threading.RLock()
        self._mig_processed: Dict[str, Optional[str]] = {}
        self._mig_jobs: Dict[str, threading.Thread] = {}
        self._mig_pods: Dict[str, str] = {}  # node -> running mig-manager pod uid
        self._boot_ids: Dict[str, str] = {}
        self.namespace = settings.namespace
        self.programs: Dict[str, _OperandProgram] = {}
        for operand in OPERANDS:
            cls = _PluginProgram if operand.key in ("device-plugin", "gpu-feature-discovery") else _OperandProgram
            self.programs[operand.ds_name] = cls(self, operand)
        self.kubelet: Optional[Kubelet] = None
        self._pass_pods: Optional[List[Obj]] = None  # pods as read at the start of a step of the pass
        self.stop_event = threading.Event()

    # ------------------------------------------------------------------ small accessors

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
        with self._lock:
            return self._instances[kind].get(uid)

    def set_instance(self, kind: str, uid: str, instance: Optional[PluginInstance]) -> None:
        with self._lock:
            if instance is None:
                self._instances[kind].pop(uid, None)
            else:
                self._instances[kind][uid] = instance

    def host_state(self, node: str) -> Any:
        """The node's GPU state, re-read only when the file changed."""
        path = self.hosts.get(node)
        if not path:
            return None
        from gpulab import gpustate  # pylint: disable=import-outside-toplevel

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

    def program_for(self, pod: Obj, container: Obj) -> Any:
        meta = pod["metadata"]
        if meta.get("namespace") != self.namespace:
            return None
        for ref in meta.get("ownerReferences") or []:
            if ref.get("kind") == "DaemonSet" and ref.get("name") in self.programs:
                operand = OPERANDS_BY_DS[ref["name"]]
                if container.get("name") == operand.container:
                    return self.programs[ref["name"]]
        return None

    def node_devices(self, node: str) -> Optional[devmod.NodeDevices]:
        """Healthy devices of the node's running device plugin (None when no plugin runs)."""
        pod = self._running_operand_pod(node, "nvidia-device-plugin-daemonset")
        if pod is None:
            return None
        instance = self.instance("device-plugin", pod["metadata"]["uid"])
        if instance is None or instance.snapshot is None:
            return None
        return self._healthy(node, instance.snapshot)

    def _healthy(self, node: str, snapshot: devmod.NodeDevices) -> devmod.NodeDevices:
        present = set()
        for view in self.gpu_views(node):
            present.add(view.uuid)
            present.update(mig.uuid for mig in view.mig_devices)
        healthy = {name: [d for d in found if d.physical_id in present] for name, found in snapshot.devices.items()}
        return dataclasses.replace(snapshot, devices=healthy, resources={name: len(found) for name, found in healthy.items()})

    def _running_operand_pod(self, node: str, ds_name: str) -> Optional[Obj]:
        pods = self._pass_pods if self._pass_pods is not None else self.store.items("v1/pods", self.namespace)
        for pod in pods:
            if pod["spec"].get("nodeName") != node or pod["metadata"].get("namespace") != self.namespace:
                continue
            refs = pod["metadata"].get("ownerReferences") or []
            if any(ref.get("name") == ds_name and ref.get("kind") == "DaemonSet" for ref in refs) and _pod_ready(pod):
                return pod
        return None

    # ------------------------------------------------------------------ the pass

    def reconcile(self) -> None:
        policies = sorted(self.store.items("nvidia.com/v1/clusterpolicies"),
                          key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        nodes = self.store.items("v1/nodes")
        self._notice_reboots(nodes)
        policy = policies[0] if policies else None
        for extra in policies[1:]:
            self._set_policy_status(extra, "ignored", "ClusterPolicy ignored: only one ClusterPolicy is reconciled")
        if policy is not None:
            annotations = policy["metadata"].get("annotations") or {}
            self.namespace = annotations.get("meta.helm.sh/release-namespace") or self.settings.namespace
            self._ensure_namespace()
            gpu_nodes = [n for n in nodes if self._is_gpu_node(n["metadata"]["name"])]
            for node in gpu_nodes:
                self._label_node(node, policy)
            self._ensure_mig_configmap(policy)
            self._ensure_daemonsets(policy)
        self._collect_orphans({p["metadata"]["uid"] for p in policies})
        nodes = self.store.items("v1/nodes")
        self._sync_daemonsets(nodes)
        # Reading the pods once per step keeps a pass cheap; what changed meanwhile is seen by the
        # next pass, which our own writes trigger.
        self._pass_pods = self.store.items("v1/pods", self.namespace)
        try:
            self._sync_gpu_nodes(nodes)
            if policy is not None:
                self._trigger_mig_manager(nodes)
                self._update_policy_status(policy)
        finally:
            self._pass_pods = None

    def _notice_reboots(self, nodes: List[Obj]) -> None:
        """A host that rebooted restarts all its containers: the device plugin re-enumerates the
        GPUs and the MIG manager applies its label again (how MIG layouts come back on Hopper)."""
        for node in nodes:
            name = node["metadata"]["name"]
            state = self.host_state(name)
            if state is None:
                continue
            previous = self._boot_ids.get(name)
            self._boot_ids[name] = state.boot_id
            if previous is not None and previous != state.boot_id and self.kubelet is not None:
                LOG.info("node %s rebooted: restarting its containers", name)
                self.kubelet.node_rebooted(name)
            self._node_readiness(node, bool(getattr(state, "powered_on", True)))

    def _node_readiness(self, node: Obj, powered_on: bool) -> None:
        """A powered-off host stops posting status: the node lifecycle controller marks it
        Unknown and taints it unreachable; powered on again, its kubelet reports Ready."""
        conditions = (node.get("status") or {}).get("conditions") or []
        ready = next((c for c in conditions if c.get("type") == "Ready"), None)
        lost = ready is not None and ready.get("reason") == "NodeStatusUnknown"
        if powered_on == (not lost):
            return
        stamp = now_rfc3339(time.time())

        def mutate(obj: Obj) -> None:
            for condition in obj.setdefault("status", {}).setdefault("conditions", []):
                if condition.get("type") != "Ready":
                    continue
                if powered_on:
                    condition.update(status="True", reason="KubeletReady", message="kubelet is posting ready status (gpulab)",
                                     lastHeartbeatTime=stamp, lastTransitionTime=stamp)
                else:
                    condition.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.",
                                     lastTransitionTime=stamp)
            taints = [t for t in obj.setdefault("spec", {}).get("taints") or [] if t.get("key") != "node.kubernetes.io/unreachable"]
            if not powered_on:
                taints += [{"key": "node.kubernetes.io/unreachable", "effect": effect, "timeAdded": stamp}
                           for effect in ("NoSchedule", "NoExecute")]
            if taints:
                obj["spec"]["taints"] = taints
            else:
                obj["spec"].pop("taints", None)
        try:
            self.store.controller_update("v1/nodes", None, node["metadata"]["name"], mutate)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot update readiness of %s", node["metadata"]["name"])

    def _collect_orphans(self, live_policies: Iterable[str]) -> None:
        """Garbage-collect what a deleted ClusterPolicy owned, including objects this loop created
        from a policy read just before it was deleted (the store's GC had already run)."""
        live = set(live_policies)
        for key in ("apps/v1/daemonsets", "v1/configmaps"):
            for obj in self.store.items(key, self.namespace):
                refs = [r for r in obj["metadata"].get("ownerReferences") or [] if r.get("kind") == "ClusterPolicy"]
                if refs and not any(r.get("uid") in live for r in refs):
                    try:
                        self.store.delete(key, self.namespace, obj["metadata"]["name"])
                    except Exception:  # pylint: disable=broad-except
                        pass

    def _is_gpu_node(self, name: str) -> bool:
        state = self.host_state(name)
        return state is not None and bool(state.gpus)

    def _ensure_namespace(self) -> None:
        try:
            self.store.get("v1/namespaces", None, self.namespace)
        except Exception:  # pylint: disable=broad-except
            try:
                self.store.create("v1/namespaces", {"metadata": {"name": self.namespace, "labels": {
                    "pod-security.kubernetes.io/enforce": "privileged"}}})
            except Exception:  # pylint: disable=broad-except
                pass

    def _label_node(self, node: Obj, policy: Obj) -> None:
        """Operator-side labels (SPECS §7.4): present, deploy.*, mig.capable, default mig.config."""
        spec = policy.get("spec") or {}
        name = node["metadata"]["name"]
        views = self.gpu_views(name)
        mig_capable = any(view.mig_capable for view in views)
        labels = node["metadata"].get("labels") or {}
        if labels.get("nvidia.com/gpu.deploy.operands") == "false":
            return
        wanted: Dict[str, Optional[str]] = {"nvidia.com/gpu.present": "true", "nvidia.com/mig.capable": "true" if mig_capable else "false"}
        for key in DEPLOY_LABELS:
            if f"nvidia.com/gpu.deploy.{key}" not in labels:
                wanted[f"nvidia.com/gpu.deploy.{key}"] = "true"
        mig_key = "nvidia.com/gpu.deploy.mig-manager"
        if mig_capable and mig_key not in labels:
            wanted[mig_key] = "true"
        elif not mig_capable and mig_key in labels:
            wanted[mig_key] = None
        default = mig_default_config(spec)
        if mig_capable and _enabled(spec, "migManager") and default and MIG_CONFIG_LABEL not in labels:
            wanted[MIG_CONFIG_LABEL] = default
        self._set_labels(name, wanted)

    def _set_labels(self, node: str, wanted: Mapping[str, Optional[str]], annotations: Optional[Mapping[str, Optional[str]]] = None) -> None:
        def mutate(obj: Obj) -> None:
            labels = obj["metadata"].setdefault("labels", {})
            for key, value in wanted.items():
                if value is None:
                    labels.pop(key, None)
                else:
                    labels[key] = value
            if annotations:
                notes = obj["metadata"].setdefault("annotations", {})
                for key, value in annotations.items():
                    if value is None:
                        notes.pop(key, None)
                    else:
                        notes[key] = value
        try:
            self.store.controller_update("v1/nodes", None, node, mutate)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot label node %s", node)

    def _ensure_mig_configmap(self, policy: Obj) -> None:
        spec = policy.get("spec") or {}
        if not _enabled(spec, "migManager") or _section(spec, "migManager", "config").get("name"):
            return
        try:
            self.store.get("v1/configmaps", self.namespace, DEFAULT_MIG_CONFIGMAP)
            return
        except Exception:  # pylint: disable=broad-except
            pass
        body = {
            "metadata": {"name": DEFAULT_MIG_CONFIGMAP, "namespace": self.namespace,
                         "labels": {MANAGED_BY: "gpu-operator"}, "ownerReferences": [self._owner_ref(policy)]},
            "data": {"config.yaml": yaml.safe_dump(default_mig_parted_config(), sort_keys=False)},
        }
        try:
            self.store.create("v1/configmaps", body)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot create %s", DEFAULT_MIG_CONFIGMAP)

    @staticmethod
    def _owner_ref(policy: Obj) -> Obj:
        return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": policy["metadata"]["name"],
                "uid": policy["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}

    # ------------------------------------------------------------------ operand DaemonSets

    def _daemonset_body(self, operand: Operand, policy: Obj) -> Obj:
        spec = policy.get("spec") or {}
        section = _section(spec, operand.spec_key) if operand.spec_key else {}
        image = operand.image
        if section.get("repository") and section.get("image") and section.get("version"):
            image = f"{section['repository']}/{section['image']}:{section['version']}"
        container: Obj = {"name": operand.container, "image": image, "env": []}
        volumes: List[Obj] = []
        strategy = mig_strategy(spec)
        if operand.key in ("device-plugin", "gpu-feature-discovery", "mps-control-daemon"):
            container["env"].append({"name": "MIG_STRATEGY", "value": strategy})
            if strategy != "none":
                container["env"].append({"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"})
            config = _section(spec, "devicePlugin", "config")
            if config.get("name"):
                container["env"] += [{"name": "CONFIG_FILE", "value": "/config/config.yaml"},
                                     {"name": "DEFAULT_CONFIG", "value": str(config.get("default") or "")}]
                volumes.append({"name": "config", "configMap": {"name": config["name"]}})
        if operand.key == "mig-manager":
            config_name = _section(spec, "migManager", "config").get("name") or DEFAULT_MIG_CONFIGMAP
            container["env"] += [{"name": "CONFIG_FILE", "value": "/mig-parted-config/config.yaml"},
                                 {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
            volumes.append({"name": "mig-parted-config", "configMap": {"name": config_name}})
        labels = {"app": operand.ds_name, "app.kubernetes.io/part-of": "nvidia-gpu"}
        pod_spec: Obj = {
            "nodeSelector": ({"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/mps.capable": "true"}
                             if operand.key == "mps-control-daemon" else {f"nvidia.com/gpu.deploy.{operand.key}": "true"}),
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "system-node-critical",
            "serviceAccountName": operand.ds_name.replace("-daemonset", ""),
            "containers": [container],
        }
        if volumes:
            pod_spec["volumes"] = volumes
        return {
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": operand.ds_name, "namespace": self.namespace,
                         "labels": {"app": operand.ds_name, MANAGED_BY: "gpu-operator", "helm.sh/chart": "gpu-operator"},
                         "ownerReferences": [self._owner_ref(policy)]},
            "spec": {"selector": {"matchLabels": {"app": operand.ds_name}},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}},
        }

    def _ensure_daemonsets(self, policy: Obj) -> None:
        spec = policy.get("spec") or {}
        existing = {ds["metadata"]["name"]: ds for ds in self.store.items("apps/v1/daemonsets", self.namespace)}
        for operand in OPERANDS:
            current = existing.get(operand.ds_name)
            if not _enabled(spec, operand.spec_key):
                if current is not None and (current["metadata"].get("labels") or {}).get(MANAGED_BY) == "gpu-operator":
                    self.store.delete("apps/v1/daemonsets", self.namespace, operand.ds_name)
                continue
            body = self._daemonset_body(operand, policy)
            digest = _template_hash(body["spec"])
            body["metadata"]["annotations"] = {LAST_APPLIED: digest}
            if current is None:
                try:
                    self.store.create("apps/v1/daemonsets", body)
                except Exception:  # pylint: disable=broad-except
                    LOG.exception("cannot create DaemonSet %s", operand.ds_name)
                continue
            if (current["metadata"].get("annotations") or {}).get(LAST_APPLIED) == digest:
                continue  # user changes such as a rollout restart are kept (the operator compares its own hash)

            self.store.controller_update("apps/v1/daemonsets", self.namespace, operand.ds_name, _replace_template(body))

    def _sync_daemonsets(self, nodes: List[Obj]) -> None:
        pods_by_owner: Dict[str, List[Obj]] = {}
        for pod in self.store.items("v1/pods"):
            owner = _owner_uid(pod)
            if owner:
                pods_by_owner.setdefault(owner, []).append(pod)
        for ds in self.store.items("apps/v1/daemonsets"):
            if ds["metadata"].get("deletionTimestamp"):
                continue
            try:
                self._sync_daemonset(ds, nodes, pods_by_owner.get(ds["metadata"]["uid"], []))
            except Exception:  # pylint: disable=broad-except
                LOG.exception("DaemonSet %s/%s", ds["metadata"]["namespace"], ds["metadata"]["name"])

    def _sync_daemonset(self, ds: Obj, nodes: List[Obj], pods: List[Obj]) -> None:
        namespace, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
        template = ds["spec"].get("template") or {}
        digest = _template_hash(template)
        probe = {"spec": dict(template.get("spec") or {})}
        probe["spec"]["tolerations"] = list(probe["spec"].get("tolerations") or []) + _DS_TOLERATIONS
        wanted_nodes = {
            node["metadata"]["name"] for node in nodes
            if schedmod.matches_node_selection(probe, node) and schedmod.untolerated_taint(probe, node) is None
        }
        by_node: Dict[str, List[Obj]] = {}
        for pod in pods:
            by_node.setdefault(pod["spec"].get("nodeName", ""), []).append(pod)
        strategy = (ds["spec"].get("updateStrategy") or {})
        budget = 1
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            raw = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", 1)
            if isinstance(raw, str) and raw.endswith("%"):
                budget = max(1, int(len(wanted_nodes) * int(raw[:-1]) / 100))
            else:
                budget = max(1, int(raw))
        else:
            budget = 0
        unavailable = sum(1 for node in wanted_nodes if not any(_pod_ready(p) for p in by_node.get(node, [])))
        for node_name, found in by_node.items():
            live = [p for p in found if not p["metadata"].get("deletionTimestamp")]
            if node_name not in wanted_nodes:
                for pod in live:
                    self._delete_pod(pod)
                continue
            for extra in live[1:]:
                self._delete_pod(extra)
            if not live:
                continue
            pod = live[0]
            if (pod["metadata"].get("labels") or {}).get("controller-revision-hash") == digest:
                continue
            if budget == 0:
                continue  # OnDelete: the user deletes pods to roll them
            if not _pod_ready(pod):
                self._delete_pod(pod)
            elif unavailable < budget:
                self._delete_pod(pod)
                unavailable += 1
        for node_name in sorted(wanted_nodes):
            if not by_node.get(node_name):
                self._create_ds_pod(ds, template, digest, node_name)
        self._update_ds_status(ds, wanted_nodes, digest, pods)

    def _create_ds_pod(self, ds: Obj, template: Obj, digest: str, node: str) -> None:
        meta = template.get("metadata") or {}
        labels = dict(meta.get("labels") or {})
        labels.update({"controller-revision-hash": digest, "pod-template-generation": str(ds["metadata"].get("generation", 1))})
        spec = copy.deepcopy(template.get("spec") or {})
        spec["nodeName"] = node
        spec["tolerations"] = list(spec.get("tolerations") or []) + [t for t in _DS_TOLERATIONS if t not in (spec.get("tolerations") or [])]
        body = {
            "metadata": {"name": f"{ds['metadata']['name']}-{_suffix()}", "namespace": ds["metadata"]["namespace"],
                         "labels": labels, "annotations": dict(meta.get("annotations") or {}),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds["metadata"]["name"],
                                              "uid": ds["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": spec,
        }
        if not body["metadata"]["annotations"]:
            del body["metadata"]["annotations"]
        try:
            self.store.create("v1/pods", body)
        except Exception:  # pylint: disable=broad-except
            LOG.exception("cannot create a pod for DaemonSet %s on %s", ds["metadata"]["name"], node)

    def _delete_pod(self, pod: Obj) -> None:
        try:
            self.store.delete("v1/pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        except Exception:  # pylint: disable=broad-except
            pass

    def _update_ds_status(self, ds: Obj, wanted_nodes: Iterable[str], digest: str, pods: List[Obj]) -> None:
        """Status from the pods read at the start of the pass (the next pass catches up)."""
        namespace, name = ds["metadata"]["namespace"], ds["metadata"]["name"]
        wanted = set(wanted_nodes)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        scheduled = {p["spec"].get("nodeName") for p in live}
        ready = [p for p in live if _pod_ready(p) and p["spec"].get("nodeName") in wanted]
        updated = [p for p in live if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == digest and p["spec"].get("nodeName") in wanted]
        status = {
            "currentNumberScheduled": len(scheduled & wanted),
            "desiredNumberScheduled": len(wanted),
            "numberMisscheduled": len(scheduled - wanted),
            "numberReady": len(ready),
            "numberAvailable": len(ready),
            "numberUnavailable": len(wanted) - len(ready),
            "updatedNumberScheduled": len(updated),
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        if status["numberUnavailable"] == 0:
            del status["numberUnavailable"]

        def mutate(obj: Obj) -> None:
            obj["status"] = status
        self.store.controller_update("apps/v1/daemonsets", namespace, name, mutate, subresource="status")

    # ------------------------------------------------------------------ device plugin + GFD -> node

    def _sync_gpu_nodes(self, nodes: List[Obj]) -> None:
        for node in nodes:
            name = node["metadata"]["name"]
            if not self._is_gpu_node(name):
                continue
            try:
                self._sync_node(node)
            except Exception:  # pylint: disable=broad-except
                LOG.exception("syncing node %s", name)

    def _sync_node(self, node: Obj) -> None:
        name = node["metadata"]["name"]
        plugin_pod = self._running_operand_pod(name, "nvidia-device-plugin-daemonset")
        plugin = self.instance("device-plugin", plugin_pod["metadata"]["uid"]) if plugin_pod else None
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
            self.store.controller_update("v1/nodes", None, name, mutate_status, subresource="status")

        gfd_pod = self._running_operand_pod(name, "gpu-feature-discovery")
        gfd = self.instance("gpu-feature-discovery", gfd_pod["metadata"]["uid"]) if gfd_pod else None
        annotations: Dict[str, Optional[str]] = {PLUGIN_CONFIG_ANNOTATION: (plugin.config_name or "") if plugin else None}
        if gfd is None:
            self._set_labels(name, {}, annotations)
            return
        views = self.gpu_views(name)
        labels = devmod.compute_node(views, gfd.strategy, gfd.sharing, self.driver_version(name)).labels
        labels["nvidia.com/gfd.timestamp"] = str(int(gfd.started))
        current = node["metadata"].get("labels") or {}
        wanted: Dict[str, Optional[str]] = {key: None for key in current if devmod.is_gfd_label(key) and key not in labels}
        wanted.update(labels)
        self._set_labels(name, wanted, annotations)

    # ------------------------------------------------------------------ MIG manager

    def mig_manager_started(self, pod: Obj) -> None:
        """A (re)started MIG manager applies the current label again (real: reconcile at start)."""
        node = pod["spec"]["nodeName"]
        with self._lock:
            self._mig_processed.pop(node, None)
            self._mig_pods[node] = pod["metadata"]["uid"]

    def _trigger_mig_manager(self, nodes: List[Obj]) -> None:
        for node in nodes:
            name = node["metadata"]["name"]
            pod = self._running_operand_pod(name, "nvidia-mig-manager")
            if pod is None:
                continue
            wanted = (node["metadata"].get("labels") or {}).get(MIG_CONFIG_LABEL)
            with self._lock:
                job = self._mig_jobs.get(name)
                if not wanted or (job is not None and job.is_alive()) or self._mig_processed.get(name) == wanted:
                    continue
                self._mig_processed[name] = wanted
                thread = threading.Thread(target=self._mig_job, args=(name, wanted, pod), daemon=True, name=f"gpulab-mig-{name}")
                self._mig_jobs[name] = thread
            thread.start()

    def _mig_log(self, pod: Obj, message: str, level: str = "info") -> None:
        try:
            self.store.set_pod_log(pod["metadata"]["namespace"], pod["metadata"]["name"], _log_line(message, level), append=True)
        except Exception:  # pylint: disable=broad-except
            pass

    def _mig_job(self, node: str, wanted: str, pod: Obj) -> None:
        try:
            self._reconfigure(node, wanted, pod)
        except Exception as exc:  # pylint: disable=broad-except
            LOG.exception("MIG manager on %s", node)
            self._mig_finish(node, pod, {}, False, f"internal error: {exc}")

    def _mig_state(self, node: str, value: str, failure: Optional[str] = None, extra: Optional[Mapping[str, Optional[str]]] = None) -> None:
        wanted: Dict[str, Optional[str]] = {MIG_STATE_LABEL: value}
        wanted.update(extra or {})
        annotations = {MIG_FAILURE_ANNOTATION: failure} if value in ("success", "failed") else None
        self._set_labels(node, wanted, annotations)

    def _reconfigure(self, node: str, wanted: str, pod: Obj) -> None:
        from gpulab import migparted  # pylint: disable=import-outside-toplevel

        self._mig_log(pod, f"Updating to MIG config: {wanted}")
        volume = _configmap_volume(pod["spec"], "mig-parted-config") or DEFAULT_MIG_CONFIGMAP
        data = self.configmap_data(pod["metadata"]["namespace"], volume)
        path = self.hosts.get(node)
        if data is None or "config.yaml" not in data:
            self._mig_finish(node, pod, {}, False, f'unable to read the MIG configuration: configmap "{volume}" with key config.yaml not found')
            return
        try:
            config = yaml.safe_load(data["config.yaml"])
        except yaml.YAMLError as exc:
            self._mig_finish(node, pod, {}, False, f"unable to parse the MIG configuration file: {exc}")
            return
        self._mig_log(pod, "Asserting that the requested configuration is present in the configuration file")
        configs = (config or {}).get("mig-configs") if isinstance(config, dict) else None
        if not isinstance(configs, dict) or wanted not in configs:
            self._mig_finish(node, pod, {}, False, f"Error validating MIG configuration: selected mig-config '{wanted}' not present in the configuration file")
            return
        if not path:
            self._mig_finish(node, pod, {}, False, "no GPU state for this node")
            return
        applied, message = migparted.assert_config(path, config, wanted)
        if not applied and "not currently applied" not in message:
            self._mig_finish(node, pod, {}, False, f"Error validating MIG configuration: {message}")
            return
        self._mig_log(pod, "Checking if the selected MIG config is currently applied or not")
        if applied:
            self._mig_log(pod, "Selected MIG configuration currently applied")
            self._mig_finish(node, pod, {}, True, None)
            return
        self._mig_log(pod, "Changing the 'nvidia.com/mig.config.state' node label to 'pending'")
        labels = (self.node(node) or {}).get("metadata", {}).get("labels") or {}
        # Values "false" stay "false"; absent operands are not touched (SPECS §7.4).
        paused = {f"nvidia.com/gpu.deploy.{key}": PAUSED for key in PAUSABLE
                  if labels.get(f"nvidia.com/gpu.deploy.{key}") not in (None, "false")}
        self._mig_state(node, "pending", extra=paused)
        self._mig_log(pod, "Shutting down all GPU clients in Kubernetes by disabling their component-specific nodeSelector labels")
        deadline = time.time() + self.settings.mig_pause_timeout
        watched = [OPERANDS_BY_KEY[key.rsplit(".", 1)[-1]].ds_name for key in paused if key.rsplit(".", 1)[-1] in OPERANDS_BY_KEY]
        while time.time() < deadline and not self.stop_event.is_set():
            if not self._operand_pods_on(node, watched):
                break
            time.sleep(0.05)
        else:
            self._mig_finish(node, pod, paused, False, "timed out waiting for the operands to shut down")
            return
        time.sleep(self.settings.mig_apply_delay)
        if self.fault("mig-manager-fail") or self.fault("mig-manager-fails"):
            self._mig_finish(node, pod, paused, False, "fault injected: mig-manager-fail")
            return
        self._mig_log(pod, "Applying the selected MIG config to the node")
        ok, message = migparted.apply_config(path, config, wanted)
        if ok:
            self._mig_log(pod, message)
        failure = None
        if not ok:
            failure = message if "Error applying" in message else f"Error applying MIG configuration with hooks: {message}"
        self._mig_finish(node, pod, paused, ok, failure)

    def _operand_pods_on(self, node: str, ds_names: List[str]) -> bool:
        for other in self.store.items("v1/pods", self.namespace, field_selector=f"spec.nodeName={node}"):
            refs = other["metadata"].get("ownerReferences") or []
            if any(ref.get("name") in ds_names for ref in refs):
                return True
        return False

    def _mig_finish(self, node: str, pod: Obj, paused: Mapping[str, str], ok: bool, failure: Optional[str]) -> None:
        if paused:
            self._mig_log(pod, "Restarting all GPU clients previously shutdown in Kubernetes by reenabling their component-specific nodeSelector labels")
        restore = {key: "true" for key in paused}
        state = "success" if ok else "failed"
        if failure:
            for line in failure.splitlines():
                self._mig_log(pod, line, "error")
            self.store.record_event(self.node(node) or {"kind": "Node", "apiVersion": "v1", "metadata": {"name": node}},
                                    "MigConfigFailed", f"MIG manager failed to apply '{self._mig_processed.get(node)}': {failure}",
                                    type="Warning", component="nvidia-mig-manager")
        self._mig_state(node, state, failure=failure, extra=restore)
        self._mig_log(pod, f"Changing the 'nvidia.com/mig.config.state' node label to '{state}'")
        self._mig_log(pod, "Waiting for change to 'nvidia.com/mig.config' label")
        self._state_cache.pop(node, None)

    # ------------------------------------------------------------------ ClusterPolicy status

    def _update_policy_status(self, policy: Obj) -> None:
        spec = policy.get("spec") or {}
        problems = []
        for operand in OPERANDS:
            if not _enabled(spec, operand.spec_key):
                continue
            try:
                ds = self.store.get("apps/v1/daemonsets", self.namespace, operand.ds_name)
            except Exception:  # pylint: disable=broad-except
                problems.append(f"{operand.ds_name} not created")
                continue
            status = ds.get("status") or {}
            desired = status.get("desiredNumberScheduled", 0)
            if status.get("numberAvailable", 0) < desired or status.get("updatedNumberScheduled", 0) < desired:
                problems.append(f"{operand.ds_name}: {status.get('numberAvailable', 0)}/{desired} available")
        if self.fault("clusterpolicy-never-ready"):
            problems.append("fault injected: clusterpolicy-never-ready")
        if problems:
            self._set_policy_status(policy, "notReady", "; ".join(problems))
        else:
            self._set_policy_status(policy, "ready", "")

    def _set_policy_status(self, policy: Obj, state: str, message: str) -> None:
        previous = policy.get("status") or {}
        if previous.get("state") == state and (previous.get("conditions") or [{}])[0].get("message", "") == message \
                and previous.get("namespace") == self.namespace:
            return
        stamp = now_rfc3339(time.time())
        ready = state == "ready"
        status = {
            "state": state,
            "namespace": self.namespace,
            "conditions": [
                {"type": "Ready", "status": "True" if ready else "False",
                 "reason": "Reconciled" if ready else ("Ignored" if state == "ignored" else "OperandNotReady"),
                 "message": message, "lastTransitionTime": stamp},
                {"type": "Error", "status": "False" if ready or state == "ignored" else "True",
                 "reason": "Ready" if ready else "OperandNotReady", "message": message, "lastTransitionTime": stamp},
            ],
        }

        def mutate(obj: Obj) -> None:
            obj["status"] = status
        try:
            self.store.controller_update("nvidia.com/v1/clusterpolicies", None, policy["metadata"]["name"], mutate, subresource="status")
        except Exception:  # pylint: disable=broad-except
            pass


OPERANDS_BY_KEY = {operand.key: operand for operand in OPERANDS}


def _replace_template(body: Obj) -> Any:
    """A controller_update mutation that puts the operator's desired template in place."""
    def mutate(obj: Obj) -> None:
        obj["metadata"].setdefault("annotations", {})[LAST_APPLIED] = body["metadata"]["annotations"][LAST_APPLIED]
        obj["metadata"]["labels"] = body["metadata"]["labels"]
        obj["spec"]["template"] = body["spec"]["template"]
    return mutate


# --------------------------------------------------------------------------------------------
# The controller loop


class Controllers:
    """Handle of the running controllers: `.stop()`, `.threads`, `.wait_idle()`."""

    def __init__(self, store: Any, hosts: Mapping[str, str], stop_event: threading.Event, settings: Settings, faults: Any):
        self.store = store
        self.settings = settings
        self.stop_event = stop_event
        self.faults = faults
        self.operator = Operator(store, hosts, settings, faults)
        self.operator.stop_event = stop_event
        self.kubelet = Kubelet(store, settings, self.operator.node_devices, self.operator.program_for,
                               self.operator.hosts.get, time.time)
        self.operator.kubelet = self.kubelet
        self.scheduler = schedmod.Scheduler(store, self.operator.fault)
        self._wake = threading.Event()
        self._unsubscribe = store.subscribe(self._on_event)
        self.passes = 0
        self.threads = [threading.Thread(target=self._loop, daemon=True, name="gpulab-controllers")]
        for thread in self.threads:
            thread.start()

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
        """One pass of every controller (also usable directly by tests)."""
        self.scheduler.run_once()
        due = self.kubelet.run_once()
        self.kubelet.check_running()
        self.operator.reconcile()
        self.passes += 1
        return due

    def stop(self) -> None:
        self.stop_event.set()
        self._wake.set()
        self._unsubscribe()
        for thread in self.threads:
            thread.join(timeout=5)

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
