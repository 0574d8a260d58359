"""End to end through the lab's HTTPS API server with the `kubernetes` client: operator install,
MIG manager, time-slicing of MIG devices, scheduling and `nvidia-smi -L` in a pod."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from gpulab import gpustate
from gpulab.cluster import server

FAST_ENV = {
    "GPULAB_RESYNC_SECONDS": "0.3", "GPULAB_OPERAND_START_DELAY": "0.1", "GPULAB_POD_START_DELAY": "0.05",
    "GPULAB_POD_STOP_DELAY": "0.05", "GPULAB_DEFAULT_RUNTIME": "0.1", "GPULAB_MIG_APPLY_DELAY": "0.05",
}

MIG_SHARING = """version: v1
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/mig-1g.10gb
      replicas: 2
"""


def wait_for(what: str, probe: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = probe()
        except ApiException as exc:
            last = exc
        if last and not isinstance(last, ApiException):
            return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("e2e"))
    state = os.path.join(lab_dir, "gpu-h100.json")
    gpustate.create(state, "gpu-h100", [("H100-80GB", 1)])
    saved = {key: os.environ.get(key) for key in FAST_ENV}
    os.environ.update(FAST_ENV)
    try:
        running = server.serve_in_thread(lab_dir, [{"name": "gpu-h100", "state_file": state}], controllers=True)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    running.state_file = state
    yield running
    running.stop()


@pytest.fixture(scope="module")
def api(lab):
    return config.new_client_from_config(config_file=lab.kubeconfig)


def test_operator_mig_and_pods_through_the_api(lab, api):
    core, custom, apps = client.CoreV1Api(api), client.CustomObjectsApi(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": "gpu-operator"}})
    core.create_namespaced_config_map("gpu-operator", {"metadata": {"name": "sharing"}, "data": {"mig": MIG_SHARING}})
    custom.create_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", {
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
        "spec": {"mig": {"strategy": "mixed"}, "devicePlugin": {"config": {"name": "sharing", "default": "mig"}}}})

    def policy_state():
        return (custom.get_cluster_custom_object("nvidia.com", "v1", "clusterpolicies", "cluster-policy").get("status") or {}).get("state")
    wait_for("ClusterPolicy ready", lambda: policy_state() == "ready")
    plugin_ds = apps.read_namespaced_daemon_set("nvidia-device-plugin-daemonset", "gpu-operator")
    assert plugin_ds.status.number_ready == plugin_ds.status.desired_number_scheduled == 1
    pods = core.list_namespaced_pod("gpu-operator", label_selector="app=nvidia-device-plugin-daemonset").items
    assert len(pods) == 1 and pods[0].spec.node_name == "gpu-h100"

    core.patch_node("gpu-h100", {"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}})
    wait_for("MIG success", lambda: core.read_node("gpu-h100").metadata.labels.get("nvidia.com/mig.config.state") == "success"
             and core.read_node("gpu-h100").status.allocatable.get("nvidia.com/mig-2g.20gb") == "1", timeout=20)
    allocatable = core.read_node("gpu-h100").status.allocatable
    assert allocatable["nvidia.com/mig-1g.10gb"] == "4"  # 2 devices x 2 replicas (docs/reference/specs.md §10)
    assert allocatable["nvidia.com/mig-3g.40gb"] == "1"
    labels = core.read_node("gpu-h100").metadata.labels
    assert labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"
    assert labels["nvidia.com/mig-1g.10gb.replicas"] == "2"
    assert labels["nvidia.com/mig-2g.20gb.replicas"] == "1"

    core.create_namespaced_pod("default", {
        "metadata": {"name": "verify-2g"},
        "spec": {"restartPolicy": "Never", "containers": [{
            "name": "smi", "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04", "command": ["nvidia-smi", "-L"],
            "resources": {"limits": {"nvidia.com/mig-2g.20gb": "1"}}}]}})
    wait_for("Succeeded", lambda: core.read_namespaced_pod("verify-2g", "default").status.phase == "Succeeded")
    log = core.read_namespaced_pod_log("verify-2g", "default")
    gpu = gpustate.load(lab.state_file).gpus[0]
    mig = next(ci.uuid for gi in gpu.gpu_instances if gi.profile == "2g.20gb" for ci in gi.compute_instances)
    assert log == f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {gpu.uuid})\n  MIG 2g.20gb     Device  0: (UUID: {mig})\n"

    core.create_namespaced_pod("default", {
        "metadata": {"name": "too-big"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "1d"],
                                 "resources": {"limits": {"nvidia.com/mig-1g.10gb": "5"}}}]}})
    events = wait_for("FailedScheduling", lambda: [
        e for e in core.list_namespaced_event("default", field_selector="involvedObject.name=too-big").items
        if e.reason == "FailedScheduling"])
    assert events[0].message.startswith("0/1 nodes are available: 1 Insufficient nvidia.com/mig-1g.10gb.")
    assert core.read_namespaced_pod("too-big", "default").status.phase == "Pending"
