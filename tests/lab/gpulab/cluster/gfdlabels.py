"""The node labels of the lab's GPU Feature Discovery model (docs/reference/specs.md §8, §9.4): the
common labels (family, compute capability, MIG strategy, CUDA driver version), the
``nvidia.com/gpu.*`` labels of full GPUs, the MIG labels under the single and mixed strategies
with their sharing suffixes, and which node labels GFD owns (``is_gfd_label``). Called by
``devices.compute_node``.

Pure, no I/O; like devices.py it must never import the collection's ``plugins/module_utils``.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from gpulab.cluster.devicemodel import (GpuView, MigDeviceView, MigProfileSpec, is_full_compute_profile,
                                        mig_resource_name, profile_slices, sanitize_product)
from gpulab.cluster.pluginconfig import GPU_RESOURCE, SharingConfig


def _device_profile(gpu: GpuView, mig: MigDeviceView) -> Optional[MigProfileSpec]:
    return gpu.mig_profiles.get(mig.gi_profile) or gpu.mig_profiles.get(mig.profile)


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


def gfd_labels(gpus: Sequence[GpuView], strategy: str, sharing: SharingConfig, driver_version: str) -> Dict[str, str]:
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
