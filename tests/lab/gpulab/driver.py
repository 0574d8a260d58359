"""Simulated driver (NVML-level) semantics shared by the nvidia-smi and mig-parted emulators.

Functions here mutate an in-memory ``gpustate.HostState``; callers hold ``gpustate.locked``.
Each rule cites the reference fact it follows (docs/reference/specs.md §x) or says it is a modelling choice.
"""

from __future__ import annotations

import argparse
import os
from typing import Callable, List, Optional, Sequence, Tuple

from gpulab.gpustate import ComputeInstance, Gpu, GpuInstance, HostState, mig_uuid
from gpulab.models import GiProfile, ModelSpec, load_model, parse_profile_name

# NVML return strings used verbatim in nvidia-smi messages (docs/reference/specs.md §5).
INSUFFICIENT_RESOURCES = "Insufficient Resources"
INVALID_ARGUMENT = "Invalid Argument"
IN_USE = "In use by another client"
NOT_SUPPORTED = "Not Supported"
NOT_FOUND = "Not Found"

# CI-profile enum by compute-slice count (docs/reference/specs.md §1.3).
CI_PROFILE_ENUM = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6}


class DriverError(Exception):
    """An NVML call failed; ``str(error)`` is the NVML error string printed by the tools."""


# --------------------------------------------------------------------------- geometry

def spec_of(gpu: Gpu) -> ModelSpec:
    return load_model(gpu.model)


def occupied_slices(gpu: Gpu) -> List[bool]:
    spec = spec_of(gpu)
    used = [False] * spec.memory_slices
    for gi in gpu.gpu_instances:
        for slot in range(gi.start, gi.start + gi.size):
            used[slot] = True
    return used


def _engines(profile: Optional[GiProfile]) -> Tuple[int, int, int, int]:
    return (profile.dec, profile.enc, profile.jpeg, profile.ofa) if profile else (0, 0, 0, 0)


def media_engines_fit(gpu: Gpu, profile: GiProfile) -> bool:
    """The GPU's decoders, encoders, JPEG units and OFAs (those of its whole-GPU profile) cover the
    GIs plus ``profile``: on an A30 a second ``+me`` GI finds no JPEG/OFA left (docs/reference/specs.md §2.16).

    Modelling choice: the refusal is reported as Insufficient Resources, like any other shortage.
    """
    spec = spec_of(gpu)
    whole = max((_engines(p) for p in spec.profiles if p.size == spec.memory_slices), default=(0, 0, 0, 0))
    used = [_engines(spec.profile(str(gi.profile_id))) for gi in gpu.gpu_instances] + [_engines(profile)]
    return all(sum(row[i] for row in used) <= whole[i] for i in range(4))


def used_compute_slices(gpu: Gpu) -> int:
    spec = spec_of(gpu)
    total = 0
    for gi in gpu.gpu_instances:
        profile = spec.profile(str(gi.profile_id))
        total += profile.compute_slices if profile else 0
    return total


def free_starts(gpu: Gpu, profile: GiProfile) -> List[int]:
    """Allowed starts (docs/reference/specs.md §3.2, from -lgipp) whose memory range is currently unoccupied."""
    used = occupied_slices(gpu)
    return [start for start in profile.starts if not any(used[start:start + profile.size])]


def _max_disjoint(starts: List[int], size: int) -> int:
    """Largest number of non-overlapping [start, start+size) ranges (equal sizes: greedy is exact)."""
    count, frontier = 0, -1
    for start in sorted(starts):
        if start >= frontier:
            count += 1
            frontier = start + size
    return count


def free_instances(gpu: Gpu, profile: GiProfile) -> int:
    """The "Free" column of -lgip: how many more instances of this profile fit now (docs/reference/specs.md §4.3:
    it drops as instances are created because profiles share the placement axis)."""
    if not gpu.mig_current:
        return profile.instances_total
    spec = spec_of(gpu)
    same = sum(1 for gi in gpu.gpu_instances if gi.profile_id == profile.profile_id)
    by_cap = profile.instances_total - same
    by_memory = _max_disjoint(free_starts(gpu, profile), profile.size)
    by_compute = (spec.compute_slices - used_compute_slices(gpu)) // max(profile.compute_slices, 1)
    return max(0, min(by_cap, by_memory, by_compute))


