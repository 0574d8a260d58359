"""gpu_dra_driver against the lab with the charts of each upstream line (issue 42): a fresh install of the renamed
chart dra-driver-nvidia-gpu at 0.5.0 (the release GPU Operator v26.7.0 deploys) and at 0.4.1, and the upgrade
25.12.0 -> 0.5.0 that kubernetes-sigs/dra-driver-nvidia-gpu docs/upgrade.md (v0.4.1) describes: nameOverride on
the first upgrade so that the objects keep their names, no way back. The GPU node carries the GPU Operator's
nvidia.com/gpu:NoSchedule taint, which the new chart's kubelet plugin tolerates by default."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from dra_lab import mig_layout
from labtools import REPO, wait_until

from test_dra_backend import Lab

NEW_CHART = os.path.join(REPO, "tests", "lab", "charts", "dra-driver-nvidia-gpu-standin")
OLD_CHART = os.path.join(REPO, "tests", "lab", "charts", "nvidia-dra-driver-gpu-standin")
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.fixture
def lab(tmp_path, helm_binary):
    running = Lab(tmp_path, helm_binary)
    running.operator()
    node = running.store.get("v1/nodes", None, "gpu-a")
    node.setdefault("spec", {})["taints"] = [GPU_TAINT]
    running.store.update("v1/nodes", node)
    yield running
    running.server.stop()


def _daemonsets(lab):
    return sorted(ds["metadata"]["name"] for ds in lab.store.items("apps/v1/daemonsets", "nvidia-dra-driver-gpu"))


def _packaged(lab, version):
    out = os.path.join(lab.tmp, "pkg")
    subprocess.run([lab.base["helm_binary"], "package", NEW_CHART, "--version", version, "--app-version", version,
                    "-d", out], check=True, capture_output=True, env=dict(os.environ, **lab.env))
    return os.path.join(out, "dra-driver-nvidia-gpu-%s.tgz" % version)


@pytest.mark.parametrize("version", ["0.5.0", "0.4.1"])
def test_a_fresh_install_of_the_renamed_chart_runs_on_the_tainted_node(lab, version):
    chart = NEW_CHART if version == "0.5.0" else _packaged(lab, version)
    done = lab.driver(chart_ref=chart, chart_version=version, dra_nodes=["gpu-a"], device_plugin_nodes=["gpu-b"],
                      expected_gpus={"gpu-a": lab.gpus("gpu-a")})
    assert not done.get("failed") and done["action"] == "installed", done
    assert done["kubelet_plugin_selector"] == "dra-driver-nvidia-gpu-component=kubelet-plugin"
    assert "tolerations" not in done["release_values"]["kubeletPlugin"]  # the chart's nvidia.com/gpu toleration is kept
    assert _daemonsets(lab) == ["dra-driver-nvidia-gpu-kubelet-plugin"]
    pods = lab.store.items("v1/pods", "nvidia-dra-driver-gpu", field_selector="spec.nodeName=gpu-a")
    assert [p["spec"]["containers"][0]["image"] for p in pods] == [
        "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v%s" % version]
    again = lab.driver(chart_ref=chart, chart_version=version, dra_nodes=["gpu-a"], device_plugin_nodes=["gpu-b"],
                       expected_gpus={"gpu-a": lab.gpus("gpu-a")})
    assert not again["changed"] and again["action"] == "unchanged", again


def test_upgrade_from_25_12_to_0_5_keeps_the_objects_and_has_no_way_back(lab):
    toleration = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    first = lab.driver(chart_ref=OLD_CHART, chart_version="25.12.0", dra_nodes=["gpu-a"], tolerations=toleration,
                       expected_gpus={"gpu-a": lab.gpus("gpu-a")})
    assert not first.get("failed"), first
    assert _daemonsets(lab) == ["nvidia-dra-driver-gpu-kubelet-plugin"]
    upgraded = lab.driver(chart_ref=NEW_CHART, chart_version="0.5.0", dra_nodes=["gpu-a"], tolerations=toleration,
                          expected_gpus={"gpu-a": lab.gpus("gpu-a")})
    assert not upgraded.get("failed") and upgraded["action"] == "upgraded", upgraded
    assert upgraded["release_values"]["nameOverride"] == "nvidia-dra-driver-gpu"
    assert upgraded["kubelet_plugin_selector"] == "nvidia-dra-driver-gpu-component=kubelet-plugin"
    assert _daemonsets(lab) == ["nvidia-dra-driver-gpu-kubelet-plugin"]  # upgraded in place, no duplicate
    pod = lab.plugin_pod("gpu-a")
    assert pod["spec"]["containers"][0]["image"].endswith("dra-driver-nvidia-gpu:v0.5.0")
    again = lab.driver(chart_ref=NEW_CHART, chart_version="0.5.0", dra_nodes=["gpu-a"], tolerations=toleration)
    assert again["action"] == "unchanged", again
    back = lab.driver(chart_ref=OLD_CHART, chart_version="25.12.0", dra_nodes=["gpu-a"], tolerations=toleration)
    assert back["failed"] and "chart downgrade from 0.5.0 (installed) to 25.12.0 (asked) is refused" in back["msg"]


def test_the_driver_root_follows_the_operator_driver_container(lab):
    """The operator's driver container installs the driver under /run/nvidia/driver: the kubelet plugin needs
    nvidiaDriverRoot there, else its init container waits forever (hack/kubelet-plugin-prestart.sh)."""
    lab.run("gpu_operator", {"chart_ref": os.path.join(REPO, "tests", "lab", "charts", "gpu-operator-standin"),
                             "helm_binary": lab.base["helm_binary"], "kubeconfig": lab.server.kubeconfig,
                             "mig_strategy": "mixed", "mig_manager_enabled": False, "driver_enabled": True,
                             "wait_timeout": 120, "wait_interval": 0.5})
    stuck = lab.driver(chart_ref=NEW_CHART, chart_version="0.5.0", dra_nodes=["gpu-a"], wait_timeout=3)
    assert stuck["failed"] and stuck["waiting"] == {"gpu-a": "no Ready DRA kubelet plugin pod"}, stuck
    done = lab.driver(chart_ref=NEW_CHART, chart_version="0.5.0", dra_nodes=["gpu-a"], driver_root="/run/nvidia/driver")
    assert not done.get("failed") and done["release_values"]["nvidiaDriverRoot"] == "/run/nvidia/driver", done


def test_the_role_restart_selectors_restart_the_new_charts_plugin(tmp_path, helm_binary):
    """After a MIG change the rollout restarts the kubelet plugin by the role's dra_driver_kubelet_plugin_selectors
    (roles/dra/tasks/rollout_node.yml): on a fresh 0.5.0 install its pods carry dra-driver-nvidia-gpu-component."""
    with open(os.path.join(REPO, "roles", "dra", "defaults", "main.yml"), encoding="utf-8") as handle:
        selectors = yaml.safe_load(handle)["dra_driver_kubelet_plugin_selectors"]
    lab = Lab(tmp_path, helm_binary)
    try:
        mig_layout(lab.state_files["gpu-a"], {0: {"3g.20gb": 1}})  # MIG mode on before the operands
        lab.operator()
        done = lab.driver(chart_ref=NEW_CHART, chart_version="0.5.0", dra_nodes=["gpu-a"],
                          expected_gpus={"gpu-a": lab.gpus("gpu-a")})
        assert not done.get("failed"), done
        mig_layout(lab.state_files["gpu-a"], {0: {"1g.5gb": 2, "3g.20gb": 1}})

        def plugin_uid():
            pods = lab.store.items("v1/pods", "nvidia-dra-driver-gpu", field_selector="spec.nodeName=gpu-a")
            return [p["metadata"]["uid"] for p in pods if not p["metadata"].get("deletionTimestamp")]
        old = plugin_uid()
        restarted = lab.run("node_maintenance", {"node": "gpu-a", "state": "restart_pods", "namespace": "nvidia-dra-driver-gpu",
                                                 "pod_selectors": selectors, "timeout": 60,
                                                 "kubeconfig": lab.server.kubeconfig})
        assert restarted["changed"] and len(restarted["restarted"]) == 1, restarted
        wait_until("a new plugin pod", lambda: plugin_uid() and plugin_uid() != old)
        fresh = lab.run("gpu_dra_driver", dict(lab.base, state="nodes", dra_nodes=["gpu-a"],
                                               expected_gpus={"gpu-a": lab.gpus("gpu-a")}))
        assert not fresh.get("failed") and not fresh["changed"], fresh
    finally:
        lab.server.stop()
