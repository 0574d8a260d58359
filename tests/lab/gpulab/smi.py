"""Emulation of ``nvidia-smi`` over a gpustate file (a test instrument, not the product).

Read-only output on the H200 reference host reproduces tests/fixtures/h200/* byte for byte;
mutating commands follow SPECS §4-§5 (messages verbatim where SPECS has them). Usage:

    main(argv, state_path) -> exit code          # writes to sys.stdout / sys.stderr
    run(argv, state_path) -> (rc, stdout, stderr)  # same, captured
    python -m gpulab.smi --state FILE -- <nvidia-smi args>

Exit codes (nvidia-smi documents 0 ok, 2 invalid argument, 3 not supported, 6 not found,
9 driver not reachable, 255 other): "Insufficient Resources" and "In use by another client"
map to 255 (modelling choice; SPECS §5 shows mig-parted reporting "exit status 255" for a
blocked reset).
"""

from __future__ import annotations

import io
import os
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from gpulab import driver, gpustate
from gpulab.driver import DriverError
from gpulab.gpustate import Gpu, HostState
from gpulab.models import MODELS_DIR, load_model

RC_OK, RC_INVALID, RC_NOT_SUPPORTED, RC_NOT_FOUND, RC_NO_DRIVER, RC_OTHER = 0, 2, 3, 6, 9, 255
_ERROR_RC = {
    driver.INVALID_ARGUMENT: RC_INVALID,
    driver.NOT_SUPPORTED: RC_NOT_SUPPORTED,
    driver.NOT_FOUND: RC_NOT_FOUND,
}
_CUDA_BY_DRIVER_MAJOR = {"580": "13.0", "575": "12.9", "570": "12.8", "550": "12.4", "535": "12.2"}
WIDE = 89  # inner width of the 580 summary tables


class SmiExit(Exception):
    def __init__(self, rc: int, message: str = "") -> None:
        super().__init__(message)
        self.rc = rc
        self.message = message


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _driver_text(name: str) -> str:
    with open(os.path.join(MODELS_DIR, "driver-580", name), encoding="utf-8") as handle:
        return handle.read()


def _cuda_version(state: HostState) -> str:
    return _CUDA_BY_DRIVER_MAJOR.get(state.driver_version.split(".")[0], "13.0")


def _rc_for(error: str) -> int:
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
    """``-i`` accepts comma-separated indexes, PCI bus ids or UUIDs (SPECS §4.1)."""
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


# --------------------------------------------------------------------------- -L and queries

def list_gpus(gpus: Sequence[Gpu]) -> None:
    """``-L`` (SPECS §4.7, R470+ format)."""
    for gpu in gpus:
        _out(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})")
        if gpu.mig_current:
            for number, (_gi, ci) in enumerate(gpu.mig_devices()):
                label = ci.profile.ljust(12) if len(ci.profile) < 12 else ci.profile + " "
                _out(f"  MIG {label}Device {number:>2}: (UUID: {ci.uuid})")


def _mib(value: int, units: bool) -> str:
    return f"{value} MiB" if units else str(value)


def _mig_text(value: Optional[bool]) -> str:
    return "[N/A]" if value is None else ("Enabled" if value else "Disabled")


def _used_mib(gpu: Gpu) -> int:
    return sum(proc.used_mib for proc in gpu.processes)


