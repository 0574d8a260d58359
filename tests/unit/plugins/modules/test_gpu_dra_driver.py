"""gpu_dra_driver module, in process: a fake helm executable and the real K8sClient over a scripted API
that stores writes. The lab test (tests/lab/tests/test_dra_backend.py) runs real helm on the lab."""

from __future__ import annotations

import json
import stat
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _cluster_module, _k8s
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.modules import gpu_dra_driver

FAKE_HELM = r'''#!{python}
import json, os, sys
path = os.environ["FAKE_HELM_STATE"]
state = json.load(open(path))
argv = sys.argv[1:]
out = ""
if argv[0] == "version":
    out = "v3.14.2+gc309b6f"
elif argv[:2] == ["show", "chart"]:
    out = "apiVersion: v2\nname: %s\nversion: %s\n" % (state.get("name", "nvidia-dra-driver-gpu"), state.get("chart", "25.8.1"))
elif argv[:2] == ["show", "values"]:
    out = "image:\n  repository: registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu\n  tag: ''\nimagePullSecrets: []\n"
    out += state.get("chart_values", "")
elif argv[0] == "list":
    out = json.dumps([state["release"]] if state["release"] else [])
elif argv[:2] == ["get", "values"]:
    out = json.dumps(state["values"])
elif argv[:2] == ["upgrade", "--install"]:
    state["values"] = json.load(open(argv[argv.index("-f") + 1]))
    state["release"] = {{"name": argv[2], "namespace": "nvidia-dra-driver-gpu", "revision": "1", "status": "deployed",
                        "chart": "%s-%s" % (state.get("name", "nvidia-dra-driver-gpu"), state.get("chart", "25.8.1")),
                        "app_version": state.get("chart", "25.8.1")}}
    state["upgrades"] += 1
json.dump(state, open(path, "w"))
sys.stdout.write(out)
'''

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "", "resourceVersion": "1",
                                                         "labels": {"nvidia.com/gpu.deploy.device-plugin": "true"}}}


class Api:
    """GET answers from ``objects``; PUT stores (unless a dry run); every write is recorded."""

    def __init__(self, version="v1.34.2", groups=("resource.k8s.io/v1",)):
        self.writes = []
        self.objects = {"/version": {"gitVersion": version},
                        "/api/v1/namespaces/nvidia-dra-driver-gpu": {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                            "name": "nvidia-dra-driver-gpu", "resourceVersion": "1",
                            "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}}
        if groups:
            self.objects["/apis/resource.k8s.io"] = {"versions": [{"groupVersion": g} for g in groups]}
        for name in ("a100-01", "h200-01"):
            self.objects["/api/v1/nodes/" + name] = json.loads(json.dumps(NODE).replace('"name": ""', '"name": "%s"' % name))

    def request(self, method, path, body=None, **kwargs):
        class Response:
            def __init__(self, data):
                self.data = json.dumps(data).encode()
        query = dict(kwargs.get("query_params") or [])
        if method != "GET":
            self.writes.append((method, path, query))
            if "dryRun" not in query:
                self.objects[path] = body
            return Response(body)
        if path in self.objects:
            return Response(self.objects[path])
        error = _k8s._ApiException()
        error.status, error.reason, error.body, error.headers = 404, "NotFound", '{"message": "not found"}', {}
        raise error

    def stored(self):
        return [w for w in self.writes if "dryRun" not in w[2]]


@pytest.fixture
def helm(tmp_path, monkeypatch):
    binary = tmp_path / "helm"
    binary.write_text(FAKE_HELM.format(python=sys.executable))
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"release": None, "values": None, "upgrades": 0}))
    monkeypatch.setenv("FAKE_HELM_STATE", str(state))
    return {"binary": str(binary), "state": lambda: json.loads(state.read_text()),
            "write": lambda data: state.write_text(json.dumps(data))}


def run(api, monkeypatch, capsys, args, check=False):
    monkeypatch.setattr(_cluster_module, "client_from_module",
                        lambda module, dry_run=False: K8sClient(api, sleep=lambda s: None, dry_run=dry_run))
    with patch_module_args(dict(args, _ansible_check_mode=check, _ansible_diff=True)):
        with pytest.raises(SystemExit):
            gpu_dra_driver.main()
    result = json.loads(capsys.readouterr().out)
    result.pop("invocation", None)
    return result


