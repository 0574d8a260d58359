"""Benchmark: no-op re-runs of the cluster-side modules (API requests and wall time; nothing asserted).

Usage: .venv/bin/python tests/bench/bench_cluster_noop.py [--nodes 2,20] [--repeats 3] [--json FILE]

For each size, a fresh lab cluster (in this process) with N one-GPU A100-40GB nodes: the lab
stand-in chart installed by gpu_operator (real helm 4) with operator-managed MIG, the mig-parted
ConfigMap written by mig_operator_config and every node set to `all-balanced` by mig_node_config
(setup, not measured). Then, interleaved, `repeats` times:

  helm-list   - the real `helm list -o json` alone (the floor for anything that asks helm)
  operator    - gpu_operator with the same settings (a no-op: changed=false)
  mig-nodes   - mig_node_config on every node with the same config (no-ops)

and the lab's /lab/metrics counters give the API requests of each. Expected shape: the operator
no-op sends a constant number of requests (namespace, CRDs, ClusterPolicy, DaemonSets), independent
of N; a mig_node_config no-op is one GET of its node. The ratio operator / helm-list shows what
the module adds on top of helm's own start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
sys.path.insert(0, os.path.join(REPO, "tests", "lab", "tests"))

from gpulab import tools  # noqa: E402  pylint: disable=wrong-import-position
from gpulab.cluster import server  # noqa: E402  pylint: disable=wrong-import-position
import test_cluster_modules_operator as harness  # noqa: E402  pylint: disable=wrong-import-position


class _TmpPath(str):
    """The harness wants a pathlib-like tmp_path; `/` joins."""

    def __truediv__(self, other):
        return _TmpPath(os.path.join(self, other))


def _requests(lab):
    return server.metrics(lab.dir)["total"]


def _reset(lab):
    server.metrics(lab.dir, reset=True)


def bench(nodes: int, repeats: int, helm_binary: str) -> dict:
    tmp = _TmpPath(tempfile.mkdtemp(prefix="bench-cluster-"))
    lab = harness.Lab(tmp, [("node-%02d" % i, "A100-40GB", 1) for i in range(nodes)])
    home = os.path.join(tmp, "helm-home")
    env = {"HELM_CACHE_HOME": home + "/cache", "HELM_CONFIG_HOME": home + "/config", "HELM_DATA_HOME": home + "/data"}
    try:
        operator = {"chart_ref": harness.CHART, "helm_binary": helm_binary, "kubeconfig": lab.kubeconfig,
                    "mig_strategy": "mixed", "mig_manager_enabled": True, "driver_enabled": False,
                    "mig_manager_config": "gpufleet-mig-parted-config", "wait_timeout": 120, "wait_interval": 0.5}
        names = ["node-%02d" % i for i in range(nodes)]
        made = lab.run("mig_operator_config", {"kubeconfig": lab.kubeconfig})
        assert not made.get("failed"), made
        assert lab.run("gpu_operator", operator, env=env)["cluster_policy_state"] == "ready"
        for name in names:
            result = lab.run("mig_node_config", {"kubeconfig": lab.kubeconfig, "node": name, "config": "all-balanced",
                                                 "poll_interval": 0.3, "timeout": 120})
            assert result.get("state") == "success", result
        samples = {"helm-list": [], "operator": [], "mig-nodes": []}
        counts = {}
        for _round in range(repeats):
            _reset(lab)
            start = time.monotonic()
            subprocess.run([helm_binary, "list", "-n", "gpu-operator", "-o", "json", "--kubeconfig", lab.kubeconfig],
                           check=True, capture_output=True, env=dict(os.environ, **env), timeout=120)
            samples["helm-list"].append(time.monotonic() - start)
            counts["helm-list"] = _requests(lab)

            _reset(lab)
            start = time.monotonic()
            result = lab.run("gpu_operator", operator, env=env)
            samples["operator"].append(time.monotonic() - start)
            counts["operator"] = _requests(lab)
            if result.get("changed") or result.get("failed"):
                print("WARNING: the operator re-run was not a no-op: %s" % result, file=sys.stderr)

            _reset(lab)
            start = time.monotonic()
            for name in names:
                result = lab.run("mig_node_config", {"kubeconfig": lab.kubeconfig, "node": name, "config": "all-balanced"})
                if result.get("changed") or result.get("failed"):
                    print("WARNING: mig_node_config on %s was not a no-op: %s" % (name, result), file=sys.stderr)
            samples["mig-nodes"].append(time.monotonic() - start)
            counts["mig-nodes"] = _requests(lab)
        medians = dict((key, statistics.median(values)) for key, values in samples.items())
        return {"nodes": nodes, "median_seconds": medians, "api_requests": counts,
                "operator_over_helm_list": medians["operator"] / medians["helm-list"]}
    finally:
        lab.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", default="2,20")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    helm_binary = tools.ensure_helm(os.path.join(REPO, ".cache"))
    results = [bench(int(n), args.repeats, helm_binary) for n in args.nodes.split(",")]
    header = ("nodes", "helm-list s", "operator s", "mig-nodes s", "op/helm", "operator reqs", "mig-node reqs")
    print("%6s %12s %12s %12s %10s %14s %14s" % header)
    for row in results:
        med, req = row["median_seconds"], row["api_requests"]
        print("%6d %12.2f %12.2f %12.2f %10.2f %14d %14d" % (
            row["nodes"], med["helm-list"], med["operator"], med["mig-nodes"], row["operator_over_helm_list"],
            req["operator"], req["mig-nodes"]))
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
