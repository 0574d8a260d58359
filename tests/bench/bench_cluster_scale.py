"""Benchmark: the cluster side at 10 / 100 / 1,000 / 5,000 GPU nodes (issues 14 #3, 26 #3; no timed assertions).

Usage: .venv/bin/python tests/bench/bench_cluster_scale.py [--nodes 10,100,1000,5000] [--full-up-to 100]
       [--page-sizes 500,1000,5000] [--json FILE]

Up to --full-up-to nodes, a fresh whole lab cluster in this process (no SSH hosts) with N one-GPU
A100-40GB nodes (MIG off), the operator installed with the MIG manager on, and every node
time-sliced 4 ways by gpu_sharing. Above it, the lab's controllers do not keep up on a 2-core
machine (their loops scan every pod for every node), so the API server runs alone and holds N
nodes copied from a converged node of a small whole lab, with the operator's ClusterPolicy and
ConfigMaps: the same objects for the modules to read, but no kubelet to run verification pods.
Then, each module run as Ansible runs it (a subprocess, HTTPS to the lab API):
  gpu_sharing no-op        - the same configs again: changed=false;
  gpu_verify, no pods      - check mode: node capacity / labels compared with the plan;
  gpu_verify, with pods    - one verification pod per node (whole lab only);
  mig_node_config no-op    - one node, its MIG config already applied (a per-node module);
with --page-sizes (API server alone), one node list by K8sClient at each page size (requests, wall
time, the client's peak memory, the bytes of the node list); and in this process the pure planning of N hosts (`_fleet_plan.plan_fleet` over N host plans),
which is what preflight and every cluster module do first: N one-GPU hosts with MIG off, and N
eight-GPU hosts with the example inventory's MIG layout (its own mig_configs) under the mixed strategy. Reported per run: API requests by kind
(from the lab's /lab/metrics), wall time, and the module process's peak memory (VmHWM).
Expected shape: list calls constant in N, no per-node GET where a list suffices; writes only
where something changes; memory growing with the node list only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from kubernetes import client, config

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
sys.path.insert(0, os.path.join(REPO, "tests", "lab", "tests"))
sys.path.insert(0, os.path.join(REPO, ".build"))

import labtools  # noqa: E402  pylint: disable=wrong-import-position
from gpulab.cluster import server  # noqa: E402  pylint: disable=wrong-import-position
import test_cluster_modules_sharing as labkit  # noqa: E402  pylint: disable=wrong-import-position

labtools.ensure_collection_path()

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet import _fleet_plan  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import parse_configs  # noqa: E402  pylint: disable=wrong-import-position

A100 = "NVIDIA A100-SXM4-40GB"
RUNTIME_ANNOTATION = "lab.gpufleet.io/runtime-seconds"
# Runs a module like Ansible does and reports the process's peak resident memory on stderr.
# (VmHWM of /proc/self/status: ru_maxrss would include the forking parent's size, kept across exec.)
_WRAPPER = ("import atexit, runpy, sys\n"
            "def peak():\n"
            "    with open('/proc/self/status') as status:\n"
            "        kb = [line.split()[1] for line in status if line.startswith('VmHWM:')]\n"
            "    sys.stderr.write('MAXRSS_KB %s\\n' % kb[0])\n"
            "atexit.register(peak)\n"
            "sys.argv = sys.argv[1:]\n"
            "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")
# One node list at a given page size (K8sClient's setting), as a module process would make it.
_LIST = ("import json, sys, time\n"
         "from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient\n"
         "k8s = K8sClient.connect({'kubeconfig': sys.argv[1]}, page_size=int(sys.argv[2]))\n"
         "begin = time.monotonic()\n"
         "nodes = k8s.list('Node')\n"
         "wall = time.monotonic() - begin\n"
         "with open('/proc/self/status') as status:\n"
         "    kb = [line.split()[1] for line in status if line.startswith('VmHWM:')][0]\n"
         "print(json.dumps({'nodes': len(nodes), 'wall_s': round(wall, 2), 'maxrss_mb': round(int(kb) / 1024.0, 1),\n"
         "                  'requests': k8s.request_count, 'mb': round(len(json.dumps(nodes)) / 1e6, 1)}))\n")


def run_module(name: str, args: Dict[str, Any], lab_dir: str, check_mode: bool = False) -> Dict[str, Any]:
    payload = dict(args, _ansible_check_mode=check_mode, _ansible_diff=False, _ansible_tmpdir=lab_dir)
    path = os.path.join(lab_dir, "args-%s.json" % name)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"ANSIBLE_MODULE_ARGS": payload}, handle)
    module = "ansible_collections.gpufleet.sharing.plugins.modules." + name
    begin = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _WRAPPER, module, path], capture_output=True, text=True,  # noqa: S603
                          env=dict(os.environ, PYTHONPATH=labtools.BUILD), timeout=1800, check=False)
    wall = time.monotonic() - begin
    result = json.loads(proc.stdout)
    rss = [line for line in proc.stderr.splitlines() if line.startswith("MAXRSS_KB ")]
    result["_wall"] = wall
    result["_maxrss_mb"] = int(rss[-1].split()[1]) / 1024.0 if rss else None
    return result


def measured(lab: Any, name: str, args: Dict[str, Any], lab_dir: str, check_mode: bool = False) -> Dict[str, Any]:
    lab.api.metrics.reset()
    result = run_module(name, args, lab_dir, check_mode)
    counts = lab.api.metrics.snapshot()
    if result.get("failed"):
        raise SystemExit("%s failed: %s" % (name, result.get("msg")))
    requests = counts["requests"]
    return {"wall_s": round(result["_wall"], 2), "maxrss_mb": round(result["_maxrss_mb"] or 0, 1),
            "requests": counts["total"], "by_kind": requests, "changed": bool(result.get("changed")),
            "ok": result.get("ok"),
            "gets": sum(v for k, v in requests.items() if k.startswith("get ")),
            "lists": sum(v for k, v in requests.items() if k.startswith("list ")),
            "writes": sum(v for k, v in requests.items() if k.split(" ")[0] in ("create", "update", "patch", "delete"))}


def list_pages(lab: Any, sizes: List[int], repeats: int = 3) -> Dict[str, Any]:
    """One node list per page size, each in its own process, ``repeats`` times in turn (the best wall
    time and the highest peak memory of each); requests counted by the API server."""
    rows: Dict[str, Any] = {}
    for _repeat in range(repeats):
        for size in sizes:
            lab.api.metrics.reset()
            proc = subprocess.run([sys.executable, "-c", _LIST, lab.kubeconfig, str(size)], capture_output=True,  # noqa: S603
                                  text=True, env=dict(os.environ, PYTHONPATH=labtools.BUILD), timeout=1800, check=True)
            row = dict(json.loads(proc.stdout), server_requests=lab.api.metrics.snapshot()["total"])
            seen = rows.setdefault(str(size), row)
            seen.update(wall_s=min(seen["wall_s"], row["wall_s"]), maxrss_mb=max(seen["maxrss_mb"], row["maxrss_mb"]))
    return rows


def install_operator(lab: Any, timeout: float) -> None:
    """Namespace + ClusterPolicy (MIG manager on), as the gpu_operator module leaves them; until ready."""
    api = config.new_client_from_config(config_file=lab.kubeconfig)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": "gpu-operator"}})
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"mig": {"strategy": "single"}, "migManager": {"enabled": True}}})
    labtools.wait_until("ClusterPolicy ready", lambda: (custom.get_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies", "cluster-policy").get("status") or {}).get("state") == "ready", timeout)


# A MIG fleet as the example inventory's a100_inference group plans it: its own mig_configs, the
# mixed layout on each of 8 GPUs per host, the 1g.5gb devices time-sliced (mixed strategy).
MIG_CONFIGS = {"inference-mixed": [{"device-filter": ["0x20B010DE", "0x20B110DE"], "devices": "all", "mig-enabled": True,
                                    "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}]}


def _plan_inputs(names: List[str], mig: bool) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]], Dict[str, Any]]:
    """(node_plans, sharing configs, ClusterPolicy) of N one-GPU hosts (MIG off, time-sliced 4 ways) or,
    with ``mig``, of N eight-GPU MIG hosts; each host's facts its own (a UUID per GPU), as gpu_facts reads them."""
    gpus = 8 if mig else 1
    plans = [{"node": n, "mig_config": "inference-mixed" if mig else "all-disabled",
              "mig_configs": json.loads(json.dumps(MIG_CONFIGS)) if mig else {},
              "gpu_facts": [{"index": g, "name": A100, "pci_device_id": "0x20B010DE", "uuid": "GPU-%d-%d" % (h, g),
                             "mig": {"capable": True, "current": False, "pending": False, "instances": []}}
                            for g in range(gpus)]} for h, n in enumerate(names)]
    resource = "nvidia.com/mig-1g.5gb" if mig else "nvidia.com/gpu"
    configs = [{"name": "ts", "resources": [{"name": resource, "replicas": 2 if mig else 4}], "nodes": names}]
    return plans, configs, {"spec": {"mig": {"strategy": "mixed" if mig else "single"}}}


