"""Simulated compute processes on a lab host.

No real process runs: a "workload" is a record (fake PID, name, memory) in the host's GPU state,
which nvidia-smi shows in its Processes table and --query-compute-apps, and which makes the
simulated driver treat the GPU as busy (MIG mode goes pending, reset is refused, docs/reference/specs.md §5).

    python -m gpulab.workload start --state FILE --gpu 0 [--mig-device N] --name train.py --mib 2000 [--pid N]
    python -m gpulab.workload stop --state FILE --pid N
    python -m gpulab.workload list --state FILE

``--mig-device N`` is the MIG device number of ``nvidia-smi -L`` on that GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence, Tuple

from gpulab import gpustate


def start(state_path: str, gpu_index: int, name: str, used_mib: int, mig_device: Optional[int] = None,
          pid: Optional[int] = None) -> int:
    """Record a process; returns its (fake) PID."""
    with gpustate.locked(state_path) as state:
        gi_id, ci_id = _mig_target(state.gpu(gpu_index), mig_device)
        return gpustate.add_process_to_state(state, gpu_index, pid, name, used_mib, gi_id, ci_id)


def _mig_target(gpu: gpustate.Gpu, mig_device: Optional[int]) -> Tuple[Optional[int], Optional[int]]:
    if mig_device is None:
        return None, None
    if not gpu.mig_current:
        raise gpustate.StateError(f"GPU {gpu.index} is not in MIG mode: --mig-device does not apply")
    devices = gpu.mig_devices()
    if not 0 <= mig_device < len(devices):
        raise gpustate.StateError(f"GPU {gpu.index} has {len(devices)} MIG device(s); no device {mig_device}")
    gi, ci = devices[mig_device]
    return gi.gi_id, ci.ci_id


def stop(state_path: str, pid: int) -> bool:
    return gpustate.remove_process(state_path, pid)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpulab.workload", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start_parser = sub.add_parser("start", help="record a simulated compute process")
    start_parser.add_argument("--state", default=os.environ.get("GPULAB_STATE"))
    start_parser.add_argument("--gpu", type=int, required=True)
    start_parser.add_argument("--mig-device", type=int)
    start_parser.add_argument("--name", required=True)
    start_parser.add_argument("--mib", type=int, default=1000)
    start_parser.add_argument("--pid", type=int)
    stop_parser = sub.add_parser("stop", help="forget a simulated process")
    stop_parser.add_argument("--state", default=os.environ.get("GPULAB_STATE"))
    stop_parser.add_argument("--pid", type=int, required=True)
    list_parser = sub.add_parser("list", help="list simulated processes")
    list_parser.add_argument("--state", default=os.environ.get("GPULAB_STATE"))
    ns = parser.parse_args(argv)
    if not ns.state:
        parser.error("--state FILE (or GPULAB_STATE) is required")
    try:
        if ns.command == "start":
            print(start(ns.state, ns.gpu, ns.name, ns.mib, ns.mig_device, ns.pid))
            return 0
        if ns.command == "stop":
            if not stop(ns.state, ns.pid):
                print(f"no simulated process with PID {ns.pid}", file=sys.stderr)
                return 1
            return 0
        for gpu, proc in gpustate.load(ns.state).all_processes():
            print(f"{proc.pid} gpu={gpu.index} gi={proc.gi_id} ci={proc.ci_id} {proc.used_mib}MiB {proc.name}")
        return 0
    except gpustate.StateError as error:
        print(f"workload: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
