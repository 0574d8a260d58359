"""node_maintenance and mig_node_config in process, over the real K8sClient and a small in-memory
API (nodes, pods, eviction, configmaps). The lab tests cover the same modules against the lab's
API server with PodDisruptionBudgets and the MIG manager."""

from __future__ import annotations

import copy
import json

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _cluster_module
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _k8s
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.modules import mig_node_config, node_maintenance


class Api:
    """Objects by REST path; PUT checks resourceVersion; eviction deletes the pod (or answers 429).
    Writes with dryRun=All are recorded in ``dry_writes`` and change nothing."""

    def __init__(self):
        self.objects = {}
        self.writes = []
        self.dry_writes = []
        self.rv = 10
        self.refuse_evictions = 0
        self.on_label = None

    def add(self, path, obj):
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.objects[path] = obj

    @staticmethod
    def error(status, message):
        exc = _k8s._ApiException()
        exc.status, exc.reason, exc.headers = status, "x", {}
        exc.body = json.dumps({"message": message})
        return exc

    def request(self, method, path, body=None, **kwargs):
        class Response:
            def __init__(self, data):
                self.data = json.dumps(data).encode()
        query = dict(kwargs.get("query_params") or [])
        if method == "GET":
            if path in self.objects:
                return Response(self.objects[path])
            if path == "/api/v1/pods":  # all namespaces
                items = [o for p, o in sorted(self.objects.items()) if "/pods/" in p and p.count("/") == 6]
            else:
                prefix = path + "/"
                items = [o for p, o in sorted(self.objects.items())
                         if p.startswith(prefix) and "/" not in p[len(prefix):]]
            if path.endswith("/pods") or path.endswith("/events"):
                selector = query.get("fieldSelector", "")
                if selector.startswith("spec.nodeName="):
                    items = [o for o in items if o["spec"].get("nodeName") == selector.split("=", 1)[1]]
                return Response({"items": items, "metadata": {}})
            raise self.error(404, "not found")
        dry = query.get("dryRun") == "All"
        (self.dry_writes if dry else self.writes).append((method, path))
        if path.endswith("/eviction"):
            if self.refuse_evictions:
                self.refuse_evictions -= 1
                raise self.error(429, "Cannot evict pod as it would violate the pod's disruption budget.")
            if not dry:
                self.objects.pop(path[: -len("/eviction")], None)
            return Response({})
        if method == "PUT":
            if body["metadata"]["resourceVersion"] != self.objects[path]["metadata"]["resourceVersion"]:
                raise self.error(409, "the object has been modified")
            if dry:
                return Response(body)
            self.rv += 1
            body = copy.deepcopy(body)
            body["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[path] = body
            if self.on_label:
                self.on_label(self, path, body)
            return Response(body)
        if method == "DELETE":
            if not dry:
                self.objects.pop(path, None)
            return Response({})
        raise AssertionError("unexpected %s %s" % (method, path))


NODE = "/api/v1/nodes/gpu-a"


def pod_path(name):
    return "/api/v1/namespaces/work/pods/" + name


def make_pod(name, node="gpu-a", controller="ReplicaSet", volumes=None):
    meta = {"name": name, "namespace": "work", "uid": name + "-1"}
    if controller:
        meta["ownerReferences"] = [{"kind": controller, "name": "o", "controller": True}]
    return {"metadata": meta, "spec": {"nodeName": node, "volumes": volumes or []}, "status": {"phase": "Running"}}


@pytest.fixture
def api(monkeypatch):
    server = Api()
    server.add(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-a", "labels": {}}, "spec": {}})
    server.add(pod_path("app"), make_pod("app"))
    server.add(pod_path("agent"), make_pod("agent", controller="DaemonSet"))
    monkeypatch.setattr(_cluster_module, "client_from_module",
                        lambda _module, dry_run=False: K8sClient(server, sleep=lambda s: None, dry_run=dry_run))
    return server


def run(module, args, capsys, check=False, diff=False):
    with patch_module_args(dict(args, _ansible_check_mode=check, _ansible_diff=diff)):
        with pytest.raises(SystemExit):
            module.main()
    result = json.loads(capsys.readouterr().out)
    result.pop("invocation", None)
    return result


def test_drain_check_mode_reports_and_writes_nothing(api, capsys):
    result = run(node_maintenance, {"node": "gpu-a", "state": "drain", "run_id": "r1"}, capsys, check=True, diff=True)
    assert result["changed"] and result["would_evict"] == ["work/app"]
    assert result["left_on_node"] == [{"pod": "work/agent", "reason": "DaemonSet pod"}]
    # A truthy "skipped" key makes Ansible report the task as skipped although it ran.
    assert "skipped" not in result
    assert (result["diff"]["before"], result["diff"]["after"]) == (
        {"unschedulable": False, "annotations": {}},
        {"unschedulable": True, "annotations": {"gpufleet.sharing/cordoned-by": "r1"}})
    assert result["evicted"] == []
    assert api.writes == []
    # check mode: the cordon (GET + dry-run PUT) and the eviction are sent as dry runs
    assert api.dry_writes == [("PUT", NODE), ("POST", pod_path("app") + "/eviction")]
    assert "unschedulable" not in api.objects[NODE]["spec"] and pod_path("app") in api.objects


def test_drain_check_mode_tolerates_a_budget_refusal(api, capsys):
    api.refuse_evictions = 1
    result = run(node_maintenance, {"node": "gpu-a", "state": "drain", "timeout": 0}, capsys, check=True)
    assert not result.get("failed") and result["would_evict"] == ["work/app"], result
    assert api.writes == []


def test_restart_pods_check_mode_sends_dry_run_deletes(api, capsys):
    args = {"node": "gpu-a", "state": "restart_pods", "namespace": "work", "pod_selectors": ["app=x"]}
    api.add("/api/v1/namespaces/work", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}})
    result = run(node_maintenance, args, capsys, check=True)  # (this fake API ignores label selectors)
    assert result["changed"] and result["restarted"] == ["work/agent", "work/app"] and not result.get("failed")
    assert api.writes == [] and api.dry_writes == [("DELETE", pod_path("agent")), ("DELETE", pod_path("app"))]


