"""gpu_quotas against the lab's virtual GPU cluster (Kueue's CRDs served by the lab, real module).

Nodes: h1 with two H100-80GB in all-1g.10gb (14 x nvidia.com/mig-1g.10gb), a1 with one A100-40GB in
all-1g.5gb (7 x nvidia.com/mig-1g.5gb), MIG strategy mixed. Two teams share them. The tests run in
file order: bad input, refusal, check mode, apply, re-run, proof, a MIG change with shrink-then-grow.
"""

from __future__ import annotations

from typing import Any, Dict

import pytest
from kubernetes import client, config as kconfig

from gpulab.cluster import kueue_admission, kueue_pod, server
from labtools import run_module, wait_until
from test_cluster_modules_sharing import auth, install_operator, metrics, start_lab, store_get, writes

H100_MIG1 = "nvidia.com/mig-1g.10gb"
A100_MIG1 = "nvidia.com/mig-1g.5gb"
H100_MIG3 = "nvidia.com/mig-3g.40gb"
H100_FLAVOR = "gpufleet-nvidia-h100-80gb-hbm3"
A100_FLAVOR = "gpufleet-nvidia-a100-sxm4-40gb"
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
VISION = {"name": "vision", "namespaces": ["vision-train", "vision-dev"], "cohort": "research", "borrowing_limit": 2,
          "shares": {H100_MIG1: "50%", A100_MIG1: 3, H100_MIG3: "50%"}}
NLP = {"name": "nlp", "namespaces": ["nlp"], "shares": {H100_MIG1: 0.25, A100_MIG1: "50%", H100_MIG3: "50%"}}
TEAMS = [VISION, NLP]


def gpus(h1_layout: Dict[str, int]) -> Dict[str, Any]:
    return {"h1": [{"model": "H100-80GB", "count": 2, "mig": h1_layout}],
            "a1": [{"model": "A100-40GB", "count": 1, "mig": {"1g.5gb": 7}}]}


def args(lab: Any, **extra: Any) -> Dict[str, Any]:
    result = dict(auth(lab), teams=TEAMS, node_gpus=gpus({"1g.10gb": 7}), mig_strategy="mixed")
    result.update(extra)
    return result


def set_layout(lab: Any, node: str, config: str) -> None:
    core = client.CoreV1Api(kconfig.new_client_from_config(config_file=lab.kubeconfig))
    core.patch_node(node, {"metadata": {"labels": {"nvidia.com/mig.config": config}}})
    wait_until("MIG %s on %s" % (config, node), lambda: core.read_node(node).metadata.labels.get(
        "nvidia.com/mig.config.state") == "success" and core.read_node(node).metadata.labels.get(
        "nvidia.com/mig.config") == config, timeout=60)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("quotas"))
    running = start_lab(lab_dir, [("h1", "H100-80GB", 2), ("a1", "A100-40GB", 1)])
    running.tmp = lab_dir
    try:
        install_operator(running, "mixed")
        set_layout(running, "h1", "all-1g.10gb")
        set_layout(running, "a1", "all-1g.5gb")
        wait_until("h1 advertises 14", lambda: (store_get(running, "/api/v1/nodes/h1")["status"].get("allocatable") or {})
                   .get(H100_MIG1) == "14", timeout=60)
        yield running
    finally:
        running.stop()


def quota_of(lab: Any, team: str) -> Dict[str, Dict[str, int]]:
    cq = store_get(lab, KUEUE + "/clusterqueues/" + team)
    return {f["name"]: {r["name"]: int(r["nominalQuota"]) for r in f["resources"]}
            for g in cq["spec"]["resourceGroups"] for f in g["flavors"] if f["name"].startswith("gpufleet-")}


