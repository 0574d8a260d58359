"""The stand-in chart of NVIDIA's DRA driver (tests/lab/charts/nvidia-dra-driver-gpu-standin,
written from deployments/helm/nvidia-dra-driver-gpu at v25.12.0) installed with the real helm into
the lab: its refusals, DeviceClasses, the kubelet plugin DaemonSet publishing slices, and
`kubectl rollout restart` making the plugin publish a MIG partition made after it started."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from prerequisites import missing_prerequisite

from gpulab import gpustate, tools
from gpulab.cluster import faults, server
from gpulab.cluster.dra import api as dra_api

from dra_lab import mig_layout

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CHART = os.path.join(REPO_ROOT, "tests", "lab", "charts", "nvidia-dra-driver-gpu-standin")
NS = "nvidia-dra-driver-gpu"
FAST_ENV = {"GPULAB_RESYNC_SECONDS": "0.3", "GPULAB_OPERAND_START_DELAY": "0.1", "GPULAB_POD_START_DELAY": "0.05",
            "GPULAB_POD_STOP_DELAY": "0.05", "GPULAB_DEFAULT_RUNTIME": "0.1"}


def _until(what, probe, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


@pytest.fixture
def lab(tmp_path, monkeypatch):
    for key, value in FAST_ENV.items():
        monkeypatch.setenv(key, value)
    state = str(tmp_path / "gpu-a.json")
    gpustate.create(state, "gpu-a", [("H100-80GB", 1)])
    mig_layout(state, {0: {"1g.10gb": 1}})
    running = server.serve_in_thread(str(tmp_path / "lab"), [
        {"name": "gpu-a", "state_file": state, "labels": {"nvidia.com/gpu.present": "true"}},
        {"name": "cpu-only"}], controllers=True, fault_registry=faults.FaultRegistry())
    running.state_file = state
    yield running
    running.stop()


@pytest.fixture
def cli(lab, tmp_path):
    try:
        helm_binary = tools.ensure_helm(os.path.join(REPO_ROOT, ".cache"))
    except tools.ToolError as exc:
        missing_prerequisite("helm unavailable: %s" % exc)
    kubectl_binary = tools.ensure_kubectl()
    env = dict(os.environ, KUBECONFIG=lab.kubeconfig, HELM_CACHE_HOME=str(tmp_path / "hc"),
               HELM_CONFIG_HOME=str(tmp_path / "hcfg"), HELM_DATA_HOME=str(tmp_path / "hd"))

    def run(tool, *args):
        binary = helm_binary if tool == "helm" else kubectl_binary
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, env=env, check=False)
    return run


def _slice_devices(lab):
    return sorted(d["name"] for s in lab.store.items(dra_api.RESOURCESLICES) for d in s["spec"]["devices"])


def test_chart_refuses_gpu_resources_without_the_override(cli):
    refused = cli("helm", "install", "dra", CHART, "-n", NS, "--create-namespace")
    assert refused.returncode != 0
    assert "cannot be deployed alongside the standard GPU device plugin" in refused.stderr
    assert "gpuResourcesEnabledOverride=true" in refused.stderr
    default_ns = cli("helm", "install", "dra", CHART, "-n", "default", "--set", "gpuResourcesEnabledOverride=true")
    assert default_ns.returncode != 0 and "allowDefaultNamespace" in default_ns.stderr


def test_chart_deploys_the_plugin_and_a_rollout_restart_republishes(lab, cli):
    installed = cli("helm", "install", "dra", CHART, "-n", NS, "--create-namespace",
                    "--set", "gpuResourcesEnabledOverride=true", "--set", "resources.computeDomains.enabled=false",
                    "--set", "featureGates.TimeSlicingSettings=true", "--set", "imagePullSecrets[0].name=regcred")
    assert installed.returncode == 0, installed.stderr
    classes = {c["metadata"]["name"]: c for c in lab.store.items(dra_api.DEVICECLASSES)}
    assert set(classes) == {"gpu.nvidia.com", "mig.nvidia.com"}
    assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    ds = lab.store.get("apps/v1/daemonsets", NS, "nvidia-dra-driver-gpu-kubelet-plugin")
    pod_spec = ds["spec"]["template"]["spec"]
    assert [c["name"] for c in pod_spec["containers"]] == ["gpus"]
    assert pod_spec["containers"][0]["image"] == "nvcr.io/nvidia/k8s-dra-driver-gpu:v25.12.0"
    assert {"name": "FEATURE_GATES", "value": "TimeSlicingSettings=true,"} in pod_spec["containers"][0]["env"]
    assert pod_spec["imagePullSecrets"] == [{"name": "regcred"}]
    with pytest.raises(Exception):
        lab.store.get("apps/v1/deployments", NS, "nvidia-dra-driver-gpu-controller")  # ComputeDomains off
    before = _until("the slice", lambda: _slice_devices(lab))
    pods = lab.store.items("v1/pods", NS)
    assert [p["spec"]["nodeName"] for p in pods] == ["gpu-a"]  # the affinity keeps it off cpu-only
    mig_layout(lab.state_file, {0: {"1g.10gb": 2}})
    time.sleep(0.5)
    assert _slice_devices(lab) == before
    restarted = cli("kubectl", "rollout", "restart", "daemonset/nvidia-dra-driver-gpu-kubelet-plugin", "-n", NS)
    assert restarted.returncode == 0, restarted.stderr
    after = _until("the republished slice", lambda: len(_slice_devices(lab)) == 2 and _slice_devices(lab))
    assert set(before) < set(after)
    listed = json.loads(cli("kubectl", "get", "resourceslices", "-o", "json").stdout)
    assert listed["items"][0]["spec"]["nodeName"] == "gpu-a"