def args(helm, **extra):
    base = {"helm_binary": helm["binary"], "chart_version": "25.8.1", "dra_nodes": ["a100-01"],
            "device_plugin_nodes": ["h200-01"], "wait": False}
    base.update(extra)
    base.setdefault("chart_ref", "nvidia/%s" % ("dra-driver-nvidia-gpu" if base["chart_version"].startswith("0.")
                                                else "nvidia-dra-driver-gpu"))
    return base


def test_install_switches_the_dra_node_and_is_unchanged_on_a_rerun(helm, monkeypatch, capsys):
    api = Api()
    result = run(api, monkeypatch, capsys, args(helm, image_pull_secrets=[]))
    assert result["changed"] and result["action"] == "installed" and result["nodes_switched"] == ["a100-01"], result
    # The release's values under release_values: `values` is a dict method name (ansible-test 2.21 refuses it).
    assert "values" not in result and result["release_values"] == helm["state"]()["values"], result
    labels = api.objects["/api/v1/nodes/a100-01"]["metadata"]["labels"]
    assert labels == {"nvidia.com/gpu.deploy.device-plugin": "false", "gpufleet.sharing/gpu-backend": "dra"}
    assert api.objects["/api/v1/nodes/h200-01"]["metadata"]["labels"] == {"nvidia.com/gpu.deploy.device-plugin": "true"}
    values = helm["state"]()["values"]
    assert values["kubeletPlugin"]["nodeSelector"] == {"gpufleet.sharing/gpu-backend": "dra"}
    assert values["gpuResourcesEnabledOverride"] is True
    again = run(api, monkeypatch, capsys, args(helm))
    assert not again["changed"] and again["action"] == "unchanged" and again["nodes_switched"] == [], again
    assert helm["state"]()["upgrades"] == 1


def test_check_mode_changes_nothing(helm, monkeypatch, capsys):
    api = Api()
    result = run(api, monkeypatch, capsys, args(helm), check=True)
    assert result["changed"] and result["action"] == "installed"
    assert api.stored() == [] and helm["state"]()["upgrades"] == 0
    assert api.objects["/api/v1/nodes/a100-01"]["metadata"]["labels"] == {"nvidia.com/gpu.deploy.device-plugin": "true"}


def test_back_to_the_device_plugin(helm, monkeypatch, capsys):
    api = Api()
    run(api, monkeypatch, capsys, args(helm))
    result = run(api, monkeypatch, capsys, args(helm, dra_nodes=[], device_plugin_nodes=["a100-01", "h200-01"]))
    assert result["nodes_switched"] == ["a100-01"]
    assert api.objects["/api/v1/nodes/a100-01"]["metadata"]["labels"] == {"nvidia.com/gpu.deploy.device-plugin": "true"}


@pytest.mark.parametrize("api,expected", [
    (Api(groups=()), "the API server does not serve resource.k8s.io/v1 (it serves no resource.k8s.io version)"),
    (Api(version="v1.33.5", groups=("resource.k8s.io/v1beta1",)), "Kubernetes v1.33.5 is too old for DRA"),
])
def test_a_cluster_without_resource_v1_is_refused_and_nothing_changes(helm, monkeypatch, capsys, api, expected):
    result = run(api, monkeypatch, capsys, args(helm))
    assert result["failed"] and result["msg"].startswith("DRA cannot be used here, nothing was changed: ")
    assert expected in result["msg"]
    assert api.writes == [] and helm["state"]()["upgrades"] == 0


def test_both_backends_on_one_node_and_a_missing_node_are_refused(helm, monkeypatch, capsys):
    api = Api()
    result = run(api, monkeypatch, capsys, args(helm, dra_nodes=["a100-01", "gone"], device_plugin_nodes=["a100-01"]))
    assert result["failed"] and "node a100-01: asked on both backends" in result["msg"]
    assert api.writes == [] and helm["state"]()["upgrades"] == 0
    result = run(api, monkeypatch, capsys, args(helm, dra_nodes=["gone"]))
    assert result["failed"] and "node gone: not found in the cluster" in result["msg"]