# field -> (header, getter(state, gpu, units))
_GPU_FIELDS: Dict[str, Tuple[str, Callable[[HostState, Gpu, bool], str]]] = {
    "timestamp": ("timestamp", lambda s, g, u: time.strftime("%Y/%m/%d %H:%M:%S.000")),
    "driver_version": ("driver_version", lambda s, g, u: s.driver_version),
    "count": ("count", lambda s, g, u: str(len(s.gpus))),
    "index": ("index", lambda s, g, u: str(g.index)),
    "name": ("name", lambda s, g, u: g.name),
    "uuid": ("uuid", lambda s, g, u: g.uuid),
    "serial": ("serial", lambda s, g, u: str(1650000000000 + g.index)),
    "pci.bus_id": ("pci.bus_id", lambda s, g, u: g.pci_bus_id),
    "pci.domain": ("pci.domain", lambda s, g, u: "0x" + g.pci_bus_id.split(":")[0][-4:]),
    "pci.bus": ("pci.bus", lambda s, g, u: "0x" + g.pci_bus_id.split(":")[1]),
    "pci.device": ("pci.device", lambda s, g, u: "0x" + g.pci_bus_id.split(":")[2].split(".")[0]),
    "pci.device_id": ("pci.device_id", lambda s, g, u: g.pci_device_id),
    "pci.sub_device_id": ("pci.sub_device_id", lambda s, g, u: g.pci_sub_device_id),
    "vbios_version": ("vbios_version", lambda s, g, u: g.vbios_version),
    "compute_cap": ("compute_cap", lambda s, g, u: g.compute_cap),
    "persistence_mode": ("persistence_mode", lambda s, g, u: "Enabled"),
    "compute_mode": ("compute_mode", lambda s, g, u: "Default"),
    "memory.total": ("memory.total [MiB]", lambda s, g, u: _mib(g.memory_total_mib, u)),
    "memory.used": ("memory.used [MiB]", lambda s, g, u: _mib(_used_mib(g), u)),
    "memory.free": ("memory.free [MiB]", lambda s, g, u: _mib(g.memory_total_mib - _used_mib(g), u)),
    "mig.mode.current": ("mig.mode.current", lambda s, g, u: _mig_text(g.mig_current)),
    "mig.mode.pending": ("mig.mode.pending", lambda s, g, u: _mig_text(g.mig_pending)),
    "temperature.gpu": ("temperature.gpu", lambda s, g, u: str(load_model(g.model).idle_temp_c)),
    "power.draw": ("power.draw [W]", lambda s, g, u: f"{load_model(g.model).idle_power_w:.2f}" + (" W" if u else "")),
    "power.limit": ("power.limit [W]", lambda s, g, u: f"{load_model(g.model).max_power_w:.2f}" + (" W" if u else "")),
    "utilization.gpu": ("utilization.gpu [%]", lambda s, g, u: ("0 %" if u else "0")),
}
_GPU_ALIASES = {
    "gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id", "gpu_serial": "serial",
    "pci.sub_device_id": "pci.sub_device_id", "memory.total": "memory.total",
}

_APP_FIELDS: Dict[str, Tuple[str, Callable[[Gpu, gpustate.Process, bool], str]]] = {
    "pid": ("pid", lambda g, p, u: str(p.pid)),
    "process_name": ("process_name", lambda g, p, u: p.name),
    "used_memory": ("used_gpu_memory [MiB]", lambda g, p, u: _mib(p.used_mib, u)),
    "gpu_uuid": ("gpu_uuid", lambda g, p, u: g.uuid),
    "gpu_name": ("gpu_name", lambda g, p, u: g.name),
    "gpu_bus_id": ("gpu_bus_id", lambda g, p, u: g.pci_bus_id),
    "gpu_serial": ("gpu_serial", lambda g, p, u: str(1650000000000 + g.index)),
}
_APP_ALIASES = {"name": "process_name", "used_gpu_memory": "used_memory"}


def _parse_format(value: Optional[str]) -> Tuple[bool, bool]:
    if value is None:
        raise SmiExit(RC_INVALID, "Format must be specified with --format. Please run 'nvidia-smi -h' for help.")
    parts = [p.strip() for p in value.split(",")]
    if not parts or parts[0] != "csv" or any(p not in ("csv", "noheader", "nounits") for p in parts):
        raise SmiExit(RC_INVALID, f'"{value}" is not a valid format. Please run \'nvidia-smi -h\' for help.')
    return "noheader" not in parts, "nounits" not in parts


def query_gpu(state: HostState, gpus: Sequence[Gpu], fields_text: str, fmt: Optional[str]) -> None:
    header, units = _parse_format(fmt)
    names = [f.strip() for f in fields_text.split(",") if f.strip()]
    resolved = []
    for name in names:
        canonical = _GPU_ALIASES.get(name, name)
        if canonical not in _GPU_FIELDS:
            raise SmiExit(RC_INVALID, f'Field "{name}" is not a valid field to query.')
        resolved.append(_GPU_FIELDS[canonical])
    if header:
        _out(", ".join(item[0] for item in resolved))
    for gpu in gpus:
        _out(", ".join(item[1](state, gpu, units) for item in resolved))


def query_apps(gpus: Sequence[Gpu], fields_text: str, fmt: Optional[str]) -> None:
    header, units = _parse_format(fmt)
    resolved = []
    for name in (f.strip() for f in fields_text.split(",") if f.strip()):
        canonical = _APP_ALIASES.get(name, name)
        if canonical not in _APP_FIELDS:
            raise SmiExit(RC_INVALID, f'Field "{name}" is not a valid field to query.')
        resolved.append(_APP_FIELDS[canonical])
    if header:
        _out(", ".join(item[0] for item in resolved))
    for gpu in gpus:
        for proc in gpu.processes:
            _out(", ".join(item[1](gpu, proc, units) for item in resolved))


# --------------------------------------------------------------------------- plain summary

def _bar(sections: Sequence[int], fill: str = "-", corner: str = "+") -> str:
    return corner + corner.join(fill * width for width in sections) + corner