def test_drain_blocked_by_emptydir_changes_nothing(api, capsys):
    api.add(pod_path("cache"), make_pod("cache", volumes=[{"name": "c", "emptyDir": {}}]))
    result = run(node_maintenance, {"node": "gpu-a", "state": "drain"}, capsys)
    assert result["failed"] and not result["changed"] and result["blocking"][0]["pod"] == "work/cache"
    assert api.writes == []


def test_drain_retries_429_then_idempotent(api, capsys):
    api.refuse_evictions = 2
    result = run(node_maintenance, {"node": "gpu-a", "state": "drain", "poll_interval": 0.01, "timeout": 5}, capsys)
    assert result["changed"] and result["evicted"] == ["work/app"], result
    assert api.objects[NODE]["spec"]["unschedulable"] is True
    assert [w for w in api.writes if w[1].endswith("/eviction")] == [("POST", pod_path("app") + "/eviction")] * 3
    writes = len(api.writes)
    again = run(node_maintenance, {"node": "gpu-a", "state": "drain"}, capsys)
    assert not again["changed"] and len(api.writes) == writes


def test_cordon_uncordon_with_annotation(api, capsys):
    key = "gpufleet.sharing/maintenance-reason"
    done = run(node_maintenance, {"node": "gpu-a", "state": "cordon", "annotations": {key: "disk"}}, capsys)
    assert done["changed"] and api.objects[NODE]["metadata"]["annotations"][key] == "disk"
    assert not run(node_maintenance, {"node": "gpu-a", "state": "cordon", "annotations": {key: "disk"}}, capsys)["changed"]
    back = run(node_maintenance, {"node": "gpu-a", "state": "uncordon", "annotations": {key: None}}, capsys)
    assert back["changed"] and "unschedulable" not in api.objects[NODE]["spec"]
    assert key not in api.objects[NODE]["metadata"]["annotations"]


def test_uncordon_lifts_only_our_own_cordon(api, capsys):
    owner = "gpufleet.sharing/cordoned-by"
    ours = run(node_maintenance, {"node": "gpu-a", "state": "cordon", "run_id": "r1"}, capsys)
    assert ours["changed"] and ours["cordoned_by"] == "r1"
    assert api.objects[NODE]["metadata"]["annotations"][owner] == "r1"
    back = run(node_maintenance, {"node": "gpu-a", "state": "uncordon"}, capsys)
    assert back["changed"] and not back["left_cordoned"] and not back["unschedulable"]
    assert owner not in api.objects[NODE]["metadata"].get("annotations", {})
    api.objects[NODE]["spec"]["unschedulable"] = True  # an administrator's cordon
    again = run(node_maintenance, {"node": "gpu-a", "state": "drain", "run_id": "r2"}, capsys)
    assert again["cordoned_by"] is None and owner not in api.objects[NODE]["metadata"].get("annotations", {})
    kept = run(node_maintenance, {"node": "gpu-a", "state": "uncordon"}, capsys)
    assert kept["left_cordoned"] and kept["unschedulable"] and api.objects[NODE]["spec"]["unschedulable"]
    forced = run(node_maintenance, {"node": "gpu-a", "state": "uncordon", "force_uncordon": True}, capsys)
    assert forced["changed"] and not forced["left_cordoned"]
    assert "unschedulable" not in api.objects[NODE]["spec"]


def test_unknown_node(api, capsys):
    result = run(node_maintenance, {"node": "nope", "state": "uncordon"}, capsys)
    assert result["failed"] and result["msg"] == "node nope not found"


# -- mig_node_config ------------------------------------------------------------------------------

def mig_manager(outcome):
    """After the MIG label changes, the "MIG manager" sets the state label at once."""
    def react(server, path, body):
        labels = body["metadata"].get("labels") or {}
        if path == NODE and labels.get("nvidia.com/mig.config") and "nvidia.com/mig.config.state" not in labels:
            labels["nvidia.com/mig.config.state"] = outcome
            if outcome == "failed":
                body["metadata"].setdefault("annotations", {})["example.com/mig-failure"] = "GPU 0 is busy"
    return react


