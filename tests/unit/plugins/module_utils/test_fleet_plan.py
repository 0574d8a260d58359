# -*- coding: utf-8 -*-
"""The fleet plan: per-host plans, MIG strategy, scope and config in force, expectations."""

from __future__ import annotations

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.fleet import _fleet_plan as f
from ansible_collections.gpufleet.sharing.plugins.module_utils.sharing._sharing import CONFIG_LABEL, SharingError, parse_configs

H100 = "NVIDIA H100 80GB HBM3"
TS4 = {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "nodes": ["gpu-a"]}
TS2 = {"name": "ts2", "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}


def gpu_labels(count=8, **extra):
    labels = {"nvidia.com/gpu.count": str(count), "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    labels.update(extra)
    return labels


def node(name, labels):
    return {"metadata": {"name": name, "labels": labels}}


def policy(strategy="mixed", default=None, configmap=None):
    spec = {"devicePlugin": {"config": {"name": configmap, "default": default}}}
    if strategy:
        spec["mig"] = {"strategy": strategy}
    return {"metadata": {"name": "cluster-policy"}, "spec": spec}


def cluster(pol=None, live=(), **labels):
    nodes = [node(n, lab) for n, lab in sorted(labels.items())]
    return f.ClusterView.read(nodes, pol, live)


def h100_fact(index, mig=None):
    instances = [{"profile": p, "compute_instances": [{"profile": p}]} for p, n in (mig or {}).items() for _i in range(n)]
    return {"index": index, "name": H100, "pci_device_id": "0x233010DE",
            "mig": {"capable": True, "current": bool(mig), "pending": bool(mig), "instances": instances}}


def test_host_plan_shapes():
    assert f.host_plan("n", [{"count": 2}]).planned_gpus() == [{"count": 2}]
    assert f.host_plan("n", {"gpus": [{"count": 3}]}).planned_gpus() == [{"count": 3}]
    assert f.host_plan("n", None).planned_gpus() is None
    with pytest.raises(SharingError, match="must be a list"):
        f.host_plan("n", "8xH100")
    plans = f.host_plans([{"node": "a", "gpus": [{"count": 1}]}], {"b": "8xH100", "a": [{"count": 2}]})
    assert plans["a"].planned_gpus() == [{"count": 2}]  # node_gpus wins
    with pytest.raises(SharingError, match="node 'b': the GPU plan must be a list"):
        plans["b"].planned_gpus()


def test_no_mig_config_means_mig_off():
    facts = [h100_fact(0, {"1g.10gb": 7})]
    for entry in ({"gpu_facts": facts}, {"gpu_facts": facts, "mig_config": ""}, {"gpu_facts": facts, "mig_config": None}):
        plan = f.host_plan("n", entry)
        assert plan.mig_config == f.DEFAULT_MIG_CONFIG == "all-disabled"
        assert [g.get("mig") for g in plan.planned_gpus()] == [None]
    plan = f.host_plan("n", {"gpu_facts": facts, "mig_config": "all-3g.40gb"})
    assert [g.get("mig") for g in plan.planned_gpus()] == [{"3g.40gb": 2}]


def test_read_intent_merges_node_configs_from_plans():
    plans, raw = f.read_intent({"configs": None, "node_configs": {},
                                "node_plans": [{"node": "a", "sharing_config": TS2}], "node_gpus": {}})
    assert raw == [dict(TS2, nodes=["a"])] and set(plans) == {"a"}
    _plans, raw = f.read_intent({"configs": None, "node_configs": {}, "node_plans": [], "node_gpus": {}})
    assert raw is None


@pytest.mark.parametrize("intent, pol, expected", [
    (None, policy("mixed"), "mixed"),
    (None, policy(None), None),       # unset: no MIG_STRATEGY, each node's config decides (issue 25)
    (None, None, None),               # no ClusterPolicy at all: the same
    ("single", policy("mixed"), "single"),
])
def test_one_mig_strategy_rule(intent, pol, expected):
    assert f.mig_strategy_of(f.Intent(mig_strategy=intent), cluster(pol)) == expected


def test_governed_scope_and_configs_in_force():
    configs = parse_configs([TS4, TS2], "ts2")
    view = cluster(policy(), ("old",), **{"gpu-a": gpu_labels(), "gpu-b": gpu_labels(),
                                          "gpu-c": gpu_labels(**{CONFIG_LABEL: "old"}), "cpu-1": {}})
    plan = f.plan_fleet(f.Intent(configs, "ts2", scope=f.SCOPE_GOVERNED), view)
    assert plan.assignments == {"gpu-a": "ts4"}
    # selected nodes, and unlabelled GPU nodes because a default is set; not the CPU node, not gpu-c
    assert sorted(plan.nodes) == ["gpu-a", "gpu-b"]
    assert (plan.nodes["gpu-a"].config, plan.nodes["gpu-a"].labelled) == ("ts4", True)
    assert (plan.nodes["gpu-b"].config, plan.nodes["gpu-b"].labelled) == ("ts2", False)
    assert plan.expectations["gpu-a"].resources == {"nvidia.com/gpu": 32}
    assert plan.nodes["gpu-b"].config_before is None
    assert f.removal_problems(plan, view, ["ts4", "ts2"])[0].startswith("node 'gpu-c' uses config 'old'")
    no_default = f.plan_fleet(f.Intent(parse_configs([TS4]), scope=f.SCOPE_GOVERNED), view)
    assert sorted(no_default.nodes) == ["gpu-a"]


def test_fleet_and_explicit_scope():
    configs = parse_configs([TS4, TS2])
    view = cluster(policy(), **{"gpu-a": gpu_labels(), "gpu-b": gpu_labels(**{CONFIG_LABEL: "ts2"}), "cpu-1": {}})
    hosts = f.host_plans([], {"ghost": [{"count": 1}]})
    plan = f.plan_fleet(f.Intent(configs, hosts=hosts), view)
    assert sorted(plan.nodes) == ["ghost", "gpu-a", "gpu-b"] and not plan.nodes["ghost"].exists
    assert plan.missing_planned == ("ghost",)
    # a label naming a config of the plan is the config in force, as the device plugin does
    assert (plan.nodes["gpu-b"].config, plan.nodes["gpu-b"].labelled) == ("ts2", True)
    explicit = f.plan_fleet(f.Intent(configs, nodes=("gpu-b", "cpu-1")), view)
    assert sorted(explicit.nodes) == ["cpu-1", "gpu-b"]
    assert "no nvidia.com/gpu.count label" in explicit.nodes["cpu-1"].problems[0]
    with pytest.raises(SharingError, match="node 'nope' does not exist"):
        f.plan_fleet(f.Intent(parse_configs([dict(TS2, nodes=["nope"])])), view)


def test_host_plan_gives_the_mig_layout():
    facts = [h100_fact(0), h100_fact(1)]
    hosts = f.host_plans([{"node": "gpu-a", "gpu_facts": facts, "mig_config": "all-1g.10gb", "mig_configs": {}}], {})
    plan = f.plan_fleet(f.Intent(hosts=hosts), cluster(policy("mixed"), **{"gpu-a": gpu_labels(2)}))
    assert plan.expectations["gpu-a"].resources == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 14}