def test_bad_input_names_team_resource_reason_and_changes_nothing(lab):
    lab.api.metrics.reset()
    bad = [dict(VISION, namespaces=["Vision_Train"]), dict(NLP, shares={"nvidia.com/tpu": 1})]
    result = run_module("gpu_quotas", args(lab, teams=bad), lab.tmp)
    assert result.get("failed")
    assert "gpufleet_teams[0] (team 'vision'): namespace 'Vision_Train' is not a DNS label" in result["msg"]
    assert "gpufleet_teams[1] (team 'nlp'): resource 'nvidia.com/tpu': unknown resource" in result["msg"]
    # Issue 43 (4): a profile no GPU of the fleet has (H100-80GB, A100-40GB) was accepted and the queue written empty.
    result = run_module("gpu_quotas", args(lab, teams=[dict(NLP, shares={"nvidia.com/mig-9g.99gb": 2})]), lab.tmp)
    assert result.get("failed") and result["msg"] == (
        "invalid gpufleet_teams: gpufleet_teams (team 'nlp'): resource nvidia.com/mig-9g.99gb: no GPU of the fleet has "
        "MIG profile 9g.99gb (the fleet's MIG-capable models: A100-40GB, H100-80GB)")
    greedy = [dict(VISION, shares={A100_MIG1: 5}), dict(NLP, shares={A100_MIG1: "50%"})]
    result = run_module("gpu_quotas", args(lab, teams=greedy), lab.tmp)
    assert result.get("failed") and ("resource nvidia.com/mig-1g.5gb, flavor %s: the teams' quotas add up to 8 "
                                     "(vision 5, nlp 3), the nodes advertise 7" % A100_FLAVOR) in result["msg"]
    result = run_module("gpu_quotas", args(lab, teams=greedy, overcommit=True), lab.tmp, check_mode=True)
    assert result.get("failed") and "team vision: namespace vision-train does not exist" in result["msg"]
    assert writes(metrics(lab)) == {}


def test_objects_it_did_not_create_are_refused_by_name(lab):
    custom = client.CustomObjectsApi(kconfig.new_client_from_config(config_file=lab.kubeconfig))
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "nlp"}, "spec": {}})
    lab.api.metrics.reset()
    result = run_module("gpu_quotas", args(lab), lab.tmp)
    assert result.get("failed") and "ClusterQueue nlp exists and is not managed by gpufleet.sharing" in result["msg"]
    assert writes(metrics(lab)) == {}
    custom.delete_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "nlp")


def test_check_mode_is_a_dry_run_with_the_diff_of_every_quota(lab):
    for ns in ("vision-train", "vision-dev", "nlp"):
        client.CoreV1Api(kconfig.new_client_from_config(config_file=lab.kubeconfig)).create_namespace({"metadata": {"name": ns}})
    lab.api.metrics.reset()
    result = run_module("gpu_quotas", args(lab), lab.tmp, check_mode=True, diff=True)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True and writes(metrics(lab))
    assert store_get(lab, KUEUE + "/clusterqueues/vision") is None
    headers = [d["after_header"] for d in result["diff"]]
    assert headers == ["ResourceFlavor " + A100_FLAVOR, "ResourceFlavor " + H100_FLAVOR, "ClusterQueue vision", "ClusterQueue nlp",
                       "LocalQueue vision-train/vision", "LocalQueue vision-dev/vision", "LocalQueue nlp/nlp"]
    assert result["quotas"] == {"vision": {H100_FLAVOR: {H100_MIG1: 7}, A100_FLAVOR: {A100_MIG1: 3}},
                                "nlp": {H100_FLAVOR: {H100_MIG1: 3}, A100_FLAVOR: {A100_MIG1: 3}}}
    assert result["summary"][1] == {"team": "vision", "before": {}, "after": {A100_MIG1: 3, H100_MIG1: 7}}