def _full_line(text: str) -> str:
    return "|" + text.ljust(WIDE) + "|"


def summary(state: HostState, gpus: Sequence[Gpu]) -> None:
    """Plain ``nvidia-smi``: layout of the real 580 capture (tests/fixtures/h200/smi.txt); the
    MIG devices table follows SPECS §4.8 widened to the 580 frame (modelling choice)."""
    sections = (41, 24, 22)
    _out(time.asctime() + "       ")
    _out(_bar((WIDE,)))
    ver = state.driver_version
    _out(f"| NVIDIA-SMI {ver:<23}Driver Version: {ver:<15}CUDA Version: {_cuda_version(state):<9}|")
    _out(_bar(sections))
    _out("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |")
    _out("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |")
    _out("|                                         |                        |               MIG M. |")
    _out("|" + "+".join("=" * width for width in sections) + "|")
    for gpu in gpus:
        spec = load_model(gpu.model)
        mig = "N/A" if gpu.mig_current is None else ("Enabled" if gpu.mig_current else "Disabled")
        name = gpu.name if len(gpu.name) <= 30 else gpu.name[:27] + "..."
        _out(f"|{gpu.index:>4}  {name:<30}{'On':>3}  |{gpu.pci_bus_id:>19} {'Off':>3} |{'0':>21} |")
        power = f"{spec.idle_power_w}W"
        used = f"{_used_mib(gpu)}MiB"
        total = f"{gpu.memory_total_mib}MiB"
        _out(f"| N/A{str(spec.idle_temp_c) + 'C':>6}{'P0':>6}{power:>16} / {str(spec.max_power_w) + 'W':>5} "
             f"|{used:>11} / {total:>9} |{'0%':>8}{'Default':>13} |")
        _out(f"|{'':41}|{'':24}|{mig:>21} |")
        _out(_bar(sections))
    if any(gpu.mig_current for gpu in gpus):
        _out("")
        _mig_devices_table(gpus)
    _out("")
    _processes_table(gpus)


def _mig_devices_table(gpus: Sequence[Gpu]) -> None:
    sections = (18, 34, 11, 23)
    _out(_bar((WIDE,)))
    _out(_full_line(" MIG devices:"))
    _out(_bar(sections))
    _out(f"| GPU  GI  CI  MIG |{'Memory-Usage':>33} |        Vol|        Shared         |")
    _out(f"|      ID  ID  Dev |{'BAR1-Usage':>33} | SM     Unc| CE ENC  DEC  OFA  JPG |")
    _out(f"|                  |{'':34}|        ECC|{'':23}|")
    _out("|" + "+".join("=" * width for width in sections) + "|")
    rows = 0
    for gpu in gpus:
        if not gpu.mig_current:
            continue
        spec = load_model(gpu.model)
        for number, (gi, ci) in enumerate(gpu.mig_devices()):
            profile = spec.profile(str(gi.profile_id))
            gi_slices = profile.compute_slices if profile else 1
            ci_slices = driver.ci_slices(ci, gi, spec)
            total = round(float(profile.memory_gib) * 1024) if profile else 0
            used = sum(p.used_mib for p in gpu.processes if p.gi_id == gi.gi_id and p.ci_id == ci.ci_id)
            sm = (profile.sm * ci_slices) // gi_slices if profile else 0
            memory = f"{used}MiB / {total}MiB"
            _out(f"|{gpu.index:>3}{gi.gi_id:>5}{ci.ci_id:>4}{number:>4}  |{memory:>32}  |"
                 f" {sm:<3}{0:>6} | {profile.ce if profile else 0:>2}{profile.enc if profile else 0:>4}"
                 f"{profile.dec if profile else 0:>5}{profile.ofa if profile else 0:>5}{profile.jpeg if profile else 0:>5} |")
            _out(f"|{'':18}|{'0MiB / 32767MiB':>32}  |{'':11}|{'':23}|")
            _out(_bar(sections))
            rows += 1
    if not rows:
        _out(_full_line("  No MIG devices found"))
        _out(_bar((WIDE,)))


def _processes_table(gpus: Sequence[Gpu]) -> None:
    _out(_bar((WIDE,)))
    _out(_full_line(" Processes:"))
    _out("|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |")
    _out("|        ID   ID                                                               Usage      |")
    _out("|" + "=" * WIDE + "|")
    procs = [(gpu, proc) for gpu in gpus for proc in gpu.processes]
    if not procs:
        _out(_full_line("  No running processes found"))
    for gpu, proc in procs:
        gi = "N/A" if proc.gi_id is None else str(proc.gi_id)
        ci = "N/A" if proc.ci_id is None else str(proc.ci_id)
        _out(f"|{gpu.index:>5}{gi:>5}{ci:>5}{proc.pid:>17}{'C':>7}   {proc.name[:36]:<36}{str(proc.used_mib) + 'MiB':>10} |")
    _out(_bar((WIDE,)))