def gi_id_for(spec: ModelSpec, start: int, size: int) -> int:
    """GPU-instance ID from the placement, as a heap index over the memory-slice axis.

    Modelling choice reproducing docs/reference/specs.md §4.4/§4.5 samples (1g@0 -> 7, 1g@1 -> 8, 2g@2 -> 4,
    3g@4 -> 2; 7g -> 0): level base = memory_slices/size - 1, plus start/size.
    """
    return spec.memory_slices // size - 1 + start // size


# --------------------------------------------------------------------------- GPU instances

def create_gpu_instance(gpu: Gpu, profile: GiProfile, start: Optional[int] = None) -> GpuInstance:
    """Create a GI. Without ``start`` the simulated driver takes the HIGHEST free allowed start.

    Modelling choice: this reproduces the documented outcomes of docs/reference/specs.md §3.2 ("-cgi 19,19,14,9"
    fails with Insufficient Resources, "-cgi 9,19,14,19" succeeds) and §3.2/§4.6 ("-cgi 9,3g.20gb"
    yields 4:4 then 0:4). With ``start`` the placement is used as given or the call fails.
    """
    if not gpu.mig_current:
        raise DriverError(NOT_SUPPORTED)
    spec = spec_of(gpu)
    if start is not None and start not in profile.starts:
        raise DriverError(INVALID_ARGUMENT)
    if sum(1 for gi in gpu.gpu_instances if gi.profile_id == profile.profile_id) >= profile.instances_total:
        raise DriverError(INSUFFICIENT_RESOURCES)
    if used_compute_slices(gpu) + profile.compute_slices > spec.compute_slices:
        raise DriverError(INSUFFICIENT_RESOURCES)
    if not media_engines_fit(gpu, profile):
        raise DriverError(INSUFFICIENT_RESOURCES)
    candidates = free_starts(gpu, profile)
    if start is not None:
        if start not in candidates:
            raise DriverError(INSUFFICIENT_RESOURCES)
        chosen = start
    elif candidates:
        chosen = max(candidates)
    else:
        raise DriverError(INSUFFICIENT_RESOURCES)
    gi = GpuInstance(gi_id=gi_id_for(spec, chosen, profile.size), profile_id=profile.profile_id,
                     profile=profile.name, start=chosen, size=profile.size)
    gpu.gpu_instances.append(gi)
    gpu.gpu_instances.sort(key=lambda item: item.gi_id)
    return gi


def destroy_gpu_instance(gpu: Gpu, gi: GpuInstance) -> None:
    """A GI with compute instances cannot be destroyed (docs/reference/specs.md §5: -dgi before -dci)."""
    if gi.compute_instances or any(proc.gi_id == gi.gi_id for proc in gpu.processes):
        raise DriverError(IN_USE)
    gpu.gpu_instances.remove(gi)


# --------------------------------------------------------------------------- compute instances

def ci_profiles(gi: GpuInstance, spec: ModelSpec) -> List[Tuple[int, int, str]]:
    """(compute slices, CI-profile ID, name) available in a GI; the full-GI one is the default.

    Modelling choice: slice counts {1, 2, 3, 4, 7} up to the GI's G; names per docs/reference/specs.md §1.2.
    """
    profile = spec.profile(str(gi.profile_id))
    g = profile.compute_slices if profile else 1
    result = []
    for slices in sorted({1, 2, 3, 4, 7, g}):
        if slices > g:
            continue
        name = gi.profile if slices == g else f"{slices}c.{gi.profile}"
        result.append((slices, CI_PROFILE_ENUM.get(slices, slices), name))
    return result


def _gi_compute(gi: GpuInstance, spec: ModelSpec) -> int:
    profile = spec.profile(str(gi.profile_id))
    return profile.compute_slices if profile else 1


def ci_slices(ci: ComputeInstance, gi: GpuInstance, spec: ModelSpec) -> int:
    parsed = parse_profile_name(ci.profile)
    if parsed and parsed[0] is not None:
        return parsed[0]
    return _gi_compute(gi, spec)


def ci_start(ci: ComputeInstance, gi: GpuInstance, spec: ModelSpec) -> int:
    """Compute-slice start of a CI inside its GI (CIs are packed in creation order)."""
    start = 0
    for other in sorted(gi.compute_instances, key=lambda item: item.ci_id):
        if other.ci_id == ci.ci_id:
            return start
        start += ci_slices(other, gi, spec)
    return start