def plan_seconds(nodes: int, repeats: int = 3, mig: bool = False) -> float:
    """Pure planning of N hosts: host plans from facts, the cluster view, plan_fleet (best of ``repeats``)."""
    names = ["gpu-%04d" % i for i in range(nodes)]
    plans, raw, policy = _plan_inputs(names, mig)
    labels = {"nvidia.com/gpu.count": "8" if mig else "1", "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
              "nvidia.com/device-plugin.config": "ts"}
    best = None
    for _repeat in range(repeats):
        begin = time.perf_counter()
        hosts = _fleet_plan.host_plans(plans, {})
        view = _fleet_plan.ClusterView.read([{"metadata": {"name": n, "labels": dict(labels)}} for n in names], policy, ["ts"])
        plan = _fleet_plan.plan_fleet(_fleet_plan.Intent(configs=parse_configs(raw), hosts=hosts), view)
        elapsed = time.perf_counter() - begin
        if plan.problems or len(plan.nodes) != nodes:
            raise SystemExit("planning %d hosts went wrong: %s" % (nodes, plan.problems[:3]))
        best = elapsed if best is None else min(best, elapsed)
    return best or 0.0


def _converged(lab: Any, names: List[str], lab_dir: str) -> Dict[str, Any]:
    """Operator installed, every node time-sliced 4 ways (gpu_sharing waits until they advertise it)."""
    install_operator(lab, timeout=60 + len(names))
    config = {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "nodes": names}
    applied = run_module("gpu_sharing", {"kubeconfig": lab.kubeconfig, "configs": [config], "wait_timeout": 1200,
                                         "wait_interval": 2}, lab_dir)
    if applied.get("failed"):
        raise SystemExit("gpu_sharing failed: %s" % applied.get("msg"))
    return config


