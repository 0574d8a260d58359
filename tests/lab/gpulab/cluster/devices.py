"""What a GPU node advertises to Kubernetes: the lab's model of the NVIDIA device plugin and GFD.

Pure functions, no I/O.  Given the node's GPUs as they are *currently* configured (from the
simulator's state), the ClusterPolicy MIG strategy and the selected device-plugin sharing config,
compute:

* the extended resources the device plugin registers (capacity == allocatable),
* the labels GPU Feature Discovery writes (docs/reference/specs.md §8, §9.4),
* the allocatable devices (IDs the kubelet hands out) and what ``nvidia-smi -L`` prints inside a
  container that received them (docs/reference/specs.md §4.7),
* the error the plugin dies with when its config or the node's MIG layout is invalid (docs/reference/specs.md §9.2,
  §8 single strategy).

This is an independent model: it must never import the collection's ``plugins/module_utils``, so
that a wrong formula in the collection shows up as a verification failure against the lab.
Every rule cites the reference fact it follows; where the reference is silent the choice is
written down in the docstring of the function that makes it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from gpulab.cluster.pluginconfig import (GPU_RESOURCE, NO_SHARING, PROFILE_RE, RESOURCE_DOMAIN,
                                         STRATEGIES, PluginConfigError, SharingConfig,
                                         parse_plugin_config)
from gpulab.models import load_model

# Replicated device IDs are "<device id>::<n>" (docs/reference/specs.md §9.2, AnnotatedID).
REPLICA_SEPARATOR = "::"

# What the device plugin exits with (klog's last line), as its errors are wrapped in
# cmd/nvidia-device-plugin/main.go (startPlugins -> start) of NVIDIA/k8s-device-plugin v0.17.0-v0.20.0.
MPS_MIXED_ERROR = "error starting plugins: unable to validate flags: using --mig-strategy=mixed is not supported with MPS"
MPS_MIG_ERROR = ("error starting plugins: error getting plugins: unable to create plugins: failed to create plugin: "
                 "sharing using MPS is not supported for MIG devices")


def mps_refusal(mig_strategy: str, sharing: SharingConfig) -> bool:
    """True when the plugin refuses to start: a config that shares with MPS (some MPS resource with
    more than one replica: api/config/v1/sharing.go SharingStrategy) under the mixed strategy
    (cmd/nvidia-device-plugin/main.go validateFlags, v0.17.0-v0.20.0). GFD and the MPS control
    daemon do not check it (their validateFlags do not), so they run on."""
    return mig_strategy == "mixed" and sharing.method == "mps" and any(r.replicas > 1 for r in sharing.resources)


def effective_mig_strategy(env_strategy: Optional[str], sharing: SharingConfig) -> str:
    """The strategy the plugin (and GFD) runs with: the environment's MIG_STRATEGY when the operator
    set it, else the config file's flags.migStrategy, else the flag's default ``none``.

    NVIDIA/k8s-device-plugin api/config/v1/config.go NewConfig (command line, then environment, then
    config file; api/config/v1/flags.go updateFromCLIFlag takes the flag when urfave/cli reports it
    set, which an environment variable does); NVIDIA/gpu-operator controllers/object_controls.go
    applyMIGConfiguration (v26.7.0) sets MIG_STRATEGY only when ClusterPolicy spec.mig.strategy is
    not empty."""
    if env_strategy is not None:
        return env_strategy
    return sharing.flags_mig_strategy or "none"


# --------------------------------------------------------------------------------------------
# Inputs


@dataclasses.dataclass(frozen=True)
class MigProfileSpec:
    """Attributes of one GPU-instance profile, as `nvidia-smi mig -lgip` prints them."""

    name: str  # "2g.20gb", "1g.10gb+me"
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpegs: int
    ofas: int


@dataclasses.dataclass(frozen=True)
class MigDeviceView:
    """One MIG device (= one compute instance) on a GPU."""

    profile: str  # device profile: "2g.20gb", or "1c.3g.20gb" for a partial compute instance
    gi_profile: str  # the GPU instance's profile, "3g.20gb"
    gi_id: int
    ci_id: int
    uuid: str


@dataclasses.dataclass(frozen=True)
class GpuView:
    """One physical GPU as the device plugin sees it through NVML."""

    index: int
    name: str  # product name, "NVIDIA H100 80GB HBM3"
    uuid: str
    memory_mib: int
    family: str = ""  # "hopper", "ampere" (lower case, as GFD prints it)
    compute_capability: str = ""  # "9.0"
    mig_capable: bool = False
    mig_enabled: bool = False
    mig_devices: Tuple[MigDeviceView, ...] = ()
    mig_profiles: Mapping[str, MigProfileSpec] = dataclasses.field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Outputs


@dataclasses.dataclass(frozen=True)
class Device:
    """An allocatable device: what the kubelet hands to a container."""

    id: str  # GPU UUID, MIG UUID, or "<uuid>::<n>" for a replica
    resource: str
    gpu_index: int
    gpu_name: str
    gpu_uuid: str
    mig_profile: Optional[str] = None
    mig_uuid: Optional[str] = None
    replica: Optional[int] = None
    gi_id: Optional[int] = None
    ci_id: Optional[int] = None

    @property
    def physical_id(self) -> str:
        """The underlying device, shared by all its replicas."""
        return self.mig_uuid or self.gpu_uuid


@dataclasses.dataclass
class NodeDevices:
    """Everything the device plugin and GFD publish for one node."""

    resources: Dict[str, int]
    labels: Dict[str, str]
    devices: Dict[str, List[Device]]
    plugin_error: Optional[str] = None
    gfd_error: Optional[str] = None
    sharing: SharingConfig = NO_SHARING
    log: List[str] = dataclasses.field(default_factory=list)

    def max_request(self, resource: str) -> Optional[int]:
        """1 when the plugin refuses requests > 1 for this shared resource (docs/reference/specs.md §9.3)."""
        base = resource[: -len(".shared")] if resource.endswith(".shared") else resource
        if self.sharing.replicas_for(base) > 1 and self.sharing.fail_requests_greater_than_one:
            return 1
        return None


# --------------------------------------------------------------------------------------------
# Helpers on names


def sanitize_product(name: str) -> str:
    """GFD product label value: drop characters outside [A-Za-z0-9-_. ], spaces become '-' (docs/reference/specs.md §8)."""
    kept = "".join(ch for ch in name if ch.isascii() and (ch.isalnum() or ch in "-_. "))
    return kept.strip().replace(" ", "-")


def profile_slices(profile: str) -> Tuple[int, int]:
    """(GPU-instance slices, compute-instance slices) of a profile name (docs/reference/specs.md §1.2)."""
    match = PROFILE_RE.match(profile)
    if not match:
        raise ValueError(f"not a MIG profile name: {profile!r}")
    g = int(match.group("g"))
    c = int(match.group("c")) if match.group("c") else g
    return g, c


def is_full_compute_profile(profile: str) -> bool:
    """True for `<G>g.<GB>gb[attrs]` (C == G); only those become mixed-strategy resources (docs/reference/specs.md §9.1)."""
    match = PROFILE_RE.match(profile)
    return bool(match) and match.group("c") is None


def mig_resource_name(profile: str) -> str:
    """`1g.10gb+me` -> `nvidia.com/mig-1g.10gb.me` ('+' becomes '.', '-me' is kept; docs/reference/specs.md §9.1)."""
    return f"{RESOURCE_DOMAIN}/mig-{profile.replace('+', '.')}"


def gib_to_mib(gib: float) -> int:
    """Memory of a MIG profile in MiB from the GiB column of `-lgip` (two decimals).

    NVML reports MIG memory in MiB that are multiples of 32 on every capture we have, so round to
    32 MiB: 9.75 -> 9984 and 19.62 -> 20096 (H100, docs/reference/specs.md §8 GFD example), 10.75 -> 11008 and
    21.62 -> 22144 (H100 NVL, docs/reference/specs.md §8), 32.50 -> 33280 (H200 NVML capture).
    """
    return int(round(gib * 1024 / 32.0)) * 32


# --------------------------------------------------------------------------------------------
# The node model


def _device_profile(gpu: GpuView, mig: MigDeviceView) -> Optional[MigProfileSpec]:
    return gpu.mig_profiles.get(mig.gi_profile) or gpu.mig_profiles.get(mig.profile)


def _base_devices(gpus: Sequence[GpuView], strategy: str) -> Tuple[Dict[str, List[Device]], Optional[str]]:
    """Physical devices per resource before replication, and the plugin's startup error if any.

    none: every GPU is one `nvidia.com/gpu`, MIG mode is ignored (docs/reference/specs.md §9.1);
    single: MIG devices are `nvidia.com/gpu`; all GPUs must agree on MIG mode and on one profile;
    mixed: full GPUs are `nvidia.com/gpu`, each MIG device `nvidia.com/mig-<profile>`; partial
    compute-instance profiles (`1c.3g.20gb`) are not exposed.
    """
    devices: Dict[str, List[Device]] = {}

    def add(resource: str, device: Device) -> None:
        devices.setdefault(resource, []).append(device)

    for gpu in gpus:
        full = Device(gpu.uuid, GPU_RESOURCE, gpu.index, gpu.name, gpu.uuid)
        if strategy == "none" or not gpu.mig_enabled:
            add(GPU_RESOURCE, full)
            continue
        for mig in gpu.mig_devices:
            if strategy == "mixed" and not is_full_compute_profile(mig.profile):
                continue
            resource = GPU_RESOURCE if strategy == "single" else mig_resource_name(mig.profile)
            add(resource, Device(mig.uuid, resource, gpu.index, gpu.name, gpu.uuid, mig.profile, mig.uuid, gi_id=mig.gi_id, ci_id=mig.ci_id))

    if strategy == "single":
        enabled = [gpu for gpu in gpus if gpu.mig_enabled]
        if enabled and len(enabled) != len(gpus):
            return devices, "invalid MIG configuration: all devices on the node must be configured with the same migEnabled value"
        profiles = {mig.profile for gpu in enabled for mig in gpu.mig_devices}
        if len(profiles) > 1:
            return devices, "invalid MIG configuration: more than one MIG device type present on node: " + ", ".join(sorted(profiles))
    return devices, None


def _replicate(devices: Dict[str, List[Device]], sharing: SharingConfig) -> Dict[str, List[Device]]:
    """Expand shared resources into `<id>::<n>` replicas; renamed ones become `<name>.shared` (docs/reference/specs.md §9.3, §10)."""
    result: Dict[str, List[Device]] = {}
    for resource, physical in devices.items():
        replicas = sharing.replicas_for(resource)
        if replicas <= 1:
            result[resource] = list(physical)
            continue
        name = f"{resource}.shared" if sharing.rename_by_default else resource
        result[name] = [
            dataclasses.replace(device, id=f"{device.id}{REPLICA_SEPARATOR}{n}", resource=name, replica=n)
            for device in physical
            for n in range(replicas)
        ]
    return result


def _sharing_labels(prefix: str, resource: str, sharing: SharingConfig) -> Dict[str, str]:
    replicas = sharing.replicas_for(resource)
    return {
        f"{prefix}.replicas": str(replicas),
        f"{prefix}.sharing-strategy": sharing.method if replicas > 1 else "none",
    }


def _product(base: str, resource: str, sharing: SharingConfig) -> str:
    """`-SHARED` suffix when the resource is replicated and not renamed (docs/reference/specs.md §9.4)."""
    if sharing.replicas_for(resource) > 1 and not sharing.rename_by_default:
        return f"{base}-SHARED"
    return base


def _mig_attribute_labels(prefix: str, profile: str, spec: Optional[MigProfileSpec]) -> Dict[str, str]:
    gi_slices, ci_slices = profile_slices(profile)
    labels = {f"{prefix}.slices.gi": str(gi_slices), f"{prefix}.slices.ci": str(ci_slices)}
    if spec is not None:
        labels.update(
            {
                f"{prefix}.memory": str(spec.memory_mib),
                f"{prefix}.multiprocessors": str(spec.multiprocessors),
                f"{prefix}.engines.copy": str(spec.copy_engines),
                f"{prefix}.engines.decoder": str(spec.decoders),
                f"{prefix}.engines.encoder": str(spec.encoders),
                f"{prefix}.engines.jpeg": str(spec.jpegs),
                f"{prefix}.engines.ofa": str(spec.ofas),
            }
        )
    return labels


def _common_labels(gpus: Sequence[GpuView], strategy: str, sharing: SharingConfig, driver_version: str) -> Dict[str, str]:
    first = gpus[0]
    labels = {
        "nvidia.com/gpu.family": first.family or "unknown",
        "nvidia.com/mig.capable": "true" if any(gpu.mig_capable for gpu in gpus) else "false",
        "nvidia.com/mps.capable": "true" if sharing.method == "mps" else "false",
    }
    if first.compute_capability and "." in first.compute_capability:
        major, minor = first.compute_capability.split(".", 1)
        labels["nvidia.com/gpu.compute.major"] = major
        labels["nvidia.com/gpu.compute.minor"] = minor
    if strategy != "none":
        labels["nvidia.com/mig.strategy"] = strategy
    parts = driver_version.split(".") if driver_version else []
    if len(parts) == 3:
        labels.update(
            {
                "nvidia.com/cuda.driver-version.full": driver_version,
                "nvidia.com/cuda.driver-version.major": parts[0],
                "nvidia.com/cuda.driver-version.minor": parts[1],
                "nvidia.com/cuda.driver-version.revision": parts[2],
            }
        )
    return labels


def _full_gpu_labels(gpus: Sequence[GpuView], exposes_full_gpus: bool, sharing: SharingConfig) -> Dict[str, str]:
    """`nvidia.com/gpu.*` for physical GPUs; replicas 0 when every GPU is MIG-enabled (GFD labels MIG parents
    without sharing, under every strategy: docs/reference/specs.md §8, §8.2)."""
    first = gpus[0]
    product = sanitize_product(first.name)
    labels = {
        "nvidia.com/gpu.count": str(len(gpus)),
        "nvidia.com/gpu.memory": str(first.memory_mib),
    }
    if exposes_full_gpus:
        labels["nvidia.com/gpu.product"] = _product(product, GPU_RESOURCE, sharing)
        labels.update(_sharing_labels("nvidia.com/gpu", GPU_RESOURCE, sharing))
    else:
        labels["nvidia.com/gpu.product"] = product
        labels["nvidia.com/gpu.replicas"] = "0"
        labels["nvidia.com/gpu.sharing-strategy"] = "none"
    return labels


def _gfd_labels(gpus: Sequence[GpuView], strategy: str, sharing: SharingConfig, driver_version: str) -> Dict[str, str]:
    if not gpus:
        return {}
    labels = _common_labels(gpus, strategy, sharing, driver_version)
    product = sanitize_product(gpus[0].name)
    enabled = [gpu for gpu in gpus if gpu.mig_enabled]

    if strategy == "none" or not enabled:
        # MIG-enabled GPUs are labelled without sharing; a full GPU of the same name wins (§8.2).
        labels.update(_full_gpu_labels(gpus, len(enabled) != len(gpus), sharing))
        return labels

    if strategy == "single":
        profiles = sorted({mig.profile for gpu in enabled for mig in gpu.mig_devices})
        if len(enabled) != len(gpus) or len(profiles) != 1:
            # Mixed MIG modes, several profiles or no MIG device at all: GFD's invalid labeler
            # (docs/reference/specs.md §8.1) writes memory 0 and an empty sharing strategy.
            labels.update(
                {
                    "nvidia.com/gpu.product": f"{product}-MIG-INVALID",
                    "nvidia.com/gpu.count": "0",
                    "nvidia.com/gpu.replicas": "0",
                    "nvidia.com/gpu.memory": "0",
                    "nvidia.com/gpu.sharing-strategy": "",
                }
            )
            return labels
        profile = profiles[0]
        owner = next(gpu for gpu in enabled if gpu.mig_devices)
        spec = _device_profile(owner, owner.mig_devices[0])
        labels.update(_mig_attribute_labels("nvidia.com/gpu", profile, spec))
        labels["nvidia.com/gpu.product"] = _product(f"{product}-MIG-{profile}", GPU_RESOURCE, sharing)
        labels["nvidia.com/gpu.count"] = str(sum(len(gpu.mig_devices) for gpu in enabled))
        labels.update(_sharing_labels("nvidia.com/gpu", GPU_RESOURCE, sharing))
        return labels

    # mixed
    labels.update(_full_gpu_labels(gpus, len(enabled) != len(gpus), sharing))
    per_profile: Dict[str, List[Tuple[GpuView, MigDeviceView]]] = {}
    for gpu in enabled:
        for mig in gpu.mig_devices:
            if is_full_compute_profile(mig.profile):
                per_profile.setdefault(mig.profile, []).append((gpu, mig))
    for profile, members in sorted(per_profile.items()):
        resource = mig_resource_name(profile)
        prefix = resource
        owner, mig = members[0]
        labels.update(_mig_attribute_labels(prefix, profile, _device_profile(owner, mig)))
        labels[f"{prefix}.count"] = str(len(members))
        labels[f"{prefix}.product"] = _product(f"{sanitize_product(owner.name)}-MIG-{profile}", resource, sharing)
        labels.update(_sharing_labels(prefix, resource, sharing))
    return labels


def compute_node(
    gpus: Sequence[GpuView],
    mig_strategy: str,
    sharing: SharingConfig = NO_SHARING,
    driver_version: str = "",
) -> NodeDevices:
    """Resources, labels and devices of one node for the current GPU state.

    `mig_strategy` is the strategy the plugin runs with (`effective_mig_strategy`: the ClusterPolicy's
    `spec.mig.strategy` through MIG_STRATEGY when set, else the config's `flags.migStrategy`).
    """
    if mig_strategy not in STRATEGIES:
        raise ValueError(f"unknown MIG strategy {mig_strategy!r}")
    base, error = _base_devices(gpus, mig_strategy)
    log: List[str] = list(sharing.warnings)
    if mps_refusal(mig_strategy, sharing):
        # Checked before any device is enumerated (NVIDIA/k8s-device-plugin
        # cmd/nvidia-device-plugin/main.go validateFlags, v0.17.0 through v0.20.0): the strategy
        # alone decides, whatever the node's GPUs are.
        error = MPS_MIXED_ERROR
    elif error is None and sharing.method == "mps":
        shared_mig = [d for d in base.get(GPU_RESOURCE, []) if d.mig_uuid]
        if shared_mig and sharing.replicas_for(GPU_RESOURCE) > 1:
            # internal/plugin/mps.go getMPSOptions, wrapped by internal/plugin/factory.go New and
            # cmd/nvidia-device-plugin/{plugin-manager,main}.go (v0.20.0).
            error = MPS_MIG_ERROR
    labels = _gfd_labels(gpus, mig_strategy, sharing, driver_version)
    if error is not None:
        log.append(error)
        return NodeDevices(resources={}, labels=labels, devices={}, plugin_error=error, sharing=sharing, log=log)
    devices = _replicate({name: found for name, found in base.items() if found}, sharing)
    for shared in sharing.resources:
        if shared.name not in base:
            log.append(f"resource {shared.name} listed in the sharing config is not present on this node; skipping")
    resources = {name: len(found) for name, found in sorted(devices.items())}
    return NodeDevices(resources=resources, labels=labels, devices=devices, sharing=sharing, log=log)


def compute_node_from_config(
    gpus: Sequence[GpuView],
    mig_strategy: str,
    config_text: Optional[str],
    driver_version: str = "",
) -> NodeDevices:
    """`compute_node` after parsing `config_text`; an invalid config makes the plugin (and GFD) fail."""
    try:
        sharing = parse_plugin_config(config_text) if config_text is not None else NO_SHARING
    except PluginConfigError as exc:
        message = f"unable to load config: {exc}"
        return NodeDevices(resources={}, labels={}, devices={}, plugin_error=message, gfd_error=message, log=[message])
    return compute_node(gpus, mig_strategy, sharing, driver_version)


# --------------------------------------------------------------------------------------------
# Labels owned by GFD (so that stale ones can be removed when the node changes)

_GFD_GPU_FIELDS = ("product", "count", "replicas", "sharing-strategy", "memory", "family", "machine", "mode",
                   "multiprocessors", "compute.major", "compute.minor", "slices.gi", "slices.ci")
_GFD_SINGLE_LABELS = ("nvidia.com/mig.capable", "nvidia.com/mps.capable", "nvidia.com/mig.strategy", "nvidia.com/gfd.timestamp")


def is_gfd_label(key: str) -> bool:
    """True for node labels that GFD writes and therefore rewrites/removes on every pass.

    A whitelist, so that labels of the operator (`gpu.present`, `gpu.deploy.*`) and of users
    (e.g. `nvidia.com/gpu.workload.config`) are never removed.
    """
    if key in _GFD_SINGLE_LABELS or key.startswith(("nvidia.com/cuda.", "nvidia.com/mig-", "nvidia.com/gpu.engines.")):
        return True
    return key.startswith("nvidia.com/gpu.") and key[len("nvidia.com/gpu."):] in _GFD_GPU_FIELDS


# --------------------------------------------------------------------------------------------
# `nvidia-smi -L` inside a container (docs/reference/specs.md §4.7)


def render_smi_list(devices: Iterable[Device]) -> str:
    """What `nvidia-smi -L` prints in a container that was allocated `devices`.

    The container sees only its devices, renumbered from 0 in allocation order; the replicas of one
    device are the same device; a MIG device shows under its parent GPU line.
    """
    parents: List[Tuple[str, str]] = []
    migs: Dict[str, List[Tuple[str, str]]] = {}
    seen: set = set()
    for device in devices:
        if device.physical_id in seen:
            continue
        seen.add(device.physical_id)
        if (device.gpu_uuid, device.gpu_name) not in parents:
            parents.append((device.gpu_uuid, device.gpu_name))
        if device.mig_uuid:
            migs.setdefault(device.gpu_uuid, []).append((device.mig_profile or "", device.mig_uuid))
    lines: List[str] = []
    for index, (uuid, name) in enumerate(parents):
        lines.append(f"GPU {index}: {name} (UUID: {uuid})")
        for mig_index, (profile, mig_uuid) in enumerate(migs.get(uuid, [])):
            lines.append(f"  {'MIG ' + profile:<16}Device {mig_index:>2}: (UUID: {mig_uuid})")
    return "".join(line + "\n" for line in lines)


# --------------------------------------------------------------------------------------------
# From the simulator's state (reads the model fixtures through gpulab.models, cached)


def profile_specs(model_key: str) -> Dict[str, MigProfileSpec]:
    """MIG profile attributes of a lab model, from its `-lgip` fixture."""
    spec = load_model(model_key)
    return {
        profile.name: MigProfileSpec(
            name=profile.name,
            memory_mib=gib_to_mib(float(profile.memory_gib)),
            multiprocessors=profile.sm,
            copy_engines=profile.ce,
            decoders=profile.dec,
            encoders=profile.enc,
            jpegs=profile.jpeg,
            ofas=profile.ofa,
        )
        for profile in spec.profiles
    }


def gpu_views(state: Any) -> List[GpuView]:
    """GpuViews of a `gpulab.gpustate.HostState`: what NVML reports right now on that host."""
    views: List[GpuView] = []
    for gpu in state.gpus:
        model = load_model(gpu.model)
        migs: Tuple[MigDeviceView, ...] = ()
        if gpu.mig_current:
            migs = tuple(
                MigDeviceView(profile=ci.profile, gi_profile=gi.profile, gi_id=gi.gi_id, ci_id=ci.ci_id, uuid=ci.uuid)
                for gi, ci in gpu.mig_devices()
            )
        views.append(
            GpuView(
                index=gpu.index,
                name=gpu.name,
                uuid=gpu.uuid,
                memory_mib=gpu.memory_total_mib,
                family=(gpu.architecture or model.architecture).lower(),
                compute_capability=gpu.compute_cap or model.compute_cap,
                mig_capable=gpu.mig_current is not None,
                mig_enabled=bool(gpu.mig_current),
                mig_devices=migs,
                mig_profiles=profile_specs(gpu.model) if model.mig_capable else {},
            )
        )
    return views


def mps_limits(views: Sequence[GpuView], sharing: SharingConfig) -> Optional[Dict[str, Any]]:
    """The per-client limits the MPS control daemon sets when it starts (docs/reference/specs.md §9.6):
    default active thread percentage 100 / replicas, and per GPU a default pinned device memory
    limit of memory / replicas (MiB, written "<n>M"). None when the config does not share with MPS.
    Computed once at start: a later config change is not seen until the daemon restarts."""
    if sharing.method != "mps":
        return None
    replicas = sharing.replicas_for(GPU_RESOURCE)
    if replicas <= 1:
        return None
    full = [view for view in views if not view.mig_enabled]
    return {"replicas": replicas, "active_thread_percentage": 100 // replicas,
            "pinned_memory_limits": {str(view.index): "%dM" % (view.memory_mib // replicas) for view in full}}