# --------------------------------------------------------------------------- mode and reset

def set_mig(state: HostState, gpus: Sequence[Gpu], value: str) -> int:
    """``-mig 0|1`` with the messages of SPECS §4.1 / §5."""
    if value not in ("0", "1"):
        raise SmiExit(RC_INVALID, f'Invalid value "{value}" for option -mig. Please run \'nvidia-smi -h\' for help.')
    enable = value == "1"
    word = "enable" if enable else "disable"
    for gpu in gpus:
        before = (gpu.mig_current, gpu.mig_pending)
        try:
            outcome = driver.set_mig_mode(state, gpu, enable)
        except DriverError as error:
            _out(f"Unable to {word} MIG Mode for GPU {gpu.pci_bus_id}: {error}")
            _out("Treating as warning and moving on.")
            continue
        # Recorded even when nothing changed: the audit log shows every mutating command issued.
        state.record("nvidia-smi", "mig-mode", gpu=gpu.index, requested=enable, outcome=outcome,
                     current=gpu.mig_current, pending=gpu.mig_pending,
                     changed=before != (gpu.mig_current, gpu.mig_pending))
        if outcome == "effective":
            _out(f"{'Enabled' if enable else 'Disabled'} MIG Mode for GPU {gpu.pci_bus_id}")
        else:
            _out(f"Warning: MIG mode is in pending {word} state for GPU {gpu.pci_bus_id}:{driver.IN_USE}")
            _out(f"{gpu.pci_bus_id} is currently being used by one or more other processes (e.g. CUDA "
                 "application or a monitoring application such as another instance of nvidia-smi). Please "
                 "first kill all processes using the device and retry the command or reboot the system to "
                 "make MIG mode effective.")
    _out("All done.")
    return RC_OK


def reset(state: HostState, gpus: Sequence[Gpu]) -> int:
    """``-r``: refused with processes (text of SPECS §5 "reset blocked"), else applies pending mode."""
    blocked = []
    for gpu in gpus:
        try:
            driver.reset_gpu(state, gpu)
        except DriverError as error:
            blocked.append((gpu, str(error)))
            continue
        state.record("nvidia-smi", "gpu-reset", gpu=gpu.index, mig_current=gpu.mig_current)
        _out(f"GPU {gpu.pci_bus_id} was successfully reset.")
    if blocked:
        _out("The following GPUs could not be reset:")
        for gpu, error in blocked:
            _out(f"  GPU {gpu.pci_bus_id}: {error}")
        _out("")
        count = len(blocked)
        noun = "device is" if count == 1 else "devices are"
        these = "this device" if count == 1 else "these devices"
        _out(f"{count} {noun} currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
             "application, graphics application such as an X server, or a monitoring application such as "
             f"another instance of nvidia-smi). Please first kill all processes using {these} and all "
             "compute applications running in the system.")
        return RC_OTHER
    _out("All done.")
    return RC_OK


# --------------------------------------------------------------------------- mig subcommand

_LGIP_HEAD = (
    "+" + "-" * 79 + "+",
    "| GPU instance profiles:                                                        |",
    "| GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC  |",
    "|                                Free/Total   GiB              CE    JPEG  OFA  |",
    "|" + "=" * 79 + "|",
)


def mig_lgip(gpus: Sequence[Gpu]) -> int:
    """Layout of the real 580 capture (tests/fixtures/h200/mig_lgip.txt); Free counts from
    driver.free_instances."""
    capable = [gpu for gpu in gpus if gpu.mig_capable]
    if not capable:
        _out("No MIG-supported devices found.")
        return RC_NOT_FOUND
    for line in _LGIP_HEAD:
        _out(line)
    for gpu in capable:
        for profile in load_model(gpu.model).profiles:
            free = f"{driver.free_instances(gpu, profile)}/{profile.instances_total}"
            _out(f"|{gpu.index:>4}  {profile.full_name:<18}{profile.profile_id:>4}     {free:<11}"
                 f"{profile.memory_gib:<11}{profile.p2p:<7}{profile.sm:<7}{profile.dec:<6}{profile.enc:<4}|")
            _out(f"|{'':62}{profile.ce:>2}{'':5}{profile.jpeg:<6}{profile.ofa:<4}|")
            _out(_LGIP_HEAD[0])
    return RC_OK