def add_mig_manager(api):
    manager = make_pod("nvidia-mig-manager-x", controller="DaemonSet")
    manager["metadata"]["namespace"] = "gpu-operator"
    api.add("/api/v1/namespaces/gpu-operator/pods/nvidia-mig-manager-x", manager)


def test_mig_node_config_without_mig_manager_changes_nothing(api, capsys):
    result = run(mig_node_config, {"node": "gpu-a", "config": "all-balanced"}, capsys)
    assert result["failed"] and "no MIG manager pod (app=nvidia-mig-manager in gpu-operator) runs on node gpu-a" in result["msg"]
    assert api.writes == []


def test_mig_node_config_success_then_unchanged(api, capsys):
    add_mig_manager(api)
    api.on_label = mig_manager("success")
    args = {"node": "gpu-a", "config": "all-balanced", "poll_interval": 0.01, "timeout": 5, "drain_timeout": 5}
    planned = run(mig_node_config, args, capsys, check=True, diff=True)
    assert planned["changed"] and planned["would_evict"] == ["work/app"] and api.writes == []
    assert planned["evicted"] == [] and planned["diff"]["after"]["nvidia.com/mig.config"] == "all-balanced"
    # cordon with its marker (one update), eviction and label change as dry runs; no wait
    assert [w[0] for w in api.dry_writes] == ["PUT", "POST", "PUT"]
    done = run(mig_node_config, args, capsys)
    assert done["changed"] and done["state"] == "success" and done["uncordoned"], done
    node = api.objects[NODE]
    assert node["metadata"]["labels"]["nvidia.com/mig.config"] == "all-balanced"
    assert "unschedulable" not in node["spec"]
    assert "gpufleet.sharing/cordoned-by" not in node["metadata"].get("annotations", {})
    writes = len(api.writes)
    assert not run(mig_node_config, args, capsys)["changed"] and len(api.writes) == writes


def test_mig_node_config_leaves_a_foreign_cordon(api, capsys):
    add_mig_manager(api)
    api.on_label = mig_manager("success")
    api.objects[NODE]["spec"]["unschedulable"] = True  # an administrator's cordon
    args = {"node": "gpu-a", "config": "all-balanced", "poll_interval": 0.01, "timeout": 5, "drain_timeout": 5}
    done = run(mig_node_config, args, capsys)
    assert done["changed"] and done["state"] == "success" and not done["uncordoned"] and done["left_cordoned"]
    assert api.objects[NODE]["spec"]["unschedulable"] is True
    assert "gpufleet.sharing/cordoned-by" not in api.objects[NODE]["metadata"].get("annotations", {})


def test_mig_node_config_failure_keeps_cordon(api, capsys):
    add_mig_manager(api)
    api.on_label = mig_manager("failed")
    args = {"node": "gpu-a", "config": "all-1g.5gb", "poll_interval": 0.01, "timeout": 5, "drain_timeout": 5}
    result = run(mig_node_config, args, capsys)
    assert result["failed"] and "example.com/mig-failure=GPU 0 is busy" in result["msg"]
    assert api.objects[NODE]["spec"]["unschedulable"] is True


def test_mig_node_config_missing_config_in_configmap(api, capsys):
    api.add("/api/v1/namespaces/gpu-operator/configmaps/mig", {"data": {"config.yaml": "version: v1\nmig-configs:\n  a: []\n"}})
    result = run(mig_node_config, {"node": "gpu-a", "config": "b", "config_map": "mig"}, capsys)
    assert result["failed"] and "MIG config 'b' is not defined in ConfigMap gpu-operator/mig" in result["msg"]
    assert "it defines: a" in result["msg"] and api.writes == []


def test_drain_of_chosen_pods_evicts_only_them_and_says_why_the_others_stay(api, capsys):
    """Issue 38: the per-GPU scope evicts the pods of the GPUs that change; check mode says which."""
    api.add(pod_path("gpu1"), make_pod("gpu1"))
    args = {"node": "gpu-a", "state": "drain", "pod_uids": ["gpu1-1"]}
    planned = run(node_maintenance, args, capsys, check=True)
    assert planned["would_evict"] == ["work/gpu1"] and api.writes == []
    result = run(node_maintenance, args, capsys)
    assert result["evicted"] == ["work/gpu1"], result
    assert pod_path("app") in api.objects and pod_path("gpu1") not in api.objects
    assert {"pod": "work/app", "reason": "holds no device of the GPUs that change"} in result["left_on_node"]
    assert api.objects[NODE]["spec"]["unschedulable"] is True


@pytest.mark.parametrize("args, message", [
    ({"state": "drain", "pod_uids": ["a/b"]}, "'a/b' is not a pod UID"),
    ({"state": "cordon", "pod_uids": ["x"]}, "pod_uids: only with state=drain")])
def test_bad_pod_uids_are_refused_before_any_request(api, capsys, args, message):
    result = run(node_maintenance, dict(args, node="gpu-a"), capsys)
    assert result["failed"] and message in result["msg"] and api.writes == []
