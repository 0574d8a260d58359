"""gpu_operator module, in process: a fake helm executable (records argv, stdin and the values
file as helm saw it) and the real K8sClient over a scripted transport. The real helm 4 against the
lab's API server is exercised in tests/lab/tests/test_cluster_modules_operator.py."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _cluster_module
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s import _k8s
from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient
from ansible_collections.gpufleet.sharing.plugins.modules import gpu_operator

SECRET_TOKEN = "tok-5ecret-123"
SECRET_PASSWORD = "repo-pa55word-xyz"

FAKE_HELM = r'''#!{python}
import json, os, stat, sys
state_path = os.environ["FAKE_HELM_STATE"]
with open(state_path) as f:
    state = json.load(f)
argv = sys.argv[1:]
entry = {{"argv": argv, "env_token": os.environ.get("HELM_KUBETOKEN")}}
if "--password-stdin" in argv:
    entry["stdin"] = sys.stdin.read()
if argv[:2] == ["upgrade", "--install"]:
    path = argv[argv.index("-f") + 1]
    entry["values_mode"] = oct(stat.S_IMODE(os.stat(path).st_mode))
    with open(path) as f:
        entry["values"] = json.load(f)
state["calls"].append(entry)
out = ""
if argv[0] == "version":
    out = state["version"] + "\n"
elif argv[:2] == ["repo", "list"]:
    out = json.dumps(state["repos"])
elif argv[:2] == ["repo", "add"]:
    state["repos"].append({{"name": argv[2], "url": argv[3]}})
elif argv[:2] == ["show", "chart"]:
    out = "apiVersion: v2\nname: gpu-operator\nversion: {{}}\n".format(state["chart_version"])
elif argv[:2] == ["show", "crds"]:
    out = state["crds"]
elif argv[0] == "list":
    out = json.dumps([state["release"]] if state["release"] else [])
elif argv[:2] == ["get", "values"]:
    out = json.dumps(state["values"])
elif argv[:2] == ["upgrade", "--install"]:
    rev = int(state["release"]["revision"]) + 1 if state["release"] else 1
    state["release"] = {{"name": argv[2], "namespace": "gpu-operator", "revision": str(rev), "status": "deployed",
                        "chart": "gpu-operator-" + state["chart_version"], "app_version": state["chart_version"]}}
    state["values"] = entry["values"]
elif argv[0] == "uninstall":
    state["release"] = None
with open(state_path, "w") as f:
    json.dump(state, f)
sys.stdout.write(out)
'''

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
       "metadata": {"name": "clusterpolicies.nvidia.com"},
       "spec": {"group": "nvidia.com", "scope": "Cluster", "names": {"kind": "ClusterPolicy", "plural": "clusterpolicies"},
                "versions": [{"name": "v1", "served": True, "storage": True}]}}


class Cluster:
    """Scripted API: namespace, CRD and a ready ClusterPolicy exist; writes are recorded."""

    def __init__(self):
        self.writes = []
        self.objects = {
            "/api/v1/namespaces/gpu-operator": {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                "name": "gpu-operator", "resourceVersion": "1",
                "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}},
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterpolicies.nvidia.com": dict(
                CRD, metadata={"name": "clusterpolicies.nvidia.com", "resourceVersion": "2"}),
            "/apis/nvidia.com/v1/clusterpolicies/cluster-policy": {"metadata": {"name": "cluster-policy"},
                                                                   "status": {"state": "ready"}},
            "/apis/apps/v1/namespaces/gpu-operator/daemonsets": {"items": [], "metadata": {}},
        }

    def request(self, method, path, body=None, **kwargs):
        class Response:
            def __init__(self, data):
                self.data = json.dumps(data).encode()
        if method != "GET":
            self.writes.append((method, path, dict(kwargs.get("query_params") or [])))
            return Response(body)
        if path in self.objects:
            return Response(self.objects[path])
        error = _k8s._ApiException()
        error.status, error.reason, error.body, error.headers = 404, "NotFound", '{"message": "not found"}', {}
        raise error


@pytest.fixture
def env(tmp_path, monkeypatch):
    helm = tmp_path / "helm"
    helm.write_text(FAKE_HELM.format(python=sys.executable))
    helm.chmod(helm.stat().st_mode | stat.S_IXUSR)
    state_path = tmp_path / "helm-state.json"
    state = {"version": "v3.14.2+gc309b6f", "repos": [], "chart_version": "v25.10.1", "release": None,
             "values": None, "crds": "---\n" + json.dumps(CRD) + "\n", "calls": []}
    state_path.write_text(json.dumps(state))
    monkeypatch.setenv("FAKE_HELM_STATE", str(state_path))
    cluster = Cluster()
    monkeypatch.setattr(_cluster_module, "client_from_module",
                        lambda module, dry_run=False: K8sClient(cluster, sleep=lambda s: None, dry_run=dry_run))

    class Env:
        binary = str(helm)
        k8s = cluster

        @staticmethod
        def state():
            return json.loads(state_path.read_text())

        @staticmethod
        def set_state(**changes):
            current = json.loads(state_path.read_text())
            current.update(changes)
            state_path.write_text(json.dumps(current))
    return Env


def run(args, capsys, check=False, diff=False):
    payload = dict(args, _ansible_check_mode=check, _ansible_diff=diff)
    with patch_module_args(payload):
        with pytest.raises(SystemExit):
            gpu_operator.main()
    result = json.loads(capsys.readouterr().out)
    result.pop("invocation", None)
    return result


def base(env, **extra):
    args = {"helm_binary": env.binary, "chart_version": "v25.10.1", "mig_strategy": "mixed",
            "mig_manager_enabled": False, "driver_enabled": False, "wait_interval": 0.01, "wait_timeout": 1}
    args.update(extra)
    return args


def test_install_values_by_private_file_and_no_secret_in_argv(env, capsys):
    result = run(base(env, api_key=SECRET_TOKEN, repo_url="https://helm.ngc.nvidia.com/nvidia",
                      repo_username="robot", repo_password=SECRET_PASSWORD), capsys)
    assert result["changed"] and result["action"] == "installed", result
    calls = env.state()["calls"]
    for call in calls:
        assert not any(SECRET_TOKEN in arg or SECRET_PASSWORD in arg for arg in call["argv"]), call["argv"]
        assert not any(arg.startswith("--set") for arg in call["argv"])
    add = [c for c in calls if c["argv"][:2] == ["repo", "add"]][0]
    assert add["stdin"].rstrip("\n") == SECRET_PASSWORD and "--password-stdin" in add["argv"]
    upgrade = [c for c in calls if c["argv"][:2] == ["upgrade", "--install"]][0]
    assert upgrade["values_mode"] == "0o600"
    assert upgrade["values"] == {"driver": {"enabled": False}, "mig": {"strategy": "mixed"},
                                 "migManager": {"enabled": False}}
    assert upgrade["env_token"] == SECRET_TOKEN  # the token reaches helm through its environment
    assert not os.path.exists(upgrade["argv"][upgrade["argv"].index("-f") + 1])
    assert upgrade["argv"][upgrade["argv"].index("--version") + 1] == "v25.10.1"
    assert SECRET_PASSWORD not in json.dumps(result) and SECRET_TOKEN not in json.dumps(result)
    assert result["crds"] == [{"name": "clusterpolicies.nvidia.com", "action": "unchanged"}]
    assert env.k8s.writes == []  # namespace and CRD already as wanted


def test_second_run_unchanged_and_check_mode_plans_upgrade(env, capsys):
    run(base(env), capsys)
    calls_before = len(env.state()["calls"])
    again = run(base(env), capsys)
    assert not again["changed"] and again["action"] == "unchanged" and again["values_changes"] == []
    assert not [c for c in env.state()["calls"][calls_before:] if c["argv"][0] in ("upgrade", "uninstall")]

    planned = run(base(env, mig_strategy="single", chart_version="v25.10.1"), capsys, check=True, diff=True)
    assert planned["changed"] and planned["action"] == "upgraded"
    assert planned["diff"]["before"]["values"]["mig"] == {"strategy": "mixed"}
    assert planned["diff"]["after"]["values"]["mig"] == {"strategy": "single"}
    assert not [c for c in env.state()["calls"] if c["argv"][0] == "upgrade"][1:]
    assert env.k8s.writes == []


def test_version_bump_is_an_upgrade(env, capsys):
    run(base(env), capsys)
    env.set_state(chart_version="v26.3.3")
    result = run(base(env, chart_version="v26.3.3"), capsys)
    assert result["action"] == "upgraded" and result["release"]["chart_version"] == "v26.3.3"
    assert result["release"]["revision"] == 2


def test_failed_release_is_upgraded_pending_is_refused(env, capsys):
    run(base(env), capsys)
    release = env.state()["release"]
    env.set_state(release=dict(release, status="failed"))
    assert run(base(env), capsys)["action"] == "upgraded"
    env.set_state(release=dict(env.state()["release"], status="pending-upgrade"))
    result = run(base(env), capsys)
    assert result["failed"] and "pending-upgrade" in result["msg"]


def test_bad_input_fails_before_any_change(env, capsys):
    result = run(base(env, values={"mig": {"strategy": "single"}}), capsys)
    assert result["failed"] and "contradicts values.mig.strategy='single'" in result["msg"]
    result = run(base(env, chart_version=None), capsys)
    assert result["failed"] and "chart_version is required for the repository chart nvidia/gpu-operator" in result["msg"]
    result = run(base(env, chart_version="v26.3.3"), capsys)
    assert result["failed"] and "does not match the chart" in result["msg"]
    result = run(base(env, chart_ref="/no/such/chart"), capsys)
    assert result["failed"] and "no such chart directory" in result["msg"]
    assert not [c for c in env.state()["calls"] if c["argv"][0] in ("upgrade", "uninstall", "repo")]
    assert env.k8s.writes == []


def test_old_helm_refused(env, capsys):
    env.set_state(version="v3.11.3+g1")
    result = run(base(env), capsys)
    assert result["failed"] and result["msg"] == "helm 3.11.3 is too old: 3.12.0 or newer is required"


def test_not_ready_timeout_has_diagnosis(env, capsys):
    env.k8s.objects["/apis/nvidia.com/v1/clusterpolicies/cluster-policy"]["status"]["state"] = "notReady"
    env.k8s.objects["/apis/apps/v1/namespaces/gpu-operator/daemonsets"] = {"items": [
        {"metadata": {"name": "nvidia-device-plugin-daemonset"}, "status": {"desiredNumberScheduled": 2, "numberReady": 1}}]}
    env.k8s.objects["/api/v1/namespaces/gpu-operator/pods"] = {"items": []}
    result = run(base(env, wait_timeout=0), capsys)
    assert result["failed"] and "timed out after" in result["msg"]
    assert "DaemonSet nvidia-device-plugin-daemonset: 1/2 pods ready" in result["msg"]
    assert result["diagnosis"][0] == "ClusterPolicy cluster-policy: state notReady"


def test_absent(env, capsys):
    assert run(base(env, state="absent"), capsys)["action"] == "absent"
    run(base(env), capsys)
    planned = run(base(env, state="absent"), capsys, check=True)
    assert planned["changed"] and env.state()["release"] is not None
    removed = run(base(env, state="absent"), capsys)
    assert removed["changed"] and removed["action"] == "uninstalled" and env.state()["release"] is None


def test_ready_waits_for_operands_rolled_out(env, capsys):
    env.k8s.objects["/apis/apps/v1/namespaces/gpu-operator/daemonsets"] = {"items": [
        {"metadata": {"name": "nvidia-device-plugin-daemonset", "generation": 3},
         "status": {"observedGeneration": 2, "desiredNumberScheduled": 2, "numberReady": 2}}]}
    env.k8s.objects["/api/v1/namespaces/gpu-operator/pods"] = {"items": []}
    result = run(base(env, wait_timeout=0), capsys)
    assert result["failed"] and "ready, but DaemonSet nvidia-device-plugin-daemonset: generation 3 not observed yet" in result["msg"]
    assert "DaemonSet nvidia-device-plugin-daemonset: generation 3 not observed yet" in result["diagnosis"]