def mig_lgipp(gpus: Sequence[Gpu]) -> int:
    """Static possible placements (SPECS §1.1, §3.1 format)."""
    capable = [gpu for gpu in gpus if gpu.mig_capable]
    if not capable:
        _out("No MIG-supported devices found.")
        return RC_NOT_FOUND
    for gpu in capable:
        for profile in load_model(gpu.model).profiles:
            label = "Placements:" if len(profile.starts) > 1 else "Placement :"
            starts = ",".join(str(s) for s in profile.starts)
            _out(f"GPU {gpu.index:>2} Profile ID {profile.profile_id:>2} {label} {{{starts}}}:{profile.size}")
    return RC_OK


def _mig_enabled(gpus: Sequence[Gpu]) -> List[Gpu]:
    return [gpu for gpu in gpus if gpu.mig_current]


def _id_filter(text: Optional[str], option: str) -> Optional[List[int]]:
    if text is None:
        return None
    try:
        return [int(item) for item in text.split(",") if item.strip() != ""]
    except ValueError:
        raise SmiExit(RC_INVALID, f"Invalid value for option {option}: {text}") from None


def mig_lgi(gpus: Sequence[Gpu], gi_filter: Optional[List[int]]) -> int:
    """Table of SPECS §4.4."""
    enabled = _mig_enabled(gpus)
    if not enabled:
        _out("No MIG-enabled devices found.")
        return RC_OK
    rows = [(gpu, gi) for gpu in enabled for gi in gpu.gpu_instances
            if gi_filter is None or gi.gi_id in gi_filter]
    if not rows:
        _out("No GPU instances found.")
        return RC_OK
    border = "+" + "-" * 52 + "+"
    _out(border)
    _out("| GPU instances:                                     |")
    _out("| GPU   Name          Profile  Instance   Placement  |")
    _out("|                       ID       ID       Start:Size |")
    _out("|" + "=" * 52 + "|")
    for gpu, gi in rows:
        _out(f"|{gpu.index:>4}  {'MIG ' + gi.profile:<16}{gi.profile_id:>3}{gi.gi_id:>9}{f'{gi.start}:{gi.size}':>13}     |")
        _out(border)
    return RC_OK


def _ci_rows(gpus: Sequence[Gpu], gi_filter: Optional[List[int]], ci_filter: Optional[List[int]]):
    for gpu in _mig_enabled(gpus):
        for gi in gpu.gpu_instances:
            if gi_filter is not None and gi.gi_id not in gi_filter:
                continue
            for ci in gi.compute_instances:
                if ci_filter is None or ci.ci_id in ci_filter:
                    yield gpu, gi, ci


def mig_lci(gpus: Sequence[Gpu], gi_filter: Optional[List[int]], ci_filter: Optional[List[int]]) -> int:
    """Table of SPECS §4.5 (newer drivers, with the Placement column)."""
    if not _mig_enabled(gpus):
        _out("No MIG-enabled devices found.")
        return RC_OK
    rows = list(_ci_rows(gpus, gi_filter, ci_filter))
    if not rows:
        _out("No compute instances found.")
        return RC_OK
    border = "+" + "-" * 68 + "+"
    _out(border)
    _out("| Compute instances:                                                 |")
    _out("| GPU     GPU       Name             Profile   Instance   Placement  |")
    _out("|       Instance                       ID        ID       Start:Size |")
    _out("|         ID                                                         |")
    _out("|" + "=" * 68 + "|")
    for gpu, gi, ci in rows:
        spec = load_model(gpu.model)
        placement = f"{driver.ci_start(ci, gi, spec)}:{driver.ci_slices(ci, gi, spec)}"
        _out(f"|{gpu.index:>4}{gi.gi_id:>7}{'':7}{'MIG ' + ci.profile:<20}{ci.profile_id:>2}{ci.ci_id:>10}{placement:>13}     |")
        _out(border)
    return RC_OK


