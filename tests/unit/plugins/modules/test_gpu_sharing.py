# -*- coding: utf-8 -*-
"""gpu_sharing against an in-memory API: validation, check mode, diff, restarts, idempotence, wait."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_k8s import FakeK8s, run  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpufleet.sharing.plugins.modules import gpu_sharing  # noqa: E402

CM = "gpufleet-device-plugin-config"
NS = "gpu-operator"


def cluster(mig_strategy=None):
    """None: the ClusterPolicy leaves the MIG strategy to each node's config (MPS8 is refused under mixed)."""
    fake = FakeK8s()
    fake.add("ClusterPolicy", "cluster-policy", spec={"mig": {"strategy": mig_strategy} if mig_strategy else {}, "devicePlugin": {}})
    for name, count in (("gpu-a", 8), ("gpu-b", 8), ("gpu-c", 2)):
        fake.add("Node", name, metadata={"name": name, "labels": {
            "nvidia.com/gpu.count": str(count), "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.replicas": "1", "pool": "train" if name == "gpu-c" else "infer"}},
            status={"capacity": {"nvidia.com/gpu": str(count)}, "allocatable": {"nvidia.com/gpu": str(count)}})
        fake.add("Pod", "nvidia-device-plugin-" + name, NS,
                 metadata={"name": "nvidia-device-plugin-" + name, "namespace": NS,
                           "labels": {"app": "nvidia-device-plugin-daemonset"}},
                 spec={"nodeName": name})
    fake.add("Node", "cpu-1", metadata={"name": "cpu-1", "labels": {}})
    return fake


TS4 = {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}], "nodes": ["gpu-a"]}
MPS = {"name": "mps8", "strategy": "mps", "resources": [{"name": "gpu", "replicas": 8}], "node_selector": "pool=train"}


def args(**extra):
    base = {"configs": [TS4, MPS], "wait": False}
    base.update(extra)
    return base


def test_first_run_writes_everything_and_restarts_changed_nodes(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_sharing, args(), fake, monkeypatch)
    assert not failed, result
    assert result["changed"] is True
    assert result["assignments"] == {"gpu-a": "ts4", "gpu-c": "mps8"}
    cm = fake.obj("ConfigMap", CM, NS)
    assert sorted(cm["data"]) == ["mps8", "ts4"]
    assert "replicas: 4" in cm["data"]["ts4"] and "mps:" in cm["data"]["mps8"]
    policy = fake.obj("ClusterPolicy", "cluster-policy")
    assert policy["spec"]["devicePlugin"]["config"] == {"name": CM}
    assert fake.obj("Node", "gpu-a")["metadata"]["labels"]["nvidia.com/device-plugin.config"] == "ts4"
    assert "nvidia.com/device-plugin.config" not in fake.obj("Node", "gpu-b")["metadata"]["labels"]
    # only the nodes whose config changed lose their plugin pod
    assert result["restarted"] == {"gpu-a": ["nvidia-device-plugin-gpu-a"], "gpu-c": ["nvidia-device-plugin-gpu-c"]}
    assert fake.obj("Pod", "nvidia-device-plugin-gpu-b", NS) is not None
    assert result["expected"]["gpu-a"]["resources"] == {"nvidia.com/gpu": 32}
    assert result["expected"]["gpu-c"]["resources"] == {"nvidia.com/gpu": 16}


def test_mps_under_a_mixed_clusterpolicy_is_refused_and_per_node_renders_each_strategy(monkeypatch):
    """The device plugin refuses MPS under mixed, and MIG_STRATEGY from the ClusterPolicy beats any
    flags.migStrategy (issue 25 part 2): refused, naming the config, nothing written."""
    fake = cluster(mig_strategy="mixed")
    result, failed = run(gpu_sharing, args(), fake, monkeypatch)
    assert failed and "sharing config 'mps8' on node 'gpu-c': shares with MPS" in result["msg"]
    assert "using --mig-strategy=mixed is not supported with MPS" in result["msg"] and fake.writes == []
    fake = cluster()  # the ClusterPolicy leaves the strategy to the nodes
    result, failed = run(gpu_sharing, args(), fake, monkeypatch)
    assert not failed, result
    data = fake.obj("ConfigMap", CM, NS)["data"]
    assert "  migStrategy: none\n" in data["mps8"] and "  migStrategy: mixed\n" in data["ts4"]
    assert result["expected"]["gpu-c"]["mig_strategy"] == "none" and result["expected"]["gpu-a"]["mig_strategy"] == "mixed"


