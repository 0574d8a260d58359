"""What a configuration asks of each GPU, and creating MIG devices with ordering retries (docs/reference/specs.md §3.2)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from gpulab import driver
from gpulab.driver import DriverError
from gpulab.gpustate import Gpu, HostState
from gpulab.migparted.config import ConfigItem, MigPartedError
from gpulab.models import load_model, parse_profile_name


@dataclass
class Desired:
    mig_enabled: bool
    devices: Dict[str, int]


def desired_per_gpu(state: HostState, items: Sequence[ConfigItem]) -> Dict[int, Desired]:
    """Walk items in order; every matching item configures the GPU (docs/reference/specs.md §6.1); later wins."""
    desired: Dict[int, Desired] = {}
    for item in items:
        for gpu in state.gpus:
            if not item.matches(gpu):
                continue
            if not gpu.mig_capable:
                if item.devices == "all" or not item.mig_enabled:
                    continue
                raise MigPartedError(f"cannot set MIG mode on non MIG-capable GPU {gpu.index}")
            desired[gpu.index] = Desired(item.mig_enabled, {k: v for k, v in item.mig_devices.items() if v > 0})
    return desired


def current_devices(gpu: Gpu) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for _gi, ci in gpu.mig_devices():
        counts[ci.profile] = counts.get(ci.profile, 0) + 1
    return counts


def mode_applied(gpu: Gpu, want: Desired) -> bool:
    """The CURRENT mode is the wanted one; a pending change is not looked at. nvidia-mig-parted v0.15.0,
    cmd/nvidia-mig-parted/assert/mode.go (AssertMigMode) compares GetMigMode, which is NVML's current mode
    (pkg/mig/mode/nvml.go); apply/apply.go sets modes only when that assertion fails."""
    return gpu.mig_current == want.mig_enabled


def devices_applied(gpu: Gpu, want: Desired) -> bool:
    return not want.mig_enabled or current_devices(gpu) == want.devices


def device_plan(gpu: Gpu, devices: Mapping[str, int]) -> List[Tuple[str, Optional[str], int, int]]:
    """Expand counts into (GI profile, CI token, G, memory slices), largest first (docs/reference/specs.md §3.2)."""
    spec = load_model(gpu.model)
    plan = []
    for name, count in devices.items():
        parsed = parse_profile_name(name)
        if parsed is None:
            raise MigPartedError(f"invalid MIG profile name: {name}")
        c, g, gb, attr = parsed
        gi_name = f"{g}g.{gb}gb{attr}"
        profile = spec.profile(gi_name)
        if profile is None:
            raise MigPartedError(f"MIG profile {name} is not supported on GPU {gpu.index} ({gpu.name})")
        ci_token = name if c is not None and c != g else None
        plan.extend([(gi_name, ci_token, g, profile.size)] * count)
    plan.sort(key=lambda entry: (-entry[2], -entry[3], entry[0], entry[1] or ""))
    return plan


def clear(gpu: Gpu) -> None:
    for gi in list(gpu.gpu_instances):
        for ci in list(gi.compute_instances):
            driver.destroy_compute_instance(gpu, gi, ci)
        driver.destroy_gpu_instance(gpu, gi)


def _try_order(gpu: Gpu, order: Sequence[Tuple[str, Optional[str], int, int]]) -> bool:
    spec = load_model(gpu.model)
    for gi_name, ci_token, _g, _size in order:
        profile = spec.profile(gi_name)
        try:
            gi = driver.create_gpu_instance(gpu, profile)  # no explicit placement (docs/reference/specs.md §3.2)
            driver.create_compute_instance(gpu, gi, ci_token)
        except DriverError:
            return False
    return True


def apply_devices(gpu: Gpu, devices: Mapping[str, int]) -> int:
    """Clear then create; on failure clear and retry the next ordering. Returns attempts used."""
    plan = device_plan(gpu, devices)
    seen = set()
    attempts = 0
    for order in itertools.permutations(plan):
        if order in seen:
            continue
        seen.add(order)
        attempts += 1
        clear(gpu)
        if _try_order(gpu, order):
            return attempts
    clear(gpu)
    raise MigPartedError(f"error attempting multiple config orderings: all orderings failed on GPU {gpu.index}: "
                         f"{driver.INSUFFICIENT_RESOURCES}")
