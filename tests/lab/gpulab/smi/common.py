"""What every part of the nvidia-smi emulator shares: exit codes, output, GPU selection (``-i``)."""

from __future__ import annotations

import os
import sys
from typing import Iterator, List, Optional, Sequence, Tuple

from gpulab import driver
from gpulab.gpustate import ComputeInstance, Gpu, GpuInstance, HostState
from gpulab.models import MODELS_DIR

RC_OK, RC_INVALID, RC_NOT_SUPPORTED, RC_NOT_FOUND, RC_NO_DRIVER, RC_OTHER = 0, 2, 3, 6, 9, 255
_ERROR_RC = {
    driver.INVALID_ARGUMENT: RC_INVALID,
    driver.NOT_SUPPORTED: RC_NOT_SUPPORTED,
    driver.NOT_FOUND: RC_NOT_FOUND,
}
_CUDA_BY_DRIVER_MAJOR = {"580": "13.0", "575": "12.9", "570": "12.8", "550": "12.4", "535": "12.2"}


class SmiExit(Exception):
    def __init__(self, rc: int, message: str = "") -> None:
        super().__init__(message)
        self.rc = rc
        self.message = message


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def driver_text(name: str) -> str:
    with open(os.path.join(MODELS_DIR, "driver-580", name), encoding="utf-8") as handle:
        return handle.read()


def cuda_version(state: HostState) -> str:
    return _CUDA_BY_DRIVER_MAJOR.get(state.driver_version.split(".")[0], "13.0")


def rc_for(error: str) -> int:
    """The exit code of a driver error (255 when nvidia-smi documents none)."""
    return _ERROR_RC.get(error, RC_OTHER)


# --------------------------------------------------------------------------- GPU selection

def _bus_key(text: str) -> Optional[Tuple[int, int, int, int]]:
    """"00000000:07:00.0", "0000:07:00.0" and "07:00.0" name the same device."""
    parts = text.split(":")
    if len(parts) == 2:
        parts = ["0"] + parts
    if len(parts) != 3 or "." not in parts[2]:
        return None
    device, _dot, function = parts[2].partition(".")
    try:
        return int(parts[0], 16), int(parts[1], 16), int(device, 16), int(function, 16)
    except ValueError:
        return None


def select_gpus(state: HostState, spec: Optional[str]) -> List[Gpu]:
    """``-i`` accepts comma-separated indexes, PCI bus ids or UUIDs (docs/reference/specs.md §4.1)."""
    if spec is None:
        return list(state.gpus)
    chosen: List[Gpu] = []
    for token in (t.strip() for t in spec.split(",") if t.strip()):
        match = None
        for gpu in state.gpus:
            if (token.isdigit() and int(token) == gpu.index) or token.lower() == gpu.uuid.lower() \
                    or _bus_key(token) == _bus_key(gpu.pci_bus_id):
                match = gpu
                break
        if match is None:
            raise SmiExit(RC_NOT_FOUND, "No devices were found")
        if match not in chosen:
            chosen.append(match)
    return chosen


def used_mib(gpu: Gpu) -> int:
    return sum(proc.used_mib for proc in gpu.processes)


def mig_enabled(gpus: Sequence[Gpu]) -> List[Gpu]:
    return [gpu for gpu in gpus if gpu.mig_current]


def id_filter(text: Optional[str], option: str) -> Optional[List[int]]:
    if text is None:
        return None
    try:
        return [int(item) for item in text.split(",") if item.strip() != ""]
    except ValueError:
        raise SmiExit(RC_INVALID, f"Invalid value for option {option}: {text}") from None


def gi_rows(gpus: Sequence[Gpu], gi_filter: Optional[List[int]]) -> List[Tuple[Gpu, GpuInstance]]:
    """GPU instances of the MIG-enabled GPUs, filtered by ``-gi`` IDs."""
    return [(gpu, gi) for gpu in mig_enabled(gpus) for gi in gpu.gpu_instances if gi_filter is None or gi.gi_id in gi_filter]


def nothing_found(gpus: Sequence[Gpu], rows: Sequence[object], what: str) -> Optional[str]:
    """What ``nvidia-smi mig`` prints when it has nothing to act on (None when it has)."""
    if not mig_enabled(gpus):
        return "No MIG-enabled devices found."
    if not rows:
        return f"No {what} found."
    return None


def finish(last_error: Optional[str], failed: str) -> int:
    """Exit code of a command over several instances: the last error's (after ``Failed to ...``)."""
    if last_error:
        out(f"Failed to {failed}: {last_error}")
        return rc_for(last_error)
    return RC_OK


def ci_rows(gpus: Sequence[Gpu], gi_filter: Optional[List[int]],
            ci_filter: Optional[List[int]]) -> Iterator[Tuple[Gpu, GpuInstance, ComputeInstance]]:
    """Compute instances of the MIG-enabled GPUs, filtered by ``-gi`` and ``-ci`` IDs."""
    for gpu in mig_enabled(gpus):
        for gi in gpu.gpu_instances:
            if gi_filter is not None and gi.gi_id not in gi_filter:
                continue
            for ci in gi.compute_instances:
                if ci_filter is None or ci.ci_id in ci_filter:
                    yield gpu, gi, ci


def require_power(state: HostState) -> None:
    if not state.powered_on:
        raise SmiExit(RC_NO_DRIVER, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                      "Make sure that the latest NVIDIA driver is installed and running.")