def _measure_all(lab: Any, names: List[str], config: Dict[str, Any], lab_dir: str, pods: bool) -> Dict[str, Any]:
    auth = {"kubeconfig": lab.kubeconfig}
    row: Dict[str, Any] = {"sharing_noop": measured(lab, "gpu_sharing", dict(auth, configs=[config], wait_timeout=60), lab_dir)}
    verify = dict(auth, configs=[config], poll_interval=0.5, pod_timeout=600, pod_annotations={RUNTIME_ANNOTATION: "0.2"})
    row["verify_no_pods"] = measured(lab, "gpu_verify", verify, lab_dir, check_mode=True)
    if pods:
        row["verify_pods"] = measured(lab, "gpu_verify", verify, lab_dir)
    row["mig_node_config_noop"] = measured(lab, "mig_node_config", dict(
        auth, node=names[-1], config="all-disabled", timeout=60, poll_interval=0.5), lab_dir)
    return row


def bench_full(nodes: int, workdir: str) -> Dict[str, Any]:
    """The whole lab (operator controllers, kubelets): verification pods really run."""
    lab_dir = os.path.join(workdir, "full%d" % nodes)
    os.makedirs(lab_dir)
    names = ["gpu-%04d" % i for i in range(nodes)]
    started = time.monotonic()
    lab = labkit.start_lab(lab_dir, [(name, "A100-40GB", 1) for name in names])
    try:
        config = _converged(lab, names, lab_dir)
        measurements = _measure_all(lab, names, config, lab_dir, pods=True)
    finally:
        lab.stop()
    return _row(nodes, "full", started, measurements)


def _row(nodes: int, kind: str, started: float, measurements: Dict[str, Any]) -> Dict[str, Any]:
    setup = round(time.monotonic() - started - sum(m["wall_s"] for m in measurements.values()), 1)
    return dict(measurements, nodes=nodes, lab=kind, setup_s=setup, plan_s=round(plan_seconds(nodes), 4),
                plan_mig_s=round(plan_seconds(nodes, mig=True), 4))


