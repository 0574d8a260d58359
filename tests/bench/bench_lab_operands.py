"""Benchmark: how long the lab's own controllers take to start the GPU Operator's operands on N nodes.

Usage: .venv/bin/python tests/bench/bench_lab_operands.py [--nodes 50,100,200] [--json FILE]

The lab's kubelet, scheduler and operator are part of what every cluster benchmark measures
(issue 26, item 4): a 200-host converge waits for 5 operand pods on each node. In this process, no
SSH hosts: a Store with N one-GPU H100 nodes, the controllers with the lab's default timings, a
ClusterPolicy as the chart creates it; timed until the ClusterPolicy is ready (every operand pod
running). Reported: seconds, operand pods, controller passes, and the pod objects the store copied
out for reads (the lab's cost that grows with the fleet), with the ratio to the smallest size
(linear: the ratio of the node counts). Then the idle cost: with every operand running and nothing
left to do, the share of one core the lab spends over ``--idle`` seconds (its controllers' resync
passes; the process's CPU time, the main thread sleeping) and the pod objects copied per second.
This is the background load every benchmark on a lab of that size runs beside. No timed assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lab"))

from gpulab import gpustate  # noqa: E402
from gpulab.cluster import faults, manager  # noqa: E402
from gpulab.cluster.server import add_nodes  # noqa: E402
from gpulab.cluster.store import Store  # noqa: E402


def measure(nodes: int, workdir: str, timeout: float, idle: float = 5.0) -> dict:
    store = Store()
    hosts = []
    for index in range(nodes):
        name = "gpu-%04d" % index
        path = os.path.join(workdir, "%s-%d.json" % (name, nodes))
        gpustate.create(path, name, [("H100-80GB", 1)])
        hosts.append({"name": name, "state_file": path})
    add_nodes(store, hosts)
    store.create("v1/namespaces", {"metadata": {"name": "gpu-operator"}})
    copied = {"pods": 0}
    items = store.items

    def counted(key, namespace=None, label_selector=None, field_selector=None):
        found = items(key, namespace, label_selector, field_selector)
        if key == "v1/pods":
            copied["pods"] += len(found)
        return found
    store.items = counted
    controllers = manager.start_controllers(store, hosts, settings=manager.Settings(), faults=faults.FaultRegistry())
    try:
        started = time.perf_counter()
        store.create("nvidia.com/v1/clusterpolicies", {"metadata": {"name": "cluster-policy"},
                                                       "spec": {"mig": {"strategy": "single"}}})
        state = None
        while time.perf_counter() - started < timeout:
            state = (store.get("nvidia.com/v1/clusterpolicies", None, "cluster-policy").get("status") or {}).get("state")
            if state == "ready":
                break
            time.sleep(0.2)
        seconds = time.perf_counter() - started
        pods = len(items("v1/pods", "gpu-operator"))
        row = {"nodes": nodes, "ready": state == "ready", "seconds": seconds, "operand_pods": pods,
               "passes": controllers.passes, "pod_copies": copied["pods"], "load1": os.getloadavg()[0]}
        time.sleep(2.0)  # the last pods' status writes settle
        cpu, wall, copies, passes = time.process_time(), time.perf_counter(), copied["pods"], controllers.passes
        time.sleep(idle)
        wall = time.perf_counter() - wall
        row.update(idle_core_share=(time.process_time() - cpu) / wall, idle_passes_per_s=(controllers.passes - passes) / wall,
                   idle_pod_copies_per_s=(copied["pods"] - copies) / wall)
        return row
    finally:
        controllers.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="50,100,200")
    parser.add_argument("--timeout", type=float, default=900.0, help="give up on one size after this many seconds")
    parser.add_argument("--idle", type=float, default=5.0, help="seconds of the idle measurement after ready")
    parser.add_argument("--json")
    options = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-operands-") as workdir:
        for nodes in [int(n) for n in options.nodes.split(",")]:
            results.append(measure(nodes, workdir, options.timeout, options.idle))
            print("measured %d nodes: %.1fs" % (nodes, results[-1]["seconds"]), flush=True)
    first = results[0]
    header = ("nodes", "ready", "seconds", "pods", "passes", "pod copies", "x seconds", "x nodes", "load",
              "idle core", "idle passes/s", "idle pod copies/s")
    print("\n%6s %6s %9s %6s %7s %12s %12s %12s %6s %10s %14s %18s" % header)
    for row in results:
        row["ratio_seconds"] = row["seconds"] / first["seconds"]
        row["ratio_nodes"] = row["nodes"] / first["nodes"]
        print("%6d %6s %9.1f %6d %7d %12d %12.2f %12.2f %6.1f %10.2f %14.2f %18.0f" % (
            row["nodes"], row["ready"], row["seconds"], row["operand_pods"], row["passes"], row["pod_copies"],
            row["ratio_seconds"], row["ratio_nodes"], row["load1"], row["idle_core_share"], row["idle_passes_per_s"],
            row["idle_pod_copies_per_s"]))
    print(json.dumps({"benchmark": "lab_operands", "nproc": os.cpu_count(), "results": results}))
    if options.json:
        with open(options.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
