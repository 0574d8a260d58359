#!/usr/bin/env python
# Copyright: gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpufleet sharing probe: what the GPU (or GPU share) this process was given delivers.

Measures, within a time budget, dense matrix-multiply throughput at a small (latency-bound) and
a large (throughput-bound) size, device-to-device copy bandwidth and how much device memory this
process can allocate, and prints ONE JSON line on stdout. Needs PyTorch or CuPy with a CUDA GPU;
no privileges. Without a GPU or without both libraries it prints {"ok": false, "error": ...} and
exits 2; past its deadline it prints the same and exits 3 (it never hangs).

Standalone check on a GPU host:

    python3 gpufleet_probe.py --seconds 20

The verify role delivers this file to verification pods through a ConfigMap (verify_probe: true).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

MARKER = "gpufleet-probe"
VERSION = 1
LAB_BACKEND = "lab CPU backend"
MIB = 1024 * 1024
EXIT_FAILED = 2
EXIT_DEADLINE = 3


class ProbeFailure(Exception):
    """A reason the probe cannot measure (no GPU, no library, ...)."""


def emit(data: Dict[str, Any]) -> None:
    data = dict({"probe": MARKER, "version": VERSION}, **data)
    sys.stdout.write(json.dumps(data, sort_keys=True) + "\n")
    sys.stdout.flush()


def smi_line() -> str:
    """The first `nvidia-smi -L` line(s) of what this container sees ('' when unavailable)."""
    if not shutil.which("nvidia-smi"):
        return ""
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return " | ".join(line.strip() for line in done.stdout.splitlines() if line.strip())[:500]


def timed(run: Callable[[], None], sync: Callable[[], None], budget: float, min_calls: int = 3) -> float:
    """Seconds per call of run(): one warm-up, then calls until the budget (at least min_calls)."""
    run()
    sync()
    calls, start = 0, time.perf_counter()
    while calls < min_calls or time.perf_counter() - start < budget:
        run()
        calls += 1
        if calls % 4 == 0 or calls < min_calls:
            sync()
    sync()
    return (time.perf_counter() - start) / calls


class Backend:
    """What a backend offers: matmul, copy, allocation; subclasses bind a library."""

    name = "?"
    dtype = "fp32"
    itemsize = 4
    small_n, large_n = 1024, 8192

    def device(self) -> Dict[str, Any]:
        raise NotImplementedError

    def memory(self) -> Dict[str, int]:
        """total and free bytes of the device as this process sees them."""
        raise NotImplementedError

    def matmul(self, n: int) -> Callable[[], None]:
        raise NotImplementedError

    def copy(self, nbytes: int) -> Callable[[], None]:
        raise NotImplementedError

    def sync(self) -> None:
        raise NotImplementedError

    def allocate(self, nbytes: int) -> Any:
        raise NotImplementedError

    def release(self, blocks: List[Any]) -> None:
        del blocks[:]

    def out_of_memory(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, torch: Any) -> None:
        if not torch.cuda.is_available():
            raise ProbeFailure("no GPU: torch.cuda.is_available() is False (torch %s)" % torch.__version__)
        self.torch = torch
        self.dev = torch.device("cuda", 0)
        major, _minor = torch.cuda.get_device_capability(0)
        if torch.cuda.is_bf16_supported():
            self.dtype, self.kind, self.itemsize = "bf16", torch.bfloat16, 2
        elif major >= 7:
            self.dtype, self.kind, self.itemsize = "fp16", torch.float16, 2
        else:
            self.kind = torch.float32

    def device(self) -> Dict[str, Any]:
        return {"name": self.torch.cuda.get_device_name(0), "cuda_version": self.torch.version.cuda}

    def memory(self) -> Dict[str, int]:
        free, total = self.torch.cuda.mem_get_info(0)
        return {"total": int(total), "free": int(free)}

    def matmul(self, n: int) -> Callable[[], None]:
        a = self.torch.randn(n, n, device=self.dev, dtype=self.kind)
        b = self.torch.randn(n, n, device=self.dev, dtype=self.kind)
        return lambda: self.torch.matmul(a, b)

    def copy(self, nbytes: int) -> Callable[[], None]:
        src = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.dev)
        dst = self.torch.empty_like(src)
        return lambda: dst.copy_(src)

    def sync(self) -> None:
        self.torch.cuda.synchronize()

    def allocate(self, nbytes: int) -> Any:
        return self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.dev)

    def release(self, blocks: List[Any]) -> None:
        del blocks[:]
        self.torch.cuda.empty_cache()


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self, cupy: Any) -> None:
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # pylint: disable=broad-except
            raise ProbeFailure("no GPU: CuPy cannot use CUDA: %s" % exc) from None
        if count < 1:
            raise ProbeFailure("no GPU: CuPy sees no CUDA device")
        self.cupy = cupy
        major = int(cupy.cuda.Device(0).compute_capability) // 10
        self.dtype, self.kind, self.itemsize = ("fp16", cupy.float16, 2) if major >= 7 else ("fp32", cupy.float32, 4)

    def device(self) -> Dict[str, Any]:
        props = self.cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        return {"name": name, "cuda_version": str(self.cupy.cuda.runtime.runtimeGetVersion())}

    def memory(self) -> Dict[str, int]:
        free, total = self.cupy.cuda.runtime.memGetInfo()
        return {"total": int(total), "free": int(free)}

    def matmul(self, n: int) -> Callable[[], None]:
        a = self.cupy.random.random((n, n)).astype(self.kind)
        b = self.cupy.random.random((n, n)).astype(self.kind)
        return lambda: self.cupy.matmul(a, b)

    def copy(self, nbytes: int) -> Callable[[], None]:
        src = self.cupy.empty(nbytes, dtype=self.cupy.uint8)
        dst = self.cupy.empty_like(src)
        return lambda: dst.__setitem__(slice(None), src)

    def sync(self) -> None:
        self.cupy.cuda.Device(0).synchronize()

    def allocate(self, nbytes: int) -> Any:
        return self.cupy.empty(nbytes, dtype=self.cupy.uint8)

    def release(self, blocks: List[Any]) -> None:
        del blocks[:]
        self.cupy.get_default_memory_pool().free_all_blocks()