def test_apply_then_rerun_changes_nothing(lab):
    result = run_module("gpu_quotas", args(lab), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    assert result["changed"] is True
    assert quota_of(lab, "vision") == {H100_FLAVOR: {H100_MIG1: 7}, A100_FLAVOR: {A100_MIG1: 3}}
    assert store_get(lab, KUEUE + "/clusterqueues/vision")["spec"]["cohortName"] == "research"
    assert store_get(lab, KUEUE + "/namespaces/vision-dev/localqueues/vision")["spec"] == {"clusterQueue": "vision"}
    flavor = store_get(lab, KUEUE + "/resourceflavors/" + H100_FLAVOR)
    assert flavor["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    lab.api.metrics.reset()
    again = run_module("gpu_quotas", args(lab), lab.tmp)
    assert again["changed"] is False and writes(metrics(lab)) == {}


def test_verified_proves_quota_as_planned_and_within_what_nodes_advertise(lab):
    result = run_module("gpu_quotas", args(lab, state="verified"), lab.tmp)
    assert not result.get("failed"), result.get("msg")
    rows = {(c["node"], c["name"]): c for c in result["checks"]}
    assert all(c["ok"] for c in result["checks"])
    assert rows[("flavor/" + H100_FLAVOR, H100_MIG1)]["actual"] == "10"
    assert rows[("flavor/" + H100_FLAVOR, H100_MIG1)]["expected"] == "<= 14"


def _admitted_everywhere(lab: Any, queues: Dict[str, Any]):
    flavors = {f["metadata"]["name"]: f for f in store_get(lab, KUEUE + "/resourceflavors")["items"]}
    nodes = store_get(lab, "/api/v1/nodes")["items"]
    admitted, pending = [], []
    for team, cq in sorted(queues.items()):
        workloads = [{"name": "%s-%s-%d" % (team, r, i), "count": 1, "requests": {r: 1}}
                     for r in (H100_MIG1, A100_MIG1) for i in range(30)]
        ok, waiting = kueue_admission.admit(cq, workloads)
        admitted += ok
        pending += waiting
    return admitted, pending, kueue_admission.place(admitted, flavors, nodes)


def test_what_the_derived_quota_admits_fits_the_nodes(lab):
    """The small admission model (gpulab/cluster/kueue_admission.py, what it leaves out is there)."""
    queues = {t: store_get(lab, KUEUE + "/clusterqueues/" + t) for t in ("vision", "nlp")}
    admitted, pending, unplaced = _admitted_everywhere(lab, queues)
    assert len(admitted) == 7 + 3 + 3 + 3 and pending and unplaced == []
    promised = dict(queues["vision"], spec=dict(queues["vision"]["spec"], resourceGroups=[
        {"coveredResources": [H100_MIG1], "flavors": [{"name": H100_FLAVOR, "resources": [{"name": H100_MIG1, "nominalQuota": 28}]}]}]))
    _admitted, _pending, unplaced = _admitted_everywhere(lab, dict(queues, vision=promised))
    assert len(unplaced) == 28 + 3 - 14 and "no node of the flavor has" in unplaced[0]


def test_a_pod_that_also_asks_for_cpu_and_memory(lab):
    """Issue 42: Kueue admits a workload only when every resource it asks for is covered by the ClusterQueue
    (kueue_admission.py, from Kueue's flavor assigner). The queues cover GPU resources; the user's own resource
    group for cpu and memory in the team's ClusterQueue is kept by the module, and the pod is admitted."""
    pod = {"name": "train", "count": 1, "requests": {H100_MIG1: 1, "cpu": "2", "memory": "8Gi"}}
    queue = store_get(lab, KUEUE + "/clusterqueues/vision")
    admitted, pending = kueue_admission.admit(queue, [pod])
    assert admitted == [] and pending[0][1] == ("couldn't assign flavors to pod set main: resource cpu unavailable "
                                                "in ClusterQueue")
    assert kueue_admission.admit(queue, [pod], exclude_resource_prefixes=["cpu", "memory"])[0][0][1] == (H100_FLAVOR,)
    assert kueue_admission.admit(queue, [pod], quota_check_strategy="IgnoreUndeclared")[0][0][1] == (H100_FLAVOR,)
    manifest = {"metadata": {"name": "train", "namespace": "vision-train", "labels": {"kueue.x-k8s.io/queue-name": "vision"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "8Gi", H100_MIG1: "1"}}},
                                        {"name": "d", "resources": {"requests": {"cpu": "1"}}}]}}
    assert kueue_pod.check(lab.kubeconfig, manifest)["reason"] == pending[0][1]
    custom = client.CustomObjectsApi(kconfig.new_client_from_config(config_file=lab.kubeconfig))
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}, "spec": {}})
    cq = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "vision")
    cq["spec"]["resourceGroups"].append({"coveredResources": ["cpu", "memory"], "flavors": [
        {"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "256Gi"}]}]})
    custom.replace_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "vision", cq)
    again = run_module("gpu_quotas", args(lab), lab.tmp)
    assert not again.get("failed") and again["changed"] is False, again
    queue = store_get(lab, KUEUE + "/clusterqueues/vision")
    admitted, pending = kueue_admission.admit(queue, [pod])
    assert pending == [] and admitted[0][1] == ("default-flavor", H100_FLAVOR)
    flavors = {f["metadata"]["name"]: f for f in store_get(lab, KUEUE + "/resourceflavors")["items"]}
    assert kueue_admission.place(admitted, flavors, store_get(lab, "/api/v1/nodes")["items"]) == []
    assert kueue_pod.check(lab.kubeconfig, manifest) == {"admitted": True, "flavors": ["default-flavor", H100_FLAVOR],
                                                         "reason": "", "unplaced": []}
    verified = run_module("gpu_quotas", args(lab, state="verified"), lab.tmp)
    assert not verified.get("failed"), verified.get("msg")


def test_a_mig_change_shrinks_first_and_grows_after(lab):
    new = gpus({"3g.40gb": 2})
    shrink = run_module("gpu_quotas", args(lab, node_gpus=new, state="shrunk"), lab.tmp)
    assert not shrink.get("failed"), shrink.get("msg")
    assert quota_of(lab, "vision")[H100_FLAVOR] == {H100_MIG1: 0, H100_MIG3: 0}
    set_layout(lab, "h1", "all-3g.40gb")
    grow = run_module("gpu_quotas", args(lab, node_gpus=new), lab.tmp)
    assert not grow.get("failed"), grow.get("msg")
    assert quota_of(lab, "vision")[H100_FLAVOR] == {H100_MIG3: 2}
    assert [s for s in grow["summary"] if s["team"] == "vision"] == [
        {"team": "vision", "before": {A100_MIG1: 3, H100_MIG1: 0, H100_MIG3: 0}, "after": {A100_MIG1: 3, H100_MIG3: 2}}]
    verified = run_module("gpu_quotas", args(lab, node_gpus=new, state="verified"), lab.tmp)
    assert not verified.get("failed"), verified.get("msg")
    assert run_module("gpu_quotas", args(lab, node_gpus=new), lab.tmp)["changed"] is False


def test_verified_fails_on_a_hand_edited_quota(lab):
    custom = client.CustomObjectsApi(kconfig.new_client_from_config(config_file=lab.kubeconfig))
    cq = custom.get_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "nlp")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 50
    custom.replace_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "nlp", cq)
    result = run_module("gpu_quotas", args(lab, node_gpus=gpus({"3g.40gb": 2}), state="verified"), lab.tmp)
    assert result.get("failed") and "team/nlp" in result["msg"] and "live quota differs from the plan" in result["msg"]
    assert "the teams' quotas exceed what the nodes advertise" in result["msg"]


def test_a_cluster_without_kueue_is_named(tmp_path):
    bare = server.serve_in_thread(str(tmp_path), [])
    try:
        for crd in ("resourceflavors", "clusterqueues", "localqueues"):
            bare.store.delete("apiextensions.k8s.io/v1/customresourcedefinitions", None, crd + ".kueue.x-k8s.io")
        result = run_module("gpu_quotas", dict(kubeconfig=bare.kubeconfig, teams=TEAMS, node_gpus={}), str(tmp_path))
        assert result.get("failed") and "Kueue's API kueue.x-k8s.io/v1beta2 is not served by this cluster" in result["msg"]
    finally:
        bare.stop()
