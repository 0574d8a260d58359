"""Plain ``nvidia-smi`` (the summary tables) and ``--version``."""

from __future__ import annotations

import time
from typing import Sequence

from gpulab import driver
from gpulab.gpustate import Gpu, HostState
from gpulab.models import load_model
from gpulab.smi.common import cuda_version, out, used_mib

WIDE = 89  # inner width of the 580 summary tables


def _bar(sections: Sequence[int], fill: str = "-", corner: str = "+") -> str:
    return corner + corner.join(fill * width for width in sections) + corner


def _full_line(text: str) -> str:
    return "|" + text.ljust(WIDE) + "|"


def summary(state: HostState, gpus: Sequence[Gpu]) -> None:
    """Plain ``nvidia-smi``: layout of the real 580 capture (tests/fixtures/h200/smi.txt); the
    MIG devices table follows docs/reference/specs.md §4.8 widened to the 580 frame (modelling choice)."""
    sections = (41, 24, 22)
    out(time.asctime() + "       ")
    out(_bar((WIDE,)))
    ver = state.driver_version
    out(f"| NVIDIA-SMI {ver:<23}Driver Version: {ver:<15}CUDA Version: {cuda_version(state):<9}|")
    out(_bar(sections))
    out("| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |")
    out("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |")
    out("|                                         |                        |               MIG M. |")
    out("|" + "+".join("=" * width for width in sections) + "|")
    for gpu in gpus:
        spec = load_model(gpu.model)
        mig = "N/A" if gpu.mig_current is None else ("Enabled" if gpu.mig_current else "Disabled")
        name = gpu.name if len(gpu.name) <= 30 else gpu.name[:27] + "..."
        out(f"|{gpu.index:>4}  {name:<30}{'On':>3}  |{gpu.pci_bus_id:>19} {'Off':>3} |{'0':>21} |")
        power = f"{spec.idle_power_w}W"
        used = f"{used_mib(gpu)}MiB"
        total = f"{gpu.memory_total_mib}MiB"
        out(f"| N/A{str(spec.idle_temp_c) + 'C':>6}{'P0':>6}{power:>16} / {str(spec.max_power_w) + 'W':>5} "
            f"|{used:>11} / {total:>9} |{'0%':>8}{'Default':>13} |")
        out(f"|{'':41}|{'':24}|{mig:>21} |")
        out(_bar(sections))
    if any(gpu.mig_current for gpu in gpus):
        out("")
        _mig_devices_table(gpus)
    out("")
    _processes_table(gpus)


def _mig_devices_table(gpus: Sequence[Gpu]) -> None:
    sections = (18, 34, 11, 23)
    out(_bar((WIDE,)))
    out(_full_line(" MIG devices:"))
    out(_bar(sections))
    out(f"| GPU  GI  CI  MIG |{'Memory-Usage':>33} |        Vol|        Shared         |")
    out(f"|      ID  ID  Dev |{'BAR1-Usage':>33} | SM     Unc| CE ENC  DEC  OFA  JPG |")
    out(f"|                  |{'':34}|        ECC|{'':23}|")
    out("|" + "+".join("=" * width for width in sections) + "|")
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
            out(f"|{gpu.index:>3}{gi.gi_id:>5}{ci.ci_id:>4}{number:>4}  |{memory:>32}  |"
                f" {sm:<3}{0:>6} | {profile.ce if profile else 0:>2}{profile.enc if profile else 0:>4}"
                f"{profile.dec if profile else 0:>5}{profile.ofa if profile else 0:>5}{profile.jpeg if profile else 0:>5} |")
            out(f"|{'':18}|{'0MiB / 32767MiB':>32}  |{'':11}|{'':23}|")
            out(_bar(sections))
            rows += 1
    if not rows:
        out(_full_line("  No MIG devices found"))
        out(_bar((WIDE,)))


def _processes_table(gpus: Sequence[Gpu]) -> None:
    out(_bar((WIDE,)))
    out(_full_line(" Processes:"))
    out("|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |")
    out("|        ID   ID                                                               Usage      |")
    out("|" + "=" * WIDE + "|")
    procs = [(gpu, proc) for gpu in gpus for proc in gpu.processes]
    if not procs:
        out(_full_line("  No running processes found"))
    for gpu, proc in procs:
        gi = "N/A" if proc.gi_id is None else str(proc.gi_id)
        ci = "N/A" if proc.ci_id is None else str(proc.ci_id)
        out(f"|{gpu.index:>5}{gi:>5}{ci:>5}{proc.pid:>17}{'C':>7}   {proc.name[:36]:<36}{str(proc.used_mib) + 'MiB':>10} |")
    out(_bar((WIDE,)))


def version(state: HostState) -> None:
    """``--version``."""
    major_minor = ".".join(state.driver_version.split(".")[:2])
    out(f"NVIDIA-SMI version  : {state.driver_version}")
    out(f"NVML version        : {major_minor}")
    out(f"DRIVER version      : {state.driver_version}")
    out(f"CUDA Version        : {cuda_version(state)}")
