# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The allocation backend of a node (device plugin or DRA) and what DRA needs, checked (pure).

Facts from NVIDIA's DRA driver for GPUs (kubernetes-sigs/dra-driver-nvidia-gpu; one version is cited
throughout: v0.5.0, read at main 9593204 = chart 0.5.0-dev, the snapshot has no v0.5.0 tag; v0.4.1 and
v25.12.0 where they differ):
- ``pkg/featuregates/featuregates.go``: the driver's feature gates per release (``Version`` of each gate, and
  the tags: v25.12.0 knows 8, v0.4.1 adds DeviceMetadata, 0.5.0 adds FabricManagerPartitioning,
  HostManagedIMEXDaemon, DRAListTypeAttributes and ConsumableShares), their maturity and defaults, and
  ``ValidateFeatureGates``' refusals (DynamicMIG is mutually exclusive with PassthroughSupport,
  NVMLDeviceHealthCheck and MPSSupport; from v0.4.1 also PassthroughSupport with NVMLDeviceHealthCheck, and
  DeviceMetadata needs PassthroughSupport; ComputeDomainCliques needs IMEXDaemonsWithDNSNames);
- ``api/nvidia.com/resource/v1beta1/validate.go``: a time-slicing share needs TimeSlicingSettings, an
  MPS share MPSSupport;
- ``cmd/gpu-kubelet-plugin`` (``driver.go``, ``nvlib.go``, ``device_state.go``): with DynamicMIG the plugin
  publishes every full GPU and every possible MIG placement, turns MIG on and creates MIG devices when claims
  are prepared, and destroys the MIG devices its checkpoint does not know when it starts
  (``DestroyUnknownMIGDevices``);
- ``docs/prerequisites.md`` (v0.4.1): Kubernetes v1.34.2 or later, NVIDIA driver 565 or later for GPU
  allocation, CDI in the container runtime (the GPU Operator turns it on, gpu-operator v26.7.0 ``values.yaml``
  ``cdi.enabled``);