def test_gates_the_driver_refuses_change_nothing(helm, monkeypatch, capsys):
    api = Api()
    result = run(api, monkeypatch, capsys, args(helm, chart_version="25.12.0",
                                                feature_gates={"DynamicMIG": True, "MPSSupport": True}))
    assert result["failed"] and "DynamicMIG and MPSSupport are mutually exclusive" in result["msg"]
    assert api.writes == [] and helm["state"]()["upgrades"] == 0


def test_mirror_and_pull_secrets_reach_the_driver(helm, monkeypatch, capsys):
    api = Api()
    api.objects["/api/v1/namespaces/nvidia-dra-driver-gpu/secrets/mirror-pull"] = {"metadata": {"name": "mirror-pull"}}
    run(api, monkeypatch, capsys, args(helm, registry="mirror.example:5000", image_pull_secrets=["mirror-pull"]))
    values = helm["state"]()["values"]
    assert values["image"]["repository"] == "mirror.example:5000/dra-driver-nvidia/dra-driver-nvidia-gpu"
    assert values["imagePullSecrets"] == [{"name": "mirror-pull"}]


def test_a_downgrade_is_refused_an_upgrade_is_not_held_to_the_operator_lines(helm, monkeypatch, capsys):
    api = Api()
    run(api, monkeypatch, capsys, args(helm))
    state = helm["state"]()
    state["chart"] = "25.3.2"
    helm["write"](state)
    result = run(api, monkeypatch, capsys, args(helm, chart_version="25.3.2"))
    assert result["failed"] and "chart downgrade from 25.8.1 (installed) to 25.3.2 (asked) is refused" in result["msg"]


