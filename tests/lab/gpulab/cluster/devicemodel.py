"""The data of the lab's device-plugin model (devices.py): what it reads about a node's GPUs (as NVML
reports them) and what it publishes (allocatable devices, resources, labels), and the rules on
MIG profile and resource names (docs/reference/specs.md §1.2, §8, §9.1).

Pure, no I/O; like devices.py it must never import the collection's ``plugins/module_utils``.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Tuple

from gpulab.cluster.pluginconfig import NO_SHARING, PROFILE_RE, RESOURCE_DOMAIN, SharingConfig


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
