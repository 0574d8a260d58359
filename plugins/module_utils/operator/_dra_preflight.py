# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The allocation backend of a node (device plugin or DRA) and what DRA needs, checked (pure).

Facts from NVIDIA's DRA driver for GPUs (NVIDIA/k8s-dra-driver-gpu at 22407113, chart 0.5.0-dev):
- ``pkg/featuregates/featuregates.go``: the driver's feature gates, their maturity and defaults, and
  ``ValidateFeatureGates``' refusals (DynamicMIG is mutually exclusive with PassthroughSupport,
  NVMLDeviceHealthCheck and MPSSupport; PassthroughSupport with NVMLDeviceHealthCheck;
  ComputeDomainCliques needs IMEXDaemonsWithDNSNames; DeviceMetadata needs PassthroughSupport);
- ``api/nvidia.com/resource/v1beta1/validate.go``: a time-slicing share needs TimeSlicingSettings, an
  MPS share MPSSupport;
- ``templates/validation.yaml``: GPUs through DRA cannot run beside the device plugin on one node.
Kubernetes serves ``resource.k8s.io/v1`` from 1.34 (DRA GA, KEP 4381). The driver needs a 580+ NVIDIA
driver and CDI in the container runtime (gpu-operator v26.7.0 ``values.yaml``: ``cdi.enabled``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

DEVICE_PLUGIN = "device-plugin"
DRA = "dra"
BACKENDS = (DEVICE_PLUGIN, DRA)
MIN_KUBERNETES = (1, 34)
MIN_DRIVER = 580
RESOURCE_API = "resource.k8s.io/v1"

# gate -> (maturity, default), pkg/featuregates/featuregates.go
GATES: Dict[str, Tuple[str, bool]] = {
    "TimeSlicingSettings": ("alpha", False), "MPSSupport": ("alpha", False),
    "IMEXDaemonsWithDNSNames": ("beta", True), "PassthroughSupport": ("alpha", False),
    "DynamicMIG": ("alpha", False), "NVMLDeviceHealthCheck": ("alpha", False),
    "ComputeDomainCliques": ("beta", True), "CrashOnNVLinkFabricErrors": ("beta", True),
    "DeviceMetadata": ("alpha", False),
}
EXCLUSIVE = (("DynamicMIG", "PassthroughSupport"), ("DynamicMIG", "NVMLDeviceHealthCheck"),
             ("DynamicMIG", "MPSSupport"), ("PassthroughSupport", "NVMLDeviceHealthCheck"))
REQUIRES = (("ComputeDomainCliques", "IMEXDaemonsWithDNSNames"), ("DeviceMetadata", "PassthroughSupport"))
SHARING_GATES = {"time-slicing": "TimeSlicingSettings", "mps": "MPSSupport"}


def backend_of(values: Mapping[str, Any]) -> Any:
    """The host's ``gpufleet_gpu_backend`` (a host or group variable), ``device-plugin`` when unset."""
    return values.get("gpufleet_gpu_backend", DEVICE_PLUGIN)


def backend_problem(backend: Any) -> Optional[str]:
    """None for a known backend; both backends named at once is refused as one node, one backend."""
    if isinstance(backend, (list, tuple)) and set(backend) == set(BACKENDS):
        return ("gpufleet_gpu_backend names both backends (%s): a node runs either the device plugin or the DRA "
                "kubelet plugin, never both (NVIDIA's DRA driver refuses to share a node with the device plugin)"
                % ", ".join(map(str, backend)))
    if backend not in BACKENDS:
        return "gpufleet_gpu_backend must be 'device-plugin' or 'dra', got %r" % (backend,)
    return None


def gate_values(gates: Any) -> Tuple[Dict[str, bool], List[str]]:
    """``gpufleet_dra_feature_gates`` over the driver's defaults, and its problems (unknown gate, not a bool)."""
    if not isinstance(gates, Mapping):
        return {}, ["gpufleet_dra_feature_gates must be a mapping of gate name to true/false, got %r" % (gates,)]
    problems = ["gpufleet_dra_feature_gates: unknown gate %r (the driver knows %s)" % (name, ", ".join(sorted(GATES)))
                for name in gates if name not in GATES]
    problems += ["gpufleet_dra_feature_gates: %s must be true or false, got %r" % (name, value)
                 for name, value in gates.items() if name in GATES and not isinstance(value, bool)]
    merged = {name: default for name, (_maturity, default) in GATES.items()}
    merged.update({name: value for name, value in gates.items() if name in GATES and isinstance(value, bool)})
    return merged, problems


def gate_problems(gates: Mapping[str, bool]) -> List[str]:
    """The combinations the driver's ValidateFeatureGates refuses at start."""
    problems = ["gpufleet_dra_feature_gates: %s and %s are mutually exclusive in the DRA driver" % pair
                for pair in EXCLUSIVE if gates.get(pair[0]) and gates.get(pair[1])]
    return problems + ["gpufleet_dra_feature_gates: %s requires %s to be enabled too" % pair
                       for pair in REQUIRES if gates.get(pair[0]) and not gates.get(pair[1])]


def alpha_gates(gates: Mapping[str, bool]) -> List[str]:
    """The alpha gates turned on (named in the run's warnings and the docs)."""
    return sorted(name for name, on in gates.items() if on and GATES.get(name, ("", False))[0] == "alpha")


def _driver_problems(gpus: Sequence[Mapping[str, Any]]) -> List[str]:
    versions = sorted({str(gpu.get("driver_version")) for gpu in gpus if gpu.get("driver_version")})
    old = [v for v in versions if not v.split(".")[0].isdigit() or int(v.split(".")[0]) < MIN_DRIVER]
    return ["NVIDIA driver %s is too old for the DRA driver: %d or newer is required" % (", ".join(old), MIN_DRIVER)] if old else []


def _cdi_problem(values: Mapping[str, Any]) -> List[str]:
    operator = values.get("gpu_operator_values") if isinstance(values.get("gpu_operator_values"), Mapping) else {}
    cdi = operator.get("cdi") if isinstance(operator.get("cdi"), Mapping) else {}
    if cdi.get("enabled", True) is False or str(cdi.get("enabled", True)).lower() == "false":
        return ["CDI is off (gpu_operator_values.cdi.enabled: false): the DRA driver hands devices to containers "
                "through CDI only; leave cdi.enabled at the operator's default (true)"]
    return []


def _sharing_problems(values: Mapping[str, Any], gates: Mapping[str, bool]) -> List[str]:
    config = values.get("gpu_sharing_config")
    if not isinstance(config, Mapping):
        return []
    strategy = str(config.get("strategy", "time-slicing"))
    gate = SHARING_GATES.get(strategy)
    if gate and not gates.get(gate):
        return ["sharing config %r: %s through DRA needs the driver's alpha feature gate %s "
                "(gpufleet_dra_feature_gates: {%s: true})" % (config.get("name"), strategy, gate, gate)]
    return []


def _dynamic_mig_problem(values: Mapping[str, Any], gates: Mapping[str, bool]) -> List[str]:
    selection = values.get("mig_selection") if isinstance(values.get("mig_selection"), Mapping) else {}
    config = selection.get("config") or values.get("mig_config")
    if gates.get("DynamicMIG") and config and config != "all-disabled":
        return ["gpufleet_dra_feature_gates: DynamicMIG would make the DRA driver create and delete MIG devices "
                "itself, fighting the host layout %r that the mig role lays out; turn DynamicMIG off" % (config,)]
    return []


def dra_host_problems(values: Mapping[str, Any]) -> List[str]:
    """One host's backend problems (its variables and its ``gpu_facts`` read); none on a device-plugin host
    beyond a bad value."""
    backend = backend_of(values)
    problem = backend_problem(backend)
    if problem or backend != DRA:
        return [problem] if problem else []
    gates, problems = gate_values(values.get("gpufleet_dra_feature_gates", {}))
    facts = values.get("ansible_facts") if isinstance(values.get("ansible_facts"), Mapping) else {}
    problems += gate_problems(gates) + _driver_problems(facts.get("gpufleet_gpus") or [])
    return problems + _cdi_problem(values) + _sharing_problems(values, gates) + _dynamic_mig_problem(values, gates)


def parse_kubernetes_version(git_version: str) -> Tuple[int, int]:
    """``/version``'s gitVersion ("v1.34.2", "v1.35.0-gke.1") -> (major, minor); (0, 0) when unreadable."""
    parts = git_version.lstrip("v").split(".")
    digits = ["".join(c for c in p if c.isdigit()) for p in parts[:2]]
    return (int(digits[0]), int(digits[1])) if len(digits) == 2 and all(digits) else (0, 0)


def cluster_problems(git_version: str, served: Sequence[str]) -> List[str]:
    """What the cluster lacks for DRA: Kubernetes >= 1.34 and ``resource.k8s.io/v1`` served
    (``served``: the group versions of ``/apis/resource.k8s.io``)."""
    problems = []
    if parse_kubernetes_version(git_version) < MIN_KUBERNETES:
        problems.append("Kubernetes %s is too old for DRA: 1.34 or newer is required (resource.k8s.io/v1 is GA "
                        "from 1.34)" % git_version)
    if RESOURCE_API not in served:
        problems.append("the API server does not serve %s (it serves %s): DRA is not available on this cluster"
                        % (RESOURCE_API, ", ".join(served) or "no resource.k8s.io version"))
    return problems
