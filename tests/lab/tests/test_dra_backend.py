"""gpu_dra_driver and the DRA kubelet plugin restart against the lab cluster: real helm installs the lab's
stand-in of NVIDIA's chart (tests/lab/charts/nvidia-dra-driver-gpu-standin, v25.12.0 values), the lab's
kubelet plugin program publishes ResourceSlices from the host's GPU state and re-reads it only when it
restarts. "Nothing changed" is the store's cluster-wide resourceVersion."""

from __future__ import annotations

import os

import pytest

from gpulab import gpustate
from labtools import REPO, ensure_collection_path, run_module, serve_lab, wait_until

from dra_lab import mig_layout

CHART = os.path.join(REPO, "tests", "lab", "charts", "nvidia-dra-driver-gpu-standin")
OPERATOR_CHART = os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin")
NS = "nvidia-dra-driver-gpu"
SELECTOR = "nvidia-dra-driver-gpu-component=kubelet-plugin"

ensure_collection_path()


class Lab:
    def __init__(self, tmp_path, helm_binary):
        self.dir = str(tmp_path / "lab")
        os.makedirs(self.dir)
        self.tmp = str(tmp_path)
        self.server, self.state_files = serve_lab(self.dir, [("gpu-a", "A100-40GB", 1), ("gpu-b", "H100-80GB", 1)])
        self.store = self.server.store
        home = tmp_path / "helm-home"
        self.env = {"HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
                    "HELM_DATA_HOME": str(home / "data")}
        self.base = {"chart_ref": CHART, "chart_version": "25.12.0", "helm_binary": helm_binary,
                     "kubeconfig": self.server.kubeconfig, "wait_timeout": 60, "wait_interval": 0.3}

    def operator(self):
        """The GPU Operator first, as on a real cluster: its feature discovery labels the GPU nodes (the kubelet
        plugin's node affinity) and its device plugin runs on every GPU node until a node is put on DRA."""
        result = self.run("gpu_operator", {"chart_ref": OPERATOR_CHART, "helm_binary": self.base["helm_binary"],
                                           "kubeconfig": self.server.kubeconfig, "mig_strategy": "mixed",
                                           "mig_manager_enabled": False, "driver_enabled": False,
                                           "wait_timeout": 120, "wait_interval": 0.5})
        assert not result.get("failed"), result
        return self

    def run(self, module, args, check=False, env=None):
        return run_module(module, args, self.tmp, check_mode=check, env=dict(self.env, **(env or {})))

    def driver(self, check=False, **extra):
        return self.run("gpu_dra_driver", dict(self.base, **extra), check=check)

    def plugin_pod(self, node):
        pods = [p for p in self.store.items("v1/pods", field_selector="spec.nodeName=%s" % node)
                if (p["metadata"].get("labels") or {}).get(SELECTOR.split("=", maxsplit=1)[0]) == "kubelet-plugin"]
        return pods[0] if pods else None

    def gpus(self, node):
        """The host's GPUs as gpu_facts reports them (uuid, MIG mode and instances' profiles)."""
        state = gpustate.load(self.state_files[node])
        return [{"uuid": gpu.uuid, "mig": {"current": bool(gpu.mig_current), "instances": [
            {"profile": ci.profile} for _gi, ci in gpu.mig_devices()]}} for gpu in state.gpus]


@pytest.fixture
def lab(tmp_path, helm_binary):
    running = Lab(tmp_path, helm_binary)
    running.operator()
    yield running
    running.server.stop()


