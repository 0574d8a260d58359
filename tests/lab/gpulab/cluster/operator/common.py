"""Names, operands and ClusterPolicy helpers shared by the lab's GPU Operator controllers."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Mapping, Optional

from gpulab.cluster import devices as devmod
from gpulab.cluster.containers import ANNOTATION_PREFIX
from gpulab.cluster.objects import Obj, now_rfc3339

DEFAULT_NAMESPACE = "gpu-operator"
DEFAULT_MIG_CONFIGMAP = "default-mig-parted-config"
PAUSED = "paused-for-mig-change"
MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
MIG_FAILURE_ANNOTATION = ANNOTATION_PREFIX + "mig-config-failure"
PLUGIN_CONFIG_ANNOTATION = ANNOTATION_PREFIX + "device-plugin-config"
LAST_APPLIED = "nvidia.com/last-applied-hash"
MANAGED_BY = "app.kubernetes.io/managed-by"

# Operand pods the MIG manager pauses (docs/reference/specs.md §7.4); absent ones are ignored.
PAUSABLE = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "nvsm")
# The label third-party GPU clients' DaemonSets select (gpu-operator v26.7.0 #2607, mig-parted v0.15.0 #426).
CLIENT_LABEL = "nvidia.com/gpu.deploy.client"
# Operands whose running pods hold the GPUs' device files (docs/reference/specs.md §7.6); the MPS
# control daemon too (it runs beside the device plugin and shares its deploy label).
GPU_CLIENTS = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter", "dcgm", "mps-control-daemon")


@dataclasses.dataclass(frozen=True)
class Operand:
    key: str  # the nvidia.com/gpu.deploy.<key> label
    ds_name: str
    container: str
    image: str
    spec_key: str  # ClusterPolicy spec section with "enabled" (empty: always on)
    mig_only: bool = False
    # ClusterPolicy spec section with the image triple repository/image/version when it is not
    # spec_key (the validator: spec.validator; docs/reference/specs.md §17.1); ``image`` is the fallback.
    image_key: str = ""

    @property
    def image_section(self) -> str:
        return self.image_key or self.spec_key


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
            "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v25.10.1", "", image_key="validator"),
    # Runs where GFD reports MPS sharing (nvidia.com/mps.capable=true), next to the device plugin.
    Operand("mps-control-daemon", "nvidia-device-plugin-mps-control-daemon", "mps-control-daemon-ctr",
            "nvcr.io/nvidia/k8s-device-plugin:v0.18.1", "devicePlugin"),
    # The driver (tag + "-<os>", gpulab.cluster.operator.nfd) and the standalone DCGM: deployed only when
    # their section says enabled: true (DEFAULT_OFF; the chart always writes it).
    Operand("driver", "nvidia-driver-daemonset", "nvidia-driver-ctr", "nvcr.io/nvidia/driver:595.91.07", "driver"),
    Operand("dcgm", "nvidia-dcgm", "nvidia-dcgm-ctr", "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04", "dcgm"),
)
# Sections whose operand runs only when "enabled: true" is written. NVIDIA's DriverSpec.IsEnabled
# defaults to true when the field is absent; a ClusterPolicy rendered by the chart always has it
# (templates/clusterpolicy.yaml, v26.7.0), so this differs only for hand-written policies in tests.
DEFAULT_OFF = ("driver", "dcgm")


OPERANDS_BY_DS = {operand.ds_name: operand for operand in OPERANDS}
OPERANDS_BY_KEY = {operand.key: operand for operand in OPERANDS}

# ``client``: the operator v26.7.0 also labels every GPU node nvidia.com/gpu.deploy.client=true, for
# third-party GPU clients' DaemonSets to select, so that the MIG manager can pause them
# (controllers/state_manager.go gpuStateLabels, gpu-operator v26.7.0, #2607).
_DEPLOYED = tuple(o.key for o in OPERANDS if not o.mig_only and o.key != "mps-control-daemon")
DEPLOY_LABELS = tuple(dict.fromkeys(("driver",) + _DEPLOYED + ("dcgm", "node-status-exporter", "client")))


def log_line(message: str, level: str = "info") -> str:
    return f'time="{now_rfc3339(time.time())}" level={level} msg="{message}"\n'


def section(spec: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    node: Any = spec
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node if isinstance(node, Mapping) else {}


def enabled(spec: Mapping[str, Any], key: str) -> bool:
    if not key:
        return True
    value = section(spec, key).get("enabled", key not in DEFAULT_OFF)
    return value is not False and str(value).lower() != "false"


def mig_strategy(spec: Mapping[str, Any]) -> Optional[str]:
    """`spec.mig.strategy`, None when empty or absent. The chart's default `single` is a value of the
    chart (docs/reference/specs.md §7.2), which renders the field only when the value is not empty
    (deployments/gpu-operator/templates/clusterpolicy.yaml, NVIDIA/gpu-operator v26.7.0); the CRD
    has no default for it. An empty strategy leaves it to each node's device-plugin config
    (controllers/object_controls.go applyMIGConfiguration, v26.7.0)."""
    value = section(spec, "mig").get("strategy") or None
    return value if value in devmod.STRATEGIES else None


MIG_DISABLED = "all-disabled"


def mig_default_config(spec: Mapping[str, Any]) -> str:
    """The `nvidia.com/mig.config` value the operator gives a MIG-capable node without one, "" for none.

    `migManager.config.default` absent means the CRD default `all-disabled`; NVIDIA labels only when
    the value is exactly `all-disabled` and leaves the node alone for "" or any other value
    (docs/reference/specs.md §7.8)."""
    config = section(spec, "migManager", "config")
    if "default" not in config:
        return MIG_DISABLED
    return MIG_DISABLED if config.get("default") == MIG_DISABLED else ""


def container_env(container: Mapping[str, Any], name: str) -> Optional[str]:
    for entry in container.get("env") or []:
        if entry.get("name") == name:
            return entry.get("value")
    return None


def configmap_volume(pod_spec: Mapping[str, Any], volume: str) -> Optional[str]:
    for entry in pod_spec.get("volumes") or []:
        if entry.get("name") == volume:
            return (entry.get("configMap") or {}).get("name")
    return None


def owner_ref(policy: Obj) -> Obj:
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "name": policy["metadata"]["name"],
            "uid": policy["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
