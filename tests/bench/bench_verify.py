"""Benchmark: gpu_verify on 5 and 50 lab nodes (API requests and wall time; no timed assertions).

Usage: .venv/bin/python tests/bench/bench_verify.py [--nodes 5,50] [--pod-runtime 2] [--json FILE]

For each size, a fresh lab cluster (in this process) with N one-GPU H100 nodes, the operator
installed and every node time-sliced 4 ways by the gpu_sharing module. Then gpu_verify runs as
Ansible runs it (subprocess, HTTPS to the lab API) with verification pods that each take
--pod-runtime seconds (a lab-only pod annotation), and the lab's /lab/metrics counters tell how
many requests of each kind it sent. Expected shape:
  list/get calls: a constant (nodes, ClusterPolicy, ConfigMap, namespace, one pod list per poll,
                  one event list when a pod times out) - they do not grow with N;
  per pod:        one create and one log read, one pod per node and resource type;
  cleanup:        one delete-collection.
Wall time should follow the pod runtime (pods run in parallel), not the node count; the same
verification in check mode (comparison only, no pods) is shown for the difference.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
sys.path.insert(0, os.path.join(REPO, "tests", "lab", "tests"))

import labtools  # noqa: E402  pylint: disable=wrong-import-position
import test_cluster_modules_sharing as labkit  # noqa: E402  pylint: disable=wrong-import-position

RUNTIME_ANNOTATION = "lab.gpufleet.io/runtime-seconds"


def bench_size(nodes: int, pod_runtime: float, workdir: str) -> dict:
    lab_dir = os.path.join(workdir, "n%d" % nodes)
    os.makedirs(lab_dir)
    names = ["gpu-%03d" % i for i in range(nodes)]
    started = time.monotonic()
    lab = labkit.start_lab(lab_dir, [(name, "H100-80GB", 1) for name in names])
    try:
        labkit.install_operator(lab, mig_strategy="none")
        setup_seconds = time.monotonic() - started
        config = {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "nodes": names}
        applied = labtools.run_module("gpu_sharing", {"kubeconfig": lab.kubeconfig, "configs": [config],
                                                      "wait_timeout": 300, "wait_interval": 1}, lab_dir)
        if applied.get("failed"):
            raise SystemExit("gpu_sharing failed: %s" % applied.get("msg"))
        args = {"kubeconfig": lab.kubeconfig, "configs": [config], "poll_interval": 0.5, "pod_timeout": 120,
                "pod_annotations": {RUNTIME_ANNOTATION: str(pod_runtime)}}

        lab.api.metrics.reset()
        begin = time.monotonic()
        compared = labtools.run_module("gpu_verify", args, lab_dir, check_mode=True)
        compare_wall = time.monotonic() - begin
        compare_requests = lab.api.metrics.snapshot()

        lab.api.metrics.reset()
        begin = time.monotonic()
        verified = labtools.run_module("gpu_verify", args, lab_dir)
        verify_wall = time.monotonic() - begin
        counts = lab.api.metrics.snapshot()
    finally:
        lab.stop()
    if verified.get("failed") or not verified.get("ok"):
        raise SystemExit("gpu_verify did not pass on %d nodes: %s" % (nodes, verified.get("msg")))
    requests = counts["requests"]
    pods = len(verified["report"]["pods"])
    per_pod = requests.get("create v1/pods", 0) + requests.get("get v1/pods/log", 0)
    polls = requests.get("list v1/pods", 0)
    constant = counts["total"] - per_pod - polls
    slowest_pod = max(p["seconds"] for p in verified["report"]["pods"])
    return {
        "nodes": nodes,
        "pods": pods,
        "requests_total": counts["total"],
        "requests_per_pod": per_pod,
        "pod_list_polls": polls,
        "requests_other": constant,
        "requests": requests,
        "check_mode_requests": compare_requests["total"],
        "check_mode_wall_seconds": round(compare_wall, 2),
        "verify_wall_seconds": round(verify_wall, 2),
        "module_elapsed_seconds": verified["report"]["elapsed_seconds"],
        "pod_runtime_seconds": pod_runtime,
        "slowest_pod_seconds": slowest_pod,
        "lab_setup_seconds": round(setup_seconds, 1),
        "checks": compared["report"]["summary"]["checks"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="5,50", help="comma-separated node counts")
    parser.add_argument("--pod-runtime", type=float, default=2.0, help="seconds each verification pod runs")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-verify-") as workdir:
        for size in [int(x) for x in args.nodes.split(",") if x]:
            results.append(bench_size(size, args.pod_runtime, workdir))
    header = ("nodes", "pods", "requests", "per pod", "pod polls", "other", "check-mode req", "compare s", "verify s", "pod runtime s")
    rows = [(r["nodes"], r["pods"], r["requests_total"], r["requests_per_pod"], r["pod_list_polls"], r["requests_other"],
             r["check_mode_requests"], r["check_mode_wall_seconds"], r["verify_wall_seconds"], r["pod_runtime_seconds"])
            for r in results]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for row in [header] + rows:
        print("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)))
    for r in results:
        print("%d nodes: module ran %.1fs, of which %.1fs waiting for the last pod to finish (lab kubelet throughput), "
              "%.1fs the rest" % (r["nodes"], r["module_elapsed_seconds"], r["slowest_pod_seconds"],
                                  max(0.0, r["module_elapsed_seconds"] - r["slowest_pod_seconds"])))
    if len(results) >= 2:
        small, big = results[0], results[-1]
        print("node ratio %.1fx: other requests %d -> %d, verify wall %.1fs -> %.1fs (pods run %.1fs each, in parallel)" % (
            big["nodes"] / small["nodes"], small["requests_other"], big["requests_other"],
            small["verify_wall_seconds"], big["verify_wall_seconds"], big["pod_runtime_seconds"]))
    text = json.dumps(results, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
