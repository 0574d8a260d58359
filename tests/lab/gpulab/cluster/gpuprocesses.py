"""GPU processes of running pods: a long-running pod holding GPUs shows up as compute processes
on the simulated GPUs of its host (one per physical device it was allocated), so that the MIG
manager and mig-parted see busy GPUs like on real hosts. The pod annotation
``lab.gpufleet.io/gpu-process: "false"`` opts out."""

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


def stop(processes: Iterable[Process]) -> None:
    for path, pid in processes:
        try:
            gpustate.remove_process(path, pid)
        except gpustate.StateError:
            pass


__all__ = ["Process", "start", "stop", "wants_gpu_processes"]
