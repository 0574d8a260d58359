"""MPS replica changes (issue 11 part 2): the MPS control daemon sets its per-client limits when it
starts (docs/reference/specs.md §9.6), so a changed replica count is in force only after gpu_sharing
restarts the node's MPS control daemon too, not only the device plugin and GFD."""

from __future__ import annotations

import re
from typing import Optional

import pytest

from labtools import ensure_collection_path, run_module, wait_until
from test_cluster_modules_sharing import install_operator, start_lab

ensure_collection_path()

from ansible_collections.gpufleet.sharing.plugins.module_utils.k8s._k8s import K8sClient  # noqa: E402

MPS_DS = "nvidia-device-plugin-mps-control-daemon"
NODE_GPUS = {"mps-1": [{"model": "H200", "count": 1, "product": "NVIDIA H200"}]}


def mps(replicas: int):
    return [{"name": "notebooks-mps", "strategy": "mps", "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}],
             "nodes": ["mps-1"]}]


@pytest.fixture
def lab(tmp_path):
    running = start_lab(str(tmp_path), [("mps-1", "H200", 1)])
    running.tmp = str(tmp_path)
    try:
        install_operator(running)
        yield running
    finally:
        running.stop()


def daemon_percentage(k8s: K8sClient) -> Optional[int]:
    """The default active thread percentage the running MPS control daemon on mps-1 set at start."""
    pods = [p for p in k8s.list("Pod", namespace="gpu-operator", label_selector="app=" + MPS_DS)
            if p["spec"].get("nodeName") == "mps-1" and not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"]
    if len(pods) != 1:
        return None
    found = re.findall(r"set_default_active_thread_percentage (\d+)", k8s.pod_log(pods[0]["metadata"]["name"], "gpu-operator"))
    return int(found[-1]) if found else None


def test_mps_replica_change_restarts_the_mps_control_daemon(lab):
    k8s = K8sClient.connect({"kubeconfig": lab.kubeconfig})
    args = {"kubeconfig": lab.kubeconfig, "node_gpus": NODE_GPUS, "wait_timeout": 60, "wait_interval": 0.5}
    first = run_module("gpu_sharing", dict(args, configs=mps(3)), lab.tmp)
    assert not first.get("failed"), first["msg"]
    wait_until("MPS daemon with 3 replicas", lambda: daemon_percentage(k8s) == 33, timeout=60)
    changed = run_module("gpu_sharing", dict(args, configs=mps(4)), lab.tmp)
    assert not changed.get("failed"), changed["msg"]
    assert changed["configmap"]["changed_keys"] == ["notebooks-mps"]
    wait_until("the MPS control daemon runs with the limits of 4 replicas (not 3)", lambda: daemon_percentage(k8s) == 25,
               timeout=30)
    assert any(name.startswith(MPS_DS) for name in changed["restarted"]["mps-1"]), changed["restarted"]