def test_second_run_changes_nothing(monkeypatch):
    fake = cluster()
    run(gpu_sharing, args(), fake, monkeypatch)
    writes = len(fake.writes)
    result, failed = run(gpu_sharing, args(), fake, monkeypatch)
    assert not failed and result["changed"] is False
    assert result["restarted"] == {} and result["labels_changed"] == {} and result["cluster_policy_patch"] == {}
    assert len(fake.writes) == writes


def test_content_change_restarts_only_that_configs_nodes(monkeypatch):
    fake = cluster()
    run(gpu_sharing, args(), fake, monkeypatch)
    for name in ("gpu-a", "gpu-c"):
        fake.add("Pod", "plugin2-" + name, NS, metadata={"name": "plugin2-" + name, "namespace": NS,
                                                         "labels": {"app": "nvidia-device-plugin-daemonset"}},
                 spec={"nodeName": name})
    changed = dict(TS4, resources=[{"name": "nvidia.com/gpu", "replicas": 2}])
    result, failed = run(gpu_sharing, args(configs=[changed, MPS]), fake, monkeypatch)
    assert not failed and result["changed"]
    assert result["configmap"]["changed_keys"] == ["ts4"]
    assert result["restarted"] == {"gpu-a": ["plugin2-gpu-a"]}
    assert result["labels_changed"] == {}


def test_check_mode_changes_nothing_and_shows_the_diff(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_sharing, args(default_config="ts4"), fake, monkeypatch, check_mode=True, diff=True)
    assert not failed and result["changed"] is True
    assert fake.writes == []
    cm_diff, label_diff, policy_diff = result["diff"]
    assert cm_diff["before"] == "" and "ts4: |" in cm_diff["after"] and "replicas: 4" in cm_diff["after"]
    assert label_diff["before"] == "gpu-a: None\ngpu-c: None\n"
    assert label_diff["after"] == "gpu-a: ts4\ngpu-c: mps8\n"
    assert "default: ts4" in policy_diff["after"] and "name: %s" % CM in policy_diff["after"]
    assert result["cluster_policy_patch"] == {"spec": {"devicePlugin": {"config": {"name": CM, "default": "ts4"}}}}
    # the default config brings the unlabelled GPU node gpu-b into scope, not the CPU node
    assert sorted(result["expected"]) == ["gpu-a", "gpu-b", "gpu-c"]
    assert sorted(result["restarted"]) == ["gpu-a", "gpu-b", "gpu-c"]


@pytest.mark.parametrize("configs, words", [
    ([dict(TS4, resources=[{"name": "gpu", "replicas": 1}])], "replicas 1 means sharing off"),
    ([dict(TS4, version="v2")], "version must be v1"),
    ([dict(TS4, nodes=["ghost"])], "node 'ghost' does not exist"),
    ([TS4, dict(MPS, node_selector="pool=infer")], "selected by two sharing configs"),
    ([dict(TS4, resources=[{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}])], "is not a MIG profile of H100-80GB"),
])
def test_bad_input_fails_and_changes_nothing(monkeypatch, configs, words):
    fake = cluster()
    node_gpus = {"gpu-a": [{"model": "H100-80GB", "count": 8, "mig": {"1g.10gb": 7}}]}
    result, failed = run(gpu_sharing, args(configs=configs, node_gpus=node_gpus), fake, monkeypatch)
    assert failed and words in result["msg"], result["msg"]
    assert fake.writes == []


def test_mps_on_a_mig_node_is_refused(monkeypatch):
    fake = cluster()
    node_gpus = {"gpu-c": [{"model": "H100-80GB", "count": 2, "mig": {"3g.40gb": 2}}]}
    result, failed = run(gpu_sharing, args(node_gpus=node_gpus), fake, monkeypatch)
    assert failed and "sharing config 'mps8' on node 'gpu-c': MPS is not supported on MIG-enabled GPUs" in result["msg"]
    assert fake.writes == []


def test_mig_resources_need_mixed_strategy(monkeypatch):
    fake = cluster(mig_strategy="single")
    node_gpus = {"gpu-a": [{"model": "H100-80GB", "count": 8, "mig": {"1g.10gb": 7}}]}
    configs = [dict(TS4, resources=[{"name": "nvidia.com/mig-1g.10gb", "replicas": 2}])]
    result, failed = run(gpu_sharing, args(configs=configs, node_gpus=node_gpus), fake, monkeypatch)
    assert failed and "only be time-sliced with the mixed MIG strategy" in result["msg"]


def test_removing_a_config_still_in_use_is_refused(monkeypatch):
    fake = cluster()
    run(gpu_sharing, args(), fake, monkeypatch)
    writes = len(fake.writes)
    result, failed = run(gpu_sharing, args(configs=[TS4]), fake, monkeypatch)
    assert failed and "node 'gpu-c' uses config 'mps8'" in result["msg"]
    assert len(fake.writes) == writes


