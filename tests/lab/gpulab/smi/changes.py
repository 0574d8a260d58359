"""The mutating commands of nvidia-smi: ``-mig``, ``-r`` and ``mig -cgi|-cci|-dci|-dgi``."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from gpulab import driver
from gpulab.driver import DriverError
from gpulab.gpustate import Gpu, HostState
from gpulab.models import load_model
from gpulab.smi.common import RC_INVALID, RC_NOT_FOUND, RC_OK, RC_OTHER, SmiExit, ci_rows, finish, gi_rows, mig_enabled, nothing_found, out


def set_mig(state: HostState, gpus: Sequence[Gpu], value: str) -> int:
    """``-mig 0|1`` with the messages of docs/reference/specs.md §4.1 / §5."""
    if value not in ("0", "1"):
        raise SmiExit(RC_INVALID, f'Invalid value "{value}" for option -mig. Please run \'nvidia-smi -h\' for help.')
    enable = value == "1"
    word = "enable" if enable else "disable"
    for gpu in gpus:
        before = (gpu.mig_current, gpu.mig_pending)
        try:
            outcome = driver.set_mig_mode(state, gpu, enable)
        except DriverError as error:
            out(f"Unable to {word} MIG Mode for GPU {gpu.pci_bus_id}: {error}")
            out("Treating as warning and moving on.")
            continue
        # Recorded even when nothing changed: the audit log shows every mutating command issued.
        state.record("nvidia-smi", "mig-mode", gpu=gpu.index, requested=enable, outcome=outcome,
                     current=gpu.mig_current, pending=gpu.mig_pending,
                     changed=before != (gpu.mig_current, gpu.mig_pending))
        if outcome == "effective":
            out(f"{'Enabled' if enable else 'Disabled'} MIG Mode for GPU {gpu.pci_bus_id}")
        else:
            out(f"Warning: MIG mode is in pending {word} state for GPU {gpu.pci_bus_id}:{driver.IN_USE}")
            out(f"{gpu.pci_bus_id} is currently being used by one or more other processes (e.g. CUDA "
                "application or a monitoring application such as another instance of nvidia-smi). Please "
                "first kill all processes using the device and retry the command or reboot the system to "
                "make MIG mode effective.")
    out("All done.")
    return RC_OK


def reset_blocked_lines(blocked: Sequence[Tuple[Gpu, str]]) -> List[str]:
    """What ``nvidia-smi -r`` prints for GPUs whose reset was refused (docs/reference/specs.md §5 "reset blocked");
    nvidia-mig-parted relays the same text."""
    lines = ["The following GPUs could not be reset:"]
    lines += [f"  GPU {gpu.pci_bus_id}: {error}" for gpu, error in blocked]
    count = len(blocked)
    noun = "device is" if count == 1 else "devices are"
    these = "this device" if count == 1 else "these devices"
    lines += ["", f"{count} {noun} currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
              "application, graphics application such as an X server, or a monitoring application such as another "
              f"instance of nvidia-smi). Please first kill all processes using {these} and all compute applications "
              "running in the system."]
    return lines


def reset(state: HostState, gpus: Sequence[Gpu]) -> int:
    """``-r``: refused with processes (text of docs/reference/specs.md §5 "reset blocked"), else applies pending mode."""
    blocked: List[Tuple[Gpu, str]] = []
    for gpu in gpus:
        try:
            driver.reset_gpu(state, gpu)
        except DriverError as error:
            blocked.append((gpu, str(error)))
            continue
        state.record("nvidia-smi", "gpu-reset", gpu=gpu.index, mig_current=gpu.mig_current)
        out(f"GPU {gpu.pci_bus_id} was successfully reset.")
    if blocked:
        for line in reset_blocked_lines(blocked):
            out(line)
        return RC_OTHER
    out("All done.")
    return RC_OK


def _split_tuples(text: str) -> List[Tuple[str, Optional[int]]]:
    result = []
    for item in (piece.strip() for piece in text.split(",")):
        if not item:
            continue
        profile, _colon, start = item.partition(":")
        result.append((profile.strip(), int(start) if start.strip().isdigit() else (None if not start else -1)))
    return result


def mig_cgi(state: HostState, gpus: Sequence[Gpu], text: str, with_ci: bool) -> int:
    """``-cgi <profile[:start],...> [-C]`` (docs/reference/specs.md §4.6 messages; placement rule: driver.create_gpu_instance)."""
    enabled = mig_enabled(gpus)
    if not enabled:
        out("No MIG-enabled devices found.")
        return RC_NOT_FOUND
    last_error = None
    for gpu in enabled:
        spec = load_model(gpu.model)
        for token, start in _split_tuples(text):
            label = token if start is None else f"{token}:{start}"
            profile = spec.profile(token)
            try:
                if profile is None or start == -1:
                    raise DriverError(driver.INVALID_ARGUMENT)
                gi = driver.create_gpu_instance(gpu, profile, start)
            except DriverError as error:
                out(f"Unable to create a GPU instance on GPU {gpu.index:>2} using profile {label}: {error}")
                last_error = str(error)
                continue
            state.record("nvidia-smi", "create-gi", gpu=gpu.index, gi_id=gi.gi_id, profile=gi.profile,
                         start=gi.start, size=gi.size)
            out(f"Successfully created GPU instance ID {gi.gi_id:>2} on GPU {gpu.index:>2} using profile "
                f"{profile.full_name} (ID {profile.profile_id:>2})")
            if with_ci:
                ci = driver.create_compute_instance(gpu, gi)
                state.record("nvidia-smi", "create-ci", gpu=gpu.index, gi_id=gi.gi_id, ci_id=ci.ci_id, profile=ci.profile)
                out(f"Successfully created compute instance ID {ci.ci_id:>2} on GPU {gpu.index:>2} GPU instance ID "
                    f"{gi.gi_id:>2} using profile MIG {ci.profile} (ID {ci.profile_id:>2})")
    return finish(last_error, "create GPU instances")


def mig_cci(state: HostState, gpus: Sequence[Gpu], text: Optional[str], gi_filter: Optional[List[int]]) -> int:
    """``-cci [profiles] [-gi IDs]``: default profile = the whole GI (docs/reference/specs.md §4.5 ``*``)."""
    tokens = [t.strip() for t in text.split(",")] if text else [None]
    last_error = None
    targets = gi_rows(gpus, gi_filter)
    empty = nothing_found(gpus, targets, "GPU instances")
    if empty:
        out(empty)
        return RC_NOT_FOUND
    for gpu, gi in targets:
        for token in tokens:
            try:
                ci = driver.create_compute_instance(gpu, gi, token)
            except DriverError as error:
                out(f"Unable to create a compute instance on GPU {gpu.index:>2} GPU instance ID {gi.gi_id:>2} "
                    f"using profile {token if token else 'default'}: {error}")
                last_error = str(error)
                continue
            state.record("nvidia-smi", "create-ci", gpu=gpu.index, gi_id=gi.gi_id, ci_id=ci.ci_id, profile=ci.profile)
            out(f"Successfully created compute instance ID {ci.ci_id:>2} on GPU {gpu.index:>2} GPU instance ID "
                f"{gi.gi_id:>2} using profile MIG {ci.profile} (ID {ci.profile_id:>2})")
    return finish(last_error, "create compute instances")


def mig_dci(state: HostState, gpus: Sequence[Gpu], gi_filter: Optional[List[int]],
            ci_filter: Optional[List[int]]) -> int:
    """``-dci``: refused for a CI with a running process (docs/reference/specs.md §5 "In use by another client")."""
    rows = list(ci_rows(gpus, gi_filter, ci_filter))
    empty = nothing_found(gpus, rows, "compute instances")
    if empty:
        out(empty)
        return RC_NOT_FOUND
    last_error = None
    for gpu, gi, ci in rows:
        try:
            driver.destroy_compute_instance(gpu, gi, ci)
        except DriverError as error:
            out(f"Unable to destroy compute instance ID {ci.ci_id:>2} from GPU {gpu.index:>2} GPU instance ID "
                f"{gi.gi_id:>2}: {error}")
            last_error = str(error)
            continue
        state.record("nvidia-smi", "destroy-ci", gpu=gpu.index, gi_id=gi.gi_id, ci_id=ci.ci_id)
        out(f"Successfully destroyed compute instance ID {ci.ci_id:>2} from GPU {gpu.index:>2} GPU instance ID {gi.gi_id:>2}")
    return finish(last_error, "destroy compute instances")


def mig_dgi(state: HostState, gpus: Sequence[Gpu], gi_filter: Optional[List[int]]) -> int:
    """``-dgi``: a GI that still has CIs is "In use by another client" (docs/reference/specs.md §5)."""
    rows = gi_rows(gpus, gi_filter)
    empty = nothing_found(gpus, rows, "GPU instances")
    if empty:
        out(empty)
        return RC_NOT_FOUND
    last_error = None
    for gpu, gi in rows:
        try:
            driver.destroy_gpu_instance(gpu, gi)
        except DriverError as error:
            out(f"Unable to destroy GPU instance ID {gi.gi_id:>2} from GPU {gpu.index:>2}: {error}")
            last_error = str(error)
            continue
        state.record("nvidia-smi", "destroy-gi", gpu=gpu.index, gi_id=gi.gi_id)
        out(f"Successfully destroyed GPU instance ID {gi.gi_id:>2} from GPU {gpu.index:>2}")
    return finish(last_error, "destroy GPU instances")