def mig_lcip(gpus: Sequence[Gpu], gi_filter: Optional[List[int]]) -> int:
    """CI profiles per GI; the default (whole-GI) profile is marked ``*`` (SPECS §4.5). The
    table shape is a modelling choice (no capture with MIG enabled)."""
    enabled = _mig_enabled(gpus)
    if not enabled:
        _out("No MIG-enabled devices found.")
        return RC_OK
    gis = [(gpu, gi) for gpu in enabled for gi in gpu.gpu_instances if gi_filter is None or gi.gi_id in gi_filter]
    if not gis:
        _out("No GPU instances found.")
        return RC_OK
    width = 86
    border = "+" + "-" * width + "+"
    _out(border)
    _out("|" + " Compute instance profiles:".ljust(width) + "|")
    _out("|" + " GPU     GPU       Name             Profile  Instances   Exclusive       Shared".ljust(width) + "|")
    _out("|" + "       Instance                       ID     Free/Total     SM       DEC   ENC   OFA".ljust(width) + "|")
    _out("|" + "         ID                                                          CE    JPEG".ljust(width) + "|")
    _out("|" + "=" * width + "|")
    for gpu, gi in gis:
        spec = load_model(gpu.model)
        profile = spec.profile(str(gi.profile_id))
        g = profile.compute_slices if profile else 1
        used = sum(driver.ci_slices(ci, gi, spec) for ci in gi.compute_instances)
        options = driver.ci_profiles(gi, spec)
        for slices, ci_profile_id, name in options:
            total = g // slices
            free = (g - used) // slices
            star = "*" if slices == g else " "
            sm = (profile.sm * slices) // g if profile else 0
            line1 = (f"{gpu.index:>4}{gi.gi_id:>7}{'':7}{'MIG ' + name:<20}{ci_profile_id:>2}{star}"
                     f"{f'{free}/{total}':>9}{sm:>12}{profile.dec if profile else 0:>10}{profile.enc if profile else 0:>6}"
                     f"{profile.ofa if profile else 0:>6}")
            line2 = f"{'':64}{profile.ce if profile else 0:>6}{profile.jpeg if profile else 0:>6}"
            _out("|" + line1.ljust(width) + "|")
            _out("|" + line2.ljust(width) + "|")
            _out(border)
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
    """``-cgi <profile[:start],...> [-C]`` (SPECS §4.6 messages; placement rule: driver.create_gpu_instance)."""
    enabled = _mig_enabled(gpus)
    if not enabled:
        _out("No MIG-enabled devices found.")
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
                _out(f"Unable to create a GPU instance on GPU {gpu.index:>2} using profile {label}: {error}")
                last_error = str(error)
                continue
            state.record("nvidia-smi", "create-gi", gpu=gpu.index, gi_id=gi.gi_id, profile=gi.profile,
                         start=gi.start, size=gi.size)
            _out(f"Successfully created GPU instance ID {gi.gi_id:>2} on GPU {gpu.index:>2} using profile "
                 f"{profile.full_name} (ID {profile.profile_id:>2})")
            if with_ci:
                ci = driver.create_compute_instance(gpu, gi)
                state.record("nvidia-smi", "create-ci", gpu=gpu.index, gi_id=gi.gi_id, ci_id=ci.ci_id, profile=ci.profile)
                _out(f"Successfully created compute instance ID {ci.ci_id:>2} on GPU {gpu.index:>2} GPU instance ID "
                     f"{gi.gi_id:>2} using profile MIG {ci.profile} (ID {ci.profile_id:>2})")
    if last_error:
        _out(f"Failed to create GPU instances: {last_error}")
        return _rc_for(last_error)
    return RC_OK


def mig_cci(state: HostState, gpus: Sequence[Gpu], text: Optional[str], gi_filter: Optional[List[int]]) -> int:
    """``-cci [profiles] [-gi IDs]``: default profile = the whole GI (SPECS §4.5 ``*``)."""
    enabled = _mig_enabled(gpus)
    if not enabled:
        _out("No MIG-enabled devices found.")
        return RC_NOT_FOUND
    tokens = [t.strip() for t in text.split(",")] if text else [None]
    last_error = None
    targets = [(gpu, gi) for gpu in enabled for gi in gpu.gpu_instances if gi_filter is None or gi.gi_id in gi_filter]
    if not targets:
        _out("No GPU instances found.")
        return RC_NOT_FOUND
    for gpu, gi in targets:
        for token in tokens:
            try:
                ci = driver.create_compute_instance(gpu, gi, token)
            except DriverError as error:
                _out(f"Unable to create a compute instance on GPU {gpu.index:>2} GPU instance ID {gi.gi_id:>2} "
                     f"using profile {token if token else 'default'}: {error}")
                last_error = str(error)
                continue
            state.record("nvidia-smi", "create-ci", gpu=gpu.index, gi_id=gi.gi_id, ci_id=ci.ci_id, profile=ci.profile)
            _out(f"Successfully created compute instance ID {ci.ci_id:>2} on GPU {gpu.index:>2} GPU instance ID "
                 f"{gi.gi_id:>2} using profile MIG {ci.profile} (ID {ci.profile_id:>2})")
    if last_error:
        _out(f"Failed to create compute instances: {last_error}")
        return _rc_for(last_error)
    return RC_OK


