"""GPU processes of running pods: a long-running pod holding GPUs shows up as compute processes
on the simulated GPUs of its host (one per physical device it was allocated), so that the MIG
manager and mig-parted see busy GPUs like on real hosts. The pod annotation
``lab.gpufleet.io/gpu-process: "false"`` opts out.

Pods whose program is a GPU client (the operator's device plugin, GFD, DCGM exporter: they hold the
device files without being compute processes, docs/reference/specs.md §7.6) attach to their host
as a client while they run (``attach_client``): nvidia-smi does not list them, but a MIG mode
change stays pending and a reset is refused until they are gone."""

from __future__ import annotations

import logging
from typing import Dict, Iterable, List, Tuple

from gpulab import gpustate
from gpulab.cluster import devices as devmod
from gpulab.cluster.containers import GPU_PROCESS_ANNOTATION
from gpulab.cluster.objects import Obj

LOG = logging.getLogger("gpulab.cluster.kubelet")

Process = Tuple[str, int]  # (state file, pid)


def wants_gpu_processes(pod: Obj) -> bool:
    annotations = pod["metadata"].get("annotations") or {}
    return annotations.get(GPU_PROCESS_ANNOTATION, "true").lower() != "false"


def start(path: str, allocations: Dict[str, List[devmod.Device]], pod_name: str) -> List[Process]:
    """One process per physical device, named after the container (as nvidia-smi shows it)."""
    processes: List[Process] = []
    seen = set()
    for name, found in allocations.items():
        for device in found:
            if device.physical_id in seen:
                continue
            seen.add(device.physical_id)
            try:
                pid = gpustate.add_process(path, device.gpu_index, None, name[:15] or "cuda-app", 512, device.gi_id, device.ci_id)
            except gpustate.StateError as exc:  # the device vanished (e.g. MIG reconfigured under us)
                LOG.warning("kubelet: cannot start a GPU process for %s: %s", pod_name, exc)
                continue
            processes.append((path, pid))
    return processes


def attach_client(path: str, client: str) -> bool:
    """Register ``client`` ("namespace/pod") as holding the host's GPUs; False when the host is off."""
    try:
        gpustate.attach_client(path, client)
    except gpustate.StateError as exc:
        LOG.warning("kubelet: %s cannot open the GPUs: %s", client, exc)
        return False
    return True


def detach_client(path: str, client: str) -> None:
    try:
        gpustate.detach_client(path, client)
    except gpustate.StateError:
        pass


def stop(processes: Iterable[Process]) -> None:
    for path, pid in processes:
        try:
            gpustate.remove_process(path, pid)
        except gpustate.StateError:
            pass


__all__ = ["Process", "attach_client", "detach_client", "start", "stop", "wants_gpu_processes"]
