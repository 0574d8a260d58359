"""``nvidia-smi -L``, ``--query-gpu`` and ``--query-compute-apps`` (CSV output)."""

from __future__ import annotations

import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from gpulab import gpustate
from gpulab.gpustate import Gpu, HostState
from gpulab.models import load_model
from gpulab.smi.common import RC_INVALID, SmiExit, out, used_mib

# A query field: (CSV header, getter).
Field = Tuple[str, Callable[..., str]]


def list_gpus(gpus: Sequence[Gpu]) -> None:
    """``-L`` (docs/reference/specs.md §4.7, R470+ format)."""
    for gpu in gpus:
        out(f"GPU {gpu.index}: {gpu.name} (UUID: {gpu.uuid})")
        if gpu.mig_current:
            for number, (_gi, ci) in enumerate(gpu.mig_devices()):
                label = ci.profile.ljust(12) if len(ci.profile) < 12 else ci.profile + " "
                out(f"  MIG {label}Device {number:>2}: (UUID: {ci.uuid})")


def _mib(value: int, units: bool) -> str:
    return f"{value} MiB" if units else str(value)


def _mig_text(value: Optional[bool]) -> str:
    return "[N/A]" if value is None else ("Enabled" if value else "Disabled")


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
    "memory.used": ("memory.used [MiB]", lambda s, g, u: _mib(used_mib(g), u)),
    "memory.free": ("memory.free [MiB]", lambda s, g, u: _mib(g.memory_total_mib - used_mib(g), u)),
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


def _resolve_fields(fields_text: str, fields: Mapping[str, Field], aliases: Mapping[str, str]) -> List[Field]:
    resolved = []
    for name in (f.strip() for f in fields_text.split(",") if f.strip()):
        canonical = aliases.get(name, name)
        if canonical not in fields:
            raise SmiExit(RC_INVALID, f'Field "{name}" is not a valid field to query.')
        resolved.append(fields[canonical])
    return resolved


def query_gpu(state: HostState, gpus: Sequence[Gpu], fields_text: str, fmt: Optional[str]) -> None:
    header, units = _parse_format(fmt)
    resolved = _resolve_fields(fields_text, _GPU_FIELDS, _GPU_ALIASES)
    if header:
        out(", ".join(item[0] for item in resolved))
    for gpu in gpus:
        out(", ".join(item[1](state, gpu, units) for item in resolved))


def query_apps(gpus: Sequence[Gpu], fields_text: str, fmt: Optional[str]) -> None:
    header, units = _parse_format(fmt)
    resolved = _resolve_fields(fields_text, _APP_FIELDS, _APP_ALIASES)
    if header:
        out(", ".join(item[0] for item in resolved))
    for gpu in gpus:
        for proc in gpu.processes:
            out(", ".join(item[1](gpu, proc, units) for item in resolved))