def mig_dci(state: HostState, gpus: Sequence[Gpu], gi_filter: Optional[List[int]],
            ci_filter: Optional[List[int]]) -> int:
    """``-dci``: refused for a CI with a running process (SPECS §5 "In use by another client")."""
    if not _mig_enabled(gpus):
        _out("No MIG-enabled devices found.")
        return RC_NOT_FOUND
    rows = list(_ci_rows(gpus, gi_filter, ci_filter))
    if not rows:
        _out("No compute instances found.")
        return RC_NOT_FOUND
    last_error = None
    for gpu, gi, ci in rows:
        try:
            driver.destroy_compute_instance(gpu, gi, ci)
        except DriverError as error:
            _out(f"Unable to destroy compute instance ID {ci.ci_id:>2} from GPU {gpu.index:>2} GPU instance ID "
                 f"{gi.gi_id:>2}: {error}")
            last_error = str(error)
            continue
        state.record("nvidia-smi", "destroy-ci", gpu=gpu.index, gi_id=gi.gi_id, ci_id=ci.ci_id)
        _out(f"Successfully destroyed compute instance ID {ci.ci_id:>2} from GPU {gpu.index:>2} GPU instance ID {gi.gi_id:>2}")
    if last_error:
        _out(f"Failed to destroy compute instances: {last_error}")
        return _rc_for(last_error)
    return RC_OK


def mig_dgi(state: HostState, gpus: Sequence[Gpu], gi_filter: Optional[List[int]]) -> int:
    """``-dgi``: a GI that still has CIs is "In use by another client" (SPECS §5)."""
    enabled = _mig_enabled(gpus)
    if not enabled:
        _out("No MIG-enabled devices found.")
        return RC_NOT_FOUND
    rows = [(gpu, gi) for gpu in enabled for gi in list(gpu.gpu_instances) if gi_filter is None or gi.gi_id in gi_filter]
    if not rows:
        _out("No GPU instances found.")
        return RC_NOT_FOUND
    last_error = None
    for gpu, gi in rows:
        try:
            driver.destroy_gpu_instance(gpu, gi)
        except DriverError as error:
            _out(f"Unable to destroy GPU instance ID {gi.gi_id:>2} from GPU {gpu.index:>2}: {error}")
            last_error = str(error)
            continue
        state.record("nvidia-smi", "destroy-gi", gpu=gpu.index, gi_id=gi.gi_id)
        _out(f"Successfully destroyed GPU instance ID {gi.gi_id:>2} from GPU {gpu.index:>2}")
    if last_error:
        _out(f"Failed to destroy GPU instances: {last_error}")
        return _rc_for(last_error)
    return RC_OK


_MIG_OPTIONS_WITH_VALUE = {
    "-i": "id", "--id": "id", "-gi": "gi", "--gpu-instance-id": "gi", "-ci": "ci",
    "--compute-instance-id": "ci", "-cgi": "cgi", "--create-gpu-instance": "cgi",
}
_MIG_FLAGS = {
    "-lgip": "lgip", "--list-gpu-instance-profiles": "lgip",
    "-lgipp": "lgipp", "--list-gpu-instance-possible-placements": "lgipp",
    "-lgi": "lgi", "--list-gpu-instances": "lgi", "-lci": "lci", "--list-compute-instances": "lci",
    "-lcip": "lcip", "--list-compute-instance-profiles": "lcip", "-C": "default_ci",
    "--default-compute-instance": "default_ci", "-dci": "dci", "--destroy-compute-instance": "dci",
    "-dgi": "dgi", "--destroy-gpu-instance": "dgi", "-h": "help", "--help": "help",
}
_MUTATING = ("cgi", "cci", "dci", "dgi")


