"""Issue 38 on a DRA node: a MIG change on one GPU evicts only the pods whose ResourceClaims hold a device of
that GPU (gpufleet_mig_drain_scope: gpu, gpufleet_gpu_backend: dra).

A host with two H100s on the lab's stand-in of NVIDIA's DRA driver (test_rollout_dra.py); two pods of a
ReplicaSet, each with a claim on one whole GPU (DeviceClass gpu.nvidia.com). The inventory changes GPU 1
only. The rollout reads the ResourceClaims' allocation (status.allocation.devices.results, reservedFor) and
the node's ResourceSlices (device attribute uuid / parentUUID), evicts the pod on GPU 1, applies the
layout, restarts the kubelet plugin and ends with the node schedulable and publishing one whole GPU plus
GPU 1's seven MIG devices, while the pod on GPU 0 keeps running: same uid, no restart.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_devices import published_devices
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._dra_io import RESOURCE_SLICE
from gpulab import gpustate
from labtools import run_module, wait_until
from rollout_lab import WORK_NS, _helm, flat
from test_rollout_dra import CHART, DRA_VARS, on_backend
from test_rollout_gpu_scope import MIG_CONFIGS, create_trainer, running_pod, two_gpu_lab

pytestmark = pytest.mark.lab_hosts

RESOURCE_API = "resource.k8s.io/v1"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    with two_gpu_lab(str(tmp_path_factory.mktemp("dragpuscopelab"))) as lab:
        installed = run_module("gpu_dra_driver", {"chart_ref": CHART, "chart_version": "25.12.0", "helm_binary": _helm(),
                                                  "kubeconfig": lab.kubeconfig, "wait": False}, lab.dir)
        assert installed["action"] == "installed", installed
        on_backend(lab, "dra")
        moved = lab.play("rollout.yml", mig_config="two-whole", mig_configs=MIG_CONFIGS, **DRA_VARS)
        assert moved.returncode == 0, flat(moved.stdout + moved.stderr)[-4000:]
        yield lab


def start_trainer(lab, name):
    """A pod of the ReplicaSet with a claim (from a template) on one whole GPU."""
    lab.k8s.ensure_namespace(WORK_NS)
    if lab.k8s.get("ResourceClaimTemplate", "one-gpu", WORK_NS) is None:
        lab.k8s.create({"apiVersion": RESOURCE_API, "kind": "ResourceClaimTemplate",
                        "metadata": {"name": "one-gpu", "namespace": WORK_NS},
                        "spec": {"spec": {"devices": {"requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}})
    # no nodeName: the scheduler allocates the claim and places the pod
    create_trainer(lab, name, {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                               "resources": {"claims": [{"name": "gpu"}]}})
    try:
        return wait_until(name + " running", lambda: running_pod(lab, name), 30)
    except AssertionError as exc:
        raise AssertionError("%s: %s; claims %s" % (exc, lab.k8s.get("Pod", name, WORK_NS).get("status"),
                                                    [c.get("status") for c in lab.k8s.list("ResourceClaim", WORK_NS)])) from exc


def published(lab):
    """The node's devices as its ResourceSlices list them: "gpu" or the MIG profile."""
    return sorted(profile or kind for kind, profile, _parent in published_devices(lab.k8s.list(RESOURCE_SLICE), "flt-0"))


def test_one_gpus_change_evicts_only_the_pod_whose_claim_holds_it(fleet):
    assert published(fleet) == ["gpu", "gpu"], published(fleet)
    pods = {name: start_trainer(fleet, name) for name in ("trainer-a", "trainer-b")}
    uuids = [gpu.uuid for gpu in sorted(gpustate.load(fleet.hosts["flt-0"]["state_file"]).gpus, key=lambda g: g.index)]
    on_gpu = {}
    for name, pod in pods.items():
        device = pod["metadata"]["annotations"]["lab.gpufleet.io/allocated-devices"].split("=")[1]
        on_gpu[uuids.index(device)] = pod
    assert sorted(on_gpu) == [0, 1], on_gpu
    kept, moved = on_gpu[0], on_gpu[1]
    extra = dict(mig_config="gpu1-split", mig_configs=MIG_CONFIGS, gpufleet_mig_drain_scope="gpu", **DRA_VARS)

    check = subprocess.run(fleet.argv("rollout.yml", extra, None) + ["--check"], capture_output=True, text=True,  # noqa: S603
                           check=False, env=fleet.env(), timeout=600)
    check_out = flat(check.stdout + check.stderr)
    assert check.returncode == 0, check_out[-4000:]
    said = re.findall(r"flt-0: drain scope .{0,600}", check_out)
    assert "drain scope gpu (only GPU(s) 1 change)" in check_out and moved["metadata"]["uid"] in check_out, said
    assert kept["metadata"]["uid"] not in check_out.split("drain scope gpu", 1)[1].split("keeps", 1)[0]
    assert all(fleet.k8s.get("Pod", p["metadata"]["name"], WORK_NS) for p in pods.values())  # check mode evicted nothing

    result = fleet.play("rollout.yml", **extra)
    output = flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-6000:]
    assert "drain scope gpu (only GPU(s) 1 change)" in output, output[-6000:]
    assert moved["metadata"]["uid"] in output  # the message names the evicted pod's UID and its claim's device

    now = fleet.k8s.get("Pod", kept["metadata"]["name"], WORK_NS)
    assert now is not None and now["metadata"]["uid"] == kept["metadata"]["uid"]
    assert now["status"]["phase"] == "Running" and not now["metadata"].get("deletionTimestamp")
    assert [c.get("restartCount", 0) for c in now["status"]["containerStatuses"]] == [0]
    assert fleet.k8s.get("Pod", moved["metadata"]["name"], WORK_NS) is None
    assert published(fleet) == ["1g.10gb"] * 7 + ["gpu"], published(fleet)
    assert fleet.node("flt-0") == {"unschedulable": False, "annotation": None}