class LabCpuBackend(Backend):
    """The GPU lab's stand-in (tests only): pure Python on the CPU, tiny sizes, memory as the lab
    models the device (GPUFLEET_PROBE_LAB_MEMORY_MIB / _LIMIT_MIB) and, under MPS, the control
    daemon's active thread percentage (GPUFLEET_PROBE_LAB_THREAD_PERCENTAGE): each call then idles
    so that it computes that share of the time only, as an MPS client held to that share of the
    SMs does. Refuses to run where an NVIDIA device exists, so it can never stand in for a real
    GPU's figures."""

    name = LAB_BACKEND
    small_n, large_n = 24, 48

    def __init__(self) -> None:
        if os.path.exists("/dev/nvidiactl") or os.path.exists("/proc/driver/nvidia"):
            raise ProbeFailure("the lab CPU backend refuses to run on a host with an NVIDIA driver")
        if os.environ.get("GPUFLEET_PROBE_LAB") != "1":
            raise ProbeFailure("the lab CPU backend runs only inside the GPU lab (GPUFLEET_PROBE_LAB=1)")
        if os.environ.get("GPUFLEET_PROBE_LAB_NO_GPU") == "1":
            raise ProbeFailure("no GPU: the lab allocated no device to this container")
        total = int(os.environ.get("GPUFLEET_PROBE_LAB_MEMORY_MIB", "1024"))
        self.total = total * MIB
        self.limit = int(os.environ.get("GPUFLEET_PROBE_LAB_LIMIT_MIB", str(total))) * MIB
        self.threads = min(100, max(1, int(os.environ.get("GPUFLEET_PROBE_LAB_THREAD_PERCENTAGE", "100"))))

    def device(self) -> Dict[str, Any]:
        return {"name": os.environ.get("GPUFLEET_PROBE_LAB_DEVICE", "lab device"), "cuda_version": None,
                "smi": os.environ.get("GPUFLEET_PROBE_LAB_SMI", "")}

    def memory(self) -> Dict[str, int]:
        return {"total": self.total, "free": self.limit}

    def matmul(self, n: int) -> Callable[[], None]:
        a = [[float((i * j) % 7) for j in range(n)] for i in range(n)]
        cols = [list(col) for col in zip(*a)]

        def product() -> List[List[float]]:
            return [[sum(x * y for x, y in zip(row, col)) for col in cols] for row in a]
        if self.threads >= 100:
            return product

        def capped() -> None:  # computes self.threads % of the time, idles the rest
            start = time.perf_counter()
            product()
            time.sleep((time.perf_counter() - start) * (100.0 / self.threads - 1.0))
        return capped

    def copy(self, nbytes: int) -> Callable[[], None]:
        src = bytearray(min(nbytes, 4 * MIB))
        return lambda: bytes(src)

    def sync(self) -> None:
        return None

    def allocate(self, nbytes: int) -> Any:
        raise MemoryError("lab: modelled, not allocated")


