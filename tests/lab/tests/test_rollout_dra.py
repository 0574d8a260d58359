"""playbooks/rollout.yml with a node on NVIDIA's DRA driver (issue 22): moving a node from the device plugin
to DRA is a rollout (drain, switch, wait for its ResourceSlices, uncordon); a MIG change on a DRA node
restarts its kubelet plugin, which reads the GPUs only when it starts; a re-run changes nothing; the node
moves back to the device plugin the same way.

Two A100-40GB hosts + the virtual cluster (rollout_lab); site.yml installs the operator and lays out
all-1g.5gb everywhere; the lab's stand-in of NVIDIA's DRA chart is installed next.
"""

from __future__ import annotations

import os
import re

import pytest
import yaml

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_devices import published_devices
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_io import RESOURCE_SLICE
from gpulab import hosts
from labtools import REPO, run_module
from rollout_lab import _helm, flat, start_lab

pytestmark = pytest.mark.lab_hosts

CHART = os.path.join(REPO, "tests", "lab", "charts", "nvidia-dra-driver-gpu-standin")
DRA_VARS = {"dra_driver_chart_ref": CHART, "dra_driver_chart_version": "25.12.0", "dra_driver_repo_url": "",
            "dra_driver_helm_binary": _helm(), "dra_driver_wait_interval": 0.5}


def on_backend(lab, backend):
    """flt-0 on ``backend`` (its host variable gpufleet_gpu_backend), in the lab's extra inventory."""
    with open(lab.extra_inventory, encoding="utf-8") as handle:
        inventory = yaml.safe_load(handle)
    inventory["all"]["hosts"]["flt-0"]["gpufleet_gpu_backend"] = backend
    with open(lab.extra_inventory, "w", encoding="utf-8") as handle:
        yaml.safe_dump(inventory, handle)


def plugin_uid(lab, node="flt-0"):
    pods = lab.k8s.list("Pod", namespace="nvidia-dra-driver-gpu", label_selector="nvidia-dra-driver-gpu-component=kubelet-plugin",
                        field_selector="spec.nodeName=%s" % node)
    return pods[0]["metadata"]["uid"] if pods else None


def profiles(lab, node="flt-0"):
    return sorted(profile for _kind, profile, _parent in published_devices(lab.k8s.list(RESOURCE_SLICE), node))


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    lab = start_lab(str(tmp_path_factory.mktemp("dralab")))
    try:
        site = lab.play("site.yml", mig_config="all-1g.5gb")
        assert site.returncode == 0, flat(site.stdout + site.stderr)[-4000:]
        installed = run_module("gpu_dra_driver", {"chart_ref": CHART, "chart_version": "25.12.0", "helm_binary": _helm(),
                                                  "kubeconfig": lab.kubeconfig, "wait": False}, lab.dir)
        assert installed["action"] == "installed", installed
        on_backend(lab, "dra")
        lab.move = lab.play("rollout.yml", mig_config="all-1g.5gb", **DRA_VARS)
        lab.move_profiles, lab.move_uid, lab.move_node = profiles(lab), plugin_uid(lab), lab.node("flt-0")
        lab.change = lab.play("rollout.yml", mig_config="all-balanced", **DRA_VARS)
        lab.change_profiles, lab.change_uid = profiles(lab), plugin_uid(lab)
        lab.rerun = lab.play("rollout.yml", mig_config="all-balanced", **DRA_VARS)
        lab.rerun_uid = plugin_uid(lab)
        on_backend(lab, "device-plugin")
        lab.back = lab.play("rollout.yml", mig_config="all-balanced", gpufleet_dra_manage=True, **DRA_VARS)
        yield lab
    finally:
        hosts.down(lab.dir)


def test_moving_a_node_to_dra_is_a_rollout(fleet):
    output = flat(fleet.move.stdout + fleet.move.stderr)
    assert fleet.move.returncode == 0, output[-4000:]
    assert re.search(r"Drain the node \(cordon, annotate, evict\)\] \*+ [^*]*changed: \[flt-0", output), output[-4000:]
    assert re.search(r"Put the node on its backend and wait until it publishes its devices\] \*+ [^*]*changed: \[flt-0",
                     output), output[-4000:]
    assert fleet.move_profiles == ["1g.5gb"] * 7  # the layout site.yml made, published once the plugin started
    assert fleet.move_uid is not None
    assert fleet.move_node == {"unschedulable": False, "annotation": None}


def test_a_mig_change_on_a_dra_node_restarts_its_kubelet_plugin(fleet):
    output = flat(fleet.change.stdout + fleet.change.stderr)
    assert fleet.change.returncode == 0, output[-4000:]
    assert "Restart the DRA kubelet plugin so that it publishes the new MIG devices" in output
    assert fleet.change_uid not in (None, fleet.move_uid)
    assert fleet.change_profiles == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]


def test_a_rerun_restarts_nothing(fleet):
    output = flat(fleet.rerun.stdout + fleet.rerun.stderr)
    assert fleet.rerun.returncode == 0, output[-4000:]
    assert fleet.rerun_uid == fleet.change_uid
    assert "changed=0" in output


def test_the_node_moves_back_to_the_device_plugin(fleet):
    output = flat(fleet.back.stdout + fleet.back.stderr)
    assert fleet.back.returncode == 0, output[-4000:]
    labels = fleet.k8s.get("Node", "flt-0")["metadata"]["labels"]
    assert "gpufleet.sharing/gpu-backend" not in labels and labels["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert plugin_uid(fleet) is None
    assert fleet.node("flt-0") == {"unschedulable": False, "annotation": None}