- ``templates/kubeletplugin.yaml`` (v0.4.1): ``nvidiaDriverRoot`` (default ``/``, the host's driver;
  ``/run/nvidia/driver`` for the GPU Operator's driver container); the init container waits for the driver
  there.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_versions import release_text, semver

DEVICE_PLUGIN = "device-plugin"
DRA = "dra"
BACKENDS = (DEVICE_PLUGIN, DRA)
MIN_KUBERNETES = (1, 34)
MIN_DRIVER_KUBERNETES = (1, 34, 2)  # docs/prerequisites.md (v0.4.1)
MIN_DRIVER = 565  # docs/prerequisites.md (v0.4.1): v565 or later for GPU allocation
OPERATOR_DRIVER_ROOT = "/run/nvidia/driver"
HOST_DRIVER_ROOT = "/"
RESOURCE_API = "resource.k8s.io/v1"

# gate -> (maturity, default, first SemVer release whose tag knows it), pkg/featuregates/featuregates.go at
# v25.12.0 (= 0.3), v0.4.1 and 0.5.0; DRAListTypeAttributes says 0.4 in its Version field but v0.4.1 lacks it.
GATES: Dict[str, Tuple[str, bool, Tuple[int, int, int]]] = {
    "TimeSlicingSettings": ("alpha", False, (0, 2, 0)), "MPSSupport": ("alpha", False, (0, 2, 0)),
    "IMEXDaemonsWithDNSNames": ("beta", True, (0, 2, 0)), "PassthroughSupport": ("alpha", False, (0, 3, 0)),
    "DynamicMIG": ("alpha", False, (0, 3, 0)), "NVMLDeviceHealthCheck": ("alpha", False, (0, 3, 0)),
    "ComputeDomainCliques": ("beta", True, (0, 3, 0)), "CrashOnNVLinkFabricErrors": ("beta", True, (0, 3, 0)),
    "DeviceMetadata": ("alpha", False, (0, 4, 0)), "FabricManagerPartitioning": ("alpha", False, (0, 5, 0)),
    "HostManagedIMEXDaemon": ("alpha", False, (0, 5, 0)), "DRAListTypeAttributes": ("alpha", False, (0, 5, 0)),
    "ConsumableShares": ("alpha", False, (0, 5, 0)),
}
# (gate, gate, first release that refuses the pair) and (gate, needed gate, first release), ValidateFeatureGates
EXCLUSIVE = (("DynamicMIG", "PassthroughSupport", (0, 3, 0)), ("DynamicMIG", "NVMLDeviceHealthCheck", (0, 3, 0)),
             ("DynamicMIG", "MPSSupport", (0, 3, 0)), ("PassthroughSupport", "NVMLDeviceHealthCheck", (0, 4, 0)))
REQUIRES = (("ComputeDomainCliques", "IMEXDaemonsWithDNSNames", (0, 3, 0)),
            ("DeviceMetadata", "PassthroughSupport", (0, 4, 0)))
DEFAULT_VERSION = "0.5.0"  # the release GPU Operator v26.7.0 deploys (values.yaml draDriver.version)
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


def _release(version: Optional[str]) -> Tuple[int, int, int]:
    try:
        return semver(version or DEFAULT_VERSION)
    except ValueError:
        return semver(DEFAULT_VERSION)  # the version itself is checked where it is used (chart_version)


def known_gates(version: Optional[str] = None) -> List[str]:
    """The gates the driver ``version`` knows (default: DEFAULT_VERSION)."""
    release = _release(version)
    return sorted(name for name, (_m, _d, since) in GATES.items() if since <= release)


def gate_values(gates: Any, version: Optional[str] = None) -> Tuple[Dict[str, bool], List[str]]:
    """``gpufleet_dra_feature_gates`` over the defaults of driver ``version``, and its problems (a gate unknown to
    that release, not a bool)."""
    if not isinstance(gates, Mapping):
        return {}, ["gpufleet_dra_feature_gates must be a mapping of gate name to true/false, got %r" % (gates,)]
    known = known_gates(version)
    shown = version or DEFAULT_VERSION
    problems = []
    for name in gates:
        if name in GATES and name not in known:
            problems.append("gpufleet_dra_feature_gates: %s is unknown to the DRA driver %s (the plugin exits "
                            "'unrecognized feature gate'); it is known from %s" % (name, shown, release_text(GATES[name][2])))
        elif name not in GATES:
            problems.append("gpufleet_dra_feature_gates: unknown gate %r (the driver %s knows %s)"
                            % (name, shown, ", ".join(known)))
    problems += ["gpufleet_dra_feature_gates: %s must be true or false, got %r" % (name, value)
                 for name, value in gates.items() if name in known and not isinstance(value, bool)]
    merged = {name: GATES[name][1] for name in known}
    merged.update({name: value for name, value in gates.items() if name in known and isinstance(value, bool)})
    return merged, problems


def gate_problems(gates: Mapping[str, bool], version: Optional[str] = None) -> List[str]:
    """The combinations the ValidateFeatureGates of driver ``version`` refuses at start."""
    release = _release(version)
    problems = ["gpufleet_dra_feature_gates: %s and %s are mutually exclusive in the DRA driver" % (one, two)
                for one, two, since in EXCLUSIVE if since <= release and gates.get(one) and gates.get(two)]
    return problems + ["gpufleet_dra_feature_gates: %s requires %s to be enabled too" % (one, two)
                       for one, two, since in REQUIRES if since <= release and gates.get(one) and not gates.get(two)]


def alpha_gates(gates: Mapping[str, bool]) -> List[str]:
    """The alpha gates turned on (named in the run's warnings and the docs)."""
    return sorted(name for name, on in gates.items() if on and name in GATES and GATES[name][0] == "alpha")


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


def _dynamic_mig_problem(gates: Mapping[str, bool]) -> List[str]:
    """DynamicMIG is refused whatever the host's layout: the driver owns MIG then, and the collection does not
    follow what it publishes (its expected devices, verify rows and quotas come from the host layout)."""
    if gates.get("DynamicMIG"):
        return ["gpufleet_dra_feature_gates: DynamicMIG is not supported by this collection: with it the DRA driver "
                "publishes every full GPU and every possible MIG placement, turns MIG on and creates MIG devices "
                "itself when claims are prepared, and destroys at start the MIG devices it did not make "
                "(cmd/gpu-kubelet-plugin, DestroyUnknownMIGDevices); the mig role's layout, the slice wait, "
                "gpu_verify and the DRA quota counts would all disagree with it. Turn DynamicMIG off and lay MIG out "
                "with mig_config"]
    return []


def _driver_root_problem(values: Mapping[str, Any]) -> List[str]:
    """The kubelet plugin's nvidiaDriverRoot follows ``gpu_operator_driver_enabled``; a value that is not a
    boolean (and no explicit ``dra_driver_values.nvidiaDriverRoot``) leaves it unknown."""
    extra = values.get("dra_driver_values") if isinstance(values.get("dra_driver_values"), Mapping) else {}
    if extra.get("nvidiaDriverRoot") or driver_root(values.get("gpu_operator_driver_enabled", False)):
        return []
    return ["gpu_operator_driver_enabled is %r: the preflight cannot tell where the NVIDIA driver is, so the DRA "
            "kubelet plugin's nvidiaDriverRoot is unknown (%s for the GPU Operator's driver container, %s for a host "
            "driver); set gpu_operator_driver_enabled to true or false, or dra_driver_values.nvidiaDriverRoot"
            % (values.get("gpu_operator_driver_enabled"), OPERATOR_DRIVER_ROOT, HOST_DRIVER_ROOT)]


def driver_root(driver_enabled: Any) -> Optional[str]:
    """nvidiaDriverRoot for the driver mode: the operator's driver container or the host's; None when unknown."""
    text = str(driver_enabled).strip().lower()
    if isinstance(driver_enabled, bool) or text in ("true", "false", "yes", "no"):
        return OPERATOR_DRIVER_ROOT if text in ("true", "yes") else HOST_DRIVER_ROOT
    return None


def dra_host_problems(values: Mapping[str, Any]) -> List[str]:
    """One host's backend problems (its variables and its ``gpu_facts`` read); none on a device-plugin host
    beyond a bad value."""
    backend = backend_of(values)
    problem = backend_problem(backend)
    if problem or backend != DRA:
        return [problem] if problem else []
    version = values.get("dra_driver_chart_version") or DEFAULT_VERSION
    gates, problems = gate_values(values.get("gpufleet_dra_feature_gates", {}), version)
    facts = values.get("ansible_facts") if isinstance(values.get("ansible_facts"), Mapping) else {}
    problems += gate_problems(gates, version) + _driver_problems(facts.get("gpufleet_gpus") or [])
    problems += _cdi_problem(values) + _sharing_problems(values, gates) + _dynamic_mig_problem(gates)
    return problems + _driver_root_problem(values)


def parse_kubernetes_version(git_version: str) -> Tuple[int, int]:
    """``/version``'s gitVersion ("v1.34.2", "v1.35.0-gke.1") -> (major, minor); (0, 0) when unreadable."""
    return kubernetes_release(git_version)[:2]


def kubernetes_release(git_version: str) -> Tuple[int, int, int]:
    """gitVersion -> (major, minor, patch); a missing patch reads 0, (0, 0, 0) when unreadable."""
    parts = git_version.lstrip("v").split(".")
    digits = ["".join(c for c in p.split("-")[0].split("+")[0] if c.isdigit()) for p in parts[:3]]
    if len(digits) < 2 or not all(digits[:2]):
        return (0, 0, 0)
    return (int(digits[0]), int(digits[1]), int(digits[2]) if len(digits) > 2 and digits[2] else 0)


def cluster_problems(git_version: str, served: Sequence[str]) -> List[str]:
    """What the cluster lacks for DRA: Kubernetes >= 1.34 and ``resource.k8s.io/v1`` served
    (``served``: the group versions of ``/apis/resource.k8s.io``)."""
    problems = []
    if parse_kubernetes_version(git_version) < MIN_KUBERNETES:
        problems.append("Kubernetes %s is too old for DRA: 1.34 or newer is required (resource.k8s.io/v1 is GA "
                        "from 1.34)" % git_version)
    elif kubernetes_release(git_version) < MIN_DRIVER_KUBERNETES:
        problems.append("Kubernetes %s is too old for the DRA driver: 1.34.2 or newer is required" % git_version)
    if RESOURCE_API not in served:
        problems.append("the API server does not serve %s (it serves %s): DRA is not available on this cluster"
                        % (RESOURCE_API, ", ".join(served) or "no resource.k8s.io version"))
    return problems