def test_install_on_one_node_is_idempotent_and_check_mode_changes_nothing(lab):
    planned = lab.driver(check=True, dra_nodes=["gpu-a"], device_plugin_nodes=["gpu-b"])
    assert planned["changed"] and planned["action"] == "installed", planned
    rv = lab.store.resource_version()
    assert lab.driver(check=True, dra_nodes=["gpu-a"])["changed"] and lab.store.resource_version() == rv

    done = lab.driver(dra_nodes=["gpu-a"], device_plugin_nodes=["gpu-b"], expected_gpus={"gpu-a": lab.gpus("gpu-a")})
    assert done["changed"] and done["action"] == "installed" and done["nodes_switched"] == ["gpu-a"], done
    assert lab.plugin_pod("gpu-a") is not None and lab.plugin_pod("gpu-b") is None
    assert not [p for p in lab.store.items("v1/pods", field_selector="spec.nodeName=gpu-a")
                if (p["metadata"].get("labels") or {}).get("app") == "nvidia-device-plugin-daemonset"]
    labels = lab.store.get("v1/nodes", None, "gpu-a")["metadata"]["labels"]
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "false" and labels["gpufleet.sharing/gpu-backend"] == "dra"

    rv = lab.store.resource_version()
    again = lab.driver(dra_nodes=["gpu-a"], device_plugin_nodes=["gpu-b"], expected_gpus={"gpu-a": lab.gpus("gpu-a")})
    assert not again["changed"] and again["action"] == "unchanged", again
    assert lab.store.resource_version() == rv


def test_a_cluster_without_resource_v1_is_refused_and_nothing_changes(tmp_path, helm_binary, monkeypatch):
    monkeypatch.setenv("GPULAB_KUBERNETES_VERSION", "1.33.5")
    old = Lab(tmp_path, helm_binary)
    try:
        rv = old.store.resource_version()
        result = old.driver(dra_nodes=["gpu-a"])
        assert result["failed"] and result["msg"].startswith("DRA cannot be used here, nothing was changed: ")
        assert "Kubernetes v1.33.5-gpulab is too old for DRA: 1.34 or newer is required" in result["msg"]
        assert "does not serve resource.k8s.io/v1" in result["msg"]
        assert old.store.resource_version() == rv
        assert "nvidia.com/gpu.deploy.device-plugin" not in (old.store.get("v1/nodes", None, "gpu-a")["metadata"].get("labels") or {})
    finally:
        old.server.stop()


def test_the_kubelet_plugin_misses_a_later_mig_layout_until_it_is_restarted(tmp_path, helm_binary):
    lab = Lab(tmp_path, helm_binary)
    try:
        _mig_after_start(lab)
    finally:
        lab.server.stop()


def _mig_after_start(lab):
    mig_layout(lab.state_files["gpu-a"], {0: {"3g.20gb": 1}})  # MIG mode on before the operands (no GPU reset later)
    lab.operator()
    lab.driver(dra_nodes=["gpu-a"], expected_gpus={"gpu-a": lab.gpus("gpu-a")})
    mig_layout(lab.state_files["gpu-a"], {0: {"1g.5gb": 2, "3g.20gb": 1}})
    stale = lab.run("gpu_dra_driver", dict(lab.base, state="nodes", dra_nodes=["gpu-a"], wait_timeout=2,
                                           expected_gpus={"gpu-a": lab.gpus("gpu-a")}))
    assert stale["failed"] and "ResourceSlices: " in stale["waiting"]["gpu-a"], stale
    assert "MIG 1g.5gb on GPU" in stale["waiting"]["gpu-a"] and "2 planned, 0 published" in stale["waiting"]["gpu-a"]

    old_uid = lab.plugin_pod("gpu-a")["metadata"]["uid"]
    restarted = lab.run("node_maintenance", {"node": "gpu-a", "state": "restart_pods", "namespace": NS,
                                             "pod_selectors": [SELECTOR], "timeout": 60,
                                             "kubeconfig": lab.server.kubeconfig})
    assert restarted["changed"], restarted
    assert wait_until("a new plugin pod", lambda: (lab.plugin_pod("gpu-a") or {"metadata": {}})["metadata"].get("uid")
                      not in (None, old_uid))
    fresh = lab.run("gpu_dra_driver", dict(lab.base, state="nodes", dra_nodes=["gpu-a"],
                                           expected_gpus={"gpu-a": lab.gpus("gpu-a")}))
    assert not fresh.get("failed") and not fresh["changed"], fresh
