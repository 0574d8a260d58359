# -*- coding: utf-8 -*-
"""The probe program (roles/verify/files/gpufleet_probe.py, issue 15) run standalone: it fails
clearly and quickly without a GPU or without PyTorch/CuPy, its lab CPU backend refuses to run
outside the lab, and what it prints is what _probe parses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ansible_collections.gpufleet.sharing.plugins.module_utils.proof import _probe

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(REPO, "roles", "verify", "files", "gpufleet_probe.py")


def run(args, env=None, path=None):
    environ = {k: v for k, v in os.environ.items() if not k.startswith("GPUFLEET_PROBE")}
    environ["PYTHONPATH"] = path or ""
    environ.update(env or {})
    return subprocess.run([sys.executable, "-I" if path is None else "-s", PROBE] + args, capture_output=True,
                          text=True, timeout=60, env=environ, check=False)


def test_help_runs_standalone():
    done = run(["--help"])
    assert done.returncode == 0 and "--seconds" in done.stdout and "lab-cpu" in done.stdout


def test_without_torch_or_cupy_it_fails_clearly(tmp_path):
    done = run(["--seconds", "1"], path=str(tmp_path))
    assert done.returncode == 2
    with_error = json.loads(done.stdout)
    assert with_error["ok"] is False and "neither PyTorch nor CuPy" in with_error["error"]


def test_without_a_gpu_it_fails_clearly(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("__version__ = '0-fake'\nclass cuda:\n    @staticmethod\n"
                                      "    def is_available():\n        return False\n")
    done = run(["--backend", "torch"], path=str(tmp_path))
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error == "no GPU: torch.cuda.is_available() is False (torch 0-fake)"
    try:
        _probe.parse_probe_output(done.stdout)
    except _probe.ProbeOutputError as exc:
        assert "the probe failed: no GPU" in str(exc)


def test_lab_backend_only_in_the_lab():
    done = run(["--backend", "lab-cpu"])
    assert done.returncode == 2 and "only inside the GPU lab" in done.stdout


def test_lab_backend_output_parses_and_is_labelled():
    done = run(["--backend", "lab-cpu", "--seconds", "0.5"],
               env={"GPUFLEET_PROBE_LAB": "1", "GPUFLEET_PROBE_LAB_MEMORY_MIB": "81559",
                    "GPUFLEET_PROBE_LAB_LIMIT_MIB": "20389",
                    "GPUFLEET_PROBE_LAB_SMI": "  MIG 1g.10gb     Device  0: (UUID: MIG-1)"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(done.stdout.splitlines()) == 1
    result = _probe.parse_probe_output(done.stdout)
    assert result.backend == _probe.LAB_BACKEND == "lab CPU backend"
    assert (result.memory_total_mib, result.memory_allocatable_mib, result.mig) == (81559, 20389, True)
    assert result.small.tflops > 0 and result.large.n > result.small.n


def test_bad_seconds_is_refused():
    done = run(["--seconds", "0"])
    assert done.returncode == 2 and "--seconds must be more than 0" in done.stderr


# A stand-in for PyTorch with CUDA (no GPU here): enough of its API for the probe's torch backend,
# 8 GiB of device memory of which allocations beyond 2 GiB fail as CUDA does ("out of memory").
FAKE_TORCH = """
__version__ = "0-fake"
bfloat16, float16, float32, uint8 = "bf16", "fp16", "fp32", "u8"
_allocated = [0]
GIB = 1024 ** 3


class version:
    cuda = "12.6"


class _Tensor:
    def __init__(self, nbytes):
        if _allocated[0] + nbytes > 2 * GIB:
            raise RuntimeError("CUDA out of memory. Tried to allocate %d bytes" % nbytes)
        _allocated[0] += nbytes
        self.nbytes = nbytes

    def __del__(self):
        _allocated[0] -= self.nbytes

    def copy_(self, other):
        return self


def device(kind, index):
    return (kind, index)


def randn(n, m, device=None, dtype=None):
    return _Tensor(n * m * 2)


def empty(nbytes, dtype=None, device=None):
    return _Tensor(nbytes)


def empty_like(tensor):
    return _Tensor(tensor.nbytes)


def matmul(a, b):
    return None


class cuda:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def get_device_capability(index):
        return (9, 0)

    @staticmethod
    def is_bf16_supported():
        return True

    @staticmethod
    def get_device_name(index):
        return "Fake H200"

    @staticmethod
    def mem_get_info(index):
        return (8 * GIB - _allocated[0], 8 * GIB)

    @staticmethod
    def synchronize():
        return None

    @staticmethod
    def empty_cache():
        return None
"""


def test_torch_backend_measures_and_finds_the_allocation_limit(tmp_path):
    (tmp_path / "torch.py").write_text(FAKE_TORCH)
    done = run(["--seconds", "0.5"], path=str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    result = _probe.parse_probe_output(done.stdout)
    assert (result.backend, result.dtype, result.device) == ("torch", "bf16", "Fake H200")
    assert (result.small.n, result.large.n) == (1024, 8192)
    assert result.memory_total_mib == 8192
    assert 1024 < result.memory_allocatable_mib <= 2048  # stopped at the (fake) limit, not at the total
    shared = run(["--seconds", "0.5", "--no-allocation"], path=str(tmp_path))
    assert json.loads(shared.stdout)["memory"]["measured"] is False