def test_no_or_many_cluster_policies(monkeypatch):
    fake = cluster()
    del fake.objects[("ClusterPolicy", None, "cluster-policy")]
    result, failed = run(gpu_sharing, args(), fake, monkeypatch)
    assert failed and "found 0 ClusterPolicies" in result["msg"]
    result, failed = run(gpu_sharing, args(cluster_policy_name="other"), fake, monkeypatch)
    assert failed and "ClusterPolicy other not found" in result["msg"]


def test_wait_times_out_naming_what_is_missing(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_sharing, args(wait=True, wait_timeout=4, wait_interval=2), fake, monkeypatch)
    assert failed
    assert "timed out after 4s waiting for 2 node(s)" in result["msg"]
    assert "gpu-a: capacity nvidia.com/gpu is 8, the plan says 32" in result["msg"]
    assert result["wait"]["progress"][0].startswith("0s: waiting for 2 node(s): gpu-a capacity nvidia.com/gpu is 8")


def test_wait_returns_when_nodes_match(monkeypatch):
    fake = cluster()
    run(gpu_sharing, args(configs=[dict(TS4, resources=[{"name": "gpu", "replicas": 2}])]), fake, monkeypatch)
    node = fake.obj("Node", "gpu-a")
    node["status"] = {"capacity": {"nvidia.com/gpu": "16"}, "allocatable": {"nvidia.com/gpu": "16"}}
    node["metadata"]["labels"].update({"nvidia.com/gpu.replicas": "2", "nvidia.com/gpu.sharing-strategy": "time-slicing",
                                       "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
                                       "nvidia.com/mps.capable": "false", "nvidia.com/mig.strategy": "mixed"})
    configs = [dict(TS4, resources=[{"name": "gpu", "replicas": 2}])]
    result, failed = run(gpu_sharing, args(configs=configs, wait=True), fake, monkeypatch)
    assert not failed, result["msg"] if failed else None
    assert result["changed"] is False and result["wait"]["nodes"] == ["gpu-a"] and result["wait"]["waited"] == 0


def test_node_configs_from_the_inventory(monkeypatch):
    fake = cluster()
    ts = {"name": "ts4", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}
    result, failed = run(gpu_sharing, {"node_configs": {"gpu-a": ts, "gpu-b": ts}, "wait": False}, fake, monkeypatch)
    assert not failed, result["msg"] if failed else None
    assert result["assignments"] == {"gpu-a": "ts4", "gpu-b": "ts4"}
    bad = dict(ts, resources=[{"name": "nvidia.com/gpu", "replicas": 2}])
    writes = len(fake.writes)
    result, failed = run(gpu_sharing, {"node_configs": {"gpu-a": ts, "gpu-b": bad}, "wait": False}, fake, monkeypatch)
    assert failed and "node 'gpu-b': sharing config 'ts4' differs from the one given by node 'gpu-a'" in result["msg"]
    assert len(fake.writes) == writes


def test_switching_from_another_configmap_protects_its_users(monkeypatch):
    fake = cluster()
    fake.obj("ClusterPolicy", "cluster-policy")["spec"]["devicePlugin"] = {"config": {"name": "theirs"}}
    fake.add("ConfigMap", "theirs", NS, data={"old-ts": "version: v1\n"})
    fake.obj("Node", "gpu-b")["metadata"]["labels"]["nvidia.com/device-plugin.config"] = "old-ts"
    result, failed = run(gpu_sharing, args(), fake, monkeypatch)
    assert failed and "node 'gpu-b' uses config 'old-ts' (label nvidia.com/device-plugin.config, ConfigMap theirs)" in result["msg"]
    assert fake.writes == []
    result, failed = run(gpu_sharing, args(configs=[dict(TS4, nodes=["gpu-a", "gpu-b"]), MPS]), fake, monkeypatch)
    assert not failed, result["msg"] if failed else None
    assert result["cluster_policy_patch"] == {"spec": {"devicePlugin": {"config": {"name": CM}}}}
    assert result["labels_changed"]["gpu-b"] == {"before": "old-ts", "after": "ts4"}


def test_no_configs_leaves_the_cluster_alone(monkeypatch):
    fake = cluster()
    result, failed = run(gpu_sharing, {"configs": [], "wait": False}, fake, monkeypatch)
    assert not failed and result["changed"] is False and fake.writes == []
    assert result["msg"] == "no sharing configs given; nothing to do"
