"""gpu_sharing and gpu_verify against the lab's virtual GPU cluster (real API server, real modules).

Nodes: two H100 nodes time-sliced 4 ways, one H200 node with MPS, one A100-40GB node with MIG
(all-balanced, mixed strategy) whose small slices are time-sliced. The modules run as Ansible runs
them (a subprocess with an args file) and talk HTTPS to the lab's API server with its kubeconfig;
the lab computes what each node advertises independently of the collection's code.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

import pytest
from kubernetes import client, config as kconfig

from labtools import run_module, serve_lab, wait_until

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")

H100 = "NVIDIA H100 80GB HBM3"
TS4 = {"name": "h100-ts4", "strategy": "time-slicing", "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
       "nodes": ["ts-1", "ts-2"]}
MPS3 = {"name": "h200-mps3", "strategy": "mps", "resources": [{"name": "nvidia.com/gpu", "replicas": 3}],
        "node_selector": {"pool": "notebooks"}}
MIG_FINE = {"name": "a100-small-shared", "mig_strategy": "mixed",
            "resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}, {"name": "nvidia.com/mig-2g.10gb", "replicas": 3}],
            "nodes": ["mig-1"]}
CONFIGS = [TS4, MPS3, MIG_FINE]
NODE_GPUS = {
    "ts-1": [{"model": "H100-80GB", "count": 2, "product": H100}],
    "ts-2": [{"model": "H100-80GB", "count": 2, "product": H100}],
    "mps-1": [{"model": "H200", "count": 1, "product": "NVIDIA H200"}],
    "mig-1": [{"model": "A100-40GB", "count": 1, "mig": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}}],
}


def start_lab(lab_dir: str, hosts: List[Tuple[str, str, int]]) -> Any:
    """Start the lab API server with controllers in this process; hosts are (name, model, gpus)."""
    return serve_lab(lab_dir, hosts)[0]


def store_get(lab: Any, path: str) -> Optional[Dict[str, Any]]:
    """GET a path of the lab API with its token (counted in /lab/metrics: reset before module runs)."""
    context = ssl.create_default_context(cafile=lab.ca_file)
    request = urllib.request.Request(lab.url + path, headers={"Authorization": "Bearer %s" % lab.token})
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:  # noqa: S310 (loopback lab)
            return json.loads(response.read().decode())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def install_operator(lab: Any, mig_strategy: str = "") -> None:
    """The GPU Operator as the gpu_operator module would leave it: namespace + ClusterPolicy, ready.
    "" (the chart renders no spec.mig.strategy): each node's config gives its strategy, as the
    MPS groups need (the device plugin refuses MPS under mixed; issue 25 part 2)."""
    api = kconfig.new_client_from_config(config_file=lab.kubeconfig)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": "gpu-operator"}})
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"mig": {"strategy": mig_strategy} if mig_strategy else {}, "migManager": {"enabled": True}}})
    wait_until("ClusterPolicy ready", lambda: (custom.get_cluster_custom_object(
        "nvidia.com", "v1", "clusterpolicies", "cluster-policy").get("status") or {}).get("state") == "ready", timeout=60)


def metrics(lab: Any) -> Dict[str, int]:
    return dict(lab.api.metrics.snapshot()["requests"])


def writes(counts: Dict[str, int]) -> Dict[str, int]:
    return {key: value for key, value in counts.items() if key.split(" ")[0] in WRITE_VERBS}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("sharing"))
    running = start_lab(lab_dir, [("ts-1", "H100-80GB", 2), ("ts-2", "H100-80GB", 2), ("mps-1", "H200", 1),
                                  ("mig-1", "A100-40GB", 1)])
    running.tmp = lab_dir
    try:
        install_operator(running)
        core = client.CoreV1Api(kconfig.new_client_from_config(config_file=running.kubeconfig))
        core.patch_node("mps-1", {"metadata": {"labels": {"pool": "notebooks"}}})
        core.patch_node("mig-1", {"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}})
        # per node and no config yet: mig-1's plugin runs with the default strategy none until its
        # config (MIG_FINE, flags.migStrategy mixed) is written
        wait_until("MIG all-balanced on mig-1", lambda: core.read_node("mig-1").metadata.labels.get(
            "nvidia.com/mig.config.state") == "success" and core.read_node("mig-1").metadata.labels.get(
            "nvidia.com/gpu.replicas") == "1", timeout=60)
        yield running
    finally:
        running.stop()


def auth(lab: Any) -> Dict[str, Any]:
    return {"kubeconfig": lab.kubeconfig}


def sharing_args(lab: Any, **extra: Any) -> Dict[str, Any]:
    args = dict(auth(lab), configs=CONFIGS, node_gpus=NODE_GPUS, wait_timeout=60, wait_interval=0.5)
    args.update(extra)
    return args


def verify_args(lab: Any, **extra: Any) -> Dict[str, Any]:
    args = dict(auth(lab), configs=CONFIGS, node_gpus=NODE_GPUS, pod_timeout=30, poll_interval=0.3,
                pod_image="nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04", junit=True)
    args.update(extra)
    return args


# ---------------------------------------------------------------------------------------------
# The tests run in file order: bad input, check mode, apply, idempotence, verify green/red.


def test_bad_input_changes_nothing(lab):
    lab.api.metrics.reset()
    bad = [dict(TS4, resources=[{"name": "nvidia.com/gpu", "replicas": 1}]), MPS3]
    result = run_module("gpu_sharing", sharing_args(lab, configs=bad), lab.tmp)
    assert result.get("failed") and "replicas 1 means sharing off" in result["msg"]
    mps_on_mig = [dict(MPS3, node_selector=None, nodes=["mig-1"])]
    result = run_module("gpu_sharing", sharing_args(lab, configs=mps_on_mig), lab.tmp)
    assert result.get("failed")
    assert "sharing config 'h200-mps3' on node 'mig-1': MPS is not supported on MIG-enabled GPUs" in result["msg"]
    wrong_profile = [dict(MIG_FINE, resources=[{"name": "nvidia.com/mig-1g.12gb", "replicas": 2}])]
    result = run_module("gpu_sharing", sharing_args(lab, configs=wrong_profile), lab.tmp)
    assert result.get("failed") and "nvidia.com/mig-1g.12gb is not a MIG profile of A100-40GB" in result["msg"]
    assert writes(metrics(lab)) == {}


def test_device_plugin_release_rules_refuse_before_v0_20_and_change_nothing(lab):
    """docs/reference/specs.md §9.8-§9.11: chart v26.3.3 runs device plugin v0.19.3, which always
    refuses MPS requests > 1 and has no allocation policy; a version that does not parse is named."""
    lab.api.metrics.reset()
    mps_any = [TS4, dict(MPS3, fail_requests_greater_than_one=False), MIG_FINE]
    result = run_module("gpu_sharing", sharing_args(lab, configs=mps_any, operator_version="v26.3.3"), lab.tmp)
    assert result.get("failed") and "the plugin always enforces it" in result["msg"]
    assert "device plugin v0.19.3 (option operator_version: chart v26.3.3 deploys it)" in result["msg"]
    packed = [dict(TS4, shared_devices_allocation_policy="packed"), MPS3, MIG_FINE]
    result = run_module("gpu_sharing", sharing_args(lab, configs=packed, device_plugin_version="v0.19.3"), lab.tmp)
    assert result.get("failed") and "shared_devices_allocation_policy needs device plugin v0.20.0" in result["msg"]
    result = run_module("gpu_sharing", sharing_args(lab, operator_version="26.7"), lab.tmp)
    assert result.get("failed") and "'26.7' does not parse" in result["msg"]
    result = run_module("gpu_verify", verify_args(lab, device_plugin_version="latest", pods=False), lab.tmp)
    assert result.get("failed") and "'latest' does not parse" in result["msg"]
    assert writes(metrics(lab)) == {}
    planned = run_module("gpu_sharing", sharing_args(lab, configs=mps_any), lab.tmp, check_mode=True)
    assert not planned.get("failed"), planned.get("msg")
    assert planned["device_plugin"] == {"version": "v0.20.0", "source": "default chart v26.7.0 deploys it"}
    newer = run_module("gpu_sharing", sharing_args(lab, configs=mps_any, operator_version="v26.7.1"), lab.tmp,
                       check_mode=True)  # no such chart (yet): it says what it assumes (issue 25 §4)
    assert not newer.get("failed") and "assuming device plugin v0.20.0, as chart v26.7.0 deploys" in newer["device_plugin"]["assumed"]
    assert any(newer["device_plugin"]["assumed"] in str(w) for w in newer["warnings"])
    assert "failRequestsGreaterThanOne: false" in planned["rendered"]["h200-mps3"]


def test_check_mode_changes_nothing_and_shows_the_plan(lab):
    before = {name: store_get(lab, "/api/v1/nodes/%s" % name)["metadata"]["labels"] for name in NODE_GPUS}
    node_rvs = {name: store_get(lab, "/api/v1/nodes/%s" % name)["metadata"]["resourceVersion"] for name in NODE_GPUS}
    policy_rv = store_get(lab, "/apis/nvidia.com/v1/clusterpolicies/cluster-policy")["metadata"]["resourceVersion"]
    lab.api.metrics.reset()
    result = run_module("gpu_sharing", sharing_args(lab), lab.tmp, check_mode=True, diff=True)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    # The one check-mode rule (docs/design-rules.md): the planned writes go to the API server as dry
    # runs, so they are validated there, and nothing is stored.
    assert writes(metrics(lab)), "check mode sent no dry-run write"
    assert {name: store_get(lab, "/api/v1/nodes/%s" % name)["metadata"]["resourceVersion"]
            for name in NODE_GPUS} == node_rvs
    assert store_get(lab, "/api/v1/namespaces/gpu-operator/configmaps/gpufleet-device-plugin-config") is None
    assert store_get(lab, "/apis/nvidia.com/v1/clusterpolicies/cluster-policy")["metadata"]["resourceVersion"] == policy_rv
    for name, labels in before.items():
        assert "nvidia.com/device-plugin.config" not in labels
        assert "nvidia.com/device-plugin.config" not in store_get(lab, "/api/v1/nodes/%s" % name)["metadata"]["labels"]
    assert result["labels_changed"] == {"ts-1": {"before": None, "after": "h100-ts4"}, "ts-2": {"before": None, "after": "h100-ts4"},
                                        "mps-1": {"before": None, "after": "h200-mps3"},
                                        "mig-1": {"before": None, "after": "a100-small-shared"}}
    assert "h100-ts4: |" in result["diff"][0]["after"]
    assert result["expected"]["ts-1"]["resources"] == {"nvidia.com/gpu": 8}
    assert result["expected"]["mig-1"]["resources"] == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.5gb": 4,
                                                        "nvidia.com/mig-2g.10gb": 3, "nvidia.com/mig-3g.20gb": 1}


def test_apply_waits_until_nodes_advertise_the_plan(lab):
    result = run_module("gpu_sharing", sharing_args(lab), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    assert sorted(result["restarted"]) == ["mig-1", "mps-1", "ts-1", "ts-2"]
    assert result["wait"]["nodes"] == ["mig-1", "mps-1", "ts-1", "ts-2"]
    for name, want in (("ts-1", {"nvidia.com/gpu": "8"}), ("mps-1", {"nvidia.com/gpu": "3"}),
                       ("mig-1", {"nvidia.com/mig-1g.5gb": "4", "nvidia.com/mig-2g.10gb": "3", "nvidia.com/mig-3g.20gb": "1"})):
        node = store_get(lab, "/api/v1/nodes/%s" % name)
        for resource, count in want.items():
            assert node["status"]["capacity"][resource] == count, (name, resource, node["status"]["capacity"])
    labels = store_get(lab, "/api/v1/nodes/ts-1")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert store_get(lab, "/api/v1/nodes/mps-1")["metadata"]["labels"]["nvidia.com/gpu.sharing-strategy"] == "mps"
    policy = store_get(lab, "/apis/nvidia.com/v1/clusterpolicies/cluster-policy")
    assert policy["spec"]["devicePlugin"]["config"]["name"] == "gpufleet-device-plugin-config"


def test_second_run_changes_nothing(lab):
    lab.api.metrics.reset()
    result = run_module("gpu_sharing", sharing_args(lab), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is False and result["restarted"] == {}
    counts = metrics(lab)
    assert writes(counts) == {}
    # nothing written: the wait judges the plan's own node list (issue 26 item 3), one list per run
    assert counts.get("list v1/nodes") == 1 and result["wait"]["waited"] == 0


def test_verify_green_with_pods(lab):
    lab.api.metrics.reset()
    result = run_module("gpu_verify", verify_args(lab), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    assert result["ok"] is True
    pods = result["report"]["pods"]
    assert sorted((p["node"], p["resource"]) for p in pods) == [
        ("mig-1", "nvidia.com/mig-1g.5gb"), ("mig-1", "nvidia.com/mig-2g.10gb"), ("mig-1", "nvidia.com/mig-3g.20gb"),
        ("mps-1", "nvidia.com/gpu"), ("ts-1", "nvidia.com/gpu"), ("ts-2", "nvidia.com/gpu")]
    assert all(p["outcome"] == "Succeeded" and p["ok"] for p in pods)
    assert "MIG 2g.10gb" in next(p["log"] for p in pods if p["resource"] == "nvidia.com/mig-2g.10gb")
    counts = metrics(lab)
    assert counts.get("create v1/pods") == len(pods)
    assert counts.get("deletecollection v1/pods") == 1
    assert sum(v for k, v in counts.items() if k.startswith("list ")) <= 4 + 30 / 0.3  # nodes, policy, pod polls
    remaining = store_get(lab, "/api/v1/namespaces/gpufleet-verify/pods")["items"]
    assert [p for p in remaining if not (p["metadata"].get("deletionTimestamp"))] == []
    namespace = store_get(lab, "/api/v1/namespaces/gpufleet-verify")
    assert namespace["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpufleet.sharing"
    table = result["report_table"].splitlines()
    assert table[0].split()[:2] == ["NODE", "RESULT"] and table[-1].startswith("PASSED")
    assert "<testsuites" in result["report_junit"]


def test_verify_from_the_cluster_without_a_plan(lab):
    result = run_module("gpu_verify", dict(auth(lab), pods=False), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    nodes = {n["node"]: n for n in result["report"]["nodes"]}
    assert nodes["ts-2"]["config"] == "h100-ts4" and nodes["ts-2"]["resources"] == {"nvidia.com/gpu": 8}


def test_verify_reports_a_mismatch_red(lab):
    wrong_plan = [dict(TS4, resources=[{"name": "nvidia.com/gpu", "replicas": 8}]), MPS3, MIG_FINE]
    result = run_module("gpu_verify", verify_args(lab, configs=wrong_plan, nodes=["ts-1"], fail_on_mismatch=False), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    assert result["ok"] is False
    failed = [c for c in result["report"]["checks"] if not c["ok"]]
    assert {(c["kind"], c["name"], c["expected"], c["actual"]) for c in failed} >= {
        ("capacity", "nvidia.com/gpu", "16", "8"), ("label", "nvidia.com/gpu.replicas", "8", "4")}
    assert "ts-1" in result["report_table"] and "FAIL" in result["report_table"]
    failing = run_module("gpu_verify", verify_args(lab, configs=wrong_plan, nodes=["ts-1"], pods=False), lab.tmp)
    assert failing.get("failed") and "capacity nvidia.com/gpu is 8, the plan says 16" in failing["msg"]


def test_verify_reports_a_config_that_differs_from_the_plan(lab):
    """docs/reference/specs.md §9.11: a planned allocation policy the ConfigMap does not hold is red."""
    packed = [dict(TS4, shared_devices_allocation_policy="packed"), MPS3, MIG_FINE]
    result = run_module("gpu_verify", verify_args(lab, configs=packed, pods=False, fail_on_mismatch=False), lab.tmp)
    red = [c for c in result["report"]["checks"] if not c["ok"]]
    assert [(c["kind"], c["name"]) for c in red] == [("config", "h100-ts4")], red
    assert "shared_devices_allocation_policy is None, the plan says 'packed'" in red[0]["message"]


def test_verify_pending_pod_times_out_with_the_scheduler_reason(lab):
    # A layout the node does not have (4g.20gb instead of 3g.20gb) beside the profiles its sharing
    # config shares (a config sharing nothing the plan has is refused as a plan problem).
    plan = dict(NODE_GPUS, **{"mig-1": [{"model": "A100-40GB", "mig": {"1g.5gb": 1, "2g.10gb": 1, "4g.20gb": 1}}]})
    result = run_module("gpu_verify", verify_args(lab, node_gpus=plan, nodes=["mig-1"], pod_timeout=3,
                                                  fail_on_mismatch=False), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    pod = next(p for p in result["report"]["pods"] if p["resource"] == "nvidia.com/mig-4g.20gb")
    assert pod["outcome"] == "Timeout"
    assert pod["reason"].startswith("FailedScheduling: 0/4 nodes are available"), pod["reason"]
    assert "Insufficient nvidia.com/mig-4g.20gb" in pod["reason"]
    remaining = store_get(lab, "/api/v1/namespaces/gpufleet-verify/pods")["items"]
    assert [p for p in remaining if not p["metadata"].get("deletionTimestamp")] == []


def test_verify_check_mode_runs_no_pods(lab):
    lab.api.metrics.reset()
    result = run_module("gpu_verify", verify_args(lab), lab.tmp, check_mode=True)
    assert not result.get("failed") and result["ok"] and result["report"]["pods"] == []
    assert writes(metrics(lab)) == {}


def test_content_change_restarts_only_that_group(lab):
    changed = [dict(TS4, resources=[{"name": "nvidia.com/gpu", "replicas": 2}]), MPS3, MIG_FINE]
    result = run_module("gpu_sharing", sharing_args(lab, configs=changed), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    assert result["configmap"]["changed_keys"] == ["h100-ts4"]
    assert sorted(result["restarted"]) == ["ts-1", "ts-2"]
    assert store_get(lab, "/api/v1/nodes/ts-2")["status"]["capacity"]["nvidia.com/gpu"] == "4"
    again = run_module("gpu_sharing", sharing_args(lab, configs=changed), lab.tmp)
    assert again["changed"] is False