def _plugin_pod(node, ready=True):
    return {"metadata": {"name": "kp-" + node, "labels": {"nvidia-dra-driver-gpu-component": "kubelet-plugin"}},
            "spec": {"nodeName": node},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_nodes_state_waits_for_the_slices_to_list_the_read_gpus(helm, monkeypatch, capsys):
    api = Api()
    api.objects["/api/v1/pods"] = {"metadata": {}, "items": [_plugin_pod("a100-01")]}
    api.objects["/apis/resource.k8s.io/v1/resourceslices"] = {"metadata": {}, "items": [{"spec": {
        "driver": "gpu.nvidia.com", "nodeName": "a100-01", "devices": [{"name": "gpu-0-mig-1g10gb-19-0", "attributes": {
            "type": {"string": "mig"}, "uuid": {"string": "MIG-x"}, "profile": {"string": "1g.10gb"},
            "parentUUID": {"string": "GPU-0"}}}]}}]}
    gpus = [{"uuid": "GPU-0", "mig": {"current": True, "instances": [{"profile": "1g.10gb"}, {"profile": "1g.10gb"}]}}]
    nodes = {"state": "nodes", "dra_nodes": ["a100-01"], "wait": True, "wait_timeout": 1, "wait_interval": 0.01,
             "expected_gpus": {"a100-01": gpus}}
    result = run(api, monkeypatch, capsys, nodes)
    assert result["failed"] and result["waiting"] == {
        "a100-01": "ResourceSlices: MIG 1g.10gb on GPU GPU-0: 2 planned, 1 published"}, result
    assert helm["state"]()["upgrades"] == 0 and "helm_version" not in result
    gpus[0]["mig"]["instances"].pop()
    result = run(api, monkeypatch, capsys, dict(nodes, expected_gpus={"a100-01": gpus}))
    assert not result.get("failed") and not result["changed"], result


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NEW_CHART_VALUES = "kubeletPlugin:\n  tolerations:\n  - key: nvidia.com/gpu\n    operator: Exists\n    effect: NoSchedule\n"


def _new_chart(helm, version="0.5.0"):
    state = helm["state"]()
    state.update(name="dra-driver-nvidia-gpu", chart=version, chart_values=NEW_CHART_VALUES)
    helm["write"](state)


def test_upgrade_from_25_12_to_0_5_keeps_the_names_and_the_selector(helm, monkeypatch, capsys):
    """docs/upgrade.md (v0.4.1): the first upgrade from the old chart sets nameOverride=nvidia-dra-driver-gpu;
    25.12.0 -> 0.4.x/0.5.x is an upgrade; later runs keep the override."""
    api = Api()
    state = helm["state"]()
    state["chart"] = "25.12.0"
    helm["write"](state)
    first = run(api, monkeypatch, capsys, args(helm, chart_version="25.12.0"))
    assert first["kubelet_plugin_selector"] == "nvidia-dra-driver-gpu-component=kubelet-plugin", first
    _new_chart(helm)
    upgraded = run(api, monkeypatch, capsys, args(helm, chart_version="0.5.0", chart_ref="nvidia/dra-driver-nvidia-gpu"))
    assert not upgraded.get("failed") and upgraded["action"] == "upgraded", upgraded
    assert helm["state"]()["values"]["nameOverride"] == "nvidia-dra-driver-gpu"
    assert upgraded["kubelet_plugin_selector"] == "nvidia-dra-driver-gpu-component=kubelet-plugin"
    again = run(api, monkeypatch, capsys, args(helm, chart_version="0.5.0", chart_ref="nvidia/dra-driver-nvidia-gpu"))
    assert again["action"] == "unchanged" and helm["state"]()["values"]["nameOverride"] == "nvidia-dra-driver-gpu"
    state = helm["state"]()
    state.update(name="nvidia-dra-driver-gpu", chart="25.12.0", chart_values="")
    helm["write"](state)
    back = run(api, monkeypatch, capsys, args(helm, chart_version="25.12.0"))
    assert back["failed"] and "chart downgrade from 0.5.0 (installed) to 25.12.0 (asked) is refused" in back["msg"]


def test_a_fresh_0_5_install_keeps_the_chart_toleration_and_names_its_selector(helm, monkeypatch, capsys):
    api = Api()
    _new_chart(helm)
    result = run(api, monkeypatch, capsys, args(helm, chart_version="0.5.0", chart_ref="nvidia/dra-driver-nvidia-gpu",
                                                driver_root="/run/nvidia/driver"))
    assert result["action"] == "installed" and result["kubelet_plugin_selector"] == (
        "dra-driver-nvidia-gpu-component=kubelet-plugin"), result
    values = helm["state"]()["values"]
    assert "tolerations" not in values["kubeletPlugin"] and "nameOverride" not in values
    assert values["nvidiaDriverRoot"] == "/run/nvidia/driver"
    taint = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    run(api, monkeypatch, capsys, args(helm, chart_version="0.5.0", chart_ref="nvidia/dra-driver-nvidia-gpu",
                                       tolerations=[taint]))
    assert helm["state"]()["values"]["kubeletPlugin"]["tolerations"] == [GPU_TOLERATION, taint]


def test_the_old_chart_name_for_a_new_version_is_refused_before_anything(helm, monkeypatch, capsys):
    api = Api()
    result = run(api, monkeypatch, capsys, args(helm, chart_version="0.5.0", chart_ref="nvidia/nvidia-dra-driver-gpu"))
    assert result["failed"] and "from 0.4.0 the chart is dra-driver-nvidia-gpu" in result["msg"], result
    assert api.writes == [] and helm["state"]()["upgrades"] == 0


def test_a_gate_unknown_to_the_version_installed_is_refused(helm, monkeypatch, capsys):
    api = Api()
    gates = {"DeviceMetadata": True, "PassthroughSupport": True}
    result = run(api, monkeypatch, capsys, args(helm, chart_version="25.12.0", feature_gates=gates))
    assert result["failed"] and "DeviceMetadata is unknown to the DRA driver 25.12.0" in result["msg"], result
    assert api.writes == [] and helm["state"]()["upgrades"] == 0


def test_the_wait_finds_the_new_charts_plugin_pods(helm, monkeypatch, capsys):
    api = Api()
    pod = _plugin_pod("a100-01")
    pod["metadata"]["labels"] = {"dra-driver-nvidia-gpu-component": "kubelet-plugin"}
    api.objects["/api/v1/pods"] = {"metadata": {}, "items": [pod]}
    result = run(api, monkeypatch, capsys, {"state": "nodes", "dra_nodes": ["a100-01"], "wait": True, "wait_timeout": 1,
                                            "wait_interval": 0.01})
    assert not result.get("failed"), result