def _parse_options(argv: Sequence[str], with_value: Dict[str, str], flags: Dict[str, str], help_command: str,
                   optional_value: Optional[Dict[str, str]] = None) -> Dict[str, Optional[str]]:
    """Options as nvidia-smi reads them: NAME VALUE or NAME=VALUE, flags, optional values (-cci [x])."""
    opts: Dict[str, Optional[str]] = {}
    optional_value = optional_value or {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, inline = arg.partition("=")
        if name in with_value:
            if eq:
                opts[with_value[name]] = inline
            elif args:
                opts[with_value[name]] = args.pop(0)
            else:
                raise SmiExit(RC_INVALID, f"Option {name} requires a value. Please run '{help_command}' for help.")
        elif name in optional_value:
            if eq:
                opts[optional_value[name]] = inline
            elif args and not args[0].startswith("-"):
                opts[optional_value[name]] = args.pop(0)
            else:
                opts[optional_value[name]] = ""
        elif arg in flags:
            opts[flags[arg]] = ""
        else:
            raise SmiExit(RC_INVALID, f"Invalid combination of input arguments. Please run '{help_command}' for help.")
    return opts


def _parse_mig_args(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    return _parse_options(argv, _MIG_OPTIONS_WITH_VALUE, _MIG_FLAGS, "nvidia-smi mig -h",
                          optional_value={"-cci": "cci", "--create-compute-instance": "cci"})


def _run_mig(argv: Sequence[str], state_path: str) -> int:
    opts = _parse_mig_args(argv)
    if "help" in opts or not opts:
        sys.stdout.write(_driver_text("help_mig.txt"))
        return RC_OK
    gi_filter = _id_filter(opts.get("gi"), "-gi")
    ci_filter = _id_filter(opts.get("ci"), "-ci")
    if any(key in opts for key in _MUTATING):
        with gpustate.locked(state_path) as state:
            _require_power(state)
            gpus = select_gpus(state, opts.get("id"))
            if "cgi" in opts:
                return mig_cgi(state, gpus, opts["cgi"] or "", "default_ci" in opts)
            if "cci" in opts:
                return mig_cci(state, gpus, opts["cci"], gi_filter)
            if "dci" in opts:
                return mig_dci(state, gpus, gi_filter, ci_filter)
            return mig_dgi(state, gpus, gi_filter)
    state = gpustate.load(state_path)
    _require_power(state)
    gpus = select_gpus(state, opts.get("id"))
    if "lgip" in opts:
        return mig_lgip(gpus)
    if "lgipp" in opts:
        return mig_lgipp(gpus)
    if "lgi" in opts:
        return mig_lgi(gpus, gi_filter)
    if "lci" in opts:
        return mig_lci(gpus, gi_filter, ci_filter)
    if "lcip" in opts:
        return mig_lcip(gpus, gi_filter)
    raise SmiExit(RC_INVALID, "Invalid combination of input arguments. Please run 'nvidia-smi mig -h' for help.")


# --------------------------------------------------------------------------- top level

def _require_power(state: HostState) -> None:
    if not state.powered_on:
        raise SmiExit(RC_NO_DRIVER, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                      "Make sure that the latest NVIDIA driver is installed and running.")


def _parse_top(argv: Sequence[str]) -> Dict[str, Optional[str]]:
    with_value = {"-i": "id", "--id": "id", "--query-gpu": "query_gpu", "--query-compute-apps": "query_apps",
                  "--format": "format", "-mig": "mig", "--multi-instance-gpu": "mig"}
    flags = {"-L": "list", "--list-gpus": "list", "-r": "reset", "--gpu-reset": "reset", "-h": "help",
             "--help": "help", "--version": "version"}
    return _parse_options(argv, with_value, flags, "nvidia-smi -h")


def _dispatch(argv: Sequence[str], state_path: str) -> int:
    if "mig" in argv:
        position = argv.index("mig")
        if position == 0 or argv[position - 1] not in ("-i", "--id"):
            return _run_mig(list(argv[:position]) + list(argv[position + 1:]), state_path)
    opts = _parse_top(argv)
    if "help" in opts:
        sys.stdout.write(_driver_text("help.txt"))
        return RC_OK
    if "mig" in opts or "reset" in opts:
        with gpustate.locked(state_path) as state:
            _require_power(state)
            gpus = select_gpus(state, opts.get("id"))
            if "mig" in opts:
                return set_mig(state, gpus, opts["mig"] or "")
            return reset(state, gpus)
    state = gpustate.load(state_path)
    if "version" in opts:
        major_minor = ".".join(state.driver_version.split(".")[:2])
        _out(f"NVIDIA-SMI version  : {state.driver_version}")
        _out(f"NVML version        : {major_minor}")
        _out(f"DRIVER version      : {state.driver_version}")
        _out(f"CUDA Version        : {_cuda_version(state)}")
        return RC_OK
    _require_power(state)
    gpus = select_gpus(state, opts.get("id"))
    if "list" in opts:
        list_gpus(gpus)
    elif "query_gpu" in opts:
        query_gpu(state, gpus, opts["query_gpu"] or "", opts.get("format"))
    elif "query_apps" in opts:
        query_apps(gpus, opts["query_apps"] or "", opts.get("format"))
    else:
        summary(state, gpus)
    return RC_OK


def main(argv: Sequence[str], state_path: str) -> int:
    """Run ``nvidia-smi <argv>`` against ``state_path``; output on sys.stdout; returns the exit code."""
    try:
        return _dispatch(list(argv), state_path)
    except SmiExit as stop:
        if stop.message:
            _out(stop.message)
        return stop.rc
    except gpustate.StateError as error:
        sys.stderr.write(f"nvidia-smi (gpulab): {error}\n")
        return RC_NO_DRIVER


def run(argv: Sequence[str], state_path: str) -> Tuple[int, str, str]:
    """``main`` with output captured: (rc, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = main(argv, state_path)
    return rc, out.getvalue(), err.getvalue()


def cli(argv: Optional[Sequence[str]] = None) -> int:
    return driver.state_cli("python -m gpulab.smi", main, argv)


if __name__ == "__main__":
    sys.exit(cli())