def _template(workdir: str) -> Dict[str, Any]:
    """What a converged node and the operator's objects look like (a 2-node full lab, converged once)."""
    lab_dir = os.path.join(workdir, "template")
    os.makedirs(lab_dir)
    lab = labkit.start_lab(lab_dir, [("gpu-0000", "A100-40GB", 1), ("gpu-0001", "A100-40GB", 1)])
    try:
        _converged(lab, ["gpu-0000", "gpu-0001"], lab_dir)
        node = lab.store.get("v1/nodes", None, "gpu-0000")
        policy = lab.store.get("nvidia.com/v1/clusterpolicies", None, "cluster-policy")
        configmaps = lab.store.items("v1/configmaps", "gpu-operator")
    finally:
        lab.stop()
    return {"node": node, "policy": policy, "configmaps": configmaps}


def _clean(obj: Dict[str, Any], name: Optional[str] = None) -> Dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
    if name:
        meta["name"] = name
    return dict({k: v for k, v in obj.items() if k != "metadata"}, metadata=meta)


def bench_static(nodes: int, template: Dict[str, Any], workdir: str, page_sizes: List[int]) -> Dict[str, Any]:
    """The API server alone, holding N nodes exactly as the converged template node (no controllers,
    no kubelets: what the modules read and write is the same; verification pods cannot run)."""
    lab_dir = os.path.join(workdir, "static%d" % nodes)
    os.makedirs(lab_dir)
    names = ["gpu-%04d" % i for i in range(nodes)]
    started = time.monotonic()
    lab = server.serve_in_thread(lab_dir, [], controllers=False)
    try:
        lab.store.create("v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}})
        for configmap in template["configmaps"]:
            lab.store.create("v1/configmaps", _clean(configmap))
        lab.store.create("nvidia.com/v1/clusterpolicies", _clean(template["policy"]), controller=True)
        for name in names:
            node = _clean(template["node"], name)
            node["metadata"]["labels"] = dict(node["metadata"].get("labels") or {}, **{"kubernetes.io/hostname": name})
            lab.store.create("v1/nodes", node, controller=True)
        config = {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "nodes": names}
        measurements = _measure_all(lab, names, config, lab_dir, pods=False)
        pages = list_pages(lab, page_sizes)
    finally:
        lab.stop()
    return dict(_row(nodes, "static", started, measurements), **({"list_pages": pages} if pages else {}))


def _table(results: List[Dict[str, Any]]) -> None:
    kinds = ["sharing_noop", "verify_no_pods", "verify_pods", "mig_node_config_noop"]
    header = ("nodes", "lab", "run", "requests", "lists", "gets", "writes", "wall s", "peak MB")
    rows = []
    for r in results:
        for kind in kinds:
            if kind in r:
                m = r[kind]
                rows.append((r["nodes"], r["lab"], kind, m["requests"], m["lists"], m["gets"], m["writes"], m["wall_s"], m["maxrss_mb"]))
        rows.append((r["nodes"], "-", "plan_fleet (pure)", "-", "-", "-", "-", r["plan_s"], "-"))
        rows.append((r["nodes"], "-", "plan_fleet (pure), 8 MIG GPUs per host", "-", "-", "-", "-", r["plan_mig_s"], "-"))
        for size, m in sorted((r.get("list_pages") or {}).items(), key=lambda item: int(item[0])):
            rows.append((r["nodes"], r["lab"], "node list, pages of %s (%s MB)" % (size, m["mb"]), m["server_requests"],
                         m["requests"], "-", "-", m["wall_s"], m["maxrss_mb"]))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    for row in [header] + rows:
        print("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="10,100,1000,5000", help="comma-separated node counts")
    parser.add_argument("--full-up-to", type=int, default=100,
                        help="the whole lab (verification pods run) up to this many nodes; the API server alone above")
    parser.add_argument("--page-sizes", default="", help="comma-separated page sizes: one node list at each "
                        "(API server alone only)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="gpufleet-bench-scale-") as workdir:
        template: Optional[Dict[str, Any]] = None
        for size in [int(x) for x in args.nodes.split(",") if x]:
            if size <= args.full_up_to:
                results.append(bench_full(size, workdir))
            else:
                template = template or _template(workdir)
                results.append(bench_static(size, template, workdir, [int(x) for x in args.page_sizes.split(",") if x]))
            print("measured %d nodes (setup %.0fs)" % (size, results[-1]["setup_s"]), flush=True)
    _table(results)
    text = json.dumps({"benchmark": "cluster_scale", "nproc": os.cpu_count(), "results": results}, indent=2, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