def load_backend(choice: str) -> Backend:
    """The first usable backend of the choice (auto: torch, then cupy)."""
    if choice == "lab-cpu":
        return LabCpuBackend()
    errors = []
    for name in (["torch", "cupy"] if choice == "auto" else [choice]):
        try:
            module = __import__(name)
        except ImportError as exc:
            errors.append("%s: %s" % (name, exc))
            continue
        return TorchBackend(module) if name == "torch" else CupyBackend(module)
    raise ProbeFailure("neither PyTorch nor CuPy can be imported (%s); run the probe in an image that has one"
                       % "; ".join(errors))


def kernel(backend: Backend, n: int, budget: float) -> Dict[str, float]:
    seconds = timed(backend.matmul(n), backend.sync, budget)
    # six significant digits: the lab CPU backend delivers about 1e-5 TFLOP/s
    return {"n": n, "tflops": float("%.6g" % (2.0 * n ** 3 / seconds / 1e12)), "ms": round(seconds * 1000.0, 6)}


def large_size(backend: Backend, free: int) -> int:
    """The large matmul size, scaled down so that its three matrices use at most a quarter of free memory."""
    n = backend.large_n
    while n > backend.small_n and 3 * n * n * backend.itemsize > free // 4:
        n //= 2
    return n


def allocatable(backend: Backend, memory: Dict[str, int], deadline: float) -> int:
    """Bytes this process could allocate, in blocks of 1/64 of the device, until it fails or the deadline."""
    if isinstance(backend, LabCpuBackend):
        return memory["free"]
    block = max(MIB, memory["total"] // 64)
    blocks: List[Any] = []
    try:
        while len(blocks) * block < memory["total"] and time.monotonic() < deadline:
            blocks.append(backend.allocate(block))
    except Exception as exc:  # pylint: disable=broad-except
        if not backend.out_of_memory(exc):
            raise
    got = len(blocks) * block
    backend.release(blocks)
    return got


def measure(backend: Backend, seconds: float, allocation: bool = True) -> Dict[str, Any]:
    start = time.monotonic()
    memory = backend.memory()
    device = dict({"smi": smi_line()}, **backend.device())
    device["mig"] = "MIG" in device["smi"] or os.environ.get("NVIDIA_VISIBLE_DEVICES", "").startswith("MIG-")
    share = seconds / 5.0
    result: Dict[str, Any] = {"ok": True, "backend": backend.name, "dtype": backend.dtype, "device": device}
    result["small"] = kernel(backend, backend.small_n, share)
    result["large"] = kernel(backend, large_size(backend, memory["free"]), share * 2)
    nbytes = max(MIB, min(256 * MIB, memory["free"] // 8))
    copy_seconds = timed(backend.copy(nbytes), backend.sync, share)
    result["copy_gbps"] = round(2.0 * nbytes / copy_seconds / 1e9, 3)
    # Sharers measured together skip the allocation: grabbing all memory would make the others fail.
    got = allocatable(backend, memory, start + seconds) if allocation else memory["free"]
    result["memory"] = {"total_mib": memory["total"] // MIB, "allocatable_mib": got // MIB, "measured": allocation}
    result["seconds"] = round(time.monotonic() - start, 3)
    return result


def on_deadline(_signum: int, _frame: Any) -> None:
    emit({"ok": False, "error": "deadline: the probe did not finish in time (a hung GPU or driver?)"})
    os._exit(EXIT_DEADLINE)  # pylint: disable=protected-access


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     epilog="Output: one JSON line (probe, ok, backend, dtype, device, small, large, "
                                            "copy_gbps, memory, seconds). Exit 0 ok, 2 cannot measure, 3 deadline.")
    parser.add_argument("--seconds", type=float, default=20.0, help="time budget for the measurement (default 20)")
    parser.add_argument("--backend", choices=["auto", "torch", "cupy", "lab-cpu"], default="auto",
                        help="auto: PyTorch, else CuPy. lab-cpu: the GPU lab's CPU stand-in (tests only)")
    parser.add_argument("--no-allocation", action="store_true",
                        help="do not measure the allocatable memory (report the free memory); for sharers run together")
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be more than 0")
    signal.signal(signal.SIGALRM, on_deadline)
    signal.alarm(int(args.seconds * 2 + 30))  # imports and CUDA start-up included
    try:
        emit(measure(load_backend(args.backend), args.seconds, allocation=not args.no_allocation))
    except ProbeFailure as exc:
        emit({"ok": False, "error": str(exc)})
        return EXIT_FAILED
    except Exception as exc:  # pylint: disable=broad-except
        emit({"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)})
        return EXIT_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
