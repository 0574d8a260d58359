"""The fleet plan of a varied sample is the same before and after the planning work was made once
per distinct input instead of once per host (issue 26 item 3).

``fleet_plan_sample.json`` was written by ``sample_plans()`` on the code before that change (commit
7f83ad9); regenerate it only for a deliberate change of the plans:
``.venv/bin/python tests/unit/plugins/module_utils/test_fleet_plan_sample.py --write``.
The sample covers host plans from GPU facts and a MIG selection (default and custom mig_configs, one
that does not parse, a name that is not there), planned GPU lists (valid and invalid MIG layouts, an
unknown model), nodes known only by their labels, the three MIG strategies, sharing configs of every
kind, an older device plugin, and repeated hosts (the same input on many nodes), so that a result
reused for a second host must still name that host.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet import _fleet_plan
from ansible_collections.gpufleet.sharing.plugins.module_utils.gpu._component_versions import resolve_device_plugin
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import parse_configs

SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fleet_plan_sample.json")
A100 = ("NVIDIA A100-SXM4-40GB", "0x20B010DE")
H100 = ("NVIDIA H100 80GB HBM3", "0x233010DE")
MIXED = {"inference-mixed": [{"device-filter": ["0x20B010DE", "0x20B110DE"], "devices": "all", "mig-enabled": True,
                              "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}]}


def facts(model, count, host, mig_on=False, instances=()):
    return [{"index": i, "name": model[0], "pci_device_id": model[1], "uuid": "GPU-%s-%d" % (host, i),
             "mig": {"capable": True, "current": mig_on, "pending": False,
                     "instances": [{"profile": p, "compute_instances": [{"profile": p}]} for p in instances]}}
            for i in range(count)]


def node_plans() -> List[Dict[str, Any]]:
    plans: List[Dict[str, Any]] = []
    for i in range(4):  # the same input on four hosts
        plans.append({"node": "a100-mixed-%d" % i, "gpu_facts": facts(A100, 8, i), "mig_config": "inference-mixed",
                      "mig_configs": MIXED})
        plans.append({"node": "h100-balanced-%d" % i, "gpu_facts": facts(H100, 2, i), "mig_config": "all-balanced"})
        plans.append({"node": "a100-off-%d" % i, "gpu_facts": facts(A100, 1, i, True, ("1g.5gb", "3g.20gb"))})
        plans.append({"node": "planned-%d" % i, "gpus": [{"model": "A100-40GB", "count": 2, "mig": {"3g.20gb": 2}},
                                                         {"model": "H100-80GB", "count": 1}]})
        plans.append({"node": "bad-layout-%d" % i, "gpus": [{"model": "A100-40GB", "mig": {"7g.40gb": 2}}]})
    plans += [
        {"node": "unknown-model", "gpus": [{"model": "Z9000", "count": 1}]},
        {"node": "bad-mig-configs", "gpu_facts": facts(A100, 1, 9), "mig_config": "x", "mig_configs": {"x": "not a list"}},
        {"node": "missing-config", "gpu_facts": facts(A100, 1, 9), "mig_config": "nope", "mig_configs": MIXED},
        {"node": "bad-count", "gpus": [{"model": "A100-40GB", "count": 0}]},
        {"node": "not-in-cluster", "gpus": [{"model": "H100-80GB", "count": 1}]},
    ]
    return plans


def configs(names: List[str]):
    return parse_configs([
        {"name": "mig-small", "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}],
         "nodes": [n for n in names if n.startswith(("a100-mixed-0", "a100-mixed-1", "planned-0", "bad-layout"))]},
        {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "rename_by_default": True,
         "nodes": [n for n in names if n.startswith(("h100-balanced-0", "labelled-0", "unknown-model", "bad-count"))]},
        {"name": "mps2", "strategy": "mps", "resources": [{"name": "nvidia.com/gpu", "replicas": 2}],
         "nodes": [n for n in names if n.startswith(("a100-off-0", "labelled-1"))]},
        {"name": "plain", "strategy": "none", "nodes": [n for n in names if n.startswith("a100-mixed-2")]},
    ], "plain")


def cluster_nodes() -> List[Dict[str, Any]]:
    names = [p["node"] for p in node_plans() if p["node"] != "not-in-cluster"]
    nodes = [{"metadata": {"name": n, "labels": {"nvidia.com/gpu.present": "true"}}} for n in names]
    for i in range(3):
        nodes.append({"metadata": {"name": "labelled-%d" % i, "labels": {
            "nvidia.com/gpu.count": "4", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.present": "true"}}})
    nodes.append({"metadata": {"name": "cpu-0", "labels": {}}})
    return nodes


def _plan_dict(plan: Any) -> Dict[str, Any]:
    nodes = {}
    for name, node in sorted(plan.nodes.items()):
        exp = node.expected
        nodes[name] = {
            "exists": node.exists, "config": node.config, "config_before": node.config_before, "labelled": node.labelled,
            "problems": list(node.problems),
            "expected": None if exp is None else dict(
                exp.as_dict(), records={k: repr(v) for k, v in sorted(exp.records.items())},
                known_mig_resources=sorted(exp.gpus.known_mig_resources) if exp.gpus and exp.gpus.known_mig_resources is not None else None,
                mig_gpus=exp.gpus.mig_gpus if exp.gpus else None)}
    return {"mig_strategy": plan.mig_strategy, "default_config": plan.default_config,
            "assignments": dict(sorted(plan.assignments.items())), "missing_planned": list(plan.missing_planned),
            "nodes": nodes}


def sample_plans() -> Dict[str, Any]:
    """The fleet plan of the sample under each MIG strategy, and with an older device plugin."""
    hosts = _fleet_plan.host_plans(node_plans(), {})
    listed = cluster_nodes()
    names = [n["metadata"]["name"] for n in listed]
    out = {}
    for label, strategy, plugin in (("mixed", "mixed", None), ("single", "single", None), ("per-node", None, None),
                                    ("mixed, device plugin v0.17.1", "mixed", resolve_device_plugin("v0.17.1", None, None))):
        policy = {"spec": {"mig": {"strategy": strategy} if strategy else {}}}
        view = _fleet_plan.ClusterView.read(listed, policy, ["ts4"])
        plan = _fleet_plan.plan_fleet(_fleet_plan.Intent(configs=configs(names), hosts=hosts, plugin=plugin), view)
        out[label] = _plan_dict(plan)
    return out


def test_the_sample_plans_as_before():
    with open(SAMPLE, encoding="utf-8") as handle:
        before = json.load(handle)
    assert json.loads(json.dumps(sample_plans())) == before


def test_planning_twice_gives_the_same_plans():
    """Whatever is kept between runs (a result reused for the same input) changes no plan."""
    assert sample_plans() == sample_plans()


def test_the_sample_covers_what_it_says():
    plans = sample_plans()["mixed"]["nodes"]
    problems = {name: n["problems"] for name, n in plans.items() if n["problems"]}
    assert {"bad-layout-0", "bad-layout-3", "unknown-model", "bad-mig-configs", "missing-config", "bad-count"} <= set(problems)
    assert all("'bad-layout-3'" in p for p in problems["bad-layout-3"])  # a repeated host's problem names that host
    assert plans["a100-mixed-3"]["expected"]["node"] == "a100-mixed-3"
    assert plans["a100-mixed-0"]["expected"]["resources"]["nvidia.com/mig-1g.5gb"] == 32
    assert plans["labelled-0"]["expected"]["resources"] == {"nvidia.com/gpu": 0, "nvidia.com/gpu.shared": 16}


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    with open(SAMPLE, "w", encoding="utf-8") as out_file:
        json.dump(sample_plans(), out_file, indent=1, sort_keys=True)
        out_file.write("\n")