def resolve_ci_profile(gi: GpuInstance, spec: ModelSpec, token: Optional[str]) -> Tuple[int, int, str]:
    options = ci_profiles(gi, spec)
    if token is None or token == "":
        return options[-1]
    token = token.strip()
    if token.upper().startswith("MIG "):
        token = token[4:].strip()
    for option in options:
        if (token.isdigit() and int(token) == option[1]) or token == option[2]:
            return option
    raise DriverError(INVALID_ARGUMENT)


def create_compute_instance(gpu: Gpu, gi: GpuInstance, token: Optional[str] = None) -> ComputeInstance:
    """Create a CI (default profile = whole GI); refused when the GI's compute slices are used up."""
    spec = spec_of(gpu)
    slices, profile_id, name = resolve_ci_profile(gi, spec, token)
    used = sum(ci_slices(ci, gi, spec) for ci in gi.compute_instances)
    if used + slices > _gi_compute(gi, spec):
        raise DriverError(INSUFFICIENT_RESOURCES)
    taken = {ci.ci_id for ci in gi.compute_instances}
    ci_id = next(candidate for candidate in range(16) if candidate not in taken)
    ci = ComputeInstance(ci_id=ci_id, profile_id=profile_id, profile=name,
                         uuid=mig_uuid(gpu.uuid, gi.gi_id, ci_id, gi.start))
    gi.compute_instances.append(ci)
    gi.compute_instances.sort(key=lambda item: item.ci_id)
    return ci


def destroy_compute_instance(gpu: Gpu, gi: GpuInstance, ci: ComputeInstance) -> None:
    """A CI with a running process cannot be destroyed (docs/reference/specs.md §5 "In use by another client")."""
    if any(proc.gi_id == gi.gi_id and proc.ci_id == ci.ci_id for proc in gpu.processes):
        raise DriverError(IN_USE)
    gi.compute_instances.remove(ci)


# --------------------------------------------------------------------------- MIG mode and reset

def gpu_busy(state: HostState, gpu: Gpu) -> bool:
    """Clients attached: simulated compute processes, an active service listed in the host's
    optional ``gpu_client_services`` (docs/reference/specs.md §5: nvsm / dcgm keep the GPU busy on
    DGX), or a running pod that holds the device files (``gpu_client_pods``, §7.6: the operator's
    device plugin, GFD, DCGM exporter)."""
    if gpu.processes or state.gpu_client_pods:
        return True
    clients = state.gpu_client_services
    return any(state.services.get(name) == "active" for name in clients)


def set_mig_mode(state: HostState, gpu: Gpu, enable: bool) -> str:
    """Request a MIG mode; returns "effective" or "pending".

    docs/reference/specs.md §4.1: Ampere -- the driver attempts a GPU reset; effective when nothing holds the GPU,
    and the mode persists in the InfoROM across reboots. Hopper+ -- no reset needed; effective
    when idle; lost at reboot (gpustate.apply_reboot). Busy GPU -> pending (docs/reference/specs.md §5).
    Modelling choice: changing the mode while GPU instances exist fails with "In use by another
    client" (mig-parted clears instances first, docs/reference/specs.md §6.2).
    """
    if not gpu.mig_capable:
        raise DriverError(NOT_SUPPORTED)
    if gpu.gpu_instances and gpu.mig_current != enable:
        raise DriverError(IN_USE)
    gpu.mig_pending = enable
    if gpu.mig_current == enable:
        return "effective"
    if gpu_busy(state, gpu):
        return "pending"
    gpu.mig_current = enable
    gpu.gpu_instances = []
    return "effective"


def reset_gpu(state: HostState, gpu: Gpu) -> None:
    """`nvidia-smi -r`: refused while clients are attached; applies a pending MIG mode and
    destroys all MIG instances (docs/reference/specs.md §4.1: instances never survive a reset)."""
    if gpu_busy(state, gpu):
        raise DriverError(IN_USE)
    gpu.gpu_instances = []
    if gpu.mig_capable:
        gpu.mig_current = gpu.mig_pending


def state_cli(prog: str, main: Callable[[Sequence[str], str], int], argv: Optional[Sequence[str]] = None) -> int:
    """``python -m <prog> --state FILE -- <args>`` (or GPULAB_STATE): the tools' command lines."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--state", default=os.environ.get("GPULAB_STATE"), help="GPU state file of the host")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    if not ns.state:
        parser.error("--state FILE (or GPULAB_STATE) is required")
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    return main(args, ns.state)
