"""What a container does in the lab kubelet: the ``Program`` protocol and the default one for
user containers (``Workload``), and the lab-only pod annotations that steer it.

A container whose command contains ``nvidia-smi -L`` logs exactly the devices it was allocated,
in the real ``-L`` format (docs/reference/specs.md §4.7); with no device it logs ``No devices were found`` and
exits 6; other workloads log nothing. ``sleep N`` words in the command add N seconds to its runtime. Annotations (prefix ``lab.gpufleet.io/``):
``runtime-seconds`` (how long it runs), ``exit-code``, ``gpu-process`` ("false": hold no GPU
process), ``allocated-devices`` (written by the kubelet: ``container=id,id;container=...``).

A long-running container with ``NVIDIA_VISIBLE_DEVICES=all`` in its env is a node agent that opens
every GPU of its host without being allocated one (monitoring agents, health
checkers: the NVIDIA container runtime hands such a container all the host's device files, and an
NVML client keeps them open): the kubelet attaches it to the host as a non-compute GPU client
(``opens_all_gpus``), the way mig-parted v0.15.0 expects third-party GPU clients selected by
``nvidia.com/gpu.deploy.client`` to hold the GPUs (``pkg/mig/reconfigure/reconfigure.go``).
"""

from __future__ import annotations

import dataclasses
import shlex
from typing import Any, List, Mapping, Optional, Protocol

from gpulab.cluster import devices as devmod
from gpulab.cluster.objects import Obj

ANNOTATION_PREFIX = "lab.gpufleet.io/"
RUNTIME_ANNOTATION = ANNOTATION_PREFIX + "runtime-seconds"
EXIT_CODE_ANNOTATION = ANNOTATION_PREFIX + "exit-code"
GPU_PROCESS_ANNOTATION = ANNOTATION_PREFIX + "gpu-process"
ALLOCATED_ANNOTATION = ANNOTATION_PREFIX + "allocated-devices"


@dataclasses.dataclass
class Outcome:
    """What a container did when started (or noticed while running)."""

    ok: bool = True
    log: str = ""
    message: str = ""  # termination message when not ok
    exit_code: int = 0
    runtime: Optional[float] = None  # seconds until it exits by itself; None = runs until stopped


class Program(Protocol):
    """Behaviour of a container. The default one is `Workload`; the operator registers its operands."""

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        """Start the container's program on its devices."""

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        """The program's outcome once it has one (None while it runs)."""

    def stop(self, pod: Obj) -> None:
        """Stop the program."""


def container_command(container: Mapping[str, Any]) -> List[str]:
    words: List[str] = []
    for part in list(container.get("command") or []) + list(container.get("args") or []):
        text = str(part)
        try:
            words.extend(shlex.split(text))
        except ValueError:
            words.extend(text.split())
    return words


def runs_nvidia_smi_list(container: Mapping[str, Any]) -> bool:
    words = [word.strip(";&|") for word in container_command(container)]
    for index, word in enumerate(words):
        if word.rsplit("/", 1)[-1] == "nvidia-smi":
            following = words[index + 1:index + 3]
            if "-L" in following or "--list-gpus" in following:
                return True
    return False


def opens_all_gpus(container: Mapping[str, Any]) -> bool:
    """The container asks the NVIDIA runtime for every GPU of the host through its env."""
    for item in container.get("env") or []:
        if isinstance(item, Mapping) and item.get("name") == "NVIDIA_VISIBLE_DEVICES":
            return str(item.get("value", "")).strip().lower() == "all"
    return False


def sleep_seconds(container: Mapping[str, Any]) -> float:
    """Seconds of the ``sleep N`` words of the command (a shell script's pause), 0 without."""
    words = [word.strip(";&|") for word in container_command(container)]
    total = 0.0
    for index, word in enumerate(words[:-1]):
        if word.rsplit("/", 1)[-1] == "sleep":
            try:
                total += float(words[index + 1])
            except ValueError:
                pass
    return total


class Workload:
    """Any user container: `nvidia-smi -L` prints its devices; everything else prints nothing."""

    def __init__(self, default_runtime: float):
        self.default_runtime = default_runtime

    def start(self, pod: Obj, container: Obj, allocated: List[devmod.Device]) -> Outcome:
        annotations = pod["metadata"].get("annotations") or {}
        runtime = self.default_runtime + sleep_seconds(container)
        try:
            runtime = float(annotations.get(RUNTIME_ANNOTATION, runtime))
        except ValueError:
            pass
        try:
            exit_code = int(annotations.get(EXIT_CODE_ANNOTATION, 0))
        except ValueError:
            exit_code = 0
        log = ""
        if runs_nvidia_smi_list(container):
            if allocated:
                log = devmod.render_smi_list(allocated)
            else:
                # A container without NVIDIA devices (docs/reference/specs.md §5 "No devices were found", rc 6).
                log, exit_code = "No devices were found\n", exit_code or 6
        long_running = pod["spec"].get("restartPolicy", "Always") == "Always"
        return Outcome(ok=True, log=log, exit_code=exit_code, runtime=None if long_running else runtime)

    def check(self, pod: Obj, container: Obj) -> Optional[Outcome]:
        del pod, container
        return None

    def stop(self, pod: Obj) -> None:
        del pod


__all__ = ["ALLOCATED_ANNOTATION", "ANNOTATION_PREFIX", "EXIT_CODE_ANNOTATION", "GPU_PROCESS_ANNOTATION",
           "Outcome", "Program", "RUNTIME_ANNOTATION", "Workload", "container_command", "opens_all_gpus", "sleep_seconds",
           "runs_nvidia_smi_list"]
