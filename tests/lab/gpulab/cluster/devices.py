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

The data types and name rules are in devicemodel.py, GFD's labels in gfdlabels.py; this module
re-exports them (``__all__``), so that its users import one module.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from gpulab.cluster.devicemodel import (Device, GpuView, MigDeviceView, MigProfileSpec, NodeDevices,
                                        gib_to_mib, is_full_compute_profile, mig_resource_name,
                                        profile_slices, sanitize_product)
from gpulab.cluster.gfdlabels import gfd_labels, is_gfd_label
from gpulab.cluster.pluginconfig import (GPU_RESOURCE, NO_SHARING, STRATEGIES, PluginConfigError,
                                         SharingConfig, parse_plugin_config)
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
# The node model


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
    labels = gfd_labels(gpus, mig_strategy, sharing, driver_version)
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


__all__ = ["MPS_MIG_ERROR", "MPS_MIXED_ERROR", "REPLICA_SEPARATOR", "STRATEGIES", "Device", "GpuView",
           "MigDeviceView", "MigProfileSpec", "NodeDevices", "compute_node", "compute_node_from_config",
           "effective_mig_strategy", "gib_to_mib", "gpu_views", "is_full_compute_profile", "is_gfd_label",
           "mig_resource_name", "mps_limits", "mps_refusal", "profile_slices", "profile_specs",
           "render_smi_list", "sanitize_product"]
